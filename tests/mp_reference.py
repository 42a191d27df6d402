"""Arbitrary-precision references (mpmath) for log Z and arc marginals.

Independent of the library's algorithms:

* non-projective: Koo et al. (2007) literally — log det of the single-root
  matrix (§3.1, first row replaced by the root weights) or of L + diag(r)
  (§3.3), and the marginals from the inverse formulas of §3.2 / §3.3.
  These subtract, so the working precision must cover the cancellation.
  We do not guess it: the computation is repeated at a higher precision
  until two successive precisions agree to far below the test tolerances.
* projective: the inside algorithm over Eisner's chart in linear space
  (mpf has an unbounded exponent and only positive terms are added, so no
  cancellation), with the marginals obtained by mechanical reverse-mode
  differentiation of the recorded chart (a tape), not by hand-written
  outside equations.

Slow (pure Python): meant for a few sentences of up to ~40 words.
"""
from __future__ import annotations

import math

import numpy as np
from mpmath import mp


def _nonproj_once(S: np.ndarray, n: int, single_root: bool, want: bool):
    """(log Z as mpf, marginals as list of lists of mpf or None) at mp.dps."""
    # column shift c_m = max over all heads (exact: Z is multilinear in columns)
    c = [max(float(S[h, m]) for h in range(n + 1) if h != m) for m in range(1, n + 1)]
    a = [[mp.mpf(0)] * n for _ in range(n)]
    r = [mp.exp(mp.mpf(float(S[0, m + 1])) - c[m]) for m in range(n)]
    for h in range(n):
        for m in range(n):
            if h != m:
                a[h][m] = mp.exp(mp.mpf(float(S[h + 1, m + 1])) - c[m])
    Lhat = mp.matrix(n, n)
    for m in range(n):
        col = mp.fsum(a[h][m] for h in range(n))
        Lhat[m, m] = col + (0 if single_root else r[m])
        for h in range(n):
            if h != m:
                Lhat[h, m] = -a[h][m]
    if single_root:
        for m in range(n):
            Lhat[0, m] = r[m]
    det = mp.det(Lhat)
    if det <= 0:
        raise ArithmeticError("precision too low: non-positive determinant")
    logz = mp.log(det) + mp.fsum(c)
    if not want:
        return logz, None
    X = mp.inverse(Lhat)
    mu = [[mp.mpf(0)] * (n + 1) for _ in range(n + 1)]
    for m in range(n):
        mu[0][m + 1] = r[m] * (X[m, 0] if single_root else X[m, m])
        for h in range(n):
            if h == m:
                continue
            if single_root:
                val = (0 if m == 0 else a[h][m] * X[m, m]) - (0 if h == 0 else a[h][m] * X[m, h])
            else:
                val = a[h][m] * (X[m, m] - X[m, h])
            mu[h + 1][m + 1] = val
    return logz, mu


def nonprojective(S: np.ndarray, single_root: bool = True, want: bool = True,
                  dps: int = 50, max_dps: int = 20000) -> tuple[float, np.ndarray | None]:
    """log Z and marginals of one sentence (scores (n+1, n+1)), converged.

    Starts at ``dps`` digits and raises the precision until the results at
    two successive precisions (d and d + 30 + d/2) agree to 1e-25 (log Z,
    relative) and 1e-25 (marginals, absolute).
    """
    n = S.shape[0] - 1
    d = dps
    prev = None
    while d <= max_dps:
        with mp.workdps(d):
            try:
                cur = _nonproj_once(S, n, single_root, want)
            except (ArithmeticError, ZeroDivisionError):
                cur = None
            if cur is not None and prev is not None:
                lz_ok = abs(cur[0] - prev[0]) <= mp.mpf("1e-25") * max(1, abs(cur[0]))
                mu_ok = True
                if want:
                    mu_ok = all(abs(cur[1][i][j] - prev[1][i][j]) <= mp.mpf("1e-25")
                                for i in range(n + 1) for j in range(n + 1))
                if lz_ok and mu_ok:
                    mu = None
                    if want:
                        mu = np.array([[float(x) for x in row] for row in cur[1]])
                    return float(cur[0]), mu
            prev = cur
        d = d + 30 + d // 2
    raise RuntimeError("mpmath reference did not converge")


def digits_hint(S: np.ndarray, logz: float) -> int:
    """A starting precision from an estimate of log Z: the digits lost are
    about log10(n^n) plus the gap between the column maxima and log Z.
    Only a starting point: ``nonprojective`` checks convergence itself."""
    n = S.shape[0] - 1
    cmax = sum(max(S[h, m] for h in range(n + 1) if h != m) for m in range(1, n + 1))
    gap = max(0.0, cmax - logz) if math.isfinite(logz) else 0.0
    return int(40 + n * math.log10(max(n, 2)) + gap / math.log(10))


def projective(S: np.ndarray, single_root: bool = True, want: bool = True,
               dps: int = 40) -> tuple[float, np.ndarray | None]:
    """log Z and marginals over projective trees by inside + reverse mode.

    The chart is built as a tape of sum-of-product nodes; the adjoint of
    every arc weight gives its marginal: mu = a * dZ/da / Z.
    """
    n = S.shape[0] - 1
    with mp.workdps(dps):
        arcs = {}
        for h in range(n + 1):
            for m in range(1, n + 1):
                if h != m:
                    arcs[(h, m)] = mp.exp(mp.mpf(float(S[h, m])))
        # node: key -> (value, terms); a term is a tuple of keys (arcs are
        # keys ('a', h, m), chart items ('IR'|'IL'|'CR'|'CL', s, t))
        val = {}
        terms = {}
        order = []
        for (h, m), w in arcs.items():
            val[("a", h, m)] = w
        for s in range(n + 1):
            val[("CR", s, s)] = mp.mpf(1)
            val[("CL", s, s)] = mp.mpf(1)

        def make(key, tlist):
            terms[key] = tlist
            total = mp.mpf(0)
            for t in tlist:
                p = mp.mpf(1)
                for k in t:
                    p *= val[k]
                total += p
            val[key] = total
            order.append(key)

        for w in range(1, n + 1):
            for s in range(0, n - w + 1):
                t = s + w
                if s == 0 and single_root:
                    splits = [0]
                else:
                    splits = list(range(s, t))
                make(("IR", s, t), [(("a", s, t), ("CR", s, r), ("CL", r + 1, t))
                                    for r in splits])
                if s > 0:
                    make(("IL", s, t), [(("a", t, s), ("CR", s, r), ("CL", r + 1, t))
                                        for r in splits])
                make(("CL", s, t), [(("CL", s, r), ("IL", r, t)) for r in range(s, t)
                                    if ("IL", r, t) in val])
                make(("CR", s, t), [(("IR", s, r), ("CR", r, t)) for r in range(s + 1, t + 1)])
        Z = val[("CR", 0, n)]
        logz = float(mp.log(Z))
        if not want:
            return logz, None
        adj = {k: mp.mpf(0) for k in val}
        adj[("CR", 0, n)] = mp.mpf(1)
        for key in reversed(order):
            g = adj[key]
            if g == 0:
                continue
            for t in terms[key]:
                for i, k in enumerate(t):
                    p = g
                    for j, k2 in enumerate(t):
                        if j != i:
                            p *= val[k2]
                    adj[k] += p
        mu = np.zeros((n + 1, n + 1))
        for (h, m), w in arcs.items():
            mu[h, m] = float(w * adj[("a", h, m)] / Z)
        return logz, mu
