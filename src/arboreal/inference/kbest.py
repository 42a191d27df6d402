"""The k best trees of one sentence, best first: one entry point for both tree families.

Projective: lazy k-best Eisner (Huang & Chiang 2005), O(n^3 + k n^2 log(n + k)).
Non-projective: Lawler's partition with constrained Chu-Liu-Edmonds (Camerini et al.
1980; Hall 2007), exact, O(k n^3). Both return distinct trees in score order.
"""
from __future__ import annotations

import numpy as np

from arboreal.inference.eisner import eisner_kbest
from arboreal.inference.mst import cle_kbest


def kbest(scores: np.ndarray, k: int, projective: bool = False, single_root: bool = True
          ) -> tuple[np.ndarray, np.ndarray]:
    """(heads (k', n+1) int64, tree_scores (k',) float64), k' <= k trees best first, for
    arc scores (n+1, n+1); k' < k only when fewer trees with a finite score exist.
    ValueError for NaN / +inf scores or when no tree has a finite score."""
    if projective:
        heads, tree_scores = eisner_kbest(scores, k, single_root=single_root)
        return np.asarray(heads), np.asarray(tree_scores)
    return cle_kbest(scores, k, single_root=single_root)
