"""A tiny explicit arc-feature set with the FeatureSet kernel API, for exact learner tests.

Each arc (h, m) of sentence i fires K random feature ids (fixed per sentence), so
scores, expected counts and objectives can be recomputed by brute force.
"""
from __future__ import annotations

import numpy as np

from arboreal.learn import TrainingData
from arboreal.inference.structure import projective_or_not


class MockEncoded:
    def __init__(self, ids: np.ndarray):
        self.ids = ids  # (n+1, n+1, K) int64

    @property
    def n(self) -> int:
        return self.ids.shape[0] - 1


class MockFeatures:
    def __init__(self, dim: int):
        self.dim = dim

    @staticmethod
    def _valid(n):
        v = np.ones((n + 1, n + 1), dtype=bool)
        v[:, 0] = False
        np.fill_diagonal(v, False)
        return v

    def arc_scores(self, enc, w):
        s = w[enc.ids].sum(axis=-1)
        return np.where(self._valid(enc.n), s, 0.0)

    def accumulate(self, enc, coef, out, scale=1.0):
        c = np.where(self._valid(enc.n), coef, 0.0) * scale
        np.add.at(out, enc.ids, np.broadcast_to(c[..., None], enc.ids.shape))

    def accumulate_tree(self, enc, heads, out, scale=1.0):
        n = enc.n
        coef = np.zeros((n + 1, n + 1))
        coef[np.asarray(heads)[1:], np.arange(1, n + 1)] = 1.0
        self.accumulate(enc, coef, out, scale)

    def tree_features(self, enc, heads):
        out = np.zeros(self.dim)
        self.accumulate_tree(enc, heads, out)
        return out


def mock_data(lengths, dim=40, k=3, seed=0, projective=True, single_root=True, trees=None):
    """TrainingData over random arc features; gold trees drawn from ``trees(n)``."""
    rng = np.random.default_rng(seed)
    encs, heads = [], []
    for n in lengths:
        encs.append(MockEncoded(rng.integers(0, dim, size=(n + 1, n + 1, k))))
        cand = trees(n)
        heads.append(cand[rng.integers(len(cand))].copy())
    return TrainingData(features=MockFeatures(dim), encoded=encs, heads=heads,
                           structure=projective_or_not(projective, single_root))
