"""The neural pipeline beside the linear one, from raw text and from gold tokens.

For each treebank, in one run: ``arboreal train TRAIN --dev DEV`` with the defaults (the
linear pipeline: tokenizer, tagger with jackknifing, first-order MIRA parser) and
``arboreal train TRAIN --dev DEV --scorer neural [--embeddings VECTORS]`` (the tokenizer,
then the joint neural tagger and parser), each whole command timed (wall, CPU, peak
memory); then each model parses the test split from raw text and from gold tokens with
tags, lemmas and trees blanked (whole ``arboreal parse`` commands timed), scored by
``arboreal.evaluation_ud`` (the CoNLL 2018 shared-task method). The figures of the
pipelines are those of benchmarks/pipeline.py's ``run_treebank``.

    python benchmarks/neural.py [--treebanks UD_English-EWT ...] [--embeddings
        en=VECTORS ...] [--neural-args '...'] [--work-dir runs/neural] [--no-write]
        [--from-results]

``--embeddings LANG=VECTORS`` gives the vectors of the treebanks whose directory name
has that language (e.g. ``en`` for UD_English-EWT: the treebank files' prefix); a
treebank without vectors trains without them. How the vectors were made goes in
``--note``.

``--from-results`` trains and parses nothing: it writes the section from the work
directory's ``results.json`` of an earlier run (e.g. one run with ``--no-write``, whose
``--note`` on what else ran could only be written once it ended).
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

import pipeline  # noqa: E402
from pipeline import METRICS, run_treebank  # noqa: E402
from udpipe_baseline import UD, split_path  # noqa: E402

DEFAULT_TREEBANKS = ["UD_English-EWT", "UD_Turkish-IMST", "UD_Greek-GDT"]
#: the peers' published figures quoted beside ours (not measured here): test LAS F1 from
#: raw text, with the source
PUBLISHED = {"UD_English-EWT": [("Stanza 1.5.1 (UD 2.12), raw text LAS", 86.77,
                                 "stanza _pages/performance.md")]}


def _language(treebank: str) -> str:
    return split_path(treebank, "test").name.split("_")[0]


def _no_tagger_speed(model_path: Path, blank: Path, repeats: int = 3) -> float:
    """The tagger's own speed, for models with a separate tagger (NaN for a neural model,
    whose tags come with its parse)."""
    from arboreal.io.model_file import load_model_file

    meta, _ = load_model_file(model_path)
    if "tagger" not in meta:
        return float("nan")
    return _tagger_speed(model_path, blank, repeats)


_tagger_speed = pipeline.tagger_speed


def parser_record(model_path: Path) -> dict:
    """The part of a model file's metadata that holds the parser's training (its
    ``best_epoch``, ``history`` and ``training``; {} when the file holds none)."""
    from arboreal.io.model_file import load_model_file

    meta, _ = load_model_file(model_path)
    todo = [meta]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            if "best_epoch" in node and "history" in node:
                return node
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return {}


def training_summary(model_path: Path) -> dict:
    """The parser's training record in a model file: best epoch, epochs run, why
    training stopped and the words per batch ({} when the file holds none)."""
    node = parser_record(model_path)
    if not node:
        return {}
    training = node.get("training", {})
    training = training if isinstance(training, dict) else {}
    options = training.get("options", {})
    return {"best_epoch": node["best_epoch"], "epochs": len(node["history"]),
            "stopped": training.get("stopped"),
            "batch_words": options.get("batch_words") if isinstance(options, dict) else None}


def table(r: dict) -> str:
    lin, neu = r["linear"], r["neural"]
    cols = [("linear, raw text", lin["arboreal_raw"]), ("neural, raw text", neu["arboreal_raw"]),
            ("linear, gold tokens", lin["arboreal_gold_tok"]),
            ("neural, gold tokens", neu["arboreal_gold_tok"])]
    lines = [f"### {r['treebank']} (test: {lin['test_words']:,} words; train: "
             f"{lin['train_words']:,})", "",
             "| F1 | " + " | ".join(t for t, _ in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    for m in METRICS:
        cells = ["" if m in ("Tokens", "Sentences", "Words") and "gold" in t else f"{v[m]:.2f}"
                 for t, v in cols]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines.append("")
    for name, x in (("linear", lin), ("neural", neu)):
        t = x["train"]
        lines.append(f"- {name}: `arboreal train` {t['wall'] / 60:.1f} min wall, "
                     f"{t['cpu'] / 60:.1f} min CPU, {t['rss_mib']:,.0f} MiB peak; "
                     f"`arboreal parse --input text` (whole command) "
                     f"{x['parse_raw']['words_per_s']:,.0f} words/s, "
                     f"{x['parse_raw']['rss_mib']:,.0f} MiB peak; from gold tokens "
                     f"{x['parse_gold_tok']['words_per_s']:,.0f} words/s")
    if neu.get("training"):
        t = neu["training"]
        lines.append(f"- neural training: best dev epoch {t['best_epoch']} of {t['epochs']} run"
                     + (f" (stopped: {t['stopped']})" if t.get("stopped") else "")
                     + (f"; batches of {t['batch_words']} words" if t.get("batch_words")
                        else ""))
    d = neu["arboreal_raw"]["LAS"] - lin["arboreal_raw"]["LAS"]
    lines.append(f"- neural minus linear, raw-text LAS: {d:+.2f}")
    for name, value, source in PUBLISHED.get(r["treebank"], []):
        lines.append(f"- published, not measured here: {name} {value:.2f} ({source})")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--treebanks", nargs="+", default=DEFAULT_TREEBANKS)
    ap.add_argument("--embeddings", nargs="*", default=[], metavar="LANG=VECTORS")
    ap.add_argument("--neural-args", default="", help="more options of the neural training")
    ap.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "neural")
    ap.add_argument("--reuse-linear", action="store_true",
                    help="keep the linear results of an earlier run in the work directory")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--from-results", action="store_true",
                    help="write the section from the work directory's results.json; run nothing")
    ap.add_argument("--section", default="neural_pipeline")
    ap.add_argument("--note", default="")
    args = ap.parse_args(argv)
    if not UD.exists():
        raise SystemExit(f"{UD} not found")
    vectors = dict(e.split("=", 1) for e in args.embeddings)
    pipeline.tagger_speed = _no_tagger_speed
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    results_path = args.work_dir / "results.json"
    earlier = {r["treebank"]: r for r in json.loads(results_path.read_text())} \
        if args.reuse_linear and results_path.exists() else {}
    results = json.loads(results_path.read_text()) if args.from_results else []
    for tb in [] if args.from_results else args.treebanks:
        lang = _language(tb)
        linear = earlier[tb]["linear"] if tb in earlier else \
            run_treebank(tb, args.work_dir / "linear", None)
        neural_args = ["--scorer", "neural", *shlex.split(args.neural_args)]
        if lang in vectors:
            neural_args += ["--embeddings", vectors[lang]]
        neural = run_treebank(tb, args.work_dir / "neural", None, neural_args)
        r = {"treebank": tb, "linear": linear, "neural": neural, "neural_args": neural_args}
        print(json.dumps(r), flush=True)
        results.append(r)
        args.work_dir.mkdir(parents=True, exist_ok=True)
        results_path.write_text(json.dumps(results, indent=1) + "\n")
    for r in results:
        model = args.work_dir / "neural" / f"{r['treebank']}.model"
        if model.exists():
            r["neural"]["training"] = training_summary(model)
    if not results:
        raise SystemExit(f"no results in {results_path}")
    if not args.no_write:
        from _report import command_line, write_section

        body = ("Each treebank's linear pipeline (`arboreal train TRAIN --dev DEV`, the "
                "defaults) and neural pipeline (`arboreal train TRAIN --dev DEV --scorer "
                "neural`, with the options below) trained in the same run, each test split "
                "parsed from raw text (its `# text` lines) and from gold tokens with tags, "
                "lemmas and trees blanked; F1 by `arboreal.evaluation_ud` (the CoNLL 2018 "
                "shared-task method). Neural options per treebank: "
                + "; ".join(f"{r['treebank']}: `{' '.join(r['neural_args'])}`"
                            for r in results)
                + ".\n\n"
                + ("Written with `--from-results` from the results.json of the same command run "
                   "with `--no-write`.\n\n" if args.from_results else "")
                + "\n".join(table(r) for r in results)
                + (f"\n{args.note}" if args.note else ""))
        write_section(args.section, "Neural pipeline beside the linear one",
                      command_line("neural.py", argv if argv is not None
                                   else sys.argv[1:], args.note), body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
