"""Arc pruning with first-order marginals (Koo & Collins 2010; TurboParser).

Arc h -> m is kept when ``mu[h, m] >= threshold * max_h' mu[h', m]`` and h is
among the ``max_heads`` most likely heads of m. The arcs of the best projective
tree under ``log mu`` are always kept, so every pruned sentence still has a
projective tree. The higher-order decoders then skip every other arc, which turns
their O(n^4) into roughly O(K^2 n^2).
"""
from __future__ import annotations

import numpy as np

from arboreal.inference.higher_order.sibling import sibling_decode


def prune_arcs(marginals: np.ndarray, threshold: float = 1e-4, max_heads: int = 10,
               single_root: bool = True, keep: np.ndarray | None = None) -> np.ndarray:
    """Mask of the arcs to keep, from first-order arc marginals.

    marginals: (n+1, n+1) ``mu[h, m]`` (column 0 and the diagonal ignored).
    keep: optional heads (n+1,) whose arcs are kept whatever their marginal; by
    default the best projective tree under ``log mu`` (single- or multi-root as
    ``single_root``). Returns allowed (n+1, n+1) bool with column 0 and the
    diagonal False. O(n^2 log n) plus one O(n^3) first-order decode.
    """
    mu = np.array(marginals, dtype=np.float64)
    if mu.ndim != 2 or mu.shape[0] != mu.shape[1]:
        raise ValueError(f"marginals must have shape (n+1, n+1), got {mu.shape}")
    if max_heads < 1:
        raise ValueError("max_heads must be at least 1")
    N = mu.shape[0]
    n = N - 1
    mu[:, 0] = -1.0
    np.fill_diagonal(mu, -1.0)
    allowed = np.zeros((N, N), dtype=bool)
    if n == 0:
        return allowed
    best = mu[:, 1:].max(axis=0)
    order = np.argsort(-mu[:, 1:], axis=0, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(N)[:, None].repeat(n, axis=1), axis=0)
    allowed[:, 1:] = (mu[:, 1:] >= threshold * best[None, :]) & (rank < max_heads) \
        & (mu[:, 1:] >= 0.0)
    if keep is None:
        with np.errstate(divide="ignore"):
            logmu = np.log(np.clip(mu, 0.0, None))
        logmu = np.maximum(logmu, -1e4)   # finite: every tree stays reachable
        keep = sibling_decode(logmu, None, single_root=single_root)
    keep = np.asarray(keep)
    m = np.arange(1, N)
    allowed[keep[1:], m] = True
    allowed[:, 0] = False
    np.fill_diagonal(allowed, False)
    return allowed
