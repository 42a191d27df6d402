"""Large-margin training with local constraints (Wang, Cherry, Lizotte & Schuurmans
2006), optionally with a Laplacian regulariser: the ``local-margin`` learner.

Constraints (Wang et al. 2006, §5). For a training sentence with gold heads g (a tree
over the nodes 0..n, 0 the root) and every *candidate* arc a = (h, m) with m in 1..n,
h in 0..n, h != m, h != g[m] (every non-gold arc, root arcs included), take the path
between h and m in the undirected gold tree. The gold edge on that path incident to h
and the gold edge on it incident to m, each as a directed gold arc (g[x], x), give one
constraint c = (e, a) each (a single one when the path has one edge, i.e. when a is
a gold arc reversed):

    score(e) - score(a) >= 1 - xi_c,   xi_c >= 0        (one slack per constraint).

They say that a candidate arc must score below the gold arcs it would replace in a
maximum spanning tree. :func:`local_constraints` lists them for one tree, in a fixed
order: m = 1..n, then h = 0..n, the edge at h before the edge at m.

Objective (minimised; the exact function this module's solver optimises and
:func:`primal_objective` evaluates). With phi(arc) the arc's feature vector (from
``FeatureSet.arc_features``, real-valued) and d_c = phi(e) - phi(a):

    P(theta) = 1/2 theta'theta + lambda/2 theta' L theta + C * sum_c max(0, 1 - theta . d_c)

which is Wang et al.'s ``beta/2 theta'theta + 1'xi`` (with the Laplacian term
``theta' L~ theta``) with beta = 1/C, times C. ``L = D - S`` is the Laplacian of a
graph over some weight coordinates (``data.features.lexical_graph``: similar word pairs,
S >= 0 symmetric with a zero diagonal, D = diag(S 1)); lambda = 0 (the default)
gives the plain local-constraint SVM.

Solver, lambda = 0: dual coordinate descent (Hsieh et al. 2008) on

    D(alpha) = sum_c alpha_c - 1/2 || sum_c alpha_c d_c ||^2,   0 <= alpha_c <= C,

with theta = sum_c alpha_c d_c kept up to date. The step for c: G = theta . d_c - 1,
alpha_c <- clip(alpha_c - G / ||d_c||^2, 0, C), theta += (change) d_c. ||d_c||^2 is exact
(the ids of e and a are merged, repeats summed). One *pass* visits the sentences in a
shuffled order and each sentence's constraints in a shuffled order (one numba kernel
call per sentence, over the features of all its n^2 arcs, computed once per pass or
cached); alpha persists across passes. After each pass an evaluation sweep computes,
at the theta the pass ended with, every constraint's margin (hence P(theta) exactly)
and v = sum_c alpha_c d_c from alpha afresh (hence D(alpha) exactly); training stops
when the relative duality gap (P - D) / P <= tol, a certificate: P(theta) - P* <= P - D.
Shrinking: a sweep skips the constraints with alpha_c = 0 and margin > 1, or
alpha_c = C and margin < 1, when last seen (at the previous evaluation sweep or at the
constraint's own last step: their projected gradient was 0); the gap is always computed
over every constraint, so shrinking cannot change where training stops, only how fast
it gets there. Option ``sweeps`` repeats each sentence's sweep within a pass: fewer
passes (feature computations and evaluation sweeps) for a similar number of
coordinate steps.

Solver, lambda > 0: majorization-minimization. With L = D - S, 2D - L = D + S is PSD, so
at the current anchor theta_t

    lambda/2 theta'L theta <= lambda theta'D theta - lambda theta'(D+S) theta_t + c_t

(equality at theta_t; c_t = lambda/2 theta_t'L theta_t + lambda theta_t'S theta_t).
Each MM subproblem

    M_t(theta) = 1/2 theta'Q theta + b'theta + c_t + C sum_c hinge_c,
    Q = I + 2 lambda D (diagonal),  b = -lambda (D + S) theta_t,

majorises P and touches it at theta_t, where its smooth part has P's gradient
theta_t + lambda L theta_t (so a fixed point of MM is P's minimiser). Its dual
D_t(alpha) = sum alpha - 1/2 (v - b)'Q^-1 (v - b) + c_t, theta = Q^-1 (v - b), is
solved by the same coordinate descent with ||d_c||^2_{Q^-1} = sum_k d_ck^2 / Q_kk and
theta += delta Q^-1 d_c (alpha warm-started from subproblem to subproblem). Q differs
from 1 only on the graph's coordinates, but Q^-1 is kept as a dense (dim,) vector
(with lambda > 0 only) and gathered once per arc feature computation: one gather per
feature id, the cost of hashing it, where a search among the sorted graph ids would
cost a binary search each. After each
pass: if P(theta_t) - D_t(alpha) <= tol P(theta_t) no MM step can lower P by more than
tol relative: stop (returning the better of theta and theta_t). Otherwise, once the
subproblem's gap M_t(theta) - D_t(alpha) is at most half the decrease
P(theta_t) - M_t(theta), theta becomes the next anchor; since
P(theta) <= M_t(theta) < P(theta_t), the anchors' P decreases strictly. At the end,
the true dual D(alpha) = sum alpha - 1/2 v'(I + lambda L)^-1 v (conjugate gradients on
the graph block) gives the certificate ``true_gap`` (:func:`dual_objective`).

Cost of a pass: O(sum_i n_i^2 T) feature hashing (none when cached) plus
O(#constraints * features per arc) gathers/scatters, #constraints <= 2 sum_i n_i^2.
Memory: alpha, ||d_c||^2 and margins (3 float64) and two int32 arc indices per
constraint, theta and v (dim,) float64 (with lambda > 0 also the anchor and Q^-1), the
feature cache (``cache_mb``).
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np
from numba import njit

from arboreal.learn import BatchLearner, TrainingData, require_arc_factored
from arboreal.learn.laplacian import LaplacianGraph, lexical_graph
from arboreal.learn.trainer import run_epochs

__all__ = ["LocalMargin", "local_constraints", "arc_feature_arrays", "all_arcs", "arc_index",
           "LocalMarginLearner", "smooth_objective", "primal_objective", "dual_objective", "constraint_matrix"]

_EMPTY_F = np.zeros(0, dtype=np.float64)


# ---------------------------------------------------------------------- constraints
@njit(cache=True)
def _local_constraints(heads):
    n = heads.shape[0] - 1
    depth = np.full(n + 1, -1, dtype=np.int64)
    depth[0] = 0
    ok = True
    for x in range(1, n + 1):
        # walk up to a node of known depth (at most n steps in a tree)
        y, steps = x, 0
        while depth[y] < 0 and steps <= n:
            y = heads[y]
            steps += 1
            if y < 0 or y > n:
                ok = False
                break
        if not ok or depth[y] < 0:
            ok = False
            break
        d = depth[y]
        # assign depths on the way down: walk again, storing the path
        path = np.empty(steps, dtype=np.int64)
        z = x
        for s in range(steps):
            path[s] = z
            z = heads[z]
        for s in range(steps - 1, -1, -1):
            d += 1
            depth[path[s]] = d
    k_max = 2 * n * n
    gm = np.empty(k_max, dtype=np.int64)
    ch = np.empty(k_max, dtype=np.int64)
    cm = np.empty(k_max, dtype=np.int64)
    k = 0
    if not ok:
        return gm[:0], ch[:0], cm[:0], False
    for m in range(1, n + 1):
        for h in range(n + 1):
            if h == m or h == heads[m]:
                continue
            x, y = h, m
            cx, cy = -1, -1        # last nodes before the meeting point on each side
            while x != y:
                if depth[x] >= depth[y]:
                    cx = x
                    x = heads[x]
                else:
                    cy = y
                    y = heads[y]
            lca = x
            eh = h if lca != h else cy     # gold edge at h: (g[h], h) or (h, child to m)
            em = m if lca != m else cx     # gold edge at m: (g[m], m) or (m, child to h)
            gm[k] = eh
            ch[k] = h
            cm[k] = m
            k += 1
            if em != eh:
                gm[k] = em
                ch[k] = h
                cm[k] = m
                k += 1
    return gm[:k].copy(), ch[:k].copy(), cm[:k].copy(), True


def local_constraints(heads: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The local constraints of one gold tree (see the module docstring).

    heads: (n+1,) gold heads, heads[0] = -1 (a tree over 0..n; several root
    children allowed). Returns ``(gold_m, cand_h, cand_m)``, each (k,) int64: constraint
    j says arc (heads[gold_m[j]], gold_m[j]) outscores arc (cand_h[j], cand_m[j]) by 1.
    Order: cand_m = 1..n, then cand_h = 0..n, the gold edge at cand_h before the one at
    cand_m. k <= 2 n^2. O(n^2 * tree depth) in a numba kernel. ValueError if ``heads``
    is not a tree.
    """
    heads = np.ascontiguousarray(heads, dtype=np.int64)
    gm, ch, cm, ok = _local_constraints(heads)
    if not ok:
        raise ValueError("heads do not form a tree rooted at 0")
    return gm, ch, cm


def arc_index(h: np.ndarray, m: np.ndarray, n: int) -> np.ndarray:
    """Position of arc (h, m) in :func:`all_arcs` ``(n)``: ``(m-1) n + h - [h > m]``."""
    h = np.asarray(h, dtype=np.int64)
    m = np.asarray(m, dtype=np.int64)
    return (m - 1) * n + h - (h > m)


_ARCS: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def all_arcs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every arc of an n-word sentence, ``(hs, ms)`` (n^2,) int64: m = 1..n, then
    h = 0..n without h = m (the order :func:`arc_index` numbers)."""
    arcs = _ARCS.get(n)
    if arcs is None:
        hh = np.tile(np.arange(n + 1, dtype=np.int64), n)
        mm = np.repeat(np.arange(1, n + 1, dtype=np.int64), n + 1)
        keep = hh != mm
        arcs = (hh[keep], mm[keep])
        if n <= 512:
            _ARCS[n] = arcs
    return arcs


def arc_feature_arrays(features, enc, hs: np.ndarray, ms: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``features.arc_features(enc, hs, ms)`` as contiguous ``(offsets, ids, vals)``:
    offsets (len(hs)+1,) int64, ids int64, vals float64 parallel to ids. Arc i's feature
    vector is ``sum_q vals[q] e_{ids[q]}`` over q in ``offsets[i]:offsets[i+1]``."""
    offsets, ids, vals = features.arc_features(enc, np.asarray(hs, dtype=np.int64),
                                               np.asarray(ms, dtype=np.int64))
    return (np.ascontiguousarray(offsets, dtype=np.int64),
            np.ascontiguousarray(ids, dtype=np.int64),
            np.ascontiguousarray(vals, dtype=np.float64))


def smooth_objective(w: np.ndarray, laplacian: float = 0.0,
                     graph: LaplacianGraph | None = None) -> tuple[float, np.ndarray]:
    """The smooth part of P: ``1/2 w'w + lambda/2 w'L w`` and its gradient
    ``w + lambda L w`` (dim,). O(dim + K + nnz(S))."""
    w = np.asarray(w, dtype=np.float64)
    value = 0.5 * float(w @ w)
    grad = w.copy()
    if laplacian > 0 and graph is not None and len(graph):
        extra, g = graph.penalty(w, laplacian)
        value += extra
        grad[graph.ids] += g
    return value, grad


# ---------------------------------------------------------------------- kernels
@njit(cache=True)
def _sumsq(x):
    """x . x without BLAS threads (a busy core slows a threaded dot by 10x). O(len(x))."""
    acc = 0.0
    for i in range(x.shape[0]):
        acc += x[i] * x[i]
    return acc


@njit(cache=True)
def _constraint_norms(offsets, ids, vals, qv, e_arc, a_arc, out):
    """out[c] = ||d_c||^2_{Q^-1} = sum_k (d_c's summed coefficient on k)^2 * qinv_k: each
    arc's ids are sorted once, then each constraint merges its two arcs' sorted lists
    (repeats within and across the arcs summed). O(arcs * f log f + constraints * f)."""
    use_q = qv.shape[0] > 0
    sid = np.empty(ids.shape[0], dtype=np.int64)
    sv = np.empty(ids.shape[0])
    sq = np.ones(ids.shape[0])
    for j in range(offsets.shape[0] - 1):
        a, b = offsets[j], offsets[j + 1]
        o = np.argsort(ids[a:b])
        for t in range(b - a):
            sid[a + t] = ids[a + o[t]]
            sv[a + t] = vals[a + o[t]]
            if use_q:
                sq[a + t] = qv[a + o[t]]
    for c in range(e_arc.shape[0]):
        e = e_arc[c]
        x = a_arc[c]
        p, pe = offsets[e], offsets[e + 1]
        r, re = offsets[x], offsets[x + 1]
        acc = 0.0
        while p < pe or r < re:
            if r >= re or (p < pe and sid[p] <= sid[r]):
                cur = sid[p]
            else:
                cur = sid[r]
            coef = 0.0
            q = 1.0
            while p < pe and sid[p] == cur:
                coef += sv[p]
                q = sq[p]
                p += 1
            while r < re and sid[r] == cur:
                coef -= sv[r]
                q = sq[r]
                r += 1
            acc += coef * coef * q
        out[c] = acc


@njit(cache=True)
def _dcd_sentence(offsets, ids, vals, qv, e_arc, a_arc, perm, alpha, qnorm, margin, theta,
                  C, shrink):
    """One coordinate-descent sweep over a sentence's constraints in the order ``perm``;
    returns the number of constraints visited (not shrunk). O(visited * f)."""
    use_q = qv.shape[0] > 0
    visited = 0
    for t in range(perm.shape[0]):
        c = perm[t]
        a = alpha[c]
        if shrink:
            mg = margin[c]
            if (a == 0.0 and mg > 1.0) or (a == C and mg < 1.0):
                continue
        visited += 1
        e = e_arc[c]
        x = a_arc[c]
        s = 0.0
        for q in range(offsets[e], offsets[e + 1]):
            s += theta[ids[q]] * vals[q]
        for q in range(offsets[x], offsets[x + 1]):
            s -= theta[ids[q]] * vals[q]
        qn = qnorm[c]
        if qn > 0.0:
            new = a - (s - 1.0) / qn
            if new < 0.0:
                new = 0.0
            elif new > C:
                new = C
        else:              # d_c = 0: the hinge is 1 whatever theta, alpha_c = C is optimal
            new = C
        d = new - a
        margin[c] = s + d * qn        # theta . d_c after this step
        if d == 0.0:
            continue
        alpha[c] = new
        if qn <= 0.0:
            continue
        if use_q:
            for q in range(offsets[e], offsets[e + 1]):
                theta[ids[q]] += d * vals[q] * qv[q]
            for q in range(offsets[x], offsets[x + 1]):
                theta[ids[q]] -= d * vals[q] * qv[q]
        else:
            for q in range(offsets[e], offsets[e + 1]):
                theta[ids[q]] += d * vals[q]
            for q in range(offsets[x], offsets[x + 1]):
                theta[ids[q]] -= d * vals[q]
    return visited


@njit(cache=True)
def _evaluate_sentence(offsets, ids, vals, e_arc, a_arc, alpha, theta, margin, v):
    """At a fixed theta: every arc's score, every constraint's margin (into ``margin``)
    and the hinge sum (returned); ``v += sum_c alpha_c d_c`` when v is not empty.
    O(arc features + nnz(alpha) * f)."""
    n_arcs = offsets.shape[0] - 1
    s = np.empty(n_arcs)
    for j in range(n_arcs):
        acc = 0.0
        for q in range(offsets[j], offsets[j + 1]):
            acc += theta[ids[q]] * vals[q]
        s[j] = acc
    hinge = 0.0
    scatter = v.shape[0] > 0
    for c in range(e_arc.shape[0]):
        e = e_arc[c]
        x = a_arc[c]
        mg = s[e] - s[x]
        margin[c] = mg
        if mg < 1.0:
            hinge += 1.0 - mg
        al = alpha[c]
        if scatter and al != 0.0:
            for q in range(offsets[e], offsets[e + 1]):
                v[ids[q]] += al * vals[q]
            for q in range(offsets[x], offsets[x + 1]):
                v[ids[q]] -= al * vals[q]
    return hinge


# ---------------------------------------------------------------------- the problem
#: bytes kept per constraint: alpha, ||d_c||^2 and the margin (float64), two int32 arcs
CONSTRAINT_BYTES = 32
#: default cap on those bytes over the training data (``constraint_budget`` option)
CONSTRAINT_BUDGET = 4 * 2.0 ** 30


class _Problem:
    """The constraints of a :class:`TrainingData` and their arcs' features.

    Constraint arrays are flat over all sentences; sentence i owns
    ``ptr[i]:ptr[i+1]``. Per sentence: ``e_arc``, ``a_arc`` (int32 positions in
    :func:`all_arcs` ``(n)``). Features are cached while they fit ``cache_bytes``.
    """

    def __init__(self, data: TrainingData, graph: LaplacianGraph | None = None,
                 laplacian: float = 0.0, cache_bytes: float = 0.0, norms: bool = True,
                 constraint_budget: float = CONSTRAINT_BUDGET):
        lengths = np.array([np.asarray(h).size - 1 for h in data.heads], dtype=np.float64)
        need = CONSTRAINT_BYTES * float((2.0 * lengths * lengths).sum())
        if need > constraint_budget:
            raise ValueError(
                f"local-margin: the training data's local constraints (up to 2 n^2 per "
                f"sentence of n words) would take up to {need / 2**20:,.1f} MiB, over the "
                f"budget of {constraint_budget / 2**20:,.1f} MiB: train on shorter sentences, or "
                "raise it with --learner-option constraint_budget=BYTES")
        self.data = data
        self.features = data.features
        self.encoded = data.encoded
        self.graph = graph if laplacian > 0 else None
        self.laplacian = float(laplacian)
        self.e_arc: list[np.ndarray] = []
        self.a_arc: list[np.ndarray] = []
        sizes = []
        for heads in data.heads:
            heads = np.asarray(heads, dtype=np.int64)
            n = heads.size - 1
            gm, ch, cm = local_constraints(heads)
            self.e_arc.append(arc_index(heads[gm], gm, n).astype(np.int32))
            self.a_arc.append(arc_index(ch, cm, n).astype(np.int32))
            sizes.append(gm.size)
        self.ptr = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=self.ptr[1:])
        self.total = int(self.ptr[-1])
        self.qnorm = np.zeros(self.total)
        # ||d_c||^2 only for the solver (not for objective evaluations)
        self._normed = np.full(len(sizes), not norms, dtype=bool)
        self._cache: list[tuple | None] = [None] * len(sizes)
        self._cache_left = float(cache_bytes)
        if self.graph is not None:
            self.qinv_g = 1.0 / (1.0 + 2.0 * self.laplacian * self.graph.deg)
            # dense: one gather per feature id instead of a binary search
            self.qinv = np.ones(self.features.dim)
            self.qinv[self.graph.ids] = self.qinv_g
        self.feature_seconds = 0.0

    def __len__(self) -> int:
        return len(self.e_arc)

    def slice(self, i: int) -> slice:
        return slice(int(self.ptr[i]), int(self.ptr[i + 1]))

    def arcs(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(offsets, ids, vals, qv)`` of sentence i's n^2 arcs; qv = Q^-1 at each id
        (empty without a Laplacian). Computes ||d_c||^2_{Q^-1} on first use."""
        got = self._cache[i]
        if got is not None:
            return got
        t0 = time.perf_counter()
        hs, ms = all_arcs(self.encoded[i].n)
        offsets, ids, vals = arc_feature_arrays(self.features, self.encoded[i], hs, ms)
        qv = self.qinv[ids] if self.graph is not None else _EMPTY_F
        got = (offsets, ids, vals, qv)
        if not self._normed[i]:
            sl = self.slice(i)
            _constraint_norms(offsets, ids, vals, qv, self.e_arc[i], self.a_arc[i],
                              self.qnorm[sl])
            self._normed[i] = True
        size = offsets.nbytes + ids.nbytes + vals.nbytes + qv.nbytes
        if size <= self._cache_left:
            self._cache[i] = got
            self._cache_left -= size
        self.feature_seconds += time.perf_counter() - t0
        return got

    def evaluate(self, theta: np.ndarray, alpha: np.ndarray, margin: np.ndarray,
                 v: np.ndarray) -> float:
        """Hinge sum sum_c max(0, 1 - theta . d_c) at theta; margins into ``margin``;
        ``v += sum_c alpha_c d_c`` (pass an empty v to skip). One sweep."""
        hinge = 0.0
        for i in range(len(self)):
            if self.ptr[i + 1] == self.ptr[i]:
                continue
            offsets, ids, vals, _ = self.arcs(i)
            sl = self.slice(i)
            hinge += _evaluate_sentence(offsets, ids, vals, self.e_arc[i], self.a_arc[i],
                                        alpha[sl], theta, margin[sl], v)
        return hinge


def _graph_for(data: TrainingData, laplacian: float, graph) -> LaplacianGraph | None:
    if laplacian < 0:
        raise ValueError("laplacian must be >= 0")
    return lexical_graph(data, graph) if laplacian > 0 else None


def primal_objective(data: TrainingData, w: np.ndarray, C: float, laplacian: float = 0.0,
                     graph=None) -> float:
    """P(w) = 1/2 w'w + lambda/2 w'L w + C sum_c max(0, 1 - w . d_c) over the local
    constraints of ``data`` (module docstring). ``graph``: a :class:`LaplacianGraph`, an
    ``(ids, S)`` pair or None (``data.features.lexical_graph``; only read when
    laplacian > 0). One sweep over every arc's features: O(sum_i n_i^2 T)."""
    g = _graph_for(data, laplacian, graph)
    prob = _Problem(data, norms=False)
    w = np.ascontiguousarray(w, dtype=np.float64)
    hinge = prob.evaluate(w, np.zeros(prob.total), np.zeros(prob.total), _EMPTY_F)
    return smooth_objective(w, laplacian, g)[0] + C * hinge


def constraint_vector(data: TrainingData, alpha: np.ndarray) -> np.ndarray:
    """v = sum_c alpha_c d_c (dim,) float64 for alpha (#constraints,) in the order of
    :func:`local_constraints` sentence by sentence."""
    prob = _Problem(data, norms=False)
    alpha = np.ascontiguousarray(alpha, dtype=np.float64)
    if alpha.shape != (prob.total,):
        raise ValueError(f"alpha must have shape ({prob.total},)")
    v = np.zeros(data.features.dim)
    prob.evaluate(np.zeros(data.features.dim), alpha, np.zeros(prob.total), v)
    return v


def _inverse_quad(graph: LaplacianGraph, laplacian: float, v: np.ndarray) -> float:
    """v'(I + lambda L)^-1 v (v (dim,)): identity off the graph, conjugate gradients on
    the graph block (SPD, eigenvalues in [1, 1 + 2 lambda max deg])."""
    from scipy.sparse.linalg import LinearOperator, cg

    vg = v[graph.ids]
    off = _sumsq(v) - float(vg @ vg)
    if not len(graph) or not np.any(vg):
        return off + float(vg @ vg)
    K = len(graph)
    op = LinearOperator((K, K), matvec=lambda x: x + laplacian * graph.laplacian_times(x),
                        dtype=np.float64)
    x, info = cg(op, vg, rtol=1e-13, atol=0.0, maxiter=100 * K + 1000)
    if info != 0:
        raise RuntimeError("conjugate gradients did not converge")
    return off + float(vg @ x)


def dual_objective(data: TrainingData, alpha: np.ndarray, laplacian: float = 0.0,
                   graph=None) -> float:
    """The dual of P at alpha (0 <= alpha <= C): ``sum alpha - 1/2 v'(I + lambda L)^-1 v``
    with v = sum_c alpha_c d_c; for any feasible alpha it is <= min P (weak duality), so
    ``P(w) - dual`` bounds ``P(w) - min P``. With lambda > 0 the graph block is solved by
    conjugate gradients to 1e-13 relative residual."""
    g = _graph_for(data, laplacian, graph)
    v = constraint_vector(data, alpha)
    quad = _sumsq(v) if g is None else _inverse_quad(g, laplacian, v)
    return float(np.sum(alpha)) - 0.5 * quad


def constraint_matrix(data: TrainingData):
    """The constraint vectors d_c as rows of a scipy.sparse csr_matrix (#constraints, dim),
    repeats summed, in the order of :func:`local_constraints` sentence by sentence. For
    tests and benchmarks on small data (O(#constraints * f) memory)."""
    import scipy.sparse as sp

    prob = _Problem(data, norms=False)
    rows, cols, vals_all = [], [], []
    for i in range(len(prob)):
        sl = prob.slice(i)
        if sl.stop == sl.start:
            continue
        offsets, ids, vals, _ = prob.arcs(i)
        counts = np.diff(offsets)
        for arcs, sign in ((prob.e_arc[i], 1.0), (prob.a_arc[i], -1.0)):
            arcs = arcs.astype(np.int64)
            cnt = counts[arcs]
            starts = np.repeat(offsets[arcs], cnt)
            within = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            q = starts + within
            rows.append(np.repeat(np.arange(sl.start, sl.stop), cnt))
            cols.append(ids[q])
            vals_all.append(sign * vals[q])
    if not rows:
        return sp.csr_matrix((prob.total, data.features.dim))
    A = sp.csr_matrix((np.concatenate(vals_all), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(prob.total, data.features.dim))
    A.sum_duplicates()
    A.eliminate_zeros()
    return A


# ---------------------------------------------------------------------- the learner
class LocalMargin(BatchLearner):
    """Local-constraint large-margin learner (Wang et al. 2006): ``--learner local-margin``.

    Args:
        C: weight of the hinge losses (inverse regularisation strength).
        laplacian: lambda, the weight of the Laplacian regulariser (0: none; > 0 needs
            ``data.features.lexical_graph``, i.e. a lexicon).
        tol: stop when the relative duality gap (P - D) / P <= tol (lambda > 0: when no
            MM step can lower P by more than tol relative).
        shrinking: skip constraints whose projected gradient was 0 when last seen
            (alpha_c = 0 and margin > 1, or alpha_c = C and margin < 1; margins from the
            previous evaluation sweep or the constraint's last step); the stopping test
            still covers all of them.
        sweeps: coordinate-descent sweeps over each sentence's constraints per pass
            (its features computed once): fewer passes (feature computations and
            evaluation sweeps) for a similar number of coordinate steps.
        cache_mb: megabytes of arc features kept between passes (the rest is recomputed
            every pass; 0: recompute all).
        verbose: print primal, dual and gap per pass to stderr.
        constraint_budget: bytes the constraints' state may take (``CONSTRAINT_BYTES``
            per constraint, up to 2 n^2 constraints per sentence of n words), checked
            before anything is allocated: ValueError above it (default 4 GiB).

    ``fit`` returns theta (dim,) float64 after at most ``epochs`` passes; ``history``
    holds one dict per pass (``primal`` P(theta), ``dual``, ``gap``, ``visited``
    constraints, ``pass_seconds``, ``seconds``; with lambda > 0 ``dual`` is the MM
    subproblem's D_t, plus ``majorizer`` M_t(theta), ``anchor_primal`` P(theta_t),
    ``mm_steps``, and on the last pass ``true_dual``, ``returned_primal``), ``alpha`` the
    dual variables (constraint order of :func:`constraint_matrix`), ``gap`` the final
    relative gap (lambda > 0: (P(theta_t) - D_t) / P(theta_t), and ``true_gap``, the
    relative gap to the true dual of :func:`dual_objective`, a certificate).
    """

    name = "local-margin"
    trains_parts = False
    #: passes when the user gives no --epochs (the best pass on dev or held-out data
    #: is kept; the duality gap may still be above tol then)
    default_epochs = 15
    #: C values ``arboreal train`` chooses among on held-out data when none is given
    C_GRID = (0.01, 0.1, 1.0)

    def __init__(self, C: float = 1.0, laplacian: float = 0.0, tol: float = 1e-4,
                 shrinking: bool = True, sweeps: int = 1, cache_mb: float = 512.0,
                 verbose: bool = False, constraint_budget: float = CONSTRAINT_BUDGET):
        if not C > 0:
            raise ValueError("C must be positive")
        if not laplacian >= 0:
            raise ValueError("laplacian must be >= 0")
        if not tol >= 0:
            raise ValueError("tol must be >= 0")
        if int(sweeps) < 1:
            raise ValueError("sweeps must be >= 1")
        self.sweeps = int(sweeps)
        self.C = float(C)
        self.laplacian = float(laplacian)
        self.tol = float(tol)
        self.shrinking = bool(shrinking)
        self.cache_mb = float(cache_mb)
        self.verbose = bool(verbose)
        if not constraint_budget > 0:
            raise ValueError("constraint_budget must be positive")
        self.constraint_budget = float(constraint_budget)
        self.history: list[dict] = []
        self.alpha: np.ndarray | None = None
        self.gap: float = float("nan")
        self.true_gap: float = float("nan")

    def start(self, data: TrainingData, seed: int = 0) -> "LocalMarginLearner":
        """The epoch learner on ``data`` (:class:`LocalMarginLearner`): one epoch is one
        pass; its generator (``seed``) orders the sentences and each one's constraints."""
        return LocalMarginLearner(self, data, seed)

    def fit(self, data: TrainingData, epochs: int,
            on_epoch: Callable[[int, np.ndarray], None] | None = None,
            seed: int = 0) -> np.ndarray:
        """Train for at most ``epochs`` passes (module docstring); returns theta (dim,)."""
        return run_epochs(self.start(data, seed), epochs, seed, on_epoch)


class LocalMarginLearner:
    """:class:`LocalMargin`'s passes as an :class:`~arboreal.learn.trainer.EpochLearner`
    (module docstring): the items are the sentences, their order the trainer's, drawn
    from the learner's own generator (``rng``), which also shuffles each sentence's
    constraints; ``converged`` once the relative gap is at most ``tol``; the snapshot is
    theta after the pass, and without dev data the result is ``final_snapshot()`` (with
    the Laplacian: the better of the last theta and the MM anchor, with the certificate
    ``true_gap``). What a pass leaves to the next (theta recomputed from alpha, and with
    the Laplacian the MM step) is done when the next pass starts, so that a run that
    stops returns theta as evaluated."""

    def __init__(self, owner: LocalMargin, data: TrainingData, seed: int):
        require_arc_factored(data, "local-margin")
        self.owner = owner
        self.data = data
        self.graph = graph = _graph_for(data, owner.laplacian, None)
        self.prob = prob = _Problem(data, graph, owner.laplacian, owner.cache_mb * 2.0 ** 20,
                                    constraint_budget=owner.constraint_budget)
        owner.history = []
        dim = data.features.dim
        self.alpha = owner.alpha = np.zeros(prob.total)
        owner.gap = 0.0 if prob.total == 0 else 1.0
        self.theta, self.v, self.margin = np.zeros(dim), np.zeros(dim), np.zeros(prob.total)
        self.rng = np.random.default_rng(seed)
        self.t_start = time.perf_counter()
        self.size = len(prob)
        self.converged = self.exhausted = False
        self.pending = False        # a pass ended: theta to recompute before the next
        if graph is not None:
            self.anchor = np.zeros(dim)              # theta_t
            self.b_g = np.zeros(len(graph))          # b on the graph coordinates
            self.c_t = 0.0
            self.p_anchor = C_total = owner.C * prob.total   # P(0): every margin is 0
            self.mm_steps = 0
            self.last = {"primal": C_total, "major": C_total, "sub_dual": 0.0,
                         "vg": np.zeros(len(graph))}

    def run_epoch(self, order: np.ndarray, epoch: int) -> None:
        if self.prob.total == 0:
            self.exhausted = True
            return
        if self.pending:
            self._between_passes()
        if self.graph is None:
            self._plain_pass(order, epoch)
        else:
            self._mm_pass(order, epoch)
        self.pending = True

    def _pass(self, order, epoch) -> tuple[int, float, float]:
        """One DCD pass over every sentence, then the evaluation sweep at the theta it
        ends with (margins, ``v = sum_c alpha_c d_c`` afresh): ``(coordinate steps taken,
        the pass's seconds, the hinge sum)``."""
        t0 = time.perf_counter()
        visited = self._sweep(order, epoch)
        t_pass = time.perf_counter() - t0
        self.v[:] = 0.0
        return visited, t_pass, self.prob.evaluate(self.theta, self.alpha, self.margin, self.v)

    def _sweep(self, order, epoch) -> int:
        owner, prob, rng, alpha, margin = self.owner, self.prob, self.rng, self.alpha, \
            self.margin
        visited = 0
        for i in self.data.wrap(order, epoch):
            sl = prob.slice(i)
            k = sl.stop - sl.start
            if k == 0:
                continue
            offsets, ids, vals, qv = prob.arcs(i)
            for _ in range(owner.sweeps):
                perm = rng.permutation(k)
                visited += _dcd_sentence(offsets, ids, vals, qv, prob.e_arc[i], prob.a_arc[i],
                                         perm, alpha[sl], prob.qnorm[sl], margin[sl],
                                         self.theta, owner.C, owner.shrinking)
        return visited

    def _plain_pass(self, order, epoch) -> None:
        owner, prob, theta, alpha, v = self.owner, self.prob, self.theta, self.alpha, self.v
        visited, t_pass, hinge = self._pass(order, epoch)
        primal = 0.5 * _sumsq(theta) + owner.C * hinge
        dual = float(alpha.sum()) - 0.5 * _sumsq(v)
        gap = (primal - dual) / primal if primal > 0 else 0.0
        owner.gap = gap
        rec = {"epoch": epoch, "primal": primal, "dual": dual, "gap": gap,
               "visited": visited, "constraints": prob.total,
               "pass_seconds": t_pass, "seconds": time.perf_counter() - self.t_start}
        owner.history.append(rec)
        owner._log(f"local-margin pass {epoch}: primal {primal:.8g} dual {dual:.8g} "
                   f"gap {gap:.2e} visited {visited}/{prob.total} "
                   f"({rec['seconds']:.1f} s)")
        self.converged = gap <= owner.tol

    def _mm_pass(self, order, epoch) -> None:
        owner, prob, graph, theta, alpha, v = self.owner, self.prob, self.graph, self.theta, \
            self.alpha, self.v
        C, lam = owner.C, owner.laplacian
        gids, deg = graph.ids, graph.deg
        visited, t_pass, hinge = self._pass(order, epoch)
        tg = theta[gids]
        tt = _sumsq(theta)
        primal = 0.5 * tt + 0.5 * lam * float(tg @ graph.laplacian_times(tg)) + C * hinge
        major = (0.5 * tt + lam * float(deg @ (tg * tg)) + float(self.b_g @ tg) + self.c_t
                 + C * hinge)
        vg = v[gids]
        rg = vg - self.b_g
        quad = _sumsq(v) - float(vg @ vg) + float(rg @ (rg * prob.qinv_g))
        sub_dual = float(alpha.sum()) - 0.5 * quad + self.c_t
        p_anchor = self.p_anchor
        gap = (p_anchor - sub_dual) / p_anchor if p_anchor > 0 else 0.0
        owner.gap = gap
        rec = {"epoch": epoch, "primal": primal, "majorizer": major, "dual": sub_dual,
               "anchor_primal": p_anchor, "gap": gap, "mm_steps": self.mm_steps,
               "visited": visited, "constraints": prob.total, "pass_seconds": t_pass,
               "seconds": time.perf_counter() - self.t_start}
        owner.history.append(rec)
        owner._log(f"local-margin pass {epoch}: primal {primal:.8g} anchor {p_anchor:.8g} "
                   f"majorizer {major:.8g} subproblem dual {sub_dual:.8g} gap {gap:.2e} "
                   f"MM steps {self.mm_steps} ({rec['seconds']:.1f} s)")
        self.last = {"primal": primal, "major": major, "sub_dual": sub_dual, "vg": vg}
        self.converged = gap <= owner.tol

    def _between_passes(self) -> None:
        """What the last pass leaves to the next: with the Laplacian, the MM step when
        the subproblem is solved well enough (P(theta) <= M_t(theta) < P(theta_t)); then
        theta afresh from alpha (v = sum alpha d_c; Q^-1 (v - b) with the Laplacian):
        no rounding drift."""
        if self.graph is None:
            self.theta, self.v = self.v, self.theta
            return
        lam, graph, last = self.owner.laplacian, self.graph, self.last
        if last["major"] - last["sub_dual"] <= 0.5 * (self.p_anchor - last["major"]):
            self.anchor[:] = self.theta
            self.p_anchor = last["primal"]
            tg = self.anchor[graph.ids]
            st = graph.S @ tg
            self.b_g = -lam * (graph.deg * tg + st)
            self.c_t = 0.5 * lam * float(tg @ (graph.deg * tg - st)) + lam * float(tg @ st)
            self.mm_steps += 1
        self.theta, self.v = self.v, self.theta
        self.theta[graph.ids] = (last["vg"] - self.b_g) * self.prob.qinv_g

    def snapshot(self) -> np.ndarray:
        return self.theta.copy()

    def restore(self, snapshot: np.ndarray) -> None:
        """theta only (alpha, from which the next pass recomputes it, is kept)."""
        self.theta[:] = snapshot

    def final_snapshot(self) -> np.ndarray:
        """theta after the last pass; with the Laplacian the better of it and the anchor
        (both have exact P values), and the certificate of the true problem (its dual at
        the last alpha, v being its sum) in ``true_gap``."""
        owner = self.owner
        if self.graph is None:
            return self.theta.copy()
        if self.prob.total == 0 or not owner.history:
            owner.true_gap = 0.0 if self.prob.total == 0 else float("nan")
            return self.theta.copy()
        theta, p_final = self.theta, owner.history[-1]["primal"]
        if self.p_anchor < p_final:
            theta, p_final = self.anchor, self.p_anchor
        true_dual = float(self.alpha.sum()) - 0.5 * _inverse_quad(self.graph, owner.laplacian,
                                                                  self.v)
        owner.true_gap = (p_final - true_dual) / p_final if p_final > 0 else 0.0
        owner.history[-1]["true_dual"] = true_dual
        owner.history[-1]["returned_primal"] = p_final
        return theta.copy()

    def state(self) -> dict:
        out = {"theta": self.theta, "v": self.v, "alpha": self.alpha, "margin": self.margin,
               "pending": self.pending, "converged": self.converged,
               "gap": self.owner.gap, "history": self.owner.history}
        if self.graph is not None:
            out.update(anchor=self.anchor, b_g=self.b_g, c_t=self.c_t, p_anchor=self.p_anchor,
                       mm_steps=self.mm_steps, last=self.last)
        return out

    def load_state(self, state: dict) -> None:
        for key in ("theta", "v", "alpha", "margin"):
            getattr(self, key)[:] = state[key]
        self.pending, self.converged = bool(state["pending"]), bool(state["converged"])
        self.owner.gap = state["gap"]
        self.owner.history = list(state["history"])
        if self.graph is not None:
            self.anchor[:] = state["anchor"]
            self.b_g = np.array(state["b_g"], dtype=np.float64)
            self.c_t, self.p_anchor = state["c_t"], state["p_anchor"]
            self.mm_steps = int(state["mm_steps"])
            self.last = {**state["last"], "vg": np.array(state["last"]["vg"])}
