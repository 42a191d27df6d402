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



class PartsTreeLoss(torch.autograd.Function):
    """loss = sum over the batch of ``log Z - score(gold tree)`` under arc and
    second-order part scores (Koo et al. 2007's log-likelihood with the parts of
    :class:`~arboreal.inference.potentials.Potentials`), whose gradient is the structure's
    part marginals minus the gold tree's parts.

    arc (B, N+1, N+1) tensor; sib, grand (B, N+1, N+1, N+1) tensors or None; heads
    (B, N+1) int array (-1 in padding; projective trees); lengths (B,). Each sentence's
    arcs are first pruned by its first-order marginals (``structure.prune``, the gold tree
    kept) unless ``prune`` is off. Returns a 0-d tensor (computed in float64). Time per
    sentence about O(K^2 n^2) pruned to K heads per word, O(n^4) unpruned.
    """

    @staticmethod
    def forward(ctx, arc: torch.Tensor, sib, grand, heads: np.ndarray, lengths: np.ndarray,
                structure: TreeStructure, prune: bool = True):
        from arboreal.inference.potentials import Potentials

        s = arc.detach().to(torch.float64).cpu().numpy()
        given = {k: t.detach().to(torch.float64).cpu().numpy()
                 for k, t in (("sib", sib), ("grand", grand)) if t is not None}
        heads = np.asarray(heads)
        lengths = np.asarray(lengths)
        mu1 = structure.marginals(s, lengths) if prune else None
        grad = np.zeros_like(s)
        grads = {k: np.zeros_like(v) for k, v in given.items()}
        total = 0.0
        for b, n in enumerate(lengths.tolist()):
            if n == 0:
                continue
            gold = heads[b, : n + 1]
            p = Potentials(np.ascontiguousarray(s[b, : n + 1, : n + 1]),
                           **{k: np.ascontiguousarray(v[b, : n + 1, : n + 1, : n + 1])
                              for k, v in given.items()})
            allowed = structure.prune(mu1[b, : n + 1, : n + 1], keep=gold) if prune else None
            logz, mu = structure.parts_log_partition_and_marginals(p, allowed)
            ind = p.indicators(gold)
            total += logz - p.tree_score(gold)
            grad[b, : n + 1, : n + 1] = mu.arc - ind.arc
            for k in given:
                grads[k][b, : n + 1, : n + 1, : n + 1] = getattr(mu, k) - getattr(ind, k)
        saved = [torch.from_numpy(grad).to(dtype=arc.dtype, device=arc.device)]
        for k, t in (("sib", sib), ("grand", grand)):
            if t is not None:
                saved.append(torch.from_numpy(grads[k]).to(dtype=t.dtype, device=t.device))
        ctx.kinds = tuple(t is not None for t in (sib, grand))
        ctx.save_for_backward(*saved)
        return arc.new_tensor(total)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        saved = list(ctx.saved_tensors)
        out = [saved.pop(0) * grad_output]
        for present in ctx.kinds:
            out.append(saved.pop(0) * grad_output if present else None)
        return (*out, None, None, None, None)


def parts_tree_loss(arc: torch.Tensor, parts: dict, heads: np.ndarray, lengths: np.ndarray,
                    structure: TreeStructure, prune: bool = True) -> torch.Tensor:
    """The summed second-order log-likelihood loss of a batch (:class:`PartsTreeLoss`);
    ``parts``: {"sib": tensor, "grand": tensor}, either may be absent."""
    return PartsTreeLoss.apply(arc, parts.get("sib"), parts.get("grand"), heads, lengths,
                               structure, prune)
