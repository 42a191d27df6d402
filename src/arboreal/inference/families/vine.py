"""Vine trees: projective trees without long arcs between words (Eisner & Smith 2005).

The family holds the projective trees in which every arc between two words spans at
most ``max_length`` positions (``|h - m| <= max_length``); arcs from the root may reach
any word. Eisner & Smith's "hard constraints on dependency length" make parsing
O(n max_length^2) with a dedicated chart; here every routine is the projective family's
(:class:`~arboreal.inference.structure.ProjectiveTrees`) on the arc scores with the
longer arcs forbidden (scores of -inf), O(n^3) per sentence like it, and exact for the
family: decoding, k-best, MBR, log Z and marginals all range over vine trees only. A
tree always exists (each word headed by its left neighbour, the first by the root).

Training a linear model over the family treats gold arcs longer than the bound as
unreachable: the trees the learner compares with gold are vine trees.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from arboreal.inference.structure import ProjectiveTrees, TreeStructure, register_family

#: default bound on an arc's span between words (no benchmark has chosen it)
DEFAULT_MAX_LENGTH = 20


@register_family
@dataclass(frozen=True)
class VineTrees(TreeStructure):
    """Projective trees whose arcs between words span at most ``max_length`` words."""

    max_length: int = DEFAULT_MAX_LENGTH

    name: ClassVar[str] = "vine"
    projective: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.max_length < 1:
            raise ValueError("vine trees need max_length >= 1")

    @property
    def _trees(self) -> ProjectiveTrees:
        return ProjectiveTrees(self.single_root)

    def allowed(self, n1: int) -> np.ndarray:
        """(n1, n1) bool: the arcs h -> m of the family (root arcs, and arcs between
        words at most ``max_length`` apart). O(n^2)."""
        h, m = np.ogrid[:n1, :n1]
        return (h == 0) | (np.abs(h - m) <= self.max_length)

    def restrict(self, scores: np.ndarray, labeled: bool = False) -> np.ndarray:
        """The scores with the family's forbidden arcs at -inf: (..., n+1, n+1), or
        with ``labeled`` (..., n+1, n+1, L); the input's float dtype (float64 for
        integers)."""
        scores = np.asarray(scores)
        if not np.issubdtype(scores.dtype, np.floating):
            scores = scores.astype(np.float64)
        keep = self.allowed(scores.shape[-2] if labeled else scores.shape[-1])
        return np.where(keep[:, :, None] if labeled else keep, scores,
                        np.array(-np.inf, dtype=scores.dtype))

    def decode(self, scores, lengths=None):
        return self._trees.decode(self.restrict(scores), lengths)

    def kbest(self, scores, k):
        return self._trees.kbest(self.restrict(scores), k)

    def log_partition_and_marginals(self, scores, lengths=None, labeled=False):
        return self._trees.log_partition_and_marginals(self.restrict(scores, labeled), lengths,
                                                       labeled)

    def log_partition(self, scores, lengths=None, labeled=False):
        return self._trees.log_partition(self.restrict(scores, labeled), lengths, labeled)
