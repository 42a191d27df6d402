"""Jointly labeled log-linear training vs. log-linear + second-stage labeler on EWT.

Both configurations use the same arc features, C, L-BFGS iterations, decoder and
best-iteration selection on UAS of the first ``--select-dev`` dev sentences; they
differ only in where labels come from:

* ``labeled``: ``--learner loglinear-labeled`` (labels scored jointly through the
  labeled partition function, Koo et al. 2007 §3.4);
* ``two-stage``: ``--learner loglinear`` + the averaged-perceptron label classifier.

Reports dev and test UAS / LAS (LAS on full labels and on the universal part of
DEPREL), the CPU seconds of one objective+gradient pass (one L-BFGS function
evaluation, at w = 0) over the training subset, and the training time. Prints only.

    python benchmarks/labeled_loglinear.py [--config labeled|two-stage|both]
        [--limit 4000] [--iterations 15] [--C 1.0] [--bits 23] [--select-dev 400]
        [--decoder eisner]
"""
from __future__ import annotations

import os

for _v in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EWT = ROOT.parent / "shared" / "data" / "ud" / "UD_English-EWT"


def _scores(gold, heads, labels):
    total = uas = las = ulas = 0
    for s, h, lab in zip(gold, heads, labels):
        ok = np.asarray(h)[1:] == s.heads[1:]
        pl = np.asarray(lab, dtype=object)[1:]
        gl = s.deprels[1:]
        total += len(s)
        uas += int(ok.sum())
        las += int((ok & (pl == gl)).sum())
        pu = np.array([x.split(":")[0] for x in pl], dtype=object)
        gu = np.array([x.split(":")[0] for x in gl], dtype=object)
        ulas += int((ok & (pu == gu)).sum())
    return {"UAS": 100 * uas / total, "LAS": 100 * las / total, "LAS_universal": 100 * ulas / total}


def _pass_seconds(config, train, args):
    """CPU seconds of one objective + gradient evaluation at w = 0 (after a warm-up)."""
    from arboreal.features import FeatureSet
    from arboreal.inference.structure import projective_or_not
    from arboreal.learn import TrainingData

    fs = FeatureSet("default", bits=args.bits).fit(train)
    enc = fs.encode(train)
    heads = [np.asarray(s.heads, dtype=np.int64) for s in train]
    projective = args.decoder == "eisner"
    if projective:
        from arboreal.inference.projective import min_loss_projective
        heads = min_loss_projective(heads, [True] * len(heads))
    if config == "labeled":
        from arboreal.features.labels import LabelFeatures
        from arboreal.learn.labeled_loglinear import LabeledBuckets, labeled_objective

        labels = np.unique(np.concatenate([s.deprels[1:] for s in train]).astype(str))
        index = {lab: i for i, lab in enumerate(labels.tolist())}
        gold = [np.array([-1] + [index[d] for d in s.deprels[1:].tolist()]) for s in train]
        lf = LabelFeatures.for_features(fs, labels, bits=args.label_feature_bits)
        data = TrainingData(fs, enc, heads, projective_or_not(projective, True),
                               extra={"label_features": lf, "labels": gold})
        lb = LabeledBuckets(data)
        obs = lb.observed_labeled()
        x = np.zeros(lb.dim)
        labeled_objective(lb, x, args.C, projective_or_not(projective, True), obs,
                          lb.buckets[:2])  # warm-up
        t = time.process_time()
        labeled_objective(lb, x, args.C, projective_or_not(projective, True), obs)
        return time.process_time() - t, len(labels)
    from arboreal.learn.loglinear import ScoredBuckets, loglinear_objective

    data = TrainingData(fs, enc, heads, projective_or_not(projective, True))
    sb = ScoredBuckets(data)
    obs = sb.observed(fs.dim)
    w = np.zeros(fs.dim)
    loglinear_objective(sb, w, args.C, projective_or_not(projective, True), obs, sb.buckets[:2])
    t = time.process_time()
    loglinear_objective(sb, w, args.C, projective_or_not(projective, True), obs)
    return time.process_time() - t, None


def run(config: str, args) -> dict:
    from arboreal.io.conllu import read_conllu
    from arboreal.models import Parser

    train = read_conllu(args.train)
    if args.limit:
        train = train[: args.limit]
    dev = read_conllu(args.dev)
    test = read_conllu(args.test)
    pass_s, n_labels = _pass_seconds(config, train, args)
    learner = "loglinear-labeled" if config == "labeled" else "loglinear"
    t_wall, t_cpu = time.perf_counter(), time.process_time()
    extra = {"label_feature_bits": args.label_feature_bits} if config == "labeled" else {}
    select = dev[: args.select_dev] if args.select_dev else dev
    model = Parser.train(train, select, learner=learner, decoder=args.decoder, epochs=args.iterations,
                         C=args.C, hash_bits=args.bits, features="default", verbose=True,
                         log=lambda r: print(f"[{config}] iteration {r.epoch}: {r.seconds:.1f} s, "
                                             f"dev UAS {r.dev_uas:.2f} LAS {r.dev_las:.2f}",
                                             file=sys.stderr, flush=True),
                         **extra)
    train_wall, train_cpu = time.perf_counter() - t_wall, time.process_time() - t_cpu
    out = {"config": config, "learner": learner, "train_sentences": len(train),
           "train_words": sum(len(s) for s in train), "C": args.C,
           "iterations": args.iterations, "decoder": args.decoder, "bits": args.bits,
           "select_dev_sentences": len(select),
           "best_iteration": model.meta.get("best_epoch"),
           "pass_cpu_s": round(pass_s, 2), "train_wall_s": round(train_wall, 1),
           "train_cpu_s": round(train_cpu, 1), "labels": n_labels,
           "seconds": model.meta.get("seconds")}
    for name, gold in (("dev", dev), ("test", test)):
        heads, labels = model.predict(gold)
        out[name] = {k: round(v, 2) for k, v in _scores(gold, heads, labels).items()}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", choices=("labeled", "two-stage", "both"), default="both")
    ap.add_argument("--train", default=str(EWT / "en_ewt-ud-train.conllu"))
    ap.add_argument("--dev", default=str(EWT / "en_ewt-ud-dev.conllu"))
    ap.add_argument("--test", default=str(EWT / "en_ewt-ud-test.conllu"))
    ap.add_argument("--limit", type=int, default=4000, help="first N training sentences (0: all)")
    ap.add_argument("--iterations", type=int, default=15)
    ap.add_argument("--C", type=float, default=1.0)
    ap.add_argument("--bits", type=int, default=23)
    ap.add_argument("--label-feature-bits", type=int, default=16)
    ap.add_argument("--select-dev", type=int, default=400,
                    help="pick the best iteration on the first N dev sentences (0: all); "
                         "the full dev and test sets are scored at the end")
    ap.add_argument("--decoder", choices=("eisner", "cle"), default="eisner")
    ap.add_argument("--report", nargs="+", metavar="RESULT.json",
                    help="write the docs/benchmarks.md section from result lines printed by "
                         "earlier runs of this script (one JSON object per line) and exit")
    ap.add_argument("--note", default="", help="text appended to the report")
    args = ap.parse_args(argv)
    if args.report:
        return report(args.report, args.note)
    configs = ("labeled", "two-stage") if args.config == "both" else (args.config,)
    for config in configs:
        print(json.dumps(run(config, args)), flush=True)
    return 0


def report(paths: list[str], note: str) -> int:
    """docs/benchmarks.md section ``labeled_loglinear`` from saved result lines."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _report import write_section

    rows = []
    for p in paths:
        rows += [json.loads(line) for line in Path(p).read_text().splitlines() if line.strip()]
    if not rows:
        return 1
    r0 = rows[0]
    lines = [f"EWT train, first {r0['train_sentences']} sentences ({r0['train_words']} words); "
             f"default features, 2^{r0['bits']} weights, C = {r0['C']}, {r0['iterations']} L-BFGS "
             f"iterations, {r0['decoder']} decoding, single root; the iteration is chosen on UAS of "
             f"the first {r0['select_dev_sentences']} dev sentences, then all of dev and test are "
             "scored. LAS on full labels (universal part in parentheses).", "",
             "| configuration | learner | best iteration | dev UAS | dev LAS | test UAS | test LAS "
             "| CPU s per pass | train CPU s | train wall s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        d, t = r["dev"], r["test"]
        lines.append(f"| {r['config']} | {r['learner']} | {r['best_iteration']} | {d['UAS']:.2f} | "
                     f"{d['LAS']:.2f} ({d['LAS_universal']:.2f}) | {t['UAS']:.2f} | "
                     f"{t['LAS']:.2f} ({t['LAS_universal']:.2f}) | {r['pass_cpu_s']:.1f} | "
                     f"{r['train_cpu_s']:.0f} | {r['train_wall_s']:.0f} |")
    body = "\n".join(lines) + ("\n\n" + note if note else "") + "\n"
    configs = " / ".join(r["config"] for r in rows)
    cmd = (f"python benchmarks/labeled_loglinear.py --config {{{configs}}} --limit "
           f"{r0['train_sentences']} --iterations {r0['iterations']} --C {r0['C']} --bits {r0['bits']}"
           f" --select-dev {r0['select_dev_sentences']}")
    write_section("labeled_loglinear", "Jointly labeled log-linear training vs. log-linear + "
                  "labeler (EWT subset)", cmd, body)
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
