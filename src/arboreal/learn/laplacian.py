"""Laplacian regularization of word-pair weights (Wang, Cherry, Lizotte & Schuurmans 2006).

The penalty ``lambda/2 * theta' L theta`` with ``L = D - S`` the graph Laplacian of the
similarity graph S of word-pair features (:meth:`arboreal.features.FeatureSet.lexical_graph`:
nodes are the pair features of the gold arcs and of similar pairs, weights
``sqrt(sim(a, a') sim(b, b'))``). Since ``theta' L theta = 1/2 sum_ij S_ij (theta_i -
theta_j)^2``, it pulls the weights of similar pairs together; a similar pair never seen
in training gets a weight from its seen neighbours (at the optimum of a learner whose
data term ignores it, ``lambda sum_j S_uj theta_j / (1 + lambda D_uu)`` with the L2
term ``1/2 ||theta||^2``). Used by the ``local-margin`` and ``loglinear`` learners.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from arboreal.learn import TrainingData

#: the error of ``laplacian > 0`` without a similarity graph
LEXICON_NEEDED = "--laplacian needs a lexicon (arboreal train --lexicon LEX)"

__all__ = ["LEXICON_NEEDED", "LaplacianGraph", "lexical_graph"]


class LaplacianGraph:
    """The graph of the Laplacian regulariser over weight coordinates.

    feature_ids (K,) distinct weight indices; S (K, K) symmetric, nonnegative, zero
    diagonal (anything scipy.sparse accepts). Stored sorted by id: ``ids`` (K,),
    ``S`` csr, ``deg`` = S 1 (K,). L = diag(deg) - S acts on ``theta[ids]``.
    """

    def __init__(self, feature_ids: np.ndarray, S, dim: int | None = None):
        import scipy.sparse as sp

        ids = np.asarray(feature_ids, dtype=np.int64).ravel()
        S = sp.csr_matrix(S, dtype=np.float64)
        K = ids.size
        if S.shape != (K, K):
            raise ValueError(f"graph: S has shape {S.shape}, expected ({K}, {K})")
        order = np.argsort(ids, kind="stable")
        ids = ids[order]
        if K and (np.any(ids[1:] == ids[:-1]) or ids[0] < 0
                  or (dim is not None and ids[-1] >= dim)):
            raise ValueError("graph: feature ids must be distinct weight indices")
        S = S[order][:, order].tocsr()
        S.sum_duplicates()
        if S.nnz and (S.data.min() < 0 or abs(S - S.T).max() > 1e-12 * max(1.0, abs(S).max())
                      or np.any(S.diagonal() != 0)):
            raise ValueError("graph: S must be symmetric, nonnegative, with a zero diagonal")
        self.ids = ids
        self.S = S
        self.deg = np.asarray(S.sum(axis=1), dtype=np.float64).ravel()

    def __len__(self) -> int:
        return int(self.ids.size)

    def laplacian_times(self, theta_g: np.ndarray) -> np.ndarray:
        """L theta_g (K,) for theta_g = theta[ids] (K,). O(K + nnz(S))."""
        return self.deg * theta_g - self.S @ theta_g

    def quad(self, theta: np.ndarray) -> float:
        """theta' L theta for a full (dim,) theta. O(K + nnz(S))."""
        t = theta[self.ids]
        return float(t @ self.laplacian_times(t))

    def penalty(self, theta: np.ndarray, lam: float) -> tuple[float, np.ndarray]:
        """``lam/2 theta' L theta`` and its gradient on the graph's coordinates
        ``lam L theta[ids]`` (K,), for a full (dim,) theta. O(K + nnz(S))."""
        t = np.asarray(theta[self.ids], dtype=np.float64)
        lt = self.laplacian_times(t)
        return 0.5 * lam * float(t @ lt), lam * lt


def lexical_graph(data: TrainingData, graph=None) -> LaplacianGraph:
    """The Laplacian graph of ``data``: ``graph`` itself (a :class:`LaplacianGraph` or an
    ``(ids, S)`` pair), or ``data.features.lexical_graph(data.encoded, data.heads)``.
    ValueError :data:`LEXICON_NEEDED` when the feature set has none (or it raises
    ValueError)."""
    dim = data.features.dim
    if isinstance(graph, LaplacianGraph):
        return graph
    if graph is None:
        make = getattr(data.features, "lexical_graph", None)
        if make is None:
            raise ValueError(LEXICON_NEEDED)
        try:
            graph = make(data.encoded, data.heads)
        except ValueError as e:
            raise ValueError(LEXICON_NEEDED) from e
        if graph is None:
            raise ValueError(LEXICON_NEEDED)
    ids, S = graph
    return LaplacianGraph(ids, S, dim)


