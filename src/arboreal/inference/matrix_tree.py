"""Non-projective partition function and arc marginals (Matrix-Tree Theorem).

Method
------
Koo et al. (2007) write log Z as log det of a Laplacian built from arc
weights ``a[h, m] = exp(s[h, m])`` (words 1..n) and root weights
``r[m] = exp(s[0, m])``: multi-root (§3.3) ``det(D - A)`` with
``D = diag(r + column sums of A)``; single-root (§3.1) ``sum_m r_m
L^(m,m)`` = det of the Laplacian with its first row replaced by ``r``.
Evaluated with LU / an inverse, both lose everything to cancellation once
the scores are spread out (with s ~ N(0, 1000^2) torch-struct, SuPar and a
column-shifted numpy Laplacian all return non-finite values).  We instead
evaluate the same determinants with a *subtraction-free* elimination:

1. Column shift (exact): each tree takes exactly one head per word, so
   scaling column m by ``exp(-c_m)`` scales Z by ``exp(-c_m)``.  Multi-root:
   ``c_m = max_h s[h, m]`` over all heads.  Single-root: ``c_m`` is the max
   over word heads only and the root row gets one global shift ``g``
   (Z is linear in the root weights because exactly one arc leaves the
   root).  Afterwards every weight is <= 1 and the maxima are 1.
2. GTH elimination (Grassmann-Taksar-Heyman).  M = D - A is a column
   diagonally dominant M-matrix, ``d_j = beta * r_j + sum_{i != j} a_ij``.
   Eliminating node k gives the Schur complement of the same form with
   ``a'_ij = a_ij + a_ik a_kj / d_k``, ``r'_j = r_j + r_k a_kj / d_k``, and
   the new pivot is recomputed as ``beta * r_j + sum`` of its column.  The
   multi-root determinant is the product of the pivots (beta = 1).  For a
   single root, ``Z_single = d/de Z_multi(e r)`` at e = 0: the pivots are
   then the root-less column sums (beta = 0), r is carried along passively
   and ``Z = prod_{k<n} d_k * r'_n``.  Both modes end the same way:
   ``log Z = sum_{k<n} log d_k + log r'_n + shifts``.
   Only additions, multiplications and divisions of non-negative numbers
   occur, so every intermediate has a relative error of O(n eps) — the
   result's relative accuracy does not depend on how peaked the scores are.
3. Marginals are the gradient of log Z.  We differentiate the elimination
   by hand (reverse mode).  The elimination is additive in ``a_ij``, so the
   backward pass only needs the LU factors (row k and column k at the time
   of step k, which the in-place elimination leaves untouched) and the
   pivots.  The one subtraction is the pivot's adjoint,
   ``d_k * dlogZ/dd_k = 1 - S_k`` where ``S_k`` (the probability mass routed
   through node k, <= n) is a sum of positive terms; it can be negative
   (d_k also feeds the recomputed pivots of later steps) and enters the
   adjoints of column k additively.  Its absolute error is ~ n eps in
   probability units, so marginals come out with an absolute error of
   ~ n^2 eps (measured: <= 1e-12 against mpmath and brute force, see
   tests/test_stability.py and tests/test_partition.py).  Everything else
   in the backward pass multiplies and adds non-negative numbers.
4. Underflow.  In linear float64 a weight below ~1e-308 of its column's
   maximum is lost; lost mass is at most n^2 * 2e-308 in absolute terms and
   harmless unless a pivot itself gets that small (a cycle of strong arcs
   whose exits are all very weak).  A sentence is therefore flagged when a
   pivot falls below ``_TINY`` = 1e-250 (the relative error from lost mass
   is then <= 1e-54) or an adjoint exceeds ``_HUGE`` = 1e280 or overflows
   (adjoints can grow far beyond 1 / pivot along chains of small pivots); flagged
   sentences are recomputed by the same elimination and backward pass in
   log space (log-add-exp updates).  The adjoints of arc and root weights
   are non-negative (derivatives of a polynomial with positive
   coefficients), so they are kept as logs too; the pivot adjoint
   ``1 - S_k`` is computed with expm1 and added with a signed log-add-exp,
   clamped at 0.  Forbidden arcs (-inf) can make a pivot exactly 0 (e.g. a
   word that only the root may head, single-root); the log-space path then
   pivots symmetrically to a node with a non-zero pivot (the linear path
   simply flags the sentence).
   That path is exact for any score range but about 25x slower per
   sentence (scalar exp/log1p per update); it runs only for very peaked
   scores (measured on random N(0, s^2) scores, n = 40: no sentence at
   s <= 100, a third of them at s = 1000).

Cost
----
Forward n^3/3 multiply-adds, backward 2 n^3/3 (one fused pass over the
adjoint matrix per step), n^2 exponentials (a vectorisable inline exp with
Cody-Waite reduction and a degree-13 polynomial, <= 2 ulp), O(n^2) memory.
Layout: the sentences of a batch are sorted by length and processed in
groups of L = 32 ("lanes") with the lane index innermost, W[i, j*L + l],
so every inner loop is a contiguous SIMD loop over 32 sentences (shorter
sentences are padded with inert nodes); with one sentence per loop the
rows are too short (~n/2 on average) for SIMD to pay off.
Log-space fallback: the same counts of log-add-exp operations.
All sentences of a batch are processed by one numba kernel; the work arrays
are allocated once per batch.  Computation is float64 whatever the input
dtype.  ``fastmath`` allows only reassociation and FMA contraction, which
is harmless here: every reassociated sum adds non-negative terms.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

_TINY = 1e-250
_HUGE = 1e280
_FM = {"reassoc", "contract"}

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_MAGIC = 6755399441055744.0


_C = [1.0 / math.factorial(k) for k in range(14)]
_C0, _C1, _C2, _C3, _C4, _C5, _C6, _C7, _C8, _C9, _C10, _C11, _C12, _C13 = _C


@njit(inline="always", fastmath=_FM)
def _exp_split(x):
    """exp(x) for -708 <= x <= 0 as ``(p, e)``: exp(x) = p * 2^k where ``e`` holds
    the int64 bit pattern of the float64 2^k (the caller views it as float64).

    Branch-free so that the loops it is inlined into vectorise: Cody-Waite
    reduction x = k ln2 + t, |t| <= ln2/2, a degree-13 Taylor polynomial for
    exp(t) (truncation < 5e-18) in Estrin's scheme (short dependency chains),
    and 2^k assembled in the exponent bits.  Max relative error measured
    against numpy: 4.4e-16.  Shared by this module and inside-outside.
    """
    # round to nearest by the 1.5 * 2^52 trick (floor() blocks vectorisation)
    k = (x * _LOG2E + _MAGIC) - _MAGIC
    t = (x - k * _LN2_HI) - k * _LN2_LO
    t2 = t * t
    t4 = t2 * t2
    q0 = (_C0 + _C1 * t) + (_C2 + _C3 * t) * t2
    q1 = (_C4 + _C5 * t) + (_C6 + _C7 * t) * t2
    q2 = (_C8 + _C9 * t) + (_C10 + _C11 * t) * t2
    q3 = _C12 + _C13 * t
    p = (q0 + q1 * t4) + (q2 + q3 * t4) * (t4 * t4)
    return p, (np.int64(k) + 1023) << 52


@njit(cache=True, fastmath=_FM)
def _exp_row(x, out, bits, n):
    """out[:n] = exp(x[:n]) for x <= 0 (values <= -708 flush to 0), by
    :func:`_exp_split`; ``bits`` (int64, >= n) is scratch for the 2^k factors."""
    scale = bits.view(np.float64)
    for j in range(n):
        p, bits[j] = _exp_split(max(x[j], -708.0))
        v = p * scale[j]
        out[j] = v if x[j] > -708.0 else 0.0


@njit(cache=True)
def _lae(x, y):
    """log(exp(x) + exp(y)) without overflow; -inf stays -inf."""
    if x < y:
        x, y = y, x
    if y == -np.inf:
        return x
    return x + math.log1p(math.exp(y - x))


@njit(cache=True)
def _lae_signed(x, y, sgn):
    """log(exp(x) + sgn * exp(y)), clamped to -inf when the sum is <= 0."""
    if sgn > 0.0:
        return _lae(x, y)
    if y == -np.inf:
        return x
    if y >= x:
        return -np.inf
    return x + math.log1p(-math.exp(y - x))


@njit(cache=True)
def _shifts(S, n, single_root, c):
    """Column shifts c[1..n] (and the root shift for single-root, returned).

    Returns (total shift, ok) where ok is False when a NaN or +inf score
    lies in the active region.
    """
    ok = True
    for m in range(1, n + 1):
        c[m] = -np.inf
    h0 = 1 if single_root else 0
    for h in range(h0, n + 1):
        for m in range(1, n + 1):
            v = S[h, m]
            if h != m:
                if v > c[m]:
                    c[m] = v
                if not (v < np.inf):  # NaN or +inf
                    ok = False
    total = 0.0
    for m in range(1, n + 1):
        if c[m] == -np.inf:
            c[m] = 0.0  # column without any allowed head: Z = 0, pivot 0
        total += c[m]
    g = 0.0
    if single_root:
        g = -np.inf
        for m in range(1, n + 1):
            v = S[0, m]
            if not (v < np.inf):
                ok = False
            v = v - c[m]
            if v > g:
                g = v
        if g == -np.inf:
            g = 0.0
        total += g
    c[0] = g
    return total, ok


@njit(cache=True, fastmath=_FM)
def _lean_shifts(S, n, single_root, c):
    """Column shifts as in ``_shifts``, in vectorisable loops.  Returns
    (total shift, ok); ok is False when a NaN or +inf score is present."""
    for m in range(1, n + 1):
        c[m] = -np.inf
    nans = 0.0
    for h in range(n + 1):
        Sh = S[h]
        for m in range(1, n + 1):
            v = Sh[m]
            nans += 1.0 if (v != v and h != m) else 0.0
            v = v if (h != m and (h > 0 or not single_root)) else -np.inf
            c[m] = max(c[m], v)
    total = 0.0
    ok = nans == 0.0
    for m in range(1, n + 1):
        if c[m] == np.inf:
            ok = False
        if c[m] == -np.inf:
            c[m] = 0.0
        total += c[m]
    g = 0.0
    if single_root:
        g = -np.inf
        S0 = S[0]
        for m in range(1, n + 1):
            g = max(g, S0[m] - c[m])
        if g == np.inf:
            ok = False
        if g == -np.inf or g != g:
            g = 0.0
        total += g
    c[0] = g
    return total, ok


@njit(cache=True, fastmath=_FM)
def _lanes(scores, lengths, idx, nn, single_root, want, W, A0, G, cs, shift, beta,
           xbuf, bits, f, d, inv, acc, dbar, v, logz, ok, huge, out):
    """Linear-space GTH elimination (and its backward pass when ``want``) for
    ``L = len(idx)`` sentences at once, the sentence index innermost so that
    every inner loop is a contiguous vector loop over the lanes.

    Node layout per lane: sentence words padded at the *front* to ``nn``
    nodes; a pad node has no arcs, root weight 1 and its own pivot 1, so it
    changes nothing.  Rows 0..nn-1 of ``W[i, j*L + l]`` hold the word arcs,
    row nn the root weights (the root is a row that is updated like every
    other row, never eliminated).  ``ok[l]`` is cleared when lane l needs
    the log-space path.
    """
    L = idx.shape[0]
    n = nn
    Lu = np.uint64(L)
    nLu = np.uint64(n) * Lu
    f2 = np.empty(L)
    acc2 = np.empty(L)
    # ---- weights -------------------------------------------------------
    for l in range(L):
        b = idx[l]
        nb = lengths[b]
        p = n - nb
        shift[l], ok[l] = _lean_shifts(scores[b], nb, single_root, cs[l])
        for k in range(n):
            beta[k, l] = 1.0 if (k < p or not single_root) else 0.0
    # row by row (one row of every lane stays in L1), then exp the row;
    # pad rows / columns: no arcs (-inf); pad root weights 1 (0)
    xr = xbuf[0]
    for i in range(n + 1):
        for l in range(L):
            b = idx[l]
            p = n - lengths[b]
            lu = np.uint64(l)
            if i < p:
                for j in range(np.uint64(n)):
                    xr[j * Lu + lu] = -np.inf
                continue
            hi = 0 if i == n else i - p + 1   # scores row of node i
            Sr = scores[b, hi]
            c = cs[l]
            c0 = c[0] if i == n else 0.0
            pad = 0.0 if i == n else -np.inf
            for j in range(np.uint64(p)):
                xr[j * Lu + lu] = pad
            for j in range(np.uint64(p), np.uint64(n)):
                mj = j - np.uint64(p) + np.uint64(1)
                xr[j * Lu + lu] = Sr[mj] - c[mj] - c0
            if i < n:
                xr[i * L + l] = -np.inf
        _exp_row(xr, W[i], bits, n * L)
        if want:
            Wi = W[i]
            Ai = A0[i]
            for q in range(np.uint64(n) * Lu):
                Ai[q] = Wi[q]
    # ---- forward elimination --------------------------------------------
    for l in range(L):
        logz[l] = 0.0
    for k in range(n - 1):
        kb = np.uint64(k) * Lu
        for l in range(Lu):
            d[l] = beta[k, l] * W[n, kb + l]
        for i in range(k + 1, n):
            for l in range(Lu):
                d[l] += W[i, kb + l]
        for l in range(L):
            # an entry that overflowed reaches its column's pivot: reject inf/NaN
            # here too, or a log-Z-only call (no backward check) returns +inf
            if not (_TINY <= d[l] <= _HUGE):
                ok[l] = False
                d[l] = 1.0
            inv[l] = 1.0 / d[l]
            logz[l] += math.log(d[l])
        # rank-1 update, two rows at a time (row k is read once per pair)
        i = k + 1
        while i <= n:
            i2 = i + 1 if i < n else i  # a lone last row is paired with itself...
            for l in range(Lu):
                f[l] = W[i, kb + l] * inv[l]
                f2[l] = W[i2, kb + l] * inv[l] if i2 != i else 0.0  # ...adding 0
            for j in range(np.uint64(k + 1), np.uint64(n)):
                jb = j * Lu
                for l in range(Lu):
                    w = W[k, jb + l]
                    W[i, jb + l] += f[l] * w
                    W[i2, jb + l] += f2[l] * w
            for r in range(i, i2 + 1):
                if r < n:
                    rb = np.uint64(r) * Lu
                    for l in range(Lu):
                        W[r, rb + l] = 0.0
            i += 2
        for l in range(Lu):
            G[k, nLu + l] = d[l]  # spare column nn of G keeps d_k
    lb = np.uint64(n - 1) * Lu
    for l in range(L):
        last = W[n, lb + l]
        if not (_TINY <= last <= _HUGE):
            ok[l] = False
            last = 1.0
        logz[l] += math.log(last)
        inv[l] = 1.0 / last
    if not want:
        return
    # ---- backward pass: G[i, j*L+l] = dlogZ/da_ij (row nn: root) ---------
    for i in range(n):
        ib = np.uint64(i) * Lu
        for l in range(Lu):
            G[i, ib + l] = 0.0
    for l in range(Lu):
        G[n, lb + l] = inv[l]
    for k in range(n - 2, -1, -1):
        kb = np.uint64(k) * Lu
        for l in range(Lu):
            inv[l] = 1.0 / G[k, nLu + l]
        for q in range(np.uint64(k + 1) * Lu, np.uint64(n) * Lu):
            v[q] = 0.0
        i = k + 1
        while i <= n:  # two rows at a time, as in the forward pass
            i2 = i + 1 if i < n else i
            for l in range(Lu):
                f[l] = W[i, kb + l]
                f2[l] = W[i2, kb + l] if i2 != i else 0.0
                acc[l] = 0.0
                acc2[l] = 0.0
            for j in range(np.uint64(k + 1), np.uint64(n)):
                jb = j * Lu
                for l in range(Lu):
                    w = W[k, jb + l]
                    g = G[i, jb + l]
                    g2 = G[i2, jb + l]
                    acc[l] += g * w
                    acc2[l] += g2 * w
                    v[jb + l] += f[l] * g + f2[l] * g2
            for l in range(Lu):
                G[i2, kb + l] = acc2[l] * inv[l]
                G[i, kb + l] = acc[l] * inv[l]  # u_i / d_k, dbar added below
            i += 2
        for l in range(Lu):
            acc[l] = 0.0
        for j in range(np.uint64(k + 1), np.uint64(n)):
            jb = j * Lu
            for l in range(Lu):
                acc[l] += v[jb + l] * W[k, jb + l]
                G[k, jb + l] = v[jb + l] * inv[l]
        for l in range(Lu):
            dbar[l] = (1.0 - acc[l] * inv[l]) * inv[l]
        for i in range(k + 1, n):
            for l in range(Lu):
                G[i, kb + l] += dbar[l]
        for l in range(Lu):
            G[n, kb + l] += beta[k, l] * dbar[l]
    # marginals A0 * G, row by row (rows of G and A0 stay in L1)
    for l in range(L):
        huge[l] = False
    for i in range(n + 1):
        Gi = G[i]
        Ai = A0[i]
        for l in range(L):
            if not ok[l]:
                continue
            b = idx[l]
            p = n - lengths[b]
            if i < p:
                continue
            h = 0 if i == n else i - p + 1
            oh = out[b, h]
            for j in range(np.uint64(p), np.uint64(n)):
                q = j * Lu + np.uint64(l)
                g = Gi[q]
                if not (g <= _HUGE):  # also catches NaN (overflow in the backward pass)
                    huge[l] = True
                oh[j - np.uint64(p) + np.uint64(1)] = max(Ai[q] * g, 0.0)
            if i < n:
                oh[h] = 0.0
    for l in range(L):
        if ok[l] and huge[l]:
            ok[l] = False
            o = out[idx[l]]
            nb = lengths[idx[l]]
            for h in range(nb + 1):
                for m in range(nb + 1):
                    o[h, m] = 0.0


@njit(cache=True)
def _log_pivot(LW, lr, beta, j, k, n):
    """log(beta * r_j + sum of column j over the remaining rows i >= k)."""
    m = lr[j] if beta > 0 else -np.inf
    for i in range(k, n):
        if i != j:
            m = max(m, LW[i, j])
    if m == -np.inf:
        return m
    s = math.exp(lr[j] - m) if beta > 0 else 0.0
    for i in range(k, n):
        if i != j:
            s += math.exp(LW[i, j] - m)
    return m + math.log(s)


@njit(cache=True)
def _logspace(S, n, beta, want, c, LW, LG, lr, lrbar, ldk, lu, lv, mu, mv, perm, out):
    """The same elimination and backward pass with every quantity kept as a
    log.  Exact for any score range.  Returns log Z without shifts.

    Symmetric pivoting: a zero pivot (possible with forbidden arcs, e.g. a
    word whose only allowed head is the root, in the single-root case) is
    swapped with a remaining node of non-zero pivot.  If Z > 0 one exists:
    the reduced graph still has a tree, and every node but the root's
    child has a word head in it.  ``perm[k]`` is the word eliminated k-th.
    """
    ninf = -np.inf
    for i in range(n):
        perm[i] = i
        for j in range(n):
            LW[i, j] = S[i + 1, j + 1] - c[j + 1] if i != j else ninf
    for j in range(n):
        lr[j] = S[0, j + 1] - c[j + 1] - c[0]

    logz = 0.0
    for k in range(n - 1):
        # pivot: log(beta * r_k + sum_i a_ik); on zero, pivot to another node
        ld = _log_pivot(LW, lr, beta, k, k, n)
        if ld == ninf:
            for p in range(k + 1, n):
                if _log_pivot(LW, lr, beta, p, k, n) > ninf:
                    for q in range(n):  # swap rows and columns k <-> p
                        LW[k, q], LW[p, q] = LW[p, q], LW[k, q]
                    for q in range(n):
                        LW[q, k], LW[q, p] = LW[q, p], LW[q, k]
                    lr[k], lr[p] = lr[p], lr[k]
                    perm[k], perm[p] = perm[p], perm[k]
                    ld = _log_pivot(LW, lr, beta, k, k, n)
                    break
            if ld == ninf:
                return ninf
        ldk[k] = ld
        lrk = lr[k] - ld
        for j in range(k + 1, n):
            lr[j] = _lae(lr[j], lrk + LW[k, j])
        for i in range(k + 1, n):
            lf = LW[i, k] - ld
            if lf > ninf:
                for j in range(k + 1, n):
                    if j != i:
                        LW[i, j] = _lae(LW[i, j], lf + LW[k, j])
        logz += ld
    if lr[n - 1] == ninf:
        return ninf
    logz += lr[n - 1]
    if not want:
        return logz

    for i in range(n):
        LG[i, i] = ninf
    lrbar[n - 1] = -lr[n - 1]
    for k in range(n - 2, -1, -1):
        ld = ldk[k]
        lrk = lr[k]
        # maxima for the two log-sum-exps (rows: u, columns: v)
        for j in range(k + 1, n):
            mv[j] = lrbar[j] + lrk
        for i in range(k + 1, n):
            aik = LW[i, k]
            mi = ninf
            for j in range(k + 1, n):
                g = LG[i, j]
                mi = max(mi, g + LW[k, j])
                mv[j] = max(mv[j], aik + g)
            mu[i] = mi
        for j in range(k + 1, n):
            lv[j] = math.exp(lrbar[j] + lrk - mv[j]) if mv[j] > ninf else 0.0
        for i in range(k + 1, n):
            aik = LW[i, k]
            mi = mu[i]
            si = 0.0
            for j in range(k + 1, n):
                g = LG[i, j]
                if mi > ninf:
                    si += math.exp(g + LW[k, j] - mi)
                if mv[j] > ninf:
                    lv[j] += math.exp(aik + g - mv[j])
            lu[i] = mi + math.log(si) if mi > ninf else ninf
        for j in range(k + 1, n):
            lv[j] = mv[j] + math.log(lv[j]) if mv[j] > ninf else ninf
        # S_k = sum_j v_j a_kj / d_k ; pivot adjoint (1 - S_k) / d_k
        ms = ninf
        mt = ninf
        for j in range(k + 1, n):
            ms = max(ms, lv[j] + LW[k, j])
            mt = max(mt, lrbar[j] + LW[k, j])
        ss = 0.0
        st = 0.0
        for j in range(k + 1, n):
            if ms > ninf:
                ss += math.exp(lv[j] + LW[k, j] - ms)
            if mt > ninf:
                st += math.exp(lrbar[j] + LW[k, j] - mt)
        lS = (ms + math.log(ss) if ms > ninf else ninf) - ld
        lt = (mt + math.log(st) if mt > ninf else ninf) - ld
        # d_k * dlogZ/dd_k = 1 - S_k has either sign (d_k also enters the
        # recomputed pivots of later steps); the total adjoints it feeds
        # are >= 0, so combine with a signed log-add and clamp at 0.
        om = -math.expm1(lS)
        sgn = 1.0 if om >= 0.0 else -1.0
        ldbar = (math.log(abs(om)) if om != 0.0 else ninf) - ld
        for i in range(k + 1, n):
            LG[i, k] = _lae_signed(lu[i] - ld, ldbar, sgn)
        for j in range(k + 1, n):
            LG[k, j] = lv[j] - ld
        lrbar[k] = _lae_signed(lt, ldbar, sgn) if beta > 0 else lt
    for i in range(n):
        h = perm[i] + 1
        for j in range(n):
            m = perm[j] + 1
            if i != j:
                out[h, m] = min(math.exp(S[h, m] - c[m] + LG[i, j]), 1.0)
            else:
                out[h, m] = 0.0
    for j in range(n):
        m = perm[j] + 1
        out[0, m] = min(math.exp(S[0, m] - c[m] - c[0] + lrbar[j]), 1.0)
    return logz


@njit(cache=True, nogil=True)
def _mtt_batch(scores, lengths, order, lanes, single_root, want, logz, out, bad, used_log,
               force_log=False):
    """log Z (and marginals into ``out`` when ``want``) for every sentence.

    scores (B, N+1, N+1) float32/float64; lengths (B,) int64; order (B,)
    sentence indices sorted by decreasing length (groups of ``lanes``
    consecutive entries are processed together); logz (B,) float64; out
    (B, N+1, N+1) zero-initialised by the caller; bad (B,) set for
    sentences with NaN/+inf scores; used_log (B,) set for sentences that
    needed the log-space path (all of them when ``force_log``, for tests).
    """
    B = scores.shape[0]
    N = scores.shape[1] - 1
    Nw = max(N, 1)
    L = lanes
    W = np.empty((Nw + 1, (Nw + 1) * L))
    A0 = np.empty((Nw + 1, (Nw + 1) * L)) if want else np.empty((1, 1))
    G = np.empty((Nw + 1, (Nw + 1) * L))
    xbuf = np.empty((1, (Nw + 1) * L))
    bits = np.empty((Nw + 1) * L, dtype=np.int64)
    v = np.empty((Nw + 1) * L)
    cs = np.empty((L, N + 1))
    shift = np.empty(L)
    beta = np.empty((Nw, L))
    f = np.empty(L)
    d = np.empty(L)
    inv = np.empty(L)
    acc = np.empty(L)
    dbar = np.empty(L)
    lz = np.empty(L)
    okl = np.empty(L, dtype=np.bool_)
    huge = np.empty(L, dtype=np.bool_)
    # log-space fallback buffers (one sentence at a time)
    S = np.empty((N + 1, N + 1))
    c = np.empty(N + 1)
    LW = np.empty((Nw, Nw))
    LG = np.empty((Nw, Nw))
    b1 = np.empty(Nw)
    b2 = np.empty(Nw)
    b3 = np.empty(Nw)
    b4 = np.empty(Nw)
    b5 = np.empty(Nw)
    b6 = np.empty(Nw)
    b7 = np.empty(Nw)
    perm = np.empty(Nw, dtype=np.int64)
    for g0 in range(0, B, L):
        idx = order[g0:min(g0 + L, B)]
        if idx.shape[0] < L:  # last group: fill with copies of a sentence
            full = np.empty(L, dtype=order.dtype)
            full[:idx.shape[0]] = idx
            full[idx.shape[0]:] = idx[0]
            idx = full
        n = lengths[idx[0]]
        if n == 0:  # then every remaining sentence is empty
            for l in range(idx.shape[0]):
                logz[idx[l]] = 0.0
            continue
        if force_log:
            okl[:] = False
        else:
            _lanes(scores, lengths, idx, n, single_root, want, W, A0, G, cs, shift, beta,
                   xbuf, bits, f, d, inv, acc, dbar, v, lz, okl, huge, out)
        for l in range(min(L, B - g0)):
            b = idx[l]
            if okl[l]:
                logz[b] = lz[l] + shift[l]
                continue
            nb = lengths[b]
            for h in range(nb + 1):
                for m in range(nb + 1):
                    S[h, m] = scores[b, h, m]
            sh, good = _shifts(S, nb, single_root, c)
            if not good:
                bad[b] = True
                logz[b] = np.nan
                continue
            used_log[b] = True
            ob = out[b]
            if nb == 1:
                logz[b] = S[0, 1]
                if want:
                    ob[0, 1] = 1.0
                continue
            beta1 = 0.0 if single_root else 1.0
            r = _logspace(S, nb, beta1, want, c, LW, LG, b1, b2, b3, b4, b5, b6, b7, perm, ob)
            logz[b] = r + sh if r > -np.inf else -np.inf
