"""Averaged structured perceptron (Collins 2002) with lazy averaging.

For each sentence (in an order shuffled per epoch by ``np.random.default_rng(seed)``):
decode with the current weights; if the predicted tree differs from the gold one,
add the features of the gold arcs that were missed and subtract those of the wrongly
predicted arcs. Only arcs on which the trees differ are touched, so an update costs
O(#wrong words * T).

Lazy averaging (Daume's trick): with a step counter c (one step per sentence) keep
``w`` and ``u = sum_steps c * delta``; the average of the weight vectors after every
step is ``w - u / c``. No per-step pass over the whole vector.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from arboreal._arrays import aligned_zeros
from arboreal.learn import EpochCallback, TrainingData
from arboreal.learn.trainer import run_epochs


def update_coef(n: int, gold: np.ndarray, pred: np.ndarray) -> np.ndarray | None:
    """coef (n+1, n+1): +1 on gold arcs, -1 on predicted arcs, for words with a wrong head.

    None when the trees agree.
    """
    wrong = np.nonzero(gold[1:] != pred[1:])[0] + 1
    if wrong.size == 0:
        return None
    coef = np.zeros((n + 1, n + 1))
    coef[gold[wrong], wrong] += 1.0
    coef[pred[wrong], wrong] -= 1.0
    return coef


def final_weights(w: np.ndarray, u: np.ndarray, c: float, average: bool) -> np.ndarray:
    """The weights to hand out after step c of lazy averaging: ``w - u / c``, or a copy
    of ``w`` when ``average`` is False. w, u (dim,) float32; O(dim)."""
    out = aligned_zeros(w.size, w.dtype)
    if not average:
        out[:] = w
        return out
    np.divide(u, np.float32(c), out=out)
    np.subtract(w, out, out=out)
    return out


def online_epoch(data: TrainingData, order: np.ndarray,
                 update: Callable[[int, np.ndarray, np.ndarray, float], object],
                 w: np.ndarray, u: np.ndarray, c: float, epoch: int) -> tuple[float, int]:
    """One epoch of the online loop: ``update(i, w, u, c)`` for each sentence i of
    ``order`` (wrapped by ``data.progress``), step counter c + 1 after each.
    Returns ``(c, number of updates)``: the counter after the epoch and how many steps
    changed the weights (an update returning a true value; the mistakes that
    error-weighted parameter mixing weighs shards by, :mod:`arboreal.learn.mixing`)."""
    updates = 0
    for i in data.wrap(order, epoch):
        if update(i, w, u, c):
            updates += 1
        c += 1.0
    return c, updates


class OnlineLearner:
    """The online loop with lazy averaging as an
    :class:`~arboreal.learn.trainer.EpochLearner`, shared by the perceptron and MIRA.

    ``update(i, w, u, c)`` must add step c's change delta for sentence i to ``w`` and
    ``c * delta`` to ``u`` (both (dim,) float32, in place); it may return whether it
    changed them. One epoch is :func:`online_epoch` over the trainer's order (which
    iterative parameter mixing, :mod:`arboreal.learn.mixing`, runs on each shard of the
    data); the snapshot is :func:`final_weights` (the average of the weight vectors after
    every step, or the last ones without ``average``). State: ``w``, ``u`` and the step
    counter ``c``.
    """

    def __init__(self, data: TrainingData,
                 update: Callable[[int, np.ndarray, np.ndarray, float], object],
                 average: bool):
        self.data = data
        self.update = update
        self.average = bool(average)
        self.size = len(data)
        # float32 is exact for the integer-valued perceptron weights and halves the
        # memory traffic of scoring
        self.w = aligned_zeros(data.features.dim)
        # float32 suffices for u: its rounding error divided by c stays << 1e-3
        self.u = np.zeros(data.features.dim, dtype=np.float32)
        self.c = 1.0

    def run_epoch(self, order: np.ndarray, epoch: int) -> None:
        self.c, _ = online_epoch(self.data, order, self.update, self.w, self.u, self.c, epoch)

    def snapshot(self) -> np.ndarray:
        return final_weights(self.w, self.u, self.c, self.average)

    def restore(self, snapshot: np.ndarray) -> None:
        """Go on from ``snapshot`` as the weights, the average starting afresh."""
        self.w[:] = snapshot
        self.u[:] = 0.0
        self.c = 1.0

    def state(self) -> dict:
        return {"w": self.w, "u": self.u, "c": self.c}

    def load_state(self, state: dict) -> None:
        self.w[:] = state["w"]
        self.u[:] = state["u"]
        self.c = float(state["c"])


def online_learner(learner, data: TrainingData) -> OnlineLearner:
    """``learner``'s (perceptron or MIRA) epoch learner on ``data``: its update step
    (``make_update``) and averaging."""
    return OnlineLearner(data, learner.make_update(data), learner.average)


class Perceptron:
    """Averaged perceptron. Options: ``average`` (default True)."""

    name = "perceptron"
    #: trains models with higher-order parts (TrainingData.parts) too
    trains_parts = True

    def __init__(self, average: bool = True):
        self.average = bool(average)

    def start(self, data: TrainingData, seed: int = 0) -> OnlineLearner:
        """The epoch learner training on ``data`` (:class:`OnlineLearner`; the order is
        the trainer's, from ``seed``)."""
        return online_learner(self, data)

    def fit(self, data: TrainingData, epochs: int, on_epoch: EpochCallback | None = None,
            seed: int = 0) -> np.ndarray:
        return run_epochs(self.start(data, seed), epochs, seed, on_epoch)

    def make_update(self, data: TrainingData, count: bool = False) -> Callable:
        """The step of :class:`OnlineLearner` for ``data``: ``update(i, w, u, c)``
        decodes sentence i and updates on the words with a wrong head; with ``count`` it
        returns whether there was one (parameter mixing counts the mistakes; plain
        training skips that comparison)."""
        fs = data.features
        fast_update = getattr(fs, "accumulate_head_diff", None)
        if not data.arc_factored:
            return _parts_update(data)

        def update(i: int, w: np.ndarray, u: np.ndarray, c: float) -> bool:
            enc = data.encoded[i]
            gold = data.heads[i]
            pred = data.decode(i, w)
            if fast_update is not None:   # one kernel call instead of coef + two accumulates
                fast_update(enc, gold, pred, w, u, c)
                return count and not np.array_equal(gold[1:], pred[1:])
            coef = update_coef(enc.n, gold, pred)
            if coef is None:
                return False
            fs.accumulate(enc, coef, w, 1.0)
            fs.accumulate(enc, coef, u, c)
            return True

        return update


def _parts_update(data: TrainingData) -> Callable:
    """The perceptron step for a model with higher-order parts: add phi(gold) -
    phi(pred) over the differing arcs and both trees' parts (shared parts cancel).
    O(features of those arcs and parts), never O(dim)."""

    def update(i: int, w: np.ndarray, u: np.ndarray, c: float) -> bool:
        gold = data.heads[i]
        pred = data.decode(i, w)
        if np.array_equal(gold[1:], pred[1:]):
            return False
        ids, delta = signed_ids(*data.tree_items(i, gold, [pred]))
        w[ids] += delta.astype(w.dtype)
        u[ids] += (c * delta).astype(u.dtype)
        return True

    return update


def signed_ids(offsets: np.ndarray, ids: np.ndarray, vals: np.ndarray, con_ptr: np.ndarray,
               con_item: np.ndarray, con_coef: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first constraint of :meth:`TrainingData.tree_items` as a sparse vector:
    (distinct feature ids, their nonzero coefficients). O(#ids log #ids)."""
    sign = np.zeros(offsets.size - 1)
    np.add.at(sign, con_item[con_ptr[0]:con_ptr[1]], con_coef[con_ptr[0]:con_ptr[1]])
    per_id = np.repeat(sign, np.diff(offsets)) * vals
    distinct, inverse = np.unique(ids, return_inverse=True)
    delta = np.bincount(inverse, weights=per_id, minlength=distinct.size)
    keep = delta != 0.0
    return distinct[keep], delta[keep]
