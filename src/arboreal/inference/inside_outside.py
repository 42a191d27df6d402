"""Projective partition function and arc marginals (inside-outside).

Method
------
Eisner's first-order chart over nodes 0..n (0 = root) with four items per
span [s, t], s < t:

* ``IR[s, t]`` incomplete, head s, modifier t:
  ``S[s, t] + lse_{s <= r < t} (CR[s, r] + CL[r+1, t])``
* ``IL[s, t]`` incomplete, head t, modifier s (never for s = 0):
  ``S[t, s] + (same sum)``
* ``CL[s, t]`` complete, head t: ``lse_{s <= r < t} (CL[s, r] + IL[r, t])``
* ``CR[s, t]`` complete, head s: ``lse_{s < r <= t} (IR[s, r] + CR[r, t])``

with ``CR[s, s] = CL[s, s] = 0`` and ``log Z = CR[0, n]``.  Multi-root:
the root is an ordinary head that can never be a modifier.  Single-root:
for s = 0 the inner sum keeps only r = 0, so the root takes exactly one
child m, covering 1..m leftwards (``CL[1, m]``) and m..n rightwards.

Layout and passes
-----------------
As in :func:`arboreal.inference.eisner._eisner_kernel`, the chart is
indexed [width, start * V + lane] with V (<= 8) length-sorted sentences as
lanes, so for one width and split point the loop over (start, lane) is one
contiguous run: every log-sum-exp over split points is two vectorised
passes over contiguous rows (a max, then the exps of the max-shifted terms
with a branch-free polynomial exp), and its overhead is shared by V
sentences.  Single-root: the chart runs over the words 1..n and the root
arc is added at the end, ``lse_m S[0, m] + CL[1, m] + CR[m, n]``.

The outside pass is the reverse mode of the inside pass in probability
space: the adjoint of an item is d log Z / d item, the expected number of
uses of the item, in [0, 1], so it is stored linearly without overflow;
item X = lse_k (A_k + C_k) passes ``adj(X) * exp(A_k + C_k - X)`` (<= 1,
reusing the stored inside values) to A_k and C_k, by decreasing width.  The
marginal of arc h -> m is the adjoint of its incomplete item.  Inside is in
log space with max-shifted sums of positive terms (no cancellation), so any
finite scores give finite results whatever their scale.

Cost: O(n^3) time (about n^3/2 terms inside and n^3/2 outside, one exp
each), O(V n^2) memory; one numba kernel over the batch, float64
throughout, work arrays allocated once per batch.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from arboreal.inference.matrix_tree import _FM, _exp_split

_NEG = -np.inf


@njit(cache=True)
def _bad_scores(S, n):
    for h in range(n + 1):
        for m in range(1, n + 1):
            if h != m:
                v = S[h, m]
                if v != v or v == np.inf:
                    return True
    return False


@njit(cache=True, fastmath=_FM)
def _lse_rows(A, C, cw, coff, k0, k1, V, cnt, mx, acc, bits, out):
    """out[i] = log sum_{k0 <= k < k1} exp(A[k, i] + C[cw - k, (k + coff) * V + i])
    for i < cnt.  Max-shifted, as two vectorised passes over contiguous rows
    per split point: one for the max, one that adds the exps of the shifted
    terms (the sum is of positive terms, so it may be reassociated).

    The exp is :func:`arboreal.inference.matrix_tree._exp_split` inlined into
    the sum (rel. error ~4e-16; arguments <= -708 flush to 0)."""
    scale = bits.view(np.float64)
    for i in range(cnt):
        mx[i] = _NEG
    for k in range(k0, k1):
        a = A[k]
        c = C[cw - k, (k + coff) * V:]
        for i in range(cnt):
            mx[i] = max(mx[i], a[i] + c[i])
    for i in range(cnt):
        acc[i] = 0.0
        if mx[i] == _NEG:
            mx[i] = 0.0  # every term is -inf: the sum is 0 and out -inf
    for k in range(k0, k1):
        a = A[k]
        c = C[cw - k, (k + coff) * V:]
        for i in range(cnt):
            x = (a[i] + c[i]) - mx[i]
            pp, bits[i] = _exp_split(max(x, -708.0))
            e = pp * scale[i]
            acc[i] += e if x > -708.0 else 0.0
    for i in range(cnt):
        out[i] = mx[i] + math.log(acc[i]) if acc[i] > 0.0 else _NEG


@njit(cache=True, fastmath=_FM)
def _adj_rows(A, C, GA, GC, X, G, cw, coff, k0, k1, V, cnt, xs, bits):
    """Reverse mode of ``_lse_rows`` in probability space: with p_k(i) =
    G[i] * exp(A[k, i] + C[.] - X[i]) (the share of term k in X[i], times
    X's adjoint), add p_k to the adjoints GA[k, i] and GC[cw - k, ...].
    Same fused exp as ``_lse_rows``."""
    scale = bits.view(np.float64)
    for i in range(cnt):
        xs[i] = X[i] if X[i] != _NEG else 0.0
    for k in range(k0, k1):
        a = A[k]
        j0 = (k + coff) * V
        c = C[cw - k, j0:]
        ga = GA[k]
        gc = GC[cw - k, j0:]
        for i in range(cnt):
            x = (a[i] + c[i]) - xs[i]
            pp, bits[i] = _exp_split(max(x, -708.0))
            e = pp * scale[i]
            p = G[i] * e if x > -708.0 else 0.0
            ga[i] += p
            gc[i] += p


@njit(cache=True)
def _io_batch(scores, lengths, single_root, want, logz, out, bad):
    """log Z (and marginals into ``out`` when ``want``) for every sentence.

    scores (B, N+1, N+1) float32/float64, lengths (B,), logz (B,) float64,
    out (B, N+1, N+1) zero-initialised by the caller, bad (B,) set for
    sentences with NaN / +inf scores.

    Layout (as in :func:`arboreal.inference.eisner._eisner_kernel`): chart
    nodes x = 0..P-1 stand for positions lo + x (lo = 1 for single root:
    the root arc is added at the end; lo = 0 otherwise); V sentences
    (sorted by length) run as lanes, item [width w, start x, lane l] at
    [w, x * V + l], so each split point of a width is one contiguous run of
    (P - w) * V numbers.  Lanes shorter than the chunk compute junk past
    their length that is never read (and gets zero adjoint).
    """
    B = scores.shape[0]
    N1 = scores.shape[1]
    V = 8
    # keep each work array <= 16 MiB, and use no more lanes than sentences (a single
    # sentence would otherwise pay for 7 lanes of junk)
    while V > 1 and (N1 * N1 * V * 8 > (1 << 24) or V >= 2 * B):
        V //= 2
    W = N1 * V
    CR = np.empty((N1, W))
    CL = np.empty((N1, W))
    IR = np.empty((N1, W))
    IL = np.empty((N1, W))
    IS = np.empty((N1, W))
    SR = np.zeros((N1, W))  # SR[w, x*V+l]: score of arc x -> x+w in lane l
    SL = np.zeros((N1, W))  # SL[w, x*V+l]: score of arc x+w -> x
    nG = N1 if want else 1
    gCR = np.empty((nG, W))
    gCL = np.empty((nG, W))
    gIR = np.empty((nG, W))
    gIL = np.empty((nG, W))
    gIS = np.empty((nG, W))
    mx = np.empty(W)
    acc = np.empty(W)
    bits = np.empty(W, dtype=np.int64)
    root = np.empty(N1)
    order = np.argsort(-lengths, kind="mergesort")
    lo = 1 if single_root else 0
    for c0 in range(0, B, V):
        nl = min(V, B - c0)
        P = 1
        for l in range(nl):
            b = order[c0 + l]
            if _bad_scores(scores[b], lengths[b]):
                bad[b] = True
            elif lengths[b] + 1 - lo > P:
                P = lengths[b] + 1 - lo
        for l in range(V):
            b = 0
            Pl = 0
            if l < nl:
                b = order[c0 + l]
                if not bad[b]:
                    Pl = lengths[b] + 1 - lo
            for w in range(1, P):
                for x in range(P - w):
                    j = x * V + l
                    if x + w < Pl:
                        SR[w, j] = scores[b, lo + x, lo + x + w]
                        SL[w, j] = scores[b, lo + x + w, lo + x]
                    else:
                        SR[w, j] = 0.0
                        SL[w, j] = 0.0
            if lo == 0:
                for w in range(1, P):
                    SL[w, l] = _NEG  # the root never takes a head
        for j in range(P * V):
            CR[0, j] = 0.0
            CL[0, j] = 0.0
        # ---- inside -------------------------------------------------------
        for w in range(1, P):
            cnt = (P - w) * V
            isw = IS[w]
            _lse_rows(CR, CL, w - 1, 1, 0, w, V, cnt, mx, acc, bits, isw)
            sr = SR[w]
            sl = SL[w]
            irw = IR[w]
            ilw = IL[w]
            for i in range(cnt):
                irw[i] = isw[i] + sr[i]
                ilw[i] = isw[i] + sl[i]
            _lse_rows(CL, IL, w, 0, 0, w, V, cnt, mx, acc, bits, CL[w])
            _lse_rows(IR, CR, w, 0, 1, w + 1, V, cnt, mx, acc, bits, CR[w])
        # ---- log Z per lane; seed the adjoints -----------------------------
        if want:
            for w in range(P):
                for j in range(P * V):
                    gCR[w, j] = 0.0
                    gCL[w, j] = 0.0
                    gIR[w, j] = 0.0
                    gIL[w, j] = 0.0
        for l in range(nl):
            b = order[c0 + l]
            n = lengths[b]
            if bad[b]:
                logz[b] = np.nan
                continue
            if n == 0:
                logz[b] = 0.0
                continue
            Pl = n + 1 - lo
            if single_root:
                # root -> word x+1 covering 0..x leftwards, x..Pl-1 rightwards
                m = _NEG
                for x in range(Pl):
                    v = scores[b, 0, x + 1] + CL[x, l] + CR[Pl - 1 - x, x * V + l]
                    root[x] = v
                    m = max(m, v)
                if m == _NEG:
                    z = _NEG
                else:
                    s = 0.0
                    for x in range(Pl):
                        s += math.exp(root[x] - m)
                    z = m + math.log(s)
            else:
                z = CR[Pl - 1, l]
            logz[b] = z
            if not want or z == _NEG:
                continue
            if single_root:
                for x in range(Pl):
                    p = min(math.exp(root[x] - z), 1.0)
                    out[b, 0, x + 1] = p
                    gCL[x, l] += p
                    gCR[Pl - 1 - x, x * V + l] += p
            else:
                gCR[Pl - 1, l] = 1.0
        if not want:
            continue
        # ---- outside: reverse mode, adjoints in probability space ---------
        for w in range(P - 1, 0, -1):
            cnt = (P - w) * V
            _adj_rows(IR, CR, gIR, gCR, CR[w], gCR[w], w, 0, 1, w + 1, V, cnt,
                      mx, bits)
            _adj_rows(CL, IL, gCL, gIL, CL[w], gCL[w], w, 0, 0, w, V, cnt,
                      mx, bits)
            gis = gIS[w]
            gir = gIR[w]
            gil = gIL[w]
            for i in range(cnt):
                gis[i] = gir[i] + gil[i]
            _adj_rows(CR, CL, gCR, gCL, IS[w], gis, w - 1, 1, 0, w, V, cnt,
                      mx, bits)
        for l in range(nl):
            b = order[c0 + l]
            n = lengths[b]
            if bad[b] or n == 0 or logz[b] == _NEG:
                continue
            Pl = n + 1 - lo
            for w in range(1, Pl):
                for x in range(Pl - w):
                    j = x * V + l
                    out[b, lo + x, lo + x + w] = min(gIR[w, j], 1.0)
                    if lo + x > 0:
                        out[b, lo + x + w, lo + x] = min(gIL[w, j], 1.0)
