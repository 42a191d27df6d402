"""Objectives on arc scores: a loss and its gradient with respect to the scores.

Every objective is a function ``objective(scores, heads, lengths, structure, **options)
-> (loss (B,), d_scores (B, N+1, N+1))`` over a padded batch of arc scores
``scores[b, h, m]`` (:mod:`arboreal.inference` convention), gold trees ``heads``
(B, N+1) (-1 in padding) and the :class:`~arboreal.inference.structure.TreeStructure`
the model decodes with. The gradient is what a scorer's ``backward`` takes: a learner
never touches charts, only these arrays (torch-struct's lesson: marginals are the
gradient of log Z).

=================  ===============================================  =====================
name               loss of one sentence                             d loss / d scores
=================  ===============================================  =====================
``crf``            log Z - s(gold)  (Koo et al. 2007, §4.1)         marginals - gold arcs
``hinge``          max_y [s(y) + cost x wrong(y)] - s(gold)         arcs(y*) - gold arcs
``perceptron``     max_y s(y) - s(gold)  (hinge with cost 0)        arcs(y*) - gold arcs
``head-selection`` sum_m -log softmax_h s(h, m)[gold head]          softmax_h - gold arcs
                   (Dozat & Manning 2017; no tree constraint)
=================  ===============================================  =====================

Padding, column 0 and the diagonal get zero gradient. Costs: O(n^3) per sentence for
``crf`` and the decoding objectives (O(n^2) with Chu-Liu-Edmonds), O(n^2) for
``head-selection``. The losses are finite for any finite scores (log space throughout).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from arboreal.inference.structure import TreeStructure

Objective = Callable[..., tuple[np.ndarray, np.ndarray]]


def _active(lengths: np.ndarray, n1: int) -> np.ndarray:
    """(B, N+1, N+1) bool: the arcs h -> m with h, m <= n_b, m >= 1, h != m."""
    idx = np.arange(n1)
    inside = idx[None, :] <= np.asarray(lengths)[:, None]
    mask = inside[:, :, None] & inside[:, None, :]
    mask[:, :, 0] = False
    mask[:, idx, idx] = False
    return mask


def crf(scores: np.ndarray, heads: np.ndarray, lengths: np.ndarray,
        structure: TreeStructure) -> tuple[np.ndarray, np.ndarray]:
    """Negative log-likelihood of the gold trees under P(y) ∝ exp(s(y)) over the
    structure's trees: loss log Z - s(gold), gradient marginals - gold indicators."""
    scores = np.asarray(scores, dtype=np.float64)
    logz, mu = structure.log_partition_and_marginals(scores, lengths)
    gold = structure.tree_scores(scores, heads)
    return np.asarray(logz) - gold, mu - structure.indicators(heads, scores.shape[1])


def hinge(scores: np.ndarray, heads: np.ndarray, lengths: np.ndarray,
          structure: TreeStructure, cost: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Structured hinge loss with cost-augmented decoding (``cost`` per wrong head):
    loss s(y*) + cost x wrong(y*) - s(gold) >= 0, subgradient arcs(y*) - gold arcs."""
    scores = np.asarray(scores, dtype=np.float64)
    pred = structure.decode_cost_augmented(scores, heads, cost, lengths)
    if pred.ndim == 1:
        pred = pred[None]
    wrong = ((pred[:, 1:] != heads[:, 1:]) & (heads[:, 1:] >= 0)).sum(axis=1)
    loss = structure.tree_scores(scores, pred) + cost * wrong - structure.tree_scores(scores, heads)
    n1 = scores.shape[1]
    return loss, structure.indicators(pred, n1) - structure.indicators(heads, n1)


def perceptron(scores: np.ndarray, heads: np.ndarray, lengths: np.ndarray,
               structure: TreeStructure) -> tuple[np.ndarray, np.ndarray]:
    """The perceptron's loss s(y*) - s(gold) (``hinge`` with cost 0)."""
    return hinge(scores, heads, lengths, structure, cost=0.0)


def head_selection(scores: np.ndarray, heads: np.ndarray, lengths: np.ndarray,
                   structure: TreeStructure | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each word's head as an independent softmax over the candidate heads (no tree
    constraint; Dozat & Manning 2017): loss sum_m -log p(gold head of m), gradient
    softmax - gold indicators."""
    scores = np.asarray(scores, dtype=np.float64)
    n1 = scores.shape[1]
    mask = _active(lengths, n1)
    masked = np.where(mask, scores, -np.inf)
    top = masked.max(axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(under="ignore"):
        e = np.where(mask, np.exp(masked - top), 0.0)
    z = e.sum(axis=1, keepdims=True)
    z = np.where(z > 0, z, 1.0)
    p = e / z
    gold = TreeStructure.indicators(heads, n1)
    logp = np.where(mask, masked - top - np.log(z), 0.0)
    loss = -(gold * logp).sum(axis=(1, 2))
    return loss, p - gold


#: objective name -> function (``arboreal train --objective NAME`` for scorers trained by
#: gradient; the linear learners name theirs in :mod:`arboreal.learn`)
OBJECTIVES: dict[str, Objective] = {
    "crf": crf,
    "hinge": hinge,
    "perceptron": perceptron,
    "head-selection": head_selection,
}


def get_objective(name: str) -> Objective:
    """The objective called ``name`` (ValueError naming the choices otherwise)."""
    try:
        return OBJECTIVES[name]
    except KeyError:
        raise ValueError(f"unknown objective {name!r}; choose from "
                         f"{', '.join(OBJECTIVES)}") from None
