"""The tree structure: every question a learner or a parser asks of arc scores.

A :class:`TreeStructure` is a *tree family* (the trees a model ranges over: projective
or not, or a family of its own) with a root rule (``single_root``: one word on the root,
or any number), and the exact routines over it, so that scorers, objectives and parsers
never pick a decoder themselves:

* ``decode``, ``decode_cost_augmented`` (the tree maximizing score + cost x wrong
  heads), ``kbest``, ``mbr`` (minimum Bayes risk);
* ``log_partition``, ``marginals``, ``log_partition_and_marginals``;
* ``tree_scores`` (the score of given trees) and ``indicators`` (their arcs as 0/1
  matrices), the gold side of every objective;
* for second-order parts (:class:`~arboreal.inference.potentials.Potentials`: arcs,
  siblings, grandparents), ``decode_parts``, ``parts_log_partition_and_marginals`` and
  ``prune`` (the arcs they may use, from first-order marginals): projective trees only.

Families are registered by name, the name ``arboreal train --decoder NAME`` takes and a
model file stores: ``eisner`` (:class:`ProjectiveTrees`: Eisner, inside-outside) and
``cle`` (:class:`NonProjectiveTrees`: Chu-Liu-Edmonds, the Matrix-Tree Theorem) here,
and every module of :mod:`arboreal.inference.families`, imported on the registry's first
use: a new family is one module there (a subclass decorated with
:func:`register_family`) plus its test. :func:`tree_structure` builds one by name,
:func:`family_names` lists them.

Every routine takes one sentence, scores (n+1, n+1), or a padded batch (B, N+1, N+1)
with ``lengths`` (B,), in the score convention of :mod:`arboreal.inference`. The
helpers :func:`length_buckets` and :func:`pad_batch` group and pad sentences of similar
length so that a batch wastes little work on padding.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from arboreal._registry import import_package_modules

#: a bucket of :func:`length_buckets` holds at most this many padded score entries
#: (B (N+1)^2): 16 MiB of float64 scores
BUCKET_ENTRIES = 1 << 21


def length_buckets(lengths: np.ndarray, growth: float = 1.15,
                   max_entries: int = BUCKET_ENTRIES) -> list[np.ndarray]:
    """Group sentence indices by length so that padding wastes little work.

    A bucket holds sentences whose length lies within a factor ``growth`` (+2) of
    its shortest one, and at most ``max_entries`` padded entries (B (N+1)^2). Returns a
    list of int64 index arrays (sentences sorted by length inside each bucket).
    O(B log B).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(lengths, kind="stable")
    buckets: list[np.ndarray] = []
    start = 0
    total = len(order)
    while start < total:
        lo = lengths[order[start]]
        limit = int(lo * growth) + 2
        end = start
        while end < total and lengths[order[end]] <= limit:
            end += 1
        top = lengths[order[end - 1]]
        cap = max(1, max_entries // ((top + 1) * (top + 1)))
        end = min(end, start + cap)
        buckets.append(order[start:end].copy())
        start = end
    return buckets


def pad_batch(matrices: list[np.ndarray], fill: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """One padded batch (B, N+1, N+1) and lengths (B,) from per-sentence score matrices
    (n_b+1, n_b+1); padding holds ``fill``. O(B N^2)."""
    lengths = np.array([m.shape[0] - 1 for m in matrices], dtype=np.int64)
    n1 = int(lengths.max()) + 1 if len(matrices) else 1
    dtype = np.result_type(*[m.dtype for m in matrices]) if matrices else np.float64
    out = np.full((len(matrices), n1, n1), fill, dtype=dtype)
    for b, m in enumerate(matrices):
        out[b, : m.shape[0], : m.shape[1]] = m
    return out, lengths


def pad_heads(heads: list[np.ndarray], n1: int | None = None) -> np.ndarray:
    """Heads arrays (n_b+1,) as one (B, N+1) int64 array, -1 in padding."""
    n1 = n1 if n1 is not None else max((len(h) for h in heads), default=1)
    out = np.full((len(heads), n1), -1, dtype=np.int64)
    for b, h in enumerate(heads):
        out[b, : len(h)] = h
    return out


def cost_bias(heads: np.ndarray, cost: float) -> np.ndarray:
    """(n+1, n+1) arc-score offsets of cost-augmented decoding for gold ``heads``
    (n+1,): ``cost`` on every arc but the gold ones (0 there), so that the best tree
    under ``scores + cost_bias`` maximizes score + cost * (number of wrong heads)."""
    heads = np.asarray(heads)
    n = heads.shape[0] - 1
    bias = np.full((n + 1, n + 1), float(cost))
    bias[heads[1:], np.arange(1, n + 1)] = 0.0
    return bias


def _as_batch_heads(heads: np.ndarray) -> tuple[np.ndarray, bool]:
    heads = np.asarray(heads, dtype=np.int64)
    if heads.ndim == 1:
        return heads[None], True
    return heads, False


@dataclass(frozen=True)
class TreeStructure(ABC):
    """A tree family with a root rule. Subclasses set ``name`` (the registry's) and
    ``projective`` (whether every tree of the family is projective: what training needs
    to know to projectivize gold trees, and what the projective-only higher-order parts
    check), and implement ``decode``, ``kbest`` and ``log_partition_and_marginals``;
    ``log_partition``, ``marginals`` and ``mbr`` follow from those unless a family has
    a faster way. Immutable and cheap: build one wherever needed."""

    single_root: bool = True

    name: ClassVar[str] = ""
    projective: ClassVar[bool] = False

    @property
    def decoder(self) -> str:
        """The family's registered name (what ``--decoder`` and model files say)."""
        return self.name

    # -------------------------------------------------------------- decoding
    @abstractmethod
    def decode(self, scores: np.ndarray, lengths: np.ndarray | None = None) -> np.ndarray:
        """Best tree (n+1,) of arc scores (n+1, n+1), or heads (B, N+1) (-1 in
        padding) of a batch."""

    @abstractmethod
    def kbest(self, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k best distinct trees of one sentence, best first: (heads (k', n+1),
        tree scores (k',)), k' <= k."""

    def decode_cost_augmented(self, scores: np.ndarray, gold: np.ndarray, cost: float,
                              lengths: np.ndarray | None = None) -> np.ndarray:
        """The tree maximizing score + ``cost`` x (words whose head differs from
        ``gold``): loss-augmented decoding (one sentence or a batch)."""
        if not cost:
            return self.decode(scores, lengths)
        return self.decode(np.asarray(scores, dtype=np.float64)
                           + self.cost_offsets(gold, cost, np.asarray(scores).shape[-1]),
                           lengths)

    @staticmethod
    def cost_offsets(gold: np.ndarray, cost: float, n1: int | None = None) -> np.ndarray:
        """``cost`` on every arc but the gold ones: (n+1, n+1) for heads (n+1,), or
        (B, N+1, N+1) for padded heads (B, N+1) (-1 in padding)."""
        heads, single = _as_batch_heads(gold)
        n1 = n1 or heads.shape[1]
        out = np.full((heads.shape[0], n1, n1), float(cost))
        b, m = np.nonzero(heads[:, 1:] >= 0)
        out[b, heads[b, m + 1], m + 1] = 0.0
        return out[0] if single else out

    def mbr(self, marginals: np.ndarray, lengths: np.ndarray | None = None) -> np.ndarray:
        """The tree with the most expected correct heads under arc ``marginals`` (the
        family's best tree with the marginals as arc scores)."""
        return self.decode(marginals, lengths)

    # -------------------------------------------------------------- distributions
    @abstractmethod
    def log_partition_and_marginals(self, scores: np.ndarray,
                                    lengths: np.ndarray | None = None,
                                    labeled: bool = False):
        """(log Z, arc marginals d log Z / d scores) from one pass: a float and the shape
        of ``scores`` for one sentence, (B,) and (B, N+1, N+1) for a batch."""

    def log_partition(self, scores: np.ndarray, lengths: np.ndarray | None = None,
                      labeled: bool = False):
        """log Z: a float for one sentence, (B,) for a batch."""
        return self.log_partition_and_marginals(scores, lengths, labeled)[0]

    def marginals(self, scores: np.ndarray, lengths: np.ndarray | None = None,
                  labeled: bool = False) -> np.ndarray:
        """Arc marginals d log Z / d scores, the shape of ``scores``."""
        return self.log_partition_and_marginals(scores, lengths, labeled)[1]

    # -------------------------------------------------------------- higher-order parts
    def decode_parts(self, potentials, allowed: np.ndarray | None = None) -> np.ndarray:
        """The best tree (n+1,) of one sentence's
        :class:`~arboreal.inference.potentials.Potentials` (arcs and second-order parts),
        using only the arcs ``allowed`` ((n+1, n+1) bool, None: all). Families with
        second-order routines override this; the others take arc scores only."""
        raise ValueError(self._arcs_only())

    def parts_log_partition_and_marginals(self, potentials,
                                          allowed: np.ndarray | None = None):
        """(log Z, the marginals of every part as a ``Potentials``) of one sentence's
        potentials over the family's trees that use only ``allowed`` arcs."""
        raise ValueError(self._arcs_only())

    def prune(self, arc_marginals: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
        """The arcs ((n+1, n+1) bool) the second-order routines may use, from one
        sentence's first-order ``arc_marginals``; the tree ``keep`` stays whole."""
        raise ValueError(self._arcs_only())

    def _arcs_only(self) -> str:
        return (f"the tree family {self.name!r} takes arc scores only: second-order parts "
                f"need projective trees (--decoder eisner)")

    # -------------------------------------------------------------- given trees
    @staticmethod
    def indicators(heads: np.ndarray, n1: int | None = None) -> np.ndarray:
        """The arcs of trees as 0/1 matrices: heads (n+1,) -> (n+1, n+1), or padded
        heads (B, N+1) -> (B, N+1, N+1); entry [h, m] is 1 when h heads m. O(B N^2)."""
        batch, single = _as_batch_heads(heads)
        n1 = n1 or batch.shape[1]
        out = np.zeros((batch.shape[0], n1, n1))
        b, m = np.nonzero(batch[:, 1:] >= 0)
        out[b, batch[b, m + 1], m + 1] = 1.0
        return out[0] if single else out

    @staticmethod
    def tree_scores(scores: np.ndarray, heads: np.ndarray) -> np.ndarray | float:
        """Sum of the arc scores of the given trees: a float for one sentence (heads
        (n+1,)), (B,) float64 for a batch (padded heads, -1 ignored). O(B N)."""
        batch, single = _as_batch_heads(heads)
        s = np.asarray(scores)
        if single:
            s = s[None]
        b, m = np.nonzero(batch[:, 1:] >= 0)
        out = np.zeros(batch.shape[0])
        np.add.at(out, b, s[b, batch[b, m + 1], m + 1].astype(np.float64))
        return float(out[0]) if single else out


_FAMILIES: dict[str, type[TreeStructure]] = {}


def register_family(cls: type[TreeStructure]) -> type[TreeStructure]:
    """Class decorator: register a :class:`TreeStructure` subclass under its ``name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} needs a name to be registered")
    _FAMILIES[cls.name] = cls
    return cls


def _discover() -> None:
    """Import every module of :mod:`arboreal.inference.families` once (each registers
    its families)."""
    import_package_modules("arboreal.inference.families")


def family_names() -> tuple[str, ...]:
    """The registered tree families' names, the built-in ``eisner`` and ``cle`` first."""
    _discover()
    return tuple(_FAMILIES)


def tree_structure(name: str, single_root: bool = True) -> TreeStructure:
    """The registered tree family ``name`` with the root rule ``single_root``;
    ValueError naming the registered ones for an unknown name."""
    if name not in _FAMILIES:
        _discover()
    if name not in _FAMILIES:
        raise ValueError(f"unknown decoder {name!r}; choose from {', '.join(family_names())}")
    return _FAMILIES[name](single_root)


def projective_or_not(projective: bool, single_root: bool = True) -> TreeStructure:
    """:class:`ProjectiveTrees` or :class:`NonProjectiveTrees`: for array-level callers
    that state the family as a flag (the ``projective=`` of :mod:`arboreal.inference`)."""
    return (ProjectiveTrees if projective else NonProjectiveTrees)(single_root)


@dataclass(frozen=True)
class ArrayFamily(TreeStructure):
    """A family whose routines are :mod:`arboreal.inference`'s array functions with
    their ``projective=`` flag."""

    def kbest(self, scores, k):
        from arboreal.inference.kbest import kbest
        return kbest(scores, k, projective=self.projective, single_root=self.single_root)

    def mbr(self, marginals, lengths=None):
        from arboreal.inference.mbr import mbr_decode
        return mbr_decode(marginals, self.projective, self.single_root, lengths)

    def log_partition_and_marginals(self, scores, lengths=None, labeled=False):
        from arboreal.inference.partition import log_partition_and_marginals
        return log_partition_and_marginals(scores, self.projective, self.single_root,
                                           labeled, lengths)

    def log_partition(self, scores, lengths=None, labeled=False):
        from arboreal.inference.partition import log_partition
        return log_partition(scores, self.projective, self.single_root, labeled, lengths)

    def marginals(self, scores, lengths=None, labeled=False):
        from arboreal.inference.partition import marginals
        return marginals(scores, self.projective, self.single_root, labeled, lengths)


@register_family
@dataclass(frozen=True)
class ProjectiveTrees(ArrayFamily):
    """Projective trees: Eisner's algorithm (O(n^3)), lazy k-best Eisner (Huang & Chiang
    2005), inside-outside over Eisner's chart in log space (O(n^3))."""

    name: ClassVar[str] = "eisner"
    projective: ClassVar[bool] = True

    def decode(self, scores, lengths=None):
        from arboreal.inference.eisner import eisner
        return np.asarray(eisner(scores, single_root=self.single_root, lengths=lengths))

    def decode_parts(self, potentials, allowed=None):
        from arboreal.inference.potentials import decode_potentials
        return decode_potentials(potentials, self.single_root, allowed)

    def parts_log_partition_and_marginals(self, potentials, allowed=None):
        from arboreal.inference.potentials import potentials_marginals
        return potentials_marginals(potentials, self.single_root, allowed)

    def prune(self, arc_marginals, keep=None):
        from arboreal.inference.higher_order.pruning import prune_arcs
        return prune_arcs(arc_marginals, single_root=self.single_root, keep=keep)


@register_family
@dataclass(frozen=True)
class NonProjectiveTrees(ArrayFamily):
    """All spanning trees: Chu-Liu-Edmonds (O(n^2) dense), exact k-best by Lawler's
    partition (O(k n^3)), the Matrix-Tree Theorem (O(n^3))."""

    name: ClassVar[str] = "cle"
    projective: ClassVar[bool] = False

    def decode(self, scores, lengths=None):
        from arboreal.inference.mst import chu_liu_edmonds
        return np.asarray(chu_liu_edmonds(scores, single_root=self.single_root,
                                          lengths=lengths))
