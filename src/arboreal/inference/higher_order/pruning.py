"""Arc pruning with first-order marginals (Koo & Collins 2010; TurboParser).

Arc h -> m is kept when ``mu[h, m] >= threshold * max_h' mu[h', m]`` and h is
among the ``max_heads`` most likely heads of m. The arcs of the best projective
tree under ``log mu`` are always kept, so every pruned sentence still has a
projective tree. The higher-order decoders then skip every other arc, which turns
their O(n^4) into roughly O(K^2 n^2).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from arboreal.inference.higher_order.sibling import sibling_decode


def prune_arcs(marginals: np.ndarray, threshold: float = 1e-4, max_heads: int = 10,
               single_root: bool = True, keep: np.ndarray | None = None) -> np.ndarray:
    """Mask of the arcs to keep, from first-order arc marginals.

    marginals: (n+1, n+1) ``mu[h, m]`` (column 0 and the diagonal ignored).
    keep: optional heads (n+1,) whose arcs are kept whatever their marginal; by
    default the best projective tree under ``log mu`` (single- or multi-root as
    ``single_root``). Returns allowed (n+1, n+1) bool with column 0 and the
    diagonal False. O(n^2 K) plus, without ``keep``, one O(n^3) first-order decode.
    """
    mu = np.array(marginals, dtype=np.float64)
    if mu.ndim != 2 or mu.shape[0] != mu.shape[1]:
        raise ValueError(f"marginals must have shape (n+1, n+1), got {mu.shape}")
    if max_heads < 1:
        raise ValueError("max_heads must be at least 1")
    N = mu.shape[0]
    n = N - 1
    if n == 0:
        return np.zeros((N, N), dtype=bool)
    if keep is None:
        with np.errstate(divide="ignore"):
            logmu = np.log(np.clip(mu, 0.0, None))
        logmu = np.maximum(logmu, -1e4)   # finite: every tree stays reachable
        keep = sibling_decode(logmu, None, single_root=single_root)
    keep = np.asarray(keep, dtype=np.int64)
    if keep.shape != (N,):
        raise ValueError(f"keep must have shape ({N},), got {keep.shape}")
    return _prune(mu, float(threshold), int(max_heads), keep)


@njit(cache=True)
def _prune(mu, threshold, K, keep):
    N = mu.shape[0]
    allowed = np.zeros((N, N), dtype=np.bool_)
    top = np.empty(K, dtype=np.int64)
    for m in range(1, N):
        best = -1.0
        for h in range(N):
            if h != m and mu[h, m] > best:
                best = mu[h, m]
        # the K largest heads (ties: lower index first), above the ratio threshold
        nt = 0
        for h in range(N):
            if h == m:
                continue
            v = mu[h, m]
            if v < threshold * best or v < 0.0:
                continue
            if nt < K:
                pos = nt
                nt += 1
            elif v > mu[top[K - 1], m]:
                pos = K - 1
            else:
                continue
            while pos > 0 and mu[top[pos - 1], m] < v:
                top[pos] = top[pos - 1]
                pos -= 1
            top[pos] = h
        for i in range(nt):
            allowed[top[i], m] = True
        allowed[keep[m], m] = True
    return allowed
