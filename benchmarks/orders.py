"""Orders 1, 2 and 3 with the defaults of ``arboreal train`` (issue 15's bars).

Each configuration is one ``arboreal train`` command on UD English-EWT train with
``--dev`` (best epoch on dev), gold tags (``--no-tagger --no-tokenizer``), and only
``--order`` and ``--learner`` set: every other option is the command's default. The
model then parses the test file twice with ``arboreal parse`` (the first run
warms numba's on-disk cache; the second is timed: the whole command, interpreter
start and model load included), and the output is scored (UAS / LAS, every word,
punctuation included). Orders are compared word by word on test (two-sided sign
test on the words only one of the two models attaches correctly).

    python benchmarks/orders.py --configs 1-perceptron 2-perceptron 3-perceptron \\
        1-mira 2-mira 3-mira [--runs runs/orders] [--phases train,report] [--write]

``--seeds S ...`` trains each configuration once per training seed (``arboreal train
--seed``; seed 0 is the default); the report then adds each configuration's test UAS
per seed with mean and standard deviation, and each order's gain over the order below
per seed (same learner and seed), since one run's test UAS moves by a few tenths with
the seed.

Each configuration's model, outputs and figures stay in ``--runs`` (git-ignored), so
``--phases report`` can gather runs made one at a time (or from another checkout:
``--code DIR`` runs the commands with DIR's ``src`` on PYTHONPATH).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
UD = ROOT.parent / "shared" / "data" / "ud"
sys.path.insert(0, str(ROOT / "benchmarks"))
#: the treebank of the run (--treebank)
TREEBANK = ["UD_English-EWT"]


def files() -> dict[str, Path]:
    return {split: next((UD / TREEBANK[0]).glob(f"*-ud-{split}.conllu"))
            for split in ("train", "dev", "test")}


def run_timed(cmd: list[str], env: dict) -> tuple[float, float, str]:
    """(wall s, CPU s of the child, stderr) of one command; RuntimeError if it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, res.stderr


def heads_and_labels(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """HEAD and DEPREL (universal part) of every word of a CoNLL-U file, in order."""
    heads, labels = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        f = line.split("\t")
        if len(f) == 10 and f[0].isdigit():
            heads.append(int(f[6]))
            labels.append(f[7].split(":")[0])
    return np.array(heads), np.array(labels)


def run_name(config: str, seed: int) -> str:
    """The file stem of a configuration's run with training seed ``seed`` (seed 0, the
    default of ``arboreal train``, keeps the bare configuration name)."""
    return config if seed == 0 else f"{config}-seed{seed}"


def train_config(config: str, runs: Path, code: Path, seed: int = 0) -> dict:
    order, learner = config.split("-", 1)
    f = files()
    env = dict(os.environ, PYTHONPATH=str(code / "src"), NUMBA_NUM_THREADS="1",
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    exe = [sys.executable, "-m", "arboreal"]
    name = run_name(config, seed)
    model = runs / f"{name}.npz"
    out = runs / f"{name}.test.conllu"
    train_cmd = ["train", str(f["train"]), "--dev", str(f["dev"]), "-o", str(model),
                 "--no-tagger", "--no-tokenizer", "--order", order, "--learner", learner]
    if seed:
        train_cmd += ["--seed", str(seed)]
    load = os.getloadavg()[0]
    wall, cpu, log = run_timed(exe + train_cmd, env)
    parse_cmd = ["parse", str(model), str(f["test"]), "-o", str(out)]
    run_timed(exe + parse_cmd, env)                      # warm numba's cache
    p_wall, p_cpu, _ = run_timed(exe + parse_cmd, env)
    gold_h, gold_l = heads_and_labels(f["test"])
    pred_h, pred_l = heads_and_labels(out)
    right = pred_h == gold_h
    meta = json.loads(subprocess.run(
        [sys.executable, "-c", "import json,sys; from arboreal.io.model_file import "
         "load_model_file; m,_=load_model_file(sys.argv[1]); "
         "print(json.dumps({'best_epoch': m.get('best_epoch'), 'history': m.get('history'), "
         "'pruning': (m.get('training') or {}).get('higher_order')}))",
         str(model)], capture_output=True, text=True, env=env, check=True).stdout)
    history = meta.get("history") or []
    best = meta.get("best_epoch")
    dev_uas = max((h.get("dev_uas") or 0.0) for h in history) if history else None
    result = {"config": config, "seed": seed, "order": int(order), "learner": learner,
              "command": "arboreal " + " ".join(train_cmd), "train_wall_s": wall,
              "train_cpu_s": cpu, "load_at_start": load, "best_epoch": best,
              "dev_uas": dev_uas, "test_uas": 100 * right.mean(),
              "test_las": 100 * (right & (pred_l == gold_l)).mean(),
              "parse_wall_s": p_wall, "parse_cpu_s": p_cpu, "words": int(gold_h.size),
              "pruning": meta.get("pruning"), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    (runs / f"{name}.json").write_text(json.dumps(result, indent=1))
    np.save(runs / f"{name}.right.npy", right)
    print(json.dumps({k: result[k] for k in ("config", "seed", "dev_uas", "test_uas", "test_las",
                                              "train_wall_s", "parse_wall_s")}), flush=True)
    return result


def retime(config: str, runs: Path, code: Path, rounds: int) -> dict:
    """Re-time ``arboreal parse`` of a trained configuration: the fastest of ``rounds``
    whole commands (after one warm-up), wall and CPU; stored as CONFIG.speed.json."""
    f = files()
    env = dict(os.environ, PYTHONPATH=str(code / "src"), NUMBA_NUM_THREADS="1",
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "arboreal", "parse", str(runs / f"{config}.npz"),
           str(f["test"]), "-o", str(runs / f"{config}.retime.conllu")]
    run_timed(cmd, env)
    times = [run_timed(cmd, env)[:2] for _ in range(rounds)]
    wall, cpu = min(times)
    out = {"config": config, "wall_s": wall, "cpu_s": cpu, "rounds": rounds,
           "load": os.getloadavg()[0], "code": str(code),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    (runs / f"{config}.speed.json").write_text(json.dumps(out, indent=1))
    print(json.dumps(out), flush=True)
    return out


def sign_test(a: np.ndarray, b: np.ndarray) -> tuple[int, int, float]:
    """Words only a / only b gets right, and the two-sided exact sign test p."""
    only_a, only_b = int((a & ~b).sum()), int((b & ~a).sum())
    n, k = only_a + only_b, min(only_a, only_b)
    p = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n) if n else 1.0
    return only_a, only_b, p


def seed_summary(runs: Path, configs: list[str]) -> list[str]:
    """Table lines over every training seed found in ``runs`` (none when each
    configuration has one run): each configuration's test UAS per seed, mean and sample
    standard deviation, and each order's difference to the order below for the same
    learner and seed (mean and range over the seeds both have)."""
    runs_of: dict[str, dict[int, dict]] = {}
    for c in configs:
        for path in [runs / f"{c}.json", *sorted(runs.glob(f"{c}-seed*.json"))]:
            if path.exists():
                r = json.loads(path.read_text())
                runs_of.setdefault(c, {})[int(r.get("seed", 0))] = r
    if all(len(v) < 2 for v in runs_of.values()):
        return []
    seeds = sorted({s for v in runs_of.values() for s in v})
    head = " | ".join(f"seed {s}" for s in seeds)
    lines = ["", f"| order | learner | test UAS: {head} | mean | sd | dev UAS mean |",
             "|---|---|" + "---:|" * (len(seeds) + 3)]
    for c, by_seed in runs_of.items():
        order, learner = c.split("-", 1)
        uas = [by_seed[s]["test_uas"] for s in seeds if s in by_seed]
        dev = [by_seed[s]["dev_uas"] for s in seeds if s in by_seed]
        cells = " | ".join(f"{by_seed[s]['test_uas']:.2f}" if s in by_seed else "-"
                           for s in seeds)
        sd = f"{np.std(uas, ddof=1):.2f}" if len(uas) > 1 else "-"
        lines.append(f"| {order} | {learner} | {cells} | {np.mean(uas):.2f} | {sd} | "
                     f"{np.mean(dev):.2f} |")
    lines += ["", f"| learner | orders | test UAS difference: {head} | mean | min | max |",
              "|---|---|" + "---:|" * (len(seeds) + 3)]
    for c, by_seed in runs_of.items():
        order, learner = c.split("-", 1)
        low = runs_of.get(f"{int(order) - 1}-{learner}")
        if low is None:
            continue
        both = [s for s in seeds if s in by_seed and s in low]
        if not both:
            continue
        diff = {s: by_seed[s]["test_uas"] - low[s]["test_uas"] for s in both}
        cells = " | ".join(f"{diff[s]:+.2f}" if s in diff else "-" for s in seeds)
        vals = list(diff.values())
        lines.append(f"| {learner} | {order} vs {int(order) - 1} | {cells} | "
                     f"{np.mean(vals):+.2f} | {min(vals):+.2f} | {max(vals):+.2f} |")
    return lines


def report(runs: Path, configs: list[str], before: Path | None = None) -> str:
    rows = [json.loads((runs / f"{c}.json").read_text()) for c in configs
            if (runs / f"{c}.json").exists()]
    lines = ["| order | learner | dev UAS | test UAS | test LAS | best epoch | train wall | "
             "train CPU | parse words/s (whole command, wall) | parse CPU s | pruning: "
             "temperature, K, dev gold heads kept, candidate heads per word |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if "pruning" not in r and (runs / f"{r['config']}.npz").exists():
            from arboreal.io.model_file import load_model_file

            meta, _ = load_model_file(runs / f"{r['config']}.npz")
            r["pruning"] = (meta.get("training") or {}).get("higher_order")
        choice = (r.get("pruning") or {}).get("temperature_choice")
        prune = (f"{choice['temperature']:g}, {choice.get('max_heads', 10)}, "
                 f"{100 * choice['gold_heads_kept']:.2f}%, "
                 f"{choice['kept_heads_per_word']:.2f}" if choice else "-")
        lines.append(f"| {r['order']} | {r['learner']} | {r['dev_uas']:.2f} | "
                     f"{r['test_uas']:.2f} | {r['test_las']:.2f} | {r['best_epoch']} | "
                     f"{r['train_wall_s'] / 60:.1f} min | {r['train_cpu_s'] / 60:.1f} min | "
                     f"{r['words'] / r['parse_wall_s']:,.0f} | {r['parse_cpu_s']:.1f} | "
                     f"{prune} |")
    pairs = ["", "| learner | orders | test UAS difference | words only the higher order "
             "attaches right | words only the lower order attaches right | sign test p |",
             "|---|---|---:|---:|---:|---:|"]
    by = {(r["order"], r["learner"]): r for r in rows}
    for (order, learner), r in sorted(by.items()):
        low = by.get((order - 1, learner))
        if low is None:
            continue
        a = np.load(runs / f"{r['config']}.right.npy")
        b = np.load(runs / f"{low['config']}.right.npy")
        only_hi, only_lo, p = sign_test(a, b)
        pairs.append(f"| {learner} | {order} vs {order - 1} | "
                     f"{r['test_uas'] - low['test_uas']:+.2f} | {only_hi} | {only_lo} | {p:.3g} |")
    speed = ["", "| order | learner | parse words/s (whole command, best of N, wall) | "
             "CPU s | before: words/s | after / before |", "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        sp = runs / f"{r['config']}.speed.json"
        if not sp.exists():
            continue
        now = json.loads(sp.read_text())
        old = (before / f"{r['config']}.speed.json") if before else None
        old = json.loads(old.read_text()) if old is not None and old.exists() else None
        speed.append(f"| {r['order']} | {r['learner']} | {r['words'] / now['wall_s']:,.0f} | "
                     f"{now['cpu_s']:.2f} | "
                     + (f"{r['words'] / old['wall_s']:,.0f} | {old['wall_s'] / now['wall_s']:.2f} |"
                        if old else "- | - |"))
    if len(speed) > 3:
        pairs += speed
    pairs += seed_summary(runs, configs)
    dates = sorted({r["date"] for r in rows})
    loads = ", ".join(f"{r['config']} {r['load_at_start']:.1f}" for r in rows)
    note = (f"\n\n{TREEBANK[0]}: train, best epoch on dev, test, gold tags; every word counted "
            "(punctuation included), LAS on the universal part of DEPREL. Each row is one "
            "command, `arboreal train TRAIN --dev DEV -o MODEL --no-tagger --no-tokenizer "
            "--order N --learner L` (all other options the defaults), then `arboreal parse "
            "MODEL TEST -o OUT` twice (the second timed). Train CPU = the command's CPU "
            "time. Runs: " + ", ".join(dates) + f". Load average (1 min) at each start: {loads}; "
            "the 2-core machine was shared with other jobs, so wall times are inflated.")
    return "\n".join(lines + pairs) + note


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", nargs="+",
                    default=["1-perceptron", "2-perceptron", "3-perceptron",
                             "1-mira", "2-mira", "3-mira"])
    ap.add_argument("--runs", default=str(ROOT / "runs" / "orders"))
    ap.add_argument("--treebank", default="UD_English-EWT",
                    help="a UD folder with train, dev and test splits")
    ap.add_argument("--code", default=str(ROOT), help="checkout whose src/ runs the commands")
    ap.add_argument("--phases", default="train,report",
                    help="train, speed (re-time parsing of trained models), report")
    ap.add_argument("--rounds", type=int, default=5, help="speed phase: timed parses per model")
    ap.add_argument("--before", default=None, metavar="DIR",
                    help="report: runs of the same configurations with earlier code (their "
                         "speed.json) for before/after parse-speed ratios")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0],
                    help="train: the training seeds (arboreal train --seed) of each "
                         "configuration; report: every seed found in --runs is summarized")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--note", default="", help="text appended to the report")
    ap.add_argument("--section", default=None,
                    help="--write: the docs/benchmarks.md section (default: orders, or "
                         "orders_TREEBANK), e.g. for runs of a variant of the code")
    ap.add_argument("--title", default=None, help="--write: the section's title")
    args = ap.parse_args(argv)
    TREEBANK[0] = args.treebank
    runs = Path(args.runs)
    runs.mkdir(parents=True, exist_ok=True)
    phases = args.phases.split(",")
    if "train" in phases:
        for seed in args.seeds:
            for config in args.configs:
                train_config(config, runs, Path(args.code), seed)
    if "speed" in phases:
        for config in args.configs:
            retime(config, runs, Path(args.code), args.rounds)
    if "report" in phases:
        body = report(runs, args.configs, Path(args.before) if args.before else None)
        if args.note:
            body += "\n\n" + args.note
        print(body)
        if args.write:
            from _report import command_line, write_section

            short = args.treebank.removeprefix("UD_")
            write_section(args.section or ("orders" if short == "English-EWT"
                                           else f"orders_{short}"),
                          args.title or f"Orders 1-3 with the defaults of arboreal train "
                                        f"({short}, gold tags)",
                          command_line("orders.py", argv or sys.argv[1:], args.note), body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
