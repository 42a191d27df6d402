"""Hashed features of higher-order parts: siblings, grandparents, grand-siblings, tri-siblings.

Same engine style as the first-order features (:mod:`arboreal.features.first_order`):
a sentence is the int32 code matrix of :class:`~arboreal.features.EncodedSentence`
(``codes[attr, p + 1]``), feature ids are never stored but recomputed by hashing
small tuples of codes (the 64-bit mixers of :mod:`arboreal.features.hashing`) into
the same ``2**bits`` weight vector as the arc features. Each template fires twice:
conjoined with the direction(s) of the part, and with direction(s) plus a distance
bucket (MSTParser's scheme).

Templates (W = word form, P = UPOS; part conventions of
:mod:`arboreal.inference.higher_order`; the "no sibling" position reads a NONE code):

* sibling (h, a, b), direction of b from h, distance |b - a|:
  hP aP bP, aP bP, aW bW, aW bP, aP bW, hW aP bP, hP aW bP, hP aP bW
* grandparent (g, h, m), directions of g->h and h->m, distance |m - h|:
  gP hP mP, gP mP, gW mP, gP mW, gW hP mP, gP hW mP, gP hP mW, gW mW
* grand-sibling (g, h, a, b): gP hP aP bP, gP aP bP, gW hP aP bP, gP hP aW bP,
  gP hP aP bW, gP aW bP, gP aP bW
* tri-sibling (h, a, b, c): hP aP bP cP, aP bP cP, hP aP cP, aP cP, hW aP bP cP,
  aP bP cW, aW bP cP

Per part: 2 x (7..8) hash-and-gather operations, the same cost per feature as the
arc features.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from arboreal.features.first_order import ATTR_INDEX
from arboreal.features.hashing import _fmix, _mix

W_ATTR = ATTR_INDEX["word"]
P_ATTR = ATTR_INDEX["pos"]
KINDS = ("sib", "grand", "gsib", "trisib")
_NONE = 0x7FFFFFF0
_BUF = 32      # ids per part, at most (8 templates x 2)
_SEED = np.uint64(0x84222325CBF29CE4)
_UNUSED = np.zeros(1)   # stands for the score array of a part kind not used (never written)


@njit(cache=True, inline="always")
def _bkt(d):
    if d < 0:
        d = -d
    if d > 10:
        return 6
    if d > 5:
        return 5
    return d - 1


@njit(cache=True, inline="always")
def _emit(buf, k, hv, tag, dist, umask):
    a = _mix(hv, tag)
    buf[k] = np.int64(_fmix(a) & umask)
    buf[k + 1] = np.int64(_fmix(_mix(a, 64 + dist)) & umask)
    return k + 2


@njit(cache=True, inline="always")
def _seed(kind, t):
    return _mix(_SEED, kind * 64 + t + 1)


@njit(cache=True)
def sib_ids(codes, h, a, b, umask, buf):
    """Feature ids of sibling part (h, a, b) into buf; returns the count."""
    hW, hP = codes[W_ATTR, h + 1], codes[P_ATTR, h + 1]
    if a == h:
        aW, aP = _NONE, _NONE
    else:
        aW, aP = codes[W_ATTR, a + 1], codes[P_ATTR, a + 1]
    bW, bP = codes[W_ATTR, b + 1], codes[P_ATTR, b + 1]
    tag = 1 if b > h else 2
    dist = _bkt(b - a)
    k = 0
    k = _emit(buf, k, _mix(_mix(_mix(_seed(1, 0), hP), aP), bP), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_seed(1, 1), aP), bP), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_seed(1, 2), aW), bW), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_seed(1, 3), aW), bP), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_seed(1, 4), aP), bW), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_mix(_seed(1, 5), hW), aP), bP), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_mix(_seed(1, 6), hP), aW), bP), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_mix(_seed(1, 7), hP), aP), bW), tag, dist, umask)
    return k


@njit(cache=True)
def grand_ids(codes, g, h, m, umask, buf):
    """Feature ids of grandparent part (g, h, m)."""
    gW, gP = codes[W_ATTR, g + 1], codes[P_ATTR, g + 1]
    hW, hP = codes[W_ATTR, h + 1], codes[P_ATTR, h + 1]
    mW, mP = codes[W_ATTR, m + 1], codes[P_ATTR, m + 1]
    tag = (1 if h > g else 2) * 4 + (1 if m > h else 2)
    dist = _bkt(m - h)
    k = 0
    k = _emit(buf, k, _mix(_mix(_mix(_seed(2, 0), gP), hP), mP), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_seed(2, 1), gP), mP), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_seed(2, 2), gW), mP), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_seed(2, 3), gP), mW), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_mix(_seed(2, 4), gW), hP), mP), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_mix(_seed(2, 5), gP), hW), mP), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_mix(_seed(2, 6), gP), hP), mW), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_seed(2, 7), gW), mW), tag, dist, umask)
    return k


@njit(cache=True)
def gsib_ids(codes, g, h, a, b, umask, buf):
    """Feature ids of grand-sibling part (g, h, a, b)."""
    gW, gP = codes[W_ATTR, g + 1], codes[P_ATTR, g + 1]
    hP = codes[P_ATTR, h + 1]
    if a == h:
        aW, aP = _NONE, _NONE
    else:
        aW, aP = codes[W_ATTR, a + 1], codes[P_ATTR, a + 1]
    bW, bP = codes[W_ATTR, b + 1], codes[P_ATTR, b + 1]
    tag = (1 if h > g else 2) * 4 + (1 if b > h else 2)
    dist = _bkt(b - a)
    k = 0
    k = _emit(buf, k, _mix(_mix(_mix(_mix(_seed(3, 0), gP), hP), aP), bP), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_mix(_seed(3, 1), gP), aP), bP), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_mix(_mix(_seed(3, 2), gW), hP), aP), bP), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_mix(_mix(_seed(3, 3), gP), hP), aW), bP), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_mix(_mix(_seed(3, 4), gP), hP), aP), bW), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_mix(_seed(3, 5), gP), aW), bP), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_mix(_seed(3, 6), gP), aP), bW), tag, dist, umask)
    return k


@njit(cache=True)
def tri_ids(codes, h, a, b, c, umask, buf):
    """Feature ids of tri-sibling part (h, a, b, c)."""
    hW, hP = codes[W_ATTR, h + 1], codes[P_ATTR, h + 1]
    if a == h:
        aW, aP = _NONE, _NONE
    else:
        aW, aP = codes[W_ATTR, a + 1], codes[P_ATTR, a + 1]
    bP = codes[P_ATTR, b + 1]
    cW, cP = codes[W_ATTR, c + 1], codes[P_ATTR, c + 1]
    tag = 1 if c > h else 2
    dist = _bkt(c - b)
    k = 0
    k = _emit(buf, k, _mix(_mix(_mix(_mix(_seed(4, 0), hP), aP), bP), cP), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_mix(_seed(4, 1), aP), bP), cP), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_mix(_seed(4, 2), hP), aP), cP), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_seed(4, 3), aP), cP), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_mix(_mix(_seed(4, 4), hW), aP), bP), cP), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_mix(_seed(4, 5), aP), bP), cW), tag, dist, umask)
    k = _emit(buf, k, _mix(_mix(_mix(_seed(4, 6), aW), bP), cP), tag, dist, umask)
    return k


@njit(cache=True, inline="always")
def _dot(w, buf, k):
    s = 0.0
    for i in range(k):
        s += w[buf[i]]
    return s


@njit(cache=True)
def part_scores_kernel(codes, slot, width, arcid, sib_off, grand_off, gsib_off, tri_off,
                       w, mask, use_sib, use_grand, use_gsib, use_tri, projective,
                       sib_out, grand_out, gsib_out, tri_out):
    """Fill the compact flat score arrays of every part the decoders can read
    (``projective``: only grandparents outside the span of h -> m, the only ones a
    projective tree can have)."""
    n = codes.shape[1] - 3
    umask = np.uint64(mask)
    buf = np.empty(_BUF, dtype=np.int64)
    kids = np.empty(n + 1, dtype=np.int64)
    pars = np.empty(n + 1, dtype=np.int64)
    for h in range(n + 1):
        W = width[h]
        nk = 0
        for m in range(1, n + 1):
            if m != h and slot[h, m] >= 0:
                kids[nk] = m
                nk += 1
        npar = 0   # h's kept heads (grandparents of h's modifiers)
        for g in range(n + 1):
            if arcid[g, h] >= 0:
                pars[npar] = g
                npar += 1
        for ib in range(nk):
            b = kids[ib]
            sb = slot[h, b]
            lo = min(h, b)
            hi = max(h, b)
            # inner siblings a: h itself, then kept modifiers strictly between h and b
            for ia in range(-1, nk):
                if ia >= 0:
                    a = kids[ia]
                    if not (lo < a < hi):
                        continue
                else:
                    a = h
                sa = slot[h, a]
                if use_sib:
                    k = sib_ids(codes, h, a, b, umask, buf)
                    sib_out[sib_off[h] + sa * W + sb] = _dot(w, buf, k)
                if use_tri and a != h:
                    for ix in range(-1, nk):
                        if ix >= 0:
                            x = kids[ix]
                            if not (min(h, a) < x < max(h, a)):
                                continue
                        else:
                            x = h
                        k = tri_ids(codes, h, x, a, b, umask, buf)
                        tri_out[tri_off[h] + (slot[h, x] * W + sa) * W + sb] = _dot(w, buf, k)
                if h > 0 and (use_gsib or (use_grand and a == h)):
                    for j in range(npar):
                        g = pars[j]
                        ag = arcid[g, h]
                        if g == b or (projective and lo <= g <= hi):
                            continue
                        if use_grand and a == h:
                            k = grand_ids(codes, g, h, b, umask, buf)
                            grand_out[grand_off[ag] + sb] = _dot(w, buf, k)
                        if use_gsib:
                            k = gsib_ids(codes, g, h, a, b, umask, buf)
                            gsib_out[gsib_off[ag] + sa * W + sb] = _dot(w, buf, k)


@njit(cache=True, inline="always")
def _copy_ids(buf, k, ids, pos):
    for i in range(k):
        ids[pos + i] = buf[i]
    return pos + k


@njit(cache=True)
def tree_ids_kernel(codes, heads, mask, use_sib, use_grand, use_gsib, use_tri, outer_only):
    """Ids (int64, with repeats) of every higher-order feature of the tree's parts.

    At most 60 ids per child (16 sib + 14 trisib + 16 grand + 14 gsib), or 30 per
    child and 60 per head with ``outer_only``: 4 * _BUF per word is enough.
    """
    n = heads.shape[0] - 1
    umask = np.uint64(mask)
    buf = np.empty(_BUF, dtype=np.int64)
    ids = np.empty(4 * _BUF * (n + 1), dtype=np.int64)
    pos = 0
    for h in range(n + 1):
        g = heads[h] if h > 0 else -1
        for side in range(2):
            step = 1 if side == 0 else -1
            x = h
            y = h
            nchild = 0
            last = -1
            last_prev = -1
            m = h + step
            while 0 < m <= n:
                if heads[m] == h:
                    if use_sib:
                        pos = _copy_ids(buf, sib_ids(codes, h, x, m, umask, buf), ids, pos)
                    if use_tri and nchild >= 1:
                        pos = _copy_ids(buf, tri_ids(codes, h, y, x, m, umask, buf), ids, pos)
                    if g >= 0 and not outer_only:
                        if use_grand:
                            pos = _copy_ids(buf, grand_ids(codes, g, h, m, umask, buf), ids, pos)
                        if use_gsib:
                            pos = _copy_ids(buf, gsib_ids(codes, g, h, x, m, umask, buf), ids, pos)
                    last_prev = x
                    last = m
                    y = x
                    x = m
                    nchild += 1
                m += step
            if g >= 0 and outer_only and last >= 0:
                if use_grand:
                    pos = _copy_ids(buf, grand_ids(codes, g, h, last, umask, buf), ids, pos)
                if use_gsib:
                    pos = _copy_ids(buf, gsib_ids(codes, g, h, last_prev, last, umask, buf),
                                    ids, pos)
    return ids[:pos]


@njit(cache=True)
def _add_at(out, ids, scale):
    for i in range(ids.shape[0]):
        out[ids[i]] += scale


class HigherOrderFeatures:
    """Scores and feature counts of higher-order parts, sharing a FeatureSet's weights.

    Args:
        parts: subset of ``KINDS`` ("sib", "grand", "gsib", "trisib").
        bits: weight vector size ``2**bits`` (use the first-order FeatureSet's bits).
        outer_only: grand / gsib parts only of each head's outermost child per side
            (the factorization of the Model 2 decoder).
    """

    def __init__(self, parts: tuple[str, ...] | list[str], bits: int, outer_only: bool = False):
        bad = set(parts) - set(KINDS)
        if bad:
            raise ValueError(f"unknown part kinds {sorted(bad)}; choose from {list(KINDS)}")
        self.parts = tuple(k for k in KINDS if k in parts)
        self.bits = int(bits)
        self.outer_only = bool(outer_only)
        #: (sib, grand, gsib, trisib) used
        self.flags: tuple[bool, bool, bool, bool] = tuple(k in self.parts for k in KINDS)

    def part_scores(self, codes: np.ndarray, index, w: np.ndarray, projective: bool = True
                    ) -> dict[str, np.ndarray | None]:
        """Flat compact score arrays (see ``PartIndex``) for every readable part.

        codes: an EncodedSentence's ``codes``; index: a ``PartIndex`` of the same
        sentence; w: (2**bits,) weights. ``projective=False`` also scores the
        grandparent parts only non-projective trees have (g inside the span of
        h -> m, for hill-climbing). Returns {kind: flat array or None}.
        Cost: one hash-and-gather pass per candidate part.
        """
        us, ug, ugs, ut = self.flags
        sib = np.zeros(index.n_sib) if us else _UNUSED
        grand = np.zeros(index.n_grand) if ug else _UNUSED
        gsib = np.zeros(index.n_gsib) if ugs else _UNUSED
        tri = np.zeros(index.n_tri) if ut else _UNUSED
        part_scores_kernel(codes, *index.tables(), w, (1 << self.bits) - 1, us, ug, ugs, ut,
                           bool(projective), sib, grand, gsib, tri)
        return {"sib": sib if us else None, "grand": grand if ug else None,
                "gsib": gsib if ugs else None, "trisib": tri if ut else None}

    def tree_ids(self, codes: np.ndarray, heads: np.ndarray) -> np.ndarray:
        """Explicit ids (int64, repeats kept) of every higher-order feature of the
        parts of tree ``heads`` (non-projective trees too). O(n^2) for the sibling
        chains, about 16 ids per part."""
        us, ug, ugs, ut = self.flags
        return tree_ids_kernel(codes, np.asarray(heads, dtype=np.int64), (1 << self.bits) - 1,
                               us, ug, ugs, ut, self.outer_only)

    def accumulate_tree(self, codes: np.ndarray, heads: np.ndarray, out: np.ndarray,
                        scale: float = 1.0) -> None:
        """``out[f] += scale`` for every higher-order feature of tree ``heads``. O(n^2)."""
        _add_at(out, self.tree_ids(codes, heads), float(scale))
