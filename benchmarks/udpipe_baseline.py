"""UDPipe 1 (PyPI ``ufal.udpipe``) trained on a UD treebank with its default options,
then run on the test split from raw text and from gold tokenization, for the
``pipeline`` section of docs/benchmarks.md (benchmarks/pipeline.py reads its outputs).

UDPipe is a peer: it lives in the benchmark environment only (``pip install
ufal.udpipe==1.3.1.1`` there; MPL-2.0), never in arboreal's dependencies. Training uses
``Trainer.train("morphodita_parsito", train, heldout, "default", "default", "default")``,
the defaults of ``udpipe --train`` with the dev split as held-out data (the data arboreal
gets with ``--dev``). Outputs in OUT_DIR: ``TREEBANK.udpipe`` (the model),
``TREEBANK.raw.conllu`` (from the test text), ``TREEBANK.gold-tok.conllu`` (from the gold
tokens; UDPipe's tagger and parser only) and ``TREEBANK.json`` (training and processing
times).

    python benchmarks/udpipe_baseline.py --treebank UD_English-EWT --out-dir runs/udpipe
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UD = ROOT.parent / "shared" / "data" / "ud"


def split_path(treebank: str, split: str, ud: Path = UD) -> Path:
    [path] = sorted((ud / treebank).glob(f"*-ud-{split}.conllu"))
    return path


def raw_text(conllu: Path) -> str:
    """The test text as raw paragraphs: '# text' lines, a blank line at '# newpar' /
    '# newdoc' (the CoNLL 2018 shared task's input)."""
    paragraphs: list[list[str]] = []
    for line in conllu.read_text(encoding="utf-8").splitlines():
        if line.startswith(("# newpar", "# newdoc")) or not paragraphs:
            if not paragraphs or paragraphs[-1]:
                paragraphs.append([])
        if line.startswith("# text ="):
            paragraphs[-1].append(line.split("=", 1)[1].strip())
    return "\n\n".join(" ".join(p) for p in paragraphs if p) + "\n"


def blank_tags(conllu: Path) -> str:
    """The test file with LEMMA, UPOS, XPOS, FEATS, HEAD and DEPREL blanked (``_``):
    gold tokenization, nothing else given."""
    out = []
    for line in conllu.read_text(encoding="utf-8").splitlines():
        f = line.split("\t")
        if len(f) == 10 and f[0].isdigit():
            f[2:8] = ["_"] * 6
        out.append("\t".join(f))
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    import ufal.udpipe as udpipe

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--treebank", default="UD_English-EWT")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "runs" / "udpipe")
    args = ap.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)

    def read(path: Path):
        fmt = udpipe.InputFormat.newConlluInputFormat()
        fmt.setText(path.read_text(encoding="utf-8"))
        out = udpipe.Sentences()
        error = udpipe.ProcessingError()
        s = udpipe.Sentence()
        while fmt.nextSentence(s, error):
            out.push_back(s)
            s = udpipe.Sentence()
        if error.occurred():
            raise SystemExit(f"{path}: {error.message}")
        return out

    train, dev = read(split_path(args.treebank, "train")), read(split_path(args.treebank, "dev"))
    error = udpipe.ProcessingError()
    t0 = time.perf_counter()
    c0 = time.process_time()
    data = udpipe.Trainer.train("morphodita_parsito", train, dev, udpipe.Trainer.DEFAULT,
                                udpipe.Trainer.DEFAULT, udpipe.Trainer.DEFAULT, error)
    train_wall, train_cpu = time.perf_counter() - t0, time.process_time() - c0
    if error.occurred():
        raise SystemExit(f"UDPipe training failed: {error.message}")
    model_path = args.out_dir / f"{args.treebank}.udpipe"
    model_path.write_bytes(data if isinstance(data, bytes) else data.encode("latin-1"))
    model = udpipe.Model.load(str(model_path))
    if model is None:
        raise SystemExit(f"UDPipe could not load {model_path}")
    test = split_path(args.treebank, "test")
    times = {"train_wall_s": round(train_wall, 1), "train_cpu_s": round(train_cpu, 1)}
    for name, text, tokenizer in (("raw", raw_text(test), "tokenize"),
                                  ("gold-tok", blank_tags(test), "conllu")):
        pipe = udpipe.Pipeline(model, tokenizer, udpipe.Pipeline.DEFAULT,
                               udpipe.Pipeline.DEFAULT, "conllu")
        t0 = time.perf_counter()
        out = pipe.process(text, error)
        times[f"{name}_wall_s"] = round(time.perf_counter() - t0, 2)
        if error.occurred():
            raise SystemExit(f"UDPipe processing failed: {error.message}")
        (args.out_dir / f"{args.treebank}.{name}.conllu").write_text(out, encoding="utf-8")
    (args.out_dir / f"{args.treebank}.json").write_text(json.dumps(times, indent=1) + "\n")
    print(json.dumps(times), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
