"""Averaged perceptron for greedy sequence tagging (one stage of the tagger).

Each epoch visits the sentences in an order shuffled by ``np.random.default_rng(seed)``
and tags them left to right with the current weights, the stage's own history being its
*predictions* (as when tagging new text) and the context columns the gold values (the
stages are trained one after another on gold context). A wrong token moves the weights of
its features towards the gold candidate and away from the predicted one; a token whose
gold class is not among its condition's candidates counts as an error and is skipped.
Averaging is lazy (see :mod:`arboreal.learn.perceptron`): ``w - u / c`` with one step per
token. The whole epoch is one numba call: O(N * F * candidates).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from numba import njit

from arboreal.features.tokens import (MAX_CANDIDATES, N_BASE_FEATURES, N_CONTEXT_FEATURES,
                                      best_candidate)


@njit(cache=True)
def _epoch(attrs, starts, order, ctx, cond_col, cand, cand_n, gold, gold_slot, w, u, c, bits):
    mask = np.uint64((1 << bits) - 1)
    F = N_BASE_FEATURES + N_CONTEXT_FEATURES * ctx.shape[1]
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


def train_stage(attrs: np.ndarray, starts: np.ndarray, ctx: np.ndarray, cond_col: int,
                cand: np.ndarray, cand_n: np.ndarray, gold: np.ndarray, bits: int,
                epochs: int, seed: int = 0,
                on_epoch: Callable[[int, np.ndarray, int], bool] | None = None) -> np.ndarray:
    """Averaged weights (2**bits + MAX_CANDIDATES,) float32 of one tagging stage.

    attrs (N, N_ATTRS) uint64 attribute rows; starts (S+1,) int64 sentence offsets;
    ctx (N, C) int32 gold context classes; cand (U, B) int32 candidate classes of each
    condition value, cand_n (U,) their counts; gold (N,) int32 gold classes.
    ``on_epoch(epoch, averaged_weights, training_errors)`` is called after each epoch;
    returning True keeps those weights as the result (best so far), and when it is
    given, the weights it last kept are returned.
    """
    size = (1 << bits) + MAX_CANDIDATES
    w = np.zeros(size, dtype=np.float32)
    u = np.zeros(size, dtype=np.float64)
    cond = np.zeros(len(gold), dtype=np.int64) if cond_col < 0 else np.maximum(ctx[:, cond_col], 0)
    # the slot of the gold class among its condition's candidates (-1: not a candidate)
    slot_of = np.full((cand.shape[0], int(max(gold.max(initial=0), cand.max(initial=0))) + 1),
                      -1, dtype=np.int32)
    for uc in range(cand.shape[0]):
        slot_of[uc, cand[uc, : cand_n[uc]]] = np.arange(cand_n[uc], dtype=np.int32)
    gold_slot = slot_of[cond, gold].astype(np.int32)
    rng = np.random.default_rng(seed)
    steps = 0.0
    kept = None
    for epoch in range(1, epochs + 1):
        order = rng.permutation(len(starts) - 1).astype(np.int64)
        errors, steps = _epoch(attrs, starts, order, ctx, cond_col, cand, cand_n, gold,
                               gold_slot, w, u, steps, bits)
        avg = (w - u / max(steps, 1.0)).astype(np.float32)
        if on_epoch is None or on_epoch(epoch, avg, int(errors)):
            kept = avg
    return kept if kept is not None else avg
