"""Tree objectives as torch losses: arboreal's exact inference inside autograd.

:class:`TreeLoss` is a ``torch.autograd.Function``: its forward runs an objective of
:mod:`arboreal.learn.objectives` on the arc scores (moved to numpy, float64), and its
backward hands back the objective's gradient, which for ``crf`` is arboreal's exact
marginals minus the gold arcs (Matrix-Tree Theorem or inside-outside, stable at any
score scale). So a neural scorer is trained by Koo et al.'s log-likelihood with neural
potentials, or by any other objective of the table, with no chart written in torch.
"""
from __future__ import annotations

import numpy as np
import torch

from arboreal.inference.structure import TreeStructure
from arboreal.learn.objectives import get_objective


class TreeLoss(torch.autograd.Function):
    """loss = sum over the batch of ``objective(scores, heads, lengths, structure)``.

    scores (B, N+1, N+1) tensor; heads (B, N+1) int array (-1 in padding); lengths (B,).
    Returns a 0-d tensor (the summed loss, float64 computed, in the scores' dtype).
    """

    @staticmethod
    def forward(ctx, scores: torch.Tensor, heads: np.ndarray, lengths: np.ndarray,
                structure: TreeStructure, objective: str = "crf", options: dict | None = None):
        s = scores.detach().to(torch.float64).cpu().numpy()
        loss, grad = get_objective(objective)(s, np.asarray(heads), np.asarray(lengths),
                                              structure, **(options or {}))
        ctx.save_for_backward(torch.from_numpy(np.ascontiguousarray(grad)).to(
            dtype=scores.dtype, device=scores.device))
        return scores.new_tensor(float(np.sum(loss)))

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        (grad,) = ctx.saved_tensors
        return grad * grad_output, None, None, None, None, None


def tree_loss(scores: torch.Tensor, heads: np.ndarray, lengths: np.ndarray,
              structure: TreeStructure, objective: str = "crf", **options) -> torch.Tensor:
    """The summed ``objective`` loss of a batch as a differentiable tensor."""
    return TreeLoss.apply(scores, heads, lengths, structure, objective, options or None)
