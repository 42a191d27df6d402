"""Hashed features of higher-order parts: siblings, grandparents, grand-siblings, tri-siblings.

The parts' templates are written in the template language of the first-order
features (:func:`arboreal.features.hashing.template_slots`: slots
``anchor[+-offset].attr``), with the anchors of each part kind (part conventions of
:mod:`arboreal.inference.higher_order`):

* ``sib`` (h, s, m): head h, its previous child s on the same side (or none: the
  first child), the new child m; conjoined with the direction of m from h, and with
  it and the distance bucket of |m - s|;
* ``grand`` (g, h, m): grandparent g, head h, modifier m; directions of g -> h and
  h -> m, distance |m - h|;
* ``gsib`` (g, h, s, m): a sibling part with the head's own head g; directions of
  g -> h and h -> m, distance |m - s|;
* ``trisib`` (h, t, s, m): three consecutive children t, s, m of h on one side (t
  none for the first two); direction of m from h, distance |m - s|.

An anchor with no word ("none": the missing sibling) reads its own code, distinct
from every word and boundary. The templates of a model are data: they are saved in
its file (:meth:`HigherOrderFeatures.config`) and compiled to one table per kind, so
editing :data:`DEFAULT_PART_TEMPLATES` never changes what a saved model means.

Hashing (same engine style as the arc features, :mod:`arboreal.features.hashing`):
per sentence and kind, every template's slots of each anchor are hashed once per
position (:func:`part_hashes`, O(T n)); a part's feature is the XOR of its anchors'
hashes and of a mixed constant of its direction tag, placed in a block of
``BLOCK`` weights among ``2**bits``: slot 0 the feature with the direction(s),
slots 1..7 with direction(s) and distance bucket. Scoring a part costs one cache
line per template.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from arboreal.features.first_order import ATTR_INDEX
from arboreal.features.hashing import _bucket, _fmix, _mix, _pos, _slot, template_slots

KINDS = ("sib", "grand", "gsib", "trisib")
#: the anchors a template of each part kind may read
PART_ANCHORS = {"sib": "hsm", "grand": "ghm", "gsib": "ghsm", "trisib": "htsm"}
#: anchor letter -> hash group (the part's positions are passed in this order)
_GROUPS = {"h": 0, "m": 1, "s": 2, "g": 3, "t": 4}
N_GROUPS = 5
MAX_PART_SLOTS = 5
_KIND_CODE = {"sib": 1, "grand": 2, "gsib": 3, "trisib": 4}
_NONE = np.uint64(0x7FFFFFF0)
_SEED = np.uint64(0x84222325CBF29CE4)
_TAG_SEED = np.uint64(0x9AE16A3B2F90404F)
_UNUSED = np.zeros(1)   # stands for the score array of a part kind not used (never written)
_NO_TABLE = np.zeros((N_GROUPS, 0, 1), dtype=np.uint64)   # hashes of a kind not used


def _kind_templates(kind: str, word: str = "word", pos: str = "pos") -> list[str]:
    """The default templates of a kind over ``word`` and ``pos`` attributes (Koo &
    Collins 2010, McDonald & Pereira 2006: POS n-grams of the part and their
    word back-offs)."""
    W, P = word, pos
    table = {
        "sib": ["h.P s.P m.P", "s.P m.P", "s.W m.W", "s.W m.P", "s.P m.W",
                "h.W s.P m.P", "h.P s.W m.P", "h.P s.P m.W"],
        "grand": ["g.P h.P m.P", "g.P m.P", "g.W m.P", "g.P m.W", "g.W h.P m.P",
                  "g.P h.W m.P", "g.P h.P m.W", "g.W m.W"],
        "gsib": ["g.P h.P s.P m.P", "g.P s.P m.P", "g.W h.P s.P m.P", "g.P h.P s.W m.P",
                 "g.P h.P s.P m.W", "g.P s.W m.P", "g.P s.P m.W"],
        "trisib": ["h.P t.P s.P m.P", "t.P s.P m.P", "h.P t.P m.P", "t.P m.P",
                   "h.W t.P s.P m.P", "t.P s.P m.W", "t.W s.P m.P"],
    }[kind]
    return [t.replace(".W", "." + W).replace(".P", "." + P) for t in table]


#: the templates of every part kind a new model gets
DEFAULT_PART_TEMPLATES: dict[str, list[str]] = {k: _kind_templates(k) for k in KINDS}
#: the templates of every part kind over word forms only (the 5-character prefix in
#: place of the tag, as in the first-order ``words`` set): for parsers that read no tags
WORD_PART_TEMPLATES: dict[str, list[str]] = {
    k: list(dict.fromkeys(_kind_templates(k, "word", "p5"))) for k in KINDS}
#: added to them when the parser has word clusters (Koo, Carreras & Collins 2008: the
#: part's words by 4-bit and 6-bit cluster prefixes and full clusters, and mixed with
#: POS)
CLUSTER_PART_TEMPLATES: dict[str, list[str]] = {
    "sib": ["h.c4 s.c4 m.c4", "s.c4 m.c4", "s.c6 m.c6", "s.cl m.cl", "h.pos s.c4 m.c4",
            "h.c4 s.pos m.pos", "s.c4 m.pos", "s.pos m.c4"],
    "grand": ["g.c4 h.c4 m.c4", "g.c4 m.c4", "g.c6 m.c6", "g.cl m.cl", "g.pos h.c4 m.c4",
              "g.c4 h.pos m.pos", "g.c4 m.pos", "g.pos m.c4"],
    "gsib": ["g.c4 h.c4 s.c4 m.c4", "g.c4 s.c4 m.c4", "g.pos s.c4 m.c4"],
    "trisib": ["t.c4 s.c4 m.c4", "h.c4 t.c4 m.c4", "t.pos s.c4 m.c4"],
}


def compile_part_templates(kind: str, templates: list[str]) -> np.ndarray:
    """Template strings of part kind ``kind`` -> int64 table (T, 1 + 3 MAX_PART_SLOTS),
    rows ``[n_slots, attr_1, group_1, offset_1, ...]``. ValueError for a template
    that reads an anchor the kind does not have (:data:`PART_ANCHORS`)."""
    if kind not in PART_ANCHORS:
        raise ValueError(f"unknown part kind {kind!r}; choose from {', '.join(KINDS)}")
    anchors = {a: _GROUPS[a] for a in PART_ANCHORS[kind]}
    table = np.zeros((len(templates), 1 + 3 * MAX_PART_SLOTS), dtype=np.int64)
    for t, spec in enumerate(templates):
        if not isinstance(spec, str):
            raise ValueError(f"template {spec!r} is not a string")
        slots = template_slots(spec, anchors, ATTR_INDEX, MAX_PART_SLOTS)
        table[t, 0] = len(slots)
        for s, (group, off, attr) in enumerate(slots):
            table[t, 1 + 3 * s: 4 + 3 * s] = (ATTR_INDEX[attr], group, off)
    return table


@njit(cache=True)
def part_hashes(codes, tmpl, kind):
    """Hashes ``G[group, t, j]`` of template t's slots anchored in ``group`` (0 h,
    1 m, 2 s, 3 g, 4 t) read at position j - 1 (j = 0..n+1), and at column n + 2 the
    "none" anchor. A group the template does not read holds one constant. O(T n)."""
    n = codes.shape[1] - 3
    last = codes.shape[1] - 1
    T = tmpl.shape[0]
    G = np.empty((5, T, n + 3), dtype=np.uint64)
    for t in range(T):
        ns = tmpl[t, 0]
        for grp in range(5):
            seed = _mix(_mix(_SEED, kind * 64 + t + 1), grp + 1)
            reads = False
            for s in range(ns):
                if tmpl[t, 2 + 3 * s] == grp:
                    reads = True
            if not reads:
                G[grp, t, :] = _fmix(seed)
                continue
            for j in range(n + 2):
                hv = seed
                for s in range(ns):
                    if tmpl[t, 2 + 3 * s] != grp:
                        continue
                    q = j + tmpl[t, 3 + 3 * s]
                    q = 0 if q < 0 else (last if q > last else q)
                    hv = _mix(hv, codes[tmpl[t, 1 + 3 * s], q])
                G[grp, t, j] = _fmix(hv)
            G[grp, t, n + 2] = _fmix(_mix(seed, _NONE))
    return G


@njit(cache=True, inline="always")
def _dir(a, b):
    return 1 if b > a else 2


@njit(cache=True, inline="always")
def _part_dot(G, jh, jm, js, jg, jt, tag, dist, shift, w):
    """Score of a part: the weights of both slots of every template's block."""
    tv = _fmix(_mix(_TAG_SEED, tag))
    dslot = 1 + _bucket(dist if dist > 0 else -dist)
    s = 0.0
    for t in range(G.shape[1]):
        x = _pos(G[0, t, jh] ^ G[1, t, jm] ^ G[2, t, js] ^ G[3, t, jg] ^ G[4, t, jt] ^ tv,
                 shift)
        s += w[_slot(x, 0, 1)] + w[_slot(x, dslot, 1)]
    return s


@njit(cache=True, inline="always")
def _part_add(G, jh, jm, js, jg, jt, tag, dist, shift, c, out):
    """``out[f] += c`` for both weights of every template's block of a part (the
    adjoint of :func:`_part_dot`)."""
    tv = _fmix(_mix(_TAG_SEED, tag))
    dslot = 1 + _bucket(dist if dist > 0 else -dist)
    for t in range(G.shape[1]):
        x = _pos(G[0, t, jh] ^ G[1, t, jm] ^ G[2, t, js] ^ G[3, t, jg] ^ G[4, t, jt] ^ tv,
                 shift)
        out[_slot(x, 0, 1)] += c
        out[_slot(x, dslot, 1)] += c


@njit(cache=True, inline="always")
def _part(G, jh, jm, js, jg, jt, tag, dist, shift, w, arr, i, adjoint, out):
    """Scoring (``arr[i]`` = the part's score under w) or, with ``adjoint``, its
    adjoint (``out += arr[i]`` times the part's features, for nonzero ``arr[i]``)."""
    if adjoint:
        if arr[i] != 0.0:
            _part_add(G, jh, jm, js, jg, jt, tag, dist, shift, arr[i], out)
    else:
        arr[i] = _part_dot(G, jh, jm, js, jg, jt, tag, dist, shift, w)


@njit(cache=True, inline="always")
def _part_ids(G, jh, jm, js, jg, jt, tag, dist, shift, ids, pos):
    """Write a part's feature ids (2 per template) at ``ids[pos:]``; returns the end."""
    tv = _fmix(_mix(_TAG_SEED, tag))
    dslot = 1 + _bucket(dist if dist > 0 else -dist)
    for t in range(G.shape[1]):
        x = _pos(G[0, t, jh] ^ G[1, t, jm] ^ G[2, t, js] ^ G[3, t, jg] ^ G[4, t, jt] ^ tv,
                 shift)
        ids[pos] = np.int64(_slot(x, 0, 1))
        ids[pos + 1] = np.int64(_slot(x, dslot, 1))
        pos += 2
    return pos


# the anchors of each kind as columns of part_hashes (p + 1; none = n + 2); groups a
# kind does not read get column 0 (their hashes are constant)
@njit(cache=True, inline="always")
def _col(p, h, none):
    return none if p == h else p + 1


def _part_enumeration(adjoint: bool):
    """The kernel that enumerates every part the decoders can read (``projective``:
    only grandparents outside the span of h -> m, the only ones a projective tree can
    have; G*: :func:`part_hashes` of each kind) and either fills the compact flat
    score arrays (``adjoint=False``: :data:`part_scores_kernel`) or runs the adjoint
    (``adjoint=True``: :data:`part_adjoint_kernel`; the ``*_out`` arrays then hold
    coefficients, e.g. part marginals, ``acc += sum_part coef[part] f(part)``, w is
    not read). ``adjoint`` is a compile-time constant of each kernel, so the scoring
    kernel carries no trace of the adjoint."""

    @njit(cache=True)
    def kernel(slot, width, arcid, sib_off, grand_off, gsib_off, tri_off, w, bits, Gsib,
               Ggrand, Ggsib, Gtri, use_sib, use_grand, use_gsib, use_tri, projective,
               sib_out, grand_out, gsib_out, tri_out, acc):
        n = slot.shape[0] - 1
        none = n + 2
        shift = np.uint64(64 - bits)
        kids = np.empty(n + 1, dtype=np.int64)
        pars = np.empty(n + 1, dtype=np.int64)
        for h in range(n + 1):
            W = width[h]
            nk = 0
            for m in range(1, n + 1):
                if m != h and slot[h, m] >= 0:
                    kids[nk] = m
                    nk += 1
            npar = 0   # h's kept heads (grandparents of h's modifiers)
            for g in range(n + 1):
                if arcid[g, h] >= 0:
                    pars[npar] = g
                    npar += 1
            for ib in range(nk):
                b = kids[ib]
                sb = slot[h, b]
                lo = min(h, b)
                hi = max(h, b)
                # inner siblings a: h itself, then kept modifiers strictly between h and b
                for ia in range(-1, nk):
                    if ia >= 0:
                        a = kids[ia]
                        if not (lo < a < hi):
                            continue
                    else:
                        a = h
                    sa = slot[h, a]
                    ca = _col(a, h, none)
                    if use_sib:
                        _part(Gsib, h + 1, b + 1, ca, 0, 0, _dir(h, b), b - a, shift, w,
                              sib_out, sib_off[h] + sa * W + sb, adjoint, acc)
                    if use_tri and a != h:
                        for ix in range(-1, nk):
                            if ix >= 0:
                                x = kids[ix]
                                if not (min(h, a) < x < max(h, a)):
                                    continue
                            else:
                                x = h
                            _part(Gtri, h + 1, b + 1, ca, 0, _col(x, h, none), _dir(h, b), b - a,
                                  shift, w, tri_out, tri_off[h] + (slot[h, x] * W + sa) * W + sb,
                                  adjoint, acc)
                    if h > 0 and (use_gsib or (use_grand and a == h)):
                        for j in range(npar):
                            g = pars[j]
                            ag = arcid[g, h]
                            if g == b or (projective and lo <= g <= hi):
                                continue
                            tag = _dir(g, h) * 4 + _dir(h, b)
                            if use_grand and a == h:
                                _part(Ggrand, h + 1, b + 1, 0, g + 1, 0, tag, b - h, shift, w,
                                      grand_out, grand_off[ag] + sb, adjoint, acc)
                            if use_gsib:
                                _part(Ggsib, h + 1, b + 1, ca, g + 1, 0, tag, b - a, shift, w,
                                      gsib_out, gsib_off[ag] + sa * W + sb, adjoint, acc)

    return kernel


part_scores_kernel = _part_enumeration(False)
part_adjoint_kernel = _part_enumeration(True)


@njit(cache=True)
def tree_ids_kernel(heads, bits, Gsib, Ggrand, Ggsib, Gtri, use_sib, use_grand, use_gsib,
                    use_tri, outer_only):
    """Ids (int64, with repeats) of every higher-order feature of the tree's parts:
    2 per template of each part (a child has at most one part of each kind, or with
    ``outer_only`` a head's grand and gsib parts are those of its outermost child
    per side)."""
    n = heads.shape[0] - 1
    none = n + 2
    shift = np.uint64(64 - bits)
    per_child = 2 * (Gsib.shape[1] + Ggrand.shape[1] + Ggsib.shape[1] + Gtri.shape[1])
    ids = np.empty(per_child * (n + 1) + 1, dtype=np.int64)
    pos = 0
    for h in range(n + 1):
        g = heads[h] if h > 0 else -1
        for side in range(2):
            step = 1 if side == 0 else -1
            x = h
            y = h
            last = -1
            last_prev = -1
            m = h + step
            while 0 < m <= n:
                if heads[m] == h:
                    cx = _col(x, h, none)
                    if use_sib:
                        pos = _part_ids(Gsib, h + 1, m + 1, cx, 0, 0, _dir(h, m), m - x,
                                        shift, ids, pos)
                    if use_tri and x != h:
                        pos = _part_ids(Gtri, h + 1, m + 1, cx, 0, _col(y, h, none),
                                        _dir(h, m), m - x, shift, ids, pos)
                    if g >= 0 and not outer_only:
                        tag = _dir(g, h) * 4 + _dir(h, m)
                        if use_grand:
                            pos = _part_ids(Ggrand, h + 1, m + 1, 0, g + 1, 0, tag, m - h,
                                            shift, ids, pos)
                        if use_gsib:
                            pos = _part_ids(Ggsib, h + 1, m + 1, cx, g + 1, 0, tag, m - x,
                                            shift, ids, pos)
                    last_prev = x
                    last = m
                    y = x
                    x = m
                m += step
            if g >= 0 and outer_only and last >= 0:
                tag = _dir(g, h) * 4 + _dir(h, last)
                if use_grand:
                    pos = _part_ids(Ggrand, h + 1, last + 1, 0, g + 1, 0, tag, last - h,
                                    shift, ids, pos)
                if use_gsib:
                    pos = _part_ids(Ggsib, h + 1, last + 1, _col(last_prev, h, none), g + 1,
                                    0, tag, last - last_prev, shift, ids, pos)
    return ids[:pos]


@njit(cache=True)
def _add_at(out, ids, scale):
    for i in range(ids.shape[0]):
        out[ids[i]] += scale


class HigherOrderFeatures:
    """Scores and feature counts of higher-order parts, sharing a FeatureSet's weights.

    Args:
        parts: subset of ``KINDS`` ("sib", "grand", "gsib", "trisib").
        bits: weight vector size ``2**bits`` (use the first-order FeatureSet's bits).
        outer_only: grand / gsib parts only of each head's outermost child per side
            (the factorization of the Model 2 decoder).
        templates: {kind: template strings} for the kinds in ``parts`` (default
            :data:`DEFAULT_PART_TEMPLATES`); ValueError for a bad template.
    """

    def __init__(self, parts: tuple[str, ...] | list[str], bits: int, outer_only: bool = False,
                 templates: dict[str, list[str]] | None = None):
        bad = set(parts) - set(KINDS)
        if bad:
            raise ValueError(f"unknown part kinds {sorted(bad)}; choose from {list(KINDS)}")
        self.parts = tuple(k for k in KINDS if k in parts)
        self.bits = int(bits)
        self.outer_only = bool(outer_only)
        #: (sib, grand, gsib, trisib) used
        self.flags: tuple[bool, bool, bool, bool] = tuple(k in self.parts for k in KINDS)
        templates = DEFAULT_PART_TEMPLATES if templates is None else templates
        missing = [k for k in self.parts if k not in templates]
        if missing:
            raise ValueError(f"no templates for part kind(s) {', '.join(missing)}")
        self.templates = {k: list(templates[k]) for k in self.parts}
        self.tables = {k: compile_part_templates(k, self.templates[k]) for k in self.parts}

    def config(self) -> dict:
        """What a model file stores to rebuild these features (with ``bits``)."""
        return {"parts": list(self.parts), "outer_only": self.outer_only,
                "templates": {k: list(v) for k, v in self.templates.items()}}

    def hashes(self, codes: np.ndarray) -> tuple[np.ndarray, ...]:
        """:func:`part_hashes` of every kind for a sentence (a kind not used: an empty
        table), in the order of ``KINDS``. O(T n)."""
        return tuple(part_hashes(codes, self.tables[k], _KIND_CODE[k]) if k in self.tables
                     else _NO_TABLE for k in KINDS)

    def part_scores(self, codes: np.ndarray, index, w: np.ndarray, projective: bool = True
                    ) -> dict[str, np.ndarray | None]:
        """Flat compact score arrays (see ``PartIndex``) for every readable part.

        codes: an EncodedSentence's ``codes``; index: a ``PartIndex`` of the same
        sentence; w: (2**bits,) weights. ``projective=False`` also scores the
        grandparent parts only non-projective trees have (g inside the span of
        h -> m, for hill-climbing). Returns {kind: flat array or None}.
        Cost: one cache line per template and candidate part.
        """
        us, ug, ugs, ut = self.flags
        sib = np.zeros(index.n_sib) if us else _UNUSED
        grand = np.zeros(index.n_grand) if ug else _UNUSED
        gsib = np.zeros(index.n_gsib) if ugs else _UNUSED
        tri = np.zeros(index.n_tri) if ut else _UNUSED
        part_scores_kernel(*index.tables(), w, self.bits, *self.hashes(codes), us, ug, ugs, ut,
                           bool(projective), sib, grand, gsib, tri, _UNUSED)
        return {"sib": sib if us else None, "grand": grand if ug else None,
                "gsib": gsib if ugs else None, "trisib": tri if ut else None}

    def accumulate_parts(self, codes: np.ndarray, index, coef: dict, out: np.ndarray,
                         scale: float = 1.0, projective: bool = True) -> None:
        """``out += scale * sum_part coef[part] f(part)`` over the parts of ``index``:
        the adjoint of :meth:`part_scores` (``coef``: {kind: flat array} in its layout,
        e.g. part marginals; a kind missing or None counts 0). Same cost as scoring."""
        arrays, flags = [], []
        for k, used, size in zip(KINDS, self.flags,
                                 (index.n_sib, index.n_grand, index.n_gsib, index.n_tri)):
            c = coef.get(k) if used else None
            if c is None:
                arrays.append(_UNUSED)
                flags.append(False)
                continue
            c = np.ascontiguousarray(c, dtype=np.float64).reshape(-1) * float(scale)
            if c.size != size:
                raise ValueError(f"{k} coefficients: expected {size} values, got {c.size}")
            arrays.append(c)
            flags.append(True)
        part_adjoint_kernel(*index.tables(), _UNUSED, self.bits, *self.hashes(codes), *flags,
                            bool(projective), *arrays, out)

    def tree_ids(self, codes: np.ndarray, heads: np.ndarray) -> np.ndarray:
        """Explicit ids (int64, repeats kept) of every higher-order feature of the
        parts of tree ``heads`` (non-projective trees too). O(n^2) for the sibling
        chains, 2 ids per template and part."""
        us, ug, ugs, ut = self.flags
        return tree_ids_kernel(np.asarray(heads, dtype=np.int64), self.bits,
                               *self.hashes(codes), us, ug, ugs, ut, self.outer_only)

    def accumulate_tree(self, codes: np.ndarray, heads: np.ndarray, out: np.ndarray,
                        scale: float = 1.0) -> None:
        """``out[f] += scale`` for every higher-order feature of tree ``heads``. O(n^2)."""
        _add_at(out, self.tree_ids(codes, heads), float(scale))
