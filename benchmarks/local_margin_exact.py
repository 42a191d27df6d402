"""The local-margin learner (Wang et al. 2006 local constraints, dual coordinate descent)
against an independent exact solve of the same quadratic program (issue 19).

Takes the first N sentences of 3..L words of a treebank's train split, the words-only
feature templates (``FeatureSet("words")``, Wang et al.'s lexical setting), trains
``LocalMargin(C)`` with its default tolerance (relative duality gap 1e-4) and solves
the same problem, min 1/2 |th|^2 + C sum_c max(0, 1 - th . d_c) over the local
constraints, with scipy: its box-constrained dual, max sum a - 1/2 |A'a|^2, 0 <= a <= C,
by L-BFGS-B (matrix-free with the explicit sparse constraint matrix A; nothing of the
learner's solver is used). Prints one markdown row per C: constraints, learner passes,
learner objective P, the exact objective (P at scipy's solution; its own duality gap in
its column), their relative difference, the learner's certified relative gap, times.

    python benchmarks/local_margin_exact.py [--treebank DIR] [--sentences 30]
        [--max-length 12] [--C 0.1 1] [--bits 20] [--no-write]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
UD = ROOT.parent / "shared" / "data" / "ud"


def exact_solve(A, C: float) -> tuple[float, float, int, float]:
    """min 1/2 |th|^2 + C sum max(0, 1 - A th) via the dual with L-BFGS-B.

    A: scipy.sparse (k, d) constraint rows. Returns (primal at th = A'a, dual at a,
    iterations, seconds)."""
    from scipy.optimize import minimize

    k = A.shape[0]
    At = A.T.tocsr()

    def f(a):
        th = At @ a
        return 0.5 * float(th @ th) - float(a.sum()), A @ th - 1.0

    t = time.perf_counter()
    res = minimize(f, np.zeros(k), jac=True, method="L-BFGS-B", bounds=[(0.0, C)] * k,
                   options={"maxiter": 200000, "maxfun": 400000, "ftol": 1e-16,
                            "gtol": 1e-12, "maxcor": 50})
    seconds = time.perf_counter() - t
    a = res.x
    th = At @ a
    primal = 0.5 * float(th @ th) + C * float(np.maximum(0.0, 1.0 - A @ th).sum())
    dual = float(a.sum()) - 0.5 * float(th @ th)
    return primal, dual, int(res.nit), seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--treebank", type=Path, default=UD / "UD_Welsh-CCG",
                    help="a UD treebank folder with a *-ud-train.conllu (default Welsh-CCG)")
    ap.add_argument("--sentences", type=int, default=30, help="first N short sentences")
    ap.add_argument("--max-length", type=int, default=12, help="longest sentence (words)")
    ap.add_argument("--C", type=float, nargs="+", default=[0.1, 1.0])
    ap.add_argument("--bits", type=int, default=20, help="2**bits hashed weights")
    ap.add_argument("--no-write", action="store_true", help="print, do not update docs")
    args = ap.parse_args(argv)

    from arboreal.features import FeatureSet
    from arboreal.io.conllu import read_conllu
    from arboreal.learn import TrainingData
    from arboreal.learn.local_margin import LocalMargin, constraint_matrix, primal_objective

    train = sorted(args.treebank.glob("*-ud-train.conllu"))
    if not train:
        print(f"no *-ud-train.conllu in {args.treebank}", file=sys.stderr)
        return 2
    sents = [s for s in read_conllu(train[0]) if 3 <= len(s) <= args.max_length]
    sents = sents[: args.sentences]
    fs = FeatureSet("words", bits=args.bits).fit(sents)
    data = TrainingData(fs, fs.encode(sents), [s.heads.astype(np.int64) for s in sents])
    A = constraint_matrix(data)
    used = np.unique(A.indices)
    A = A[:, used].tocsr()
    words = sum(len(s) for s in sents)

    rows = []
    for C in args.C:
        learner = LocalMargin(C=C)
        t = time.perf_counter()
        w = learner.fit(data, 100000)
        t_learn = time.perf_counter() - t
        p_learn = primal_objective(data, w, C)
        p_ex, d_ex, nit, t_ex = exact_solve(A, C)
        rel = (p_learn - p_ex) / p_ex
        rows.append(
            f"| {C:g} | {A.shape[0]} | {len(learner.history)} | {p_learn:.8g} | {p_ex:.8g} "
            f"({(p_ex - d_ex) / p_ex:.1e}) | {rel:+.2e} | {learner.gap:.2e} | "
            f"{t_learn:.2f} | {t_ex:.2f} ({nit} it.) |")
        print(rows[-1], flush=True)

    body = "\n".join([
        f"{train[0].name}: the first {len(sents)} sentences of 3-{args.max_length} words "
        f"({words} words), words-only templates (`FeatureSet(\"words\", bits={args.bits})`, "
        f"{used.size} weights touched). Objective 1/2 |th|^2 + C sum_c max(0, 1 - th . d_c) "
        "over Wang et al.'s local constraints. Learner: `LocalMargin(C)` with default "
        "tolerance (stops at relative duality gap (P - D) / P <= 1e-4; the gap certifies "
        "P - P* <= gap * P). Exact: scipy L-BFGS-B on the box-constrained dual with the "
        "explicit constraint matrix (its own relative gap in parentheses). Relative "
        "difference: (P_learner - P_exact) / P_exact. Times in seconds (learner: whole fit, "
        "features included; numba kernels cached).",
        "",
        "| C | constraints | learner passes | learner P | exact P (its gap) | rel. difference "
        "| learner rel. gap | learner s | exact s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows])
    print()
    print(body)
    if not args.no_write:
        sys.path.insert(0, str(Path(__file__).parent))
        from _report import write_section

        cmd = (f"python benchmarks/local_margin_exact.py --treebank {args.treebank.name} "
               f"--sentences {args.sentences} --max-length {args.max_length} "
               f"--C {' '.join(f'{c:g}' for c in args.C)} --bits {args.bits}")
        write_section("local_margin_exact", "Local-margin learner vs the exact QP",
                      cmd, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
