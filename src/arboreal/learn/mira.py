"""MIRA for spanning-tree parsing (McDonald, Crammer & Pereira 2006, §3.1).

All variants keep the averaged weights (lazy averaging as in
:mod:`arboreal.learn.perceptron`) and visit the sentences in an order shuffled by
``np.random.default_rng(seed)``. Loss of a tree: the number of words with a wrong
head (the two-stage parser trains labels separately, see
:mod:`arboreal.scorers.labeler`).

* ``Mira`` (1-best): one constraint, the best tree under the current weights
  (Eisner or Chu-Liu-Edmonds) made *cost-augmented*: every non-gold arc scores
  ``cost`` more (default 1), so the tree found maximizes score + cost * loss, with
  cost 1 the most violated constraint of the margin ``s(gold) - s(y) >= L(y)`` rather
  than the tree the model predicts (loss-augmented inference, Taskar et al. 2004; the
  max-loss update of Crammer et al. 2006; TurboParser's ``svm_mira``); ``cost=0`` is
  McDonald et al.'s prediction-based constraint. Closed-form update
  ``alpha = min(C, max(0, (L - margin) / ||df||^2))``, with L and the margin of the
  tree found under the model's own scores.
* ``KBestMira``: the k best projective trees (``eisner_kbest``, k = 5 by default;
  cost-augmented as ``Mira``), solved with Hildreth's algorithm. Chu-Liu-Edmonds has
  no k-best extension in arboreal (the paper also uses k = 1 there), so
  non-projective training falls back to the 1-best constraint.
* ``FactoredMira`` (§3.1.2): the arc-factored constraints
  ``s(l, j) - s(k, j) >= 1`` for the gold head l of every word j and every other
  head k. Only the violated constraints can get a non-zero dual variable, so we keep
  the (at most ``max_per_word``, default 5) most violated ones of each word and solve
  them jointly with Hildreth's algorithm; O(n^2) scoring plus a QP whose size is
  bounded by ``max_per_word * n``.

Options: ``C`` (upper bound of the dual variables, default inf as in the paper),
``average`` (default True), ``cost`` (Mira, KBestMira: default 1), ``k`` (KBestMira),
``max_per_word`` (FactoredMira, whose per-arc constraints carry their margin of 1).

An update never touches a vector of the weights' size: a constraint is a signed
list of arcs (for a tree, the gold and the predicted arc of each word it gets
wrong), the feature ids of the distinct arcs come from
``FeatureSet.arc_features``, and one numba kernel (:func:`_solve_apply`) maps
those ids to columns with an open-addressing hash table, builds the Gram
matrix of the constraints from the arcs' Gram matrix, runs Hildreth's algorithm
and adds ``sum_i alpha_i a_i`` to the weights: about O(#ids) plus O(k^2 (2n)^2)
at worst for the Gram matrix. The arithmetic is that of explicit sparse
constraint vectors (integer-valued, so the Gram matrix is exact, and the update
of each weight sums ``alpha_i a_i`` in constraint order), so results do not
change.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from arboreal.learn import TrainingData, EpochCallback, cost_bias
from arboreal.learn.hildreth import _hildreth
from arboreal.learn.perceptron import OnlineLearner, online_learner
from arboreal.learn.trainer import run_epochs

_MAX_ITER = 10000     # Hildreth's defaults (arboreal.learn.hildreth.hildreth)
_EPS = 1e-8


@njit(cache=True)
def _block_sum(a, lo, n):
    """numpy's pairwise-summation leaf (n <= 128): 8 accumulators."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[lo + i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    while i < n - n % 8:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@njit(cache=True)
def _pairwise_sum(a, lo, n):
    """``a[lo:lo+n].sum()`` with numpy's pairwise summation (same rounding).

    numpy halves blocks longer than 128 (at a multiple of 8) recursively; the
    recursion is unrolled with an explicit stack (numba's cache does not
    support recursive functions)."""
    if n <= 128:
        return _block_sum(a, lo, n)
    slo = np.empty(64, dtype=np.int64)
    sn = np.empty(64, dtype=np.int64)
    sph = np.empty(64, dtype=np.int64)     # 1 once the left half is summed
    sleft = np.empty(64)
    slo[0] = lo
    sn[0] = n
    sph[0] = 0
    sp = 1
    while True:
        t = sp - 1
        if sn[t] > 128:
            n2 = sn[t] // 2
            n2 -= n2 % 8
            slo[sp] = slo[t]
            sn[sp] = n2
            sph[sp] = 0
            sp += 1
            continue
        v = _block_sum(a, slo[t], sn[t])
        sp -= 1
        while True:
            if sp == 0:
                return v
            t = sp - 1
            if sph[t] == 0:
                sleft[t] = v
                sph[t] = 1
                n2 = sn[t] // 2
                n2 -= n2 % 8
                slo[sp] = slo[t] + n2
                sn[sp] = sn[t] - n2
                sph[sp] = 0
                sp += 1
                break
            v = sleft[t] + v
            sp -= 1


@njit(cache=True)
def _tree_constraints(gold, trees, scores):
    """Constraints s(gold) - s(y) >= loss(y) for the trees y (rows of ``trees``)
    that get at least one head wrong, in their order.

    Returns ``(b, arc_h, arc_m, con_ptr, con_arc, con_coef)``: b (k,) = loss -
    margin; the distinct arcs (arc_h, arc_m) involved; constraint i is
    ``sum_p con_coef[p] f(arc con_arc[p])`` for p in con_ptr[i]:con_ptr[i+1]
    (+1 for the gold arc, -1 for the predicted arc of each wrong word).  O(k n).
    """
    n = gold.shape[0] - 1
    T = trees.shape[0]
    aid = np.full((n + 1) * (n + 1), -1, dtype=np.int64)
    arc_h = np.empty(2 * T * n + 1, dtype=np.int64)
    arc_m = np.empty(2 * T * n + 1, dtype=np.int64)
    con_ptr = np.zeros(T + 1, dtype=np.int64)
    con_arc = np.empty(2 * T * n + 1, dtype=np.int64)
    con_coef = np.empty(2 * T * n + 1)
    b = np.empty(T)
    gs = np.empty(n + 1)
    ys = np.empty(n + 1)
    k = 0
    na = 0
    p = 0
    for t in range(T):
        cnt = 0
        for m in range(1, n + 1):
            if trees[t, m] != gold[m]:
                gs[cnt] = scores[gold[m], m]
                ys[cnt] = scores[trees[t, m], m]
                cnt += 1
        if cnt == 0:
            continue
        # as float(s[gold[w], w].sum() - s[y[w], w].sum()) with numpy
        margin = (0.0 + _pairwise_sum(gs, 0, cnt)) - (0.0 + _pairwise_sum(ys, 0, cnt))
        b[k] = float(cnt) - margin
        for side in range(2):
            for m in range(1, n + 1):
                y = trees[t, m]
                if y == gold[m]:
                    continue
                h = gold[m] if side == 0 else y
                key = h * (n + 1) + m
                if aid[key] < 0:
                    aid[key] = na
                    arc_h[na] = h
                    arc_m[na] = m
                    na += 1
                con_arc[p] = aid[key]
                con_coef[p] = 1.0 if side == 0 else -1.0
                p += 1
        k += 1
        con_ptr[k] = p
    return b[:k], arc_h[:na], arc_m[:na], con_ptr[:k + 1], con_arc[:p], con_coef[:p]


@njit(cache=True, inline="always")
def _column(keys, kcol, col_feat, col_slot, f, ncol, shift, mask):
    """The hash-table slot of feature id f (linear probing), adding f as column ``ncol``
    if it is new; returns ``(slot, number of columns)``."""
    slot = ((f * -7046029254386353131) >> (64 - shift)) & mask
    while keys[slot] != -1 and keys[slot] != f:
        slot = (slot + 1) & mask
    if keys[slot] == -1:
        keys[slot] = f
        kcol[slot] = ncol
        col_feat[ncol] = f
        col_slot[ncol] = slot
        ncol += 1
    return slot, ncol


@njit(cache=True)
def _single_apply(offsets, ids, vals, con_ptr, con_arc, con_coef, b, C, w, u, c, keys, kcol,
                  shift):
    """:func:`_solve_apply` for one constraint in closed form, with the same arithmetic:
    the constraint's count of each distinct id (hash table ``keys`` -> ``kcol``, left
    all -1 on return), ``||a||^2`` their sum of squares, ``alpha = min(C, max(0, b /
    ||a||^2))``, then ``w[f] += alpha a[f]`` and ``u[f] += c alpha a[f]``. O(#ids);
    no per-arc lists or Gram matrix."""
    na = offsets.shape[0] - 1
    mask = keys.shape[0] - 1
    sign = np.zeros(na)
    for p in range(con_ptr[0], con_ptr[1]):
        sign[con_arc[p]] += con_coef[p]
    col_feat = np.empty(ids.shape[0], dtype=np.int64)
    col_slot = np.empty(ids.shape[0], dtype=np.int64)
    count = np.zeros(ids.shape[0])
    ncol = 0
    for a in range(na):
        sa = sign[a]
        if sa == 0.0:
            continue
        for q in range(offsets[a], offsets[a + 1]):
            slot, ncol = _column(keys, kcol, col_feat, col_slot, ids[q], ncol, shift, mask)
            count[kcol[slot]] += sa * vals[q]
    norm = 0.0
    for col in range(ncol):
        keys[col_slot[col]] = -1
        norm += count[col] * count[col]
    if norm <= 0:
        return False
    alpha = min(C, max(0.0, b / norm))
    if alpha == 0.0:
        return False
    for col in range(ncol):
        if count[col] != 0.0:
            d = count[col] * alpha
            f = col_feat[col]
            w[f] += np.float32(d)
            u[f] += np.float32(c * d)
    return True


@njit(cache=True)
def _solve_apply(offsets, ids, vals, con_ptr, con_arc, con_coef, b, C, closed_form_single,
                 w, u, c, keys, kcol, max_iter, eps):
    """Hildreth's MIRA step for k constraints given as signed arc lists over arcs
    whose feature vectors are ``sum_q vals[q] e_{ids[q]}`` over q in
    ``offsets[a]:offsets[a+1]``; adds
    ``sum_i alpha_i a_i`` to w and ``c`` times it to u (float32, in place).

    Each distinct feature id becomes a column (hash table keys / kcol: power-of-two
    size > 2 len(ids), keys all -1 on entry and on return) holding the list of
    arcs that fire it.  The Gram matrix is G = C (F F^T) C^T with F the arc x
    column counts and C the constraint x arc signs: the arc Gram matrix costs the
    sum over columns of (#arcs)^2, G then O(sum_ij |arcs_i| |arcs_j|); all of it
    is exact integer arithmetic.  The update of column f is
    ``sum_i alpha_i a_i[f]`` summed in increasing i.  With ``closed_form_single``
    one constraint gets ``min(C, max(0, b / ||a||^2))`` instead of Hildreth.
    Returns whether the weights changed (some alpha_i != 0).
    """
    k = b.shape[0]
    na = offsets.shape[0] - 1
    nf = ids.shape[0]
    T = keys.shape[0]
    mask = T - 1
    shift = 0
    while (1 << shift) < T:
        shift += 1
    if closed_form_single and k == 1:
        return _single_apply(offsets, ids, vals, con_ptr, con_arc, con_coef, b[0], C, w, u,
                             c, keys, kcol, shift)
    # columns: the distinct ids, each with its list of (arc, count) nodes
    col_feat = np.empty(nf, dtype=np.int64)
    col_slot = np.empty(nf, dtype=np.int64)
    col_head = np.full(nf, -1, dtype=np.int64)
    col_tail = np.full(nf, -1, dtype=np.int64)
    node_a = np.empty(nf, dtype=np.int64)
    node_c = np.empty(nf)
    node_next = np.empty(nf, dtype=np.int64)
    ncol = 0
    nn = 0
    for a in range(na):
        for q in range(offsets[a], offsets[a + 1]):
            slot, ncol = _column(keys, kcol, col_feat, col_slot, ids[q], ncol, shift, mask)
            col = kcol[slot]
            t = col_tail[col]
            if t >= 0 and node_a[t] == a:
                node_c[t] += vals[q]
            else:
                node_a[nn] = a
                node_c[nn] = vals[q]
                node_next[nn] = -1
                if t >= 0:
                    node_next[t] = nn
                else:
                    col_head[col] = nn
                col_tail[col] = nn
                nn += 1
    for col in range(ncol):
        keys[col_slot[col]] = -1
    # arc Gram matrix H = F F^T, then G = C H C^T
    H = np.zeros((na, na))
    for col in range(ncol):
        p = col_head[col]
        while p >= 0:
            q = col_head[col]
            while q >= 0:
                H[node_a[p], node_a[q]] += node_c[p] * node_c[q]
                q = node_next[q]
            p = node_next[p]
    G = np.zeros((k, k))
    row = np.empty(na)
    for i in range(k):
        row[:] = 0.0                       # row = (C H)[i]
        for p in range(con_ptr[i], con_ptr[i + 1]):
            cp = con_coef[p]
            hp = H[con_arc[p]]
            for a in range(na):
                row[a] += cp * hp[a]
        for j in range(k):
            g = 0.0
            for q in range(con_ptr[j], con_ptr[j + 1]):
                g += con_coef[q] * row[con_arc[q]]
            G[i, j] = g
    if closed_form_single and k == 1:
        norm = G[0, 0]
        if norm <= 0:
            return False
        alpha = np.empty(1)
        alpha[0] = min(C, max(0.0, b[0] / norm))
    else:
        alpha = _hildreth(G, b, C, max_iter, eps)
    nz = False
    for i in range(k):
        if alpha[i] != 0.0:
            nz = True
    if not nz:
        return False
    # arc -> its (constraint, sign) entries
    arc_ptr = np.zeros(na + 1, dtype=np.int64)
    for p in range(con_ptr[k]):
        arc_ptr[con_arc[p] + 1] += 1
    for a in range(na):
        arc_ptr[a + 1] += arc_ptr[a]
    fill = arc_ptr[:na].copy()
    arc_con = np.empty(con_ptr[k], dtype=np.int64)
    arc_coef = np.empty(con_ptr[k])
    for i in range(k):
        for p in range(con_ptr[i], con_ptr[i + 1]):
            a = con_arc[p]
            arc_con[fill[a]] = i
            arc_coef[fill[a]] = con_coef[p]
            fill[a] += 1
    # column f: a_i[f] for the constraints touching it, then sum_i alpha_i a_i[f]
    # (in increasing i; with few constraints all k are visited, zeros skipped)
    dcol = np.empty(ncol)
    acc = np.zeros(k)
    touched = np.empty(k, dtype=np.int64)
    few = k <= 16
    for col in range(ncol):
        nt = 0
        p = col_head[col]
        while p >= 0:
            a = node_a[p]
            for e in range(arc_ptr[a], arc_ptr[a + 1]):
                i = arc_con[e]
                if not few and acc[i] == 0.0:
                    # insert i into the sorted list of touched constraints
                    pos = nt
                    while pos > 0 and touched[pos - 1] >= i:
                        pos -= 1
                    if pos == nt or touched[pos] != i:
                        for r in range(nt, pos, -1):
                            touched[r] = touched[r - 1]
                        touched[pos] = i
                        nt += 1
                acc[i] += arc_coef[e] * node_c[p]
            p = node_next[p]
        d = 0.0
        if few:
            for i in range(k):
                if acc[i] != 0.0:
                    d += acc[i] * alpha[i]
                    acc[i] = 0.0
        else:
            for r in range(nt):
                i = touched[r]
                d += acc[i] * alpha[i]
                acc[i] = 0.0
        dcol[col] = d
    # a tight loop for the scattered writes (their cache misses overlap)
    for col in range(ncol):
        f = col_feat[col]
        d = dcol[col]
        w[f] += np.float32(d)
        u[f] += np.float32(c * d)
    return True


class _HashScratch:
    """Open-addressing table (feature id -> column) reused across updates."""

    def __init__(self) -> None:
        self.keys = np.full(1024, -1, dtype=np.int64)
        self.kcol = np.empty(1024, dtype=np.int64)

    def fit(self, n_ids: int) -> None:
        if 2 * n_ids >= self.keys.shape[0]:
            size = 1 << int(4 * n_ids).bit_length()
            self.keys = np.full(size, -1, dtype=np.int64)
            self.kcol = np.empty(size, dtype=np.int64)


class _MiraBase:
    name = "mira"
    _closed_form_single = True    # one tree constraint: closed form (as the paper)
    #: trains models with higher-order parts (TrainingData.parts): 1-best there
    trains_parts = True

    def __init__(self, C: float = np.inf, average: bool = True, cost: float = 1.0):
        """``cost``: the score added to every non-gold arc when the constraint trees
        are decoded (0: the trees the model predicts)."""
        self.C = float(C)
        self.average = bool(average)
        self.cost = float(cost)
        if not self.C > 0:
            raise ValueError("MIRA option C must be > 0")
        if not (self.cost >= 0 and np.isfinite(self.cost)):
            raise ValueError("MIRA option cost must be finite and >= 0")

    def _augmented(self, scores: np.ndarray, gold: np.ndarray) -> np.ndarray:
        """Arc scores (n+1, n+1) of cost-augmented decoding."""
        return scores + cost_bias(gold, self.cost) if self.cost else scores

    def start(self, data: TrainingData, seed: int = 0) -> OnlineLearner:
        """The epoch learner training on ``data``
        (:class:`~arboreal.learn.perceptron.OnlineLearner`)."""
        return online_learner(self, data)

    def fit(self, data: TrainingData, epochs: int, on_epoch: EpochCallback | None = None,
            seed: int = 0) -> np.ndarray:
        return run_epochs(self.start(data, seed), epochs, seed, on_epoch)

    def make_update(self, data: TrainingData, count: bool = False):
        """The step of :class:`~arboreal.learn.perceptron.OnlineLearner` for
        ``data``: ``update(i, w, u, c)`` applies sentence i's MIRA update and returns
        whether it changed the weights (a violated constraint, some alpha != 0; known
        for free, so ``count`` changes nothing)."""
        fs = data.features
        scratch = _HashScratch()
        if not data.arc_factored:
            return self._parts_update(data, scratch)

        def update(i: int, w: np.ndarray, u: np.ndarray, c: float) -> bool:
            enc = data.encoded[i]
            gold = np.asarray(data.heads[i], dtype=np.int64)
            scores = fs.arc_scores(enc, w)
            cons = self._constraints(data, enc, gold, scores)
            if cons is None:
                return False
            b, arc_h, arc_m, con_ptr, con_arc, con_coef = cons
            offsets, ids, vals = fs.arc_features(enc, arc_h, arc_m)
            scratch.fit(ids.shape[0])
            return _solve_apply(offsets, ids, vals, con_ptr, con_arc, con_coef, b, self.C,
                                self._closed_form_single, w, u, float(c), scratch.keys,
                                scratch.kcol, _MAX_ITER, _EPS)

        return update

    def _parts_update(self, data: TrainingData, scratch: _HashScratch):
        """The 1-best step for a model with higher-order parts (no k-best or factored
        constraints there): one constraint phi(gold) - phi(pred) over the differing
        arcs and both trees' parts, ``b = loss - w . diff`` with loss the number of
        wrong heads, solved in closed form by :func:`_solve_apply`."""
        if not self._closed_form_single:
            raise ValueError(f"{self.name} needs arc-factored constraints; with "
                             "higher-order parts use mira or kbest-mira")

        def update(i: int, w: np.ndarray, u: np.ndarray, c: float) -> bool:
            gold = np.asarray(data.heads[i], dtype=np.int64)
            pred = data.decode(i, w, self.cost)
            loss = int((gold[1:] != pred[1:]).sum())
            if loss == 0:
                return False
            offsets, ids, vals, con_ptr, con_item, con_coef = data.tree_items(i, gold, [pred])
            counts = np.diff(offsets)
            item_score = np.bincount(np.repeat(np.arange(counts.size), counts),
                                     weights=w[ids].astype(np.float64) * vals,
                                     minlength=counts.size)
            b = np.array([loss - float(con_coef @ item_score[con_item])])
            if b[0] <= 0:
                return False
            scratch.fit(ids.shape[0])
            return _solve_apply(offsets, ids, vals, con_ptr, con_item, con_coef, b, self.C, True,
                                w, u, float(c), scratch.keys, scratch.kcol, _MAX_ITER, _EPS)

        return update

    @staticmethod
    def _tree_constraints(gold, scores, trees):
        """Constraints for the trees (k', n+1), or None when none is violated."""
        b, arc_h, arc_m, con_ptr, con_arc, con_coef = _tree_constraints(
            gold, np.ascontiguousarray(trees, dtype=np.int64),
            np.ascontiguousarray(scores, dtype=np.float64))
        if b.size == 0 or b.max() <= 0:
            return None
        return b, arc_h, arc_m, con_ptr, con_arc, con_coef


class Mira(_MiraBase):
    """1-best MIRA. Options: C, cost."""

    name = "mira"

    def _constraints(self, data, enc, gold, scores):
        pred = data.structure.decode(self._augmented(scores, gold))
        return self._tree_constraints(gold, scores, np.asarray(pred)[None])


class KBestMira(_MiraBase):
    """k-best MIRA (k = 5) with Hildreth's algorithm. Options: C, k, cost."""

    name = "kbest-mira"

    def __init__(self, C: float = np.inf, k: int = 5, average: bool = True,
                 cost: float = 1.0):
        super().__init__(C, average, cost)
        self.k = int(k)
        if self.k < 1:
            raise ValueError("k-best MIRA option k must be >= 1")

    def _constraints(self, data, enc, gold, scores):
        aug = self._augmented(scores, gold)
        if data.projective and self.k > 1:
            # one sentence: only the finite-score trees come back
            trees, _ = data.structure.kbest(aug, self.k)
        else:
            trees = data.structure.decode(aug)[None]
        return self._tree_constraints(gold, scores, trees)


class FactoredMira(_MiraBase):
    """Factored MIRA (§3.1.2). Options: C, max_per_word."""

    name = "factored-mira"
    _closed_form_single = False
    trains_parts = False

    def __init__(self, C: float = np.inf, max_per_word: int = 5, average: bool = True):
        super().__init__(C, average, cost=0.0)
        self.max_per_word = int(max_per_word)
        if self.max_per_word < 1:
            raise ValueError("factored MIRA option max_per_word must be >= 1")

    def _constraints(self, data, enc, gold, scores):
        n = enc.n
        mods = np.arange(1, n + 1)
        s = scores[:, 1:].copy()  # (n+1, n) over heads x modifiers 1..n
        gold_s = s[gold[1:], mods - 1]
        viol = gold_s[None, :] - s < 1.0  # constraint s(l,j) - s(k,j) >= 1 violated
        viol[gold[1:], mods - 1] = False
        viol[mods, mods - 1] = False  # no self-loops
        hk, jk = np.nonzero(viol)
        if hk.size == 0:
            return None
        slack = 1.0 - (gold_s[jk] - s[hk, jk])
        if self.max_per_word < n:
            order = np.lexsort((-slack, jk))
            jk, hk, slack = jk[order], hk[order], slack[order]
            first = np.searchsorted(jk, jk, side="left")
            keep = np.arange(jk.size) - first < self.max_per_word
            jk, hk, slack = jk[keep], hk[keep], slack[keep]
        m = (jk + 1).astype(np.int64)
        # arcs: the gold arc of each word concerned, then one wrong arc per constraint
        um, gold_idx = np.unique(m, return_inverse=True)
        arc_h = np.concatenate([gold[um], hk.astype(np.int64)])
        arc_m = np.concatenate([um, m])
        r = np.arange(m.size, dtype=np.int64)
        con_arc = np.empty(2 * m.size, dtype=np.int64)
        con_arc[0::2] = gold_idx
        con_arc[1::2] = um.size + r
        con_coef = np.tile(np.array([1.0, -1.0]), m.size)
        con_ptr = 2 * np.arange(m.size + 1, dtype=np.int64)
        return (np.ascontiguousarray(slack, dtype=np.float64), arc_h, arc_m, con_ptr,
                con_arc, con_coef)
