"""Potentials: the part scores of one sentence, whatever scorer computed them.

A :class:`Potentials` holds arc scores and, optionally, second-order part scores in the
dense conventions of :mod:`arboreal.inference.higher_order` (words 1..n, 0 the root):

* ``arc`` (n+1, n+1): ``arc[h, m]``, the arc h -> m;
* ``sib`` (n+1, n+1, n+1) or None: ``sib[h, a, b]``, b a child of h and a the next child
  of h on the same side closer to h (``a = h``: b is h's closest child on that side);
* ``grand`` (n+1, n+1, n+1) or None: ``grand[g, h, m]``, the arcs g -> h -> m (h >= 1).

A tree's score is the sum of the scores of its parts (:func:`tree_parts` lists them).
The routines here are those of projective trees (the family
:class:`~arboreal.inference.structure.ProjectiveTrees` exposes them): the best tree
(:func:`decode_potentials`), log Z and the marginal of every part, its derivative
(:func:`potentials_marginals`); pruning by first-order marginals
(:func:`~arboreal.inference.higher_order.prune_arcs`, Koo & Collins 2010) turns the
O(n^4) programs with grandparents into about O(K^2 n^2) for K kept heads per word.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: the second-order part kinds a :class:`Potentials` may carry
PART_KINDS = ("sib", "grand")


@dataclass(frozen=True)
class Potentials:
    """The part scores of one sentence (module docstring): arc (n+1, n+1) float64, sib
    and grand (n+1, n+1, n+1) float64 or None."""

    arc: np.ndarray
    sib: np.ndarray | None = None
    grand: np.ndarray | None = None

    @property
    def kinds(self) -> tuple[str, ...]:
        """The second-order kinds present, in :data:`PART_KINDS` order."""
        return tuple(k for k in PART_KINDS if getattr(self, k) is not None)

    def tree_score(self, heads: np.ndarray) -> float:
        """The score of the tree ``heads`` (n+1,): the sum of its parts' scores. O(n)."""
        heads = np.asarray(heads, dtype=np.int64)
        m = np.arange(1, len(heads))
        total = float(self.arc[heads[1:], m].sum())
        sib, grand = tree_parts(heads)
        if self.sib is not None:
            total += float(self.sib[sib[:, 0], sib[:, 1], sib[:, 2]].sum())
        if self.grand is not None:
            total += float(self.grand[grand[:, 0], grand[:, 1], grand[:, 2]].sum())
        return total

    def indicators(self, heads: np.ndarray) -> "Potentials":
        """The parts of the tree ``heads`` as 0/1 arrays of this object's shapes (the
        gold side of a log-likelihood's gradient). O(n^3) for the dense arrays."""
        heads = np.asarray(heads, dtype=np.int64)
        N = len(heads)
        arc = np.zeros((N, N))
        arc[heads[1:], np.arange(1, N)] = 1.0
        sib, grand = tree_parts(heads)
        out = {}
        for kind, rows in (("sib", sib), ("grand", grand)):
            if getattr(self, kind) is not None:
                t = np.zeros((N, N, N))
                t[rows[:, 0], rows[:, 1], rows[:, 2]] = 1.0
                out[kind] = t
        return Potentials(arc, **out)


def tree_parts(heads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The second-order parts of the tree ``heads`` (n+1,) (``heads[0] = -1``):
    (sib (n, 3) rows (h, a, b), one per word b; grand (k, 3) rows (g, h, m), one per word
    m whose head h is not the root). O(n log n)."""
    heads = np.asarray(heads, dtype=np.int64)
    m = np.arange(1, len(heads), dtype=np.int64)
    h = heads[1:]
    right = m > h
    # each head's children per side, from the closest outwards
    order = np.lexsort((np.abs(m - h), right, h))
    hs, rs, ms = h[order], right[order], m[order]
    first = np.ones(len(ms), dtype=bool)
    first[1:] = (hs[1:] != hs[:-1]) | (rs[1:] != rs[:-1])
    inner = np.where(first, hs, np.concatenate([[0], ms[:-1]]))
    sib = np.stack([hs, inner, ms], axis=1) if len(ms) else np.zeros((0, 3), np.int64)
    below = h >= 1
    grand = np.stack([heads[h[below]], h[below], m[below]], axis=1) if below.any() \
        else np.zeros((0, 3), np.int64)
    return sib, grand


def decode_potentials(p: Potentials, single_root: bool = True,
                      allowed: np.ndarray | None = None) -> np.ndarray:
    """The best projective tree under ``p`` (heads (n+1,) int64), using only the arcs
    ``allowed`` ((n+1, n+1) bool, None: all): Eisner's O(n^3) for arcs alone,
    McDonald & Pereira's O(n^3) with siblings, Koo & Collins's O(n^4) programs with
    grandparents (about O(K^2 n^2) pruned). ValueError if no projective tree uses only
    allowed arcs."""
    from arboreal.inference.higher_order import (grand_sibling_decode, grandparent_decode,
                                                 sibling_decode)

    if p.grand is None:
        return sibling_decode(p.arc, p.sib, single_root=single_root, allowed=allowed)
    if p.sib is None:
        return grandparent_decode(p.arc, p.grand, single_root=single_root, allowed=allowed)
    return grand_sibling_decode(p.arc, p.sib, p.grand, single_root=single_root,
                                allowed=allowed)


def potentials_marginals(p: Potentials, single_root: bool = True,
                         allowed: np.ndarray | None = None) -> tuple[float, Potentials]:
    """(log Z over the projective trees that use only ``allowed`` arcs, the marginal of
    every part of ``p`` as a :class:`Potentials` of the same shapes): the marginals are
    the gradient of log Z with respect to the scores. Inside-outside over Koo & Collins's
    Model 1 spans (:func:`~arboreal.inference.higher_order.marginals.grand_sibling_marginals`):
    O(n^4), about O(K^2 n^2) with K kept heads per word."""
    from arboreal.inference.higher_order.marginals import grand_sibling_marginals

    logz, mu = grand_sibling_marginals(p.arc, p.sib, p.grand, single_root=single_root,
                                       allowed=allowed, memory_budget=None)
    return logz, Potentials(mu["arc"], mu.get("sib"), mu.get("grand"))
