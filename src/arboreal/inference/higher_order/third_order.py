"""Third-order parsers of Koo & Collins (2010): Model 1 and Model 2, O(n^4) time, O(n^3) space.

Spans carry the head's head g (outside the span; a placeholder 0 for the root's
spans, which score no grand parts):

* ``C[g, h, e]`` complete g-span, ``I[g, h, m]`` incomplete g-span (arc h -> m);
* ``S[h, a, b]`` (a < b) sibling g-span: a's and b's facing complete spans, both
  with head h, split at the best r;
* Model 2 only: ``IS[h, x, b]`` incomplete s-span: arc h -> b whose next inner
  sibling is x (x = h: b is h's closest child on that side), no g index.

Model 1 (``grand_sibling_decode``; parts arc, sib, grand, gsib — every grandchild
and every grand-sibling; with ``gsib=None`` it is the second-order siblings +
grandparents model)::

    I[g, h, b] = arc[h,b] + grand[g,h,b] + max( C[h, b, h+d] + sib[h,h,b] + gsib[g,h,h,b],
                       max_x I[g, h, x] + S[h, x, b] + sib[h,x,b] + gsib[g,h,x,b] )
    C[g, h, e] = max_m I[g, h, m] + C[h, m, e]

Model 2 (``tri_sibling_decode``; parts arc, sib, trisib for every head, and grand +
gsib only for the *outermost* child of each head on each side, which is what an
O(n^3)-space program can see)::

    IS[h, h, b] = arc[h,b] + sib[h,h,b] + C[h, b, h+d]
    IS[h, x, b] = arc[h,b] + sib[h,x,b] + S[h, x, b] + max_t IS[h, t, x] + trisib[h,t,x,b]
    I[g, h, b]  = grand[g,h,b] + max_x IS[h, x, b] + gsib[g,h,x,b]
    C[g, h, e]  = max_m I[g, h, m] + C[h, m, e]

All parts for every child (``grand_tri_sibling_decode``: the union of Models 1
and 2) need the grandparent index in Model 2's s-spans: ``G[g, h, x, b]``
(stored per kept arc g -> h like the gsib scores)::

    G[g, h, h, b] = arc[h,b] + sib[h,h,b] + grand[g,h,b] + gsib[g,h,h,b] + C[h, b, h+d]
    G[g, h, x, b] = arc[h,b] + sib[h,x,b] + grand[g,h,b] + gsib[g,h,x,b] + S[h, x, b]
                    + max_t G[g, h, t, x] + trisib[h,t,x,b]
    I[g, h, b]    = max_x G[g, h, x, b]

O(n^5) time unpruned (one more free index than Model 2), but with K kept heads
per word only K grandparents per head: about K times the work of scoring the
tri-sibling parts themselves.

Pruned arcs are skipped everywhere (as arcs and as grandparent arcs).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from arboreal._interrupt import interruptible
from arboreal.inference.higher_order.memory import DECODER_LIMIT, check_chart_budget
from arboreal.inference.higher_order.parts import PartIndex, check_arc, dense_sizes, flat

NEG = -np.inf


@njit(cache=True, inline="always")
def _row(arcid, R, g, h):
    """Chart row of spans headed by h whose head is g: the arc id of g -> h, or the
    root row R for the root's spans (h = 0, placeholder g)."""
    return R if h == 0 else arcid[g, h]


@njit(cache=True)
def _charts(arcid, R, N, nf, ni):
    """``nf`` float64 charts filled with -inf and ``ni`` int32 back-pointer charts,
    each (R + 1, N) (one row per kept arc plus the root row R); complete spans of
    width 0 (``C[row(g, h), h]``) are set to 0 in the first float chart."""
    F = np.full((nf, R + 1, N), NEG)
    B = np.empty((ni, R + 1, N), dtype=np.int32)   # read only where written
    for g in range(N):
        for h in range(1, N):
            a = arcid[g, h]
            if a >= 0:
                F[0, a, h] = 0.0
    F[0, R, 0] = 0.0
    return F, B


@njit(cache=True)
def _adjacency(arcid):
    """Kept arcs as lists: ``kids[h, :nk[h]]`` h's kept modifiers in increasing order,
    ``split[h]`` how many of them lie left of h; ``pars[m, :npar[m]]`` m's kept heads
    in increasing order. O(n^2); lets the programs skip pruned arcs without testing
    them (O(K^2 n^2) instead of O(n^4) checks)."""
    N = arcid.shape[0]
    kids = np.empty((N, N), dtype=np.int64)
    pars = np.empty((N, N), dtype=np.int64)
    nk = np.zeros(N, dtype=np.int64)
    npar = np.zeros(N, dtype=np.int64)
    split = np.zeros(N, dtype=np.int64)
    for h in range(N):
        for m in range(N):
            if arcid[h, m] >= 0:
                kids[h, nk[h]] = m
                nk[h] += 1
                if m < h:
                    split[h] += 1
                pars[m, npar[m]] = h
                npar[m] += 1
    return kids, nk, split, pars, npar


@njit(cache=True)
def _sibling_spans(w, n, single_root, pars, npar, arcid, C, S, bS):
    """S[h, a, b] (chart cell ``S[arcid[h, a], b]``) for b - a = w (needs complete
    spans narrower than w)."""
    N = n + 1
    for a in range(1, N - w):
        b = a + w
        for j in range(npar[a]):
            h = pars[a, j]
            if a <= h <= b or (single_root and h == 0):
                continue
            if arcid[h, b] < 0:
                continue
            best = NEG
            arg = -1
            ra = arcid[h, a]
            rb = arcid[h, b]
            for r in range(a, b):
                v = C[ra, r] + C[rb, r + 1]
                if v > best:
                    best = v
                    arg = r
            S[ra, b] = best
            bS[ra, b] = arg


@njit(cache=True)
def _complete_spans(w, n, single_root, kids, nk, split, pars, npar, arcid, R, C, I, bC):
    """C[g, h, e] (chart cell ``C[row(g, h), e]``) for |e - h| = w (needs incomplete
    spans up to width w)."""
    N = n + 1
    for h in range(N):
        if single_root and h == 0:
            continue
        for side in range(2):
            d = 1 if side == 0 else -1
            e = h + d * w
            if e < 1 or e > n:
                continue
            lo = min(h, e)
            hi = max(h, e)
            ng = 1 if h == 0 else npar[h]   # the root's spans: placeholder g = 0
            for j in range(ng):
                g = 0 if h == 0 else pars[h, j]
                if h > 0 and lo <= g <= hi:
                    continue
                row = _row(arcid, R, g, h)
                best = NEG
                arg = -1
                # h's kept modifiers m from h outwards up to e
                i = split[h] if d == 1 else split[h] - 1
                while 0 <= i < nk[h]:
                    m = kids[h, i]
                    if (m > e) if d == 1 else (m < e):
                        break
                    i += d
                    v = I[row, m]
                    if v == NEG:
                        continue
                    v += C[arcid[h, m], e]
                    if v > best:
                        best = v
                        arg = m
                C[row, e] = best
                bC[row, e] = arg


@njit(cache=True, inline="always")
def _inner_siblings(h, b, d, sb, W, arcid, slot, sib_off, sib, use_sib, kids, nk, split,
                    C, S, inner):
    """For the incomplete span h -> b (direction d): the value of b being h's first
    child on that side (``C[h, b, h+d] + sib[h, h, b]``), and for each kept modifier
    x of h strictly between h and b ``inner[x] = S[h, x, b] + sib[h, x, b]``.
    Returns (first, start, stop): the x are ``kids[h, i]`` for i from start to stop
    (exclusive) in steps of d."""
    first = C[arcid[h, b], h + d]
    if use_sib:
        first += sib[sib_off[h] + slot[h, h] * W + sb]
    start = split[h] if d == 1 else split[h] - 1
    stop = start
    while 0 <= stop < nk[h] and kids[h, stop] != b:
        x = kids[h, stop]
        v = S[arcid[h, x], b] if d == 1 else S[arcid[h, b], x]
        if use_sib:
            v += sib[sib_off[h] + slot[h, x] * W + sb]
        inner[x] = v
        stop += d
    return first, start, stop


@njit(cache=True)
def _kept_spans(w, n, single_root, slot):
    """The kept arcs h -> b of width w (|b - h| = w) as rows (h, b, d), d the direction
    (1: b right of h), in the order h = 0..n, right before left (the root only when
    multi-rooted). O(n)."""
    out = np.empty((2 * (n + 1), 3), dtype=np.int64)
    k = 0
    for h in range(0 if not single_root else 1, n + 1):
        for d in (1, -1):
            b = h + d * w
            if 1 <= b <= n and slot[h, b] >= 0:
                out[k, 0], out[k, 1], out[k, 2] = h, b, d
                k += 1
    return out[:k]


@njit(cache=True)
def _root_choice(arc, slot, width, arcid, sib_off, sib, use_sib, C, single_root):
    """(best score, root child) of the whole sentence; child -1 for multi-root."""
    n = arc.shape[0] - 1
    if not single_root:
        return C[C.shape[0] - 1, n], -1
    best = NEG
    arg = -1
    for m in range(1, n + 1):
        sm = slot[0, m]
        if sm < 0:
            continue
        a = arcid[0, m]
        v = arc[0, m] + C[a, 1] + C[a, n]
        if use_sib:
            v += sib[sib_off[0] + slot[0, 0] * width[0] + sm]
        if v > best:
            best = v
            arg = m
    return best, arg


@njit(cache=True, inline="always")
def _push(stack, top, kind, p, q, r):
    """Put the item (kind, p, q, r) on the backtracking stack; returns the new top."""
    stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = kind, p, q, r
    return top + 1


@njit(cache=True, inline="always")
def _expand_complete(stack, top, arcid, R, bC, p, q, r):
    """C[g=p, h=q, e=r] (wider than 0) -> I[p, q, m] and C[q, m, r] at its best split
    m (kinds 1 and 0); returns the new top."""
    m = bC[_row(arcid, R, p, q), r]
    top = _push(stack, top, 1, p, q, m)
    return _push(stack, top, 0, q, m, r)


@njit(cache=True, inline="always")
def _expand_sibling(stack, top, arcid, bS, p, q, r):
    """S[h=p, a=q, b=r] -> the complete spans C[p, q, s] and C[p, r, s + 1] at its best
    split s (kind 0); returns the new top."""
    s = bS[arcid[p, q], r]
    top = _push(stack, top, 0, p, q, s)
    return _push(stack, top, 0, p, r, s + 1)


@njit(cache=True, inline="always")
def _grand_arc(h, j, pars, arcid, lo, hi):
    """The j-th grandparent g of spans headed by h whose other end makes the span
    [lo, hi]: the arc id of g -> h (-1 for the root's spans, h = 0: placeholder g),
    or -2 when g lies inside the span (no such span)."""
    if h == 0:
        return -1
    g = pars[h, j]
    if lo <= g <= hi:
        return -2
    return arcid[g, h]


@njit(cache=True, inline="always")
def _inner_kids(kids, split, h, d, b):
    """h's kept modifiers strictly between h and b (direction d), from h outwards:
    ``kids[h, start + q * d]`` for q < count. Returns (start, count)."""
    start = split[h] if d == 1 else split[h] - 1
    stop = start
    while kids[h, stop] != b:
        stop += d
    return start, (stop - start) * d


@njit(cache=True)
def _backtrack_begin(arc, slot, width, arcid, sib_off, sib, use_sib, C, single_root, cols):
    """The start of a backtrack once the charts are full: (best score, heads (n+1,) -1
    but for the root's arc, the stack (8N + 8, cols) seeded with the complete spans
    under the root (both sides of its one child when single-rooted), its top); the
    top is 0 (nothing to follow) when no tree exists."""
    n = arc.shape[0] - 1
    N = n + 1
    best, root = _root_choice(arc, slot, width, arcid, sib_off, sib, use_sib, C, single_root)
    heads = np.full(N, -1, dtype=np.int64)
    stack = np.zeros((8 * N + 8, cols), dtype=np.int64)
    if best == NEG:
        return best, heads, stack, 0
    if single_root:
        heads[root] = 0
        top = _push(stack, 0, 0, 0, root, 1)
        return best, heads, stack, _push(stack, top, 0, 0, root, n)
    return best, heads, stack, _push(stack, 0, 0, 0, 0, n)


@njit(cache=True, nogil=True)
def _model1(arc, slot, width, arcid, sib_off, grand_off, gsib_off, sib, grand, gsib,
            use_sib, use_grand, use_gsib, single_root):
    n = arc.shape[0] - 1
    N = n + 1
    R = grand_off.shape[0]   # chart rows: one per arc id, then the root's row
    F, B = _charts(arcid, R, N, 3, 3)
    C, I, S = F[0], F[1], F[2]
    bC, bI, bS = B[0], B[1], B[2]
    kids, nk, split, pars, npar = _adjacency(arcid)
    inner = np.empty(N)   # S[h, x, b] + sib[h, x, b] for the current (h, b)
    for w in range(1, n + 1):
        _sibling_spans(w, n, single_root, pars, npar, arcid, C, S, bS)
        spans = _kept_spans(w, n, single_root, slot)
        for k in range(spans.shape[0]):
            h, b, d = spans[k, 0], spans[k, 1], spans[k, 2]
            W = width[h]
            s0 = slot[h, h]
            sb = slot[h, b]
            lo = min(h, b)
            hi = max(h, b)
            first, start, stop = _inner_siblings(h, b, d, sb, W, arcid, slot, sib_off,
                                                 sib, use_sib, kids, nk, split, C, S,
                                                 inner)
            ng = 1 if h == 0 else npar[h]
            for j in range(ng):
                a = _grand_arc(h, j, pars, arcid, lo, hi)
                if a == -2:
                    continue
                row = R if h == 0 else a
                gs = use_gsib and a >= 0
                best = first
                if gs:
                    best += gsib[gsib_off[a] + s0 * W + sb]
                arg = h
                i = start
                while i != stop:
                    x = kids[h, i]
                    i += d
                    v = I[row, x]
                    if v == NEG or inner[x] == NEG:
                        continue
                    v += inner[x]
                    if gs:
                        v += gsib[gsib_off[a] + slot[h, x] * W + sb]
                    if v > best:
                        best = v
                        arg = x
                best += arc[h, b]
                if use_grand and a >= 0:
                    best += grand[grand_off[a] + sb]
                I[row, b] = best
                bI[row, b] = arg
        _complete_spans(w, n, single_root, kids, nk, split, pars, npar, arcid, R, C, I, bC)

    best, heads, stack, top = _backtrack_begin(arc, slot, width, arcid, sib_off, sib, use_sib,
                                               C, single_root, 4)
    # (kind, g|h, h|a, e|b): 0 C, 1 I, 2 S
    while top > 0:
        top -= 1
        kind, p, q, r = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3]
        if kind == 0:          # C[g=p, h=q, e=r]
            if q != r:
                top = _expand_complete(stack, top, arcid, R, bC, p, q, r)
        elif kind == 1:        # I[g=p, h=q, b=r]
            heads[r] = q
            x = bI[_row(arcid, R, p, q), r]
            d = 1 if r > q else -1
            if x == q:
                top = _push(stack, top, 0, q, r, q + d)
            else:
                top = _push(stack, top, 1, p, q, x)
                top = _push(stack, top, 2, q, min(x, r), max(x, r))
        else:                  # S[h=p, a=q, b=r]
            top = _expand_sibling(stack, top, arcid, bS, p, q, r)
    return heads, best


@njit(cache=True, nogil=True)
def _model2(arc, slot, width, arcid, sib_off, grand_off, gsib_off, tri_off, sib, grand, gsib,
            tri, use_sib, use_grand, use_gsib, use_tri, single_root):
    n = arc.shape[0] - 1
    N = n + 1
    R = grand_off.shape[0]   # chart rows: one per arc id, then the root's row
    F, B = _charts(arcid, R, N, 4, 4)
    C, I, S, IS = F[0], F[1], F[2], F[3]   # IS[h, x, b] is cell IS[arcid[h, b], x]
    bC, bI, bS, bIS = B[0], B[1], B[2], B[3]
    kids, nk, split, pars, npar = _adjacency(arcid)
    for w in range(1, n + 1):
        _sibling_spans(w, n, single_root, pars, npar, arcid, C, S, bS)
        spans = _kept_spans(w, n, single_root, slot)
        for k in range(spans.shape[0]):
            h, b, d = spans[k, 0], spans[k, 1], spans[k, 2]
            W = width[h]
            s0 = slot[h, h]
            sb = slot[h, b]
            lo = min(h, b)
            hi = max(h, b)
            # incomplete s-spans IS[h, x, b]
            hb = arcid[h, b]
            v = C[hb, h + d] + arc[h, b]
            if use_sib:
                v += sib[sib_off[h] + s0 * W + sb]
            IS[hb, h] = v
            # h's kept modifiers strictly between h and b, from h outwards:
            # kids[h, start + q * d] for q < cnt
            start, cnt = _inner_kids(kids, split, h, d, b)
            for q in range(cnt):
                x = kids[h, start + q * d]
                sx = slot[h, x]
                hx = arcid[h, x]
                sxb = S[hx, b] if d == 1 else S[hb, x]
                if sxb == NEG:
                    continue
                best = NEG
                arg = -1
                for r in range(-1, q):   # t = h, then the kept modifiers inside x
                    t = h if r < 0 else kids[h, start + r * d]
                    v = IS[hx, t]
                    if v != NEG:
                        if use_tri:
                            v += tri[tri_off[h] + (slot[h, t] * W + sx) * W + sb]
                        if v > best:
                            best = v
                            arg = t
                if best == NEG:
                    continue
                best += sxb + arc[h, b]
                if use_sib:
                    best += sib[sib_off[h] + sx * W + sb]
                IS[hb, x] = best
                bIS[hb, x] = arg
            # incomplete g-spans I[g, h, b]
            ng = 1 if h == 0 else npar[h]
            for j in range(ng):
                a = _grand_arc(h, j, pars, arcid, lo, hi)
                if a == -2:
                    continue
                row = R if h == 0 else a
                gs = use_gsib and a >= 0
                best = NEG
                arg = -1
                for r in range(-1, cnt):
                    x = h if r < 0 else kids[h, start + r * d]
                    v = IS[hb, x]
                    if v != NEG:
                        if gs:
                            v += gsib[gsib_off[a] + slot[h, x] * W + sb]
                        if v > best:
                            best = v
                            arg = x
                if use_grand and a >= 0:
                    best += grand[grand_off[a] + sb]
                I[row, b] = best
                bI[row, b] = arg
        _complete_spans(w, n, single_root, kids, nk, split, pars, npar, arcid, R, C, I, bC)

    best, heads, stack, top = _backtrack_begin(arc, slot, width, arcid, sib_off, sib, use_sib,
                                               C, single_root, 4)
    # kinds: 0 C, 1 I, 2 IS, 3 S
    while top > 0:
        top -= 1
        kind, p, q, r = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3]
        if kind == 0:          # C[g=p, h=q, e=r]
            if q != r:
                top = _expand_complete(stack, top, arcid, R, bC, p, q, r)
        elif kind == 1:        # I[g=p, h=q, b=r]
            top = _push(stack, top, 2, q, bI[_row(arcid, R, p, q), r], r)
        elif kind == 2:        # IS[h=p, x=q, b=r]
            heads[r] = p
            d = 1 if r > p else -1
            if q == p:
                top = _push(stack, top, 0, p, r, p + d)
            else:
                top = _push(stack, top, 2, p, bIS[arcid[p, r], q], q)
                top = _push(stack, top, 3, p, min(q, r), max(q, r))
        else:                  # S[h=p, a=q, b=r]
            top = _expand_sibling(stack, top, arcid, bS, p, q, r)
    return heads, best


@njit(cache=True, nogil=True)
def _model2_all(arc, slot, width, arcid, sib_off, grand_off, gsib_off, tri_off, n_gsib, sib,
                grand, gsib, tri, use_sib, use_grand, use_gsib, use_tri, single_root):
    """Every part for every child: arc, sib, trisib, grand and gsib (see
    :func:`grand_tri_sibling_decode`). ``G`` holds the incomplete gs-spans
    G[g, h, x, b] in the layout of the gsib scores (``gsib_off[arcid[g, h]] +
    slot[h, x] * W[h] + slot[h, b]``), plus one block after them for the root's
    spans (placeholder g, no grand parts)."""
    n = arc.shape[0] - 1
    N = n + 1
    R = grand_off.shape[0]   # chart rows: one per arc id, then the root's row
    F, B = _charts(arcid, R, N, 3, 3)
    C, I, S = F[0], F[1], F[2]
    bC, bI, bS = B[0], B[1], B[2]
    W0 = width[0]
    G = np.full(n_gsib + W0 * W0, NEG)
    bG = np.empty(n_gsib + W0 * W0, dtype=np.int32)
    kids, nk, split, pars, npar = _adjacency(arcid)
    local = np.empty(N + 1)   # g-independent part of G[., h, x, b], x = h then inner kids
    for w in range(1, n + 1):
        _sibling_spans(w, n, single_root, pars, npar, arcid, C, S, bS)
        spans = _kept_spans(w, n, single_root, slot)
        for k in range(spans.shape[0]):
            h, b, d = spans[k, 0], spans[k, 1], spans[k, 2]
            W = width[h]
            s0 = slot[h, h]
            sb = slot[h, b]
            lo = min(h, b)
            hi = max(h, b)
            start, cnt = _inner_kids(kids, split, h, d, b)
            # x = h (b is h's closest child), then h's kept kids between h and b
            hb = arcid[h, b]
            v = C[hb, h + d] + arc[h, b]
            if use_sib:
                v += sib[sib_off[h] + s0 * W + sb]
            local[0] = v
            for q in range(cnt):
                x = kids[h, start + q * d]
                v = S[arcid[h, x], b] if d == 1 else S[hb, x]
                if v != NEG:
                    v += arc[h, b]
                    if use_sib:
                        v += sib[sib_off[h] + slot[h, x] * W + sb]
                local[q + 1] = v
            ng = 1 if h == 0 else npar[h]
            for j in range(ng):
                a = _grand_arc(h, j, pars, arcid, lo, hi)
                if a == -2:
                    continue
                off = n_gsib if a < 0 else gsib_off[a]
                gs = use_gsib and a >= 0
                gr = 0.0
                if use_grand and a >= 0:
                    gr = grand[grand_off[a] + sb]
                bestI = NEG
                argI = -1
                for r in range(-1, cnt):
                    v0 = local[r + 1]
                    if v0 == NEG:
                        continue
                    x = h if r < 0 else kids[h, start + r * d]
                    sx = slot[h, x]
                    best = 0.0
                    arg = h
                    if r >= 0:   # the chain inside: G[g, h, t, x] + trisib[h, t, x, b]
                        best = NEG
                        arg = -1
                        for r2 in range(-1, r):
                            t = h if r2 < 0 else kids[h, start + r2 * d]
                            st = slot[h, t]
                            u = G[off + st * W + sx]
                            if u == NEG:
                                continue
                            if use_tri:
                                u += tri[tri_off[h] + (st * W + sx) * W + sb]
                            if u > best:
                                best = u
                                arg = t
                        if best == NEG:
                            continue
                    v = best + v0 + gr
                    if gs:
                        v += gsib[gsib_off[a] + sx * W + sb]
                    G[off + sx * W + sb] = v
                    bG[off + sx * W + sb] = arg
                    if v > bestI:
                        bestI = v
                        argI = x
                row = R if h == 0 else a
                I[row, b] = bestI
                bI[row, b] = argI
        _complete_spans(w, n, single_root, kids, nk, split, pars, npar, arcid, R, C, I, bC)

    best, heads, stack, top = _backtrack_begin(arc, slot, width, arcid, sib_off, sib, use_sib,
                                               C, single_root, 5)
    # kinds: 0 C, 1 I, 2 G, 3 S
    while top > 0:
        top -= 1
        kind, p, q, r, z = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3], stack[top, 4]
        if kind == 0:          # C[g=p, h=q, e=r]
            if q != r:
                top = _expand_complete(stack, top, arcid, R, bC, p, q, r)
        elif kind == 1:        # I[g=p, h=q, b=r] -> G[g, h, x, b]
            stack[top, 4] = r
            top = _push(stack, top, 2, p, q, bI[_row(arcid, R, p, q), r])
        elif kind == 2:        # G[g=p, h=q, x=r, b=z]
            heads[z] = q
            d = 1 if z > q else -1
            if r == q:
                top = _push(stack, top, 0, q, z, q + d)
            else:
                off = n_gsib if q == 0 else gsib_off[arcid[p, q]]
                stack[top, 4] = r
                top = _push(stack, top, 2, p, q, bG[off + slot[q, r] * width[q] + slot[q, z]])
                top = _push(stack, top, 3, q, min(r, z), max(r, z))
        else:                  # S[h=p, a=q, b=r]
            top = _expand_sibling(stack, top, arcid, bS, p, q, r)
    return heads, best


def grand_sibling_decode(arc: np.ndarray, sib: np.ndarray | None = None,
                         grand: np.ndarray | None = None, gsib: np.ndarray | None = None, *,
                         single_root: bool = True, allowed: np.ndarray | None = None,
                         index: PartIndex | None = None,
                         memory_budget: float | None = DECODER_LIMIT) -> np.ndarray:
    """Best projective tree under arc + sib + grand + gsib scores (Koo & Collins Model 1).

    Dense shapes: arc (n+1, n+1), sib (n+1,)*3 ``sib[h, a, b]``, grand (n+1,)*3
    ``grand[g, h, m]``, gsib (n+1,)*4 ``gsib[g, h, a, b]``; any of the last three may
    be None (not scored). With ``index=`` they are the flat compact arrays of that
    :class:`PartIndex`. ``allowed`` (n+1, n+1) bool prunes arcs (dense form only).
    Returns heads (n+1,) int64. O(n^4) time (about O(K^2 n^2) with K kept heads
    per word); space 36 (A + 1) (n + 1) bytes of charts for A kept arcs (O(n^3)
    unpruned, O(K n^2) pruned). Raises ``MemoryBudgetError`` (an ArborealError)
    instead of allocating charts over ``memory_budget`` bytes (None: no limit).
    """
    arc = check_arc(arc)
    n = arc.shape[0] - 1
    if index is None:
        dense_sizes(n, arc, sib=sib, grand=grand, gsib=gsib)
        index = PartIndex.dense(n, allowed)
    s, us = flat(sib, index.n_sib, "sib")
    g, ug = flat(grand, index.n_grand, "grand")
    gs, ugs = flat(gsib, index.n_gsib, "gsib")
    check_chart_budget("model1", n, index.grand_off.shape[0] + 1, memory_budget)
    heads, best = interruptible(_model1, arc, index.slot, index.width, index.arcid,
                                index.sib_off, index.grand_off, index.gsib_off, s, g, gs, us,
                                ug, ugs, single_root, work=float(n + 1) ** 3)
    if n > 0 and best == NEG:
        raise ValueError("no projective tree uses only the allowed arcs")
    return heads


def tri_sibling_decode(arc: np.ndarray, sib: np.ndarray | None = None,
                       trisib: np.ndarray | None = None, grand: np.ndarray | None = None,
                       gsib: np.ndarray | None = None, *, single_root: bool = True,
                       allowed: np.ndarray | None = None, index: PartIndex | None = None,
                       memory_budget: float | None = DECODER_LIMIT) -> np.ndarray:
    """Best projective tree under Koo & Collins's Model 2 factorization.

    Scores arc, sib and trisib (``trisib[h, a, b, c]``, dense (n+1,)*4) parts of
    every head, and grand / gsib parts only of each head's outermost child on each
    side (see the module docstring). Shapes and ``index=`` / ``allowed`` as in
    :func:`grand_sibling_decode`. Returns heads (n+1,) int64. O(n^4) time;
    space 48 (A + 1) (n + 1) bytes of charts (``memory_budget`` as in
    :func:`grand_sibling_decode`).
    """
    arc = check_arc(arc)
    n = arc.shape[0] - 1
    if index is None:
        dense_sizes(n, arc, sib=sib, grand=grand, gsib=gsib, trisib=trisib)
        index = PartIndex.dense(n, allowed)
    s, us = flat(sib, index.n_sib, "sib")
    g, ug = flat(grand, index.n_grand, "grand")
    gs, ugs = flat(gsib, index.n_gsib, "gsib")
    t, ut = flat(trisib, index.n_tri, "trisib")
    check_chart_budget("model2", n, index.grand_off.shape[0] + 1, memory_budget)
    heads, best = interruptible(_model2, arc, index.slot, index.width, index.arcid,
                                index.sib_off, index.grand_off, index.gsib_off, index.tri_off,
                                s, g, gs, t, us, ug, ugs, ut, single_root,
                                work=float(n + 1) ** 3)
    if n > 0 and best == NEG:
        raise ValueError("no projective tree uses only the allowed arcs")
    return heads


def grand_tri_sibling_decode(arc: np.ndarray, sib: np.ndarray | None = None,
                             trisib: np.ndarray | None = None, grand: np.ndarray | None = None,
                             gsib: np.ndarray | None = None, *, single_root: bool = True,
                             allowed: np.ndarray | None = None, index: PartIndex | None = None,
                             memory_budget: float | None = DECODER_LIMIT) -> np.ndarray:
    """Best projective tree when arc, sib, trisib, grand and gsib parts are scored for
    *every* child (the union of Models 1 and 2; TurboParser's "full" part set).

    The incomplete spans of Model 2 keep the grandparent index: G[g, h, x, b] (arc
    h -> b, next inner sibling x, h's head g). Shapes and ``index=`` / ``allowed``
    as in :func:`grand_sibling_decode`. Returns heads (n+1,) int64. Time O(n^5)
    unpruned; with pruning O(sum over kept arcs g -> h of deg(h)^3) (K heads per
    word: each head h is paired with at most K grandparents). Space 36 (A + 1) (n + 1)
    bytes for the g-spans (A kept arcs) plus 12 per grand-sibling part (the size of
    the gsib table); ``memory_budget`` as in :func:`grand_sibling_decode`.
    """
    arc = check_arc(arc)
    n = arc.shape[0] - 1
    if index is None:
        dense_sizes(n, arc, sib=sib, grand=grand, gsib=gsib, trisib=trisib)
        index = PartIndex.dense(n, allowed)
    s, us = flat(sib, index.n_sib, "sib")
    g, ug = flat(grand, index.n_grand, "grand")
    gs, ugs = flat(gsib, index.n_gsib, "gsib")
    t, ut = flat(trisib, index.n_tri, "trisib")
    check_chart_budget("model2_all", n, index.grand_off.shape[0] + 1, memory_budget,
                       index.n_gsib, int(index.width[0]))
    heads, best = interruptible(_model2_all, arc, index.slot, index.width, index.arcid,
                                index.sib_off, index.grand_off, index.gsib_off, index.tri_off,
                                index.n_gsib, s, g, gs, t, us, ug, ugs, ut, single_root,
                                work=float(n + 1) ** 3)
    if n > 0 and best == NEG:
        raise ValueError("no projective tree uses only the allowed arcs")
    return heads
