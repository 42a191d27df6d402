"""Grandparent model: Koo & Collins (2010)'s Model 0 (all grandchildren), O(n^4).

Parts: ``arc[h, m]`` and ``grand[g, h, m]`` (h >= 1). Eisner's spans carry the
head's head g, which lies outside the span ("g-spans"; for spans of the root,
g is a placeholder 0 and no grand part is scored):

    I[g, h, m] = arc[h, m] + grand[g, h, m]
                 + max_r C[g, h, r] + C[h, m, r+1]          (h < m; mirrored for m < h)
    C[g, h, e] = max_m I[g, h, m] + C[h, m, e]

Four free indices per step: O(n^4) time, O(n^3) space. Pruned arcs are skipped
(both as arcs h -> m and as grandparent arcs g -> h), so with K heads per word the
cost falls to about O(K n^3).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from arboreal.inference.higher_order.parts import PartIndex, check_arc, dense_sizes, flat

NEG = -np.inf


@njit(cache=True)
def _grandparent(arc, slot, arcid, grand_off, grand, use_grand, single_root):
    n = arc.shape[0] - 1
    N = n + 1
    C = np.full((N, N, N), NEG)
    I = np.full((N, N, N), NEG)
    bC = np.full((N, N, N), -1, dtype=np.int32)
    bI = np.full((N, N, N), -1, dtype=np.int32)
    for g in range(N):
        for h in range(N):
            C[g, h, h] = 0.0
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
                    for g in range(N):
                        a = -1
                        if h == 0:
                            if g > 0:
                                break
                        else:
                            if lo <= g <= hi:
                                continue
                            a = arcid[g, h]
                            if a < 0:
                                continue
                        best = NEG
                        arg = -1
                        if kind == 0:
                            for r in range(lo, hi):
                                if d == 1:
                                    v = C[g, h, r] + C[h, e, r + 1]
                                else:
                                    v = C[h, e, r] + C[g, h, r + 1]
                                if v > best:
                                    best = v
                                    arg = r
                            best += arc[h, e]
                            if use_grand and a >= 0:
                                best += grand[grand_off[a] + slot[h, e]]
                            I[g, h, e] = best
                            bI[g, h, e] = arg
                        else:
                            for m in range(h + d, e + d, d):
                                v = I[g, h, m]
                                if v == NEG:
                                    continue
                                v += C[h, m, e]
                                if v > best:
                                    best = v
                                    arg = m
                            C[g, h, e] = best
                            bC[g, h, e] = arg

    heads = np.full(N, -1, dtype=np.int64)
    stack = np.zeros((4 * N + 8, 4), dtype=np.int64)   # (kind, g, h, e): 0 C, 1 I
    top = 0
    if single_root:
        best = NEG
        arg = -1
        for m in range(1, N):
            if slot[0, m] < 0:
                continue
            v = arc[0, m] + C[0, m, 1] + C[0, m, n]
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
        best = C[0, 0, n]
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
            m = bC[g, h, e]
            stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = 1, g, h, m
            stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2], stack[top + 1, 3] = 0, h, m, e
            top += 2
        else:
            heads[e] = h
            r = bI[g, h, e]
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
                       index: PartIndex | None = None) -> np.ndarray:
    """Best projective tree under arc + grandparent scores (Koo's Model 0).

    arc: (n+1, n+1). grand: dense (n+1, n+1, n+1) ``grand[g, h, m]`` (h >= 1;
    entries with h = 0 are ignored), or with ``index=`` the flat compact array.
    ``allowed``: optional (n+1, n+1) bool arc mask (dense form only).
    Returns heads (n+1,) int64. O(n^4) time, O(n^3) space.
    """
    arc = check_arc(arc)
    n = arc.shape[0] - 1
    if index is None:
        dense_sizes(n, arc, grand=grand)
        index = PartIndex.dense(n, allowed)
    gr, used = flat(grand, index.n_grand, "grand")
    heads, best = _grandparent(arc, index.slot, index.arcid, index.grand_off, gr, used,
                               single_root)
    if n > 0 and best == NEG:
        raise ValueError("no projective tree uses only the allowed arcs")
    return heads
