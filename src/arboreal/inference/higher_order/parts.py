"""Where each higher-order part score lives: the :class:`PartIndex`.

Decoders read part scores from flat float64 arrays through an index, so the same
code serves dense tensors (tests, short sentences) and pruned sentences whose
dense O(n^4) tensors would not fit in memory.

For a head h let ``W[h] = width[h]`` and ``sl(h, m) = slot[h, m]`` (-1: arc
h -> m pruned; ``slot[h, h]`` is the "no sibling" slot). For a kept arc g -> h
let ``a = arcid[g, h]``. Then (conventions of the package docstring)::

    sib[h, x, y]        = sib_flat[sib_off[h] + sl(h,x) * W[h] + sl(h,y)]
    grand[g, h, m]      = grand_flat[grand_off[a] + sl(h,m)]
    gsib[g, h, x, y]    = gsib_flat[gsib_off[a] + sl(h,x) * W[h] + sl(h,y)]
    trisib[h, x, y, z]  = tri_flat[tri_off[h] + (sl(h,x) * W[h] + sl(h,y)) * W[h] + sl(h,z)]

Dense form (``PartIndex.dense``): ``slot[h, m] = m``, ``W[h] = n+1``,
``arcid[g, h] = g*(n+1) + h``, so ``tensor.reshape(-1)`` is the flat array.
Compact form (``PartIndex.compact``): h's kept modifiers get slots 1..deg[h] in
order of position, ``slot[h, h] = 0``, ``W[h] = deg[h] + 1``; sizes are
sum_h W^2 (sib), sum_a W[h_a] (grand), sum_a W[h_a]^2 (gsib), sum_h W^3 (trisib).
Flat entries that no projective sibling configuration can read (wrong side,
wrong order) are never read; they may hold anything.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numba import njit


@dataclass(frozen=True)
class PartIndex:
    """Slot and offset tables of one sentence (see the module docstring).

    Attributes: n; allowed (n+1, n+1) bool (kept arcs; column 0 and the diagonal
    False); slot, arcid (n+1, n+1) int64; width (n+1,) int64; sib_off, tri_off
    (n+1,) int64; grand_off, gsib_off (A,) int64; sizes n_sib, n_grand, n_gsib,
    n_tri of the flat score arrays.
    """

    n: int
    allowed: np.ndarray
    slot: np.ndarray
    width: np.ndarray
    arcid: np.ndarray
    sib_off: np.ndarray
    grand_off: np.ndarray
    gsib_off: np.ndarray
    tri_off: np.ndarray
    n_sib: int
    n_grand: int
    n_gsib: int
    n_tri: int

    @staticmethod
    def _clean(n: int, allowed: np.ndarray | None) -> np.ndarray:
        N = n + 1
        if allowed is None:
            allowed = np.ones((N, N), dtype=bool)
        else:
            allowed = np.array(allowed, dtype=bool)
            if allowed.shape != (N, N):
                raise ValueError(f"allowed must have shape ({N}, {N}), got {allowed.shape}")
        allowed[:, 0] = False
        np.fill_diagonal(allowed, False)
        return allowed

    @classmethod
    def dense(cls, n: int, allowed: np.ndarray | None = None) -> "PartIndex":
        """Index of dense tensors (flat array = ``tensor.reshape(-1)``); pruned arcs
        (``allowed[h, m]`` False) are never used by a decoder."""
        if allowed is None:
            return _dense_unpruned(n)
        return cls._dense(n, allowed)

    @classmethod
    def _dense(cls, n: int, allowed: np.ndarray | None) -> "PartIndex":
        N = n + 1
        allowed = cls._clean(n, allowed)
        r = np.arange(N, dtype=np.int64)
        slot = np.where(allowed, r[None, :], -1).astype(np.int64)
        slot[r, r] = r
        arcid = np.where(allowed, r[:, None] * N + r[None, :], -1).astype(np.int64)
        width = np.full(N, N, dtype=np.int64)
        a = np.arange(N * N, dtype=np.int64)
        return cls(n, allowed, slot, width, arcid, r * N * N, a * N, a * N * N, r * N ** 3,
                   N ** 3, N ** 3, N ** 4, N ** 4)

    @classmethod
    def compact(cls, allowed: np.ndarray) -> "PartIndex":
        """Compact index of a pruned sentence; ``allowed`` (n+1, n+1) bool. O(n^2)."""
        allowed = np.asarray(allowed, dtype=bool)
        if allowed.ndim != 2 or allowed.shape[0] != allowed.shape[1] or allowed.shape[0] < 1:
            raise ValueError(f"allowed must have shape (n+1, n+1), got {allowed.shape}")
        # one numba call (it also clears column 0 and the diagonal, on a copy):
        # this runs once per sentence
        clean, slot, width, arcid, so, go, gso, to, sizes = _compact_tables(allowed)
        s = sizes.tolist()
        return cls(allowed.shape[0] - 1, clean, slot, width, arcid, so, go, gso, to,
                   s[0], s[1], s[2], s[3])

    def tables(self) -> tuple:
        """The integer tables in the order the numba kernels take them."""
        return (self.slot, self.width, self.arcid, self.sib_off, self.grand_off,
                self.gsib_off, self.tri_off)


@njit(cache=True)
def _compact_tables(allowed):
    N = allowed.shape[0]
    clean = np.zeros((N, N), dtype=np.bool_)
    slot = np.full((N, N), -1, dtype=np.int64)
    width = np.ones(N, dtype=np.int64)
    arcid = np.full((N, N), -1, dtype=np.int64)
    A = 0
    for h in range(N):
        k = 0
        for m in range(1, N):
            if allowed[h, m] and m != h:
                clean[h, m] = True
                k += 1
                slot[h, m] = k
                arcid[h, m] = A
                A += 1
        slot[h, h] = 0
        width[h] = k + 1
    sib_off = np.zeros(N, dtype=np.int64)
    tri_off = np.zeros(N, dtype=np.int64)
    grand_off = np.zeros(A, dtype=np.int64)
    gsib_off = np.zeros(A, dtype=np.int64)
    sizes = np.zeros(4, dtype=np.int64)
    for h in range(N):
        sib_off[h] = sizes[0]
        tri_off[h] = sizes[3]
        sizes[0] += width[h] ** 2
        sizes[3] += width[h] ** 3
    for g in range(N):
        for h in range(N):
            a = arcid[g, h]
            if a >= 0:
                grand_off[a] = sizes[1]
                gsib_off[a] = sizes[2]
                sizes[1] += width[h]
                sizes[2] += width[h] ** 2
    return clean, slot, width, arcid, sib_off, grand_off, gsib_off, tri_off, sizes


@lru_cache(maxsize=256)
def _dense_unpruned(n: int) -> PartIndex:
    # shared between calls: nothing may write to its tables (kept writable only so
    # that numba compiles one specialization for dense and compact indices)
    return PartIndex._dense(n, None)


_EMPTY = np.zeros(1, dtype=np.float64)


def flat(t: np.ndarray | None, size: int, name: str) -> tuple[np.ndarray, bool]:
    """``(flat float64 array, used)`` for an optional part table of the given size."""
    if t is None:
        return _EMPTY, False
    t = np.ascontiguousarray(t, dtype=np.float64).reshape(-1)
    if t.size != size:
        raise ValueError(f"{name} scores: expected {size} values for this index, got {t.size}")
    return t, True


def check_arc(arc: np.ndarray) -> np.ndarray:
    arc = np.ascontiguousarray(arc, dtype=np.float64)
    if arc.ndim != 2 or arc.shape[0] != arc.shape[1] or arc.shape[0] < 1:
        raise ValueError(f"arc scores must have shape (n+1, n+1), got {arc.shape}")
    return arc


def dense_sizes(n: int, arc: np.ndarray, **tensors: np.ndarray | None) -> None:
    """Check that every dense part tensor has shape (n+1,)*k for its order k."""
    N = n + 1
    order = {"sib": 3, "grand": 3, "gsib": 4, "trisib": 4}
    for name, t in tensors.items():
        if t is not None and np.shape(t) != (N,) * order[name]:
            raise ValueError(f"{name} scores must have shape {(N,) * order[name]}, got {np.shape(t)}")


@njit(cache=True)
def _tree_score(heads, arc, slot, width, arcid, sib_off, grand_off, gsib_off, tri_off,
                sib, grand, gsib, tri, use_sib, use_grand, use_gsib, use_tri, outer_only):
    """Score of a (possibly non-projective) tree; -inf if it uses a pruned arc."""
    n = heads.shape[0] - 1
    total = 0.0
    for m in range(1, n + 1):
        h = heads[m]
        if slot[h, m] < 0:
            return -np.inf
        total += arc[h, m]
    for h in range(n + 1):
        W = width[h]
        g = heads[h] if h > 0 else -1
        a = arcid[g, h] if g >= 0 else -1
        for side in range(2):
            step = 1 if side == 0 else -1
            x = h   # previous (closer) sibling
            y = h   # the one before x
            nchild = 0
            last = -1
            last_prev = -1
            m = h + step
            while 0 < m <= n:
                if heads[m] == h:
                    sy, sx, sm = slot[h, y], slot[h, x], slot[h, m]
                    if use_sib:
                        total += sib[sib_off[h] + sx * W + sm]
                    if use_tri and nchild >= 1:
                        total += tri[tri_off[h] + (sy * W + sx) * W + sm]
                    if a >= 0 and not outer_only:
                        if use_grand:
                            total += grand[grand_off[a] + sm]
                        if use_gsib:
                            total += gsib[gsib_off[a] + sx * W + sm]
                    last_prev = x
                    last = m
                    y = x
                    x = m
                    nchild += 1
                m += step
            if a >= 0 and outer_only and last >= 0:
                sl, sp = slot[h, last], slot[h, last_prev]
                if use_grand:
                    total += grand[grand_off[a] + sl]
                if use_gsib:
                    total += gsib[gsib_off[a] + sp * W + sl]
    return total


def score_tree(heads: np.ndarray, index: PartIndex, arc: np.ndarray,
               sib: np.ndarray | None = None, grand: np.ndarray | None = None,
               gsib: np.ndarray | None = None, trisib: np.ndarray | None = None,
               outer_only: bool = False) -> float:
    """Score of one tree under the given part scores (flat arrays of ``index``).

    ``outer_only=True`` scores grand and gsib parts only for each head's
    outermost child per side (the factorization of ``tri_sibling_decode``).
    Works for non-projective trees too; -inf if the tree uses a pruned arc. O(n^2).
    """
    heads = np.ascontiguousarray(heads, dtype=np.int64)
    s, us = flat(sib, index.n_sib, "sib")
    g, ug = flat(grand, index.n_grand, "grand")
    gs, ugs = flat(gsib, index.n_gsib, "gsib")
    t, ut = flat(trisib, index.n_tri, "trisib")
    return float(_tree_score(heads, check_arc(arc), *index.tables(), s, g, gs, t,
                             us, ug, ugs, ut, outer_only))
