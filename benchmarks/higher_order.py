"""Higher-order parsers on UD English-EWT (gold UPOS): accuracy, speed, training cost.

For each order (1 = a first-order perceptron like the pruner, 2 = siblings +
grandparents, 3 = grand-siblings + tri-siblings) this script trains a ``Parser``
(McDonald features) on EWT train in a fresh subprocess (so peak memory is that
order's own), evaluates UAS / LAS / complete match on dev and test (every word
counts, punctuation included), then times parsing the test file in another fresh
subprocess: model load + read + parse + write, numba kernels loaded from the
on-disk cache (a warm-up parse runs first).

Usage::

    python benchmarks/higher_order.py [--orders 1,2,3] [--epochs 10] [--pruner-epochs 10]
        [--train-limit N] [--phases train,speed,report] [--write]

Models and per-order results are kept in runs/higher_order/ (git-ignored), so the
speed and report phases can be rerun alone.

``--write`` replaces the "higher_order" section of docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "ud" / "UD_English-EWT"
sys.path.insert(0, str(ROOT / "benchmarks"))


def scores(pred, gold) -> dict:
    hs = np.concatenate([p.heads[1:] == g.heads[1:] for p, g in zip(pred, gold)])
    ls = np.concatenate([(p.heads[1:] == g.heads[1:]) & (p.deprels[1:] == g.deprels[1:])
                         for p, g in zip(pred, gold)])
    comp = np.mean([bool((p.heads[1:] == g.heads[1:]).all()) for p, g in zip(pred, gold)])
    return {"uas": 100 * hs.mean(), "las": 100 * ls.mean(), "complete": 100 * comp}


RUNS = ROOT / "runs" / "higher_order"


def spec_tag(spec: str) -> str:
    return spec.replace(":", "_").replace("+", "-").replace(",", "-").replace("@", "_t")


def split_spec(spec: str) -> tuple[int, str | None, float | None]:
    """"2" -> (2, None, None); "3:sibling+grandparent+grand-sibling@30" ->
    (3, "sibling,grandparent,grand-sibling", 30.0): order, parts, pruning temperature."""
    spec, _, temp = spec.partition("@")
    order, _, parts = spec.partition(":")
    return int(order), (parts.replace("+", ",") or None), (float(temp) if temp else None)


def worker_train(args) -> None:
    from arboreal.io.conllu import read_conllu
    from arboreal.models import Parser

    train = read_conllu(DATA / "en_ewt-ud-train.conllu")
    if args.train_limit:
        train = train[:args.train_limit]
    dev = read_conllu(DATA / "en_ewt-ud-dev.conllu")
    test = read_conllu(DATA / "en_ewt-ud-test.conllu")
    order, parts, temp = split_spec(args.spec)
    temp = args.temperature if temp is None else temp
    t0 = time.perf_counter()
    if order == 1:     # the pruner's setting: perceptron, Eisner, the pruner's epochs
        p = Parser.train(train, epochs=args.pruner_epochs, hash_bits=args.bits,
                         features="mcdonald", projectivize=False, seed=args.seed)
    else:
        p = Parser.train(train, order=order, parts=parts, epochs=args.epochs,
                         pruner_epochs=args.pruner_epochs, hash_bits=args.bits,
                         features="mcdonald", max_heads=args.max_heads,
                         prune_temperature=temp, learner=args.learner,
                         grand_scope=args.grand_scope, projectivize=args.projectivize,
                         seed=args.seed)
    train_s = time.perf_counter() - t0
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
    kinds = p.higher_order.kinds if p.higher_order is not None else ()
    out = {"spec": args.spec, "order": order, "parts": list(kinds), "train_s": train_s,
           "peak_gb": peak_gb, "stats": p.meta.get("seconds"), "temperature": temp,
           "max_heads": args.max_heads, "epochs": args.epochs, "learner": args.learner,
           "grand_scope": args.grand_scope if "trisib" in kinds else None,
           "projectivize": args.projectivize, "seed": args.seed,
           "pruner_epochs": args.pruner_epochs, "train_limit": args.train_limit,
           "train_sentences": len(train)}
    for name, data in (("dev", dev), ("test", test)):
        out[name] = scores(p.parse(data), data)
    if order > 1:
        out["prune_recall_dev"], out["kept_per_word_dev"] = p.pruning_recall(dev)
    p.save(args.model)
    print(json.dumps(out))


def worker_parse(args) -> None:
    t0 = time.perf_counter()
    from arboreal.io.conllu import read_conllu, write_conllu
    from arboreal.models import load_model
    t1 = time.perf_counter()
    c1 = time.process_time()
    p = load_model(args.model)
    sents = read_conllu(DATA / "en_ewt-ud-test.conllu")
    if args.limit:
        sents = sents[:args.limit]
    parsed = p.parse(sents)
    write_conllu(parsed, args.out)
    t2 = time.perf_counter()
    c2 = time.process_time()
    words = sum(len(s) for s in sents)
    print(json.dumps({"words": words, "import_s": t1 - t0, "load_parse_write_s": t2 - t1,
                      "load_parse_write_cpu_s": c2 - c1}))


def run(cmd: list[str]) -> dict:
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    sys.stderr.write(r.stderr)
    if r.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def report(specs: list[str], args) -> str:
    body = ["| order | parts | learner | pruning T | dev UAS | test UAS | test LAS | "
            "test complete | train time | peak train memory | parse words/s, wall (CPU) | "
            "gold arcs kept (dev) | kept arcs / word (dev) |", "|" + "---|" * 13]
    rows = [(RUNS, spec) for spec in specs]
    for other in args.also:    # the same orders from other run directories, after these
        rows += [(Path(other), spec) for spec in specs
                 if spec != "1" and (Path(other) / f"{spec_tag(spec)}.json").exists()]
    for runs, spec in rows:
        r = json.loads((runs / f"{spec_tag(spec)}.json").read_text())
        sp_file = runs / f"{spec_tag(spec)}.speed.json"
        wps = "-"
        if sp_file.exists():
            sp = json.loads(sp_file.read_text())
            wps = f"{sp['words'] / sp['load_parse_write_s']:,.0f}"
            if "load_parse_write_cpu_s" in sp:
                wps += f" ({sp['words'] / sp['load_parse_write_cpu_s']:,.0f})"
        rec = f"{100 * r['prune_recall_dev']:.2f}%" if "prune_recall_dev" in r else "-"
        kept = f"{r['kept_per_word_dev']:.2f}" if "kept_per_word_dev" in r else "-"
        temp = f"{r['temperature']:g}" if r["order"] > 1 else "-"
        parts = "+".join(r["parts"]) or "arc"
        if r.get("grand_scope"):
            parts += " (grand, gsib: " + ("every child)" if r["grand_scope"] == "all"
                                          else "outermost child)")
        learner = "perceptron" if r["order"] == 1 else r.get("learner", "perceptron")
        if r.get("projectivize"):
            learner += ", projectivized"
        if r.get("seed"):
            learner += f", seed {r['seed']}"
        body.append(f"| {r['order']} | {parts} | {learner} | {temp} | {r['dev']['uas']:.2f} | "
                    f"{r['test']['uas']:.2f} | {r['test']['las']:.2f} | {r['test']['complete']:.2f} | "
                    f"{r['train_s'] / 60:.1f} min | {r['peak_gb']:.2f} GB | {wps} | {rec} | {kept} |")
    body.append("")
    body.append(
        f"Learner column: averaged perceptron or averaged 1-best MIRA (C = inf; step "
        f"min(C, (wrong heads - margin) / ||phi(gold) - phi(pred)||^2)); "
        f"{args.epochs} epochs (pruner: averaged perceptron, {args.pruner_epochs} epochs), "
        f"2^{args.bits} hashed weights, McDonald feature set + higher-order templates, "
        f"pruning K={args.max_heads}, ratio 1e-4 on Matrix-Tree marginals of pruner scores / T "
        "(the pruning T column). Order-3 rows: grand and grand-sibling parts of every "
        "child (grand_tri_sibling_decode) or of each head's outermost child per side "
        "(Koo & Collins Model 2), as the parts column says. \"projectivized\": orders 2/3 "
        "learn from minimum-loss projective versions of the gold trees (the pruner from "
        "the trees as given). \"seed N\": the model epochs visit the training sentences "
        "in another random order (default seed 0). "
        "Order 1 is the pruner (first-order perceptron, Eisner) alone; "
        "orders 2 and 3 reuse it (its training time is included in theirs). "
        "Every model trains on the same sentences. "
        "UAS/LAS/complete count every word (punctuation included); labels come from the "
        "first-order parser's second-stage labeler (arboreal.scorers.labeler). Parse speed: one process, model load + read + parse + write of EWT "
        "test, numba kernels from the on-disk cache (a warm-up run first); the 2-core "
        "machine may be shared with other jobs (see below), which makes wall-clock timings "
        "noisy; the CPU figure divides by the process's CPU time (time.process_time) "
        "instead, which contention inflates less. Compare rows, not absolute figures. Peak memory: maximum "
        "resident set of the training process (includes parsing dev and test)."
        + (f" Training limited to the first {args.train_limit} sentences." if args.train_limit else ""))
    return "\n".join(body)


def paired(dirs: list[Path], a: str, b: str) -> str:
    """Word-level paired comparison of models ``b`` and ``a`` (specs) of each run
    directory on dev and test: words only one of them attaches correctly, and the
    two-sided sign test over those words."""
    from scipy.stats import binomtest

    from arboreal.io.conllu import read_conllu
    from arboreal.models import load_model

    data = {k: read_conllu(DATA / f"en_ewt-ud-{k}.conllu") for k in ("dev", "test")}
    lines = [f"| run directory | set | UAS {a} | UAS {b} | words only {b} attaches right | "
             f"words only {a} attaches right | sign test p |", "|" + "---|" * 7]
    for d in dirs:
        ma = load_model(d / f"{spec_tag(a)}.npz")
        mb = load_model(d / f"{spec_tag(b)}.npz")
        for k, sents in data.items():
            g = np.concatenate([x.heads[1:] for x in sents])
            ha = np.concatenate([h[1:] for h in ma.predict_heads(sents)])
            hb = np.concatenate([h[1:] for h in mb.predict_heads(sents)])
            only_b = int(((hb == g) & (ha != g)).sum())
            only_a = int(((ha == g) & (hb != g)).sum())
            p = binomtest(min(only_a, only_b), only_a + only_b, 0.5).pvalue
            lines.append(f"| {d.name} | {k} | {100 * (ha == g).mean():.2f} | "
                         f"{100 * (hb == g).mean():.2f} | {only_b} | {only_a} | {p:.3g} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--orders", default="1,2,3",
                    help="comma list of ORDER[:PART+PART...][@T], e.g. "
                         "1,2,3,3:sibling+grandparent+grand-sibling@30 (@T: pruning temperature)")
    ap.add_argument("--phases", default="train,speed,report")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--pruner-epochs", type=int, default=10)
    ap.add_argument("--bits", type=int, default=22)
    ap.add_argument("--max-heads", type=int, default=10)
    ap.add_argument("--temperature", type=float, default=30.0)
    ap.add_argument("--train-limit", type=int, default=0)
    ap.add_argument("--learner", choices=["perceptron", "mira"], default="perceptron")
    ap.add_argument("--grand-scope", choices=["outer", "all"], default="all",
                    help="with tri-siblings: grand/grand-sibling parts of the outermost child "
                         "per side (Model 2) or of every child")
    ap.add_argument("--seed", type=int, default=0,
                    help="order of the training sentences in each model epoch")
    ap.add_argument("--projectivize", action="store_true",
                    help="orders 2/3 learn from minimum-loss projective gold trees")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--worker", choices=["train", "parse"])
    ap.add_argument("--spec")
    ap.add_argument("--model")
    ap.add_argument("--out")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--runs", default=str(ROOT / "runs" / "higher_order"),
                    help="directory for models and per-run results")
    ap.add_argument("--also", action="append", default=[], metavar="DIR",
                    help="report: add the rows of the same orders (not 1) from another --runs "
                         "directory (e.g. another learner)")
    ap.add_argument("--paired", metavar="A,B",
                    help="report: word-level sign test of spec B against spec A in --runs and "
                         "every --also directory holding both models (re-parses dev and test)")
    ap.add_argument("--section", default="higher_order",
                    help="docs/benchmarks.md section to replace (default higher_order)")
    ap.add_argument("--title", default="Higher-order parsing (EWT, gold UPOS)")
    ap.add_argument("--note", default="", help="text appended to the report (e.g. the runs' commands)")
    args = ap.parse_args()
    if args.worker == "train":
        return worker_train(args)
    if args.worker == "parse":
        return worker_parse(args)
    if not DATA.exists():
        raise SystemExit(f"EWT not found at {DATA}")
    global RUNS
    RUNS = Path(args.runs)
    RUNS.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    me = str(Path(__file__).resolve())
    specs = args.orders.split(",")
    phases = args.phases.split(",")
    common = ["--epochs", str(args.epochs), "--pruner-epochs", str(args.pruner_epochs),
              "--bits", str(args.bits), "--max-heads", str(args.max_heads),
              "--temperature", str(args.temperature), "--train-limit", str(args.train_limit),
              "--learner", args.learner, "--grand-scope", args.grand_scope,
              *(["--projectivize"] if args.projectivize else []), "--seed", str(args.seed)]
    if "train" in phases:
        for spec in specs:
            model = RUNS / f"{spec_tag(spec)}.npz"
            res = run([py, me, "--worker", "train", "--spec", spec, "--model", str(model),
                       *common])
            (RUNS / f"{spec_tag(spec)}.json").write_text(json.dumps(res))
            print(json.dumps(res), flush=True)
    if "speed" in phases:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out.conllu")
            for spec in specs:
                model = str(RUNS / f"{spec_tag(spec)}.npz")
                run([py, me, "--worker", "parse", "--model", model, "--out", out,
                     "--limit", "50"])   # warm-up: numba kernels into the on-disk cache
                sp = run([py, me, "--worker", "parse", "--model", model, "--out", out])
                (RUNS / f"{spec_tag(spec)}.speed.json").write_text(json.dumps(sp))
                print(spec, json.dumps(sp), flush=True)
    if "report" in phases:
        text = report(specs, args)
        if args.paired:
            a, b = args.paired.split(",")
            dirs = [d for d in [RUNS] + [Path(x) for x in args.also]
                    if (d / f"{spec_tag(a)}.npz").exists() and (d / f"{spec_tag(b)}.npz").exists()]
            text += "\n\n" + paired(dirs, a, b)
        text += "\n\n" + args.note if args.note else ""
        print(text)
        if args.write:
            from _report import write_section
            argv = list(sys.argv[1:])
            if "--note" in argv:      # the note is in the body; keep the command line short
                i = argv.index("--note")
                del argv[i:i + 2]
            cmd = "python benchmarks/higher_order.py " + " ".join(argv) + " --note ..."
            write_section(args.section, args.title, cmd, text)


if __name__ == "__main__":
    main()
