"""Feature hashing and the generic template kernel shared by arc and label features.

A *template* is a conjunction of token attributes read at positions anchored on the
arc being scored (head ``h``, modifier ``m``, a word ``b`` between them, the
grandparent, a child of ``m``, a sibling of ``m``) with an offset of -2..+2
(positions beyond the sentence read the boundary codes).
A feature id is a 64-bit hash of ``(template id, code_1, ..., code_k)`` reduced to
a block of ``BLOCK`` weights among ``2**bits``; every template fires twice, once
plain (slot 0 of the block) and once conjoined with the attachment direction and
distance bucket (slots 1..14), as MSTParser does: the plain copy is the back-off of
the conjoined one. Keeping both in one cache line halves the memory traffic of
scoring, which is bound by random gathers from the weight vector. With ``spread``
(the default of new feature sets) the slots are rotated by a second part of the
hash, so features sharing a block rarely share a slot (see :func:`_slot`).
Templates of one *family* (those reading the same word-pair attributes, e.g. every
template with ``h.word`` and ``m.word``) can share one block per pair of values, each at
its own rotation (``key_attrs`` of :func:`compile_templates`): word pairs are the rare,
cache-missing features, and one miss then serves the whole family.

Templates are data: an int64 table ``(T, KEY_COL + 1)`` with rows
``[n_slots, cond, loop_anchor, attr_1, anchor_1, offset_1, ..., key]``, interpreted by the
numba kernel :func:`arc_ids` below and, independently, by the pure-Python
:func:`reference_arc_ids` (used by the tests as the slow reference).

Token codes: ``codes[a, p + 1]`` is the integer code of attribute ``a`` at position
``p`` in ``-1 .. n + 1`` (``-1`` and ``n + 1`` are sentence boundaries, 0 the root).
"""
from __future__ import annotations

import numpy as np

from numba import njit

from arboreal._prefetch import prefetch, prefetch_write

MAX_SLOTS = 4
#: column of the template table holding the shared-block key (0: none)
KEY_COL = 3 + 3 * MAX_SLOTS
#: a feature owns a block of BLOCK consecutive weights (one 64-byte cache line in
#: float32): the plain feature at offset 0, its conjunctions with (direction,
#: distance bucket) at offsets 1..14, so scoring both costs one cache miss
BLOCK = 16


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
_LOW = np.uint64(BLOCK - 1)          # rotation / slot bits of a position
_HIGH = np.uint64(_MASK64 ^ (BLOCK - 1))  # block bits of a position
_ZERO = np.uint64(0)


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
def _in_group(tmpl, t, s, grp, key):
    """Slot s of template t is hashed into group grp: 0 head, 1 modifier, 2 iterating
    anchor, 3 grandparent; 4 / 5 the head / modifier slots of its shared-block key."""
    anchor = tmpl[t, 4 + 3 * s]
    if grp >= 4:
        return (key >> s) & 1 == 1 and anchor == grp - 4
    return (anchor if anchor < 2 else (3 if anchor == 3 else 2)) == grp


@njit(cache=True)
def partial_hashes(codes, tmpl, heads):
    """Partial hashes ``G[g, t, p + 1]`` of the slots of template t anchored in group g
    (0 head, 1 modifier, 2 iterating anchor, 3 grandparent) read at position p (-1..n).

    Each is a fully mixed 64-bit value (seeded by template and group), so an arc's
    feature hash is just ``(G[0,t,h+1] ^ G[1,t,m+1] ^ G[2,t,x+1] ^ G[3,t,g+1]) * C``
    and its block the top ``bits`` bits of that. Computed once per sentence, O(T n).

    Rows 4 and 5 hold, for templates with a shared-block key (``tmpl[t, KEY_COL] != 0``,
    see :func:`compile_templates`), the partial hashes of the key's head and modifier
    slots, seeded by the key's family instead of the template: every template of one
    family then finds its block at the same address for the same word pair.
    """
    n = codes.shape[1] - 3
    T = tmpl.shape[0]
    G = np.empty((6, T, n + 2), dtype=np.uint64)
    hv = np.empty(n + 2, dtype=np.uint64)
    for t in range(T):
        _template_hashes(codes, tmpl, t, G[:, t, :], hv)
    return G


@njit(cache=True, inline="always")
def _template_hashes(codes, tmpl, t, Gt, hv):
    """Template t's rows of :func:`partial_hashes`: ``Gt[g, p + 1]`` (Gt (6, >= n+2),
    hv a scratch vector of >= n+2). O(n * slots)."""
    width = codes.shape[1] - 1
    ns = tmpl[t, 0]
    key = tmpl[t, KEY_COL]
    for grp in range(6):
        if grp >= 4 and key == 0:
            Gt[grp, :width] = 0
            continue
        if grp < 4:
            seed = _mix(np.uint64(0xCBF29CE484222325), (t + 1) * 8 + grp)
        else:
            seed = _mix(np.uint64(0x84222325CBF29CE4), (key >> MAX_SLOTS) * 8 + grp)
        # slot-outer, position-inner: each pass is a tight loop over the sentence
        # (the hash of a position mixes its slots in slot order)
        reads = False
        for s in range(ns):
            if not _in_group(tmpl, t, s, grp, key):
                continue
            attr = tmpl[t, 3 + 3 * s]
            off = tmpl[t, 5 + 3 * s]
            if not reads:
                hv[:width] = seed
                reads = True
            for j in range(width):
                q = j + off          # codes column of position j - 1 + off
                q = 0 if q < 0 else (width if q > width else q)
                hv[j] = _mix(hv[j], codes[attr, q])
        if not reads:   # the template reads nothing in this group: one constant
            Gt[grp, :width] = _fmix(seed)
            continue
        for j in range(width):
            Gt[grp, j] = _fmix(hv[j])


@njit(cache=True)
def group_hashes(codes, tmpl, heads):
    """:func:`partial_hashes` for callers in Python (the kernels call that one).

    A separate compiled function on purpose: a cached kernel that contains
    ``partial_hashes`` defines its environment symbol when loaded, and a later
    Python-level call of the same function, loaded from its own cache entry, would
    then box its returned array with that uninitialized environment (numba raises
    "NRT_adapt_ndarray_to_python: descr is NULL").
    """
    return partial_hashes(codes, tmpl, heads)


@njit(cache=True, inline="always")
def _keyed(x, vk, shift):
    """Position of a keyed template's feature: the block of its key's hash ``vk``,
    the rotation inside the block of its own position ``x``."""
    return (_pos(vk, shift) & _HIGH) | (x & _LOW)


@njit(cache=True, inline="always")
def _dd(h, m):
    """Slot of the (direction, distance bucket) conjunction inside a feature's block: 1..14."""
    d = m - h
    if d > 0:
        return 1 + _bucket(d)
    return 8 + _bucket(-d)


@njit(cache=True, inline="always")
def _fires(codes, cond, long_attr, h, m):
    if cond == 0 or long_attr < 0:
        return True
    if (cond & 1) and codes[long_attr, h + 1] != 0:
        return True
    if (cond & 2) and codes[long_attr, m + 1] != 0:
        return True
    return False


@njit(cache=True, inline="always")
def _pos(v, shift):
    """Top ``bits`` bits of a feature's mixed hash: its block (``& ~(BLOCK-1)``) and
    its rotation inside the block (``& (BLOCK-1)``)."""
    return (v * _K) >> shift


@njit(cache=True, inline="always")
def _slot(x, k, spread):
    """Weight index of slot k (0 plain, 1..14 direction/distance) of the feature at ``x``.

    ``spread`` rotates the slots by the feature's own offset inside the block, so two
    features that share a block collide on a slot only by chance (1/BLOCK) instead of
    on all of them; ``spread = 0`` is the unrotated layout of older model files.
    """
    # unsigned arithmetic throughout: an unsigned index needs no negative-index
    # wrap-around test in the gather
    r = x & _LOW if spread else _ZERO
    return (x & _HIGH) + ((r + np.uint64(k)) & _LOW)


@njit(cache=True)
def arc_ids(codes, tmpl, G, h, m, heads, long_attr, bits, buf, spread=0):
    """Write the feature ids of arc (h, m) into ``buf``; return how many.

    codes (A, n+3) int32; tmpl (T, KEY_COL+1) int64; G = partial_hashes(...);
    heads (n+1,) int (read only by templates anchored on the grandparent, children or
    siblings; may be empty otherwise); long_attr: attribute row of the "word longer
    than 5 characters" flag (or -1); weights have 2**bits entries. ``buf`` must hold
    ``2 * (T + T_loop * (n+2))`` ids. Cost O(T + T_loop * n).
    """
    n = codes.shape[1] - 3
    dd = _dd(h, m)
    g = -1
    if heads.shape[0] > 0 and h >= 0:
        g = heads[h]
    lo = h if h < m else m
    hi = m if h < m else h
    shift = np.uint64(64 - bits)
    k = 0
    for t in range(tmpl.shape[0]):
        if not _fires(codes, tmpl[t, 1], long_attr, h, m):
            continue
        loop = tmpl[t, 2]
        hv0 = G[0, t, h + 1] ^ G[1, t, m + 1] ^ G[3, t, g + 1]
        if loop < 0:
            x = _pos(hv0 ^ G[2, t, 0], shift)
            if tmpl[t, KEY_COL] != 0:
                x = _keyed(x, G[4, t, h + 1] ^ G[5, t, m + 1], shift)
            buf[k] = _slot(x, 0, spread)
            buf[k + 1] = _slot(x, dd, spread)
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
                xp = _pos(hv0 ^ G[2, t, x + 1], shift)
                buf[k] = _slot(xp, 0, spread)
                buf[k + 1] = _slot(xp, dd, spread)
                k += 2
    return k


@njit(cache=True, inline="always")
def _sweep_setup(codes, tmpl, G, long_attr):
    """Template lists and between-word classes shared by the sweep kernels.

    Returns ``(plain_t, cond_t, loop_t, cls, rep)``: the non-iterating templates and
    their long-word condition (0 = always fires), the iterating (between) templates,
    and for each of those the class id ``cls[li, p + 1]`` of the between-word hash at
    position p and one representative hash ``rep[li, c]`` per class. O(T n log n).
    """
    n = codes.shape[1] - 3
    T = tmpl.shape[0]
    nloop = 0
    for t in range(T):
        if tmpl[t, 2] >= 0:
            nloop += 1
    plain_t = np.empty(T - nloop, dtype=np.int64)
    cond_t = np.empty(T - nloop, dtype=np.int64)
    loop_t = np.empty(nloop, dtype=np.int64)
    cls = np.empty((nloop, n + 2), dtype=np.int64)
    rep = np.empty((nloop, n + 2), dtype=np.uint64)
    li = 0
    pi = 0
    for t in range(T):
        if tmpl[t, 2] < 0:
            plain_t[pi] = t
            cond_t[pi] = tmpl[t, 1] if long_attr >= 0 else 0
            pi += 1
            continue
        loop_t[li] = t
        col = G[2, t, :].copy()
        order = np.argsort(col)
        c = -1
        prev = np.uint64(0)
        for j in range(n + 2):
            v = col[order[j]]
            if j == 0 or v != prev:
                c += 1
                rep[li, c] = v
                prev = v
            cls[li, order[j]] = c
        li += 1
    return plain_t, cond_t, loop_t, cls, rep


@njit(cache=True, inline="always")
def _sweep_reset(cnt, active, nact):
    """Empty the between-word class counts (start of a head's sweep in one direction)."""
    for li in range(nact.shape[0]):
        for j in range(nact[li]):
            cnt[li, active[li, j]] = 0
        nact[li] = 0


@njit(cache=True, inline="always")
def _sweep_push(cls, cnt, active, nact, m):
    """Word m now lies between the head and the next modifier: count its classes."""
    for li in range(nact.shape[0]):
        c = cls[li, m + 1]
        if cnt[li, c] == 0:
            active[li, nact[li]] = c
            nact[li] += 1
        cnt[li, c] += 1


@njit(cache=True)
def _plain_sides(tmpl, plain_t):
    """Side of each non-iterating template: 1 reads only the head (or nothing),
    2 only the modifier, 0 both. A one-sided template's plain weight and its
    (direction, distance) weights can be gathered once per word instead of once per arc."""
    side = np.zeros(plain_t.shape[0], dtype=np.int64)
    for i in range(plain_t.shape[0]):
        t = plain_t[i]
        head = True
        mod = tmpl[t, 0] > 0
        for s in range(tmpl[t, 0]):
            anchor = tmpl[t, 4 + 3 * s]
            if anchor != HEAD:
                head = False
            if anchor != MOD:
                mod = False
        if head and (tmpl[t, 1] & 2) == 0:
            side[i] = 1
        elif mod and (tmpl[t, 1] & 1) == 0:
            side[i] = 2
    return side


@njit(cache=True, inline="always")
def _long_flags(codes, long_attr, n):
    flags = np.zeros(n + 1, dtype=np.bool_)
    if long_attr >= 0:
        for p in range(n + 1):
            flags[p] = codes[long_attr, p + 1] != 0
    return flags


@njit(cache=True, inline="always")
def _fires_at(cond, hlong, mlong):
    """A template with long-word condition ``cond`` fires on an arc (see compile_templates)."""
    return cond == 0 or ((cond & 1) != 0 and hlong) or ((cond & 2) != 0 and mlong)


@njit(cache=True)
def arc_scores_kernel(codes, tmpl, w, long_attr, bits, spread=0):
    """(n+1, n+1) arc scores for templates without grandparent/child/sibling anchors.

    Equal to summing ``w`` over :func:`arc_ids` of every arc, organised for memory
    throughput (scoring is bound by random gathers from ``w``):

    * one-sided templates (head-only, modifier-only) gather their block of BLOCK
      weights once per word, O(n T_1 BLOCK), instead of twice per arc;
    * two-sided templates run template-outer: the positions of all the sentence's
      arcs are hashed and prefetched first, then gathered, so many cache misses are
      in flight at once instead of the few a hash-then-load loop keeps;
    * iterating (between) templates are summed by class: for a fixed head the
      modifier sweeps outwards while counts of the distinct between-word hashes are
      kept, so an arc costs O(#distinct classes between) instead of O(distance).

    :func:`arc_scores_batch_kernel` computes the same scores for many sentences, and
    :func:`arc_scores_rows_kernel` the rows of a range of heads.
    """
    n = codes.shape[1] - 3
    out = np.zeros((n + 1, n + 1))
    arc_scores_rows_kernel(codes, tmpl, w, long_attr, bits, spread, 0, n + 1, out)
    return out


@njit(cache=True, nogil=True)
def arc_scores_rows_kernel(codes, tmpl, w, long_attr, bits, spread, h0, h1, out):
    """Rows h0..h1-1 of :func:`arc_scores_kernel`'s scores, added to ``out`` (n+1, n+1),
    which is zero in those rows on entry; other rows untouched. The same additions in
    the same order per arc, so the rows equal the whole kernel's to the bit: a long
    sentence can be scored in bounded chunks of heads (memory O((h1 - h0) n) besides
    ``out``, and a return to Python between chunks). Runs without the GIL, so chunks
    of one sentence can be scored by several threads at once."""
    n = codes.shape[1] - 3
    G = partial_hashes(codes, tmpl, np.zeros(0, dtype=np.int64))
    shift = np.uint64(64 - bits)
    dd = _dd_table(n, h0, h1)
    xs = np.empty((h1 - h0, n + 1), dtype=np.uint64)
    for t in _two_sided(tmpl):
        _score_two_sided(codes, tmpl, t, G[:, t, :], w, long_attr, n, shift, spread, dd, xs,
                         out, h0, h1)
    for h in range(h0, h1):
        out[h, h] = 0.0
    _finish_scores(codes, tmpl, G, w, long_attr, shift, spread, out, h0, h1)


@njit(cache=True)
def arc_scores_batch_kernel(flat, starts, tmpl, w, long_attr, bits, spread, out):
    """:func:`arc_scores_kernel` for a batch of sentences, same results to the bit:
    sentence b's token codes are ``flat[:, starts[b]:starts[b+1]]`` and its scores go
    to ``out[b, :n+1, :n+1]`` (out (B, N+1, N+1) float64, zero on entry).

    The two-sided templates run template-outer over the whole batch: the weights one
    template touches in a batch (far fewer than the table, for templates over tags)
    then stay in cache while its arcs are scored, where one sentence at a time
    cycles through every template's share of the table. Per arc the templates are
    still summed in table order, so the scores equal the per-sentence kernel's.
    """
    B = starts.shape[0] - 1
    shift = np.uint64(64 - bits)
    Gt, hv, dd, xs = _batch_scratch(starts)
    for t in _two_sided(tmpl):
        for b in range(B):
            codes = flat[:, starts[b]:starts[b + 1]]
            n = codes.shape[1] - 3
            _template_hashes(codes, tmpl, t, Gt, hv)
            _score_two_sided(codes, tmpl, t, Gt, w, long_attr, n, shift, spread, dd, xs,
                             out[b], 0, n + 1)
    for b in range(B):
        codes = flat[:, starts[b]:starts[b + 1]]
        n = codes.shape[1] - 3
        for h in range(n + 1):
            out[b, h, h] = 0.0
        G = partial_hashes(codes, tmpl, np.zeros(0, dtype=np.int64))
        _finish_scores(codes, tmpl, G, w, long_attr, shift, spread, out[b], 0, n + 1)


@njit(cache=True)
def _batch_scratch(starts):
    """Scratch of the batch kernels, sized for the longest sentence (n words, n + 3
    columns of ``flat``; width = n + 2): one template's partial hashes (6, width), a
    hash vector (width,), the (direction, distance) slots and the arc positions, both
    (n+1, n+1)."""
    width = 0
    for b in range(starts.shape[0] - 1):
        width = max(width, starts[b + 1] - starts[b] - 1)
    side = max(width - 1, 0)
    return (np.empty((6, width), dtype=np.uint64), np.empty(width, dtype=np.uint64),
            _dd_table(side - 1 if side > 0 else 0, 0, side), np.empty((side, side), dtype=np.uint64))


@njit(cache=True)
def _two_sided(tmpl):
    """Indices of the non-iterating templates that read both the head and the modifier
    side (in table order): the ones scored per arc."""
    plain_t = np.flatnonzero(tmpl[:, 2] < 0)
    return plain_t[_plain_sides(tmpl, plain_t) == 0]


@njit(cache=True)
def _dd_table(n, h0, h1):
    """``dd[h - h0, m]``: the (direction, distance) slot of arc (h, m) for heads h in
    h0..h1-1 and m in 0..n (0 on the diagonal), computed once per kernel call instead
    of once per template; shape (h1 - h0, n + 1)."""
    dd = np.zeros((max(h1 - h0, 0), n + 1), dtype=np.int64)
    for h in range(h0, h1):
        for m in range(n + 1):
            if m != h:
                dd[h - h0, m] = _dd(h, m)
    return dd


@njit(cache=True, inline="always")
def _two_sided_hashes(tmpl, t, Gt, n, shift, xs, h0, h1):
    """``xs[h - h0, m]``: the weight position (block and rotation, :func:`_pos`) of
    two-sided template t on arc (h, m), h = h0..h1-1, m = 1..n; Gt = its partial hashes
    (6, n+2). Plain loops over m (no condition, no load from the table), which the
    compiler vectorizes."""
    keyed = tmpl[t, KEY_COL] != 0
    base = Gt[3, 0] ^ Gt[2, 0]
    g1 = Gt[1]
    g5 = Gt[5]
    for h in range(h0, h1):
        hx = Gt[0, h + 1] ^ base
        xr = xs[h - h0]
        if keyed:
            hk = Gt[4, h + 1]
            for m in range(1, n + 1):
                xr[m] = _keyed(_pos(hx ^ g1[m + 1], shift), hk ^ g5[m + 1], shift)
        else:
            for m in range(1, n + 1):
                xr[m] = _pos(hx ^ g1[m + 1], shift)


@njit(cache=True, inline="always")
def _two_sided_positions(codes, tmpl, t, Gt, w, long_attr, n, shift, spread, dd, xs, h0, h1):
    """:func:`_two_sided_hashes` of heads h0..h1-1, then the weights of every arc where
    template t fires prefetched: the plain and the (direction, distance) weight, one
    cache line in float32, often two in float64; dd a :func:`_dd_table` of those heads
    and >= n. Hashing every arc before gathering any keeps many cache misses in flight
    (see :mod:`arboreal._prefetch`)."""
    _two_sided_hashes(tmpl, t, Gt, n, shift, xs, h0, h1)
    cond = tmpl[t, 1] if long_attr >= 0 else 0
    two_lines = w.itemsize > 4
    for h in range(h0, h1):
        xr = xs[h - h0]
        ddr = dd[h - h0]
        hfires = cond == 0 or ((cond & 1) != 0 and codes[long_attr, h + 1] != 0)
        for m in range(1, n + 1):
            if hfires or ((cond & 2) != 0 and codes[long_attr, m + 1] != 0):
                prefetch(w, _slot(xr[m], 0, spread))
                if two_lines:
                    prefetch(w, _slot(xr[m], ddr[m], spread))


@njit(cache=True, inline="always")
def _score_two_sided(codes, tmpl, t, Gt, w, long_attr, n, shift, spread, dd, xs, out, h0, h1):
    """Add two-sided template t's weights of every arc of heads h0..h1-1 to ``out``
    (>= n+1, >= n+1), the diagonal included (callers zero it): positions hashed and
    prefetched first (:func:`_two_sided_positions`), then gathered row by row."""
    _two_sided_positions(codes, tmpl, t, Gt, w, long_attr, n, shift, spread, dd, xs, h0, h1)
    for h in range(h0, h1):
        _two_sided_row(codes, tmpl, t, w, long_attr, h, n, spread, dd[h - h0], out[h], xs[h - h0])


@njit(cache=True, inline="always")
def _two_sided_row(codes, tmpl, t, w, long_attr, h, n, spread, ddrow, row, xrow):
    """``row[m] += w(plain) + w(direction, distance)`` of two-sided template t on every
    arc (h, m), m = 1..n, where it fires (m = h included: callers zero it);
    xrow = the positions of :func:`_two_sided_positions` for head h, ddrow its slots."""
    cond = tmpl[t, 1] if long_attr >= 0 else 0
    if cond == 0 or ((cond & 1) != 0 and codes[long_attr, h + 1] != 0):
        for m in range(1, n + 1):
            x = xrow[m]
            row[m] += w[_slot(x, 0, spread)] + w[_slot(x, ddrow[m], spread)]
    elif (cond & 2) != 0:
        for m in range(1, n + 1):
            if codes[long_attr, m + 1] != 0:
                x = xrow[m]
                row[m] += w[_slot(x, 0, spread)] + w[_slot(x, ddrow[m], spread)]


@njit(cache=True)
def _finish_scores(codes, tmpl, G, w, long_attr, shift, spread, out, h0, h1):
    """Add the one-sided and the iterating (between) templates of the arcs of heads
    h0..h1-1 to ``out`` (n+1, n+1), which holds the two-sided templates' sums (see
    :func:`arc_scores_kernel`)."""
    n = codes.shape[1] - 3
    plain_t, cond_t, loop_t, cls, rep = _sweep_setup(codes, tmpl, G, long_attr)
    side = _plain_sides(tmpl, plain_t)
    islong = _long_flags(codes, long_attr, n)
    # modifier-only templates: msum[m, k] = sum of slot k of their blocks at m
    msum = np.zeros((n + 1, BLOCK))
    for i in range(plain_t.shape[0]):
        if side[i] != 2:
            continue
        t = plain_t[i]
        hx = G[0, t, 0] ^ G[3, t, 0] ^ G[2, t, 0]
        for m in range(1, n + 1):
            if _fires_at(cond_t[i], False, islong[m]):
                x = _pos(hx ^ G[1, t, m + 1], shift)
                for k in range(BLOCK - 1):
                    msum[m, k] += w[_slot(x, k, spread)]
    hsum = np.zeros(BLOCK)
    for h in range(h0, h1):
        hsum[:] = 0.0
        for i in range(plain_t.shape[0]):
            if side[i] == 1 and _fires_at(cond_t[i], islong[h], False):
                t = plain_t[i]
                x = _pos(G[0, t, h + 1] ^ G[3, t, 0] ^ G[2, t, 0] ^ G[1, t, 0], shift)
                for k in range(BLOCK - 1):
                    hsum[k] += w[_slot(x, k, spread)]
        for m in range(1, n + 1):
            if m != h:
                d = _dd(h, m)
                out[h, m] = out[h, m] + hsum[0] + hsum[d] + msum[m, 0] + msum[m, d]
    nloop = loop_t.shape[0]
    if nloop == 0:
        return
    cnt = np.zeros((nloop, n + 2), dtype=np.int64)
    active = np.empty((nloop, n + 2), dtype=np.int64)
    nact = np.zeros(nloop, dtype=np.int64)
    for h in range(h0, h1):
        for direction in range(2):
            step = 1 if direction == 0 else -1
            m = h + step
            _sweep_reset(cnt, active, nact)
            while 1 <= m <= n:
                dd = _dd(h, m)
                s = 0.0
                for li in range(nloop):
                    t = loop_t[li]
                    hv0 = G[0, t, h + 1] ^ G[1, t, m + 1] ^ G[3, t, 0]
                    for j in range(nact[li]):
                        c = active[li, j]
                        x = _pos(hv0 ^ rep[li, c], shift)
                        s += cnt[li, c] * (w[_slot(x, 0, spread)] + w[_slot(x, dd, spread)])
                out[h, m] += s
                _sweep_push(cls, cnt, active, nact, m)
                m += step


@njit(cache=True)
def accumulate_dense_kernel(codes, tmpl, coef, out, scale, long_attr, bits, allowed, spread=0):
    """``out += scale * sum_{h,m} coef[h, m] f(h, m)`` for a dense coef (n+1, n+1).

    The exact adjoint of :func:`arc_scores_kernel` (same hashing, same template
    conditions, same class-count sweep over in-between words; two-sided templates
    template-outer, hashed and prefetched before they are updated; the rest
    arc-outer), so an arc costs O(T + T_between * #distinct classes between)
    instead of O(T + T_between * distance) as with :func:`arc_ids`. Column 0 and
    the diagonal of coef are ignored. Buckets masked by the cut-off (``allowed``
    non-empty and False there) are skipped.
    """
    n = codes.shape[1] - 3
    G = partial_hashes(codes, tmpl, np.zeros(0, dtype=np.int64))
    shift = np.uint64(64 - bits)
    dd = _dd_table(n, 0, n + 1)
    xs = np.empty((n + 1, n + 1), dtype=np.uint64)
    for t in _two_sided(tmpl):
        _accumulate_two_sided(codes, tmpl, t, G[:, t, :], coef, out, scale, long_attr, shift,
                              allowed, spread, dd, xs)
    _accumulate_arcs(codes, tmpl, G, coef, out, scale, long_attr, shift, allowed, spread)


@njit(cache=True)
def accumulate_dense_batch_kernel(flat, starts, tmpl, coef, out, scale, long_attr, bits,
                                  allowed, spread):
    """:func:`accumulate_dense_kernel` for a batch of sentences: sentence b's token codes
    are ``flat[:, starts[b]:starts[b+1]]``, its coefficients ``coef[b, :n+1, :n+1]``
    (coef (B, N+1, N+1)). As in :func:`arc_scores_batch_kernel`, the two-sided
    templates run template-outer over the batch, so the part of ``out`` one template
    updates stays in cache; the other templates go sentence by sentence. Equal to the
    per-sentence kernel up to the order of floating-point additions into ``out``.
    """
    B = starts.shape[0] - 1
    shift = np.uint64(64 - bits)
    Gt, hv, dd, xs = _batch_scratch(starts)
    for t in _two_sided(tmpl):
        for b in range(B):
            codes = flat[:, starts[b]:starts[b + 1]]
            _template_hashes(codes, tmpl, t, Gt, hv)
            _accumulate_two_sided(codes, tmpl, t, Gt, coef[b], out, scale, long_attr, shift,
                                  allowed, spread, dd, xs)
    for b in range(B):
        codes = flat[:, starts[b]:starts[b + 1]]
        G = partial_hashes(codes, tmpl, np.zeros(0, dtype=np.int64))
        _accumulate_arcs(codes, tmpl, G, coef[b], out, scale, long_attr, shift, allowed, spread)


@njit(cache=True, inline="always")
def _add_pair(out, f0, f1, v, allowed, use_mask):
    """``out[f0] += v; out[f1] += v``, skipping ids the cut-off mask disallows."""
    if use_mask:
        if allowed[f0]:
            out[f0] += v
        if allowed[f1]:
            out[f1] += v
    else:
        out[f0] += v
        out[f1] += v


@njit(cache=True, inline="always")
def _accumulate_two_sided(codes, tmpl, t, Gt, coef, out, scale, long_attr, shift, allowed,
                          spread, dd, xs):
    """``out += scale * coef[h, m]`` at two-sided template t's two weights of every arc
    (h, m) where it fires (Gt its partial hashes, dd a :func:`_dd_table` of >= n,
    xs scratch (>= n+1, >= n+1)). Two passes, as in scoring: hash every arc and
    prefetch its line, then update, so the misses overlap."""
    n = codes.shape[1] - 3
    cond = tmpl[t, 1] if long_attr >= 0 else 0
    use_mask = allowed.shape[0] > 0
    skip = ~np.uint64(0)       # no weight position has all bits set
    _two_sided_hashes(tmpl, t, Gt, n, shift, xs, 0, n + 1)
    for h in range(n + 1):
        hlong = long_attr >= 0 and codes[long_attr, h + 1] != 0
        for m in range(1, n + 1):
            if m == h or coef[h, m] == 0.0:
                xs[h, m] = skip
                continue
            if cond != 0:
                mlong = codes[long_attr, m + 1] != 0
                if not (((cond & 1) and hlong) or ((cond & 2) and mlong)):
                    xs[h, m] = skip
                    continue
            prefetch_write(out, _slot(xs[h, m], 0, spread))
            prefetch_write(out, _slot(xs[h, m], dd[h, m], spread))
    for h in range(n + 1):
        for m in range(1, n + 1):
            x = xs[h, m]
            if x == skip:
                continue
            _add_pair(out, _slot(x, 0, spread), _slot(x, dd[h, m], spread),
                      scale * coef[h, m], allowed, use_mask)


@njit(cache=True, inline="always")
def _add_block(out, x, sums, spread, allowed, use_mask):
    """``out[slot k of the block at x] += sums[k]`` for the non-zero sums, k = 0..14."""
    for k in range(BLOCK - 1):
        v = sums[k]
        if v != 0.0:
            f = _slot(x, k, spread)
            if not use_mask or allowed[f]:
                out[f] += v


@njit(cache=True)
def _accumulate_arcs(codes, tmpl, G, coef, out, scale, long_attr, shift, allowed, spread):
    """The one-sided and iterating (between) templates of :func:`accumulate_dense_kernel`
    (the two-sided ones are :func:`_accumulate_two_sided`'s).

    A one-sided template's block depends on one word only, so its updates are the
    word's coefficient sums per (direction, distance) slot: O(n^2) sums, then
    O(n T_1 BLOCK) updates instead of O(n^2 T_1). The between templates go arc by
    arc with the class-count sweep.
    """
    n = codes.shape[1] - 3
    use_mask = allowed.shape[0] > 0
    plain_t, cond_t, loop_t, cls, rep = _sweep_setup(codes, tmpl, G, long_attr)
    side = _plain_sides(tmpl, plain_t)
    islong = _long_flags(codes, long_attr, n)
    # hsum[h, k] / msum[m, k]: coefficients of head h's / modifier m's arcs in slot k
    # (k = 0: all of them; 1..14: those with that direction and distance)
    hsum = np.zeros((n + 1, BLOCK))
    msum = np.zeros((n + 1, BLOCK))
    for h in range(n + 1):
        for m in range(1, n + 1):
            if m != h:
                v = scale * coef[h, m]
                if v != 0.0:
                    k = _dd(h, m)
                    hsum[h, 0] += v
                    hsum[h, k] += v
                    msum[m, 0] += v
                    msum[m, k] += v
    for i in range(plain_t.shape[0]):
        t = plain_t[i]
        if side[i] == 1:
            hc = G[3, t, 0] ^ G[2, t, 0] ^ G[1, t, 0]
            for h in range(n + 1):
                if _fires_at(cond_t[i], islong[h], False):
                    _add_block(out, _pos(G[0, t, h + 1] ^ hc, shift), hsum[h], spread,
                               allowed, use_mask)
        elif side[i] == 2:
            hc = G[0, t, 0] ^ G[3, t, 0] ^ G[2, t, 0]
            for m in range(1, n + 1):
                if _fires_at(cond_t[i], False, islong[m]):
                    _add_block(out, _pos(hc ^ G[1, t, m + 1], shift), msum[m], spread,
                               allowed, use_mask)
    nloop = loop_t.shape[0]
    if nloop == 0:
        return
    cnt = np.zeros((nloop, n + 2), dtype=np.int64)
    active = np.empty((nloop, n + 2), dtype=np.int64)
    nact = np.zeros(nloop, dtype=np.int64)
    for h in range(n + 1):
        for direction in range(2):
            step = 1 if direction == 0 else -1
            m = h + step
            _sweep_reset(cnt, active, nact)
            while 1 <= m <= n:
                v = scale * coef[h, m]
                if v != 0.0:
                    dd = _dd(h, m)
                    for li in range(nloop):
                        t = loop_t[li]
                        hv0 = G[0, t, h + 1] ^ G[1, t, m + 1] ^ G[3, t, 0]
                        for j in range(nact[li]):
                            c = active[li, j]
                            xp = _pos(hv0 ^ rep[li, c], shift)
                            _add_pair(out, _slot(xp, 0, spread), _slot(xp, dd, spread),
                                      v * cnt[li, c], allowed, use_mask)
                _sweep_push(cls, cnt, active, nact, m)
                m += step


def reference_arc_ids(codes: np.ndarray, tmpl: np.ndarray, h: int, m: int,
                      heads: np.ndarray, long_attr: int, bits: int, spread: bool = False) -> list[int]:
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
    dd = 1 + distance_bucket(d) if d > 0 else 8 + distance_bucket(-d)
    g = int(heads[h]) if len(heads) and h >= 0 else -1
    lo, hi = min(h, m), max(h, m)
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
        key = row[KEY_COL]
        kv = 0
        for grp, p in ((4, h), (5, m)) if key else ():
            hv = mix(0x84222325CBF29CE4, (key >> MAX_SLOTS) * 8 + grp)
            for s in range(ns):
                a, anchor, off = row[3 + 3 * s: 6 + 3 * s]
                if (key >> s) & 1 and anchor == grp - 4:
                    hv = mix(hv, int(codes[a, min(max(p + off, -1), n + 1) + 1]))
            kv ^= fmix(hv)
        for x in xs:
            v = 0
            for grp, p in ((0, h), (1, m), (3, g), (2, x)):
                hv = mix(0xCBF29CE484222325, (t + 1) * 8 + grp)
                for s in range(ns):
                    a, anchor, off = row[3 + 3 * s: 6 + 3 * s]
                    ag = anchor if anchor < 2 else (3 if anchor == GRAND else 2)
                    if ag != grp:
                        continue
                    q = min(max(p + off, -1), n + 1)
                    hv = mix(hv, int(codes[a, q + 1]))
                v ^= fmix(hv)
            x = ((v * 0x9E3779B97F4A7C15) & _MASK64) >> (64 - bits)
            if key:
                kx = ((kv * 0x9E3779B97F4A7C15) & _MASK64) >> (64 - bits)
                x = (kx & ~(BLOCK - 1)) | (x & (BLOCK - 1))
            base, r = x & ~(BLOCK - 1), (x & (BLOCK - 1)) if spread else 0
            out.append(base + r)
            out.append(base + (r + dd) % BLOCK)
    return out


def compile_templates(templates: list[str], attrs: dict[str, int],
                      key_attrs: tuple[str, ...] = ()) -> np.ndarray:
    """Compile template strings to the kernel's table.

    A template is a space-separated list of slots ``anchor[+-1].attr``, e.g.
    ``"h.pos h+1.pos m-1.pos m.pos"``; anchors: h (head), m (modifier), b (each word
    between them), g (grandparent), c (each child of m), s (each sibling of m).
    A template whose slots read attribute ``p5`` (5-character prefix) fires only when
    one of the words it reads is longer than 5 characters (cond bits 1 = head, 2 = mod).

    Shared blocks (``key_attrs``, e.g. ``("word", "lemma")``): a template without an
    iterating anchor that reads a key attribute at the head itself and one at the
    modifier itself gets as key those slots; all templates with the same key slots
    (a *family*, e.g. every template reading ``h.word`` and ``m.word``) place their
    features in the block addressed by the key's values, each at its own rotation.
    Scoring an arc then fetches one cache line per family instead of one per
    template (word-pair templates are the rare, cache-missing ones). Stored in column
    ``KEY_COL`` as ``family << MAX_SLOTS | slot mask`` (0: no key). Needs ``spread``.
    """
    anchors = {"h": HEAD, "m": MOD, "b": BETWEEN, "g": GRAND, "c": CHILD, "s": SIBLING}
    table = np.zeros((len(templates), KEY_COL + 1), dtype=np.int64)
    for t, spec in enumerate(templates):
        slots = template_slots(spec, anchors, attrs, MAX_SLOTS)
        loop, cond = -1, 0
        table[t, 0] = len(slots)
        for s, (anchor, off, attr) in enumerate(slots):
            if anchor in LOOP_ANCHORS:
                if loop >= 0 and loop != anchor:
                    raise ValueError(f"template {spec!r}: at most one iterating anchor")
                loop = anchor
            if attr == "p5" and off == 0:
                cond |= 1 if anchor == HEAD else 2 if anchor == MOD else 0
            table[t, 3 + 3 * s: 6 + 3 * s] = (attrs[attr], anchor, off)
        table[t, 1] = cond
        table[t, 2] = loop
        if key_attrs and loop < 0:
            table[t, KEY_COL] = _family_key(spec.split(), attrs, key_attrs)
    return table


def template_slots(spec: str, anchors: dict[str, int], attrs: dict[str, int],
                   max_slots: int) -> list[tuple[int, int, str]]:
    """The slots ``anchor[+-offset].attr`` of template ``spec`` as ``(anchor code,
    offset, attribute name)``; ValueError naming the template for a slot whose anchor
    is not in ``anchors``, whose attribute is not in ``attrs`` or whose offset is
    outside -2..2, and for more than ``max_slots`` slots. The one parser of the
    template language (arc, label and higher-order part templates)."""
    slots = spec.split()
    if len(slots) > max_slots:
        raise ValueError(f"template {spec!r}: at most {max_slots} slots")
    out = []
    for slot in slots:
        where, _, attr = slot.partition(".")
        anchor = anchors.get(where[:1])
        try:
            off = int(where[1:]) if len(where) > 1 else 0
        except ValueError:
            off = None
        if anchor is None or attr not in attrs or off not in (-2, -1, 0, 1, 2):
            raise ValueError(f"template {spec!r}: bad slot {slot!r}")
        out.append((anchor, off, attr))
    return out


def _family_key(slots: list[str], attrs: dict[str, int], key_attrs: tuple[str, ...]) -> int:
    """``family << MAX_SLOTS | mask`` of a template's shared-block key, 0 if it has none."""
    mask, sides, parts = 0, set(), []
    for s, slot in enumerate(slots):
        where, _, attr = slot.partition(".")
        if where in ("h", "m") and attr in key_attrs:
            mask |= 1 << s
            sides.add(where)
            parts.append((where, attrs[attr]))
    if sides != {"h", "m"}:
        return 0
    family = 0
    for where, a in sorted(set(parts)):   # the same slots in any order: the same family
        family = family * 64 + (a + 1) * 2 + (where == "m")
    return (family << MAX_SLOTS) | mask
