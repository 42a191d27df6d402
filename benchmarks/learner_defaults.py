"""The learners with the defaults of ``arboreal train`` on the six treebanks of the
Koo et al. 2007 rerun (docs/koo2007.md): averaged perceptron, log-linear, EG.

Each (treebank, learner) is one command, ``arboreal train TRAIN --dev HELD -o MODEL
--no-tagger --no-tokenizer --learner L``, every other option the command's default
(so log-linear and EG choose C and the number of iterations on HELD themselves),
then ``arboreal parse MODEL TEST`` and unlabeled attachment over every word. Splits
as in benchmarks/koo2007.py: a treebank with a train split trains on it and tunes on
dev; one without trains on 90% of dev and tunes on the other 10% (seeded).

    python benchmarks/learner_defaults.py [--learners perceptron loglinear eg]
        [--langs Ara Dut ...] [--order 2] [--runs runs/learner_defaults]
        [--phases train,report] [--write [--section NAME --title TITLE --note TEXT]]

A learner may carry options, ``NAME:KEY=VALUE[,KEY=VALUE...]`` (each passed as
``--learner-option KEY=VALUE``; e.g. ``mira:cost=0``); its runs are kept as
``NAME-KEY=VALUE...``.

``--order 2`` adds ``--order 2`` to every training command (second-order parts,
the same pruner for every learner); its runs are kept as ``LEARNER-o2``.
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
sys.path.insert(0, str(ROOT / "benchmarks"))
from koo2007 import LANGS, load_language  # noqa: E402
from orders import heads_and_labels  # noqa: E402


def run_timed(cmd: list[str], env: dict) -> tuple[float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{res.stderr[-3000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), res.stderr


def sentence_correct(gold: Path, pred: Path) -> np.ndarray:
    """Correct heads per sentence (the unit of Koo et al.'s sign test)."""
    from arboreal.io.conllu import read_conllu

    return np.array([int((p.heads[1:] == g.heads[1:]).sum())
                     for g, p in zip(read_conllu(gold), read_conllu(pred))])


def learner_run(spec: str) -> tuple[str, list[str], str]:
    """(learner, its ``--learner-option`` arguments, run name) of a learner spec
    ``NAME[:KEY=VALUE,...]``."""
    learner, _, opts = spec.partition(":")
    pairs = [o for o in opts.split(",") if o]
    args = [a for o in pairs for a in ("--learner-option", o)]
    return learner, args, "-".join([learner, *pairs])


def train_one(lang: str, spec: str, runs: Path, code: Path, order: int = 1) -> dict:
    from arboreal.io.conllu import write_conllu

    learner, options, run = learner_run(spec)
    folder, prefix = {k: (f, p) for k, f, p in LANGS}[lang]
    d = runs / lang
    d.mkdir(parents=True, exist_ok=True)
    files = {k: d / f"{k}.conllu" for k in ("train", "held", "test")}
    if not all(f.exists() for f in files.values()):
        train, held, test, how = load_language(folder, prefix, 0, 0)
        for k, data in zip(("train", "held", "test"), (train, held, test)):
            write_conllu(data, files[k])
        (d / "how.txt").write_text(how)
    env = dict(os.environ, PYTHONPATH=str(code / "src"), NUMBA_NUM_THREADS="1",
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    exe = [sys.executable, "-m", "arboreal"]
    name = run if order == 1 else f"{run}-o{order}"
    model, out = d / f"{name}.npz", d / f"{name}.test.conllu"
    t = time.perf_counter()
    cpu, _ = run_timed(exe + ["train", str(files["train"]), "--dev", str(files["held"]),
                              "-o", str(model), "--no-tagger", "--no-tokenizer",
                              "--learner", learner, *options, "--order", str(order),
                              "--quiet"], env)
    wall = time.perf_counter() - t
    run_timed(exe + ["parse", str(model), str(files["test"]), "-o", str(out)], env)
    gold_h, _ = heads_and_labels(files["test"])
    pred_h, _ = heads_and_labels(out)
    meta = json.loads(subprocess.run(
        [sys.executable, "-c", "import json,sys; from arboreal.io.model_file import "
         "load_model_file; m,_=load_model_file(sys.argv[1]); "
         "print(json.dumps({k: m.get(k) for k in ('best_epoch', 'selection')}))",
         str(model)], capture_output=True, text=True, env=env, check=True).stdout)
    result = {"lang": lang, "learner": name, "uas": 100 * float((pred_h == gold_h).mean()),
              "train_wall_s": wall, "train_cpu_s": cpu, "best_epoch": meta["best_epoch"],
              "selection": meta["selection"], "how": (d / "how.txt").read_text(),
              "load_at_start": os.getloadavg()[0],
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    np.save(d / f"{name}.sent.npy", sentence_correct(files["test"], out))
    (d / f"{name}.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: result[k] for k in ("lang", "learner", "uas", "train_wall_s")}),
          flush=True)
    return result


def report(runs: Path, langs: list[str], learners: list[str], order: int = 1) -> str:
    suffix = "" if order == 1 else f"-o{order}"
    learners = [learner_run(spec)[2] + suffix for spec in learners]
    base = "perceptron" + suffix
    res = {(r["lang"], r["learner"]): r for lang in langs for learner in learners
           if (p := runs / lang / f"{learner}.json").exists() for r in [json.loads(p.read_text())]}
    # beside a higher order, the first-order runs of the same learners (if made)
    first = [] if order == 1 else [learner[: -len(suffix)] for learner in learners]
    res.update({(r["lang"], r["learner"]): r for lang in langs for learner in first
                if (p := runs / lang / f"{learner}.json").exists()
                for r in [json.loads(p.read_text())]})
    head = "| learner | " + " | ".join(langs) + " | average |"
    lines = [head, "|---|" + "---:|" * (len(langs) + 1)]
    for learner in first + learners:
        vals = [res.get((lang, learner), {}).get("uas") for lang in langs]
        avg = f"**{np.mean(vals):.2f}**" if all(v is not None for v in vals) else "-"
        lines.append(f"| {learner} | " + " | ".join("-" if v is None else f"{v:.2f}"
                                                     for v in vals) + f" | {avg} |")
    lines += ["", "| learner | treebank | chosen C | chosen iterations | held-out UAS by C | "
              "train CPU |", "|---|---|---:|---:|---|---:|"]
    for learner in learners:
        for lang in langs:
            r = res.get((lang, learner))
            if r is None:
                continue
            sel = r["selection"] or {}
            by_c = ", ".join(f"{float(c):g}: {u:.2f}" for c, u in
                             (sel.get("dev_uas_by_C") or {}).items())
            lines.append(f"| {learner} | {lang} | {sel.get('C', '-')} | {r['best_epoch']} | "
                         f"{by_c or '-'} | {r['train_cpu_s']:.0f} s |")
    lines += ["", f"| learner vs {base} | sentences better | worse | sign test p |",
              "|---|---:|---:|---:|"]
    for learner in learners:
        if learner == base:
            continue
        better = worse = 0
        for lang in langs:
            a, b = runs / lang / f"{learner}.sent.npy", runs / lang / f"{base}.sent.npy"
            if a.exists() and b.exists():
                x, y = np.load(a), np.load(b)
                better += int((x > y).sum())
                worse += int((x < y).sum())
        n, k = better + worse, min(better, worse)
        p = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n) if n else 1.0
        lines.append(f"| {learner} | {better} | {worse} | {p:.3g} |")
    hows = sorted({(r["lang"], r["how"]) for r in res.values()})
    dates = sorted({r["date"] for r in res.values()})
    lines += ["", "Test UAS (every word, punctuation included). Splits: " +
              "; ".join(f"{lang}: {how}" for lang, how in hows) +
              f". Runs: {dates[0]} to {dates[-1]}." if dates else ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--learners", nargs="+", default=["perceptron", "loglinear", "eg"])
    ap.add_argument("--langs", nargs="+", default=[k for k, _, _ in LANGS])
    ap.add_argument("--runs", default=str(ROOT / "runs" / "learner_defaults"))
    ap.add_argument("--code", default=str(ROOT), help="checkout whose src/ runs the commands")
    ap.add_argument("--phases", default="train,report")
    ap.add_argument("--order", type=int, default=1, choices=(1, 2))
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--section", default=None,
                    help="--write: the docs/benchmarks.md section (default: learner_defaults, "
                         "with --order 2 learner_defaults_order2)")
    ap.add_argument("--title", default=None, help="--write: the section's title")
    ap.add_argument("--note", default="", help="text appended to the report")
    args = ap.parse_args(argv)
    runs = Path(args.runs)
    phases = args.phases.split(",")
    if "train" in phases:
        for lang in args.langs:
            for learner in args.learners:
                train_one(lang, learner, runs, Path(args.code), args.order)
    if "report" in phases:
        body = report(runs, args.langs, args.learners, args.order)
        if args.note:
            body += "\n\n" + args.note
        print(body)
        if args.write:
            from _report import command_line, write_section

            key, title = "learner_defaults", ("Learners with the defaults of arboreal train "
                                              "(six UD treebanks of the Koo et al. 2007 rerun)")
            if args.order != 1:
                key += f"_order{args.order}"
                title = title.replace("arboreal train", f"arboreal train --order {args.order}")
            write_section(args.section or key, args.title or title,
                          command_line("learner_defaults.py", argv or sys.argv[1:],
                                       args.note), body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
