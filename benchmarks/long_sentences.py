"""Very long sentences: time and peak memory of the whole ``arboreal parse`` command on
one sentence of n words, at orders 1, 2 and 3, and the first-order Eisner decoder alone.

    python benchmarks/long_sentences.py [--train TRAIN] [--source SOURCE] [--repeat 2]
        [--n1 1000 2000 5000] [--n23 1000 2000 5000] [--orders 1 2 3] [--workdir DIR]
        [--src DIR]

Models are trained by the command itself with the defaults of ``arboreal train``
(default features, 2^23 weights; ``--epochs 2``: accuracy does not matter here, the
sizes of the tables do) on TRAIN (default: the shipped EWT sample). A sentence of n
words is the words of SOURCE (default: the sample's test part) one after another,
with flat placeholder trees. For each (order, n): the fastest wall time and the
largest peak RSS of --repeat runs (``/usr/bin/time``), after one warm-up parse (numba's
cache). Prints a Markdown table. ``--src DIR`` parses with the package in DIR (the
``src`` folder of another checkout, e.g. an older commit's, put first on PYTHONPATH;
the models are trained with this checkout's code) and leaves out the in-process column.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"


def long_sentence_file(source: Path, n: int, path: Path) -> None:
    from arboreal.io import read_conllu

    rows = []
    for s in read_conllu(source):
        for k in range(1, len(s) + 1):
            rows.append((s.forms[k], s.lemmas[k], s.upos[k], s.xpos[k], s.feats[k]))
    rows = (rows * (n // len(rows) + 1))[:n]
    with open(path, "w", encoding="utf-8") as f:
        for j, (form, lemma, upos, xpos, feats) in enumerate(rows, 1):
            head, rel = (0, "root") if j == 1 else (1, "dep")
            f.write(f"{j}\t{form}\t{lemma}\t{upos}\t{xpos}\t{feats}\t{head}\t{rel}\t_\t_\n")
        f.write("\n")


def arboreal(*args: str, src: Path | None = None) -> list[str]:
    """The command ``arboreal ARGS`` (with the package in ``src`` when given)."""
    prefix = ["env", f"PYTHONPATH={src}"] if src else []
    return [*prefix, sys.executable, "-m", "arboreal", *args]


def timed(cmd: list[str]) -> tuple[float, int]:
    """(wall seconds, peak RSS in MiB) of one run of ``cmd``."""
    r = subprocess.run(["/usr/bin/time", "-f", "%e %M", *cmd], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{r.stderr}")
    wall, kib = r.stderr.strip().splitlines()[-1].split()
    return float(wall), int(kib) // 1024


def decoder_seconds(model_path: Path, sentence: Path, repeat: int) -> tuple[float, float]:
    """(seconds of eisner on the model's scores, of feature scoring), fastest of ``repeat``."""
    from arboreal.inference import eisner
    from arboreal.io import read_conllu
    from arboreal.models import load_model

    model = load_model(model_path)
    enc = model.features.encode(read_conllu(sentence))[0]
    eisner(np.random.default_rng(0).normal(size=(500, 500)))
    best_score = best_decode = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        S = model.features.arc_scores(enc, model.weights)
        best_score = min(best_score, time.perf_counter() - t)
        t = time.perf_counter()
        eisner(S)
        best_decode = min(best_decode, time.perf_counter() - t)
    return best_decode, best_score


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=Path, default=SAMPLE / "en_ewt-sample-train.conllu")
    ap.add_argument("--source", type=Path, default=SAMPLE / "en_ewt-sample-test.conllu")
    ap.add_argument("--n1", type=int, nargs="+", default=[1000, 2000, 5000])
    ap.add_argument("--n23", type=int, nargs="+", default=[1000, 2000, 5000])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--orders", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--src", type=Path, default=None)
    args = ap.parse_args()

    work = args.workdir or Path(tempfile.mkdtemp(prefix="long-sentences-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work directory: {work}", file=sys.stderr)
    lengths = sorted(set(args.n1) | set(args.n23))
    for n in lengths:
        long_sentence_file(args.source, n, work / f"long{n}.conllu")
    rows = []
    for order, ns in ((1, args.n1), (2, args.n23), (3, args.n23)):
        if order not in args.orders:
            continue
        model = work / f"order{order}.model"
        if not model.exists():
            subprocess.run(arboreal("train", str(args.train), "-o", str(model), "--order", str(order),
                                    "--epochs", "2", "--quiet"), check=True)
        out = work / "out.conllu"
        subprocess.run(arboreal("parse", str(model), str(work / f"long{lengths[0]}.conllu"), "-o",
                                str(out), src=args.src), check=True, capture_output=True)  # warm-up
        for n in ns:
            runs = [timed(arboreal("parse", str(model), str(work / f"long{n}.conllu"), "-o", str(out),
                                   src=args.src))
                    for _ in range(args.repeat)]
            extra = ""
            if order == 1 and args.src is None:
                decode, score = decoder_seconds(model, work / f"long{n}.conllu", args.repeat)
                extra = f"scoring {score:.2f} s, Eisner {decode:.2f} s"
            rows.append((order, n, min(w for w, _ in runs), max(m for _, m in runs), extra))
            print(f"order {order}, {n} words: {rows[-1][2]:.2f} s, {rows[-1][3]} MiB {extra}",
                  file=sys.stderr, flush=True)
    print(f"\n{os.uname().nodename}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"best of {args.repeat} runs (wall), largest peak RSS"
          + (f", package from {args.src}" if args.src else "") + "\n")
    print("| order | words | parse command (s) | peak RSS (MiB) | in-process, first order |")
    print("| --- | --- | --- | --- | --- |")
    for order, n, wall, mib, extra in rows:
        print(f"| {order} | {n} | {wall:.2f} | {mib} | {extra} |")


if __name__ == "__main__":
    main()
