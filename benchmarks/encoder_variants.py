"""How the neural scorer uses a pretrained transformer, compared on dev in one run: the
learned scalar mix of every hidden state against one fixed state, and a frozen encoder
against a fine-tuned one.

For each variant: ``arboreal train TRAIN --dev DEV --scorer neural --encoder ENCODER
--no-tokenizer --no-tagger --epochs E --patience E`` plus the variant's
``--scorer-option`` arguments, every other option at its default, one command each,
timed whole by ``/usr/bin/time``. TRAIN is the first ``--train-sentences`` sentences of
the treebank's train split (all of it with 0), so that a fine-tuned run fits in a
session on 2 cores; every variant trains on the same sentences for the same epochs.
From each command's log (benchmarks/neural_sizes.py's reader): the best dev epoch
(LAS, UAS, UPOS from gold tokens, the network's own tags), seconds per epoch, wall time
and peak memory.

    python benchmarks/encoder_variants.py [--encoder sentence-transformers/all-MiniLM-L6-v2]
        [--treebank UD_English-EWT] [--train-sentences 4000] [--epochs 10]
        [--variants mix layer3=encoder_layer=3 last=encoder_layer=6
                    fine-tuned=fine_tune=true]
        [--work-dir runs/encoder_variants] [--from-logs] [--no-write] [--note '...']

A variant is ``NAME`` or ``NAME=KEY=VALUE[,KEY=VALUE...]``: ``--scorer-option``
arguments, ``seed=K`` for ``--seed K`` (a second seed of a variant shows the noise).
``--from-logs`` reads the work directory's ``VARIANT.log`` files instead of training.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _report import report_tables, utc_now  # noqa: E402
from neural_sizes import RUN_COLUMNS, log_run_arguments, read_log, run_cells  # noqa: E402
from pipeline import split_path  # noqa: E402

DEFAULT_ENCODER = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_VARIANTS = ["mix", "layer3=encoder_layer=3", "last=encoder_layer=6",
                    "fine-tuned=fine_tune=true"]


def parse_variant(spec: str) -> tuple[str, list[str]]:
    """``NAME=K=V,K=V`` -> (NAME, ["K=V", "K=V"])."""
    name, _, options = spec.partition("=")
    return name, [o for o in options.split(",") if o]


def first_sentences(conllu: Path, count: int, out: Path) -> int:
    """Write the first ``count`` sentences of ``conllu`` (all with 0) to ``out``; return
    how many were written."""
    from arboreal.io.conllu import read_conllu, write_conllu

    sentences = read_conllu(conllu)
    sentences = sentences[:count] if count else sentences
    write_conllu(sentences, out)
    return len(sentences)


def train(name: str, options: list[str], train_file: Path, dev: Path, encoder: str,
          epochs: int, work: Path) -> Path:
    """Run one variant's training command; its log (output, then the time line) in work/."""
    log = work / f"{name}.log"
    cmd = ["/usr/bin/time", "-f", "WALL %e CPU %U MAXRSS %M", sys.executable, "-m",
           "arboreal", "train", str(train_file), "--dev", str(dev), "--scorer", "neural",
           "--encoder", encoder, "--no-tokenizer", "--no-tagger", "--epochs", str(epochs),
           "--patience", str(epochs), "-o", str(work / f"{name}.model")]
    for option in options:
        key, _, value = option.partition("=")
        cmd += ["--seed", value] if key == "seed" else ["--scorer-option", option]
    with open(log, "w", encoding="utf-8") as f:
        subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=True,
                       env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return log


def table(results: dict[str, dict], specs: dict[str, list[str]]) -> str:
    lines = ["| variant | options (`--scorer-option`, `--seed`) | " + RUN_COLUMNS,
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in results.items():
        options = ", ".join(f"`{o}`" for o in specs[name]) or "(defaults, seed 0)"
        lines.append(f"| {name} | {options} | " + run_cells(r))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--encoder", default=DEFAULT_ENCODER)
    ap.add_argument("--treebank", default="UD_English-EWT")
    ap.add_argument("--train-sentences", type=int, default=4000)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS)
    log_run_arguments(ap, "encoder_variants", "encoder_variants")
    args = ap.parse_args(argv)
    specs = dict(parse_variant(v) for v in args.variants)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    train_file = args.work_dir / "train.conllu"
    sentences = first_sentences(split_path(args.treebank, "train"), args.train_sentences,
                                train_file)
    started = utc_now()
    results = {}
    for name, options in specs.items():
        log = (args.work_dir / f"{name}.log" if args.from_logs else
               train(name, options, train_file, split_path(args.treebank, "dev"),
                     args.encoder, args.epochs, args.work_dir))
        results[name] = read_log(log)
    run = ("read from the logs of earlier runs (--from-logs)" if args.from_logs
           else f"{started} to {utc_now()}")
    report_tables(f"Runs: {run}. {args.treebank}: the first {sentences:,} training "
                  f"sentences, the whole dev split; encoder `{args.encoder}`; each variant "
                  f"`arboreal train --scorer neural --encoder ... --no-tokenizer --no-tagger "
                  f"--epochs {args.epochs} --patience {args.epochs}`, every other option at "
                  "its default, one after another; dev scores from gold tokens, the "
                  "network's own tags, as the training log reports them after each epoch. "
                  "Seed 0 unless the row gives another.",
                  [table(results, specs)], args.section,
                  "Scalar mix or one layer, frozen or fine-tuned: the encoder on dev",
                  "encoder_variants.py", argv if argv is not None else sys.argv[1:],
                  args.note, not args.no_write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
