"""Minimum-loss projective trees for projective training (Koo et al. 2007, footnote 4).

A projective learner cannot fit a tree with crossing arcs, so each non-projective
training tree is replaced by the projective tree with the fewest wrongly attached
words: Eisner's algorithm run on scores +1 for gold arcs and -1 for every other
arc maximises (#correct - #wrong) = 2 * #correct - n, i.e. minimises the loss.
Single-root gold trees stay single-root; multi-root gold trees may keep several
roots. Labels travel with their words (a re-attached word keeps its DEPREL).

Arrays in, arrays out (:func:`min_loss_projective`, :func:`projectivize_heads`);
:func:`projectivize` applies them to sentences (any objects with ``heads``,
``has_heads`` and ``with_tree``, such as :class:`arboreal.io.sentence.Sentence`).

Cost: one compiled projectivity pass over all trees
(:func:`arboreal.trees.properties.tree_properties`), then O(n^3) Eisner for the
non-projective trees only, batched in one call per root constraint.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from arboreal.inference.eisner import eisner
from arboreal.trees.properties import tree_properties

__all__ = ["min_loss_projective", "projectivize", "projectivize_heads"]


def min_loss_projective(heads_list: Sequence[np.ndarray],
                        single_root: Sequence[bool] | None = None) -> list[np.ndarray]:
    """Minimum-loss projective tree for each gold tree (batched Eisner).

    ``heads_list``: gold trees, each (n+1,) with heads[0] = -1 and all heads
    known. ``single_root[i]``: constrain the output to one root word; default:
    True exactly when the gold tree has one root word. Trees that are already
    projective (and inputs that are not trees) are returned unchanged (as copies). O(sum n^3) over the
    non-projective trees only.
    """
    out = [np.asarray(h).copy() for h in heads_list]
    if single_root is None:
        single_root = [int((h[1:] == 0).sum()) == 1 for h in out]
    props = tree_properties(out) if out else {"nonprojective": np.zeros(0, np.int64)}
    todo = [i for i in range(len(out)) if props["nonprojective"][i] > 0]
    for flag in (True, False):
        idx = [i for i in todo if bool(single_root[i]) == flag]
        if not idx:
            continue
        lengths = np.array([len(out[i]) - 1 for i in idx], dtype=np.int64)
        big = int(lengths.max())
        scores = np.full((len(idx), big + 1, big + 1), -1.0)
        for b, i in enumerate(idx):
            n = lengths[b]
            scores[b, out[i][1:], np.arange(1, n + 1)] = 1.0
        best = eisner(scores, single_root=flag, lengths=lengths)
        for b, i in enumerate(idx):
            new = np.asarray(best[b, : lengths[b] + 1]).astype(out[i].dtype)
            new[0] = -1
            out[i] = new
    return out


def projectivize_heads(heads: np.ndarray, single_root: bool | None = None) -> np.ndarray:
    """Minimum-loss projective tree for one gold tree ``heads`` (n+1,)."""
    flags = None if single_root is None else [single_root]
    return min_loss_projective([heads], flags)[0]


def projectivize(sentences: Sequence, single_root: bool | None = None
                 ) -> tuple[list, int, int]:
    """Replace each non-projective tree by a minimum-loss projective tree.

    Sentences with unknown heads are passed through untouched. Returns
    ``(sentences, n_changed_sentences, n_changed_words)``; every column other
    than HEAD is kept (DEPREL stays with its word).
    """
    sentences = list(sentences)
    known = [i for i, s in enumerate(sentences) if s.has_heads and len(s) > 0]
    flags = None if single_root is None else [single_root] * len(known)
    new_heads = min_loss_projective([sentences[i].heads for i in known], flags)
    out = list(sentences)
    n_sent = n_words = 0
    for i, h in zip(known, new_heads):
        diff = int((h[1:] != sentences[i].heads[1:]).sum())
        if diff:
            out[i] = sentences[i].with_tree(h)
            n_sent += 1
            n_words += diff
    return out, n_sent, n_words
