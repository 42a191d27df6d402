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

The outside pass gathers, for every item, the log-sum over its uses (the
equations above read backwards), processing spans by decreasing width; the
marginal of arc h -> m is ``exp(I + outside(I) - log Z)`` of its incomplete
item.  Everything is in log space with max-shifted log-sum-exp, so every
finite score gives finite results (no cancellation: all sums are of
positive terms), whatever the scale of the scores.

Cost: O(n^3) time (about n^3/2 terms inside and n^3 outside, one exp
each), O(n^2) memory (items are mirrored into the unused lower triangle so
that every sum over split points reads contiguous memory); one numba kernel over the batch, float64 throughout,
work arrays allocated once per batch.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from arboreal.inference.matrix_tree import _exp_row

_NEG = -np.inf


@njit(cache=True, fastmath={"reassoc", "contract"})
def _lse(buf, cnt, ebuf, bits):
    """log-sum-exp of buf[:cnt], max-shifted; the exps are vectorised and
    the sum (of positive terms) may be reassociated."""
    m = _NEG
    for i in range(cnt):
        m = max(m, buf[i])
    if m == _NEG:
        return _NEG
    for i in range(cnt):
        buf[i] -= m
    _exp_row(buf, ebuf, bits, cnt)
    s = 0.0
    for i in range(cnt):
        s += ebuf[i]
    return m + math.log(s)


@njit(cache=True)
def _bad_scores(S, n):
    for h in range(n + 1):
        for m in range(1, n + 1):
            if h != m:
                v = S[h, m]
                if v != v or v == np.inf:
                    return True
    return False


@njit(cache=True)
def _io_one(S, St, n, single_root, want, IR, IL, CR, CL, bIR, bIL, bCR, bCL, buf, ebuf,
            bits, out):
    """Inside (and outside when ``want``) for one sentence of n >= 1 words;
    writes marginals into ``out`` (n+1, n+1).  Returns log Z.

    Every chart item X[s, t] (s < t) is also stored mirrored at X[t, s], so
    that the sums over split points, which walk down a column of the
    chart, read a contiguous row instead.  ``St`` is ``S`` transposed.
    """
    for s in range(n + 1):
        for t in range(n + 1):
            IR[s, t] = _NEG
            IL[s, t] = _NEG
            CR[s, t] = _NEG
            CL[s, t] = _NEG
        CR[s, s] = 0.0
        CL[s, s] = 0.0
    for w in range(1, n + 1):
        for s in range(0, n - w + 1):
            t = s + w
            CLt = CL[t]
            if s == 0 and single_root:
                inner = CLt[1]
            else:
                CRs = CR[s]
                for r in range(s, t):
                    buf[r - s] = CRs[r] + CLt[r + 1]
                inner = _lse(buf, t - s, ebuf, bits)
            v = inner + S[s, t]
            IR[s, t] = v
            IR[t, s] = v
            if s > 0:
                v = inner + S[t, s]
                IL[s, t] = v
                IL[t, s] = v
            CLs = CL[s]
            ILt = IL[t]
            for r in range(s, t):
                buf[r - s] = CLs[r] + ILt[r]
            v = _lse(buf, t - s, ebuf, bits)
            CL[s, t] = v
            CL[t, s] = v
            IRs = IR[s]
            CRt = CR[t]
            for r in range(s + 1, t + 1):
                buf[r - s - 1] = IRs[r] + CRt[r]
            v = _lse(buf, t - s, ebuf, bits)
            CR[s, t] = v
            CR[t, s] = v
    logz = CR[0, n]
    if not want or logz == _NEG:
        return logz

    for s in range(n + 1):
        for t in range(n + 1):
            bIR[s, t] = _NEG
            bIL[s, t] = _NEG
            bCR[s, t] = _NEG
            bCL[s, t] = _NEG
    bCR[0, n] = 0.0
    bCR[n, 0] = 0.0
    for w in range(n, 0, -1):
        for s in range(0, n - w + 1):
            t = s + w
            # outside of CR[s, t]
            if not (s == 0 and t == n):
                cnt = 0
                bCRt = bCR[t]
                IRs = IR[s]
                for s2 in range(0, s):  # CR[s2, t] = IR[s2, s] + CR[s, t]
                    buf[cnt] = bCRt[s2] + IRs[s2]
                    cnt += 1
                if s > 0 or not single_root:  # left part of inner(s, t2), r = t
                    bIRs = bIR[s]
                    Ss = S[s]
                    CLn = CL[t + 1] if t < n else CL[t]
                    for t2 in range(t + 1, n + 1):
                        buf[cnt] = bIRs[t2] + Ss[t2] + CLn[t2]
                        cnt += 1
                    if s > 0:
                        bILs = bIL[s]
                        Sts = St[s]
                        for t2 in range(t + 1, n + 1):
                            buf[cnt] = bILs[t2] + Sts[t2] + CLn[t2]
                            cnt += 1
                v = _lse(buf, cnt, ebuf, bits)
                bCR[s, t] = v
                bCR[t, s] = v
            # outside of CL[s, t]
            cnt = 0
            bCLs = bCL[s]
            ILt = IL[t]
            for t2 in range(t + 1, n + 1):  # CL[s, t2] = CL[s, t] + IL[t, t2]
                buf[cnt] = bCLs[t2] + ILt[t2]
                cnt += 1
            # right part of inner(s2, t), split r = s - 1
            s_lo = 0
            if single_root and s != 1:
                s_lo = 1  # the root's inner sum only splits at r = 0
            if s > 0:
                bIRt = bIR[t]
                Stt = St[t]
                CRp = CR[s - 1]
                for s2 in range(s_lo, s):
                    buf[cnt] = bIRt[s2] + Stt[s2] + CRp[s2]
                    cnt += 1
                bILt = bIL[t]
                St_ = S[t]
                for s2 in range(max(s_lo, 1), s):
                    buf[cnt] = bILt[s2] + St_[s2] + CRp[s2]
                    cnt += 1
            v = _lse(buf, cnt, ebuf, bits)
            bCL[s, t] = v
            bCL[t, s] = v
            # outside of IR[s, t]: CR[s, t2] = IR[s, t] + CR[t, t2]
            cnt = 0
            bCRs = bCR[s]
            CRt = CR[t]
            for t2 in range(t, n + 1):
                buf[cnt] = bCRs[t2] + CRt[t2]
                cnt += 1
            v = _lse(buf, cnt, ebuf, bits)
            bIR[s, t] = v
            bIR[t, s] = v
            # outside of IL[s, t]: CL[s2, t] = CL[s2, s] + IL[s, t]
            if s > 0:
                cnt = 0
                bCLt = bCL[t]
                CLs = CL[s]
                for s2 in range(0, s + 1):
                    buf[cnt] = bCLt[s2] + CLs[s2]
                    cnt += 1
                v = _lse(buf, cnt, ebuf, bits)
                bIL[s, t] = v
                bIL[t, s] = v
    for s in range(n + 1):
        for t in range(s + 1, n + 1):
            out[s, t] = min(math.exp(IR[s, t] + bIR[s, t] - logz), 1.0)
            if s > 0:
                out[t, s] = min(math.exp(IL[s, t] + bIL[s, t] - logz), 1.0)
    return logz


@njit(cache=True)
def _io_batch(scores, lengths, single_root, want, logz, out, bad):
    """log Z (and marginals into ``out`` when ``want``) for every sentence.

    scores (B, N+1, N+1) float32/float64, lengths (B,), logz (B,) float64,
    out (B, N+1, N+1) zero-initialised by the caller, bad (B,) set for
    sentences with NaN / +inf scores.
    """
    B = scores.shape[0]
    N1 = scores.shape[1]
    S = np.empty((N1, N1))
    St = np.empty((N1, N1))
    IR = np.empty((N1, N1))
    IL = np.empty((N1, N1))
    CR = np.empty((N1, N1))
    CL = np.empty((N1, N1))
    bIR = np.empty((N1, N1))
    bIL = np.empty((N1, N1))
    bCR = np.empty((N1, N1))
    bCL = np.empty((N1, N1))
    buf = np.empty(2 * N1 + 2)
    ebuf = np.empty(2 * N1 + 2)
    bits = np.empty(2 * N1 + 2, dtype=np.int64)
    ob = np.zeros((N1, N1))
    for b in range(B):
        n = lengths[b]
        if n == 0:
            logz[b] = 0.0
            continue
        for h in range(n + 1):
            for m in range(n + 1):
                S[h, m] = scores[b, h, m]
                St[m, h] = S[h, m]
        if _bad_scores(S, n):
            bad[b] = True
            logz[b] = np.nan
            continue
        logz[b] = _io_one(S, St, n, single_root, want, IR, IL, CR, CL, bIR, bIL, bCR, bCL,
                          buf, ebuf, bits, ob)
        if want:
            for h in range(n + 1):
                for m in range(1, n + 1):
                    out[b, h, m] = ob[h, m]
                    ob[h, m] = 0.0
