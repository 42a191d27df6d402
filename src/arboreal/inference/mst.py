"""Non-projective argmax: maximum spanning arborescence (Chu-Liu-Edmonds).

Method and complexity
---------------------
Tarjan's (1977) path-growing form of Chu-Liu-Edmonds on a dense graph,
with the Camerini et al. (1979) expansion: grow a path by repeatedly taking
the best incoming arc of the node at its end; when the path closes a cycle,
contract the cycle into one node in place; when the path reaches the root
or an already finished node, finish the path.  Incoming weights are kept
as one row per (super)node indexed by the ORIGINAL head, so contracting a
cycle only merges rows (``max_c w(u, c) - w(in(c))``, contiguous) and
relabels its members in a node -> supernode map; arcs between members of
one supernode are skipped while scanning, so outgoing arcs never need
merging.  Each contraction of k nodes costs O((k + 1) n) and removes k - 1
nodes, and there are at most 2n best-incoming scans of O(n) each, so the
whole algorithm is O(n^2) time and O(n^2) memory, with no recursion
(1,000-word sentences are fine).  Contractions are recorded in a forest and
expanded at the end in O(n) by walking from each chosen arc's target up to
its forest root.

Single root (exact, after Stanojević & Cohen 2021 / Zmigrod et al. 2020):
every root arc carries a penalty that is larger than any difference of tree
scores, so the unconstrained optimum takes exactly one root arc whenever a
single-root tree exists.  Instead of adding a huge float (which would cost
precision), every weight is a lexicographic pair (penalty, score) compared
penalty first; both parts stay exact (integer penalties, float64 scores),
and CLE is correct for weights in any ordered abelian group.  A forbidden
(-inf) arc gets penalty n+1, which outweighs any number of root arcs, so
forbidden arcs are used only when no tree avoids them -- then a ValueError
says that no tree with a finite score exists.

Ties are broken deterministically (smallest node index first).  One numba
kernel runs over a whole batch; work arrays are allocated once per batch.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from arboreal.inference.eisner import (_decode_plain_single, _is_plain_single, _no_tree_error,
                                       _prepare, _single_layout)

_NEG = -np.inf


@njit(cache=True)
def _cle_kernel(scores, lengths, single_root, heads, status):
    B = scores.shape[0]
    N1 = scores.shape[1]
    # Row v of (WP, WS) holds the (adjusted) weights of the arcs u -> v for
    # every ORIGINAL head u; v is a slot: an original node or the slot of a
    # contracted supernode (one of its members' slots).  rep[u] is the slot
    # currently holding original node u, so a scan of row v skips u with
    # rep[u] == v, and no column (outgoing) merging is ever needed.
    # MOD[v, u]: original modifier realising the arc u -> v (merged rows only;
    # an original row's modifier is v itself).
    WS = np.empty((N1, N1))
    WP = np.empty((N1, N1), dtype=np.int32)
    MOD = np.empty((N1, N1), dtype=np.int32)
    merged = np.empty(N1, dtype=np.bool_)
    rep = np.empty(N1, dtype=np.int32)
    state = np.empty(N1, dtype=np.int8)      # 0 unseen, 1 on path, 2 finished
    incyc = np.zeros(N1, dtype=np.bool_)
    node = np.empty(N1, dtype=np.int32)      # forest node held by each slot
    path = np.empty(N1, dtype=np.int32)
    M = 2 * N1
    parent = np.empty(M, dtype=np.int32)
    in_arc = np.empty(M, dtype=np.int32)
    in_s = np.empty(M)
    in_p = np.empty(M, dtype=np.int32)
    ch_start = np.empty(M, dtype=np.int32)
    ch_cnt = np.zeros(M, dtype=np.int32)
    children = np.empty(M, dtype=np.int32)
    stack = np.empty(M, dtype=np.int32)
    for b in range(B):
        n = lengths[b]
        heads[b, :] = -1
        status[b] = 0
        if n == 0:
            continue
        forb = n + 1 if single_root else 1
        root_pen = 1 if single_root else 0
        for v in range(1, n + 1):
            for u in range(n + 1):
                x = np.float64(scores[b, u, v])
                p = root_pen if u == 0 else 0
                if x == _NEG:
                    p += forb
                    x = 0.0
                WS[v, u] = x
                WP[v, u] = p
        for v in range(n + 1):
            rep[v] = v
            merged[v] = False
            state[v] = 0
            node[v] = v
            parent[v] = -1
            ch_cnt[v] = 0
        state[0] = 2
        next_id = n + 1
        n_child = 0
        for v0 in range(1, n + 1):
            if state[v0] != 0:
                continue
            path[0] = v0
            plen = 1
            state[v0] = 1
            while True:
                v = path[plen - 1]
                bu = -1
                bp = 0
                bs = 0.0
                for u in range(n + 1):
                    if rep[u] == v:
                        continue
                    p = WP[v, u]
                    s = WS[v, u]
                    if bu < 0 or p < bp or (p == bp and s > bs):
                        bu = u
                        bp = p
                        bs = s
                x = node[v]
                mod = MOD[v, bu] if merged[v] else v
                in_arc[x] = bu * N1 + mod
                in_p[x] = bp
                in_s[x] = bs
                bslot = rep[bu]
                if state[bslot] == 2:
                    for q in range(plen):
                        state[path[q]] = 2
                    break
                if state[bslot] == 0:
                    path[plen] = bslot
                    plen += 1
                    state[bslot] = 1
                    continue
                # bslot is on the path: path[j..plen-1] is a cycle; contract
                # it into the slot r0 = bslot
                j = plen - 1
                while path[j] != bslot:
                    j -= 1
                r0 = bslot
                sid = next_id
                next_id += 1
                parent[sid] = -1
                ch_start[sid] = n_child
                ch_cnt[sid] = plen - j
                for q in range(j, plen):
                    c = path[q]
                    incyc[c] = True
                    parent[node[c]] = sid
                    children[n_child] = node[c]
                    n_child += 1
                # incoming arcs of the cycle: max_c w(u, c) - w(in(c)),
                # r0's own row first (it is overwritten in place)
                cp = in_p[node[r0]]
                cs = in_s[node[r0]]
                was_merged = merged[r0]
                for u in range(n + 1):
                    WP[r0, u] -= cp
                    WS[r0, u] -= cs
                    if not was_merged:
                        MOD[r0, u] = r0
                merged[r0] = True
                for q in range(j + 1, plen):
                    c = path[q]
                    cp = in_p[node[c]]
                    cs = in_s[node[c]]
                    cm = merged[c]
                    for u in range(n + 1):
                        if incyc[rep[u]]:
                            continue
                        p = WP[c, u] - cp
                        s = WS[c, u] - cs
                        if p < WP[r0, u] or (p == WP[r0, u] and s > WS[r0, u]):
                            WP[r0, u] = p
                            WS[r0, u] = s
                            MOD[r0, u] = MOD[c, u] if cm else c
                for u in range(n + 1):
                    if incyc[rep[u]]:
                        rep[u] = r0
                for q in range(j, plen):
                    incyc[path[q]] = False
                node[r0] = sid
                path[j] = r0
                plen = j + 1
        # expand: every forest root's chosen arc is in the tree; walking from
        # its target leaf up to the root frees the siblings on the way, whose
        # own (cycle) arcs are then in the tree too.
        sp = 0
        for x in range(1, next_id):
            if parent[x] == -1:
                stack[sp] = x
                sp += 1
        while sp > 0:
            sp -= 1
            r = stack[sp]
            code = in_arc[r]
            a = code // N1
            m = code - a * N1
            heads[b, m] = a
            y = m
            while y != r:
                p = parent[y]
                for q in range(ch_start[p], ch_start[p] + ch_cnt[p]):
                    z = children[q]
                    if z != y:
                        stack[sp] = z
                        sp += 1
                y = p
        # a forbidden arc, or several root arcs in single-root mode, means
        # that no (single-root) tree with a finite score exists
        n_root = 0
        for m in range(1, n + 1):
            h = heads[b, m]
            if h == 0:
                n_root += 1
            if scores[b, h, m] == _NEG:
                status[b] = 1
        if single_root and n_root != 1:
            status[b] = 1


@njit(cache=True)
def _cle_single(scores, single_root):
    """Validate and decode one (n+1, n+1) float64 sentence: (heads, status) with status
    0 ok, 1 no finite tree, 2 NaN / +inf scores."""
    batch, lengths, heads, finite = _single_layout(scores)
    status = np.full(1, 0 if finite else 2, dtype=np.int8)
    if finite:
        _cle_kernel(batch, lengths, single_root, heads, status)
    return heads[0], int(status[0])


def chu_liu_edmonds(scores: np.ndarray, single_root: bool = True,
                    lengths: np.ndarray | None = None) -> np.ndarray:
    """Best non-projective tree (maximum spanning arborescence), O(n^2).

    Parameters
    ----------
    scores : (n+1, n+1) or (B, N+1, N+1) float array; ``scores[h, m]`` scores
        the arc h -> m.  Column 0 and the diagonal are ignored; ``-inf``
        forbids an arc.  NaN / +inf raise ValueError.
    single_root : exactly one word attaches to the root (default, exact) or
        any number.
    lengths : (B,) sentence lengths for a batch (default: all N).

    Returns
    -------
    heads : (n+1,) int64 with heads[0] = -1, or (B, N+1) with -1 in padding.
    Raises ValueError if no tree with a finite score exists.
    """
    if _is_plain_single(scores, lengths):
        return _decode_plain_single(_cle_single, scores, single_root, False)
    batch, lengths, single = _prepare(scores, lengths)
    B, N1 = batch.shape[0], batch.shape[1]
    heads = np.empty((B, N1), dtype=np.int64)
    status = np.empty(B, dtype=np.int8)
    _cle_kernel(batch, lengths, bool(single_root), heads, status)
    if status.any():
        raise _no_tree_error(int(np.argmax(status)), single, single_root, False)
    return heads[0] if single else heads


# --------------------------------------------------------------------------
# k-best non-projective trees
# --------------------------------------------------------------------------
# Lawler's (1972) partition of the tree space (as used by Camerini, Fratta &
# Maffioli 1980 and Hall 2007): the best tree T of a subproblem (some arcs
# forced, some forbidden) is output, and the rest of the subproblem is split
# into disjoint children, one per free arc e_j of T: e_1..e_{j-1} forced and
# e_j forbidden.  Each child's best tree comes from the constrained CLE above
# (a forced arc h -> m forbids every other head of m; -inf marks a forbidden
# arc), and a heap yields subproblems best first, so the k trees come out
# exact, distinct and in score order.  Forced heads are kept per subproblem;
# forbidden arcs are one per subproblem, found by walking up its ancestors.

@njit(cache=True)
def _heap_push(keys, ids, size, key, ident):
    i = size
    keys[i] = key
    ids[i] = ident
    while i > 0:
        p = (i - 1) // 2
        if keys[p] >= keys[i]:
            break
        keys[p], keys[i] = keys[i], keys[p]
        ids[p], ids[i] = ids[i], ids[p]
        i = p
    return size + 1


@njit(cache=True)
def _heap_pop(keys, ids, size):
    ident = ids[0]
    size -= 1
    keys[0] = keys[size]
    ids[0] = ids[size]
    i = 0
    while True:
        a = 2 * i + 1
        b = a + 1
        best = i
        if a < size and keys[a] > keys[best]:
            best = a
        if b < size and keys[b] > keys[best]:
            best = b
        if best == i:
            break
        keys[best], keys[i] = keys[i], keys[best]
        ids[best], ids[i] = ids[i], ids[best]
        i = best
    return ident, size


@njit(cache=True)
def _constrained_best(scores, forced, parent, ban_h, ban_m, node, single_root, work, heads1,
                      status1):
    """Best tree of subproblem ``node`` into heads1[0]; status1[0] == 0 when one exists."""
    n1 = scores.shape[0]
    for h in range(n1):
        for m in range(n1):
            work[0, h, m] = scores[h, m]
    for m in range(1, n1):
        f = forced[node, m]
        if f >= 0:
            for h in range(n1):
                if h != f:
                    work[0, h, m] = _NEG
    a = node
    while a > 0:
        work[0, ban_h[a], ban_m[a]] = _NEG
        a = parent[a]
    lengths = np.full(1, n1 - 1, dtype=np.int64)
    status1[0] = 0
    _cle_kernel(work, lengths, single_root, heads1, status1)


@njit(cache=True)
def _cle_kbest_one(scores, K, single_root):
    """The K best trees of one (n+1, n+1) float64 sentence: (heads (K, n+1), tree scores
    (K,), count), count = -1 for NaN / +inf scores."""
    n1 = scores.shape[0]
    n = n1 - 1
    out_heads = np.full((K, n1), -1, dtype=np.int64)
    out_scores = np.full(K, _NEG)
    batch, lengths, heads1, finite = _single_layout(scores)
    if not finite:
        return out_heads, out_scores, -1
    cap = 1 + K * max(n, 1)
    forced = np.full((cap, n1), -1, dtype=np.int32)
    trees = np.empty((cap, n1), dtype=np.int64)
    parent = np.zeros(cap, dtype=np.int64)
    ban_h = np.zeros(cap, dtype=np.int64)
    ban_m = np.zeros(cap, dtype=np.int64)
    keys = np.empty(cap)
    ids = np.empty(cap, dtype=np.int64)
    work = np.empty((1, n1, n1))
    status1 = np.zeros(1, dtype=np.int8)
    _constrained_best(scores, forced, parent, ban_h, ban_m, 0, single_root, work, heads1,
                      status1)
    if status1[0] != 0 or n == 0:
        if n == 0:
            out_heads[0, 0] = -1
            out_scores[0] = 0.0
            return out_heads, out_scores, 1
        return out_heads, out_scores, 0
    trees[0] = heads1[0]
    total = 0.0
    for m in range(1, n1):
        total += scores[heads1[0, m], m]
    size = _heap_push(keys, ids, 0, total, 0)
    used = 1
    count = 0
    while size > 0 and count < K:
        node, size = _heap_pop(keys, ids, size)
        out_heads[count] = trees[node]
        tot = 0.0
        for m in range(1, n1):
            tot += scores[trees[node, m], m]
        out_scores[count] = tot
        count += 1
        if count == K:
            break
        # children: e_1..e_{j-1} forced, e_j forbidden, over the free arcs of the tree
        for m in range(1, n1):
            if forced[node, m] >= 0:
                continue
            child = used
            for v in range(n1):
                forced[child, v] = forced[node, v]
            for v in range(1, m):
                if forced[node, v] < 0:
                    forced[child, v] = trees[node, v]
            parent[child] = node
            ban_h[child] = trees[node, m]
            ban_m[child] = m
            _constrained_best(scores, forced, parent, ban_h, ban_m, child, single_root, work,
                              heads1, status1)
            if status1[0] != 0:
                continue
            trees[child] = heads1[0]
            tot = 0.0
            for v in range(1, n1):
                tot += scores[heads1[0, v], v]
            size = _heap_push(keys, ids, size, tot, child)
            used += 1
    return out_heads, out_scores, count


def cle_kbest(scores: np.ndarray, k: int, single_root: bool = True
              ) -> tuple[np.ndarray, np.ndarray]:
    """The k best non-projective trees of one sentence, best first, exact.

    Lawler's partition of the tree space with constrained Chu-Liu-Edmonds (see the
    comment above ``_heap_push``): O(k n^3) time (k n constrained O(n^2) decodes),
    O(k n^2) memory.

    Parameters
    ----------
    scores : (n+1, n+1) float array (see ``chu_liu_edmonds``).
    k : number of trees wanted (>= 1).
    single_root : exactly one word attaches to the root (default) or any number.

    Returns
    -------
    heads : (k', n+1) int64, k' <= k distinct trees, best first (k' < k only when
        fewer trees with a finite score exist); tree_scores : (k',) float64.
    Raises ValueError for NaN / +inf scores or when no tree has a finite score.
    """
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    scores = np.asarray(scores)
    if scores.ndim != 2 or scores.shape[0] != scores.shape[1] or scores.shape[0] < 1:
        raise ValueError(f"scores must have shape (n+1, n+1), got {scores.shape}")
    heads, tscores, count = _cle_kbest_one(np.ascontiguousarray(scores, dtype=np.float64), k,
                                           bool(single_root))
    if count < 0:
        raise ValueError("scores contain NaN or +inf; "
                         "use finite values, or -inf for a forbidden arc")
    if count == 0:
        raise _no_tree_error(0, True, single_root, False)
    return heads[:count], tscores[:count]
