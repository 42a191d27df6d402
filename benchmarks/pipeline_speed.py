"""Parse speed of trained pipelines, code before and after a change, same models, same run.

For each model ``WORK_DIR/TREEBANK.model`` of a benchmarks/pipeline.py run, times
``arboreal parse MODEL TEST.txt --input text`` (raw text, the whole command) and
``arboreal parse MODEL TEST.blank.conllu`` (gold tokens), both from that run's work
directory, once per round under each checkout given with ``--code`` (its ``src`` on
PYTHONPATH, one numba thread), the checkouts alternating within a round; the fastest
run of each counts, the median is shown beside it. Writes the ``pipeline_speed`` section
of docs/benchmarks.md (or ``--section``).

    python benchmarks/pipeline_speed.py --runs DIR[:TREEBANK] ... --code NAME=CHECKOUT ...
        [--rounds 3] [--no-write] [--section NAME] [--note TEXT]
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="+", required=True,
                    help="work directories of benchmarks/pipeline.py (DIR or DIR:TREEBANK; "
                         "default treebank UD_English-EWT)")
    ap.add_argument("--code", nargs="+", required=True, metavar="NAME=CHECKOUT")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--section", default="pipeline_speed",
                    help="the docs/benchmarks.md section to write")
    ap.add_argument("--note", default="")
    args = ap.parse_args(argv)
    codes = [tuple(c.split("=", 1)) for c in args.code]
    models = []
    for spec in args.runs:
        work, _, treebank = spec.partition(":")
        models.append((Path(work), treebank or "UD_English-EWT"))
    times: dict = {}   # (work dir, treebank, input kind, checkout) -> wall s of each round
    for _ in range(args.rounds):
        for work, tb in models:
            model = work / f"{tb}.model"
            inputs = {"raw text": [str(work / f"{tb}.test.txt"), "--input", "text"],
                      "gold tokens": [str(work / f"{tb}.test.blank.conllu")]}
            for kind, given in inputs.items():
                for name, checkout in codes:
                    env = dict(os.environ, PYTHONPATH=str(Path(checkout) / "src"),
                               NUMBA_NUM_THREADS="1")
                    t = timed([sys.executable, "-m", "arboreal", "parse", str(model), *given,
                               "-o", os.devnull], env=env)
                    key = (str(work), tb, kind, name)
                    times.setdefault(key, []).append(t["wall"])
                    print(key, f"{t['wall']:.2f} s (load {t['load']:.2f})", flush=True)
    names = [n for n, _ in codes]
    lines = ["| run | treebank | input | " + " | ".join(f"{n}: s (words/s)" for n in names)
             + (f" | {names[-1]} / {names[0]} time |" if len(names) > 1 else " |"),
             "|---|---|---|" + "---:|" * (len(names) + (len(names) > 1))]
    for work, tb in models:
        words = count_words(work / f"{tb}.gold-tok.conllu")
        for kind in ("raw text", "gold tokens"):
            secs = [min(times[(str(work), tb, kind, n)]) for n in names]
            medians = [float(np.median(times[(str(work), tb, kind, n)])) for n in names]
            cells = [f"{s:.2f} ({words / s:,.0f}); median {m:.2f}"
                     for s, m in zip(secs, medians)]
            ratio = [f"{secs[-1] / secs[0]:.2f}"] if len(names) > 1 else []
            lines.append(f"| {work.name} | {tb} | {kind} | " + " | ".join(cells + ratio) + " |")
    body = ("Whole `arboreal parse` commands (interpreter start, model load, tokenizing and "
            "tagging where the input needs them, parsing, writing to /dev/null), one numba "
            f"thread, fastest of {args.rounds} rounds (and their median: the machine's speed "
            "varies from run to run); the checkouts alternate within each "
            "round on the same model files (" + ", ".join(f"{n}: `{c}`" for n, c in codes)
            + ").\n\n" + "\n".join(lines) + (f"\n\n{args.note}" if args.note else ""))
    print(body)
    if not args.no_write:
        from _report import write_section

        cmd = ("python benchmarks/pipeline_speed.py --runs " + " ".join(args.runs) + " --code "
               + " ".join(args.code) + f" --rounds {args.rounds}"
               + (f" --section {args.section}" if args.section != "pipeline_speed" else "")
               + (" --note ..." if args.note else ""))
        write_section(args.section, "Parse speed of trained pipelines, before and after",
                      cmd, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
