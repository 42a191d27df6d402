"""The two pipelines on a small treebank, in one run: the hashed pipeline (``arboreal
train`` with its defaults) and the neural one (``--scorer neural``, its tagger chosen on
dev between the network's classifiers and the linear tagger), each timed as a whole
command, each parsing the test split from raw text and from gold tokens, scored by
``arboreal.evaluation_ud``; then the rule of ``arboreal train --scorer auto`` (the
higher dev LAS, dev parsed from its words alone: ``models.pipeline.scores_from_words``)
applied to the two models.

    python benchmarks/small_treebank.py [--treebanks UD_Hungarian-Szeged ...]
        [--work-dir runs/small_treebank] [--no-write] [--from-results] [--note '...']
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
from pipeline import METRICS, run_treebank, split_path  # noqa: E402

DEFAULT_TREEBANKS = ["UD_Hungarian-Szeged"]
RUNS = (("hashed", []), ("neural", ["--scorer", "neural"]))


def dev_choice(treebank: str, work_dir: Path) -> dict:
    """Each model's dev (UAS, LAS) from its words, and the model meta's tagger choice."""
    from arboreal.io.conllu import read_conllu
    from arboreal.models import Parser
    from arboreal.models.pipeline import scores_from_words

    dev = read_conllu(split_path(treebank, "dev"))
    out = {}
    for name, _ in RUNS:
        model = Parser.load(work_dir / name / f"{treebank}.model")
        uas, las = scores_from_words(model, dev)
        out[name] = {"dev_uas": uas, "dev_las": las,
                     "tagger_choice": model.meta.get("tagger_choice"),
                     "size_mib": (work_dir / name / f"{treebank}.model").stat().st_size / 2**20}
    out["auto"] = max(("hashed", "neural"), key=lambda k: (out[k]["dev_las"], k == "hashed"))
    return out


def table(treebank: str, results: dict) -> str:
    first = results["hashed"]
    lines = [f"### {treebank} (test: {first['test_words']:,} words; train: "
             f"{first['train_words']:,})", "",
             "| F1 | " + " | ".join(f"{name}, {what}" for name, _ in RUNS
                                   for what in ("raw text", "gold tokens")) + " |",
             "|---|" + "---:|" * (2 * len(RUNS))]
    for m in METRICS:
        cells = []
        for name, _ in RUNS:
            r = results[name]
            cells.append(f"{r['arboreal_raw'][m]:.2f}")
            cells.append("" if m in ("Tokens", "Sentences", "Words")
                         else f"{r['arboreal_gold_tok'][m]:.2f}")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines.append("")
    choice = results["choice"]
    for name, _ in RUNS:
        r, c = results[name], choice[name]
        t, s = r["train"], r.get("training", {})
        line = (f"- {name}: `arboreal train` {t['wall'] / 60:.1f} min wall, "
                f"{t['cpu'] / 60:.1f} min CPU, {t['rss_mib']:,.0f} MiB peak; model "
                f"{c['size_mib']:.1f} MiB; dev from its words LAS {c['dev_las']:.2f}, UAS "
                f"{c['dev_uas']:.2f}; `arboreal parse --input text` (whole command) "
                f"{r['parse_raw']['words_per_s']:,.0f} words/s")
        if s.get("best_epoch") is not None:
            line += f"; best dev epoch {s.get('best_epoch')} of {s.get('epochs')}"
        tc = c.get("tagger_choice")
        if tc:
            line += (f"; tagger chosen on dev: {tc['chosen']} (mean dev accuracy over "
                     f"{', '.join(tc['columns'])}: network "
                     f"{sum(tc['scorer'].values()) / len(tc['scorer']):.2f}, linear "
                     f"{sum(tc['linear'].values()) / len(tc['linear']):.2f}; UPOS "
                     f"{tc['scorer']['upos']:.2f} vs {tc['linear']['upos']:.2f})")
        lines.append(line)
    ratio = results["neural"]["train"]["wall"] / results["hashed"]["train"]["wall"]
    lines.append(f"- neural training time / hashed: {ratio:.1f}x (wall)")
    lines.append(f"- `--scorer auto`'s rule on these two models: {choice['auto']}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--treebanks", nargs="+", default=DEFAULT_TREEBANKS)
    ap.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "small_treebank")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--from-results", action="store_true",
                    help="write the section from the work directory's results.json")
    ap.add_argument("--section", default="small_treebank")
    ap.add_argument("--note", default="")
    args = ap.parse_args(argv)
    started = utc_now()
    path = args.work_dir / "results.json"
    results: dict = json.loads(path.read_text()) if args.from_results else {}
    for treebank in ([] if args.from_results else args.treebanks):
        results[treebank] = {}
        for name, train_args in RUNS:
            work = args.work_dir / name
            r = run_treebank(treebank, work, None, train_args)
            r["training"] = training_summary(work / f"{treebank}.model")
            results[treebank][name] = r
            print(json.dumps({treebank: {name: {"raw LAS": r["arboreal_raw"]["LAS"],
                                                "train min": r["train"]["wall"] / 60}}}),
                  flush=True)
        results[treebank]["choice"] = dev_choice(treebank, args.work_dir)
        results[treebank]["run"] = {"started": started, "ended": utc_now()}
        args.work_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=1))
    argv = argv if argv is not None else sys.argv[1:]
    runs = "; ".join(f"{tb} {r['run']['started']} to {r['run']['ended']}"
                     for tb, r in results.items())
    report_tables(f"Runs: {runs}. UD 2.x splits of ../shared/data/ud; every word counted "
                  "(punctuation included); LAS on the universal part of DEPREL. Each pipeline "
                  "with every option at its default (hashed: tokenizer, tagger with 5-fold "
                  "jackknifing, first-order MIRA; neural: tokenizer, BiLSTM-biaffine network "
                  "with its tag classifiers, 40 epochs, patience 8, and the linear tagger "
                  "beside it, kept if its tags score higher on dev).",
                  [table(tb, r) for tb, r in results.items()], args.section,
                  "The two pipelines on a small treebank", "small_treebank.py", argv,
                  args.note, not args.no_write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
