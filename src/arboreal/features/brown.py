"""Brown clustering (Brown et al. 1992) with the window of Liang (2005), in numba.

The class bigram model: every word ``w`` belongs to one cluster ``c(w)``; the quality of
a clustering is the average mutual information (AMI) of adjacent clusters,

    AMI = sum over cluster pairs (c, d) of p(c, d) log2( p(c, d) / (pl(c) pr(d)) ),

``p(c, d)`` the share of the corpus's bigrams (adjacent tokens of one sentence or line)
going from cluster c to cluster d, ``pl`` and ``pr`` its left and right marginals. This
is the mutual information between the clusters of the two words of a random bigram.

The windowed greedy algorithm (Liang 2005, section 3.2; the ``wcluster`` program): the
word types are sorted by frequency; the C most frequent start as C clusters; then each
further word in turn becomes a cluster of its own and, of the C + 1 clusters, the pair
whose merge loses the least AMI is merged. Once every word has been added, the last C
clusters are merged greedily down to one. The merges after the last word form a binary
tree over the C clusters; a word's bit string is the path from its root to its cluster
(0 = the child with the smaller cluster id, that is the older cluster, 1 = the other).

While words are being added, the window's AMI counts the bigrams between the active
clusters only, with the marginals ``pl``/``pr`` of the whole corpus (the marginals of
the final clustering), as ``wcluster`` does; when the last word is in, it is the AMI of
the clustering.

**Exact merge losses, updated incrementally.** With counts instead of probabilities,
``N * AMI = sum Q(c, d)``, ``Q(c, d) = n(c, d) log(n(c, d) N / (ml(c) mr(d)))`` (natural
logarithms; ``n`` the bigram counts, ``ml``/``mr`` the marginal counts, ``N`` the number of
bigrams). The loss of merging v and w, ``L(v, w) = N * (AMI before - AMI after)``, splits
into the interaction of the pair with every third cluster x,

    G(v, w; x) = phi(n(v,x), n(w,x)) + phi(n(x,v), n(x,w))
                 + n(v,x) (LL(v,w) - log ml(v)) + n(w,x) (LL(v,w) - log ml(w))
                 + n(x,v) (LR(v,w) - log mr(v)) + n(x,w) (LR(v,w) - log mr(w)),

``phi(p, q) = f(p) + f(q) - f(p + q)``, ``f(n) = n log n``, ``LL(v, w) = log(ml(v) + ml(w))``
(``LR`` likewise), plus a term of the four counts among v and w themselves. So:

- a new cluster z changes the loss of an existing pair (v, w) by ``G(v, w; z)``, which is
  0 unless v or w is a neighbour of z: a rare new word touches O(k C) pairs (k its
  neighbouring clusters), not O(C^2);
- merging s and t into u changes it by ``-G(v,w;s) - G(v,w;t) + G(v,w;u)``: the linear
  terms cancel (``n(v, u) = n(v, s) + n(v, t)``), leaving six values of f of integer
  counts, and it is 0 unless v or w neighbours both s and t;
- the losses of a new cluster z against all others: the interactions through f,
  ``Phi(z, x) = sum over y of phi(n(z,y), n(x,y)) + phi(n(y,z), n(y,x))``, in O(nnz(z) C)
  from the rows of the dense count matrix, the rest in O(1) per pair. When a sparse
  cluster (nearly always the word just added: 99.9% of the merges on 1M tokens of text
  at C = 256) merges into a larger one, base, the merged cluster's Phi row is base's
  (recovered from its losses) corrected for the neighbours of the sparse one, O(k C);
- the best pair: the minimum of each row of the loss table (upper triangle) is kept
  through every change, a row rescanned only when its minimum grows or vanishes; the
  pairs of the word just added stay out of the row minima and are scanned on their
  own (a rare new word is the cheapest partner of nearly every cluster: in the row
  minima, most rows would need a rescan once it is merged).

So a step costs O(k C) for a word with k neighbouring clusters, plus O(C^2) for the
merges of two large clusters (the last C - 1 merges, and rare ones before).

``f`` of an integer count is a table lookup below 2^16 (most counts between clusters
are small) and ``n * log(n)`` above. Memory: five (C+1) x (C+1) matrices of 8-byte
numbers (counts and their transpose, losses, the two log-marginal sums): 40 (C+1)^2
bytes, 40 MB at C = 1000; plus the bigram lists (about 40 bytes per distinct bigram).

Tie-breaking: words of equal frequency are ordered by the caller (see
:func:`arboreal.features.clusters.rank_words`); among equal losses the first pair in
slot order (row-major over the upper triangle) is merged, deterministically.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numba import njit

#: counts below this have ``n log n`` in a table
_TABLE_SIZE = 1 << 16
#: the largest number of clusters (memory: 40 (C+1)^2 bytes, 671 MB at 4096)
MAX_CLUSTERS = 4096


def _xlogx_table(size: int) -> np.ndarray:
    t = np.zeros(size, dtype=np.float64)
    x = np.arange(1, size, dtype=np.float64)
    t[1:] = x * np.log(x)
    return t


@njit(cache=True, inline="always")
def _f(n, tab):
    """n log n of a non-negative integer count."""
    if n < tab.shape[0]:
        return tab[n]
    x = float(n)
    return x * math.log(x)


@njit(cache=True, inline="always")
def _slog(x):
    """log x, and 0 for x = 0 (every term it multiplies is then 0)."""
    return math.log(x) if x > 0.0 else 0.0


@njit(cache=True, inline="always")
def _phi(p, q, tab):
    return _f(p, tab) + _f(q, tab) - _f(p + q, tab)


@njit(cache=True)
def _find(parent, w):
    r = w
    while parent[r] != r:
        r = parent[r]
    while parent[w] != r:
        nxt = parent[w]
        parent[w] = r
        w = nxt
    return r


# rows of the per-slot float array ``sf``
_ML, _MR, _LGL, _LGR, _RMIN, _ACC, _P = 0, 1, 2, 3, 4, 5, 6
_NF = 7
# rows of the per-slot integer array ``si``
(_A, _B, _CID, _REP, _RARG, _ROW, _COL, _LST, _ACTIVE, _DIRTY,
 _MASK) = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
_NI = 11


@njit(cache=True)
def _set_margins(z, sf, LL, LR):
    """Cache log ml(z), log mr(z) and the logs of the summed marginals of z with every slot."""
    ml = sf[_ML]
    mr = sf[_MR]
    sf[_LGL, z] = _slog(ml[z])
    sf[_LGR, z] = _slog(mr[z])
    for x in range(ml.shape[0]):
        a = _slog(ml[z] + ml[x])
        b = _slog(mr[z] + mr[x])
        LL[z, x] = a
        LL[x, z] = a
        LR[z, x] = b
        LR[x, z] = b


@njit(cache=True, inline="always")
def _lin_own(z, x, n, LL, LR, sf, si, tab):
    """The part of L(z, x) that is not an interaction with a third cluster through f: the
    change of the marginals (linear in the counts) and the four counts among z and x."""
    lgl = sf[_LGL]
    lgr = sf[_LGR]
    nzz = n[z, z]
    nzx = n[z, x]
    nxz = n[x, z]
    nxx = n[x, x]
    llzx = LL[z, x]
    lrzx = LR[z, x]
    lin = ((si[_A, z] - nzz - nzx) * (llzx - lgl[z]) + (si[_A, x] - nxz - nxx) * (llzx - lgl[x])
           + (si[_B, z] - nzz - nxz) * (lrzx - lgr[z]) + (si[_B, x] - nzx - nxx) * (lrzx - lgr[x]))
    m = nzz + nzx + nxz + nxx
    own = (_f(nzz, tab) + _f(nzx, tab) + _f(nxz, tab) + _f(nxx, tab) - _f(m, tab)
           - nzz * (lgl[z] + lgr[z]) - nzx * (lgl[z] + lgr[x])
           - nxz * (lgl[x] + lgr[z]) - nxx * (lgl[x] + lgr[x])
           + m * (llzx + lrzx))
    return lin + own


@njit(cache=True, inline="always")
def _touch(i, j, old, new, sf, si):
    """Entry (i, j), i < j, of the loss table changed from ``old`` to ``new``: keep row i's
    minimum (first column on ties), or mark the row for a rescan."""
    if new < sf[_RMIN, i] or (new == sf[_RMIN, i] and j < si[_RARG, i]):
        sf[_RMIN, i] = new
        si[_RARG, i] = j
    elif si[_RARG, i] == j and new > old:
        si[_DIRTY, i] = 1


@njit(cache=True)
def _rescan(i, L, sf, si, special):
    """Row i's minimum, leaving out column ``special`` (the newest word, see _best_pair)."""
    best = np.inf
    arg = -1
    row = L[i]
    for j in range(i + 1, L.shape[0]):
        if row[j] < best and j != special:
            best = row[j]
            arg = j
    sf[_RMIN, i] = best
    si[_RARG, i] = arg
    si[_DIRTY, i] = 0


@njit(cache=True)
def _phi_row(z, n, nT, tab, acc):
    """acc[x] = sum over third clusters y of phi(n(z,y), n(x,y)) + phi(n(y,z), n(y,x)),
    from scratch: O(nnz(z) K)."""
    K = n.shape[0]
    for x in range(K):
        acc[x] = 0.0
    for y in range(K):
        if y == z:
            continue
        p = n[z, y]
        if p > 0:                       # z on the left of y
            fp = _f(p, tab)
            col = nT[y]                 # n(x, y) for all x
            for x in range(K):
                q = col[x]
                acc[x] += fp + _f(q, tab) - _f(p + q, tab)
            acc[y] -= _phi(p, n[y, y], tab)      # y = x is not a third cluster
        p = n[y, z]
        if p > 0:                       # z on the right of y
            fp = _f(p, tab)
            row = n[y]                  # n(y, x)
            for x in range(K):
                q = row[x]
                acc[x] += fp + _f(q, tab) - _f(p + q, tab)
            acc[y] -= _phi(p, n[y, y], tab)


@njit(cache=True)
def _write_row(z, n, L, LL, LR, sf, si, tab, special):
    """L(z, x) = acc[x] + _lin_own(z, x) for every x (inf for inactive slots), with the
    row minima kept up to date, unless ``special`` (z is the newest word: its pairs are
    left out of the row minima until it is merged or integrated)."""
    K = n.shape[0]
    acc = sf[_ACC]
    best = np.inf
    arg = -1
    for x in range(K):
        if x == z:
            continue
        val = acc[x] + _lin_own(z, x, n, LL, LR, sf, si, tab) if si[_ACTIVE, x] else np.inf
        if x < z:
            old = L[x, z]
            L[x, z] = val
            if not special:
                _touch(x, z, old, val, sf, si)
        else:
            L[z, x] = val
            if val < best:
                best = val
                arg = x
    if special:
        best = np.inf
        arg = -1
    sf[_RMIN, z] = best
    si[_RARG, z] = arg
    si[_DIRTY, z] = 0


@njit(cache=True)
def _integrate(z, L, sf, si):
    """The newest word's pairs join the row minima (it was not merged at once)."""
    _rescan(z, L, sf, si, -1)
    for x in range(z):
        if si[_ACTIVE, x]:
            _touch(x, z, np.inf, L[x, z], sf, si)


@njit(cache=True)
def _free_slot(g, L, sf, si):
    K = L.shape[0]
    for x in range(K):
        if x < g:
            old = L[x, g]
            L[x, g] = np.inf
            _touch(x, g, old, np.inf, sf, si)
        elif x > g:
            L[g, x] = np.inf
    sf[_RMIN, g] = np.inf
    si[_RARG, g] = -1
    si[_DIRTY, g] = 0
    si[_ACTIVE, g] = 0
    si[_CID, g] = -1


@njit(cache=True)
def _add_word(a, z, rptr, rnb, rcnt, lptr, lnb, lcnt, wl, wr, parent, rep_slot,
              n, nT, L, LL, LR, sf, si, tab):
    """Word a (every word of smaller rank already added) becomes a cluster in slot z."""
    K = n.shape[0]
    row = si[_ROW]
    col = si[_COL]
    A = si[_A]
    B = si[_B]
    lgl = sf[_LGL]
    lgr = sf[_LGR]
    active = si[_ACTIVE]
    for y in range(K):
        row[y] = 0
        col[y] = 0
    own = 0
    for k in range(rptr[a], rptr[a + 1]):          # bigrams (a, b)
        b = rnb[k]
        if b == a:
            own += rcnt[k]
        elif b < a:
            row[rep_slot[_find(parent, b)]] += rcnt[k]
    for k in range(lptr[a], lptr[a + 1]):          # bigrams (b, a)
        b = lnb[k]
        if b < a:
            col[rep_slot[_find(parent, b)]] += lcnt[k]
    parent[a] = a
    rep_slot[a] = z
    si[_REP, z] = a
    si[_CID, z] = a
    active[z] = 1
    row[z] = own
    col[z] = own
    sa = 0
    sb = 0
    for y in range(K):
        n[z, y] = row[y]
        n[y, z] = col[y]
        nT[y, z] = row[y]
        nT[z, y] = col[y]
        sa += row[y]
        sb += col[y]
        if y != z:
            A[y] += col[y]
            B[y] += row[y]
    A[z] = sa
    B[z] = sb
    sf[_ML, z] = wl[a]
    sf[_MR, z] = wr[a]
    _set_margins(z, sf, LL, LR)
    # existing pairs (v, w): + G(v, w; z), non-zero only if v or w neighbours z
    mask = si[_MASK]
    lst = si[_LST]
    ns = 0
    for y in range(K):
        mask[y] = 1 if (y != z and (row[y] + col[y]) > 0) else 0
        if mask[y]:
            lst[ns] = y
            ns += 1
    for v in range(K):
        if v == z or not active[v]:
            continue
        Lv = L[v]
        LLv = LL[v]
        LRv = LR[v]
        if mask[v]:
            a1 = col[v]                 # n(v, z)
            b1 = row[v]                 # n(z, v)
            fa1 = _f(a1, tab)
            fb1 = _f(b1, tab)
            la = lgl[v]
            lb = lgr[v]
            best = np.inf
            arg = -1
            for w in range(v + 1, K):
                if w == z:
                    continue
                a2 = col[w]
                b2 = row[w]
                val = Lv[w] + (fa1 + _f(a2, tab) - _f(a1 + a2, tab) + fb1 + _f(b2, tab)
                               - _f(b1 + b2, tab)
                               + a1 * (LLv[w] - la) + a2 * (LLv[w] - lgl[w])
                               + b1 * (LRv[w] - lb) + b2 * (LRv[w] - lgr[w]))
                Lv[w] = val
                if val < best:
                    best = val
                    arg = w
            sf[_RMIN, v] = best
            si[_RARG, v] = arg
            si[_DIRTY, v] = 0
        else:                           # n(v, z) = n(z, v) = 0
            for k in range(ns):
                w = lst[k]
                if w <= v:
                    continue
                old = Lv[w]
                val = old + col[w] * (LLv[w] - lgl[w]) + row[w] * (LRv[w] - lgr[w])
                Lv[w] = val
                _touch(v, w, old, val, sf, si)
    _phi_row(z, n, nT, tab, sf[_ACC])
    _write_row(z, n, L, LL, LR, sf, si, tab, True)


@njit(cache=True)
def _merge(s, t, new_id, parent, rep_slot, size, n, nT, L, LL, LR, sf, si, tab):
    """Merge the clusters of slots s and t; returns the slot freed. The merged cluster
    keeps the slot of the one with more neighbours ("base"); its losses are those of base
    corrected for the neighbours of the other when that is cheaper than from scratch."""
    K = n.shape[0]
    active = si[_ACTIVE]
    acc = sf[_ACC]
    P = sf[_P]
    mask = si[_MASK]
    lst = si[_LST]
    ns_s = 0
    ns_t = 0
    nnz_u = 0
    for v in range(K):
        if v == s or v == t:
            continue
        if n[v, s] + n[s, v] > 0:
            ns_s += 1
        if n[v, t] + n[t, v] > 0:
            ns_t += 1
        if n[s, v] + n[t, v] > 0:
            nnz_u += 1
        if n[v, s] + n[v, t] > 0:
            nnz_u += 1
    if ns_t <= ns_s:
        base, other = s, t
    else:
        base, other = t, s
    corr = 0
    for y in range(K):
        if y != s and y != t:
            if n[other, y] > 0:
                corr += 1
            if n[y, other] > 0:
                corr += 1
    use_corr = corr < nnz_u
    if use_corr:
        # Phi(u, x) = Phi(base, x) - the term of y = other + the change of the terms of
        # the neighbours y of other (n(u, y) = n(base, y) + n(other, y))
        for x in range(K):
            if x == s or x == t or not active[x]:
                acc[x] = 0.0
                continue
            i, j = (x, base) if x < base else (base, x)
            acc[x] = (L[i, j] - _lin_own(base, x, n, LL, LR, sf, si, tab)
                      - _phi(n[base, other], n[x, other], tab)
                      - _phi(n[other, base], n[other, x], tab))
        for y in range(K):
            if y == s or y == t:
                continue
            d = n[other, y]
            if d > 0:
                p0 = n[base, y]
                p1 = p0 + d
                c = _f(p1, tab) - _f(p0, tab)
                colv = nT[y]
                for x in range(K):
                    q = colv[x]
                    acc[x] += c - _f(p1 + q, tab) + _f(p0 + q, tab)
                q = n[y, y]
                acc[y] -= c - _f(p1 + q, tab) + _f(p0 + q, tab)
            d = n[y, other]
            if d > 0:
                p0 = n[y, base]
                p1 = p0 + d
                c = _f(p1, tab) - _f(p0, tab)
                rowv = n[y]
                for x in range(K):
                    q = rowv[x]
                    acc[x] += c - _f(p1 + q, tab) + _f(p0 + q, tab)
                q = n[y, y]
                acc[y] -= c - _f(p1 + q, tab) + _f(p0 + q, tab)
    # every other pair (v, w): -G(v,w;s) - G(v,w;t) + G(v,w;u), six values of f; zero
    # unless v or w neighbours the sparser of s and t
    cS = nT[s]
    cT = nT[t]
    rS = n[s]
    rT = n[t]
    ns = 0
    for v in range(K):
        cs = cS[v]
        ct = cT[v]
        rs = rS[v]
        rt = rT[v]
        P[v] = (_f(cs + ct, tab) - _f(cs, tab) - _f(ct, tab)
                + _f(rs + rt, tab) - _f(rs, tab) - _f(rt, tab))
        mask[v] = 1 if (v != s and v != t and (n[v, other] + n[other, v]) > 0) else 0
        if mask[v]:
            lst[ns] = v
            ns += 1
    for v in range(K):
        if v == s or v == t or not active[v]:
            continue
        cs = cS[v]
        ct = cT[v]
        rs = rS[v]
        rt = rT[v]
        pv = P[v]
        Lv = L[v]
        if mask[v]:
            best = np.inf
            arg = -1
            for w in range(v + 1, K):
                if w == s or w == t:
                    continue
                x1 = cs + cS[w]
                x2 = ct + cT[w]
                y1 = rs + rS[w]
                y2 = rt + rT[w]
                val = Lv[w] + (pv + P[w] + _f(x1, tab) + _f(x2, tab) - _f(x1 + x2, tab)
                               + _f(y1, tab) + _f(y2, tab) - _f(y1 + y2, tab))
                Lv[w] = val
                if val < best:
                    best = val
                    arg = w
            sf[_RMIN, v] = best
            si[_RARG, v] = arg
            si[_DIRTY, v] = 0
        else:
            for k in range(ns):
                w = lst[k]
                if w <= v:
                    continue
                x1 = cs + cS[w]
                x2 = ct + cT[w]
                y1 = rs + rS[w]
                y2 = rt + rT[w]
                old = Lv[w]
                val = old + (pv + P[w] + _f(x1, tab) + _f(x2, tab) - _f(x1 + x2, tab)
                             + _f(y1, tab) + _f(y2, tab) - _f(y1 + y2, tab))
                Lv[w] = val
                _touch(v, w, old, val, sf, si)
    # counts: row and column of other into base
    keep, gone = base, other
    for y in range(K):
        n[keep, y] += n[gone, y]
    for y in range(K):
        n[y, keep] += n[y, gone]
    for y in range(K):
        n[gone, y] = 0
        n[y, gone] = 0
    for y in range(K):
        nT[y, keep] = n[keep, y]
        nT[keep, y] = n[y, keep]
        nT[y, gone] = 0
        nT[gone, y] = 0
    si[_A, keep] += si[_A, gone]
    si[_B, keep] += si[_B, gone]
    si[_A, gone] = 0
    si[_B, gone] = 0
    sf[_ML, keep] += sf[_ML, gone]
    sf[_MR, keep] += sf[_MR, gone]
    sf[_ML, gone] = 0.0
    sf[_MR, gone] = 0.0
    _free_slot(gone, L, sf, si)
    _set_margins(keep, sf, LL, LR)
    if not use_corr:
        _phi_row(keep, n, nT, tab, acc)
    _write_row(keep, n, L, LL, LR, sf, si, tab, False)
    si[_ROW, 0] = use_corr
    # members: union by size of the two representative words
    ra = si[_REP, keep]
    rb = si[_REP, gone]
    if size[ra] < size[rb]:
        ra, rb = rb, ra
    parent[rb] = ra
    size[ra] += size[rb]
    si[_REP, keep] = ra
    rep_slot[ra] = keep
    si[_CID, keep] = new_id
    return gone


@njit(cache=True)
def _best_pair(L, sf, si, ctr, special):
    """(s, t), s < t, of the smallest loss (the first in row-major order on ties): the
    smallest of the row minima (rows marked dirty rescanned first), which leave out the
    pairs of the newest word ``special``, and of those pairs, scanned here. (A new word's
    losses are small against every cluster: in the row minima, most rows would have it
    as their best partner and need a rescan once it is merged.)"""
    K = L.shape[0]
    best = np.inf
    bs = -1
    bt = -1
    for i in range(K):
        if not si[_ACTIVE, i] or i == special:
            continue
        if si[_DIRTY, i]:
            _rescan(i, L, sf, si, special)
            ctr[4] += 1
        if sf[_RMIN, i] < best:
            best = sf[_RMIN, i]
            bs = i
            bt = si[_RARG, i]
    if special >= 0:
        z = special
        for x in range(K):
            if x == z or not si[_ACTIVE, x]:
                continue
            i, j = (x, z) if x < z else (z, x)
            v = L[i, j]
            if v < best or (v == best and (i < bs or (i == bs and j < bt))):
                best = v
                bs = i
                bt = j
    if bs >= 0 and bt >= 0:
        return bs, bt
    bs = -1                 # every loss infinite cannot happen; take the first two actives
    bt = -1
    for i in range(K):
        if si[_ACTIVE, i]:
            if bs < 0:
                bs = i
            elif bt < 0:
                bt = i
    return bs, bt


@njit(cache=True)
def _run(max_steps, C, ctr, free, rptr, rnb, rcnt, lptr, lnb, lcnt, wl, wr, parent, rep_slot,
         size, n, nT, L, LL, LR, sf, si, tab, rec_a, rec_b, rec_loss):
    """Up to ``max_steps`` steps (a step: add the next word, if any, then merge if more
    than C clusters are active, or more than one when every word is in). ``ctr``:
    [next word, active clusters, merges done, free slots on the stack, rows rescanned,
    incremental rows, slot of the newest word while its pairs are outside the row minima
    (-1: none)]."""
    V = wl.shape[0]
    for _ in range(max_steps):
        nxt = ctr[0]
        if ctr[6] >= 0 and nxt < V:       # the previous word was not merged: a regular now
            _integrate(ctr[6], L, sf, si)
            ctr[6] = -1
        if nxt < V:
            ctr[3] -= 1
            z = free[ctr[3]]
            _add_word(nxt, z, rptr, rnb, rcnt, lptr, lnb, lcnt, wl, wr, parent, rep_slot,
                      n, nT, L, LL, LR, sf, si, tab)
            ctr[0] = nxt + 1
            ctr[1] += 1
            ctr[6] = z
        if ctr[1] > C or (ctr[0] == V and ctr[1] > 1):
            s, t = _best_pair(L, sf, si, ctr, ctr[6])
            if ctr[6] >= 0:
                if ctr[6] != s and ctr[6] != t:
                    _integrate(ctr[6], L, sf, si)
                ctr[6] = -1
            k = ctr[2]
            rec_a[k] = si[_CID, s]
            rec_b[k] = si[_CID, t]
            rec_loss[k] = L[s, t]
            gone = _merge(s, t, V + k, parent, rep_slot, size, n, nT, L, LL, LR, sf, si, tab)
            ctr[5] += si[_ROW, 0]
            free[ctr[3]] = gone
            ctr[3] += 1
            ctr[2] = k + 1
            ctr[1] -= 1
        elif ctr[0] == V:
            return True
    return ctr[0] == V and ctr[1] <= 1


@njit(cache=True)
def _stage1_roots(V, rec_a, rec_b, n_stage1):
    """Each word's cluster id after the first ``n_stage1`` merges."""
    parent = np.arange(V + n_stage1)
    for k in range(n_stage1):
        parent[rec_a[k]] = V + k
        parent[rec_b[k]] = V + k
    out = np.empty(V, dtype=np.int64)
    for w in range(V):
        r = w
        while parent[r] != r:
            r = parent[r]
        x = w
        while parent[x] != r:
            nx = parent[x]
            parent[x] = r
            x = nx
        out[w] = r
    return out


@dataclass
class BrownResult:
    """What :func:`brown_cluster` found.

    ``merges``: (V - 1, 2) int64, the two cluster ids merged at each step (words are ids
    0..V-1 in rank order; merge k creates id V + k); ``losses``: the AMI lost by each
    merge, in bits; ``leaf``: each word's cluster id after the last word was added (one
    of ``min(C, V)`` clusters); ``bits``: each word's bit string (path from the root of
    the tree of the last ``min(C, V) - 1`` merges; 0 = the child with the smaller id).
    """
    merges: np.ndarray
    losses: np.ndarray
    leaf: np.ndarray
    bits: list
    n_clusters: int


def brown_cluster(rptr, rnb, rcnt, lptr, lnb, lcnt, n_clusters: int,
                  progress: Callable[[int], object] | None = None,
                  stats: dict | None = None) -> BrownResult:
    """Cluster V words (ids 0..V-1 in rank order, most frequent first) given their bigram
    counts as two CSR matrices: right neighbours ``rnb[rptr[a]:rptr[a+1]]`` of word a with
    the counts ``rcnt`` of the bigrams (a, b), left neighbours ``lnb``/``lcnt`` of (b, a).

    ``progress(k)`` is called with the number of merges done so far (out of V - 1) about
    twice a second; ``stats``, a dict, gets "rescans" (rows of the loss table rescanned
    for their minimum) and "incremental_rows" (merges whose row of losses was corrected
    from the larger cluster's rather than computed afresh). Time O(V C^2) at worst,
    O(k C) per word with k neighbouring clusters in practice (see the module docstring);
    memory 40 (C+1)^2 bytes plus the lists.
    """
    import time

    V = rptr.shape[0] - 1
    if V < 1:
        raise ValueError("no words to cluster")
    if not 1 <= n_clusters <= MAX_CLUSTERS:
        raise ValueError(f"the number of clusters must be in 1..{MAX_CLUSTERS}")
    rptr = np.ascontiguousarray(rptr, dtype=np.int64)
    lptr = np.ascontiguousarray(lptr, dtype=np.int64)
    rnb = np.ascontiguousarray(rnb, dtype=np.int64)
    lnb = np.ascontiguousarray(lnb, dtype=np.int64)
    rcnt = np.ascontiguousarray(rcnt, dtype=np.int64)
    lcnt = np.ascontiguousarray(lcnt, dtype=np.int64)
    ids = np.arange(V)
    wl = np.bincount(np.repeat(ids, np.diff(rptr)), weights=rcnt, minlength=V)
    wr = np.bincount(np.repeat(ids, np.diff(lptr)), weights=lcnt, minlength=V)
    total = float(rcnt.sum())
    C = min(n_clusters, V)
    K = C + 1
    n = np.zeros((K, K), dtype=np.int64)
    nT = np.zeros((K, K), dtype=np.int64)
    L = np.full((K, K), np.inf)
    LL = np.zeros((K, K))
    LR = np.zeros((K, K))
    sf = np.zeros((_NF, K))
    sf[_RMIN] = np.inf
    si = np.zeros((_NI, K), dtype=np.int64)
    si[_CID] = -1
    si[_REP] = -1
    si[_RARG] = -1
    parent = np.arange(V, dtype=np.int64)
    rep_slot = np.full(V, -1, dtype=np.int64)
    size = np.ones(V, dtype=np.int64)
    free = np.arange(K - 1, -1, -1, dtype=np.int64)
    ctr = np.array([0, 0, 0, K, 0, 0, -1], dtype=np.int64)
    tab = _xlogx_table(_TABLE_SIZE)
    rec_a = np.zeros(max(V - 1, 0), dtype=np.int64)
    rec_b = np.zeros(max(V - 1, 0), dtype=np.int64)
    rec_loss = np.zeros(max(V - 1, 0))
    steps = 8
    done = False
    while not done:
        t0 = time.perf_counter()
        done = _run(steps, C, ctr, free, rptr, rnb, rcnt, lptr, lnb, lcnt, wl, wr, parent,
                    rep_slot, size, n, nT, L, LL, LR, sf, si, tab, rec_a, rec_b, rec_loss)
        elapsed = time.perf_counter() - t0
        if progress is not None:
            progress(int(ctr[2]))
        # about half a second per call: progress and Ctrl-C stay responsive
        if elapsed < 0.25:
            steps = min(steps * 2, 1 << 20)
        elif elapsed > 1.0:
            steps = max(steps // 2, 1)
    if stats is not None:
        stats["rescans"] = int(ctr[4])
        stats["incremental_rows"] = int(ctr[5])
    n_stage1 = V - C
    leaf = _stage1_roots(V, rec_a, rec_b, n_stage1)
    bits_of = _tree_paths(V, rec_a, rec_b, n_stage1, int(leaf[0]) if V == 1 else None)
    bits = [bits_of[c] for c in leaf.tolist()]
    losses = rec_loss / total / math.log(2) if total > 0 else np.zeros_like(rec_loss)
    return BrownResult(np.stack([rec_a, rec_b], axis=1), losses, leaf, bits, C)


def _tree_paths(V: int, rec_a, rec_b, n_stage1: int, single=None) -> dict:
    """Bit string of each root of the stage-1 forest, from the tree of the later merges
    (left = the child with the smaller cluster id)."""
    n_merges = rec_a.shape[0]
    if n_merges == n_stage1:               # a single cluster
        root = V + n_merges - 1 if n_merges else (single if single is not None else 0)
        return {root: ""}
    children = {V + k: (min(int(rec_a[k]), int(rec_b[k])), max(int(rec_a[k]), int(rec_b[k])))
                for k in range(n_stage1, n_merges)}
    out = {}
    stack = [(V + n_merges - 1, "")]
    while stack:
        node, path = stack.pop()
        kids = children.get(node)
        if kids is None:
            out[node] = path
        else:
            stack.append((kids[1], path + "1"))
            stack.append((kids[0], path + "0"))
    return out


def average_mutual_information(w1: np.ndarray, w2: np.ndarray, counts: np.ndarray,
                               labels: np.ndarray) -> float:
    """AMI in bits of the clustering ``labels`` (word id -> cluster id, -1 = none) over the
    bigrams ``(w1[i], w2[i])`` seen ``counts[i]`` times: the mutual information of the
    clusters of the two words of a bigram, with the marginals of the bigrams themselves.
    Bigrams with an unclustered word are left out. Computed from scratch (numpy)."""
    labels = np.asarray(labels, dtype=np.int64)
    c1 = labels[np.asarray(w1, dtype=np.int64)]
    c2 = labels[np.asarray(w2, dtype=np.int64)]
    keep = (c1 >= 0) & (c2 >= 0)
    c1, c2 = c1[keep], c2[keep]
    cnt = np.asarray(counts, dtype=np.float64)[keep]
    total = cnt.sum()
    if total <= 0:
        return 0.0
    _, c1 = np.unique(c1, return_inverse=True)
    _, c2 = np.unique(c2, return_inverse=True)
    m = int(c2.max()) + 1
    pair, inv = np.unique(c1 * m + c2, return_inverse=True)
    joint = np.bincount(inv, weights=cnt)
    left = np.bincount(c1, weights=cnt)
    right = np.bincount(c2, weights=cnt)
    a, b = pair // m, pair % m
    return float(np.sum(joint / total * np.log2(joint * total / (left[a] * right[b]))))
