"""Raw text to trees: the whole pipeline (tokenizer, tagger, lemmatizer, parser) trained
by ``arboreal train`` and scored with the CoNLL 2018 shared-task method.

For each treebank: ``arboreal train TRAIN --dev DEV -o MODEL`` (whole command timed),
then the test split parsed twice with ``arboreal parse`` (whole commands timed): from
**raw text** (its ``# text`` lines, a paragraph at each ``# newpar`` / ``# newdoc``; the
shared task's input) and from **gold tokenization** with every tag, lemma and tree
blanked. Both outputs are scored by ``arboreal.evaluation_ud`` (equal to the official
``conll18_ud_eval.py``; F1 of Tokens, Sentences, Words, UPOS, XPOS, UFeats, AllTags,
Lemmas, UAS, LAS, CLAS, MLAS, BLEX). The tagger's own speed is measured in process on
one core (best of three runs over the gold-tokenized test words). When
``--udpipe-dir`` holds the outputs of benchmarks/udpipe_baseline.py for a treebank,
UDPipe 1's figures are scored the same way and shown beside arboreal's.

    python benchmarks/pipeline.py [--treebanks UD_English-EWT ...] [--work-dir DIR]
        [--udpipe-dir DIR] [--rescore] [--no-write]

``--against DIR``: the work directory of another run over the same treebanks (e.g. the
same pipeline before a change, or with other ``--train-args``); the section then
compares the two parsers' outputs from gold tokens word by word (LAS and UAS, words
only one of them gets right, exact sign test) and their LAS from raw text.

``--rescore`` trains and parses nothing: it reads the previous run's ``results.json``
from the work directory (arboreal's figures as measured then) and adds UDPipe's
outputs from ``--udpipe-dir`` (scored now), for a peer whose training finished after
arboreal's run; the section then says so.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from first_order import count_words, timed  # noqa: E402
from orders import heads_and_labels, sign_test  # noqa: E402
from udpipe_baseline import UD, blank_tags, raw_text, split_path  # noqa: E402

METRICS = ("Tokens", "Sentences", "Words", "UPOS", "XPOS", "UFeats", "AllTags", "Lemmas",
           "UAS", "LAS", "CLAS", "MLAS", "BLEX")
DEFAULT_TREEBANKS = ["UD_English-EWT", "UD_Greek-GDT", "UD_Turkish-IMST"]


def tagger_speed(model_path: Path, blank: Path, repeats: int = 3) -> float | None:
    """Words per second of the model's tagger alone (in process, best of ``repeats``);
    None for a model that tags jointly with parsing (the neural scorer), which has none."""
    from arboreal.io.conllu import read_conllu
    from arboreal.models import load_model

    model = load_model(model_path)
    sentences = read_conllu(blank, allow_missing_heads=True, check_trees=False)
    words = sum(len(s) for s in sentences)
    if model.tagger is None:
        return None
    model.tagger.tag(sentences[:50])            # compile / warm up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        model.tagger.tag(sentences)
        best = min(best, time.perf_counter() - t0)
    return words / best


def scores(gold: Path, system: Path) -> dict[str, float]:
    from arboreal.evaluation_ud import evaluate_ud

    result = evaluate_ud(str(gold), str(system))
    return {m: 100.0 * result[m]["f1"] for m in METRICS}


def recorded_training(model: Path) -> dict:
    """The training time a model file records of itself (setup + epochs, wall seconds),
    for a model reused rather than trained again; CPU time and memory are not recorded."""
    from arboreal.io.model_file import load_model_file

    meta, _ = load_model_file(model)
    node = meta if "seconds" in meta else meta.get("parser", {})
    seconds = node.get("seconds") or {}
    return {"wall": float(sum(seconds.values())), "cpu": float("nan"),
            "rss_mib": float("nan"), "from_model_file": True}


def run_treebank(treebank: str, work: Path, udpipe_dir: Path | None,
                 train_args: list[str] = (), reuse_model: bool = False) -> dict:
    """Train on ``treebank``'s train split (dev for early stopping) with ``train_args``,
    parse its test split from raw text and from gold tokens, and score both. With
    ``reuse_model`` a model already in ``work`` is parsed with instead of trained again,
    and its training time is the one its file records."""
    train, dev, test = (split_path(treebank, s) for s in ("train", "dev", "test"))
    work.mkdir(parents=True, exist_ok=True)
    model = work / f"{treebank}.model"
    raw = work / f"{treebank}.test.txt"
    raw.write_text(raw_text(test), encoding="utf-8")
    blank = work / f"{treebank}.test.blank.conllu"
    blank.write_text(blank_tags(test), encoding="utf-8")
    arboreal = [sys.executable, "-m", "arboreal"]
    if reuse_model and model.exists():
        t_train = recorded_training(model)
    else:
        t_train = timed(arboreal + ["train", str(train), "--dev", str(dev), "-o", str(model),
                                    "--quiet", *train_args])
    words = count_words(test)
    out_raw, out_gold = work / f"{treebank}.raw.conllu", work / f"{treebank}.gold-tok.conllu"
    t_raw = timed(arboreal + ["parse", str(model), str(raw), "--input", "text", "-o",
                              str(out_raw)])
    t_gold = timed(arboreal + ["parse", str(model), str(blank), "-o", str(out_gold)])
    result = {"treebank": treebank, "train_words": count_words(train), "test_words": words,
              "train": {k: t_train[k] for k in ("wall", "cpu", "rss_mib", "from_model_file")
                        if k in t_train},
              "parse_raw": {"wall": t_raw["wall"], "words_per_s": words / t_raw["wall"],
                            "rss_mib": t_raw["rss_mib"]},
              "parse_gold_tok": {"wall": t_gold["wall"], "words_per_s": words / t_gold["wall"]},
              "tagger_words_per_s": tagger_speed(model, blank),
              "pruning": pruning_choice(model),
              "arboreal_raw": scores(test, out_raw),
              "arboreal_gold_tok": scores(test, out_gold)}
    result.update(udpipe_scores(treebank, udpipe_dir))
    return result


def udpipe_scores(treebank: str, udpipe_dir: Path | None) -> dict:
    """UDPipe 1's outputs for ``treebank`` in ``udpipe_dir`` (benchmarks/udpipe_baseline.py),
    scored like arboreal's, and its times; {} without them."""
    out: dict = {}
    if udpipe_dir is None:
        return out
    test = split_path(treebank, "test")
    for name in ("raw", "gold-tok"):
        path = udpipe_dir / f"{treebank}.{name}.conllu"
        if path.exists():
            out[f"udpipe_{name.replace('-', '_')}"] = scores(test, path)
    info = udpipe_dir / f"{treebank}.json"
    if info.exists():
        out["udpipe_times"] = json.loads(info.read_text())
    return out


def pruning_choice(model: Path) -> dict | None:
    """The higher-order pruner's choice stored in a model file (None at order 1 or when
    nothing was chosen), with the choice for parsing under ``parse`` when one was made
    apart (``parse_prune_recall``)."""
    from arboreal.io.model_file import load_model_file

    meta, _ = load_model_file(model)
    pruning = (meta.get("training") or {}).get("higher_order") or {}
    choice = pruning.get("temperature_choice")
    if not choice:
        return None
    return {**choice, **({"parse": pruning["parse_choice"]} if "parse_choice" in pruning
                         else {})}


def _right_words(gold: Path, system: Path) -> tuple[np.ndarray, np.ndarray]:
    """(head right, head and universal label right) of every word of a gold-tokenized
    output, in the gold file's order."""
    gold_h, gold_l = heads_and_labels(gold)
    sys_h, sys_l = heads_and_labels(system)
    head = gold_h == sys_h
    return head, head & (gold_l == sys_l)


def comparison(results: list[dict], work: Path, against: Path) -> str:
    """Word-by-word comparison of this run's gold-token parses with another run's."""
    before = {r["treebank"]: r for r in json.loads((against / "results.json").read_text())}
    lines = [f"Against the run in `{against.relative_to(ROOT) if against.is_absolute() else against}`"
             " (gold tokens; words = the test split's syntactic words):", "",
             "| treebank | metric | this run | that run | difference | words only this run "
             "gets right | words only that run gets right | sign test p |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        tb = r["treebank"]
        if tb not in before:
            continue
        gold = split_path(tb, "test")
        here = _right_words(gold, work / f"{tb}.gold-tok.conllu")
        there = _right_words(gold, against / f"{tb}.gold-tok.conllu")
        for name, a, b in (("UAS", here[0], there[0]), ("LAS", here[1], there[1])):
            only_a, only_b, p = sign_test(a, b)
            lines.append(f"| {tb} | {name} | {100 * a.mean():.2f} | {100 * b.mean():.2f} | "
                         f"{100 * (a.mean() - b.mean()):+.2f} | {only_a} | {only_b} | {p:.2g} |")
        raw_a, raw_b = r["arboreal_raw"]["LAS"], before[tb]["arboreal_raw"]["LAS"]
        lines.append(f"| {tb} | LAS from raw text (F1) | {raw_a:.2f} | {raw_b:.2f} | "
                     f"{raw_a - raw_b:+.2f} | | | |")
    return "\n".join(lines)


def table(results: list[dict]) -> str:
    lines = []
    for r in results:
        cols = [("arboreal, raw text", "arboreal_raw"),
                ("UDPipe 1, raw text", "udpipe_raw"),
                ("arboreal, gold tokens", "arboreal_gold_tok"),
                ("UDPipe 1, gold tokens", "udpipe_gold_tok")]
        cols = [(title, key) for title, key in cols if key in r]
        lines.append(f"### {r['treebank']} (test: {r['test_words']:,} words; train: "
                     f"{r['train_words']:,})\n")
        lines.append("| F1 | " + " | ".join(t for t, _ in cols) + " |")
        lines.append("|---|" + "---:|" * len(cols))
        for m in METRICS:
            if all(m in ("Tokens", "Sentences", "Words") and "gold" in k for _, k in cols):
                continue
            lines.append(f"| {m} | " + " | ".join(f"{r[k][m]:.2f}" for _, k in cols) + " |")
        t = r["train"]
        lines.append("")
        lines.append(f"- `arboreal train` (tokenizer, tagger with 5-fold jackknifing, parser): "
                     f"{t['wall']:.0f} s wall, {t['cpu']:.0f} s CPU, {t['rss_mib']:.0f} MiB peak")
        lines.append(f"- `arboreal parse --input text`, whole command: {r['parse_raw']['wall']:.2f} s"
                     f" = {r['parse_raw']['words_per_s']:,.0f} words/s "
                     f"({r['parse_raw']['rss_mib']:.0f} MiB peak); from gold tokens: "
                     f"{r['parse_gold_tok']['words_per_s']:,.0f} words/s")
        lines.append(f"- tagger alone (UPOS, XPOS, FEATS, lemmas), one core, in process: "
                     f"{r['tagger_words_per_s']:,.0f} words/s")
        choice = r.get("pruning")
        for what, c in (("higher-order pruning chosen on dev", choice),
                        ("pruning for parsing chosen on dev", (choice or {}).get("parse"))):
            if c:
                lines.append(f"- {what}: temperature {c['temperature']:g}, at most "
                             f"{c['max_heads']} heads per word, {100 * c['gold_heads_kept']:.2f}%"
                             f" of the dev gold heads kept (target {100 * c['target']:.2f}%), "
                             f"{c['kept_heads_per_word']:.2f} candidate heads per word")
        if "udpipe_times" in r:
            u = r["udpipe_times"]
            lines.append(f"- UDPipe 1 training (benchmarks/udpipe_baseline.py): "
                         f"{u['train_wall_s']:.0f} s wall; raw test text processed in "
                         f"{u['raw_wall_s']:.2f} s (in process)")
        lines.append("")
    return "\n".join(lines)


def _udpipe_version() -> str:
    """The installed ufal.udpipe's version (the peer whose outputs are scored)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ufal.udpipe")
    except PackageNotFoundError:
        return "(not installed here)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--treebanks", nargs="+", default=DEFAULT_TREEBANKS)
    ap.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "pipeline")
    ap.add_argument("--udpipe-dir", type=Path, default=None)
    ap.add_argument("--rescore", action="store_true",
                    help="reuse the work directory's results.json; only score UDPipe's outputs")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--against", type=Path, default=None, metavar="DIR",
                    help="another run's work directory to compare the parses with")
    ap.add_argument("--train-args", default="",
                    help="more options of arboreal train, e.g. '--order 2' (one string)")
    ap.add_argument("--section", default="pipeline",
                    help="the docs/benchmarks.md section to write (another one for a variant)")
    ap.add_argument("--note", default="", help="text appended to the section")
    ap.add_argument("--title", default=None, help="the section's heading (default: 'Raw "
                                                  "text to trees' and the training options)")
    args = ap.parse_args(argv)
    train_args = shlex.split(args.train_args)
    if not UD.exists():
        raise SystemExit(f"{UD} not found")
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    results = []
    if args.rescore:
        results = json.loads((args.work_dir / "results.json").read_text())
        for r in results:
            r.update(udpipe_scores(r["treebank"], args.udpipe_dir))
            model = args.work_dir / f"{r['treebank']}.model"
            if model.exists():
                r["pruning"] = pruning_choice(model)
    else:
        for tb in args.treebanks:
            r = run_treebank(tb, args.work_dir, args.udpipe_dir, train_args)
            print(json.dumps(r), flush=True)
            results.append(r)
    (args.work_dir / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    if not args.no_write:
        from _report import write_section

        body = (
            "Each treebank's pipeline trained by `arboreal train TRAIN --dev DEV"
            + (f" {args.train_args}" if train_args else "") + "` with its "
            "defaults" + (" otherwise" if train_args else "") + ", the test split parsed from raw text (its `# text` lines, paragraphs at "
            "`# newpar`/`# newdoc`) and from gold tokens with tags, lemmas and trees blanked; "
            "F1 by `arboreal.evaluation_ud` (the CoNLL 2018 shared-task method, equal to "
            "`conll18_ud_eval.py`). Commands run with `NUMBA_NUM_THREADS=1`. "
            + (f"UDPipe 1 columns: `ufal.udpipe` {_udpipe_version()} trained on the same files with its "
               "defaults (dev as held-out data) by `benchmarks/udpipe_baseline.py`, its outputs "
               "scored here by the same code"
               + (" (added with `--rescore` to arboreal's figures of the previous run, "
                  "whose training finished first)." if args.rescore else ".")
               if any("udpipe_raw" in r for r in results) else
               "No UDPipe 1 figures in this run (see `benchmarks/udpipe_baseline.py`).")
            + "\n\n" + table(results)
            + (f"\n\n{comparison(results, args.work_dir, args.against)}" if args.against else "")
            + (f"\n\n{args.note}" if args.note else ""))
        cmd = "python benchmarks/pipeline.py " + " ".join(
            (["--treebanks", *args.treebanks] if args.treebanks != DEFAULT_TREEBANKS else [])
            + (["--udpipe-dir", str(args.udpipe_dir)] if args.udpipe_dir else [])
            + (["--rescore"] if args.rescore else [])
            + ([f"--against {args.against}"] if args.against else [])
            + ([f"--work-dir {args.work_dir}"]
               if args.work_dir.resolve() != (ROOT / "runs" / "pipeline").resolve() else [])
            + ([f"--train-args='{args.train_args}'"] if train_args else [])
            + ([f"--section {args.section}"] if args.section != "pipeline" else [])
            + (["--note ..."] if args.note else []))
        write_section(args.section, args.title or "Raw text to trees"
                      + (f", arboreal train {args.train_args}" if train_args else ""),
                      cmd.strip() + (" --title ..." if args.title else ""), body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
