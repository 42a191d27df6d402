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
Sentences of ``_LONG_MIN_N`` words or more take a dedicated path
(:func:`_eisner_long`): two (P, P) float64 arrays, P = n + 1 - single_root
(16 P^2 bytes: 400 MB at n = 5000, against 56 P^2 for the batched chart),
items stored by their left end and filled in blocks of right ends, each
block's far split points as a cache-blocked max-plus product; the work is
cut into short kernel calls (Ctrl-C is honoured between two), with a
progress bar on a terminal for very long sentences.  Same values, same
tie-breaking, so the same trees as the batched kernel.

``eisner_kbest`` is Huang & Chiang's (2005) lazy k-best parsing (their
Algorithm 3) over the same hypergraph: the 1-best forward chart above (the
same batched, vectorized pass) gives every item's best derivation; then,
per sentence, only the items on the way to the k best trees are expanded:
an item's candidate heap starts from every split's best derivation, and a
popped derivation (split, i, j) queues its grid successors (i, j+1) and
(i+1, 0), after asking the sub-items for those ranks.  Eisner's derivations
are in one-to-one correspondence with projective trees, so the k best
derivations are k distinct trees.  Time O(n^3) for the chart plus at most
O(n^3 + k n^2 log(n + k)) for the lazy part (in practice: the items of the
k trees times their numbers of splits); O(n^2 k) memory.  Derivations are
ordered by score, ties by (split, left rank, right rank), so the trees are
the same as the exhaustive merge gives.  Trees whose score is -inf (they
use a forbidden arc) are never returned, so fewer than k rows come back
when fewer finite trees exist.

Both run one numba kernel over a whole batch: work arrays are allocated once
per batch at the maximum length and reused for every sentence.  Scores are
read as float64 (float32 input is converted once, O(B N^2)).
"""
from __future__ import annotations

import sys

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


def _is_plain_single(scores, lengths) -> bool:
    """One sentence already in the kernels' layout (2-D float64, C-contiguous), so a
    decoder can validate and decode it in a single numba call (no per-call numpy
    work: this matters in training loops that decode one sentence at a time)."""
    return (lengths is None and isinstance(scores, np.ndarray) and scores.ndim == 2
            and scores.dtype == np.float64 and scores.flags.c_contiguous
            and scores.shape[0] == scores.shape[1] and scores.shape[0] >= 1)


def _bad_scores_error(single: bool, bad: int, what: str = "scores") -> ValueError:
    where = "" if single else f" (sentence {bad} of the batch)"
    return ValueError(f"{what} contain NaN or +inf{where}; "
                      "use finite values, or -inf for a forbidden arc")


def _prepare(scores, lengths, what: str = "scores"):
    batch, lengths, single = as_batch(scores, lengths)
    # The kernels work in float64 anyway; converting float32 input here
    # (O(B N^2), small next to the decoders) halves numba compile time.
    batch = np.ascontiguousarray(batch, dtype=np.float64)
    bad = _find_bad_scores(batch, lengths)
    if bad >= 0:
        raise _bad_scores_error(single, bad, what)
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
def _eisner_forward(scores, lengths, order, c0, nl, V, lo, P,
                    CR, CL, IR, IL, IS, SR, SL, best):
    """Eisner's forward pass (pure max, no back-pointers) for the lanes
    ``order[c0 : c0 + nl]`` of one chunk of V; P = chart size of the longest.

    Chart nodes x = 0..P-1 stand for positions lo + x (lo = 1 for single
    root: the root is attached at the end; lo = 0 otherwise).  Items are
    indexed [width, start * V + lane], so for a fixed width and split
    offset the loop over (span start, lane) is one contiguous run of
    (P - w) * V numbers: it vectorizes and its overhead is shared by V
    sentences.  A lane shorter than the chunk's longest sentence computes
    junk beyond its own length, which is never read.
    CR[w, .] complete, head x, span x..x+w;  CL[w, .] complete, head x+w;
    IR[w, .] incomplete arc x -> x+w;       IL[w, .] arc x+w -> x;
    IS[w, .] the split part shared by IR and IL (before the arc score);
    SR[w, .] / SL[w, .] the scores of the arcs x -> x+w / x+w -> x.
    """
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


@njit(cache=True, inline="always")
def _push_pair(stack, sp, t1, x1, y1, t2, x2, y2):
    """Push the items (t1, x1, y1) and (t2, x2, y2) (kind, start, end) on a
    backtracking stack at rows sp and sp + 1."""
    stack[sp, 0] = t1
    stack[sp, 1] = x1
    stack[sp, 2] = y1
    stack[sp + 1, 0] = t2
    stack[sp + 1, 1] = x2
    stack[sp + 1, 2] = y2


@njit(cache=True)
def _eisner_kernel(scores, lengths, order, V, single_root, heads, status):
    """Eisner over the sentences ``order`` of a batch (the others are left
    alone), V at a time (lanes): :func:`_eisner_forward` per chunk, then per lane the root attachment and
    backtracking, which re-finds the first split attaining each visited
    item's value (same additions, so exact equality), O(n^2) per sentence.
    """
    B = order.shape[0]
    N1 = scores.shape[1]
    W = N1 * V
    CR = np.empty((N1, W))
    CL = np.empty((N1, W))
    IR = np.empty((N1, W))
    IL = np.empty((N1, W))
    IS = np.empty((N1, W))
    SR = np.zeros((N1, W))
    SL = np.zeros((N1, W))
    best = np.empty(W)
    stack = np.empty((4 * N1 + 8, 3), dtype=np.int32)
    lo = 1 if single_root else 0
    for c0 in range(0, B, V):
        nl = min(V, B - c0)
        P = np.int64(1)     # not a literal: one compiled _eisner_forward for both kernels
        for l in range(nl):
            b = order[c0 + l]
            heads[b, :] = -1
            status[b] = 0
            if lengths[b] + 1 - lo > P:
                P = lengths[b] + 1 - lo
        _eisner_forward(scores, lengths, order, c0, nl, V, lo, P,
                        CR, CL, IR, IL, IS, SR, SL, best)
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
                    _push_pair(stack, sp, 2, x, r, 0, r, y)
                elif typ == 1:
                    target = CL[w, x * V + l]
                    r = x
                    for k in range(w):
                        if CL[k, x * V + l] + IL[w - k, (x + k) * V + l] == target:
                            r = x + k
                            break
                    _push_pair(stack, sp, 1, x, r, 3, r, y)
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
                    _push_pair(stack, sp, 0, x, r, 1, r + 1, y)
                sp += 2


# --------------------------------------------------------------------------
# 1-best Eisner, one long sentence
# --------------------------------------------------------------------------
# Every update below is a max of sums of two chart values: max is exact
# whatever the order, so these flags let numba vectorize it without changing
# a single value.  "ninf" is not among them: -inf marks forbidden arcs.
_MAX_FLAGS = {"nnan", "nsz", "reassoc"}


@njit(cache=True, fastmath=_MAX_FLAGS)
def _long_chunk(scores, lo, t0, t1, k_lo, k_hi, S, A, B, acc):
    """Eisner's items of the spans (s, t), t in the block [t0, t1), s in the
    s-tiles k_hi-1 down to k_lo (tile k = [k S, (k+1) S), clipped to s < t).

    Chart (P = n + 1 - lo nodes, node x = position lo + x; s < t), two
    (P, P) arrays, every item kind stored by rows of its left end, so that
    the items of a block with one left end are one contiguous run:
    A[s, t] = Cr(s, t)  (complete, head s, span s..t; A[s, s] = 0)
    B[s, t] = Cl(s, t)  (complete, head t; B[s, s] = 0)
    A[P-1-s, t-s-1] = Il(s, t)  (incomplete, arc t -> s: A's lower triangle)
    B[P-1-s, t-s-1] = Ir(s, t)  (incomplete, arc s -> t: B's lower triangle)
    Blocks must come in increasing t0 and, within a block, tiles in
    decreasing k, so that every item read is final.  acc[0 | 1 | 2,
    s - s_lo, t - t0] gathers the split parts of Ir/Il, Cl and Cr of the
    tile's spans: first the split points beyond the tile (a max-plus product:
    one chart value plus a row of the block, each row read once per tile),
    then, row by row, those inside the tile, and each item of row s, once
    final, updates the later items of its row.  Every update is a run along
    t, which vectorizes.
    """
    P = A.shape[0]
    nt = t1 - t0
    aI = acc[0]
    aL = acc[1]
    aR = acc[2]
    for k in range(k_hi - 1, k_lo - 1, -1):
        s_lo = k * S
        s_hi = min(s_lo + S, t1 - 1)
        for i in range(s_hi - s_lo):
            for j in range(nt):
                aI[i, j] = _NEG
                aL[i, j] = _NEG
                aR[i, j] = _NEG
        for r in range(s_hi, t0):
            rI = B[r + 1, t0:t1]
            rL = A[P - 1 - r, t0 - r - 1:t1 - r - 1]
            rR = A[r, t0:t1]
            for i in range(s_hi - s_lo):
                c = A[s_lo + i, r]
                for j in range(nt):
                    aI[i, j] = max(aI[i, j], c + rI[j])
                c = B[s_lo + i, r]
                for j in range(nt):
                    aL[i, j] = max(aL[i, j], c + rL[j])
                c = B[P - 1 - s_lo - i, r - s_lo - i - 1]
                for j in range(nt):
                    aR[i, j] = max(aR[i, j], c + rR[j])
        for s in range(s_hi - 1, s_lo - 1, -1):
            i = s - s_lo
            j0 = max(0, s + 1 - t0)
            e = min(s_hi, t0)
            for r in range(s, max(s + 1, e)):
                c = A[s, r]
                rI = B[r + 1, t0:t1]
                for j in range(j0, nt):
                    aI[i, j] = max(aI[i, j], c + rI[j])
            for r in range(s + 1, e):
                c = B[s, r]
                rL = A[P - 1 - r, t0 - r - 1:t1 - r - 1]
                for j in range(nt):
                    aL[i, j] = max(aL[i, j], c + rL[j])
                c = B[P - 1 - s, r - s - 1]
                rR = A[r, t0:t1]
                for j in range(nt):
                    aR[i, j] = max(aR[i, j], c + rR[j])
            for t in range(t0 + j0, t1):
                x = aI[i, t - t0]
                ir = x + scores[lo + s, lo + t]
                il = _NEG if lo == 0 and s == 0 else x + scores[lo + t, lo + s]
                B[P - 1 - s, t - s - 1] = ir
                A[P - 1 - s, t - s - 1] = il
                row = A[t, t0:t1]
                for j in range(t - t0, nt):
                    aR[i, j] = max(aR[i, j], ir + row[j])
                y = max(aL[i, t - t0], B[s, s] + il)
                B[s, t] = y
                z = aR[i, t - t0]
                A[s, t] = z
                if t + 1 < t1:
                    o = t - t0 + 1
                    row = A[P - 1 - t, : t1 - t - 1]     # Il(t, t+1 ..)
                    for j in range(t1 - t - 1):
                        aL[i, o + j] = max(aL[i, o + j], y + row[j])
                    row = B[t + 1, t + 1:t1]
                    for j in range(t1 - t - 1):
                        aI[i, o + j] = max(aI[i, o + j], z + row[j])


@njit(cache=True)
def _long_backtrack(scores, lo, single_root, A, B, heads):
    """Root attachment and backtracking over the finished long-sentence chart
    (see :func:`_long_chunk`): the first split attaining each visited item's
    value, with the forward pass's additions, as :func:`_eisner_kernel` does.
    heads (n+1,) is filled; returns False when no tree has a finite score."""
    P = A.shape[0]
    heads[:] = -1
    stack = np.empty((4 * P + 8, 3), dtype=np.int64)
    if single_root:
        top = _NEG
        x_best = 0
        for x in range(P):
            v = scores[0, x + 1] + B[0, x] + A[x, P - 1]
            if v > top:
                top = v
                x_best = x
        if top == _NEG:
            return False
        heads[x_best + 1] = 0
        stack[0, 0] = 1
        stack[0, 1] = 0
        stack[0, 2] = x_best
        stack[1, 0] = 0
        stack[1, 1] = x_best
        stack[1, 2] = P - 1
        sp = 2
    else:
        if A[0, P - 1] == _NEG:
            return False
        stack[0, 0] = 0
        stack[0, 1] = 0
        stack[0, 2] = P - 1
        sp = 1
    while sp > 0:
        sp -= 1
        typ = stack[sp, 0]
        x = stack[sp, 1]
        y = stack[sp, 2]
        if x == y:
            continue
        if typ == 0:        # Cr(x, y) = Ir(x, k) + Cr(k, y)
            r = y
            for k in range(x + 1, y + 1):
                if B[P - 1 - x, k - x - 1] + A[k, y] == A[x, y]:
                    r = k
                    break
            _push_pair(stack, sp, 2, x, r, 0, r, y)
        elif typ == 1:      # Cl(x, y) = Cl(x, k) + Il(k, y)
            r = x
            for k in range(x, y):
                if B[x, k] + A[P - 1 - k, y - k - 1] == B[x, y]:
                    r = k
                    break
            _push_pair(stack, sp, 1, x, r, 3, r, y)
        else:               # Ir / Il(x, y): the arc, then Cr(x, k) + Cl(k+1, y)
            if typ == 2:
                heads[y + lo] = x + lo
            else:
                heads[x + lo] = y + lo
            # the split part is not stored: take its first argmax
            r = x
            best = _NEG
            for k in range(x, y):
                v = A[x, k] + B[k + 1, y]
                if v > best:
                    best = v
                    r = k
            _push_pair(stack, sp, 0, x, r, 1, r + 1, y)
        sp += 2
    return True


# sentences per chunk of the batched Eisner kernel, and the largest length
# for which it is used (its chart is 7 * (N+1)^2 * V float64)
_LANES = 8
_LANES_MAX_N = 255
# sentences of at least this many words are decoded by the long-sentence path
_LONG_MIN_N = 400
# its s-tile height, t-block width, and the work of one kernel call (tile
# cells times split points): small enough that Python, and so Ctrl-C, gets
# control back often
_LONG_TILE = 32
_LONG_BLOCK = 256
_LONG_CALL_WORK = 1 << 27
# a progress bar (on a terminal) for sentences of at least this many words
_PROGRESS_MIN_N = 2000


def _eisner_long(scores: np.ndarray, n: int, single_root: bool) -> np.ndarray | None:
    """Eisner for one long sentence: heads (n+1,), or None if no tree has a
    finite score.

    scores : (N+1, N+1) float64, C-contiguous, N >= n (already validated);
        only [:n+1, :n+1] is read.
    The chart (see :func:`_long_chunk`) is two (P, P) float64 arrays,
    P = n + 1 - single_root: 16 P^2 bytes (400 MB at n = 5000), plus
    24 _LONG_TILE _LONG_BLOCK bytes of scratch; no copy of the scores.
    O(n^3) time, computed in blocks of _LONG_BLOCK right ends and tiles of
    _LONG_TILE left ends (the far split points as a cache-blocked max-plus
    product), in kernel calls of
    about _LONG_CALL_WORK cell-splits each, so KeyboardInterrupt is raised
    between two of them.  The values and the tie-breaking are those of
    :func:`_eisner_kernel`, so the trees are the same.  With n >=
    _PROGRESS_MIN_N and standard error a terminal, a progress bar is shown.
    """
    lo = 1 if single_root else 0
    P = n + 1 - lo
    S = _LONG_TILE
    W = _LONG_BLOCK
    A = np.empty((P, P))
    B = np.empty((P, P))
    np.fill_diagonal(A, 0.0)
    np.fill_diagonal(B, 0.0)
    acc = np.empty((3, S, W))
    bar = None
    if n >= _PROGRESS_MIN_N and sys.stderr.isatty():
        from tqdm import tqdm
        bar = tqdm(total=P * P * P // 6, desc=f"eisner, {n} words", leave=False,
                   bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]")
    try:
        for t0 in range(0, P, W):
            t1 = min(t0 + W, P)
            per_call = max(1, _LONG_CALL_WORK // (S * W * max(t0, W)))
            k_hi = (t1 - 2) // S + 1
            while k_hi > 0:
                k_lo = max(0, k_hi - per_call)
                _long_chunk(scores, lo, t0, t1, k_lo, k_hi, S, A, B, acc)
                k_hi = k_lo
            if bar is not None:
                bar.update((t1 * t1 * t1 - t0 * t0 * t0) // 6)
    finally:
        if bar is not None:
            bar.close()
    heads = np.empty(n + 1, dtype=np.int64)
    if not _long_backtrack(scores, lo, single_root, A, B, heads):
        return None
    return heads


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

    Sentences of at least ``_LONG_MIN_N`` words go through
    :func:`_eisner_long` (chart 16 (n+1)^2 bytes, interruptible); the others
    through the batched kernel (chart 56 (N+1)^2 V bytes, V = 8 lanes for
    batches of 16 or more sentences of up to 255 words, else 1).
    """
    if _is_plain_single(scores, lengths) and scores.shape[0] <= _LONG_MIN_N:
        return _decode_plain_single(_eisner_single, scores, single_root, True)
    batch, lengths, single = _prepare(scores, lengths)
    B, N1 = batch.shape[0], batch.shape[1]
    heads = np.empty((B, N1), dtype=np.int64)
    status = np.zeros(B, dtype=np.int8)
    long = lengths >= _LONG_MIN_N
    for b in np.flatnonzero(long):
        n = int(lengths[b])
        h = _eisner_long(batch[b], n, bool(single_root))
        if h is None:
            raise _no_tree_error(int(b), single, single_root, True)
        heads[b, : n + 1] = h
        heads[b, n + 1:] = -1
    short = np.flatnonzero(~long)
    if len(short) >= 2 * _LANES and N1 <= _LANES_MAX_N + 1:
        lanes = _LANES
        order = short[np.argsort(lengths[short], kind="stable")]   # similar lengths share a chunk
    else:
        lanes = 1
        order = short
    if len(order):
        _eisner_kernel(batch, lengths, order, lanes, bool(single_root), heads, status)
    if status.any():
        raise _no_tree_error(int(np.argmax(status)), single, single_root, True)
    return heads[0] if single else heads


@njit(cache=True)
def _single_layout(scores):
    """One (n+1, n+1) sentence as a batch of one: (batch, lengths, heads, finite)."""
    n1 = scores.shape[0]
    batch = scores.reshape(1, n1, n1)
    lengths = np.full(1, n1 - 1, dtype=np.int64)
    return batch, lengths, np.empty((1, n1), dtype=np.int64), _find_bad_scores(batch, lengths) < 0


@njit(cache=True)
def _eisner_single(scores, single_root):
    """Validate and decode one (n+1, n+1) float64 sentence: (heads, status) with status
    0 ok, 1 no finite tree, 2 NaN / +inf scores."""
    batch, lengths, heads, finite = _single_layout(scores)
    status = np.full(1, 0 if finite else 2, dtype=np.int8)
    if finite:
        _eisner_kernel(batch, lengths, np.zeros(1, dtype=np.int64), 1, single_root, heads, status)
    return heads[0], int(status[0])


def _decode_plain_single(single, scores: np.ndarray, single_root: bool,
                         projective: bool) -> np.ndarray:
    """Run a ``*_single`` kernel (see :func:`_is_plain_single`) and raise its errors."""
    heads, status = single(scores, bool(single_root))
    if status == 2:
        raise _bad_scores_error(True, 0)
    if status:
        raise _no_tree_error(0, True, single_root, projective)
    return heads


# --------------------------------------------------------------------------
# k-best Eisner
# --------------------------------------------------------------------------
# Lazy k-best (Huang & Chiang 2005, Algorithm 3) on top of the 1-best
# forward chart.  Items, in chart nodes (x = start, w = width):
#   0 Cr[x, w]  right complete: IS[x, k] + arc x -> x+k, then Cr[x+k, w-k]   (k in 1..w)
#   1 Cl[x, w]  left complete:  Cl[x, k], then IS[x+k, w-k] + arc x+w -> x+k (k in 0..w-1)
#   2 IS[x, w]  incomplete, before its arc: Cr[x, k], then Cl[x+k+1, w-k-1]   (k in 0..w-1)
#   3 the whole sentence, single root: root -> k+1 + Cl[0, k], then Cr[k, P-1-k]
#     (multi root: the whole sentence is Cr[0, P-1])
# A derivation of an item is (k, i, j): split k, rank i of the left and j of
# the right part; key = k << 2S | i << S | j with 2^S >= K (order-preserving
# packing without divisions).  Derivations are ranked by (score
# desc, key asc), so ties go to the smallest split, then the best parts,
# recursively: deterministic and independent of the batch.
# The chart CH[t, w, x * V + lane] holds the 1-best values of CR, CL, IS, IR
# (= IS + arc x -> x+w) and IL (= IS + arc x+w -> x) for t = 0..4.
_PEND = 1     # the successors of the item's last derivation are not yet queued
_EXH = 2      # the item has no further derivation


@njit(cache=True)
def _better(v, key, w, wkey):
    return v > w or (v == w and key < wkey)


@njit(cache=True)
def _sift_down(Hv, Hk, base, i, size, v, key):
    """Place (v, key) at slot i of the max-heap Hv/Hk[base: base + size], moving it down."""
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and _better(Hv[base + c + 1], Hk[base + c + 1],
                                    Hv[base + c], Hk[base + c]):
            c += 1
        if not _better(Hv[base + c], Hk[base + c], v, key):
            break
        Hv[base + i] = Hv[base + c]
        Hk[base + i] = Hk[base + c]
        i = c
    Hv[base + i] = v
    Hk[base + i] = key


@njit(cache=True)
def _splits(typ, w, P):
    """(first, last + 1) split offsets of an item."""
    if typ == 0:
        return 1, w + 1
    if typ == 3:
        return 0, P
    return 0, w


@njit(cache=True)
def _parts(typ, x, w, k, P):
    """Split k of an item: (left item type, x, w, chart table of its value
    with the arc, right item type, x, w, chart table)."""
    if typ == 0:
        return 2, x, k, 3, 0, x + k, w - k, 0
    if typ == 1:
        return 1, x, k, 1, 2, x + k, w - k, 4
    if typ == 2:
        return 0, x, k, 0, 1, x + k + 1, w - k - 1, 1
    return 1, 0, k, 1, 0, k, P - 1 - k, 0


@njit(cache=True)
def _kbest_lane(b, l, V, lo, P, K, single_root, scores, CH, SR, SL,
                Dval, Dkey, Dcnt, hoff, hsz, state, Hv, Hk, stack, heads, tscores):
    """The k best trees of sentence b, lane l of the chunk whose chart is CH.

    Only the items on the way to the K best derivations are expanded: an
    item's candidate heap is built (heapify of every split's best derivation,
    read from the chart, O(#splits)) the first time it is asked for a
    derivation; each popped derivation (k, i, j) queues its successors
    (k, i, j+1) and, if j = 0, (k, i+1, j) -- each cell of a split's grid
    has one predecessor, so nothing is queued twice -- once the sub-item
    ranks they need exist (requested through an explicit stack).  Cells with
    (i+1)(j+1) > K cannot be among the K best and are never queued.
    Arrays are only indexed here, never passed to helpers (each call would
    cost atomic reference counting).  Returns False when the heap pool
    (Hv, Hk) is too small (the caller enlarges it and calls again).
    """
    S = 1
    while (1 << S) < K:
        S += 1
    M = (1 << S) - 1
    heads[b, :, :] = -1
    tscores[b, :] = _NEG
    if single_root:
        top = _NEG
        for k in range(P):
            v = (np.float64(scores[b, 0, k + 1]) + CH[1, k, l]) + CH[0, P - 1 - k, k * V + l]
            if v > top:
                top = v
        rt, rx, rw = 3, 0, 0
    else:
        top = CH[0, P - 1, l]
        rt, rx, rw = 0, 0, P - 1
    if top == _NEG:
        return True
    for typ in range(4):
        for x in range(P):
            for w in range(P - x):
                hoff[typ, x, w] = -1
                Dcnt[typ, x, w] = 0
    used = 0
    # ---- make sure the root item has K derivations (or all it has) --------
    stack[0, 0] = rt
    stack[0, 1] = rx
    stack[0, 2] = rw
    stack[0, 3] = K - 1
    sp = 1
    while sp > 0:
        typ = stack[sp - 1, 0]
        x = stack[sp - 1, 1]
        w = stack[sp - 1, 2]
        q = stack[sp - 1, 3]
        if hoff[typ, x, w] < 0:
            # first visit: a heap of every split's best derivation
            hoff[typ, x, w] = used
            if typ <= 1 and w == 0:
                hsz[typ, x, w] = 0
                Dval[typ, x, w, 0] = 0.0
                Dkey[typ, x, w, 0] = 0
                Dcnt[typ, x, w] = 1
                state[typ, x, w] = _EXH
            else:
                k0, k1 = _splits(typ, w, P)
                if used + (k1 - k0) + 2 * K + 2 > Hv.shape[0]:
                    return False
                m = 0
                for k in range(k0, k1):
                    lt, lx, lw, lc, rt_, rx_, rw_, rc = _parts(typ, x, w, k, P)
                    ex = np.float64(scores[b, 0, k + 1]) if typ == 3 else 0.0
                    v = (ex + CH[lc, lw, lx * V + l]) + CH[rc, rw_, rx_ * V + l]
                    if v > _NEG:
                        Hv[used + m] = v
                        Hk[used + m] = k << (2 * S)
                        m += 1
                # heapify (sift-down from the last parent)
                for i0 in range(m // 2 - 1, -1, -1):
                    _sift_down(Hv, Hk, used, i0, m, Hv[used + i0], Hk[used + i0])
                hsz[typ, x, w] = m
                state[typ, x, w] = 0
                used += (k1 - k0) + 2 * K + 2
        if Dcnt[typ, x, w] > q or state[typ, x, w] & _EXH:
            sp -= 1
            continue
        base = hoff[typ, x, w]
        size = hsz[typ, x, w]
        if state[typ, x, w] & _PEND:
            key = Dkey[typ, x, w, Dcnt[typ, x, w] - 1]
            k = key >> (2 * S)
            i = (key >> S) & M
            j = key & M
            lt, lx, lw, lc, rt_, rx_, rw_, rc = _parts(typ, x, w, k, P)
            need_r = (i + 1) * (j + 2) <= K
            need_l = j == 0 and i + 2 <= K
            pending = False
            if need_r and (hoff[rt_, rx_, rw_] < 0 or (Dcnt[rt_, rx_, rw_] <= j + 1
                                                      and not state[rt_, rx_, rw_] & _EXH)):
                stack[sp, 0] = rt_
                stack[sp, 1] = rx_
                stack[sp, 2] = rw_
                stack[sp, 3] = j + 1
                sp += 1
                pending = True
            if need_l and (hoff[lt, lx, lw] < 0 or (Dcnt[lt, lx, lw] <= i + 1
                                                    and not state[lt, lx, lw] & _EXH)):
                stack[sp, 0] = lt
                stack[sp, 1] = lx
                stack[sp, 2] = lw
                stack[sp, 3] = i + 1
                sp += 1
                pending = True
            if pending:
                continue
            # queue the successors (sift-up); part values with their arcs
            ex = np.float64(scores[b, 0, k + 1]) if typ == 3 else 0.0
            arc_l = SR[k, x * V + l] if typ == 0 else 0.0
            arc_r = SL[w - k, (x + k) * V + l] if typ == 1 else 0.0
            for succ in range(2):
                if succ == 0:
                    if not (need_r and Dcnt[rt_, rx_, rw_] > j + 1):
                        continue
                    ii = i
                    jj = j + 1
                    nkey = key + 1
                else:
                    if not (need_l and Dcnt[lt, lx, lw] > i + 1):
                        continue
                    ii = i + 1
                    jj = j
                    nkey = key + (1 << S)
                if ii == 0:
                    lv = CH[lc, lw, lx * V + l]
                else:
                    lv = Dval[lt, lx, lw, ii] + arc_l
                if jj == 0:
                    rv = CH[rc, rw_, rx_ * V + l]
                else:
                    rv = Dval[rt_, rx_, rw_, jj] + arc_r
                v = (ex + lv) + rv
                pos = size
                while pos > 0:
                    par = (pos - 1) >> 1
                    if not _better(v, nkey, Hv[base + par], Hk[base + par]):
                        break
                    Hv[base + pos] = Hv[base + par]
                    Hk[base + pos] = Hk[base + par]
                    pos = par
                Hv[base + pos] = v
                Hk[base + pos] = nkey
                size += 1
            state[typ, x, w] &= ~_PEND
        if size == 0:
            hsz[typ, x, w] = 0
            state[typ, x, w] |= _EXH
            sp -= 1
            continue
        # pop the best candidate into the item's list
        d = Dcnt[typ, x, w]
        Dval[typ, x, w, d] = Hv[base]
        Dkey[typ, x, w, d] = Hk[base]
        Dcnt[typ, x, w] = d + 1
        size -= 1
        v = Hv[base + size]
        _sift_down(Hv, Hk, base, 0, size, v, Hk[base + size])
        hsz[typ, x, w] = size
        state[typ, x, w] |= _PEND
    # ---- backtrack every derivation of the root item ----------------------
    for q in range(Dcnt[rt, rx, rw]):
        tscores[b, q] = Dval[rt, rx, rw, q]
        stack[0, 0] = rt
        stack[0, 1] = rx
        stack[0, 2] = rw
        stack[0, 3] = q
        sp = 1
        while sp > 0:
            sp -= 1
            typ = stack[sp, 0]
            x = stack[sp, 1]
            w = stack[sp, 2]
            rank = stack[sp, 3]
            if typ <= 1 and w == 0:
                continue
            if hoff[typ, x, w] >= 0 and rank < Dcnt[typ, x, w]:
                key = Dkey[typ, x, w, rank]
            else:
                # rank 0 of an item never expanded: the first split that
                # attains its chart value (the same additions)
                if typ == 3:
                    target = top
                else:
                    target = CH[typ, w, x * V + l]
                k0, k1 = _splits(typ, w, P)
                key = (k1 - 1) << (2 * S)
                for k in range(k0, k1):
                    lt, lx, lw, lc, rt_, rx_, rw_, rc = _parts(typ, x, w, k, P)
                    ex = np.float64(scores[b, 0, k + 1]) if typ == 3 else 0.0
                    v = (ex + CH[lc, lw, lx * V + l]) + CH[rc, rw_, rx_ * V + l]
                    if v == target:
                        key = k << (2 * S)
                        break
            k = key >> (2 * S)
            i = (key >> S) & M
            j = key & M
            if typ == 0:
                heads[b, q, lo + x + k] = lo + x
            elif typ == 1:
                heads[b, q, lo + x + k] = lo + x + w
            elif typ == 3:
                heads[b, q, k + 1] = 0
            lt, lx, lw, lc, rt_, rx_, rw_, rc = _parts(typ, x, w, k, P)
            stack[sp, 0] = lt
            stack[sp, 1] = lx
            stack[sp, 2] = lw
            stack[sp, 3] = i
            stack[sp + 1, 0] = rt_
            stack[sp + 1, 1] = rx_
            stack[sp + 1, 2] = rw_
            stack[sp + 1, 3] = j
            sp += 2
    return True


@njit(cache=True)
def _eisner_kbest_kernel(scores, lengths, order, V, K, single_root, heads, tscores):
    """k-best Eisner over a batch: per chunk of V sentences the 1-best
    forward chart (:func:`_eisner_forward`), then :func:`_kbest_lane` per
    sentence.  Work arrays are allocated once per batch."""
    B = scores.shape[0]
    N1 = scores.shape[1]
    W = N1 * V
    CH = np.empty((5, N1, W))       # CR, CL, IS, IR, IL
    SR = np.zeros((N1, W))
    SL = np.zeros((N1, W))
    best = np.empty(W)
    Dval = np.empty((4, N1, N1, K))
    Dkey = np.empty((4, N1, N1, K), dtype=np.int64)
    Dcnt = np.zeros((4, N1, N1), dtype=np.int64)
    hoff = np.empty((4, N1, N1), dtype=np.int64)
    hsz = np.zeros((4, N1, N1), dtype=np.int64)
    state = np.zeros((4, N1, N1), dtype=np.int64)
    cap = 16 * (N1 + 2 * K + 2)    # heap pool; doubled when a sentence needs more
    Hv = np.empty(cap)
    Hk = np.empty(cap, dtype=np.int64)
    stack = np.empty((8 * N1 + 16, 4), dtype=np.int64)
    lo = 1 if single_root else 0
    for c0 in range(0, B, V):
        nl = min(V, B - c0)
        P = np.int64(1)
        for l in range(nl):
            b = order[c0 + l]
            if lengths[b] + 1 - lo > P:
                P = lengths[b] + 1 - lo
        _eisner_forward(scores, lengths, order, c0, nl, V, lo, P,
                        CH[0], CH[1], CH[3], CH[4], CH[2], SR, SL, best)
        for l in range(nl):
            b = order[c0 + l]
            n = lengths[b]
            if n == 0:
                heads[b, :, :] = -1
                tscores[b, :] = _NEG
                tscores[b, 0] = 0.0
                continue
            while not _kbest_lane(b, l, V, lo, n + 1 - lo, K, single_root, scores, CH,
                                  SR, SL, Dval, Dkey, Dcnt, hoff, hsz, state, Hv, Hk,
                                  stack, heads, tscores):
                cap *= 2
                Hv = np.empty(cap)
                Hk = np.empty(cap, dtype=np.int64)


@njit(cache=True)
def _eisner_kbest_one(scores, K, single_root):
    """One sentence (scores (n+1, n+1) float64, C order) in a single call:
    validation, :func:`_eisner_kbest_kernel` and the count of finite trees
    (-1 if a score is NaN or +inf).  Saves the batch wrapper's numpy calls,
    which cost more than the k-best search itself for short sentences."""
    N1 = scores.shape[0]
    batch = scores.reshape((1, N1, N1))
    lengths = np.full(1, N1 - 1, dtype=np.int64)
    heads = np.empty((1, K, N1), dtype=np.int64)
    tscores = np.empty((1, K))
    if _find_bad_scores(batch, lengths) >= 0:
        return heads[0], tscores[0], -1
    V = lengths.shape[0]    # 1, as a run-time int: a literal would compile the kernel again
    _eisner_kbest_kernel(batch, lengths, np.zeros(1, dtype=np.int64), V, K, single_root,
                         heads, tscores)
    cnt = 0
    while cnt < K and tscores[0, cnt] > _NEG:
        cnt += 1
    return heads[0], tscores[0], cnt


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

    O(n^3 + k n^2 log(n + k)) time per sentence (the 1-best chart plus lazy
    enumeration, typically 3-6 times the cost of ``eisner``); memory about
    (64 k + 450) (N+1)^2 bytes (20 MB for k = 5 at N = 160).  Raises
    ValueError if no tree with a finite score exists.
    """
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if (lengths is None and isinstance(scores, np.ndarray) and scores.ndim == 2
            and scores.shape[0] == scores.shape[1] and scores.shape[0] >= 1
            and scores.dtype.kind == "f"):
        # one sentence: everything in one compiled call
        heads, tscores, cnt = _eisner_kbest_one(
            np.ascontiguousarray(scores, dtype=np.float64), k, bool(single_root))
        if cnt < 0:
            raise ValueError("scores contain NaN or +inf; "
                             "use finite values, or -inf for a forbidden arc")
        if cnt == 0:
            raise _no_tree_error(0, True, single_root, True)
        return heads[:cnt], tscores[:cnt]
    batch, lengths, single = _prepare(scores, lengths)
    B, N1 = batch.shape[0], batch.shape[1]
    heads = np.empty((B, k, N1), dtype=np.int64)
    tscores = np.empty((B, k), dtype=np.float64)
    if B >= 2 * _LANES and N1 <= _LANES_MAX_N + 1:
        lanes = _LANES
        order = np.argsort(lengths, kind="stable")   # similar lengths share a chunk
    else:
        lanes = 1
        order = np.arange(B)
    _eisner_kbest_kernel(batch, lengths, order, lanes, k, bool(single_root), heads, tscores)
    empty = tscores[:, 0] == _NEG
    if empty.any():
        raise _no_tree_error(int(np.argmax(empty)), single, single_root, True)
    if single:
        kk = int(np.count_nonzero(tscores[0] > _NEG))
        return heads[0, :kk], tscores[0, :kk]
    return heads, tscores
