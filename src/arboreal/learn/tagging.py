"""Averaged perceptron for sequence tagging (one stage of the tagger), greedy or
structured.

Each epoch visits the sentences in an order shuffled by ``np.random.default_rng(seed)``.

*Greedy* (``order=0``, the tokenizer's and the default): each sentence is tagged left to
right with the current weights, the stage's own history being its *predictions* (as when
tagging new text) and the context columns the gold values (the stages are trained one
after another on gold context). A wrong token moves the weights of its features towards
the gold candidate and away from the predicted one; a token whose gold class is not
among its condition's candidates counts as an error and is skipped. One averaging step
per token.

*Structured* (``order`` 1 or 2, Collins 2002): each sentence is decoded whole by exact
Viterbi (:func:`arboreal.features.tokens.viterbi_sentence`) with the current weights;
when the predicted sequence differs from the gold one, the weights move by
Phi(gold) - Phi(predicted), the difference of the two sequences' feature counts (each
token's features read with that sequence's own previous classes as history), token by
token (:func:`structured_update`): a token whose class and history agree in both
sequences contributes nothing, one whose class agrees but not its history only its
history features. A token whose gold class is not among its condition's candidates is
skipped, as in greedy training. One averaging step per sentence.

Averaging is lazy (see :mod:`arboreal.learn.perceptron`): ``w - u / c``. The whole epoch
is one numba call: O(N * F * candidates) greedy, O(N * (F * K + H * K^2)) at order 1.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from arboreal.features.tokens import (MAX_CANDIDATES, N_HISTORY1_FEATURES, _class,
                                      best_candidate, condition, feature_count,
                                      feature_offset, history_feature, static_features,
                                      viterbi_buffers, viterbi_sentence)
from arboreal.learn.trainer import run_epochs


@njit(cache=True)
def _epoch(attrs, starts, order, ctx, cond_col, cand, cand_n, gold, gold_slot, w, u, c, bits):
    mask = np.uint64((1 << bits) - 1)
    F = feature_count(attrs, ctx)
    feats = np.empty(F, dtype=np.uint64)
    offsets = np.empty(F, dtype=np.int64)
    scores = np.empty(cand.shape[1], dtype=np.float64)
    errors = 0
    for s in order:
        a, b = starts[s], starts[s + 1]
        p1 = -1
        p2 = -1
        for i in range(a, b):
            c += 1.0
            uc, best, nf = best_candidate(attrs, a, b, i, ctx, cond_col, cand, cand_n, w,
                                          mask, p1, p2, feats, scores, offsets)
            pred = cand[uc, best] if best >= 0 else -1
            if pred != gold[i]:
                errors += 1
                g = gold_slot[i]
                if g >= 0 and best >= 0:
                    for t in range(nf):
                        o = offsets[t]
                        w[o + g] += 1.0
                        u[o + g] += c
                        w[o + best] -= 1.0
                        u[o + best] -= c
            p2, p1 = p1, pred
    return errors, c


@njit(cache=True)
def structured_update(attrs, a, b, ctx, cond_col, cand, cand_n, gold, gold_slot, slots, w, u, c,
                      mask, order, feats):
    """Add Phi(gold) - Phi(predicted) of the sentence ``a..b-1`` to ``w`` (and ``c``
    times it to ``u``, for averaging); ``slots[:b - a]`` the predicted slots (Viterbi's),
    ``gold`` / ``gold_slot`` the gold classes and their slots (-1: not a candidate, the
    token is skipped). Features as :func:`viterbi_sentence` scores them at ``order``.
    Returns the number of tokens whose predicted class is wrong."""
    errors = 0
    n_cond = cand.shape[0]
    nh = N_HISTORY1_FEATURES + (1 if order == 2 else 0)
    p1 = -1
    p2 = -1
    for i in range(a, b):
        cu = condition(ctx, i, cond_col, n_cond)
        ps = slots[i - a]
        pc = _class(cand, cand_n, cu, ps)
        if pc != gold[i]:
            errors += 1
        gs = gold_slot[i]
        g1 = gold[i - 1] if i > a else -1
        g2 = gold[i - 2] if i > a + 1 else -1
        if gs >= 0 and ps >= 0 and not (gs == ps and g1 == p1 and (order == 1 or g2 == p2)):
            if gs != ps:
                nf = static_features(attrs, a, b, i, ctx, feats)
                for t in range(nf):
                    o = feature_offset(feats[t], cu, mask)
                    w[o + gs] += 1.0
                    u[o + gs] += c
                    w[o + ps] -= 1.0
                    u[o + ps] -= c
            for h in range(nh):
                og = feature_offset(history_feature(h, attrs, a, b, i, g1, g2), cu, mask)
                op = feature_offset(history_feature(h, attrs, a, b, i, p1, p2), cu, mask)
                w[og + gs] += 1.0
                u[og + gs] += c
                w[op + ps] -= 1.0
                u[op + ps] -= c
        p2, p1 = p1, pc
    return errors


@njit(cache=True)
def _epoch_structured(attrs, starts, order, ctx, cond_col, cand, cand_n, gold, gold_slot, w, u,
                      c, bits, vorder):
    mask = np.uint64((1 << bits) - 1)
    n_max = 0
    for s in range(starts.shape[0] - 1):
        n_max = max(n_max, starts[s + 1] - starts[s])
    F = feature_count(attrs, ctx)
    feats, offsets, hoffs, scores, best, trans, delta, prev, conds, bp = viterbi_buffers(
        n_max, cand.shape[1], F, vorder)
    slots = np.empty(max(n_max, 1), dtype=np.int64)
    errors = 0
    for s in order:
        a, b = starts[s], starts[s + 1]
        viterbi_sentence(attrs, a, b, ctx, cond_col, cand, cand_n, w, mask, vorder, feats,
                         offsets, hoffs, scores, best, trans, delta, prev, conds, bp, slots)
        c += 1.0
        errors += structured_update(attrs, a, b, ctx, cond_col, cand, cand_n, gold, gold_slot,
                                    slots, w, u, c, mask, vorder, feats)
    return errors, c


class StageLearner:
    """One tagging stage's averaged perceptron as an
    :class:`~arboreal.learn.trainer.EpochLearner`: the items are the sentences, an
    epoch is one numba call over them in the trainer's order (greedy or structured,
    ``order``); the snapshot is the averaged weights ``w - u / steps`` (float32).
    Arguments as :func:`train_stage`. State: ``w``, ``u`` and the step counter."""

    def __init__(self, attrs: np.ndarray, starts: np.ndarray, ctx: np.ndarray, cond_col: int,
                 cand: np.ndarray, cand_n: np.ndarray, gold: np.ndarray, bits: int,
                 order: int = 0):
        if order not in (0, 1, 2):
            raise ValueError(f"order must be 0 (greedy), 1 or 2, not {order!r}")
        self.attrs, self.starts, self.ctx, self.cond_col = attrs, starts, ctx, cond_col
        self.cand, self.cand_n, self.gold, self.bits, self.order = cand, cand_n, gold, bits, \
            order
        size = (1 << bits) + MAX_CANDIDATES
        self.w = np.zeros(size, dtype=np.float32)
        self.u = np.zeros(size, dtype=np.float64)
        cond = (np.zeros(len(gold), dtype=np.int64) if cond_col < 0
                else np.maximum(ctx[:, cond_col], 0))
        # the slot of the gold class among its condition's candidates (-1: not a candidate)
        slot_of = np.full((cand.shape[0],
                           int(max(gold.max(initial=0), cand.max(initial=0))) + 1),
                          -1, dtype=np.int32)
        for uc in range(cand.shape[0]):
            slot_of[uc, cand[uc, : cand_n[uc]]] = np.arange(cand_n[uc], dtype=np.int32)
        self.gold_slot = slot_of[cond, gold].astype(np.int32)
        self.steps = 0.0
        self.size = len(starts) - 1

    def run_epoch(self, order: np.ndarray, epoch: int) -> dict:
        perm = order.astype(np.int64)
        if self.order == 0:
            errors, self.steps = _epoch(self.attrs, self.starts, perm, self.ctx, self.cond_col,
                                        self.cand, self.cand_n, self.gold, self.gold_slot,
                                        self.w, self.u, self.steps, self.bits)
        else:
            errors, self.steps = _epoch_structured(
                self.attrs, self.starts, perm, self.ctx, self.cond_col, self.cand, self.cand_n,
                self.gold, self.gold_slot, self.w, self.u, self.steps, self.bits, self.order)
        return {"errors": int(errors)}

    def snapshot(self) -> np.ndarray:
        return (self.w - self.u / max(self.steps, 1.0)).astype(np.float32)

    def restore(self, snapshot: np.ndarray) -> None:
        self.w[:] = snapshot
        self.u[:] = 0.0
        self.steps = 0.0

    def state(self) -> dict:
        return {"w": self.w, "u": self.u, "steps": self.steps}

    def load_state(self, state: dict) -> None:
        self.w[:] = state["w"]
        self.u[:] = state["u"]
        self.steps = float(state["steps"])


def train_stage(attrs: np.ndarray, starts: np.ndarray, ctx: np.ndarray, cond_col: int,
                cand: np.ndarray, cand_n: np.ndarray, gold: np.ndarray, bits: int,
                epochs: int, seed: int = 0, order: int = 0) -> np.ndarray:
    """Averaged weights (2**bits + MAX_CANDIDATES,) float32 of one tagging stage after
    ``epochs`` epochs (:class:`StageLearner` under the trainer, no dev data).

    attrs (N, N_ATTRS) uint64 attribute rows; starts (S+1,) int64 sentence offsets;
    ctx (N, C) int32 gold context classes; cand (U, B) int32 candidate classes of each
    condition value, cand_n (U,) their counts; gold (N,) int32 gold classes.
    ``order``: 0 greedy training, 1 or 2 structured training with Viterbi decoding of
    that order (see the module docstring).
    """
    learner = StageLearner(attrs, starts, ctx, cond_col, cand, cand_n, gold, bits, order)
    return run_epochs(learner, epochs, seed)
