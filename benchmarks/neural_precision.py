"""A neural model's parsing in float32 and in bfloat16: whole-command speed and accuracy.

For one trained neural model (e.g. benchmarks/neural.py's ``WORK/neural/TREEBANK.model``)
and its treebank's test split: ``arboreal parse MODEL TEST.txt --input text`` (raw text,
its ``# text`` lines) and ``arboreal parse MODEL TEST.blank.conllu`` (gold tokens, tags,
lemmas and trees blanked), whole commands timed, under ``ARBOREAL_PRECISION=float32`` and
``=bfloat16`` alternately in each round (one numba thread, as the other parse
benchmarks); the fastest run of each counts, the median is shown beside it. Both
outputs of the last round are scored by ``arboreal.evaluation_ud`` (CoNLL 2018 F1).
Writes the ``neural_precision`` section of docs/benchmarks.md.

    python benchmarks/neural_precision.py --model MODEL [--treebank UD_English-EWT]
        [--rounds 3] [--work-dir runs/neural_precision] [--no-write] [--note TEXT]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from first_order import count_words, timed  # noqa: E402
from udpipe_baseline import blank_tags, raw_text, split_path  # noqa: E402

PRECISIONS = ("float32", "bfloat16")
METRICS = ("UPOS", "XPOS", "UFeats", "Lemmas", "UAS", "LAS")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--treebank", default="UD_English-EWT")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "neural_precision")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--note", default="")
    args = ap.parse_args(argv)
    from arboreal.evaluation_ud import evaluate_ud

    test = split_path(args.treebank, "test")
    work = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    inputs = {"raw text": (work / "test.txt", ["--input", "text"]),
              "gold tokens": (work / "test.blank.conllu", [])}
    inputs["raw text"][0].write_text(raw_text(test), encoding="utf-8")
    inputs["gold tokens"][0].write_text(blank_tags(test), encoding="utf-8")
    words = count_words(test)
    runs: dict = {}            # (input, precision) -> [timed dicts]
    outputs: dict = {}
    for _ in range(args.rounds):
        for kind, (path, extra) in inputs.items():
            for precision in PRECISIONS:
                out = work / f"{kind.replace(' ', '-')}.{precision}.conllu"
                env = dict(os.environ, ARBOREAL_PRECISION=precision, NUMBA_NUM_THREADS="1")
                t = timed([sys.executable, "-m", "arboreal", "parse", str(args.model),
                           str(path), *extra, "-o", str(out)], env=env)
                runs.setdefault((kind, precision), []).append(t)
                outputs[kind, precision] = out
                print(kind, precision, f"{t['wall']:.2f} s", flush=True)
    scores = {key: evaluate_ud(str(test), str(out)) for key, out in outputs.items()}
    lines = [f"Model `{args.model.name}`, {args.treebank} test ({words:,} words); "
             f"{args.rounds} rounds, the precisions alternating within each.", "",
             "| input | precision | fastest run | words/s | median run | peak memory | "
             + " | ".join(METRICS) + " |",
             "|---|---|---:|---:|---:|---:|" + "---:|" * len(METRICS)]
    for kind in inputs:
        for precision in PRECISIONS:
            walls = [t["wall"] for t in runs[kind, precision]]
            rss = max(t["rss_mib"] for t in runs[kind, precision])
            f1 = scores[kind, precision]
            lines.append(f"| {kind} | {precision} | {min(walls):.2f} s | "
                         f"{words / min(walls):,.0f} | {np.median(walls):.2f} s | "
                         f"{rss:,.0f} MiB | "
                         + " | ".join(f"{100 * f1[m]['f1']:.2f}" for m in METRICS) + " |")
    lines.append("")
    for kind in inputs:
        ratio = min(t["wall"] for t in runs[kind, "float32"]) / \
            min(t["wall"] for t in runs[kind, "bfloat16"])
        lines.append(f"- {kind}: float32's fastest run / bfloat16's fastest run = "
                     f"{ratio:.2f}")
    lines.append("- load average during the runs (mean of before and after each): "
                 + ", ".join(f"{t['load']:.2f}" for v in runs.values() for t in v))
    body = "\n".join(lines) + "\n" + (f"\n{args.note}\n" if args.note else "")
    print(body)
    if not args.no_write:
        from _report import command_line, write_section

        write_section("neural_precision", "Neural parsing in float32 and bfloat16",
                      command_line("neural_precision.py", argv if argv is not None
                                   else sys.argv[1:], args.note), body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
