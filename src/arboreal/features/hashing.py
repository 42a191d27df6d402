"""Feature hashing and the generic template kernel shared by arc and label features.

A *template* is a conjunction of token attributes read at positions anchored on the
arc being scored (head ``h``, modifier ``m``, a word ``b`` between them, the
grandparent, a child of ``m``, a sibling of ``m``) with an offset of -1, 0 or +1.
A feature id is a 64-bit hash of ``(template id, code_1, ..., code_k)`` reduced to
``2**bits`` buckets; every template fires twice, once plain and once conjoined with
the attachment direction and distance bucket (as MSTParser does: the plain copy is
the back-off of the conjoined one).

Templates are data: an int64 table ``(T, 3 + 3 * MAX_SLOTS)`` with rows
``[n_slots, cond, loop_anchor, attr_1, anchor_1, offset_1, ...]``, interpreted by the
numba kernel :func:`arc_ids` below and, independently, by the pure-Python
:func:`reference_arc_ids` (used by the tests as the slow reference).

Token codes: ``codes[a, p + 1]`` is the integer code of attribute ``a`` at position
``p`` in ``-1 .. n + 1`` (``-1`` and ``n + 1`` are sentence boundaries, 0 the root).
"""
from __future__ import annotations

import numpy as np
from numba import njit

MAX_SLOTS = 4
# anchors
HEAD, MOD, BETWEEN, GRAND, CHILD, SIBLING = 0, 1, 2, 3, 4, 5
#: anchors that iterate (a template holds at most one of them)
LOOP_ANCHORS = (BETWEEN, CHILD, SIBLING)

_P = np.uint64(0x100000001B3)
_C1 = np.uint64(0xFF51AFD7ED558CCD)
_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_K = np.uint64(0x9E3779B97F4A7C15)
_S33 = np.uint64(33)
_MASK64 = (1 << 64) - 1


def distance_bucket(d: int) -> int:
    """MSTParser's distance buckets for |h - m| = d >= 1: 1,2,3,4,5 -> 0..4, 6-10 -> 5, >10 -> 6."""
    if d > 10:
        return 6
    if d > 5:
        return 5
    return d - 1


@njit(cache=True, inline="always")
def _mix(h, v):
    return (h ^ np.uint64(v)) * _P


@njit(cache=True, inline="always")
def _fmix(h):
    h ^= h >> _S33
    h *= _C1
    h ^= h >> _S33
    h *= _C2
    h ^= h >> _S33
    return h


@njit(cache=True, inline="always")
def _bucket(d):
    if d > 10:
        return 6
    if d > 5:
        return 5
    return d - 1


@njit(cache=True, inline="always")
def _pos_of(anchor, h, m, g, x, n):
    if anchor == 0:
        p = h
    elif anchor == 1:
        p = m
    elif anchor == 3:
        p = g
    else:
        p = x
    return p


@njit(cache=True)
def arc_ids(codes, tmpl, h, m, heads, long_attr, mask, buf):
    """Write the feature ids of arc (h, m) into ``buf``; return how many.

    codes (A, n+3) int32; tmpl (T, 3+3*MAX_SLOTS) int64; heads (n+1,) int (only read
    by templates anchored on the grandparent, children or siblings; may be empty
    otherwise); long_attr: attribute row holding the "word longer than 5 chars" flag
    (or -1); mask = 2**bits - 1. ``buf`` must hold ``2 * (T_plain + T_loop * (n+1))``.
    Cost O(T + T_loop * n).
    """
    n = codes.shape[1] - 3
    d = m - h
    dist = d if d > 0 else -d
    dd = np.uint64((1 if d > 0 else 2) * 16 + _bucket(dist) + 1) * _K
    g = -1
    if heads.shape[0] > 0 and h >= 0:
        g = heads[h]
    lo = h if h < m else m
    hi = m if h < m else h
    umask = np.uint64(mask)
    k = 0
    T = tmpl.shape[0]
    for t in range(T):
        ns = tmpl[t, 0]
        cond = tmpl[t, 1]
        loop = tmpl[t, 2]
        if cond != 0 and long_attr >= 0:
            ok = False
            if (cond & 1) and codes[long_attr, h + 1] != 0:
                ok = True
            if (cond & 2) and codes[long_attr, m + 1] != 0:
                ok = True
            if not ok:
                continue
        base = _mix(np.uint64(0xCBF29CE484222325), t + 1)
        if loop < 0:
            hv = base
            for s in range(ns):
                a = tmpl[t, 3 + 3 * s]
                p = _pos_of(tmpl[t, 4 + 3 * s], h, m, g, -1, n) + tmpl[t, 5 + 3 * s]
                if p < -1:
                    p = -1
                elif p > n + 1:
                    p = n + 1
                hv = _mix(hv, codes[a, p + 1])
            buf[k] = np.int64(_fmix(hv) & umask)
            buf[k + 1] = np.int64(_fmix(hv ^ dd) & umask)
            k += 2
        else:
            for x in range(0, n + 1):
                if loop == 2:
                    if x <= lo or x >= hi:
                        continue
                elif loop == 4:
                    if x == 0 or heads[x] != m:
                        continue
                else:
                    if x == 0 or x == m or heads[x] != h:
                        continue
                hv = base
                for s in range(ns):
                    a = tmpl[t, 3 + 3 * s]
                    p = _pos_of(tmpl[t, 4 + 3 * s], h, m, g, x, n) + tmpl[t, 5 + 3 * s]
                    if p < -1:
                        p = -1
                    elif p > n + 1:
                        p = n + 1
                    hv = _mix(hv, codes[a, p + 1])
                buf[k] = np.int64(_fmix(hv) & umask)
                buf[k + 1] = np.int64(_fmix(hv ^ dd) & umask)
                k += 2
    return k


def reference_arc_ids(codes: np.ndarray, tmpl: np.ndarray, h: int, m: int,
                      heads: np.ndarray, long_attr: int, bits: int) -> list[int]:
    """Pure-Python version of :func:`arc_ids` (slow; the tests' reference)."""
    def mix(hv: int, v: int) -> int:
        return ((hv ^ (v & _MASK64)) * 0x100000001B3) & _MASK64

    def fmix(hv: int) -> int:
        hv ^= hv >> 33
        hv = (hv * 0xFF51AFD7ED558CCD) & _MASK64
        hv ^= hv >> 33
        hv = (hv * 0xC4CEB9FE1A85EC53) & _MASK64
        hv ^= hv >> 33
        return hv

    n = codes.shape[1] - 3
    d = m - h
    dd = (((1 if d > 0 else 2) * 16 + distance_bucket(abs(d)) + 1) * 0x9E3779B97F4A7C15) & _MASK64
    g = int(heads[h]) if len(heads) and h >= 0 else -1
    lo, hi = min(h, m), max(h, m)
    mask = (1 << bits) - 1
    out: list[int] = []
    for t, row in enumerate(tmpl.tolist()):
        ns, cond, loop = row[0], row[1], row[2]
        if cond and long_attr >= 0:
            if not ((cond & 1 and codes[long_attr, h + 1]) or (cond & 2 and codes[long_attr, m + 1])):
                continue
        if loop < 0:
            xs = [-1]
        elif loop == BETWEEN:
            xs = list(range(lo + 1, hi))
        elif loop == CHILD:
            xs = [x for x in range(1, n + 1) if heads[x] == m]
        else:
            xs = [x for x in range(1, n + 1) if x != m and heads[x] == h]
        for x in xs:
            hv = mix(0xCBF29CE484222325, t + 1)
            for s in range(ns):
                a, anchor, off = row[3 + 3 * s: 6 + 3 * s]
                p = {HEAD: h, MOD: m, GRAND: g}.get(anchor, x) + off
                p = min(max(p, -1), n + 1)
                hv = mix(hv, int(codes[a, p + 1]))
            out.append(fmix(hv) & mask)
            out.append(fmix(hv ^ dd) & mask)
    return out


def compile_templates(templates: list[str], attrs: dict[str, int]) -> np.ndarray:
    """Compile template strings to the kernel's table.

    A template is a space-separated list of slots ``anchor[+-1].attr``, e.g.
    ``"h.pos h+1.pos m-1.pos m.pos"``; anchors: h (head), m (modifier), b (each word
    between them), g (grandparent), c (each child of m), s (each sibling of m).
    A template whose slots read attribute ``p5`` (5-character prefix) fires only when
    one of the words it reads is longer than 5 characters (cond bits 1 = head, 2 = mod).
    """
    anchors = {"h": HEAD, "m": MOD, "b": BETWEEN, "g": GRAND, "c": CHILD, "s": SIBLING}
    table = np.zeros((len(templates), 3 + 3 * MAX_SLOTS), dtype=np.int64)
    for t, spec in enumerate(templates):
        slots = spec.split()
        if not 0 <= len(slots) <= MAX_SLOTS:
            raise ValueError(f"template {spec!r}: at most {MAX_SLOTS} slots")
        loop, cond = -1, 0
        table[t, 0] = len(slots)
        for s, slot in enumerate(slots):
            where, _, attr = slot.partition(".")
            anchor = anchors.get(where[0])
            off = int(where[1:]) if len(where) > 1 else 0
            if anchor is None or attr not in attrs or off not in (-1, 0, 1):
                raise ValueError(f"template {spec!r}: bad slot {slot!r}")
            if anchor in LOOP_ANCHORS:
                if loop >= 0 and loop != anchor:
                    raise ValueError(f"template {spec!r}: at most one iterating anchor")
                loop = anchor
            if attr == "p5" and off == 0:
                cond |= 1 if anchor == HEAD else 2 if anchor == MOD else 0
            table[t, 3 + 3 * s: 6 + 3 * s] = (attrs[attr], anchor, off)
        table[t, 1] = cond
        table[t, 2] = loop
    return table
