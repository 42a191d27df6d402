"""Memory needed by higher-order decoding, known before anything is allocated.

Given a sentence's pruning mask (n+1, n+1), :func:`part_counts` gives the sizes
that decide every allocation of :class:`~arboreal.inference.higher_order.PartIndex`,
the part-score arrays of :mod:`arboreal.features.higher_order` and the decoders'
charts, and :func:`estimate_bytes` turns them into bytes. Notation: N = n + 1,
A = kept arcs, W[h] = kept modifiers of h plus one ("no sibling"), npar[m] = kept
heads of m::

    quadratic   = 64 N^2                 arc scores, slot/arcid tables, adjacency
                                         lists, pruner scores and marginals
    part scores = 8 (sum_h W^2  [sib]  + sum_m npar[m] W[m]   [grand]
                     + sum_m npar[m] W[m]^2 [gsib] + sum_h W^3 [trisib])
    charts      = (8 f + 4 b) (A + 1) N  f float64 and b int32 charts, one row per
                                         kept arc g -> h (spans headed by h whose
                                         head is g) plus the root's row:
                                         Model 0 f=b=2, Model 1 f=b=3, Model 2 f=b=4,
                                         all-parts Model 2 f=b=3 plus 12 bytes per
                                         gsib part (its G spans)
    sibling     = 48 N^2                 (first order and sibling-only decoding)

The charts are linear in the kept arcs (A is about K n with K heads per word), so
pruning bounds them; the tri-sibling scores grow with the cube of a head's
number of candidate modifiers. Non-projective decoding (hill-climbing) needs its
projective start's charts plus O(n).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from arboreal.errors import ArborealError

#: default per-sentence budget of :class:`arboreal.models.higher_order.HigherOrder`
DEFAULT_BUDGET = 1 << 30
#: default chart limit of the decoder functions called directly (MemoryBudgetError above)
DECODER_LIMIT = 4 << 30


class MemoryBudgetWarning(UserWarning):
    """Some sentences exceeded the memory budget and were handled by the fallback."""


class MemoryBudgetError(ArborealError):
    """A decoder was asked to allocate more than its memory budget."""


@dataclass(frozen=True)
class PartCounts:
    """Sizes of one pruned sentence (see the module docstring).

    n words; arcs = A kept arcs; w0 = W[0]; sib, grand, gsib, tri = entries of the
    flat part-score arrays (the ``n_*`` sizes of the compact ``PartIndex``).
    """

    n: int
    arcs: int
    w0: int
    sib: int
    grand: int
    gsib: int
    tri: int


def part_counts(allowed: np.ndarray) -> PartCounts:
    """:class:`PartCounts` of a pruning mask (n+1, n+1) bool (column 0 and the
    diagonal ignored), equal to the sizes of ``PartIndex.compact(allowed)``.
    O(n^2) time, O(n) extra memory beyond one boolean copy."""
    a = np.array(allowed, dtype=bool)
    a[:, 0] = False
    np.fill_diagonal(a, False)
    W = a.sum(axis=1).astype(np.int64) + 1
    npar = a.sum(axis=0).astype(np.int64)
    return PartCounts(n=a.shape[0] - 1, arcs=int(npar.sum()), w0=int(W[0]),
                      sib=int((W ** 2).sum()), grand=int((npar * W).sum()),
                      gsib=int((npar * W ** 2).sum()), tri=int((W ** 3).sum()))


def decoder_kind(parts, projective: bool = True, outer_only: bool = False) -> str:
    """The decoder the parser runs for these parts: "sibling", "grandparent",
    "model1", "model2" or "model2_all" (hill-climbing starts from "model1" with
    grandparent parts, else from "sibling")."""
    p = set(parts)
    if not projective:
        return "model1" if "grand" in p else "sibling"
    if p <= {"sib"}:
        return "sibling"
    if p == {"grand"}:
        return "grandparent"
    if "trisib" in p:
        return "model2" if outer_only else "model2_all"
    return "model1"


_CHARTS = {"grandparent": 2, "model1": 3, "model2": 4, "model2_all": 3}


def quadratic_bytes(n):
    """The ``quadratic`` term of the module docstring's formula for sentences of n
    words (int or array): a lower bound of :func:`estimate_bytes` however hard the
    sentence is pruned."""
    return 64 * (n + 1) * (n + 1)


def estimate_bytes(counts: PartCounts, parts, projective: bool = True,
                   outer_only: bool = False) -> int:
    """Bytes that decoding one sentence of these counts allocates (the formula of
    the module docstring): O(1) from the counts."""
    total = quadratic_bytes(counts.n)
    p = set(parts)
    total += 8 * (counts.sib * ("sib" in p) + counts.grand * ("grand" in p)
                  + counts.gsib * ("gsib" in p) + counts.tri * ("trisib" in p))
    kind = decoder_kind(p, projective, outer_only)
    total += chart_bytes(kind, counts.n, counts.arcs + 1, counts.gsib, counts.w0)
    return int(total)


def chart_bytes(kind: str, n: int, rows: int, n_gsib: int = 0, w0: int = 0) -> int:
    """Bytes of one decoder's charts: ``rows`` chart rows (arc ids of its PartIndex
    plus one), sentence length n; O(1)."""
    N = n + 1
    if kind == "sibling":
        return 48 * N * N
    extra = 12 * (n_gsib + w0 * w0) if kind == "model2_all" else 0
    return 12 * _CHARTS[kind] * rows * N + extra


def check_chart_budget(kind: str, n: int, rows: int, budget: float | None,
                       n_gsib: int = 0, w0: int = 0) -> None:
    """Raise :class:`MemoryBudgetError` before a decoder allocates charts larger than
    ``budget`` bytes (None: no limit)."""
    if budget is None:
        return
    need = chart_bytes(kind, n, rows, n_gsib, w0)
    if need > budget:
        raise MemoryBudgetError(
            f"decoding a {n}-word sentence needs {need / 2**20:.0f} MiB of charts, more than "
            f"the memory budget of {budget / 2**20:.0f} MiB; prune more arcs or decode it "
            f"at first order")
