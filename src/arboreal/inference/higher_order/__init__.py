"""Exact projective decoders for second- and third-order factorizations, and pruning.

Part-score convention (used by every module of this package, by
``arboreal.features.higher_order`` and by ``arboreal.models.higher_order``)
--------------------------------------------------------------------------
Words are 1..n, 0 is the root. A tree is ``heads`` (n+1,), ``heads[0] = -1``.
Siblings are the children of one head *on one side of it*, ordered from the
closest to the head outwards. The head itself stands for "no inner sibling"
(McDonald & Pereira 2006's start symbol); there is no stop symbol.

* ``arc[h, m]``           first order, h -> m (the project convention).
* ``sib[h, a, b]``        b is a child of h and a is the next child of h on the
                          same side closer to h; ``a = h`` when b is h's closest
                          child on that side.  Scored for every head, the root too.
* ``grand[g, h, m]``      arcs g -> h -> m.  Only for h >= 1 (the root has no head).
* ``gsib[g, h, a, b]``    grand-sibling: ``sib[h, a, b]`` with h's head g (h >= 1).
* ``trisib[h, a, b, c]``  a, b, c consecutive children of h on one side, a the
                          closest; ``a = h`` when b and c are h's two closest
                          children on that side.  Scored for every head.

Dense tensors of shape (n+1,)*k are the simple form (tests, short sentences).
Real sentences use the *compact* form of :class:`PartIndex`: after pruning,
head h keeps ``deg[h]`` candidate modifiers, numbered ``slot[h, m]`` in 1..deg[h]
(``slot[h, h] = 0`` is "no sibling"), and each kept arc g -> h has an id
``arcid[g, h]``; part scores are flat float64 arrays read at the offsets the
index gives (see :mod:`arboreal.inference.higher_order.parts`). The dense form is
the special case ``slot[h, m] = m``, so a dense tensor is its own flat array
(``t.reshape(-1)``).

Decoders (all exact for their factorization over projective trees):

============================  ==============================  ======  ======
function                      parts                           time    space
============================  ==============================  ======  ======
``sibling_decode``            arc, sib                        O(n^3)  O(n^2)
``grandparent_decode``        arc, grand (Koo's Model 0)      O(n^4)  O(n^3)
``grand_sibling_decode``      arc, sib, grand, gsib           O(n^4)  O(n^3)
                              (Model 1; without gsib: the
                              siblings + grandparents
                              second order)
``tri_sibling_decode``        arc, sib, trisib, and grand +   O(n^4)  O(n^3)
                              gsib of each head's outermost
                              child per side (Model 2)
``grand_tri_sibling_decode``  arc, sib, trisib, grand, gsib   O(n^5)  O(n^4)
                              of every child (Models 1 and 2
                              together; pruned: about K times
                              the tri-sibling parts' work)
============================  ==============================  ======  ======

``hill_climb`` improves a projective tree into a non-projective one under the
sibling (+ grandparent) factorization (McDonald & Pereira 2006's approximation;
``hill_climb_sibling`` without grandparents).
``grand_sibling_marginals`` gives log Z and the marginals of arc, sib, grand and gsib
parts over projective trees (inside-outside over Model 1's spans, O(n^4); what
log-linear training of second-order models needs).
``prune_arcs`` keeps the likely arcs from first-order marginals.

Space: the charts of the O(n^3)-space decoders have one row per kept arc g -> h
(plus the root's row) and n+1 columns, so after pruning they are O(K n^2) with K
kept heads per word. :mod:`~arboreal.inference.higher_order.memory` estimates the
bytes a sentence needs from its pruning mask before anything is allocated
(``part_counts``, ``estimate_bytes``); the decoders raise ``MemoryBudgetError``
instead of allocating charts over their ``memory_budget``.
"""
from arboreal.inference.higher_order.grandparent import grandparent_decode
from arboreal.inference.higher_order.hill_climb import hill_climb, hill_climb_sibling
from arboreal.inference.higher_order.marginals import grand_sibling_marginals
from arboreal.inference.higher_order.memory import (MemoryBudgetError, MemoryBudgetWarning,
                                                    PartCounts, estimate_bytes, part_counts)
from arboreal.inference.higher_order.parts import PartIndex, score_tree
from arboreal.inference.higher_order.pruning import prune_arcs
from arboreal.inference.higher_order.sibling import sibling_decode
from arboreal.inference.higher_order.third_order import (grand_sibling_decode,
                                                         grand_tri_sibling_decode,
                                                         tri_sibling_decode)

__all__ = [
    "MemoryBudgetError",
    "MemoryBudgetWarning",
    "PartCounts",
    "PartIndex",
    "estimate_bytes",
    "grand_sibling_decode",
    "grand_sibling_marginals",
    "grand_tri_sibling_decode",
    "grandparent_decode",
    "hill_climb",
    "hill_climb_sibling",
    "part_counts",
    "prune_arcs",
    "score_tree",
    "sibling_decode",
    "tri_sibling_decode",
]
