"""BiLSTM sizes of the neural scorer on small treebanks, in one run: ``arboreal train
TRAIN --dev DEV --scorer neural`` with every option at its default but the BiLSTM's
layers and units, one command per treebank and size, each timed whole by
``/usr/bin/time``; from each command's log: the best dev epoch (LAS, UAS, UPOS from gold
tokens, the network's own tags), the seconds per epoch (dev scoring included) and the
command's wall time and peak memory.

    python benchmarks/neural_sizes.py [--treebanks UD_Hungarian-Szeged UD_Wolof-WTB]
        [--sizes 3x300 2x200] [--work-dir runs/neural_sizes] [--from-logs] [--no-write]
        [--note '...']

``--from-logs`` reads the work directory's ``TREEBANK.SIZE.log`` files (the same
commands run before, their ``/usr/bin/time -f "WALL %e CPU %U MAXRSS %M"`` line last)
instead of training.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _report import report_tables, utc_now  # noqa: E402
from pipeline import split_path  # noqa: E402

DEFAULT_TREEBANKS = ["UD_Hungarian-Szeged", "UD_Wolof-WTB"]
DEFAULT_SIZES = ["3x300", "2x200"]
EPOCH = re.compile(r"^epoch (\d+): ([\d.]+) s, .*dev LAS ([\d.]+) UAS ([\d.]+)"
                   r"(?: UPOS ([\d.]+))?( \(best\))?")
TIME = re.compile(r"^WALL ([\d.]+) CPU ([\d.]+) MAXRSS (\d+)")


def size_options(size: str) -> list[str]:
    """``LAYERSxUNITS`` -> the --scorer-option arguments that ask for that BiLSTM."""
    layers, units = (int(x) for x in size.split("x"))
    return ["--scorer-option", f"lstm_layers={layers}", "--scorer-option", f"lstm_dim={units}"]


def train(treebank: str, size: str, work: Path) -> Path:
    """Run the training command, its log (stderr, then the time line) to work/."""
    work.mkdir(parents=True, exist_ok=True)
    log = work / f"{treebank}.{size}.log"
    cmd = ["/usr/bin/time", "-f", "WALL %e CPU %U MAXRSS %M", sys.executable, "-m",
           "arboreal", "train", str(split_path(treebank, "train")), "--dev",
           str(split_path(treebank, "dev")), "--scorer", "neural", *size_options(size),
           "-o", str(work / f"{treebank}.{size}.model")]
    with open(log, "w", encoding="utf-8") as f:
        subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=True,
                       env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return log


def read_log(log: Path) -> dict:
    """The figures of one training log (module docstring)."""
    epochs, best, timing = [], None, None
    for line in log.read_text(encoding="utf-8").splitlines():
        m = EPOCH.match(line)
        if m:
            record = {"epoch": int(m[1]), "seconds": float(m[2]), "las": float(m[3]),
                      "uas": float(m[4]), "upos": float(m[5]) if m[5] else None}
            epochs.append(record)
            if m[6]:
                best = record
        t = TIME.match(line)
        if t:
            timing = {"wall": float(t[1]), "cpu": float(t[2]), "rss_mib": int(t[3]) / 1024}
    if best is None or timing is None:
        raise SystemExit(f"{log}: no best epoch or no time line")
    seconds = [e["seconds"] for e in epochs]
    return {"best": best, "epochs": len(epochs), "median_epoch_s": statistics.median(seconds),
            "epoch_s": sum(seconds), **timing}


#: the columns of :func:`run_cells`
RUN_COLUMNS = ("best dev LAS | UAS | UPOS | best epoch | median s per epoch "
               "| `arboreal train` wall | peak memory |")


def run_cells(r: dict) -> str:
    """One training's figures (:func:`read_log`) as the cells of :data:`RUN_COLUMNS`."""
    b = r["best"]
    upos = "" if b["upos"] is None else f"{b['upos']:.2f}"
    return (f"{b['las']:.2f} | {b['uas']:.2f} | {upos} | {b['epoch']} of {r['epochs']} | "
            f"{r['median_epoch_s']:.1f} | {r['wall'] / 60:.1f} min | {r['rss_mib']:,.0f} MiB |")


def log_run_arguments(ap: argparse.ArgumentParser, work: str, section: str) -> None:
    """The options of a benchmark of training logs: ``--work-dir`` (default
    runs/WORK), ``--from-logs``, ``--no-write``, ``--section`` (default SECTION),
    ``--note``."""
    ap.add_argument("--work-dir", type=Path, default=ROOT / "runs" / work)
    ap.add_argument("--from-logs", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--section", default=section)
    ap.add_argument("--note", default="")


def table(results: dict, sizes: list[str]) -> str:
    lines = ["| treebank | BiLSTM (layers x units) | " + RUN_COLUMNS,
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for treebank, by_size in results.items():
        for size in sizes:
            lines.append(f"| {treebank.removeprefix('UD_')} | {size} | "
                         + run_cells(by_size[size]))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--treebanks", nargs="+", default=DEFAULT_TREEBANKS)
    ap.add_argument("--sizes", nargs="+", default=DEFAULT_SIZES)
    log_run_arguments(ap, "neural_sizes", "neural_small_sizes")
    args = ap.parse_args(argv)
    started = utc_now()
    results = {}
    for treebank in args.treebanks:
        results[treebank] = {}
        for size in args.sizes:
            log = (args.work_dir / f"{treebank}.{size}.log" if args.from_logs
                   else train(treebank, size, args.work_dir))
            results[treebank][size] = read_log(log)
    run = ("read from the logs of earlier runs (--from-logs)" if args.from_logs
           else f"{started} to {utc_now()}")
    report_tables(f"Runs: {run}. Each `arboreal train --scorer neural` with every other "
                  "option at its default (40 epochs, patience 8, batches chosen by the "
                  "treebank's size); dev scores from gold tokens, the network's own tags, "
                  "as the training log reports them after each epoch.",
                  [table(results, args.sizes)], args.section,
                  "BiLSTM sizes of the neural scorer on small treebanks", "neural_sizes.py",
                  argv if argv is not None else sys.argv[1:], args.note, not args.no_write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
