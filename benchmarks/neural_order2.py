"""Second-order neural parts beside first order, in one run: the neural pipeline trained
with every option at its default, once as it is (``--scorer neural``) and once with
``--order 2`` (sibling and grandparent triaffine scores trained through second-order
inside-outside), each then parsing the test split from raw text and from gold tokens
(whole ``arboreal parse`` commands timed), scored by ``arboreal.evaluation_ud``.

    python benchmarks/neural_order2.py [--treebanks UD_Greek-GDT ...]
        [--work-dir runs/neural_order2] [--no-write] [--note '...']
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _report import report_tables, utc_now  # noqa: E402
from neural import training_summary  # noqa: E402
from pipeline import METRICS, run_treebank  # noqa: E402

DEFAULT_TREEBANKS = ["UD_English-EWT", "UD_Greek-GDT"]
RUNS = (("order 1", ["--scorer", "neural"]), ("order 2", ["--scorer", "neural", "--order", "2"]))


def table(treebank: str, results: dict) -> str:
    first = results["order 1"]
    lines = [f"### {treebank} (test: {first['test_words']:,} words; train: "
             f"{first['train_words']:,})", "",
             "| F1 | " + " | ".join(f"{name}, {what}" for name in results
                                   for what in ("raw text", "gold tokens")) + " |",
             "|---|" + "---:|" * (2 * len(results))]
    for m in METRICS:
        cells = []
        for r in results.values():
            cells.append(f"{r['arboreal_raw'][m]:.2f}")
            cells.append("" if m in ("Tokens", "Sentences", "Words")
                         else f"{r['arboreal_gold_tok'][m]:.2f}")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines.append("")
    for name, r in results.items():
        t, s = r["train"], r.get("training", {})
        lines.append(f"- {name}: `arboreal train` {t['wall'] / 60:.1f} min wall, "
                     f"{t['cpu'] / 60:.1f} min CPU, {t['rss_mib']:,.0f} MiB peak; best dev "
                     f"epoch {s.get('best_epoch')} of {s.get('epochs')}; `arboreal parse "
                     f"--input text` (whole command) {r['parse_raw']['words_per_s']:,.0f} "
                     f"words/s; from gold tokens {r['parse_gold_tok']['words_per_s']:,.0f} "
                     "words/s")
    if "order 2" in results:
        two = results["order 2"]
        for what, key in (("raw text", "arboreal_raw"), ("gold tokens", "arboreal_gold_tok")):
            lines.append(f"- order 2 minus order 1, {what}: LAS "
                         f"{two[key]['LAS'] - first[key]['LAS']:+.2f}, UAS "
                         f"{two[key]['UAS'] - first[key]['UAS']:+.2f}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--treebanks", nargs="+", default=DEFAULT_TREEBANKS)
    ap.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "neural_order2")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--section", default="neural_order2")
    ap.add_argument("--note", default="")
    args = ap.parse_args(argv)
    started = utc_now()
    results: dict = {}
    for treebank in args.treebanks:
        results[treebank] = {}
        for name, train_args in RUNS:
            work = args.work_dir / name.replace(" ", "")
            r = run_treebank(treebank, work, None, train_args)
            r["training"] = training_summary(work / f"{treebank}.model")
            results[treebank][name] = r
            args.work_dir.mkdir(parents=True, exist_ok=True)
            (args.work_dir / "results.json").write_text(json.dumps(results, indent=1))
            print(json.dumps({treebank: {name: {"raw LAS": r["arboreal_raw"]["LAS"],
                                                "gold LAS": r["arboreal_gold_tok"]["LAS"]}}}),
                  flush=True)
    argv = argv if argv is not None else sys.argv[1:]
    report_tables(f"Run {started} to {utc_now()}. UD 2.x splits of ../shared/data/ud; every "
                  "word counted (punctuation included); LAS on the universal part of DEPREL. "
                  "Both orders train with the same seed and every other option at its "
                  "default (40 epochs, patience 8 on dev LAS; order 2: `--decoder eisner`, "
                  "sibling and grandparent scorers of 100 units).",
                  [table(tb, r) for tb, r in results.items()], args.section,
                  "Second-order neural parts beside first order", "neural_order2.py", argv,
                  args.note, not args.no_write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
