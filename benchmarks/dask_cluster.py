"""arboreal on Dask (issue 20): corpus parsing on a cluster, iterative parameter mixing,
and a paper estimate for a billion words.

1. ``parse``: EWT test x 8 (gold UPOS) with a first-order model trained by
   ``arboreal train EWT-train --no-tagger --no-tokenizer -o M`` (default features,
   perceptron, 10 epochs, no dev). In ``--rounds`` round-robin rounds, each one
   whole command: ``arboreal parse M X8`` (one process), ``arboreal parse M X8
   --scheduler local --workers 2`` (the command starts and stops its LocalCluster) and
   ``arboreal parse M X8 --scheduler tcp://...`` on a LocalCluster of 2 worker
   processes (1 thread each) that the script started beforehand, as a running cluster
   is; its first run is cold (the workers load the model), later runs find the model
   in the workers' cache. words/s = words / wall seconds of the command; the ratio is
   taken within each round (same run). Every output is compared byte for byte with
   the one-process output. Worker CPU seconds come from the workers' rusage.
2. ``mixing``: ``arboreal train EWT-train --dev EWT-dev --no-tagger --no-tokenizer
   --epochs 10`` (perceptron, default features, best dev epoch kept) on one machine
   and with ``--scheduler tcp://... --shards S`` (S = 1, 2, 4, 8; uniform mixing, and
   ``--mixing error`` where asked) on the same 2-worker cluster; dev UAS of the best
   and of the last epoch (from the model's history), test UAS of the saved model
   (``arboreal parse`` + ``arboreal.evaluate``), time per epoch (the model history's
   wall seconds: the shards' epoch, the mixing and the transfers, without the dev
   evaluation) and the whole command's wall time; S = 1 is checked to give the
   single-machine weights exactly.
3. ``estimate``: per-task scheduler overhead (2,000 no-op tasks on the 2-worker
   cluster) and, from part 1, the per-worker parse rate and the client's cost per
   word; printed with their inputs, a paper estimate of parsing 10^9 words on a
   100-node cluster.

Results are kept as JSON in ``--work-dir`` so that the parts can run separately;
the ``distributed`` section of docs/benchmarks.md is written from all of them.

    nice -n 5 python benchmarks/dask_cluster.py --work-dir DIR --parts parse estimate
    nice -n 5 python benchmarks/dask_cluster.py --work-dir DIR --parts mixing --shards 1 2 4 8
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _report import write_section  # noqa: E402
from first_order import UD, count_words, timed  # noqa: E402

EXE = [sys.executable, "-m", "arboreal"]
TRAIN, DEV, TEST = (UD / f"en_ewt-ud-{s}.conllu" for s in ("train", "dev", "test"))
COPIES = 8


def start_cluster(workers: int = 2):
    from distributed import Client, LocalCluster

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Port \d+ is already in use")
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.ERROR)
    return cluster, Client(cluster)


def _worker_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def workers_cpu(client) -> float:
    return sum(client.run(_worker_cpu).values())


def load(work: Path, name: str) -> dict | None:
    path = work / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def save(work: Path, name: str, data: dict) -> None:
    (work / f"{name}.json").write_text(json.dumps(data, indent=1))


# --------------------------------------------------------------------------- 1. parse
def model_for_parsing(work: Path) -> Path:
    model = work / "ewt.model"
    if not model.exists():
        print("training the parsing model ...", file=sys.stderr, flush=True)
        r = timed(EXE + ["train", str(TRAIN), "--no-tagger", "--no-tokenizer", "-o",
                         str(model), "--quiet"])
        print(f"  {r['wall']:.0f} s", file=sys.stderr)
    return model


def part_parse(work: Path, rounds: int) -> dict:
    model = model_for_parsing(work)
    x8 = work / "ewt-test-x8.conllu"
    if not x8.exists():
        x8.write_bytes(TEST.read_bytes() * COPIES)
    words = count_words(x8)
    sentences = TEST.read_text(encoding="utf-8").count("\n\n") * COPIES
    cluster, client = start_cluster(2)
    address = cluster.scheduler_address
    runs: list[dict] = []
    try:
        reference = None
        for rnd in range(1, rounds + 1):
            for kind in ("one process", "local cluster", "running cluster"):
                out = work / f"out-{kind.replace(' ', '-')}.conllu"
                cmd = EXE + ["parse", str(model), str(x8), "-o", str(out), "--quiet"]
                if kind == "local cluster":
                    cmd += ["--scheduler", "local", "--workers", "2"]
                elif kind == "running cluster":
                    cmd += ["--scheduler", address]
                cpu0 = workers_cpu(client)
                r = timed(cmd)
                worker_cpu = workers_cpu(client) - cpu0 if kind == "running cluster" else None
                data = out.read_bytes()
                if kind == "one process":
                    reference = data
                run = {"round": rnd, "kind": kind, "wall": r["wall"], "cpu": r["cpu"],
                       "worker_cpu": worker_cpu, "load": r["load"],
                       "words_per_s": words / r["wall"], "same": data == reference,
                       "cold": kind == "running cluster" and rnd == 1}
                runs.append(run)
                print(f"round {rnd} {kind:16s} {r['wall']:6.2f} s wall, {r['cpu']:6.2f} s "
                      f"CPU (command)" + (f", {worker_cpu:6.2f} s CPU (workers)"
                                          if worker_cpu is not None else "")
                      + f", {words / r['wall']:8.0f} words/s, load {r['load']:.1f}, "
                      f"same output: {run['same']}", file=sys.stderr, flush=True)
        # one sentence: the fixed cost of each command
        one = work / "one-sentence.conllu"
        one.write_text(TEST.read_text(encoding="utf-8").split("\n\n")[0] + "\n\n",
                       encoding="utf-8")
        fixed, fixed_cpu = {}, {}
        for kind, extra in (("one process", []), ("running cluster", ["--scheduler", address])):
            times = [timed(EXE + ["parse", str(model), str(one), "-o", os.devnull, "--quiet",
                                  *extra]) for _ in range(3)]
            fixed[kind] = min(t["wall"] for t in times)
            fixed_cpu[kind] = min(t["cpu"] for t in times)
        overhead = task_overhead(client)
    finally:
        client.close()
        cluster.close()
    try:
        autogroup = Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        autogroup = None
    result = {"words": words, "sentences": sentences, "model": "ewt.model", "runs": runs,
              "autogroup": autogroup,
              "fixed_wall": fixed, "fixed_cpu": fixed_cpu, "task_overhead": overhead,
              "model_mib": model.stat().st_size / 2**20,
              "input_mib": x8.stat().st_size / 2**20,
              "output_mib": (work / "out-one-process.conllu").stat().st_size / 2**20}
    save(work, "parse", result)
    return result


def _noop(i):
    return i


def task_overhead(client, n: int = 2000) -> dict:
    """Seconds per task of ``n`` no-op tasks, submitted at once and gathered."""
    client.gather(client.map(_noop, range(100), pure=False))   # warm
    t0 = time.perf_counter()
    futures = client.map(_noop, range(n), pure=False)
    client.gather(futures)
    wall = time.perf_counter() - t0
    return {"tasks": n, "wall": wall, "per_task_ms": 1000 * wall / n,
            "workers": len(client.nthreads())}


# -------------------------------------------------------------------------- 2. mixing
def part_mixing(work: Path, shards: list[int], modes: list[str], epochs: int) -> dict:
    from arboreal import evaluate
    from arboreal.models import load_model

    results = load(work, "mixing") or {"runs": {}}
    results["epochs"] = epochs
    common = ["train", str(TRAIN), "--dev", str(DEV), "--no-tagger", "--no-tokenizer",
              "--epochs", str(epochs), "--quiet"]
    todo = [("single", None, None)] + [(f"S={s} {m}", s, m) for s in shards for m in modes
                                       if not (s == 1 and m != "uniform")]
    cluster, client = start_cluster(2)
    try:
        for name, s, mode in todo:
            if name in results["runs"]:
                continue
            model = work / f"mix-{name.replace(' ', '-').replace('=', '')}.model"
            cmd = EXE + common + ["-o", str(model)]
            if s is not None:
                cmd += ["--scheduler", cluster.scheduler_address, "--shards", str(s),
                        "--mixing", mode]
            print(f"training {name} ...", file=sys.stderr, flush=True)
            r = timed(cmd)
            m = load_model(model)
            history = m.meta["history"]
            out = work / "mix-test.conllu"
            timed(EXE + ["parse", str(model), str(TEST), "-o", str(out), "--quiet"])
            test = evaluate(str(TEST), str(out))
            run = {"shards": s, "mixing": mode, "wall": r["wall"], "cpu": r["cpu"],
                   "load": r["load"], "best_epoch": m.meta["best_epoch"],
                   "dev_uas_best": max(h["dev_uas"] for h in history),
                   "dev_uas_last": history[-1]["dev_uas"],
                   "dev_uas": [h["dev_uas"] for h in history],
                   "epoch_seconds": [h["seconds"] for h in history],
                   "test_uas": test["uas"], "test_las": test["las"]}
            if s == 1:
                single = load_model(work / "mix-single.model")
                run["equals_single"] = bool(np.array_equal(single.weights, m.weights))
            results["runs"][name] = run
            save(work, "mixing", results)
            print(f"  {r['wall']:.0f} s, best epoch {run['best_epoch']}, dev UAS "
                  f"{run['dev_uas_best']:.2f}, test UAS {run['test_uas']:.2f}, "
                  f"{np.mean(run['epoch_seconds']):.1f} s/epoch", file=sys.stderr, flush=True)
    finally:
        client.close()
        cluster.close()
    return results


# ------------------------------------------------------------------------ 3. estimate
def estimate(parse: dict, nodes: int = 100, cores: int = 16, words: float = 1e9,
             nic_gbit: float = 10.0) -> list[str]:
    """Lines of the paper estimate (inputs first) for ``words`` words on ``nodes``
    nodes of ``cores`` cores, from part 1's measurements."""
    warm = [r for r in parse["runs"] if r["kind"] == "running cluster" and not r["cold"]]
    warm = warm or [r for r in parse["runs"] if r["kind"] == "running cluster"]
    best = min(warm, key=lambda r: r["worker_cpu"])
    # a worker is one core: words per second of worker CPU
    per_worker = parse["words"] / best["worker_cpu"]
    client_cpu = min(r["cpu"] for r in warm)
    client_fixed = parse["fixed_cpu"]["running cluster"]
    client_per_word = max(client_cpu - client_fixed, 0.0) / parse["words"]
    per_task = parse["task_overhead"]["per_task_ms"] / 1000
    words_per_shard = parse["words"] / (parse["input_mib"] * 2**20 / (1 << 18))
    in_bytes = parse["input_mib"] * 2**20 / parse["words"]
    out_bytes = parse["output_mib"] * 2**20 / parse["words"]
    model_bytes = parse["model_mib"] * 2**20
    workers = nodes * cores
    link = nic_gbit / 8 * 1e9
    compute = words / (workers * per_worker)
    shard_seconds = words_per_shard / per_worker
    tasks = words / words_per_shard
    a = {"compute": compute, "scheduler": max(tasks * per_task, 0.0),
         "client": words * client_per_word,
         "network": words * (in_bytes + out_bytes) / link,
         "model": workers * model_bytes / link}
    b = {"compute": compute, "scheduler": tasks / nodes * per_task,
         "client": words * client_per_word / nodes, "network": 0.0,
         "model": 0.0}
    names = {"compute": "the workers' compute", "scheduler": "the scheduler",
             "client": "the client's CPU", "network": "the client's network link",
             "model": "sending the model"}
    worst_a, worst_b = max(a, key=a.get), max(b, key=b.get)
    return [
        "Inputs, measured in part 1 on this machine: parse rate per worker "
        f"{per_worker:,.0f} words per CPU second (best warm run: {parse['words']:,} words, "
        f"{best['worker_cpu']:.2f} s of CPU over both workers); the client's CPU "
        f"{1e6 * client_per_word:.2f} µs per word (command CPU {client_cpu:.2f} s minus "
        f"{client_fixed:.2f} s for a one-sentence command); scheduler "
        f"{1000 * per_task:.2f} ms per task ({parse['task_overhead']['tasks']:,} no-op tasks "
        f"on 2 workers, submit to result, i.e. {1 / per_task:,.0f} tasks/s on this loaded "
        f"2-core machine); {words_per_shard:,.0f} words per 256 KiB shard, "
        f"{shard_seconds:.2f} s of a worker's time; {in_bytes:.0f} bytes of CoNLL-U in and "
        f"{out_bytes:.0f} out per word; model file {parse['model_mib']:.0f} MiB. Assumed: "
        f"{nodes} nodes x {cores} cores, one single-threaded worker per core "
        f"({workers:,} workers) at the measured rate, a {nic_gbit:g} Gbit/s link per node.",
        "",
        "| bound, 10^9 words | A: one command, one scheduler, all "
        f"{workers:,} workers | B: one `--scheduler local --workers {cores}` command per "
        "node, each on 1/100 of the input files | how |",
        "|---|---:|---:|---|",
        f"| workers' compute | {a['compute']:,.0f} s | {b['compute']:,.0f} s | 10^9 / "
        f"({workers:,} x {per_worker:,.0f} words/s) |",
        f"| scheduler | {a['scheduler']:,.0f} s | {b['scheduler']:,.0f} s | {tasks:,.0f} "
        f"shards x {1000 * per_task:.2f} ms on one scheduler (A: {workers:,} workers ask for "
        f"{workers / shard_seconds:,.0f} shards/s) or {nodes} (B: each node's {cores} workers ask "
        f"for {cores / shard_seconds:,.0f}/s) |",
        f"| client CPU | {a['client']:,.0f} s | {b['client']:,.0f} s | 10^9 x "
        f"{1e6 * client_per_word:.2f} µs over 1 or {nodes} clients (each reads its input, "
        "receives every result, writes every output) |",
        f"| client network | {a['network']:,.0f} s | {b['network']:,.0f} s | "
        f"{in_bytes + out_bytes:.0f} bytes per word through one link (B: within each node) |",
        f"| model broadcast | {a['model']:,.0f} s | {b['model']:,.0f} s | "
        f"{parse['model_mib']:.0f} MiB to each of {workers:,} workers through one link "
        "(B: within each node) |",
        f"| **estimate** (slowest bound; the others overlap) | **{max(a.values()):,.0f} s** "
        f"| **{max(b.values()):,.0f} s** | plus the start-up (seconds) |",
        "",
        f"A is bound by {names[worst_a]} ({max(a.values()) / 60:,.1f} min: larger shards, "
        "`arboreal.distributed.SHARD_BYTES`, would relieve the scheduler, not the one "
        f"client); B, independent per-node clusters, by {names[worst_b]} "
        f"({max(b.values()) / 60:,.1f} min).",
    ]


def projection(parse: dict) -> str:
    """The speed-up on an idle 2-core machine from the measured CPU times (each process
    with a core of its own): a projection, not a measurement."""
    one = float(np.median([r["cpu"] for r in parse["runs"] if r["kind"] == "one process"]))
    warm = [r for r in parse["runs"] if r["kind"] == "running cluster" and not r["cold"]]
    if not warm:
        return ""
    workers = float(np.median([r["worker_cpu"] for r in warm]))
    client = float(np.median([r["cpu"] for r in warm]))
    fixed = parse["fixed_cpu"]["running cluster"]
    wall = fixed + (workers + max(client - fixed, 0.0)) / 2
    one_fixed = parse["fixed_cpu"]["one process"]
    return (f"CPU time (medians; load-independent): the one-process command takes {one:.2f} s "
            f"of CPU ({one - one_fixed:.2f} s beyond a one-sentence command's {one_fixed:.2f} "
            f"s); on the running cluster the workers take {workers:.2f} s together for the "
            f"same parsing and the client "
            f"{client:.2f} s, {fixed:.2f} s of it fixed (imports, the model's metadata, "
            f"connecting, asking the workers which model they hold) before the first "
            f"shard. With a core per "
            f"worker, as on an idle 2-core machine, that projects to {fixed:.2f} + "
            f"({workers:.2f} + {max(client - fixed, 0.0):.2f}) / 2 = {wall:.2f} s, "
            f"**{one / wall:.2f}x** one process: a projection from CPU times, not a "
            "measured wall time.")


# --------------------------------------------------------------------------- report
def _median_warm_ratio(parse: dict) -> float:
    """Median over the rounds after the first of one-process wall / running-cluster wall."""
    one = {r["round"]: r["wall"] for r in parse["runs"] if r["kind"] == "one process"}
    ratios = [one[r["round"]] / r["wall"] for r in parse["runs"]
              if r["kind"] == "running cluster" and not r["cold"]]
    return float(np.median(ratios)) if ratios else float("nan")


def report(work: Path, command: str) -> str:
    parse, mixing = load(work, "parse"), load(work, "mixing")
    parts = []
    if parse:
        w = parse["words"]
        parts.append(
            f"### Corpus parsing: EWT test x {COPIES} ({w:,} words, "
            f"{parse['input_mib']:.1f} MiB), 2 workers vs one process\n\n"
            "Model: `arboreal train en_ewt-ud-train.conllu --no-tagger --no-tokenizer -o M` "
            "(first-order, default features, perceptron, 10 epochs; gold UPOS in the input). "
            "Whole commands, round-robin rounds; `running cluster`: a LocalCluster of 2 "
            "worker processes (1 thread each) started by the script before the runs "
            "(`--scheduler tcp://...`), its first run cold (the command sends the model "
            "and the workers load it; later runs find it loaded on every worker and send "
            "nothing); `local cluster`: `--scheduler local --workers 2`, "
            "the command starting and stopping its cluster. Ratio: one-process wall time "
            "over the run's, in the same round. `load`: 1-minute load average during the "
            "command (the machine has 2 cores and other jobs; above 2, the workers "
            "shared the cores with them).\n\n"
            "| round | command | wall s | words/s | ratio to one process | CPU s, command "
            "| CPU s, workers | load | same output |\n|---:|---|---:|---:|---:|---:|---:|---:|---|")
        one = {r["round"]: r["wall"] for r in parse["runs"] if r["kind"] == "one process"}
        for r in parse["runs"]:
            kind = r["kind"] + (" (cold)" if r["cold"] else "")
            wc = "" if r["worker_cpu"] is None else f"{r['worker_cpu']:.2f}"
            parts.append(f"| {r['round']} | {kind} | {r['wall']:.2f} | {r['words_per_s']:,.0f} "
                         f"| {one[r['round']] / r['wall']:.2f}x | {r['cpu']:.2f} | {wc} | "
                         f"{r['load']:.1f} | {'yes' if r['same'] else 'NO'} |")
        best = {}
        for r in parse["runs"]:
            k = r["kind"] + (" (cold)" if r["cold"] else "")
            best[k] = min(best.get(k, float("inf")), r["wall"])
        fixed = parse["fixed_wall"]
        parts.append(
            "\nFastest runs: " + ", ".join(f"{k} {w / v:,.0f} words/s ({v:.2f} s)"
                                           for k, v in best.items())
            + f"; fastest ratio running cluster (warm) / one process: "
            f"{best['one process'] / best.get('running cluster', float('nan')):.2f}x; "
            f"median of the warm rounds' ratios: {_median_warm_ratio(parse):.2f}x. "
            f"One-sentence commands (fixed cost, fastest of 3): one process "
            f"{fixed['one process']:.2f} s, running cluster {fixed['running cluster']:.2f} s. "
            f"Scheduler: {parse['task_overhead']['per_task_ms']:.2f} ms per no-op task "
            f"({parse['task_overhead']['tasks']} tasks, 2 workers).")
        if parse.get("autogroup"):
            parts.append(
                "\nThis machine schedules by session (`kernel.sched_autogroup_enabled = 1`): "
                "while another session keeps a core busy, all the processes of this "
                "benchmark's session (both workers) share about one core, whatever their "
                "number, so the wall-clock ratio stays near 1x however well the work "
                "splits; the load column shows when that was the case. The CPU times "
                "below do not depend on it.")
        parts.append("\n" + projection(parse))
        parts.append("\n### A billion words on 100 nodes (paper estimate)\n")
        parts += estimate(parse)
    if mixing and mixing["runs"]:
        runs = mixing["runs"]
        parts.append(
            f"\n### Iterative parameter mixing on EWT ({mixing['epochs']} epochs)\n\n"
            "`arboreal train en_ewt-ud-train.conllu --dev en_ewt-ud-dev.conllu --no-tagger "
            f"--no-tokenizer --epochs {mixing['epochs']}` (perceptron, default features, "
            "best dev epoch kept) on one machine, and with `--scheduler tcp://... --shards S "
            "--mixing M` on a running LocalCluster of 2 workers (S shards share 2 cores; "
            "the S shards' epochs run 2 at a time). Dev UAS best / at the last epoch from "
            "the model's history; test UAS of the saved model (best epoch); s/epoch: "
            "the model history's wall seconds per epoch (shards, mixing, transfers; the "
            "dev evaluation excluded), mean over epochs; `load`: 1-minute load average."
            + (" The machine's per-session scheduling (above) caps the two workers at "
               "about one core while another session is busy, so s/epoch says little "
               "about the speed-up here; the accuracy columns do not depend on it."
               if (parse or {}).get("autogroup") else "") + "\n\n"
            "| training | best epoch | dev UAS (best) | dev UAS (last epoch) | test UAS | "
            "test LAS | Δ test UAS vs single | s/epoch | whole command s | load |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        single = runs.get("single")
        for name, r in runs.items():
            delta = "" if single is None or name == "single" else \
                f"{r['test_uas'] - single['test_uas']:+.2f}"
            extra = ""
            if "equals_single" in r:
                extra = " (weights = single: " + ("yes" if r["equals_single"] else "NO") + ")"
            parts.append(f"| {name}{extra} | {r['best_epoch']} | {r['dev_uas_best']:.2f} | "
                         f"{r['dev_uas_last']:.2f} | {r['test_uas']:.2f} | {r['test_las']:.2f} "
                         f"| {delta} | {np.mean(r['epoch_seconds']):.1f} | {r['wall']:.0f} "
                         f"| {r['load']:.1f} |")
        if single is not None:
            parts.append("\nDev UAS per epoch: " + "; ".join(
                f"{name}: " + ", ".join(f"{u:.2f}" for u in r["dev_uas"])
                for name, r in runs.items()))
    return "\n".join(parts) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp/arboreal-distributed"))
    ap.add_argument("--parts", nargs="+", choices=("parse", "mixing", "estimate"),
                    default=["parse", "mixing"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--mixing", nargs="+", choices=("uniform", "error"), default=["uniform"])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    if "parse" in args.parts:
        part_parse(args.work_dir, args.rounds)
    if "mixing" in args.parts:
        part_mixing(args.work_dir, args.shards, args.mixing, args.epochs)
    niceness = os.nice(0)
    cmd = (f"nice -n {niceness} " if niceness else "") + "python benchmarks/dask_cluster.py " + " ".join(
        a if a != str(args.work_dir) else "DIR" for a in sys.argv[1:])
    commands = load(args.work_dir, "commands") or {}
    for part in args.parts:
        commands[part] = cmd
    save(args.work_dir, "commands", commands)
    body = report(args.work_dir, cmd)
    print(body)
    if not args.no_write:
        write_section("distributed", "Dask: corpus parsing and parameter mixing",
                      "; ".join(dict.fromkeys(commands.values())), body)


if __name__ == "__main__":
    main()
