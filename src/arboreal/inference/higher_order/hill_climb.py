"""Non-projective approximation for second-order models (McDonald & Pereira 2006).

Exact non-projective decoding with sibling parts is NP-hard, so McDonald &
Pereira start from the best projective tree and greedily apply the single head
change (word m gets head h') that raises the score most while keeping a tree,
until no change helps. Here the factorization may hold grandparent parts too
(the siblings + grandparents second order): moving m from h to h' changes only
the sibling chains of h and h' on m's side, the grandparent part of arc -> m and
the grandparent parts of m's own children, so each change is scored in O(n)
and one round costs O(n^2 K) (n K candidate changes over the kept arcs); rounds
repeat until no gain.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from arboreal.inference.higher_order.parts import PartIndex, check_arc, dense_sizes, flat
from arboreal.inference.higher_order.sibling import sibling_decode
from arboreal.inference.higher_order.third_order import grand_sibling_decode


@njit(cache=True)
def _side_score(heads, h, d, slot, width, sib_off, sib):
    """Sum of sib parts of h's children on side d (+1 right, -1 left)."""
    n = heads.shape[0] - 1
    W = width[h]
    prev = slot[h, h]
    total = 0.0
    m = h + d
    while 0 < m <= n:
        if heads[m] == h:
            sm = slot[h, m]
            total += sib[sib_off[h] + prev * W + sm]
            prev = sm
        m += d
    return total


@njit(cache=True)
def _grand_score(heads, m, slot, arcid, grand_off, grand):
    """Grandparent parts that depend on m's head: g -> h -> m and h -> m -> c."""
    n = heads.shape[0] - 1
    h = heads[m]
    total = 0.0
    if h > 0:
        a = arcid[heads[h], h]
        if a >= 0:
            total += grand[grand_off[a] + slot[h, m]]
    a = arcid[h, m]
    if a >= 0:
        for c in range(1, n + 1):
            if heads[c] == m:
                total += grand[grand_off[a] + slot[m, c]]
    return total


@njit(cache=True)
def _local(heads, m, h0, d0, h1, d1, slot, width, arcid, sib_off, grand_off, sib, grand,
           use_sib, use_grand):
    """The parts that a move of m between h0 and h1 can change, under ``heads``."""
    total = 0.0
    if use_sib:
        total += _side_score(heads, h0, d0, slot, width, sib_off, sib)
        total += _side_score(heads, h1, d1, slot, width, sib_off, sib)
    if use_grand:
        total += _grand_score(heads, m, slot, arcid, grand_off, grand)
    return total


@njit(cache=True)
def _hill_climb(heads, arc, slot, width, arcid, sib_off, grand_off, sib, grand, use_sib,
                use_grand, single_root, max_rounds):
    n = heads.shape[0] - 1
    heads = heads.copy()
    for _ in range(max_rounds):
        best_gain = 1e-12
        best_m = -1
        best_h = -1
        for m in range(1, n + 1):
            h0 = heads[m]
            if single_root and h0 == 0:
                continue   # the root's only child keeps its head
            d0 = 1 if m > h0 else -1
            for h1 in range(n + 1):
                if h1 == m or h1 == h0 or slot[h1, m] < 0:
                    continue
                if single_root and h1 == 0:
                    continue
                a = h1            # reject h1 inside m's subtree (would make a cycle)
                while a > 0 and a != m:
                    a = heads[a]
                if a == m:
                    continue
                gain = arc[h1, m] - arc[h0, m]
                if use_sib or use_grand:
                    d1 = 1 if m > h1 else -1
                    before = _local(heads, m, h0, d0, h1, d1, slot, width, arcid, sib_off,
                                    grand_off, sib, grand, use_sib, use_grand)
                    heads[m] = h1
                    after = _local(heads, m, h0, d0, h1, d1, slot, width, arcid, sib_off,
                                   grand_off, sib, grand, use_sib, use_grand)
                    heads[m] = h0
                    gain += after - before
                if gain > best_gain:
                    best_gain = gain
                    best_m = m
                    best_h = h1
        if best_m < 0:
            break
        heads[best_m] = best_h
    return heads


def hill_climb(arc: np.ndarray, sib: np.ndarray | None = None, grand: np.ndarray | None = None,
               *, heads: np.ndarray | None = None, single_root: bool = True,
               allowed: np.ndarray | None = None, index: PartIndex | None = None,
               max_rounds: int = 1000, memory_budget: float | None = None) -> np.ndarray:
    """Non-projective tree under arc + sibling (+ grandparent) scores, by greedy head changes.

    Starts from ``heads`` (default: the best projective tree, :func:`sibling_decode`
    or, with ``grand``, :func:`grand_sibling_decode`) and returns a tree whose score
    is at least the start's, and that no single head change improves. Arguments and
    score layout as in :func:`grand_sibling_decode` (dense ``grand[g, h, m]`` or the
    flat compact array of ``index``; grandparent scores must be filled for every
    kept g -> h -> m, g inside the span of h -> m too). Pruned arcs are never used.
    Returns heads (n+1,) int64. O(n^2 K) per round, O(n) memory beyond the
    projective start (whose decoder gets ``memory_budget``, default its own).
    """
    arc = check_arc(arc)
    n = arc.shape[0] - 1
    if index is None:
        dense_sizes(n, arc, sib=sib, grand=grand)
        index = PartIndex.dense(n, allowed)
    s, us = flat(sib, index.n_sib, "sib")
    g, ug = flat(grand, index.n_grand, "grand")
    if heads is None:
        if ug:
            kw = {} if memory_budget is None else {"memory_budget": memory_budget}
            heads = grand_sibling_decode(arc, s if us else None, g, single_root=single_root,
                                         index=index, **kw)
        else:
            heads = sibling_decode(arc, s if us else None, single_root=single_root, index=index)
    heads = np.ascontiguousarray(heads, dtype=np.int64)
    if heads.shape != (n + 1,):
        raise ValueError(f"heads must have shape ({n + 1},), got {heads.shape}")
    return _hill_climb(heads, arc, index.slot, index.width, index.arcid, index.sib_off,
                       index.grand_off, s, g, us, ug, single_root, max_rounds)


def hill_climb_sibling(arc: np.ndarray, sib: np.ndarray | None = None, **kwargs) -> np.ndarray:
    """:func:`hill_climb` without grandparent parts (the sibling model of McDonald &
    Pereira 2006). Same keyword arguments."""
    return hill_climb(arc, sib, None, **kwargs)
