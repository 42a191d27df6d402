"""Non-projective approximation for the sibling model (McDonald & Pereira 2006).

Exact non-projective decoding with sibling parts is NP-hard, so McDonald &
Pereira start from the best projective tree and greedily apply the single head
change (word m gets head h') that raises the score most while keeping a tree,
until no change helps. Each change is scored in O(n) from the sibling chains of
the old and the new head only, so one round costs O(n^3) in the worst case
(n^2 candidate changes); rounds repeat until no gain.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from arboreal.inference.higher_order.parts import PartIndex, check_arc, dense_sizes, flat
from arboreal.inference.higher_order.sibling import sibling_decode


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
def _hill_climb(heads, arc, slot, width, sib_off, sib, use_sib, single_root, max_rounds):
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
            before0 = _side_score(heads, h0, d0, slot, width, sib_off, sib) if use_sib else 0.0
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
                if use_sib:
                    d1 = 1 if m > h1 else -1
                    before1 = _side_score(heads, h1, d1, slot, width, sib_off, sib)
                    heads[m] = h1
                    after0 = _side_score(heads, h0, d0, slot, width, sib_off, sib)
                    after1 = _side_score(heads, h1, d1, slot, width, sib_off, sib)
                    heads[m] = h0
                    gain += after0 + after1 - before0 - before1
                if gain > best_gain:
                    best_gain = gain
                    best_m = m
                    best_h = h1
        if best_m < 0:
            break
        heads[best_m] = best_h
    return heads


def hill_climb_sibling(arc: np.ndarray, sib: np.ndarray | None = None, *,
                       heads: np.ndarray | None = None, single_root: bool = True,
                       allowed: np.ndarray | None = None, index: PartIndex | None = None,
                       max_rounds: int = 1000) -> np.ndarray:
    """Non-projective tree under arc + sibling scores, by greedy head changes.

    Starts from ``heads`` (default: :func:`sibling_decode`'s best projective
    tree) and returns a tree whose score is at least the start's. Arguments and
    score layout as in :func:`sibling_decode`. Returns heads (n+1,) int64.
    """
    arc = check_arc(arc)
    n = arc.shape[0] - 1
    if index is None:
        dense_sizes(n, arc, sib=sib)
        index = PartIndex.dense(n, allowed)
    s, used = flat(sib, index.n_sib, "sib")
    if heads is None:
        heads = sibling_decode(arc, s if used else None, single_root=single_root, index=index)
    heads = np.ascontiguousarray(heads, dtype=np.int64)
    if heads.shape != (n + 1,):
        raise ValueError(f"heads must have shape ({n + 1},), got {heads.shape}")
    return _hill_climb(heads, arc, index.slot, index.width, index.sib_off, s, used,
                       single_root, max_rounds)
