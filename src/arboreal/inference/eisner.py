"""Projective argmax (Eisner) and k-best projective trees (Huang & Chiang).

Method and complexity
---------------------
``eisner`` is Eisner's (1996) first-order dynamic program over four chart
items per span [s, t]: complete/incomplete x right-/left-headed.
Multi-root: position 0 is an ordinary head (it can never be a modifier) and
the answer is the right-complete item [0, n].  Single-root: the chart runs
over the words 1..n only and the root is attached once at the end,
``max_m s[0, m] + Cl[1, m] + Cr[m, n]``, so exactly one word takes the root.
O(n^3) time, O(n^2) memory, float64 chart.  The chart is indexed by
(width, start) so that the loop over span starts for a fixed width and split
point is contiguous; a batch is processed 8 sentences at a time (sorted by
length) with the sentence as the fastest index, so that loop is a long
contiguous run shared by 8 sentences, and it is a pure max (no arg-max):
back-pointers are not stored, backtracking re-finds the first split that
attains each visited item (O(n^2)).  Ties go to the smallest split point
(and the smallest root child), so results are deterministic and a sentence
gets the same tree alone or in any batch.

``eisner_kbest`` is Huang & Chiang's (2005) k-best parsing over the same
hypergraph (their Algorithm 1 with pruning): every chart item keeps its up
to k best derivations sorted; for one split point only the pairs (i, j) of
sub-derivation ranks with (i+1)(j+1) <= k can reach the top k, and the scan
stops early once a pair cannot beat the current k-th best.  Eisner's
derivations are in one-to-one correspondence with projective trees, so the
k best derivations are k distinct trees.  O(n^3 k log k) time in the
worst case (about n^3 k in practice), O(n^2 k) memory.  Trees whose score
is -inf (they use a forbidden arc) are never returned, so fewer than k rows
come back when fewer finite trees exist.

Both run one numba kernel over a whole batch: work arrays are allocated once
per batch at the maximum length and reused for every sentence.  Scores are
read as float64 (float32 input is converted once, O(B N^2)).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from arboreal.inference._batch import as_batch

_NEG = -np.inf


# --------------------------------------------------------------------------
# shared validation
# --------------------------------------------------------------------------
@njit(cache=True)
def _find_bad_scores(scores, lengths):
    """Index of the first sentence with a NaN or +inf arc score in its active
    region (diagonal and column 0 excluded), or -1."""
    for b in range(scores.shape[0]):
        n = lengths[b]
        for h in range(n + 1):
            for m in range(1, n + 1):
                if h != m:
                    v = scores[b, h, m]
                    if v != v or v == np.inf:
                        return b
    return -1


def _prepare(scores, lengths, what: str = "scores"):
    batch, lengths, single = as_batch(scores, lengths)
    # The kernels work in float64 anyway; converting float32 input here
    # (O(B N^2), small next to the decoders) halves numba compile time.
    batch = np.ascontiguousarray(batch, dtype=np.float64)
    bad = _find_bad_scores(batch, lengths)
    if bad >= 0:
        where = "" if single else f" (sentence {bad} of the batch)"
        raise ValueError(f"{what} contain NaN or +inf{where}; "
                         "use finite values, or -inf for a forbidden arc")
    return batch, lengths, single


def _no_tree_error(b: int, single: bool, single_root: bool, projective: bool):
    where = "" if single else f" for sentence {b} of the batch"
    kind = ("projective " if projective else "") + ("single-root " if single_root else "")
    return ValueError(f"no {kind}tree with a finite score exists{where} "
                      "(too many -inf arcs)")


# --------------------------------------------------------------------------
# 1-best Eisner
# --------------------------------------------------------------------------
@njit(cache=True)
def _eisner_kernel(scores, lengths, order, V, single_root, heads, status):
    """Eisner over a batch, V sentences at a time (lanes, in ``order``).

    Chart nodes x = 0..P-1 stand for positions lo + x (lo = 1 for single
    root: the root is attached at the end; lo = 0 otherwise).  Items are
    indexed [width, start * V + lane], so for a fixed width and split
    offset the loop over (span start, lane) is one contiguous run of
    (P - w) * V numbers: it vectorizes and its overhead is shared by V
    sentences.  A lane shorter than the chunk's longest sentence computes
    junk beyond its own length, which is never read.
    CR[w, .] complete, head x, span x..x+w;  CL[w, .] complete, head x+w;
    IR[w, .] incomplete arc x -> x+w;       IL[w, .] arc x+w -> x;
    IS[w, .] the split part shared by IR and IL (before the arc score).
    No back-pointers: the forward pass is a pure max (branch-free, SIMD);
    backtracking re-finds the first split attaining each visited item's
    value (same additions, so exact equality), O(n^2) per sentence.
    """
    B = scores.shape[0]
    N1 = scores.shape[1]
    W = N1 * V
    CR = np.empty((N1, W))
    CL = np.empty((N1, W))
    IR = np.empty((N1, W))
    IL = np.empty((N1, W))
    IS = np.empty((N1, W))
    SR = np.zeros((N1, W))     # SR[w, x*V+l] = score of arc x -> x+w in lane l
    SL = np.zeros((N1, W))     # SL[w, x*V+l] = score of arc x+w -> x
    best = np.empty(W)
    stack = np.empty((4 * N1 + 8, 3), dtype=np.int32)
    lo = 1 if single_root else 0
    for c0 in range(0, B, V):
        nl = min(V, B - c0)
        P = 1
        for l in range(nl):
            b = order[c0 + l]
            heads[b, :] = -1
            status[b] = 0
            if lengths[b] + 1 - lo > P:
                P = lengths[b] + 1 - lo
        for l in range(V):
            b = 0
            Pl = 0
            if l < nl:
                b = order[c0 + l]
                Pl = lengths[b] + 1 - lo
            for w in range(1, P):
                for x in range(P - w):
                    j = x * V + l
                    if x + w < Pl:
                        SR[w, j] = scores[b, lo + x, lo + x + w]
                        SL[w, j] = scores[b, lo + x + w, lo + x]
                    else:
                        SR[w, j] = 0.0
                        SL[w, j] = 0.0
        for j in range(P * V):
            CR[0, j] = 0.0
            CL[0, j] = 0.0
        for w in range(1, P):
            cnt = (P - w) * V
            # incomplete: Cr(x, x+k) + Cl(x+k+1, x+w), k in 0..w-1
            for i in range(cnt):
                best[i] = _NEG
            for k in range(w):
                a = CR[k]
                c = CL[w - k - 1, (k + 1) * V:]
                for i in range(cnt):
                    best[i] = max(best[i], a[i] + c[i])
            sr = SR[w]
            sl = SL[w]
            isw = IS[w]
            irw = IR[w]
            ilw = IL[w]
            for i in range(cnt):
                isw[i] = best[i]
                irw[i] = best[i] + sr[i]
                ilw[i] = best[i] + sl[i]
            if lo == 0:
                for l in range(V):
                    ilw[l] = _NEG   # the root never takes a head
            # left complete: Cl(x, x+k) + Il(x+k, x+w), k in 0..w-1
            for i in range(cnt):
                best[i] = _NEG
            for k in range(w):
                a = CL[k]
                c = IL[w - k, k * V:]
                for i in range(cnt):
                    best[i] = max(best[i], a[i] + c[i])
            clw = CL[w]
            for i in range(cnt):
                clw[i] = best[i]
            # right complete: Ir(x, x+k) + Cr(x+k, x+w), k in 1..w
            for i in range(cnt):
                best[i] = _NEG
            for k in range(1, w + 1):
                a = IR[k]
                c = CR[w - k, k * V:]
                for i in range(cnt):
                    best[i] = max(best[i], a[i] + c[i])
            crw = CR[w]
            for i in range(cnt):
                crw[i] = best[i]
        # per lane: root attachment and backtracking.  Stack entries are
        # (typ, x, y) in chart nodes: 0 Cr, 1 Cl, 2 arc x->y, 3 arc y->x.
        for l in range(nl):
            b = order[c0 + l]
            n = lengths[b]
            if n == 0:
                continue
            Pl = n + 1 - lo
            if single_root:
                top = _NEG
                x_best = 0
                for x in range(Pl):
                    v = scores[b, 0, x + 1] + CL[x, l] + CR[Pl - 1 - x, x * V + l]
                    if v > top:
                        top = v
                        x_best = x
                if top == _NEG:
                    status[b] = 1
                    continue
                heads[b, x_best + 1] = 0
                stack[0, 0] = 1
                stack[0, 1] = 0
                stack[0, 2] = x_best
                stack[1, 0] = 0
                stack[1, 1] = x_best
                stack[1, 2] = Pl - 1
                sp = 2
            else:
                if CR[Pl - 1, l] == _NEG:
                    status[b] = 1
                    continue
                stack[0, 0] = 0
                stack[0, 1] = 0
                stack[0, 2] = Pl - 1
                sp = 1
            while sp > 0:
                sp -= 1
                typ = stack[sp, 0]
                x = stack[sp, 1]
                y = stack[sp, 2]
                w = y - x
                if w == 0:
                    continue
                if typ == 0:
                    target = CR[w, x * V + l]
                    r = y
                    for k in range(1, w + 1):
                        if IR[k, x * V + l] + CR[w - k, (x + k) * V + l] == target:
                            r = x + k
                            break
                    stack[sp, 0] = 2
                    stack[sp, 1] = x
                    stack[sp, 2] = r
                    stack[sp + 1, 0] = 0
                    stack[sp + 1, 1] = r
                    stack[sp + 1, 2] = y
                elif typ == 1:
                    target = CL[w, x * V + l]
                    r = x
                    for k in range(w):
                        if CL[k, x * V + l] + IL[w - k, (x + k) * V + l] == target:
                            r = x + k
                            break
                    stack[sp, 0] = 1
                    stack[sp, 1] = x
                    stack[sp, 2] = r
                    stack[sp + 1, 0] = 3
                    stack[sp + 1, 1] = r
                    stack[sp + 1, 2] = y
                else:
                    if typ == 2:
                        heads[b, y + lo] = x + lo
                    else:
                        heads[b, x + lo] = y + lo
                    target = IS[w, x * V + l]
                    r = x
                    for k in range(w):
                        if CR[k, x * V + l] + CL[w - k - 1, (x + k + 1) * V + l] == target:
                            r = x + k
                            break
                    stack[sp, 0] = 0
                    stack[sp, 1] = x
                    stack[sp, 2] = r
                    stack[sp + 1, 0] = 1
                    stack[sp + 1, 1] = r + 1
                    stack[sp + 1, 2] = y
                sp += 2


# sentences per chunk of the batched Eisner kernel, and the largest length
# for which it is used (its chart is 7 * (N+1)^2 * V float64)
_LANES = 8
_LANES_MAX_N = 255


def eisner(scores: np.ndarray, single_root: bool = True,
           lengths: np.ndarray | None = None) -> np.ndarray:
    """Best projective tree (Eisner's algorithm), O(n^3) per sentence.

    Parameters
    ----------
    scores : (n+1, n+1) or (B, N+1, N+1) float array; ``scores[h, m]`` scores
        the arc h -> m.  Column 0 and the diagonal are ignored; ``-inf``
        forbids an arc.  NaN / +inf raise ValueError.
    single_root : exactly one word attaches to the root (default) or any number.
    lengths : (B,) sentence lengths for a batch (default: all N).

    Returns
    -------
    heads : (n+1,) int64 with heads[0] = -1, or (B, N+1) with -1 in padding.
    Raises ValueError if no tree with a finite score exists.
    """
    batch, lengths, single = _prepare(scores, lengths)
    B, N1 = batch.shape[0], batch.shape[1]
    heads = np.empty((B, N1), dtype=np.int64)
    status = np.empty(B, dtype=np.int8)
    if B >= 2 * _LANES and N1 <= _LANES_MAX_N + 1:
        lanes = _LANES
        order = np.argsort(lengths, kind="stable")   # similar lengths share a chunk
    else:
        lanes = 1
        order = np.arange(B)
    _eisner_kernel(batch, lengths, order, lanes, bool(single_root), heads, status)
    if status.any():
        raise _no_tree_error(int(np.argmax(status)), single, single_root, True)
    return heads[0] if single else heads


# --------------------------------------------------------------------------
# k-best Eisner
# --------------------------------------------------------------------------
@njit(cache=True)
def _eisner_kbest_kernel(scores, lengths, K, single_root, heads, tscores):
    B = scores.shape[0]
    N1 = scores.shape[1]
    # item types: 0 right complete Cr, 1 left complete Cl, 2 arc s->t Ir,
    # 3 arc t->s Il, 4 the whole sentence (only [0, 0] is used)
    val = np.empty((5, N1, N1, K))
    bpr = np.empty((5, N1, N1, K), dtype=np.int32)
    bpi = np.empty((5, N1, N1, K), dtype=np.int32)
    bpj = np.empty((5, N1, N1, K), dtype=np.int32)
    cnt = np.zeros((5, N1, N1), dtype=np.int32)
    bv = np.empty(K)
    br = np.empty(K, dtype=np.int32)
    bi = np.empty(K, dtype=np.int32)
    bj = np.empty(K, dtype=np.int32)
    stack = np.empty((4 * N1 + 8, 4), dtype=np.int32)
    for b in range(B):
        n = lengths[b]
        heads[b, :, :] = -1
        tscores[b, :] = _NEG
        if n == 0:
            tscores[b, 0] = 0.0
            continue
        lo = 1 if single_root else 0
        for s in range(lo, n + 1):
            for typ in range(2):
                val[typ, s, s, 0] = 0.0
                cnt[typ, s, s] = 1
        w = 1
        s = lo
        while True:
            # spans in order of width, then one final job for the whole sentence
            final = w > n - lo
            if final:
                s = 1 if single_root else 0
                t = n
            else:
                t = s + w
            # Each job merges the derivation lists of a set of hyperedges:
            # kind 0: Cr[s, r] x Cl[r+1, t]   -> arcs s->t and t->s
            # kind 1: Cl[s, r] x Il[r, t]     -> Cl[s, t]
            # kind 2: Ir[s, r] x Cr[r, t]     -> Cr[s, t]
            # kind 3: root -> r, Cl[1, r] x Cr[r, n]  (single root, final)
            # kind 4: Cr[0, n] as is                  (multi root, final)
            for kind in range(3):
                if final:
                    if kind > 0:
                        break
                    kind = 3 if single_root else 4
                if kind == 0:
                    lt, rt, r0, r1, off = 0, 1, s, t, 1
                elif kind == 1:
                    lt, rt, r0, r1, off = 1, 3, s, t, 0
                elif kind == 2:
                    lt, rt, r0, r1, off = 2, 0, s + 1, t + 1, 0
                elif kind == 3:
                    lt, rt, r0, r1, off = 1, 0, 1, n + 1, 0
                else:
                    lt, rt, r0, r1, off = 0, 1, 0, 1, 0   # Cr[0, n] x (empty)
                bc = 0
                if kind == 4:
                    bc = cnt[0, 0, n]
                    for q in range(bc):
                        bv[q] = val[0, 0, n, q]
                        bi[q] = q
                        bj[q] = 0
                        br[q] = 0
                for r in range(r0, r1):
                    if kind == 4:
                        break
                    extra = 0.0
                    if kind == 3:
                        extra = np.float64(scores[b, 0, r])
                        if extra == _NEG:
                            continue
                        ls_, le_ = 1, r
                    else:
                        ls_, le_ = s, r
                    rs = r + off
                    na = cnt[lt, ls_, le_]
                    nb = cnt[rt, rs, t]
                    if nb == 0:
                        continue
                    b0 = val[rt, rs, t, 0]
                    for i in range(na):
                        a = val[lt, ls_, le_, i] + extra
                        if bc == K and a + b0 <= bv[K - 1]:
                            break
                        jmax = K // (i + 1)
                        if jmax > nb:
                            jmax = nb
                        for j in range(jmax):
                            v = a + val[rt, rs, t, j]
                            if bc == K:
                                if v <= bv[K - 1]:
                                    break
                                pos = K - 1
                            else:
                                pos = bc
                                bc += 1
                            while pos > 0 and bv[pos - 1] < v:
                                bv[pos] = bv[pos - 1]
                                br[pos] = br[pos - 1]
                                bi[pos] = bi[pos - 1]
                                bj[pos] = bj[pos - 1]
                                pos -= 1
                            bv[pos] = v
                            br[pos] = r
                            bi[pos] = i
                            bj[pos] = j
                # store the merged list into its item(s)
                for dest in range(2):
                    if kind == 0:
                        typ = 2 + dest
                        if dest == 0:
                            extra = np.float64(scores[b, s, t])
                        elif s == 0:
                            extra = _NEG   # the root never takes a head
                        else:
                            extra = np.float64(scores[b, t, s])
                    else:
                        if dest == 1:
                            break
                        typ = 1 if kind == 1 else (0 if kind == 2 else 4)
                        extra = 0.0
                    c = 0
                    if extra != _NEG:
                        c = bc
                        if typ == 4:
                            ts_, tt_ = 0, 0
                        else:
                            ts_, tt_ = s, t
                        for q in range(bc):
                            val[typ, ts_, tt_, q] = bv[q] + extra
                            bpr[typ, ts_, tt_, q] = br[q]
                            bpi[typ, ts_, tt_, q] = bi[q]
                            bpj[typ, ts_, tt_, q] = bj[q]
                    if typ == 4:
                        cnt[4, 0, 0] = c
                    else:
                        cnt[typ, s, t] = c
            if final:
                break
            s += 1
            if s > n - w:
                w += 1
                s = lo
        # backtrack every derivation of the final item
        for q in range(cnt[4, 0, 0]):
            tscores[b, q] = val[4, 0, 0, q]
            r = bpr[4, 0, 0, q]
            i = bpi[4, 0, 0, q]
            j = bpj[4, 0, 0, q]
            if single_root:
                heads[b, q, r] = 0
                stack[0, 0] = 1
                stack[0, 1] = 1
                stack[0, 2] = r
                stack[0, 3] = i
                stack[1, 0] = 0
                stack[1, 1] = r
                stack[1, 2] = n
                stack[1, 3] = j
                sp = 2
            else:
                stack[0, 0] = 0
                stack[0, 1] = 0
                stack[0, 2] = n
                stack[0, 3] = i
                sp = 1
            while sp > 0:
                sp -= 1
                typ = stack[sp, 0]
                s = stack[sp, 1]
                t = stack[sp, 2]
                rank = stack[sp, 3]
                if s == t:
                    continue
                r = bpr[typ, s, t, rank]
                i = bpi[typ, s, t, rank]
                j = bpj[typ, s, t, rank]
                if typ == 0:
                    lt, ls_, le_, rt, rs, re_ = 2, s, r, 0, r, t
                elif typ == 1:
                    lt, ls_, le_, rt, rs, re_ = 1, s, r, 3, r, t
                else:
                    if typ == 2:
                        heads[b, q, t] = s
                    else:
                        heads[b, q, s] = t
                    lt, ls_, le_, rt, rs, re_ = 0, s, r, 1, r + 1, t
                stack[sp, 0] = lt
                stack[sp, 1] = ls_
                stack[sp, 2] = le_
                stack[sp, 3] = i
                stack[sp + 1, 0] = rt
                stack[sp + 1, 1] = rs
                stack[sp + 1, 2] = re_
                stack[sp + 1, 3] = j
                sp += 2


def eisner_kbest(scores: np.ndarray, k: int, single_root: bool = True,
                 lengths: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The k best projective trees, best first (Huang & Chiang 2005).

    Parameters
    ----------
    scores : (n+1, n+1) or (B, N+1, N+1) float array (see ``eisner``).
    k : number of trees wanted (>= 1).
    single_root, lengths : as for ``eisner``.

    Returns
    -------
    heads : (k', n+1) int64, k' <= k distinct trees, best first; k' < k only
        when fewer trees with a finite score exist.  Batched: (B, k, N+1),
        rows past a sentence's k' (and padding positions) are -1.
    tree_scores : (k',) float64 (batched: (B, k), padded with -inf).

    O(n^3 k) typical time per sentence; memory about 100 k (N+1)^2 bytes
    (12 MB for k = 5 at N = 160).  Raises ValueError if no tree with a
    finite score exists.
    """
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    batch, lengths, single = _prepare(scores, lengths)
    B, N1 = batch.shape[0], batch.shape[1]
    heads = np.empty((B, k, N1), dtype=np.int64)
    tscores = np.empty((B, k), dtype=np.float64)
    _eisner_kbest_kernel(batch, lengths, k, bool(single_root), heads, tscores)
    empty = tscores[:, 0] == _NEG
    if empty.any():
        raise _no_tree_error(int(np.argmax(empty)), single, single_root, True)
    if single:
        kk = int(np.count_nonzero(tscores[0] > _NEG))
        return heads[0, :kk], tscores[0, :kk]
    return heads, tscores
