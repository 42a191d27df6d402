"""Second-order sibling model: McDonald & Pereira (2006)'s projective O(n^3) parser.

Parts: ``arc[h, m]`` and ``sib[h, a, b]`` (conventions in the package docstring).
Spans (Eisner's, plus a sibling span):

* ``C[h, e]`` complete: h heads everything between h and e (either direction);
* ``I[h, m]`` incomplete: arc h -> m, plus h's children between h and m;
* ``S[a, b]`` (a < b) sibling span: a's complete span rightward to r and b's
  complete span leftward to r+1, for the best split r; a and b will be adjacent
  children of one head.

    I[h, b] = arc[h, b] + max( C[b, h+d] + sib[h, h, b],                  # b first child
                               max_a I[h, a] + S[a, b] + sib[h, a, b] )   # a previous child
    C[h, e] = max_m I[h, m] + C[m, e]

Time O(n^3), space O(n^2).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from arboreal._interrupt import interruptible
from arboreal.inference.higher_order.parts import PartIndex, check_arc, dense_sizes, flat

NEG = -np.inf


@njit(cache=True, nogil=True)
def _sibling(arc, slot, width, sib_off, sib, use_sib, single_root):
    n = arc.shape[0] - 1
    N = n + 1
    C = np.full((N, N), NEG)
    I = np.full((N, N), NEG)
    S = np.full((N, N), NEG)
    bC = np.full((N, N), -1, dtype=np.int64)
    bI = np.full((N, N), -1, dtype=np.int64)
    bS = np.full((N, N), -1, dtype=np.int64)
    for h in range(N):
        C[h, h] = 0.0
    for w in range(1, n + 1):
        for a in range(1, N - w):
            b = a + w
            best = NEG
            arg = -1
            for r in range(a, b):
                v = C[a, r] + C[b, r + 1]
                if v > best:
                    best = v
                    arg = r
            S[a, b] = best
            bS[a, b] = arg
        for h in range(N):
            if single_root and h == 0:
                continue
            W = width[h]
            base = sib_off[h]
            s0 = slot[h, h]
            for side in range(2):
                d = 1 if side == 0 else -1
                b = h + d * w
                if b < 1 or b > n:
                    continue
                sb = slot[h, b]
                if sb < 0:
                    continue
                best = C[b, h + d]
                if use_sib:
                    best += sib[base + s0 * W + sb]
                arg = h
                for a in range(h + d, b, d):
                    sa = slot[h, a]
                    if sa < 0:
                        continue
                    v = I[h, a]
                    if v == NEG:
                        continue
                    v += S[a, b] if d == 1 else S[b, a]
                    if use_sib:
                        v += sib[base + sa * W + sb]
                    if v > best:
                        best = v
                        arg = a
                I[h, b] = best + arc[h, b]
                bI[h, b] = arg
        for h in range(N):
            if single_root and h == 0:
                continue
            for side in range(2):
                d = 1 if side == 0 else -1
                e = h + d * w
                if e < 1 or e > n:
                    continue
                best = NEG
                arg = -1
                for m in range(h + d, e + d, d):
                    v = I[h, m]
                    if v == NEG:
                        continue
                    v += C[m, e]
                    if v > best:
                        best = v
                        arg = m
                C[h, e] = best
                bC[h, e] = arg

    heads = np.full(N, -1, dtype=np.int64)
    stack = np.zeros((4 * N + 8, 3), dtype=np.int64)   # (kind, x, y): 0 C, 1 I, 2 S
    top = 0
    if single_root:
        best = NEG
        arg = -1
        for m in range(1, N):
            sm = slot[0, m]
            if sm < 0:
                continue
            v = arc[0, m] + C[m, 1] + C[m, n]
            if use_sib:
                v += sib[sib_off[0] + slot[0, 0] * width[0] + sm]
            if v > best:
                best = v
                arg = m
        if best == NEG:
            return heads, best
        heads[arg] = 0
        stack[0, 0], stack[0, 1], stack[0, 2] = 0, arg, 1
        stack[1, 0], stack[1, 1], stack[1, 2] = 0, arg, n
        top = 2
    else:
        best = C[0, n]
        if best == NEG:
            return heads, best
        stack[0, 0], stack[0, 1], stack[0, 2] = 0, 0, n
        top = 1
    while top > 0:
        top -= 1
        kind, x, y = stack[top, 0], stack[top, 1], stack[top, 2]
        if kind == 0:
            if x == y:
                continue
            m = bC[x, y]
            stack[top, 0], stack[top, 1], stack[top, 2] = 1, x, m
            stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2] = 0, m, y
            top += 2
        elif kind == 1:
            heads[y] = x
            a = bI[x, y]
            d = 1 if y > x else -1
            if a == x:
                stack[top, 0], stack[top, 1], stack[top, 2] = 0, y, x + d
                top += 1
            else:
                stack[top, 0], stack[top, 1], stack[top, 2] = 1, x, a
                stack[top + 1, 0] = 2
                stack[top + 1, 1] = min(a, y)
                stack[top + 1, 2] = max(a, y)
                top += 2
        else:
            r = bS[x, y]
            stack[top, 0], stack[top, 1], stack[top, 2] = 0, x, r
            stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2] = 0, y, r + 1
            top += 2
    return heads, best


def sibling_decode(arc: np.ndarray, sib: np.ndarray | None = None, *, single_root: bool = True,
                   allowed: np.ndarray | None = None, index: PartIndex | None = None
                   ) -> np.ndarray:
    """Best projective tree under arc + sibling scores (McDonald & Pereira 2006).

    arc: (n+1, n+1). sib: dense (n+1, n+1, n+1) ``sib[h, a, b]`` (``a = h``: b is
    the first child on its side), or, with ``index=``, the flat compact array of
    that :class:`PartIndex`. ``allowed`` (n+1, n+1) bool prunes arcs (dense form
    only; a compact index carries its own). Returns heads (n+1,) int64.
    Raises ValueError if no projective tree uses only allowed arcs. O(n^3).
    """
    arc = check_arc(arc)
    n = arc.shape[0] - 1
    if index is None:
        dense_sizes(n, arc, sib=sib)
        index = PartIndex.dense(n, allowed)
    s, used = flat(sib, index.n_sib, "sib")
    heads, best = interruptible(_sibling, arc, index.slot, index.width, index.sib_off, s, used,
                                single_root, work=float(n + 1) ** 3)
    if n > 0 and best == NEG:
        raise ValueError("no projective tree uses only the allowed arcs")
    return heads
