"""The neural pipeline trained on a GPU: ``arboreal train TRAIN --dev DEV --scorer neural
--device cuda [--embeddings VECTORS]``, the whole command timed, then its model scored.

On the GPU machine (it has the treebank's splits under ``--ud``)::

    python benchmarks/neural_gpu.py --ud UD_DIR [--treebank UD_English-EWT]
        [--embeddings VECTORS] [--max-time SECONDS] [--work-dir runs/neural_gpu] --no-write

trains with the defaults of ``arboreal train --scorer neural`` (the tokenizer, then the
joint neural tagger and parser) on ``cuda``, polling ``nvidia-smi`` twice a second for the
GPU's peak memory and mean utilisation, then parses the test split from raw text (its
``# text`` lines) and from gold tokens with tags, lemmas and trees blanked, on the CPU,
and scores both with ``arboreal.evaluation_ud`` (the CoNLL 2018 method, as
benchmarks/neural.py does). ``--max-time`` is passed to ``arboreal train`` (the session
lending the GPU may be short); the section says whether training ran all its epochs.
Parsing speeds are not reported: that machine's CPUs are not the ones of the other
sections. ``results.json`` in the work directory holds everything, with the machine.

``--from-results`` runs nothing: it writes the section from a ``results.json`` brought
back from the GPU machine, naming that machine (not the one writing the section).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _report import cpu_model  # noqa: E402
from first_order import count_words  # noqa: E402
from udpipe_baseline import UD, blank_tags, raw_text, split_path  # noqa: E402

METRICS = ("Tokens", "Sentences", "Words", "UPOS", "XPOS", "UFeats", "Lemmas", "UAS", "LAS",
           "CLAS", "MLAS", "BLEX")


class GpuPoll:
    """Peak memory used (MiB) and mean utilisation (%) of GPU 0 while the block runs,
    read from ``nvidia-smi`` every ``every`` seconds."""

    def __init__(self, every: float = 0.5):
        self.every = every
        self.memory: list[float] = []
        self.utilisation: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        query = ["nvidia-smi", "--query-gpu=memory.used,utilization.gpu",
                 "--format=csv,noheader,nounits", "--id=0"]
        while not self._stop.wait(self.every):
            try:
                out = subprocess.run(query, capture_output=True, text=True, timeout=10).stdout
                mem, util = (float(x) for x in out.strip().split(","))
            except (OSError, ValueError, subprocess.SubprocessError):
                continue
            self.memory.append(mem)
            self.utilisation.append(util)

    def __enter__(self) -> "GpuPoll":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict:
        if not self.memory:
            return {"gpu_peak_mib": None, "gpu_mean_utilisation": None, "gpu_samples": 0}
        return {"gpu_peak_mib": max(self.memory),
                "gpu_mean_utilisation": sum(self.utilisation) / len(self.utilisation),
                "gpu_samples": len(self.memory)}


def run_timed(cmd: list[str], log: Path) -> dict:
    """Run ``cmd`` (its output to ``log``); wall seconds, CPU seconds and peak RSS (MiB)
    of the command (from the children's rusage: the first command this process waits
    for, so the peak is its own). Not first_order.timed: a GPU machine's image need not
    have /usr/bin/time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(log, "w") as out:
        code = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code != 0:
        sys.stderr.write(log.read_text()[-4000:])
        raise SystemExit(f"command failed ({code}): {shlex.join(cmd)}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "rss_mib": after.ru_maxrss / 1024}


def machine() -> dict:
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    total = torch.cuda.get_device_properties(0).total_memory / 2**20 if gpu else None
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__, "gpu": gpu, "gpu_memory_mib": total}


def training_record(model: Path) -> dict:
    """Epochs, best epoch, why training stopped, seconds of set-up and of epochs, each
    epoch's seconds and dev scores, as the model file holds them."""
    from arboreal.io.model_file import load_model_file

    meta, _ = load_model_file(model)
    training = meta.get("training", {})
    return {"best_epoch": meta.get("best_epoch"), "epochs_planned":
            training.get("options", {}).get("epochs"), "stopped": training.get("stopped"),
            "seconds": meta.get("seconds"),
            "history": [{k: e.get(k) for k in ("epoch", "seconds", "dev_las", "dev_upos")}
                        for e in meta.get("history", [])]}


def run(args) -> dict:
    from arboreal.evaluation_ud import evaluate_ud

    train, dev, test = (split_path(args.treebank, s, args.ud) for s in ("train", "dev", "test"))
    work = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    model = work / f"{args.treebank}.model"
    train_args = ["--scorer", "neural", "--device", args.device]
    if args.embeddings:
        train_args += ["--embeddings", str(args.embeddings)]
    if args.max_time:
        train_args += ["--max-time", str(args.max_time)]
    exe = [sys.executable, "-m", "arboreal"]
    with GpuPoll() as poll:
        t_train = run_timed(exe + ["train", str(train), "--dev", str(dev), "-o", str(model),
                                   *train_args], work / "train.log")
    raw = work / "test.txt"
    raw.write_text(raw_text(test), encoding="utf-8")
    blank = work / "test.blank.conllu"
    blank.write_text(blank_tags(test), encoding="utf-8")
    out_raw, out_gold = work / "raw.conllu", work / "gold-tok.conllu"
    run_timed(exe + ["parse", str(model), str(raw), "--input", "text", "-o", str(out_raw)],
              work / "parse-raw.log")
    run_timed(exe + ["parse", str(model), str(blank), "-o", str(out_gold)],
              work / "parse-gold-tok.log")
    scores = {}
    for name, out in (("raw", out_raw), ("gold_tok", out_gold)):
        result = evaluate_ud(str(test), str(out))
        scores[name] = {m: 100.0 * result[m]["f1"] for m in METRICS}
    return {"treebank": args.treebank, "train_words": count_words(train),
            "test_words": count_words(test), "train_args": train_args,
            "machine": machine(), "train": {**t_train, **poll.summary()},
            "training": training_record(model), "scores": scores,
            "date": time.strftime("%Y-%m-%d")}


def section(r: dict, note: str) -> str:
    m, t, tr = r["machine"], r["train"], r["training"]
    epochs = tr["history"]
    cols = [("raw text", r["scores"]["raw"]), ("gold tokens", r["scores"]["gold_tok"])]
    lines = [
        "Trained on "
        + (f"{m['gpu']} ({m['gpu_memory_mib'] / 1024:,.0f} GiB)" if m["gpu"] else "no GPU")
        + f" with {m['cores']} cores of {m['cpu']}, torch {m['torch']}, Python {m['python']}, on {r['date']}; "
        "the section was written from that run's results.json by `--from-results` (the "
        "Machine line above names the machine that wrote it, not the one that trained).", "",
        f"`arboreal train TRAIN --dev DEV {shlex.join(r['train_args'])}` on "
        f"{r['treebank']} ({r['train_words']:,} training words):", "",
        f"- whole command: {t['wall'] / 60:.1f} min wall, {t['cpu'] / 60:.1f} min CPU, "
        f"{t['rss_mib']:,.0f} MiB peak host memory"
        + (f", {t['gpu_peak_mib']:,.0f} MiB peak GPU memory, GPU busy "
           f"{t['gpu_mean_utilisation']:.0f}% of the time on average (nvidia-smi, "
           f"{t['gpu_samples']} samples)" if t.get("gpu_samples") else ""),
        f"- of which set-up {tr['seconds']['setup']:.0f} s and {len(epochs)} "
        f"epoch{'s' if len(epochs) != 1 else ''} "
        f"{tr['seconds']['epochs']:.0f} s (mean {tr['seconds']['epochs'] / len(epochs):.1f} "
        f"s an epoch, dev scoring included); the rest is reading the data, the tokenizer's "
        f"training and saving",
        f"- epochs run: {len(epochs)} of {tr['epochs_planned']}"
        + (f" (stopped: {tr['stopped']})" if tr.get("stopped") else "")
        + f"; best dev epoch {tr['best_epoch']} (dev LAS "
        f"{max(e['dev_las'] for e in epochs):.2f})", "",
        f"Test ({r['test_words']:,} words), CoNLL 2018 F1, parsed on that machine's CPU:", "",
        "| F1 | " + " | ".join(c for c, _ in cols) + " |", "|---|" + "---:|" * len(cols)]
    for metric in METRICS:
        cells = ["" if metric in ("Tokens", "Sentences", "Words") and c == "gold tokens"
                 else f"{s[metric]:.2f}" for c, s in cols]
        lines.append(f"| {metric} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n" + (f"\n{note}\n" if note else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ud", type=Path, default=UD, help="folder of the UD treebanks")
    ap.add_argument("--treebank", default="UD_English-EWT")
    ap.add_argument("--embeddings", type=Path, default=None)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--max-time", type=float, default=None, metavar="SECONDS")
    ap.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "neural_gpu")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--from-results", action="store_true")
    ap.add_argument("--note", default="")
    args = ap.parse_args(argv)
    results_path = args.work_dir / "results.json"
    if args.from_results:
        r = json.loads(results_path.read_text())
    else:
        os.environ.setdefault("NUMBA_NUM_THREADS", "1")
        r = run(args)
        results_path.write_text(json.dumps(r, indent=1) + "\n")
    print(section(r, args.note))
    if not args.no_write:
        from _report import command_line, write_section

        write_section("neural_gpu", "Neural pipeline trained on a GPU",
                      command_line("neural_gpu.py", argv if argv is not None
                                   else sys.argv[1:], args.note), section(r, args.note))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
