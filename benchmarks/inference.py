#!/usr/bin/env python
"""Time arboreal's tree-inference core against torch-struct and SuPar, in one run.

Run it in the benchmark environment (``bash benchmarks/setup_env.sh`` builds
``.benchenv`` with the CPU torch wheel, torch-struct and SuPar)::

    .benchenv/bin/python benchmarks/inference.py            # full run, writes docs/benchmarks.md
    .benchenv/bin/python benchmarks/inference.py --quick    # smoke run (small n and B, few repeats)
    .venv/bin/python benchmarks/inference.py --no-peers     # arboreal only (no torch needed)

What is measured: B random sentences (arc scores ~ N(0, 1), all of length n,
fixed seed) at n in {10, 20, 40, 80}, float32 and float64, on ONE thread.
Every routine is warmed up first (numba compilation, torch allocator), then
timed timeit-style (gc off, several loops per repeat for fast calls) and the
median per-call time over the repeats is reported. All libraries get the very
same scores; the conversion into each peer's layout happens before timing.

Peer conventions (read from their source in .benchenv):

* arboreal: ``scores[b, h, m]`` (B, n+1, n+1), h = 0 is the root.
* torch-struct (``NonProjectiveDependencyCRF``, ``DependencyCRF``):
  log potentials (B, n, n), ``[b, h-1, m-1]`` for words h, m and the root arc
  0 -> m on the diagonal ``[b, m-1, m-1]``. Its Matrix-Tree code adds
  ``eps = 1e-5`` to every exp(score) of the Laplacian, so its log Z is biased
  by design; the agreement check also calls its functions with ``eps=0`` to
  verify our conversion exactly.
* SuPar (``MatrixTree``, ``DependencyCRF``, ``structs.fn.mst``): scores
  (B, n+1, n+1) indexed ``[b, m, h]`` (dependent, head), position 0 = root;
  the transpose of ours. ``MatrixTree`` works in float64 internally and
  returns log Z cast to float32 whatever the input dtype. For ``mst`` we
  mask arcs into the root and self-loops with SuPar's ``MIN`` as its own
  docstring example does.

Each check compares log Z, marginals and argmax tree scores on the s = 1
inputs and prints the largest difference; a mismatch is a conversion bug
(or a peer bug, reported as such: SuPar's single-root ``mst`` only retries
the roots CLE picked, which is not exact, so its trees may score lower).
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
             "NUMBA_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib.metadata as _md  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from dataclasses import asdict, dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

SEED = 20261121
K_BEST = 5
SCALES = (1.0, 10.0, 100.0, 1000.0)
TS_ERR_LEAF = "RuntimeError (in-place fill on leaf)"


# ----------------------------------------------------------------------------
# timing

@dataclass
class Timing:
    routine: str
    n: int
    dtype: str
    library: str
    ms: float | None = None          # median CPU time per call (one thread)
    wall_ms: float | None = None     # median wall time per call
    reps: int = 0
    loops: int = 0
    error: str | None = None


class _Plan:
    """Timing state of one library inside a group (see ``measure_group``)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn, self.loops, self.reps = fn, 1, 1
        self.cpu: list[float] = []
        self.wall: list[float] = []
        self.result: Any = None
        self.error: BaseException | None = None

    def repeat(self) -> None:
        c0, w0 = time.process_time(), time.perf_counter()
        for _ in range(self.loops):
            self.result = self.fn()
        self.cpu.append((time.process_time() - c0) / self.loops)
        self.wall.append((time.perf_counter() - w0) / self.loops)


def measure_group(entries: list[tuple[str, Callable[[], Any], Callable[[], Any] | None]],
                  target_s: float, min_reps: int, max_reps: int,
                  slow_s: float = 1.0, slow_budget_s: float = 6.0) -> dict[str, _Plan]:
    """Time several libraries' versions of one routine, interleaved, timeit-style.

    ``entries``: ``(library, fn, warm)``. Warm-up: ``warm()`` (the same call on
    a slice of the batch, for slow peers) or else ``fn()`` itself (numba
    compilation, allocator). Then one call on the full batch estimates each
    cost: fast calls are looped so that a repeat lasts >= ~20 ms and the
    number of repeats aims at ``target_s``, clamped to [min_reps, max_reps];
    a call slower than ``slow_s`` is kept as a sample and repeated only while
    ``slow_budget_s`` allows (at least once). The repeats then run round-robin
    over the libraries, so that all of them see the same machine load; the
    figures are medians of the process CPU time (one thread) and wall time.
    A library whose call raises keeps the exception in ``.error``.
    """
    plans: dict[str, _Plan] = {}
    for library, fn, warm in entries:
        plan = plans[library] = _Plan(fn)
        try:
            (warm or fn)()
            plan.repeat()
        except Exception as exc:  # noqa: BLE001 -- a peer failing is a result
            plan.error = exc
            continue
        one = max(plan.cpu[0], 1e-9)
        if one >= slow_s:
            plan.reps = max(1, min(min_reps, int(slow_budget_s / one)))
        else:
            plan.cpu, plan.wall = [], []
            plan.loops = max(1, int(0.02 / one))
            plan.reps = max(min_reps, min(max_reps, int(target_s / (one * plan.loops))))
    active = [p for p in plans.values() if p.error is None]
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        while any(len(p.cpu) < p.reps for p in active):
            for p in active:
                if len(p.cpu) < p.reps:
                    p.repeat()
    finally:
        if was_enabled:
            gc.enable()
    return plans


def describe_error(exc: BaseException) -> str:
    msg = str(exc)
    if isinstance(exc, RuntimeError) and "leaf Variable that requires grad" in msg and "in-place" in msg:
        return TS_ERR_LEAF
    first = msg.strip().splitlines()[0] if msg.strip() else ""
    return f"{type(exc).__name__}: {first[:80]}"


# ----------------------------------------------------------------------------
# data and conversions

def make_scores(rng: np.random.Generator, B: int, n: int, scale: float = 1.0) -> np.ndarray:
    """(B, n+1, n+1) float64 arc scores ~ N(0, scale^2) in arboreal's layout."""
    return rng.standard_normal((B, n + 1, n + 1)) * scale


def valid_arc_mask(n: int) -> np.ndarray:
    """(n+1, n+1) bool: True where scores[h, m] is a real arc (m >= 1, h != m)."""
    mask = np.ones((n + 1, n + 1), dtype=bool)
    mask[:, 0] = False
    np.fill_diagonal(mask, False)
    return mask


def tree_scores(S: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """Sum of S[b, heads[b, m], m] over m = 1..n; heads (B, n+1) or (B, k, n+1)."""
    S = np.asarray(S, dtype=np.float64)
    n = S.shape[-1] - 1
    m = np.arange(1, n + 1)
    if heads.ndim == 3:
        return np.stack([tree_scores(S, heads[:, j]) for j in range(heads.shape[1])], 1)
    return S[np.arange(S.shape[0])[:, None], heads[:, 1:], m[None, :]].sum(1)


def tree_problems(heads: np.ndarray, single_root: bool) -> int:
    """Number of rows of heads (B, n+1) that are not a tree rooted at 0 (or not single-root)."""
    heads = np.asarray(heads)
    B, N1 = heads.shape
    h = heads[:, 1:].astype(np.int64)
    bad = ((h < 0) | (h > N1 - 1)).any(1)
    h = np.clip(h, 0, N1 - 1)
    walk = np.concatenate([np.zeros((B, 1), np.int64), h], 1)   # walk[b, i] = head of i, 0 -> 0
    pos = np.tile(np.arange(N1), (B, 1))
    for _ in range(int(np.ceil(np.log2(max(N1, 2)))) + 1):     # pointer doubling
        walk = np.take_along_axis(walk, walk, 1)
    bad |= (np.take_along_axis(walk, pos, 1)[:, 1:] != 0).any(1)
    if single_root:
        bad |= (heads[:, 1:] == 0).sum(1) != 1
    return int(bad.sum())


class Peers:
    """torch-struct and SuPar behind arboreal-layout adapters (torch imported lazily)."""

    def __init__(self) -> None:
        warnings.filterwarnings("ignore")
        import torch
        torch.set_num_threads(1)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:
            pass
        import torch_struct
        import torch_struct.deptree as ts_deptree
        from supar.structs import DependencyCRF as SuparDependencyCRF
        from supar.structs import MatrixTree
        from supar.structs.fn import mst
        from supar.utils.common import MIN

        self.torch = torch
        self.ts = torch_struct
        self.ts_deptree = ts_deptree
        self.MatrixTree = MatrixTree
        self.SuparDependencyCRF = SuparDependencyCRF
        self.mst = mst
        self.MIN = MIN

    # --- layout conversions (done before timing) ---
    def to_ts(self, S: np.ndarray):
        """(B, n+1, n+1) [h, m] -> torch-struct (B, n, n): words [h-1, m-1], root 0 -> m on the diagonal."""
        lp = np.ascontiguousarray(S[:, 1:, 1:]).copy()
        n = lp.shape[1]
        lp[:, np.arange(n), np.arange(n)] = S[:, 0, 1:]
        return self.torch.from_numpy(lp)

    def to_supar(self, S: np.ndarray, mask_ignored: bool = False):
        """(B, n+1, n+1) [h, m] -> SuPar (B, n+1, n+1) [m, h] (transpose)."""
        sp = np.ascontiguousarray(np.swapaxes(S, 1, 2)).copy()
        if mask_ignored:
            sp[:, 0, 1:] = self.MIN              # the root has no head
            n1 = sp.shape[1]
            sp[:, np.arange(1, n1), np.arange(1, n1)] = self.MIN   # no self-loops
        return self.torch.from_numpy(sp)

    def ts_marg_to_ours(self, M) -> np.ndarray:
        M = M.detach().double().numpy()
        B, n, _ = M.shape
        out = np.zeros((B, n + 1, n + 1))
        out[:, 1:, 1:] = M
        out[:, 0, 1:] = M[:, np.arange(n), np.arange(n)]
        out[:, np.arange(1, n + 1), np.arange(1, n + 1)] = 0.0
        return out

    @staticmethod
    def supar_marg_to_ours(M) -> np.ndarray:
        return np.swapaxes(M.detach().double().numpy(), 1, 2)

    # --- the timed calls, exactly as each library computes them ---
    def ts_nonproj(self, lp, multiroot: bool):
        d = self.ts.NonProjectiveDependencyCRF(lp, multiroot=multiroot)
        return d.partition, d.marginals

    def ts_proj(self, lp, multiroot: bool = False):
        d = self.ts.DependencyCRF(lp, multiroot=multiroot)
        return d.partition, d.marginals

    def ts_eisner(self, lp, multiroot: bool = False):
        return self.ts.DependencyCRF(lp, multiroot=multiroot).argmax

    def supar_matrix_tree(self, sp, multiroot: bool):
        d = self.MatrixTree(sp, None, multiroot)
        return d.log_partition, d.marginals

    def supar_proj(self, sp, multiroot: bool = False):
        d = self.SuparDependencyCRF(sp, None, multiroot)
        return d.log_partition, d.marginals

    def supar_eisner(self, sp, multiroot: bool = False):
        return self.SuparDependencyCRF(sp, None, multiroot).argmax

    def supar_mst(self, sp, mask, multiroot: bool = False):
        return self.mst(sp, mask, multiroot)

    def supar_mask(self, B: int, n: int):
        mask = self.torch.ones(B, n + 1, dtype=self.torch.bool)
        mask[:, 0] = False
        return mask


# ----------------------------------------------------------------------------
# arboreal adapters

def load_arboreal():
    """The public ``arboreal.inference`` module."""
    import arboreal.inference as inf
    return inf


def combined_call(inf):
    """arboreal's one-pass ``log_partition_and_marginals`` (log Z and marginals from
    one elimination, as training uses them)."""
    return inf.log_partition_and_marginals


def ours_logz_marg(inf, S, lengths, projective: bool, single_root: bool):
    return combined_call(inf)(S, projective=projective, single_root=single_root, lengths=lengths)


# ----------------------------------------------------------------------------
# the benchmark

@dataclass
class Check:
    routine: str
    n: int
    dtype: str
    peer: str
    quantity: str
    max_abs: float | None = None
    max_rel: float | None = None
    note: str = ""


@dataclass
class Results:
    timings: list[Timing] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    stability: list[dict] = field(default_factory=list)
    tree_problems: list[dict] = field(default_factory=list)
    meta: dict = field(default_factory=dict)


def _np(x) -> np.ndarray:
    if hasattr(x, "detach"):
        return x.detach().double().numpy()
    return np.asarray(x, dtype=np.float64)


def run_sizes(args, res: Results, inf, peers: Peers | None) -> None:
    rng = np.random.default_rng(SEED)
    tm = dict(target_s=args.target, min_reps=args.min_reps, max_reps=args.max_reps)
    for n in args.sizes:
        S64 = make_scores(rng, args.batch, n)
        valid = valid_arc_mask(n)
        for dtype in args.dtypes:
            S = S64.astype(dtype)
            B = S.shape[0]
            lengths = np.full(B, n, dtype=np.int64)
            tag = dict(n=n, dtype=dtype)
            print(f"-- n={n} {dtype}", flush=True)

            def timed(routine: str, entries) -> dict[str, Any]:
                """Time ``entries`` [(library, fn, warm)] interleaved; record them; return results."""
                plans = measure_group(entries, **tm)
                out: dict[str, Any] = {}
                for library, _, _ in entries:
                    p = plans[library]
                    t = Timing(routine, n, dtype, library)
                    if p.error is not None:
                        t.error, out[library] = describe_error(p.error), None
                    else:
                        t.ms, t.wall_ms = statistics.median(p.cpu) * 1e3, statistics.median(p.wall) * 1e3
                        t.reps, t.loops, out[library] = p.reps, p.loops, p.result
                    res.timings.append(t)
                    shown = (f"{t.ms:9.3f} ms cpu {t.wall_ms:9.3f} ms wall  ({t.reps}x{t.loops})"
                             if t.ms is not None else t.error)
                    print(f"   {routine:<28} {library:<13} {shown}", flush=True)
                return out

            def check(routine, peer, quantity, ours_v, peer_v, note=""):
                a, b = _np(ours_v), _np(peer_v)
                diff = np.abs(a - b)
                rel = diff / np.maximum(1.0, np.abs(a))
                c = Check(routine, n, dtype, peer, quantity, float(np.nanmax(diff)), float(np.nanmax(rel)), note)
                if not np.isfinite(diff).all():
                    c.note = (note + "; " if note else "") + f"{int((~np.isfinite(diff)).sum())} non-finite"
                res.checks.append(c)

            timed_results: dict[str, Any] = {}
            ts_in = peers.to_ts(S) if peers else None
            sp_in = peers.to_supar(S) if peers else None
            W = min(B, 16)      # warm-up slice for the peers (their slow calls would double the run time)
            ts_w = ts_in[:W].clone() if peers else None
            sp_w = sp_in[:W].clone() if peers else None

            # --- non-projective log Z + marginals, single and multi root ---
            for single_root in (True, False):
                routine = f"nonproj logZ+marg {'single' if single_root else 'multi'}"
                entries = []
                if inf is not None:
                    entries.append(("arboreal", lambda sr=single_root: ours_logz_marg(inf, S, lengths, False, sr),
                                    None))
                if peers:
                    entries += [("torch-struct", lambda sr=single_root: peers.ts_nonproj(ts_in, not sr),
                                 lambda sr=single_root: peers.ts_nonproj(ts_w, not sr)),
                                ("SuPar", lambda sr=single_root: peers.supar_matrix_tree(sp_in, not sr),
                                 lambda sr=single_root: peers.supar_matrix_tree(sp_w, not sr))]
                got = timed(routine, entries)
                ours = got.get("arboreal")
                if peers:
                    out_ts, out_sp = got["torch-struct"], got["SuPar"]
                    # exact conversion check: torch-struct without its eps, in float64
                    lp64 = peers.to_ts(S.astype(np.float64))
                    z0 = peers.ts_deptree.deptree_part(lp64, not single_root, eps=0.0)
                    m0 = peers.ts_marg_to_ours(peers.ts_deptree.deptree_nonproj(lp64, not single_root, eps=0.0))
                    ref_z = _np(ours[0]) if ours is not None else _np(out_sp[0]) if out_sp else None
                    ref_m = _np(ours[1]) if ours is not None else (
                        peers.supar_marg_to_ours(out_sp[1]) if out_sp else None)
                    ref_name = "arboreal" if ours is not None else "SuPar"
                    if ref_z is not None:
                        check(routine, "torch-struct eps=0 (f64)", f"logZ vs {ref_name}", ref_z, z0)
                        check(routine, "torch-struct eps=0 (f64)", f"marginals vs {ref_name}",
                              ref_m[:, valid], m0[:, valid])
                    if ours is not None and out_ts is not None:
                        check(routine, "torch-struct", "logZ", ours[0], out_ts[0], "eps=1e-5 bias")
                        check(routine, "torch-struct", "marginals", ours[1][:, valid],
                              peers.ts_marg_to_ours(out_ts[1])[:, valid], "eps=1e-5 bias")
                    if ours is not None and out_sp is not None:
                        check(routine, "SuPar", "logZ", ours[0], out_sp[0], "SuPar returns float32 log Z")
                        check(routine, "SuPar", "marginals", ours[1][:, valid],
                              peers.supar_marg_to_ours(out_sp[1])[:, valid])

            # --- projective log Z + marginals (single root) ---
            routine = "proj logZ+marg single"
            entries = []
            if inf is not None:
                entries.append(("arboreal", lambda: ours_logz_marg(inf, S, lengths, True, True), None))
            if peers:
                entries += [("torch-struct", lambda: peers.ts_proj(ts_in, False), lambda: peers.ts_proj(ts_w, False)),
                            ("SuPar", lambda: peers.supar_proj(sp_in, False), lambda: peers.supar_proj(sp_w, False))]
            got = timed(routine, entries)
            ours = got.get("arboreal")
            if peers:
                out_sp = got["SuPar"]
                if ours is not None and out_sp is not None:
                    check(routine, "SuPar", "logZ", ours[0], out_sp[0])
                    check(routine, "SuPar", "marginals", ours[1][:, valid],
                          peers.supar_marg_to_ours(out_sp[1])[:, valid])

            # --- Eisner argmax (single root) ---
            routine = "eisner single"
            entries = []
            if inf is not None:
                entries.append(("arboreal", lambda: inf.eisner(S, single_root=True, lengths=lengths), None))
            if peers:
                entries += [("SuPar", lambda: peers.supar_eisner(sp_in, False), lambda: peers.supar_eisner(sp_w, False)),
                            ("torch-struct", lambda: peers.ts_eisner(ts_in, False),
                             lambda: peers.ts_eisner(ts_w, False))]
            got = timed(routine, entries)
            ours = timed_results[routine] = got.get("arboreal")
            if ours is not None:
                res.tree_problems.append(dict(routine=routine, **tag, bad=tree_problems(ours, True)))
            if peers:
                out_sp = got["SuPar"]
                if out_sp is not None:
                    sp_heads = out_sp.numpy()
                    res.tree_problems.append(dict(routine=routine + " (SuPar)", **tag,
                                                  bad=tree_problems(sp_heads, True)))
                    if ours is not None:
                        check(routine, "SuPar", "tree score", tree_scores(S, np.asarray(ours)),
                              tree_scores(S, sp_heads))

            # --- Chu-Liu-Edmonds (single root) ---
            routine = "chu_liu_edmonds single"
            entries = []
            if inf is not None:
                entries.append(("arboreal", lambda: inf.chu_liu_edmonds(S, single_root=True, lengths=lengths), None))
            if peers:
                sp_mst = peers.to_supar(S, mask_ignored=True)
                mask = peers.supar_mask(B, n)
                entries.append(("SuPar", lambda: peers.supar_mst(sp_mst, mask, False),
                                lambda: peers.supar_mst(sp_mst[:W], mask[:W], False)))
            got = timed(routine, entries)
            ours = got.get("arboreal")
            if ours is not None:
                res.tree_problems.append(dict(routine=routine, **tag, bad=tree_problems(ours, True)))
            if peers:
                out_sp = got["SuPar"]
                if out_sp is not None:
                    sp_heads = out_sp.numpy()
                    res.tree_problems.append(dict(routine=routine + " (SuPar)", **tag,
                                                  bad=tree_problems(sp_heads, True)))
                    if ours is not None:
                        a, b = tree_scores(S, np.asarray(ours)), tree_scores(S, sp_heads)
                        tol = 1e-4 * np.maximum(1.0, np.abs(a)) if dtype == "float32" else 1e-9 * np.maximum(1.0, np.abs(a))
                        note = (f"SuPar lower on {int((b < a - tol).sum())}/{B}, "
                                f"higher on {int((b > a + tol).sum())}/{B}")
                        check(routine, "SuPar", "tree score", a, b, note)

            # --- arboreal only: k-best Eisner and MBR decoding ---
            if inf is not None:
                routine = f"eisner_kbest k={K_BEST} single"
                out = timed(routine, [("arboreal",
                                       lambda: inf.eisner_kbest(S, K_BEST, single_root=True, lengths=lengths),
                                       None)])["arboreal"]
                if out is not None:
                    kh, ks = np.asarray(out[0]), np.asarray(out[1], dtype=np.float64)
                    if kh.ndim == 3:
                        res.tree_problems.append(dict(routine=routine + " (every row)", **tag,
                                                      bad=tree_problems(kh.reshape(-1, kh.shape[-1]), True)))
                        # internal consistency: returned scores are the trees' scores, sorted,
                        # and the best equals Eisner's optimum
                        check(routine, "its own heads", "returned tree scores",
                              ks, tree_scores(S, kh))
                        if (np.diff(ks, axis=1) > 1e-9 * np.maximum(1.0, np.abs(ks[:, :-1]))).any():
                            res.checks[-1].note = "NOT sorted best first"
                        best = timed_results.get("eisner single")
                        if best is not None:
                            check(routine, "arboreal eisner", "best tree score",
                                  ks[:, 0], tree_scores(S, np.asarray(best)))
                for projective in (False, True):
                    routine = f"mbr_decode {'proj' if projective else 'nonproj'} single"
                    try:
                        M = ours_logz_marg(inf, S, lengths, projective, True)[1]
                    except Exception as exc:  # noqa: BLE001
                        res.timings.append(Timing(routine, n, dtype, "arboreal", error=describe_error(exc)))
                        continue
                    out = timed(routine, [("arboreal",
                                           lambda M=M, p=projective: inf.mbr_decode(
                                               M, projective=p, single_root=True, lengths=lengths),
                                           None)])["arboreal"]
                    if out is not None:
                        res.tree_problems.append(dict(routine=routine, **tag,
                                                      bad=tree_problems(np.asarray(out), True)))


def run_stability(args, res: Results, inf, peers: Peers | None) -> None:
    """Non-finite counts for scores ~ N(0, s^2), n = args.stab_n, B = args.batch."""
    n, B = args.stab_n, args.batch
    valid = valid_arc_mask(n)
    print(f"-- stability n={n} B={B}", flush=True)
    for scale in SCALES:
        S64 = make_scores(np.random.default_rng(SEED + int(scale)), B, n, scale)
        for dtype in args.dtypes:
            S = S64.astype(dtype)

            def evaluate(library, fn, X):
                """(bad (b,) bool, column sums (b, n)) for the sentences of X."""
                z, M = fn(X)
                z, M = _np(z), _np(M)
                if library == "torch-struct":
                    M = peers.ts_marg_to_ours(peers.torch.from_numpy(M))
                elif library == "SuPar":
                    M = np.swapaxes(M, 1, 2)
                Mv = np.where(valid, M, 0.0)
                return ~(np.isfinite(z) & np.isfinite(Mv).all((1, 2))), Mv.sum(1)[:, 1:]

            def record(routine, library, fn, ours_lib=False):
                row = dict(routine=routine, library=library, dtype=dtype, scale=scale)
                try:
                    bad, colsum = evaluate(library, fn, S)
                except Exception as exc:  # noqa: BLE001
                    # the whole batch raised: find out sentence by sentence
                    row["batch_error"] = describe_error(exc)
                    bad, colsum, raised = np.zeros(B, bool), np.ones((B, n)), 0
                    for b in range(B):
                        try:
                            bad[b:b + 1], colsum[b:b + 1] = evaluate(library, fn, S[b:b + 1])
                        except Exception:  # noqa: BLE001
                            bad[b], raised = True, raised + 1
                    row["raised"] = raised
                    if raised == B:
                        row["error"] = row.pop("batch_error")
                row["nonfinite"] = int(bad.sum())
                if ours_lib and (~bad).any():
                    row["max_colsum_err"] = float(np.abs(colsum[~bad] - 1.0).max())
                res.stability.append(row)
                shown = row.get("error") or f"{row['nonfinite']}/{B} non-finite" + (
                    f" ({row['raised']} raise {row['batch_error']})" if row.get("raised") else "") + (
                    f", max|colsum-1|={row['max_colsum_err']:.1e}" if "max_colsum_err" in row else "")
                print(f"   s={scale:<6g} {dtype:<8} {routine:<16} {library:<13} {shown}", flush=True)

            for single_root in (True, False):
                routine = f"nonproj {'single' if single_root else 'multi'}"
                if inf is not None:
                    record(routine, "arboreal",
                           lambda X, sr=single_root: ours_logz_marg(inf, X, np.full(len(X), n), False, sr), True)
                if peers:
                    record(routine, "torch-struct",
                           lambda X, sr=single_root: peers.ts_nonproj(peers.to_ts(X), not sr))
                    record(routine, "SuPar",
                           lambda X, sr=single_root: peers.supar_matrix_tree(peers.to_supar(X), not sr))
            routine = "proj single"
            if inf is not None:
                record(routine, "arboreal", lambda X: ours_logz_marg(inf, X, np.full(len(X), n), True, True), True)
            if peers:
                record(routine, "torch-struct", lambda X: peers.ts_proj(peers.to_ts(X), False))
                record(routine, "SuPar", lambda X: peers.supar_proj(peers.to_supar(X), False))


# ----------------------------------------------------------------------------
# report

def versions(with_peers: bool) -> dict:
    out = {}
    names = ["numpy", "numba", "scipy", "arboreal"] + (["torch", "torch-struct", "supar"] if with_peers else [])
    for name in names:
        try:
            out[name] = _md.version(name)
        except _md.PackageNotFoundError:
            out[name] = "absent"
    return out


def machine_load() -> dict:
    load = os.getloadavg()
    busy = []
    try:
        ps = subprocess.run(["ps", "-eo", "pid,pcpu,comm", "--sort=-pcpu", "--no-headers"],
                            capture_output=True, text=True, check=False).stdout.splitlines()
        me = os.getpid()
        for line in ps:
            pid, pcpu, comm = line.split(None, 2)
            if int(pid) != me and float(pcpu) >= 20.0:
                busy.append(f"{comm.strip()}({pcpu}%)")
    except (OSError, ValueError):
        pass
    return {"loadavg": [round(x, 2) for x in load], "busy": busy[:6], "cpus": os.cpu_count()}


def _fmt_ms(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if x < 10 else f"{x:.1f}" if x < 1000 else f"{x:.0f}"


def timing_table(res: Results, only_n: int | None = None) -> str:
    ours = {(t.routine, t.n, t.dtype): t for t in res.timings if t.library == "arboreal"}
    peers_rows = [t for t in res.timings if t.library != "arboreal"]
    lines = ["| routine | n | dtype | arboreal ms | peer | peer ms | ratio (peer/ours) |",
             "|---|---:|---|---:|---|---:|---:|"]
    keys = []
    for t in res.timings:
        k = (t.routine, t.n, t.dtype)
        if k not in keys:
            keys.append(k)
    for k in keys:
        if only_n is not None and k[1] != only_n:
            continue
        o = ours.get(k)
        o_ms = o.ms if o else None
        o_txt = (o.error if o and o.error else _fmt_ms(o_ms))
        ps = [p for p in peers_rows if (p.routine, p.n, p.dtype) == k]
        if not ps:
            lines.append(f"| {k[0]} | {k[1]} | {k[2]} | {o_txt} | {peer_note(k[0])} | - | - |")
        for p in ps:
            if p.error:
                lines.append(f"| {k[0]} | {k[1]} | {k[2]} | {o_txt} | {p.library} | {p.error} | - |")
            else:
                ratio = f"{p.ms / o_ms:.1f}x" if o_ms else "-"
                lines.append(f"| {k[0]} | {k[1]} | {k[2]} | {o_txt} | {p.library} | {_fmt_ms(p.ms)} | {ratio} |")
        if k[0].startswith("chu_liu_edmonds") and ps:
            lines.append(f"| {k[0]} | {k[1]} | {k[2]} | {o_txt} | torch-struct | no CLE / argmax | - |")
    return "\n".join(lines)


def peer_note(routine: str) -> str:
    if routine.startswith(("eisner_kbest", "mbr_decode")):
        return "no peer"
    return "(peers not run)"


BARS = (("nonproj logZ+marg single", "torch-struct", 2.0),
        ("eisner single", "SuPar", 25.0),
        ("chu_liu_edmonds single", "SuPar", 40.0))


def bars_table(res: Results, n: int = 40) -> str:
    """Issue 3's speed bars at n = 40: peer ms / arboreal ms against the required ratio."""
    lines = ["| routine (n = 40) | dtype | vs | required | measured | |", "|---|---|---|---:|---:|---|"]
    for routine, peer, need in BARS:
        for dtype in ("float32", "float64"):
            o = next((t for t in res.timings if (t.routine, t.n, t.dtype, t.library) == (routine, n, dtype, "arboreal")), None)
            p = next((t for t in res.timings if (t.routine, t.n, t.dtype, t.library) == (routine, n, dtype, peer)), None)
            if not (o and p and o.ms and p.ms):
                continue
            r = p.ms / o.ms
            lines.append(f"| {routine} | {dtype} | {peer} | {need:g}x | {r:.1f}x | {'met' if r >= need else 'MISSED'} |")
    return "\n".join(lines) if len(lines) > 2 else ""


def checks_table(res: Results) -> str:
    lines = ["| routine | n | dtype | compared with | quantity | max abs diff | max rel diff | note |",
             "|---|---:|---|---|---|---:|---:|---|"]
    for c in res.checks:
        lines.append(f"| {c.routine} | {c.n} | {c.dtype} | {c.peer} | {c.quantity} | "
                     f"{c.max_abs:.2e} | {c.max_rel:.2e} | {c.note} |")
    return "\n".join(lines)


def stability_table(res: Results, B: int) -> str:
    lines = ["| routine | library | dtype | " + " | ".join(f"s={s:g}" for s in SCALES) + " |",
             "|---|---|---|" + "---:|" * len(SCALES)]
    keys = []
    for r in res.stability:
        k = (r["routine"], r["library"], r["dtype"])
        if k not in keys:
            keys.append(k)
    for k in keys:
        cells = []
        for s in SCALES:
            r = next((r for r in res.stability if (r["routine"], r["library"], r["dtype"]) == k
                      and r["scale"] == s), None)
            if r is None:
                cells.append("-")
            elif "error" in r:
                cells.append(r["error"])
            elif r.get("raised"):
                cells.append(f"{r['nonfinite']}/{B} ({r['raised']} raise {r['batch_error'].split(':')[0]})")
            else:
                cells.append(f"{r['nonfinite']}/{B}")
        lines.append(f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(cells) + " |")
    ours = [r for r in res.stability if r["library"] == "arboreal"]
    if ours:
        lines += ["", "arboreal: max over the finite sentences and their words of |sum_h marginal(h, m) - 1|:", "",
                  "| routine | dtype | " + " | ".join(f"s={s:g}" for s in SCALES) + " |",
                  "|---|---|" + "---:|" * len(SCALES)]
        keys = []
        for r in ours:
            if (r["routine"], r["dtype"]) not in keys:
                keys.append((r["routine"], r["dtype"]))
        for k in keys:
            cells = []
            for s in SCALES:
                r = next((r for r in ours if (r["routine"], r["dtype"]) == k and r["scale"] == s), None)
                cells.append("-" if r is None or "max_colsum_err" not in r else f"{r['max_colsum_err']:.1e}")
            lines.append(f"| {k[0]} | {k[1]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report_body(args, res: Results) -> str:
    m = res.meta
    v = m["versions"]
    vtxt = ", ".join(f"{k} {val}" for k, val in v.items())
    ld0, ld1 = m["load_before"], m["load_after"]
    shared = max(ld0["loadavg"][0], ld1["loadavg"][0]) > 0.5 or ld0["busy"] or ld1["busy"]
    timed_ok = [t for t in res.timings if t.ms]
    wall_over_cpu = (sum(t.wall_ms for t in timed_ok) / sum(t.ms for t in timed_ok)) if timed_ok else 1.0
    bad_trees = [t for t in res.tree_problems if t["bad"]]
    parts = [
        f"B = {args.batch} sentences of length n, arc scores ~ N(0, 1) (seed {SEED}), one thread "
        f"(OMP/MKL/OPENBLAS/NUMBA_NUM_THREADS=1, torch.set_num_threads(1)). Times are the median "
        f"CPU time of the process per call (ms, one thread, so robust to other processes on the "
        f"machine) over {args.min_reps}-{args.max_reps} repeats after warm-up, the libraries' repeats interleaved round-robin so that they share the "
        f"same machine conditions (calls slower than 1 s: fewer repeats, at least one); median wall times are in the JSON output (`--out-json`). "
        f"Total run time {m['wall_s']:.0f} s.",
        "",
        f"Versions: {vtxt}.",
        "",
        f"Machine load: 1-min load average {ld0['loadavg'][0]} before, {ld1['loadavg'][0]} after "
        f"({ld0['cpus']} CPUs); other busy processes: {', '.join(ld0['busy'] + ld1['busy']) or 'none seen'}. "
        + f"Summed wall time / summed CPU time of the timed calls: {wall_over_cpu:.2f}. "
        + (("Other processes were running, but the timed calls mostly had a CPU to themselves "
            "(wall ~ CPU time)." if wall_over_cpu < 1.15 else
            "**The machine was shared while this ran: wall times are inflated and absolute CPU times "
            "somewhat noisy (shared caches, frequency); the ratios (same run, same inputs, "
            "interleaved) are the robust figure.**") if shared else "The machine was otherwise idle."),
        "",
        (f"arboreal's log Z + marginals call: `{m['arboreal_logz_marg_call']}`. "
         if "arboreal_logz_marg_call" in m else "") +
        "Conventions: arboreal gets `lengths=`; the peers get no lengths (all sentences are full "
        "length, which is their cheapest path). Peer inputs are converted before timing. torch-struct "
        "`NonProjectiveDependencyCRF` = `.partition` + `.marginals` (it computes both directly, "
        "no autograd); SuPar = `.log_partition` + `.marginals` (autograd, as the library does). "
        "Ratio = peer ms / arboreal ms.",
        "",
        *(["### Issue 3 speed bars", "", bars_table(res), ""] if bars_table(res) else []),
        *(["### Timings at n = 40", "", timing_table(res, 40), ""] if 40 in args.sizes else []),
        "### All timings",
        "",
        timing_table(res),
        "",
        "### Agreement with the peers (s = 1 inputs)",
        "",
        "torch-struct adds eps = 1e-5 to every arc weight of its Laplacian, so its log Z is biased; "
        "the `eps=0 (f64)` rows call its own functions without eps on the same inputs, in float64, "
        "to check the input conversion exactly. SuPar's `MatrixTree` returns log Z as float32. "
        "SuPar's single-root `mst` is not exact (it only retries the roots Chu-Liu-Edmonds "
        "picked), so its trees may score lower than the exact single-root optimum.",
        "",
        checks_table(res),
        "",
        "Invalid trees returned: " + (", ".join(f"{t['routine']} n={t['n']} {t['dtype']}: {t['bad']}"
                                             for t in bad_trees) or "none (every tree checked: "
                                      "rooted at 0, acyclic, single root)."),
        "",
    ]
    if res.stability:
        parts += [
            f"### Stability (n = {args.stab_n}, B = {args.batch}, scores ~ N(0, s^2))",
            "",
            "Sentences with a non-finite log Z or marginal, per library. When a batched call "
            "raised, every sentence was rerun alone and the ones that raised are counted too "
            "(shown in parentheses):",
            "",
            stability_table(res, args.batch),
        ]
    return "\n".join(parts)


def render_saved(path: Path) -> int:
    """Rebuild the doc section from the raw numbers of a saved full run."""
    data = json.loads(path.read_text(encoding="utf-8"))
    res = Results(timings=[Timing(**t) for t in data["timings"]], checks=[Check(**c) for c in data["checks"]],
                  stability=data["stability"], tree_problems=data["tree_problems"], meta=data["meta"])
    args = argparse.Namespace(**res.meta["args"])
    body = report_body(args, res)
    print(body)
    if args.sizes == [10, 20, 40, 80] and args.batch == 256 and not (args.quick or args.no_peers or args.peers_only):
        from _report import write_section
        write_section("inference", "Inference core", "python benchmarks/inference.py", body)
        print(f"\nwrote docs/benchmarks.md (section 'inference') from {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="smoke run: n in {10, 20}, B = 32, few repeats; does not write docs")
    p.add_argument("--no-peers", action="store_true", help="arboreal only (torch not imported)")
    p.add_argument("--peers-only", action="store_true",
                   help="peers only (checks the conversions between torch-struct and SuPar)")
    p.add_argument("--out-json", type=Path, help="write the raw numbers here")
    p.add_argument("--no-write", action="store_true", help="do not write docs/benchmarks.md")
    p.add_argument("--sizes", type=int, nargs="+", help="override n values")
    p.add_argument("--dtypes", nargs="+", choices=["float32", "float64"], help="override dtypes")
    p.add_argument("--batch", type=int, help="override B")
    p.add_argument("--no-stability", action="store_true", help="skip the stability table")
    p.add_argument("--render-json", type=Path, metavar="PATH",
                   help="re-render the report of a full run saved with --out-json (no timing) and "
                        "write it to docs/benchmarks.md")
    args = p.parse_args(argv)
    if args.render_json:
        return render_saved(args.render_json)

    args.sizes = args.sizes or ([10, 20] if args.quick else [10, 20, 40, 80])
    args.dtypes = args.dtypes or ["float32", "float64"]
    args.batch = args.batch or (32 if args.quick else 256)
    args.stab_n = 20 if args.quick else 40
    args.target, args.min_reps, args.max_reps = (0.02, 1, 3) if args.quick else (0.4, 5, 25)
    write_doc = not (args.quick or args.no_write or args.peers_only or args.no_peers
                     or args.sizes != [10, 20, 40, 80] or args.batch != 256)

    res = Results()
    res.meta["load_before"] = machine_load()
    t_start = time.perf_counter()
    inf = None if args.peers_only else load_arboreal()
    peers = None if args.no_peers else Peers()
    res.meta["versions"] = versions(peers is not None)
    if inf is not None:
        fn = combined_call(inf)
        res.meta["arboreal_logz_marg_call"] = f"{fn.__module__}.{fn.__name__}"
    print("versions:", res.meta["versions"], "| load:", res.meta["load_before"], flush=True)

    run_sizes(args, res, inf, peers)
    if not args.no_stability:
        run_stability(args, res, inf, peers)
    res.meta["wall_s"] = time.perf_counter() - t_start
    res.meta["load_after"] = machine_load()
    res.meta["args"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}

    body = report_body(args, res)
    print()
    print(body)
    if args.out_json:
        args.out_json.parent.mkdir(parents=True, exist_ok=True)
        data = dict(meta=res.meta, timings=[asdict(t) for t in res.timings],
                    checks=[asdict(c) for c in res.checks], stability=res.stability,
                    tree_problems=res.tree_problems)
        args.out_json.write_text(json.dumps(data, indent=1), encoding="utf-8")
    if write_doc:
        from _report import write_section
        write_section("inference", "Inference core", "python benchmarks/inference.py", body)
        print("\nwrote docs/benchmarks.md (section 'inference')")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
