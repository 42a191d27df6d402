"""Partition function and part marginals of the siblings + grandparents factorization.

Inside-outside over the spans of Koo & Collins's Model 1 (the program of
:func:`~arboreal.inference.higher_order.grand_sibling_decode`, with log-sum-exp in
place of max): parts arc, sib, grand, gsib (any of the last three may be absent: with
sib and grand only it is the second-order model of ``arboreal train --order 2``).
Every projective tree has exactly one derivation in this program (Eisner's spans, a
head's children added from the inside out, each sibling pair split at the unique
boundary of their subtrees), so the inside value of the whole sentence is log Z.

Inside: log-space charts ``C``, ``I``, ``S`` (the decoder's layout: one row per kept
arc g -> h, the root's row last), filled width by width by three steps (sibling,
incomplete, complete spans). Outside: the same three steps, each enumerating its
derivations exactly as inside, run in reverse order with ``outside=True``, in
probability space: ``mC``, ``mI``,
``mS`` hold each span's marginal (the probability that the tree's derivation uses
it); an item's mass goes to each of its derivations in proportion to
``exp(derivation - inside)`` (at most 1: no overflow), and every part of a
derivation collects that derivation's mass. This is the reverse pass of the inside
program (the marginals are the gradient of log Z with respect to the part scores);
one exp per derivation, no logs.

Time O(n^4) (about O(K^2 n^2) with K kept heads per word), space 6 (A + 1)(n + 1)
float64 for A kept arcs, plus the marginal arrays (the size of the score arrays).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from arboreal._interrupt import interruptible
from arboreal.inference.higher_order.memory import DECODER_LIMIT, check_chart_budget
from arboreal.inference.higher_order.parts import PartIndex, check_arc, dense_sizes, flat
from arboreal.inference.higher_order.third_order import _adjacency, _inner_siblings, _row

NEG = -np.inf

__all__ = ["grand_sibling_marginals"]


@njit(cache=True, inline="always")
def _lse(vals, k):
    """log sum exp of vals[:k] (-inf when empty or all -inf)."""
    top = NEG
    for i in range(k):
        if vals[i] > top:
            top = vals[i]
    if top == NEG:
        return NEG
    s = 0.0
    for i in range(k):
        s += np.exp(vals[i] - top)
    return top + np.log(s)


@njit(cache=True)
def _sibling_step(w, outside, n, single_root, pars, npar, arcid, C, S, mC, mS, buf):
    """Sibling spans S[h, a, b] with b - a = w (cell ``S[arcid[h, a], b]``): inside,
    their log-sum over the split r; ``outside``, their mass to the two facing complete
    spans of each split."""
    N = n + 1
    for a in range(1, N - w):
        b = a + w
        for j in range(npar[a]):
            h = pars[a, j]
            if a <= h <= b or (single_root and h == 0) or arcid[h, b] < 0:
                continue
            ra = arcid[h, a]
            rb = arcid[h, b]
            mass = mS[ra, b]
            top = S[ra, b]
            if outside and mass == 0.0:
                continue
            k = 0
            for r in range(a, b):
                v = C[ra, r] + C[rb, r + 1]
                if not outside:
                    buf[k] = v
                    k += 1
                elif v != NEG:
                    p = mass * np.exp(v - top)
                    mC[ra, r] += p
                    mC[rb, r + 1] += p
            if not outside:
                S[ra, b] = _lse(buf, k)


@njit(cache=True)
def _incomplete_step(w, outside, n, single_root, arc, slot, width, arcid, sib_off,
                     grand_off, gsib_off, sib, grand, gsib, use_sib, use_grand, use_gsib,
                     kids, nk, split, pars, npar, R, C, I, S, mC, mI, mS, mu_arc, mu_sib,
                     mu_grand, mu_gsib, buf, inner):
    """Incomplete spans I[g, h, b] with |b - h| = w: inside, arc + grand + the log-sum
    over b's inner sibling (none: b is h's first child on its side); ``outside``, the
    span's mass to its arc and grand parts, and each derivation's share to its sib and
    gsib parts and to the spans it is built from."""
    N = n + 1
    for h in range(N):
        if single_root and h == 0:
            continue
        W = width[h]
        s0 = slot[h, h]
        for side in range(2):
            d = 1 if side == 0 else -1
            b = h + d * w
            if b < 1 or b > n:
                continue
            sb = slot[h, b]
            if sb < 0:
                continue
            lo = min(h, b)
            hi = max(h, b)
            hb = arcid[h, b]
            first, start, stop = _inner_siblings(h, b, d, sb, W, arcid, slot, sib_off, sib,
                                                 use_sib, kids, nk, split, C, S, inner)
            for j in range(1 if h == 0 else npar[h]):
                a = -1
                if h > 0:
                    g = pars[h, j]
                    if lo <= g <= hi:
                        continue
                    a = arcid[g, h]
                row = R if h == 0 else a
                gs = use_gsib and a >= 0
                base = arc[h, b]
                if use_grand and a >= 0:
                    base += grand[grand_off[a] + sb]
                mass = mI[row, b]
                if outside:
                    if mass == 0.0:
                        continue
                    mu_arc[h, b] += mass
                    if use_grand and a >= 0:
                        mu_grand[grand_off[a] + sb] += mass
                top = I[row, b] - base
                # b is h's first child on this side
                v = first
                if gs:
                    v += gsib[gsib_off[a] + s0 * W + sb]
                k = 0
                if not outside:
                    buf[k] = v
                    k += 1
                elif v != NEG:
                    p = mass * np.exp(v - top)
                    mC[hb, h + d] += p
                    if use_sib:
                        mu_sib[sib_off[h] + s0 * W + sb] += p
                    if gs:
                        mu_gsib[gsib_off[a] + s0 * W + sb] += p
                # b's inner sibling is x
                i = start
                while i != stop:
                    x = kids[h, i]
                    i += d
                    sx = slot[h, x]
                    v = I[row, x] + inner[x]
                    if gs:
                        v += gsib[gsib_off[a] + sx * W + sb]
                    if not outside:
                        buf[k] = v
                        k += 1
                    elif v != NEG:
                        p = mass * np.exp(v - top)
                        mI[row, x] += p
                        if d == 1:
                            mS[arcid[h, x], b] += p
                        else:
                            mS[hb, x] += p
                        if use_sib:
                            mu_sib[sib_off[h] + sx * W + sb] += p
                        if gs:
                            mu_gsib[gsib_off[a] + sx * W + sb] += p
                if not outside:
                    I[row, b] = base + _lse(buf, k)


@njit(cache=True)
def _complete_step(w, outside, n, single_root, kids, nk, split, pars, npar, arcid, R, C, I,
                   mC, mI, buf):
    """Complete spans C[g, h, e] with |e - h| = w: inside, the log-sum over h's
    outermost child m up to e; ``outside``, the span's mass to I[g, h, m] and
    C[h, m, e] of each m."""
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
            for j in range(1 if h == 0 else npar[h]):
                g = 0 if h == 0 else pars[h, j]
                if h > 0 and lo <= g <= hi:
                    continue
                row = _row(arcid, R, g, h)
                mass = mC[row, e]
                top = C[row, e]
                if outside and mass == 0.0:
                    continue
                k = 0
                i = split[h] if d == 1 else split[h] - 1
                while 0 <= i < nk[h]:
                    m = kids[h, i]
                    if (m > e) if d == 1 else (m < e):
                        break
                    i += d
                    v = I[row, m] + C[arcid[h, m], e]
                    if not outside:
                        buf[k] = v
                        k += 1
                    elif v != NEG:
                        p = mass * np.exp(v - top)
                        mI[row, m] += p
                        mC[arcid[h, m], e] += p
                if not outside:
                    C[row, e] = _lse(buf, k)


@njit(cache=True, nogil=True)
def _io_model1(arc, slot, width, arcid, sib_off, grand_off, gsib_off, sib, grand, gsib,
               use_sib, use_grand, use_gsib, single_root, mu_arc, mu_sib, mu_grand, mu_gsib):
    n = arc.shape[0] - 1
    N = n + 1
    R = grand_off.shape[0]
    C = np.full((R + 1, N), NEG)
    I = np.full((R + 1, N), NEG)
    S = np.full((R + 1, N), NEG)
    mC = np.zeros((R + 1, N))
    mI = np.zeros((R + 1, N))
    mS = np.zeros((R + 1, N))
    for g in range(N):
        for h in range(1, N):
            if arcid[g, h] >= 0:
                C[arcid[g, h], h] = 0.0
    C[R, 0] = 0.0
    kids, nk, split, pars, npar = _adjacency(arcid)
    buf = np.empty(N + 1)
    inner = np.empty(N)
    for w in range(1, n + 1):   # inside, narrow spans first
        _sibling_step(w, False, n, single_root, pars, npar, arcid, C, S, mC, mS, buf)
        _incomplete_step(w, False, n, single_root, arc, slot, width, arcid, sib_off,
                         grand_off, gsib_off, sib, grand, gsib, use_sib, use_grand, use_gsib,
                         kids, nk, split, pars, npar, R, C, I, S, mC, mI, mS, mu_arc, mu_sib,
                         mu_grand, mu_gsib, buf, inner)
        _complete_step(w, False, n, single_root, kids, nk, split, pars, npar, arcid, R, C, I,
                       mC, mI, buf)
    # the whole sentence: the root's one child (single root) or the root's complete span
    if single_root:
        for m in range(1, N):
            buf[m] = NEG
            if slot[0, m] < 0:
                continue
            a = arcid[0, m]
            v = arc[0, m] + C[a, 1] + C[a, n]
            if use_sib:
                v += sib[sib_off[0] + slot[0, 0] * width[0] + slot[0, m]]
            buf[m] = v
        logz = _lse(buf[1:], n)
        if logz == NEG:
            return logz
        for m in range(1, N):
            if buf[m] == NEG:
                continue
            p = np.exp(buf[m] - logz)
            a = arcid[0, m]
            mu_arc[0, m] += p
            if use_sib:
                mu_sib[sib_off[0] + slot[0, 0] * width[0] + slot[0, m]] += p
            mC[a, 1] += p
            mC[a, n] += p
    else:
        logz = C[R, n]
        if logz == NEG:
            return logz
        mC[R, n] = 1.0
    for w in range(n, 0, -1):   # outside: the same steps in reverse order, wide spans first
        _complete_step(w, True, n, single_root, kids, nk, split, pars, npar, arcid, R, C, I,
                       mC, mI, buf)
        _incomplete_step(w, True, n, single_root, arc, slot, width, arcid, sib_off,
                         grand_off, gsib_off, sib, grand, gsib, use_sib, use_grand, use_gsib,
                         kids, nk, split, pars, npar, R, C, I, S, mC, mI, mS, mu_arc, mu_sib,
                         mu_grand, mu_gsib, buf, inner)
        _sibling_step(w, True, n, single_root, pars, npar, arcid, C, S, mC, mS, buf)
    return logz


def grand_sibling_marginals(arc: np.ndarray, sib: np.ndarray | None = None,
                            grand: np.ndarray | None = None, gsib: np.ndarray | None = None,
                            *, single_root: bool = True, allowed: np.ndarray | None = None,
                            index: PartIndex | None = None,
                            memory_budget: float | None = DECODER_LIMIT) -> tuple:
    """log Z and the marginal of every part over projective trees, under arc + sib +
    grand + gsib scores (shapes and ``index=`` as for
    :func:`~arboreal.inference.higher_order.grand_sibling_decode`).

    Returns ``(logz, mu)``: ``mu["arc"]`` (n+1, n+1) the arc marginals (each word's
    column sums to 1), and for each given part kind its marginals in the layout of its
    scores (dense tensors in, dense tensors out; flat compact arrays with ``index=``).
    A marginal is the derivative of log Z with respect to that part's score. O(n^4)
    time (about O(K^2 n^2) pruned). ValueError if no projective tree uses only the
    allowed arcs; ``MemoryBudgetError`` instead of allocating over ``memory_budget``.
    """
    arc = check_arc(arc)
    n = arc.shape[0] - 1
    dense = index is None
    if dense:
        dense_sizes(n, arc, sib=sib, grand=grand, gsib=gsib)
        index = PartIndex.dense(n, allowed)
    s, us = flat(sib, index.n_sib, "sib")
    g, ug = flat(grand, index.n_grand, "grand")
    gs, ugs = flat(gsib, index.n_gsib, "gsib")
    # the inside and outside charts: twice the decoder's float charts
    check_chart_budget("model1", n, 2 * (index.grand_off.shape[0] + 1), memory_budget)
    mu_arc = np.zeros_like(arc)
    out = {k: np.zeros(t.size if used else 1) for k, t, used in
           (("sib", s, us), ("grand", g, ug), ("gsib", gs, ugs))}
    logz = interruptible(_io_model1, arc, index.slot, index.width, index.arcid,
                         index.sib_off, index.grand_off, index.gsib_off, s, g, gs, us, ug,
                         ugs, single_root, mu_arc, out["sib"], out["grand"], out["gsib"],
                         work=float(n + 1) ** 3)
    if n > 0 and logz == NEG:
        raise ValueError("no projective tree uses only the allowed arcs")
    mu = {"arc": mu_arc}
    for k, t in (("sib", sib), ("grand", grand), ("gsib", gsib)):
        if t is not None:
            mu[k] = out[k].reshape(np.shape(t)) if dense else out[k]
    return float(logz), mu
