"""Grandparent model: Koo & Collins (2010)'s Model 0 (all grandchildren), O(n^4).

Parts: ``arc[h, m]`` and ``grand[g, h, m]`` (h >= 1). Eisner's spans carry the
head's head g, which lies outside the span ("g-spans"; for spans of the root,
g is a placeholder 0 and no grand part is scored):

    I[g, h, m] = arc[h, m] + grand[g, h, m]
                 + max_r C[g, h, r] + C[h, m, r+1]          (h < m; mirrored for m < h)
    C[g, h, e] = max_m I[g, h, m] + C[h, m, e]

Four free indices per step: O(n^4) time. The charts have one row per kept arc
g -> h (plus the root's row) and n+1 columns: O(n^3) space unpruned, O(K n^2) with
K kept heads per word. Pruned arcs are skipped
(both as arcs h -> m and as grandparent arcs g -> h), so with K heads per word the
cost falls to about O(K n^3).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from arboreal._interrupt import interruptible
from arboreal.inference.higher_order.memory import DECODER_LIMIT, check_chart_budget
from arboreal.inference.higher_order.parts import PartIndex, check_arc, dense_sizes, flat
from arboreal.inference.higher_order.third_order import _charts, _row

NEG = -np.inf


@njit(cache=True, nogil=True)
def _grandparent(arc, slot, arcid, grand_off, grand, use_grand, single_root):
    n = arc.shape[0] - 1
    N = n + 1
    R = grand_off.shape[0]   # chart rows: one per arc id, then the root's row
    F, B = _charts(arcid, R, N, 2, 2)
    C, I = F[0], F[1]        # C[g, h, e] is cell C[row(g, h), e], I likewise
    bC, bI = B[0], B[1]
    for w in range(1, n + 1):
        for kind in range(2):           # 0: incomplete spans, 1: complete spans
            for h in range(N):
                if single_root and h == 0:
                    continue
                for side in range(2):
                    d = 1 if side == 0 else -1
                    e = h + d * w
                    if e < 1 or e > n:
                        continue
                    if kind == 0 and slot[h, e] < 0:
                        continue
                    lo = min(h, e)
                    hi = max(h, e)
                    he = arcid[h, e] if kind == 0 else -1
                    for g in range(N):
                        a = -1
                        if h == 0:
                            if g > 0:
                                break
                            row = R
                        else:
                            if lo <= g <= hi:
                                continue
                            a = arcid[g, h]
                            if a < 0:
                                continue
                            row = a
                        best = NEG
                        arg = -1
                        if kind == 0:
                            for r in range(lo, hi):
                                if d == 1:
                                    v = C[row, r] + C[he, r + 1]
                                else:
                                    v = C[he, r] + C[row, r + 1]
                                if v > best:
                                    best = v
                                    arg = r
                            best += arc[h, e]
                            if use_grand and a >= 0:
                                best += grand[grand_off[a] + slot[h, e]]
                            I[row, e] = best
                            bI[row, e] = arg
                        else:
                            for m in range(h + d, e + d, d):
                                if slot[h, m] < 0:
                                    continue
                                v = I[row, m]
                                if v == NEG:
                                    continue
                                v += C[arcid[h, m], e]
                                if v > best:
                                    best = v
                                    arg = m
                            C[row, e] = best
                            bC[row, e] = arg

    heads = np.full(N, -1, dtype=np.int64)
    stack = np.zeros((4 * N + 8, 4), dtype=np.int64)   # (kind, g, h, e): 0 C, 1 I
    top = 0
    if single_root:
        best = NEG
        arg = -1
        for m in range(1, N):
            if slot[0, m] < 0:
                continue
            a = arcid[0, m]
            v = arc[0, m] + C[a, 1] + C[a, n]
            if v > best:
                best = v
                arg = m
        if best == NEG:
            return heads, best
        heads[arg] = 0
        stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3] = 0, 0, arg, 1
        stack[1, 0], stack[1, 1], stack[1, 2], stack[1, 3] = 0, 0, arg, n
        top = 2
    else:
        best = C[R, n]
        if best == NEG:
            return heads, best
        stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3] = 0, 0, 0, n
        top = 1
    while top > 0:
        top -= 1
        kind, g, h, e = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3]
        if kind == 0:
            if h == e:
                continue
            m = bC[_row(arcid, R, g, h), e]
            stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = 1, g, h, m
            stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2], stack[top + 1, 3] = 0, h, m, e
            top += 2
        else:
            heads[e] = h
            r = bI[_row(arcid, R, g, h), e]
            if e > h:
                stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = 0, g, h, r
                stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2], stack[top + 1, 3] = 0, h, e, r + 1
            else:
                stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = 0, h, e, r
                stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2], stack[top + 1, 3] = 0, g, h, r + 1
            top += 2
    return heads, best


def grandparent_decode(arc: np.ndarray, grand: np.ndarray | None = None, *,
                       single_root: bool = True, allowed: np.ndarray | None = None,
                       index: PartIndex | None = None,
                       memory_budget: float | None = DECODER_LIMIT) -> np.ndarray:
    """Best projective tree under arc + grandparent scores (Koo's Model 0).

    arc: (n+1, n+1). grand: dense (n+1, n+1, n+1) ``grand[g, h, m]`` (h >= 1;
    entries with h = 0 are ignored), or with ``index=`` the flat compact array.
    ``allowed``: optional (n+1, n+1) bool arc mask (dense form only).
    Returns heads (n+1,) int64. O(n^4) time; space 24 (A + 1) (n + 1) bytes of
    charts for A kept arcs (O(n^3) unpruned). Raises ``MemoryBudgetError`` instead of
    allocating charts over ``memory_budget`` bytes (None: no limit).
    """
    arc = check_arc(arc)
    n = arc.shape[0] - 1
    if index is None:
        dense_sizes(n, arc, grand=grand)
        index = PartIndex.dense(n, allowed)
    gr, used = flat(grand, index.n_grand, "grand")
    check_chart_budget("grandparent", n, index.grand_off.shape[0] + 1, memory_budget)
    heads, best = interruptible(_grandparent, arc, index.slot, index.arcid, index.grand_off,
                                gr, used, single_root, work=float(n + 1) ** 3)
    if n > 0 and best == NEG:
        raise ValueError("no projective tree uses only the allowed arcs")
    return heads
