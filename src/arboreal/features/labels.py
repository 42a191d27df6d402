"""Label features of a jointly labeled first-order model: s(h, m, l) = w . f(h, m) + v . g(h, m, l).

The arc features f are the unlabeled :class:`~arboreal.features.FeatureSet` (scored once
per arc, never per label). The label features g are small and factor so that the
label scores of all n^2 arcs and L labels are a sum of per-sentence tables:

    g-score(h, m, l) = H[h, d, l] + M[m, d, l] + D[0, l] + D[dd(h, m), l]
                       + P[pos(h), pos(m), d, l]

* ``H``: hashed templates over the head only (``h.word``, ``h.pos``, ...), each
  firing plain and conjoined with the direction d = [m > h]; a feature selects a row
  of the (2**bits, L) matrix ``W`` (all labels of one feature in one row), so H costs
  O(n T_h L) gathers;
* ``M``: the same for templates over the modifier (``m.word``, ``m.lemma``,
  ``m.feats``, ``m-1.pos m.pos``, ...);
* ``D``: a dense (15, L) table, row 0 the label bias, rows 1..14 the label conjoined
  with (direction, distance bucket) (the slot numbering of ``hashing._dd``);
* ``P``: a dense (n_pos, n_pos, 2, L) table for label x (h.pos, m.pos, direction).

So a sentence costs O(n (T_h + T_m) L) gathers plus O(n^2 L) additions, independent
of the 70-odd arc templates. The parameter vector ``v`` is flat:
``[W.ravel(), D.ravel(), P.ravel()]`` (:attr:`LabelFeatures.dim` entries).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from arboreal.features.first_order import ATTR_INDEX, N_RESERVED
from arboreal.features.hashing import HEAD, MOD, _fmix, _mix, compile_templates

__all__ = ["LabelFeatures", "HEAD_TEMPLATES", "MOD_TEMPLATES", "label_feature_templates",
           "ROOT_LABEL", "constrain_root_label", "constrain_root_arcs"]

#: the DEPREL Universal Dependencies gives the word on the root, and no other word
ROOT_LABEL = "root"


def constrain_root_label(rows: np.ndarray, heads: np.ndarray, labels) -> np.ndarray:
    """Label scores (n+1, L) of each word given the tree ``heads``, with UD's rule
    applied when the label set has :data:`ROOT_LABEL`: a word on the root can only be
    ``root``, any other word anything but ``root``. A copy; O(n L)."""
    labels = list(labels)
    if ROOT_LABEL not in labels or rows.shape[0] <= 1:
        return rows
    r = labels.index(ROOT_LABEL)
    rows = np.array(rows, dtype=np.float64)
    on_root = np.asarray(heads)[1:] == 0
    keep = rows[1:][on_root, r]
    rows[1:][on_root] = -np.inf
    rows[1:][on_root, r] = keep
    rows[1:][~on_root, r] = -np.inf
    return rows


def constrain_root_arcs(G: np.ndarray, labels) -> np.ndarray:
    """Label scores (n+1, n+1, L) of every arc h -> m with the same rule: arcs from the
    root take only ``root``, other arcs anything else. A copy; O(n^2 L)."""
    labels = list(labels)
    if ROOT_LABEL not in labels:
        return G
    r = labels.index(ROOT_LABEL)
    G = np.array(G, dtype=np.float64)
    keep = G[0, :, r].copy()
    G[0] = -np.inf
    G[0, :, r] = keep
    G[1:, :, r] = -np.inf
    return G

HEAD_TEMPLATES = ["h.word", "h.pos", "h.xpos", "h.lemma", "h.feats", "h.pos h.feats",
                  "h.pos h+1.pos", "h-1.pos h.pos"]
MOD_TEMPLATES = ["m.word", "m.pos", "m.xpos", "m.lemma", "m.feats", "m.suf3", "m.pos m.feats",
                 "m.word m.pos", "m-1.pos m.pos", "m.pos m+1.pos", "m-1.word m.pos",
                 "m+1.word m.pos"]
_POS = ATTR_INDEX["pos"]
_K = np.uint64(0x9E3779B97F4A7C15)
_DIR_SALT = np.uint64(0x632BE59BD9B4E019)


def label_feature_templates(attrs: set[str]) -> tuple[list[str], list[str]]:
    """(head templates, modifier templates) that only read attributes in ``attrs``."""
    def ok(t):
        return {slot.partition(".")[2] for slot in t.split()} <= attrs
    return [t for t in HEAD_TEMPLATES if ok(t)], [t for t in MOD_TEMPLATES if ok(t)]


class LabelFeatures:
    """Label feature tables for L labels (see the module docstring).

    Args:
        labels: the label strings (L,).
        n_pos: number of UPOS codes (``N_RESERVED + len(FeatureSet.vocabs["pos"])``).
        head_templates / mod_templates: template strings anchored only on h / only on m
            (syntax of :func:`arboreal.features.hashing.compile_templates`).
        bits: ``W`` has 2**bits rows of L weights.
    """

    def __init__(self, labels, n_pos: int, head_templates: list[str] | None = None,
                 mod_templates: list[str] | None = None, bits: int = 16):
        self.labels = np.asarray(labels, dtype=str)
        self.L = max(1, len(self.labels))
        self.n_pos = int(n_pos)
        self.bits = int(bits)
        if not 8 <= self.bits <= 24:
            raise ValueError("label feature bits must lie in 8..24")
        self.head_templates = list(HEAD_TEMPLATES if head_templates is None else head_templates)
        self.mod_templates = list(MOD_TEMPLATES if mod_templates is None else mod_templates)
        self.head_table = compile_templates(self.head_templates, ATTR_INDEX)
        self.mod_table = compile_templates(self.mod_templates, ATTR_INDEX)
        for table, anchor, what in ((self.head_table, HEAD, "head"), (self.mod_table, MOD, "modifier")):
            for t in range(table.shape[0]):
                for s in range(table[t, 0]):
                    if table[t, 4 + 3 * s] != anchor:
                        raise ValueError(f"{what} label template {t} reads another anchor")
        L = self.L
        self._sizes = ((1 << self.bits) * L, 15 * L, self.n_pos * self.n_pos * 2 * L)

    @staticmethod
    def table_entries(bits: int, n_pos: int, n_labels: int) -> int:
        """Weights of the label table (:attr:`dim`) with 2**bits hashed rows, ``n_pos``
        UPOS codes and ``n_labels`` labels, known before one is built."""
        return ((1 << bits) + 15 + 2 * n_pos * n_pos) * max(1, n_labels)

    @property
    def dim(self) -> int:
        """Length of the flat label weight vector ``v``."""
        return int(sum(self._sizes))

    def split(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Views ``(W (2**bits, L), D (15, L), P (n_pos, n_pos, 2, L))`` of a flat ``v``."""
        a, b, _ = self._sizes
        L = self.L
        return (v[:a].reshape(-1, L), v[a:a + b].reshape(15, L),
                v[a + b:].reshape(self.n_pos, self.n_pos, 2, L))

    def _check(self, v: np.ndarray) -> None:
        if v.ndim != 1 or v.shape[0] != self.dim:
            raise ValueError(f"label weights must have shape ({self.dim},), got {v.shape}")

    def scores(self, enc, v: np.ndarray) -> np.ndarray:
        """Label scores (n+1, n+1, L) float64 ``v . g(h, m, l)``; column 0 and diagonal 0.

        O(n (T_h + T_m) L) gathers + O(n^2 L) additions.
        """
        self._check(v)
        W, D, P = self.split(v)
        shift = np.uint64(64 - self.bits)
        return _label_scores(enc.codes, self.head_table, self.mod_table, shift, W, D, P)

    def accumulate(self, enc, coef: np.ndarray, out: np.ndarray, scale: float = 1.0) -> None:
        """``out += scale * sum_{h,m,l} coef[h, m, l] g(h, m, l)`` (the adjoint of :meth:`scores`).

        coef: (n+1, n+1, L) (e.g. labeled marginals); column 0 and the diagonal are
        ignored. out: flat (dim,) float64, updated in place. O(n^2 L + n (T_h + T_m) L).
        """
        if out.dtype != np.float64 or out.ndim != 1 or out.shape[0] != self.dim:
            raise ValueError(f"out must be float64 of shape ({self.dim},)")
        W, D, P = self.split(out)
        shift = np.uint64(64 - self.bits)
        _label_accumulate(enc.codes, self.head_table, self.mod_table, shift,
                          np.ascontiguousarray(coef, dtype=np.float64), float(scale), W, D, P)

    def accumulate_tree(self, enc, heads: np.ndarray, labels: np.ndarray, out: np.ndarray,
                        scale: float = 1.0) -> None:
        """Gold counts: ``out += scale * g(x, heads, labels)``; labels (n+1,) label indices."""
        n = enc.n
        heads = np.asarray(heads, dtype=np.int64)
        labels = np.asarray(labels, dtype=np.int64)
        coef = np.zeros((n + 1, n + 1, self.L))
        ms = np.arange(1, n + 1)
        ok = (heads[1:] >= 0) & (labels[1:] >= 0)
        coef[heads[1:][ok], ms[ok], labels[1:][ok]] = 1.0
        self.accumulate(enc, coef, out, scale)

    def config(self) -> dict:
        """JSON-able description (the labels are saved separately)."""
        return {"n_pos": self.n_pos, "bits": self.bits, "head_templates": self.head_templates,
                "mod_templates": self.mod_templates}

    @classmethod
    def from_config(cls, cfg: dict, labels) -> "LabelFeatures":
        return cls(labels, cfg["n_pos"], cfg["head_templates"], cfg["mod_templates"], cfg["bits"])

    @classmethod
    def for_features(cls, features, labels, bits: int = 16) -> "LabelFeatures":
        """Label features matching a fitted :class:`FeatureSet` (its UPOS vocabulary;
        only attributes its templates can see for the ``mcdonald`` set)."""
        attrs = set(ATTR_INDEX) if features.name != "mcdonald" else {"word", "p5", "pos"}
        head, mod = label_feature_templates(attrs)
        n_pos = N_RESERVED + len(features.vocabs.get("pos", ()))
        return cls(labels, n_pos, head, mod, bits)


@njit(cache=True)
def _rows(codes, table, side, shift):
    """Weight rows (n+1, T, 3) of one-sided templates at positions 0..n:
    [plain, conjoined with direction left, conjoined with direction right]."""
    n = codes.shape[1] - 3
    T = table.shape[0]
    out = np.empty((n + 1, T, 3), dtype=np.int64)
    for p in range(n + 1):
        for t in range(T):
            hv = _mix(np.uint64(0x84222325CBF29CE4), (t + 1) * 4 + side)
            for s in range(table[t, 0]):
                q = p + table[t, 5 + 3 * s]
                if q < -1:
                    q = -1
                elif q > n + 1:
                    q = n + 1
                hv = _mix(hv, codes[table[t, 3 + 3 * s], q + 1])
            hv = _fmix(hv)
            out[p, t, 0] = np.int64((hv * _K) >> shift)
            for d in range(2):
                hd = _fmix(hv ^ (_DIR_SALT * np.uint64(d + 1)))
                out[p, t, 1 + d] = np.int64((hd * _K) >> shift)
    return out


@njit(cache=True, inline="always")
def _dd(h, m):
    d = m - h
    if d < 0:
        d = -d
    b = 6 if d > 10 else (5 if d > 5 else d - 1)
    return 1 + b if m > h else 8 + b


@njit(cache=True)
def _side_table(rows, W):
    """T[p, d, l] = sum_t W[plain, l] + W[dir d, l]."""
    n1, T, _ = rows.shape
    L = W.shape[1]
    out = np.zeros((n1, 2, L))
    for p in range(n1):
        for t in range(T):
            r0 = rows[p, t, 0]
            for d in range(2):
                rd = rows[p, t, 1 + d]
                for lab in range(L):
                    out[p, d, lab] += W[r0, lab] + W[rd, lab]
    return out


@njit(cache=True)
def _label_scores(codes, head_table, mod_table, shift, W, D, P):
    n = codes.shape[1] - 3
    L = W.shape[1]
    H = _side_table(_rows(codes, head_table, 0, shift), W)
    M = _side_table(_rows(codes, mod_table, 1, shift), W)
    npos = P.shape[0]
    out = np.zeros((n + 1, n + 1, L))
    for h in range(n + 1):
        ph = min(codes[_POS, h + 1], npos - 1)
        for m in range(1, n + 1):
            if m == h:
                continue
            d = 1 if m > h else 0
            k = _dd(h, m)
            pm = min(codes[_POS, m + 1], npos - 1)
            for lab in range(L):
                out[h, m, lab] = (H[h, d, lab] + M[m, d, lab] + D[0, lab] + D[k, lab]
                                  + P[ph, pm, d, lab])
    return out


@njit(cache=True)
def _scatter(rows, C, W, scale):
    n1, T, _ = rows.shape
    L = W.shape[1]
    for p in range(n1):
        for t in range(T):
            r0 = rows[p, t, 0]
            for d in range(2):
                rd = rows[p, t, 1 + d]
                for lab in range(L):
                    c = scale * C[p, d, lab]
                    W[r0, lab] += c
                    W[rd, lab] += c


@njit(cache=True)
def _label_accumulate(codes, head_table, mod_table, shift, coef, scale, W, D, P):
    n = codes.shape[1] - 3
    L = W.shape[1]
    npos = P.shape[0]
    Hc = np.zeros((n + 1, 2, L))
    Mc = np.zeros((n + 1, 2, L))
    for h in range(n + 1):
        ph = min(codes[_POS, h + 1], npos - 1)
        for m in range(1, n + 1):
            if m == h:
                continue
            d = 1 if m > h else 0
            k = _dd(h, m)
            pm = min(codes[_POS, m + 1], npos - 1)
            for lab in range(L):
                c = coef[h, m, lab]
                if c == 0.0:
                    continue
                Hc[h, d, lab] += c
                Mc[m, d, lab] += c
                sc = scale * c
                D[0, lab] += sc
                D[k, lab] += sc
                P[ph, pm, d, lab] += sc
    _scatter(_rows(codes, head_table, 0, shift), Hc, W, scale)
    _scatter(_rows(codes, mod_table, 1, shift), Mc, W, scale)
