"""Jointly labeled log-linear (CRF) training through the labeled partition function.

Model (Koo et al. 2007, §3.4): a labeled tree scores ``sum_m s(h_m, m, l_m)`` with

    s(h, m, l) = w . f(h, m) + v . g(h, m, l),

f the unlabeled arc features (:class:`~arboreal.features.FeatureSet`), g the label
features (:class:`~arboreal.features.labels.LabelFeatures`). Objective (minimised):

    L(w, v) = C * sum_i [log Z(x_i) - s(x_i, y_i, labels_i)] + 0.5 (||w||^2 + ||v||^2),

with Z summing over trees *and* labels: the labeled partition function of
:func:`arboreal.inference.log_partition_and_marginals` (``labeled=True``), which
reduces the labels of each arc by logsumexp and runs the unlabeled Matrix-Tree or
inside-outside computation (projective / non-projective, single- / multi-root). The
gradient is expected minus observed counts: the arc marginals
``mu[h, m] = sum_l mu[h, m, l]`` go to ``FeatureSet.accumulate_dense`` (w) and the
labeled marginals to ``LabelFeatures.accumulate`` (v).

The weight vector this learner returns (and passes to ``on_epoch``) is the
concatenation ``[w (features.dim), v (label_features.dim)]``.

Data: ``TrainingData.extra`` must hold ``"label_features"`` (a LabelFeatures) and
``"labels"`` (one int array (n+1,) of gold label indices per sentence, index 0 = -1).

Decoding (exact for first-order labeled trees): each arc takes its best label, then
the first-order decoder runs on ``w . f(h, m) + max_l v . g(h, m, l)``
(:func:`decode_labeled`).
"""
from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np

from arboreal.features.labels import constrain_root_arcs
from arboreal.inference.structure import TreeStructure
from arboreal.learn import TrainingData, require_arc_factored
from arboreal.learn.loglinear import (AdagradLearner, LbfgsLearner, LogLinear, ScoredBuckets,
                                     accumulate_dense, length_buckets)
from arboreal.learn.trainer import run_epochs

__all__ = ["LabeledLogLinear", "LabeledBuckets", "labeled_objective", "decode_labeled"]

#: cap on B * (N+1)^2 * L float64 entries of one padded labeled bucket
_LABELED_ENTRIES = 1 << 22


class LabeledBuckets(ScoredBuckets):
    """:class:`ScoredBuckets` with gold labels and label features; buckets sized for L."""

    def __init__(self, data: TrainingData, growth: float = 1.15):
        super().__init__(data, growth)
        try:
            self.label_features = data.extra["label_features"]
            labels = data.extra["labels"]
        except KeyError as exc:
            raise ValueError(f"labeled training needs data.extra[{exc.args[0]!r}]") from None
        self.gold_labels = [np.asarray(lab, dtype=np.int64) for lab in labels]
        self.L = self.label_features.L
        cap = max(1 << 12, _LABELED_ENTRIES // self.L)
        self.buckets = [b for b in length_buckets(self.lengths, growth, cap)
                        if self.lengths[b].max() > 0]
        self.dim_w = self.features.dim
        self.dim = self.dim_w + self.label_features.dim

    def labeled_scores(self, bucket: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Padded labeled scores (B, N+1, N+1, L) float64 and lengths (B,)."""
        w, v = x[: self.dim_w], x[self.dim_w:]
        lengths = self.lengths[bucket]
        N = int(lengths.max())
        S = np.zeros((len(bucket), N + 1, N + 1, self.L))
        for b, i in enumerate(bucket):
            n = lengths[b]
            enc = self.encoded[i]
            S[b, : n + 1, : n + 1] = (self.features.arc_scores(enc, w)[:, :, None]
                                      + self.label_features.scores(enc, v))
        return S, lengths

    def gold_labeled_scores(self, bucket: np.ndarray, S: np.ndarray) -> np.ndarray:
        out = np.empty(len(bucket))
        for b, i in enumerate(bucket):
            h = self.heads[i]
            ms = np.arange(1, len(h))
            out[b] = S[b, h[1:], ms, self.gold_labels[i][1:]].sum()
        return out

    def accumulate_labeled(self, bucket: np.ndarray, mu: np.ndarray, out: np.ndarray,
                           scale: float) -> None:
        """``out += scale * E[F]`` for padded labeled marginals mu (B, N+1, N+1, L)."""
        ow, ov = out[: self.dim_w], out[self.dim_w:]
        arc = mu.sum(axis=-1)
        for b, i in enumerate(bucket):
            n = self.lengths[i]
            enc = self.encoded[i]
            accumulate_dense(self.features, enc, arc[b, : n + 1, : n + 1], ow, scale)
            self.label_features.accumulate(enc, mu[b, : n + 1, : n + 1], ov, scale)

    def observed_labeled(self, indices: Sequence[int] | None = None) -> np.ndarray:
        """Gold counts [F_w, F_v] (dim,) float64."""
        out = np.zeros(self.dim)
        ow, ov = out[: self.dim_w], out[self.dim_w:]
        idx = range(len(self.heads)) if indices is None else indices
        for i in idx:
            self.features.accumulate_tree(self.encoded[i], self.heads[i], ow, 1.0)
            self.label_features.accumulate_tree(self.encoded[i], self.heads[i],
                                                self.gold_labels[i], ov, 1.0)
        return out

    def active_labeled(self) -> np.ndarray:
        """Coordinates of [w, v] that some candidate labeled arc of the data fires."""
        w_active = self.active(self.dim_w)
        touched = np.zeros(self.label_features.dim)
        for i, enc in enumerate(self.encoded):
            n = self.lengths[i]
            if n == 0:
                continue
            ones = np.ones((n + 1, n + 1, self.L))
            self.label_features.accumulate(enc, ones, touched, 1.0)
        return np.concatenate([w_active, self.dim_w + np.flatnonzero(touched)])


def labeled_objective(lb: LabeledBuckets, x: np.ndarray, C: float,
                      structure: TreeStructure, observed: np.ndarray | None = None,
                      buckets: Sequence[np.ndarray] | None = None,
                      regularize: float = 1.0) -> tuple[float, np.ndarray]:
    """Value and gradient of C * sum_i -log P(y_i, labels_i | x_i) + regularize * 0.5 ||x||^2.

    x = [w, v] (lb.dim,). ``observed``: gold counts of exactly the sentences of
    ``buckets`` (computed when None). Cost per sentence: one arc scoring pass, the
    label tables O(n^2 L), one labeled partition/marginal pass O(n^3 + n^2 L) and
    the two accumulate passes.
    """
    buckets = lb.buckets if buckets is None else buckets
    if observed is None:
        observed = lb.observed_labeled(np.concatenate(list(buckets)) if buckets else [])
    grad = regularize * x - C * observed
    value = 0.5 * regularize * float(x @ x)
    for bucket in buckets:
        S, lengths = lb.labeled_scores(bucket, x)
        logz, mu = structure.log_partition_and_marginals(S, lengths, labeled=True)
        value += C * float((np.asarray(logz) - lb.gold_labeled_scores(bucket, S)).sum())
        lb.accumulate_labeled(bucket, mu, grad, C)
    return value, grad


def decode_labeled(features, label_features, enc, w: np.ndarray, v: np.ndarray,
                   structure: TreeStructure) -> tuple[np.ndarray, np.ndarray]:
    """Best labeled tree: (heads (n+1,), label indices (n+1,), index 0 = -1).

    argmax over labels per arc, then Eisner / Chu-Liu-Edmonds on
    ``w . f(h, m) + max_l v . g(h, m, l)``: exact for first-order labeled trees.
    """
    n = enc.n
    if n == 0:
        return np.array([-1], dtype=np.int64), np.array([-1], dtype=np.int64)
    G = constrain_root_arcs(label_features.scores(enc, v), label_features.labels)
    best = G.argmax(axis=-1)
    S = features.arc_scores(enc, w) + G.max(axis=-1)
    heads = np.asarray(structure.decode(S), dtype=np.int64)
    labels = np.full(n + 1, -1, dtype=np.int64)
    labels[1:] = best[heads[1:], np.arange(1, n + 1)]
    return heads, labels


class LabeledLogLinear(LogLinear):
    """Joint labeled CRF: the ``loglinear-labeled`` learner (options as :class:`LogLinear`).

    ``fit`` returns ``[w, v]`` (features.dim + label_features.dim,) float64.
    """

    name = "loglinear-labeled"
    labeled = True

    def start(self, data: TrainingData, seed: int = 0):
        """The epoch learner on ``data`` (L-BFGS or AdaGrad over ``[w, v]``)."""
        require_arc_factored(data, "loglinear-labeled")
        if self.laplacian:
            raise ValueError("the Laplacian penalty is for the unlabeled loglinear learner")
        lb = LabeledBuckets(data)
        active = lb.active_labeled()
        self.history = []
        self.pass_seconds: list[float] = []
        if self.optimizer == "lbfgs":
            return self._lbfgs_labeled(data, lb, active)
        return self._adagrad_labeled(data, lb, active)

    def fit(self, data: TrainingData, epochs: int,
            on_epoch: Callable[[int, np.ndarray], None] | None = None,
            seed: int = 0) -> np.ndarray:
        return run_epochs(self.start(data, seed), epochs, seed, on_epoch)

    def _lbfgs_labeled(self, data, lb, active) -> LbfgsLearner:
        observed = lb.observed_labeled()
        x = np.zeros(lb.dim)

        def fun(z):
            t = time.perf_counter()
            x[:] = 0.0
            x[active] = z
            value, grad = labeled_objective(lb, x, self.C, data.structure, observed)
            self.pass_seconds.append(time.perf_counter() - t)
            return value, grad[active]

        return LbfgsLearner(self, fun, active, lb.dim, self.name)

    def _adagrad_labeled(self, data, lb, active) -> AdagradLearner:
        N = len(lb.heads)
        cap = max(1 << 12, _LABELED_ENTRIES // lb.L)

        def batch_objective(x, idx):
            buckets = [idx[b] for b in length_buckets(lb.lengths[idx], max_entries=cap)]
            return labeled_objective(lb, x, self.C, data.structure,
                                     lb.observed_labeled(idx), buckets, regularize=len(idx) / N)

        return AdagradLearner(self, batch_objective, np.flatnonzero(lb.lengths > 0), active,
                              lb.dim, self.name)
