"""MIRA for spanning-tree parsing (McDonald, Crammer & Pereira 2006, §3.1).

All variants keep the averaged weights (lazy averaging as in
:mod:`arboreal.learn.perceptron`) and visit the sentences in an order shuffled by
``np.random.default_rng(seed)``. Loss of a tree: the number of words with a wrong
head (the two-stage parser trains labels separately, see
:mod:`arboreal.models.labeler`).

* ``Mira`` (1-best): one constraint, the best tree under the current weights
  (Eisner or Chu-Liu-Edmonds); closed-form update
  ``alpha = min(C, max(0, (L - margin) / ||df||^2))``.
* ``KBestMira``: the k best projective trees (``eisner_kbest``, k = 5 by default),
  solved with Hildreth's algorithm. Chu-Liu-Edmonds has no k-best extension in
  arboreal (the paper also uses k = 1 there), so non-projective training falls back
  to the 1-best constraint.
* ``FactoredMira`` (§3.1.2): the arc-factored constraints
  ``s(l, j) - s(k, j) >= 1`` for the gold head l of every word j and every other
  head k. Only the violated constraints can get a non-zero dual variable, so we keep
  the (at most ``max_per_word``, default 5) most violated ones of each word and solve
  them jointly with Hildreth's algorithm; O(n^2) scoring plus a QP whose size is
  bounded by ``max_per_word * n``.

Options: ``C`` (upper bound of the dual variables, default inf as in the paper),
``average`` (default True), ``k`` (KBestMira), ``max_per_word`` (FactoredMira).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from arboreal.learn import ArcFactoredData, EpochCallback, decode, decode_kbest
from arboreal.learn.hildreth import hildreth
from arboreal.learn.perceptron import averaged_online_fit


def _constraint_matrix(fs, enc, rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]]):
    """Sparse matrix (k, |U|) of constraint vectors over the union U of their features.

    Each row is given as arcs (hs, ms, coefs): the vector sum_a coef_a f(h_a, m_a).
    Returns (M csr, U ids int64).
    """
    hs = np.concatenate([r[0] for r in rows]).astype(np.int64)
    ms = np.concatenate([r[1] for r in rows]).astype(np.int64)
    co = np.concatenate([r[2] for r in rows]).astype(np.float64)
    row_of_arc = np.repeat(np.arange(len(rows)), [len(r[0]) for r in rows])
    offsets, ids = fs.arc_features(enc, hs, ms)
    counts = np.diff(offsets)
    vals = np.repeat(co, counts)
    rows_idx = np.repeat(row_of_arc, counts)
    U, cols = np.unique(ids, return_inverse=True)
    M = sp.csr_matrix((vals, (rows_idx, cols)), shape=(len(rows), len(U)))
    M.sum_duplicates()
    return M, U


class _MiraBase:
    name = "mira"

    def __init__(self, C: float = np.inf, average: bool = True):
        self.C = float(C)
        self.average = bool(average)
        if not self.C > 0:
            raise ValueError("MIRA option C must be > 0")

    def fit(self, data: ArcFactoredData, epochs: int, on_epoch: EpochCallback | None = None,
            seed: int = 0) -> np.ndarray:
        fs = data.features

        def update(i: int, w: np.ndarray, u: np.ndarray, c: float) -> None:
            enc = data.encoded[i]
            gold = np.asarray(data.heads[i], dtype=np.int64)
            scores = fs.arc_scores(enc, w)
            upd = self._update(data, enc, gold, scores)
            if upd is not None:
                U, delta = upd
                w[U] += delta.astype(np.float32)
                u[U] += (c * delta).astype(np.float32)

        return averaged_online_fit(data, epochs, update, self.average, on_epoch, seed)

    def _trees_update(self, fs, enc, gold, scores, trees):
        """Hildreth update for tree constraints s(gold) - s(y) >= loss(y), y in trees."""
        n = enc.n
        rows, losses, margins = [], [], []
        mods = np.arange(1, n + 1)
        for y in trees:
            wrong = mods[gold[1:] != y[1:]]
            if wrong.size == 0:
                continue
            hs = np.concatenate([gold[wrong], y[wrong]])
            ms = np.concatenate([wrong, wrong])
            co = np.concatenate([np.ones(wrong.size), -np.ones(wrong.size)])
            rows.append((hs, ms, co))
            losses.append(float(wrong.size))
            margins.append(float(scores[gold[wrong], wrong].sum() - scores[y[wrong], wrong].sum()))
        if not rows:
            return None
        b = np.array(losses) - np.array(margins)
        if b.max() <= 0:
            return None
        M, U = _constraint_matrix(fs, enc, rows)
        if len(rows) == 1:
            norm = float(M.multiply(M).sum())
            if norm <= 0:
                return None
            alpha = np.array([min(self.C, max(0.0, b[0] / norm))])
        else:
            G = (M @ M.T).toarray()
            alpha = hildreth(G, b, self.C)
        if not alpha.any():
            return None
        delta = np.asarray(M.T @ alpha).ravel()
        return U, delta


class Mira(_MiraBase):
    """1-best MIRA. Options: C."""

    name = "mira"

    def _update(self, data, enc, gold, scores):
        pred = decode(scores, data.projective, data.single_root)
        return self._trees_update(data.features, enc, gold, scores, [np.asarray(pred)])


class KBestMira(_MiraBase):
    """k-best MIRA (k = 5) with Hildreth's algorithm. Options: C, k."""

    name = "kbest-mira"

    def __init__(self, C: float = np.inf, k: int = 5, average: bool = True):
        super().__init__(C, average)
        self.k = int(k)
        if self.k < 1:
            raise ValueError("k-best MIRA option k must be >= 1")

    def _update(self, data, enc, gold, scores):
        if data.projective and self.k > 1:
            trees = list(decode_kbest(scores, self.k, data.single_root))
        else:
            trees = [decode(scores, data.projective, data.single_root)]
        return self._trees_update(data.features, enc, gold, scores, trees)


class FactoredMira(_MiraBase):
    """Factored MIRA (§3.1.2). Options: C, max_per_word."""

    name = "factored-mira"

    def __init__(self, C: float = np.inf, max_per_word: int = 5, average: bool = True):
        super().__init__(C, average)
        self.max_per_word = int(max_per_word)
        if self.max_per_word < 1:
            raise ValueError("factored MIRA option max_per_word must be >= 1")

    def _update(self, data, enc, gold, scores):
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
        m = jk + 1
        rows = [(np.array([gold[mm], hh]), np.array([mm, mm]), np.array([1.0, -1.0]))
                for hh, mm in zip(hk.tolist(), m.tolist())]
        M, U = _constraint_matrix(data.features, enc, rows)
        G = (M @ M.T).toarray()
        alpha = hildreth(G, slack, self.C)
        if not alpha.any():
            return None
        delta = np.asarray(M.T @ alpha).ravel()
        return U, delta
