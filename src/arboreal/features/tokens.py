"""Token features for sequence tagging (UPOS, XPOS, FEATS, lemma rules).

A word type is described once by a row of :data:`N_ATTRS` 64-bit *attribute hashes*
(:class:`WordAttributes`, cached per type): the form, its normalised lower-case form
(digits -> 0), suffixes of 1-5 and prefixes of 1-3 characters, a word shape, and the
*ambiguity class* (the set of UPOS tags the training data gave the word, for words seen
at least :data:`MIN_AMBIGUITY_COUNT` times; while training, the tags the *other* parts
of the training data gave it, see ``arboreal.models.tagger``). Hashes are stable across
processes (BLAKE2b), so a model file means the same thing everywhere; no string
vocabulary is stored.

A tagging *stage* predicts one column, greedily left to right or by Viterbi (below).
At token ``i`` its features (:func:`token_features`) are the attributes of the words at
``i-2..i+2``, its own predictions at ``i-1`` and ``i-2``, and the values of earlier stages' columns (the
*context*, e.g. the predicted UPOS for the FEATS stage) at ``i-1, i, i+1``. A stage's
classes may be restricted by a *condition* (one context column): the candidates of
condition value ``u`` are ``cand[u, :cand_n[u]]``. Weights are one flat float32 vector
of ``2**bits + MAX_CANDIDATES`` entries: feature ``f`` under condition ``u`` reads the
``cand_n[u]`` consecutive weights at a hashed offset, one per candidate, so scoring a
token costs one contiguous read per feature (:func:`score_candidates`).

Decoding. :func:`greedy_tag` takes each token's best candidate given the classes it
already chose. :func:`viterbi_tag` finds the exact best sequence. Of the base features,
:data:`N_HISTORY1_FEATURES` read the previous class (alone, with the word, with the next
word's ambiguity class, with the word's 2-suffix) and one the pair (prev1, prev2)
(:func:`history_feature`); the rest, and every context feature, do not read the stage's
own history (:func:`static_features`) and are scored once per (token, candidate), as in
greedy decoding. With the pair feature the exact state is the pair (t_{i-1}, t_{i-2}):
O(K^3) per token for K candidates, plus K^2 pair-feature reads ("order 2"). Dropping the
pair feature makes a first-order chain, exact with state t_{i-1}: the prev1 features
are read once per (token, previous candidate), O(4 K_{i-1} K_i) per token ("order 1").
On EWT, GDT and IMST dev (``benchmarks/tagger_decoding.py --decodings viterbi
viterbi2``) order 2 was not better than order 1 and its UPOS kernel several times
slower: order 1 is the stages' ``viterbi`` decoding, order 2 stays available as
``viterbi2`` (memory O(n K^2) per sentence of n words, against O(n K)). A condition with no candidates is one pseudo-candidate of class -1 and score 0,
as in greedy decoding.
"""
from __future__ import annotations

import functools
import hashlib
import unicodedata

import numpy as np
from numba import njit

from arboreal._prefetch import prefetch
from arboreal.features.hashing import _fmix, _mix

#: the feature functions' version, saved in model files: a model trained with other
#: features is refused instead of silently meaning something else
FEATURES_VERSION = 1
#: attribute columns of a word type
(A_FORM, A_LOWER, A_SUF1, A_SUF2, A_SUF3, A_SUF4, A_SUF5, A_PRE1, A_PRE2, A_PRE3, A_SHAPE,
 A_AMBIG) = range(12)
N_ATTRS = 12
#: with word clusters, three more columns: the 4- and 6-bit prefixes and the whole bit
#: string of the word's cluster (Koo et al. 2008's granularities)
A_C4, A_C6, A_CL = range(N_ATTRS, N_ATTRS + 3)
N_CLUSTER_ATTRS = 3
#: features per token from the cluster columns (present only with clusters)
N_CLUSTER_FEATURES = 8
#: features per token from the words and the stage's own history
N_BASE_FEATURES = 35
#: of those, the features reading the stage's previous prediction only (prev1) ...
N_HISTORY1_FEATURES = 4
#: ... and the one reading the pair (prev1, prev2): N_BASE_FEATURES - N_HISTORY_FEATURES
#: features of a token do not depend on the stage's own history (see static_features)
N_HISTORY_FEATURES = N_HISTORY1_FEATURES + 1
#: features per context column
N_CONTEXT_FEATURES = 5
#: most candidates a condition value may have (the weight vector's padding)
MAX_CANDIDATES = 128
#: a word's ambiguity class is used when it was seen this often in training
MIN_AMBIGUITY_COUNT = 2
#: attribute value of positions outside the sentence (and of unknown ambiguity classes)
BOUNDARY = np.uint64(0x2545F4914F6CDD1D)
UNKNOWN = np.uint64(0x9E3779B97F4A7C15)


def stable_hash(text: str) -> int:
    """A 64-bit hash of ``text`` that is the same in every process (unlike ``hash``)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"),
                                          digest_size=8).digest(), "little")


def normalize(form: str) -> str:
    """Lower-case form with every decimal digit replaced by 0 (shared by lookups)."""
    return "".join("0" if ch.isdigit() else ch for ch in form.lower())


@functools.lru_cache(maxsize=1 << 16)
def shape_symbol(ch: str) -> str:
    """The class of one character in :func:`word_shape`: ``d`` digit, ``X`` upper, ``x``
    lower, ``a`` a letter without case, punctuation and symbols themselves, else the
    first letter of the Unicode category."""
    if ch.isdigit():
        return "d"
    if ch.isalpha():
        if ch.isupper():
            return "X"
        return "x" if ch.islower() else "a"
    cat = unicodedata.category(ch)
    return ch if cat[0] == "P" or cat[0] == "S" else cat[0]


def shape_of_symbols(symbols) -> str:
    """:func:`word_shape` of a string given its characters' :func:`shape_symbol`."""
    out: list[str] = []
    for c in symbols:
        if not out or out[-1] != c:
            out.append(c)
    if len(out) > 6:
        out = out[:3] + ["~"] + out[-2:]
    return "".join(out)


def word_shape(form: str) -> str:
    """Compressed shape: character classes (X upper, x lower, d digit, other kept),
    runs collapsed, at most 6 symbols; e.g. ``McDonald`` -> ``XxXx``, ``1,000`` -> ``d,d``."""
    return shape_of_symbols(map(shape_symbol, form))


class WordAttributes:
    """Attribute rows (N_ATTRS,) uint64 of word types, computed once per type.

    ``ambiguity`` maps a normalised form to its ambiguity-class string (from training
    data); other words get :data:`UNKNOWN` in column ``A_AMBIG``. With ``clusters``
    (:class:`~arboreal.features.clusters.Clusters`) rows have :data:`N_CLUSTER_ATTRS`
    more columns (``A_C4``, ``A_C6``, ``A_CL``; ``NOCL`` for words the clustering does
    not know), and :func:`token_features` adds :data:`N_CLUSTER_FEATURES` features.
    The cache is dropped when it passes ``max_cache`` types, so memory stays bounded on
    any corpus.
    """

    def __init__(self, ambiguity: dict[str, str] | None = None, max_cache: int = 1 << 20,
                 clusters=None):
        self.ambiguity = dict(ambiguity or {})
        self.max_cache = max_cache
        self.clusters = clusters
        self.width = N_ATTRS + (N_CLUSTER_ATTRS if clusters is not None else 0)
        self._cache: dict[str, np.ndarray] = {}

    def _row(self, form: str) -> np.ndarray:
        low = normalize(form)
        values = [stable_hash("f" + form), stable_hash("l" + low)]
        values += [stable_hash(f"s{k}" + low[-k:]) for k in range(1, 6)]
        values += [stable_hash(f"p{k}" + low[:k]) for k in range(1, 4)]
        values.append(stable_hash("h" + word_shape(form)))
        amb = self.ambiguity.get(low)
        values.append(stable_hash("a" + amb) if amb is not None else int(UNKNOWN))
        if self.clusters is not None:
            bits = self.clusters.cluster(form)
            values += [stable_hash("c4" + bits[:4]), stable_hash("c6" + bits[:6]),
                       stable_hash("cl" + bits)]
        return np.array(values, dtype=np.uint64)

    def rows(self, forms) -> np.ndarray:
        """(len(forms), width) uint64 attribute rows of a sequence of forms (width
        N_ATTRS, plus N_CLUSTER_ATTRS with clusters)."""
        out = np.empty((len(forms), self.width), dtype=np.uint64)
        cache = self._cache
        for i, form in enumerate(forms):
            row = cache.get(form)
            if row is None:
                if len(cache) >= self.max_cache:
                    cache.clear()
                row = cache[form] = self._row(form)
            out[i] = row
        return out


@njit(cache=True, inline="always")
def _at(attrs, start, end, i, a):
    if i < start or i >= end:
        return BOUNDARY
    return attrs[i, a]


@njit(cache=True, inline="always")
def _f(template, a, b=np.uint64(0)):
    return _mix(_mix(np.uint64(template) * np.uint64(0x9E3779B97F4A7C15), a), b)


@njit(cache=True, inline="always")
def history_feature(h, attrs, start, end, i, prev1, prev2):
    """The ``h``-th feature of token ``i`` that reads the stage's own history:
    ``h < N_HISTORY1_FEATURES`` read ``prev1`` only, ``h == N_HISTORY1_FEATURES`` the
    pair (``prev1``, ``prev2``); one definition shared by :func:`token_features` (greedy)
    and the Viterbi kernels, so both read the same weights."""
    p1 = np.uint64(prev1 + 2)
    if h == 0:
        return _f(24, p1)
    if h == 1:
        return _f(26, p1, attrs[i, A_LOWER])
    if h == 2:
        return _f(29, p1, _at(attrs, start, end, i + 1, A_AMBIG))
    if h == 3:
        return _f(31, p1, attrs[i, A_SUF2])
    return _f(25, p1, np.uint64(prev2 + 2))


@njit(cache=True, inline="always")
def _is_history(t):
    return t == 24 or t == 25 or t == 26 or t == 29 or t == 31


@njit(cache=True, inline="always")
def feature_count(attrs, ctx):
    """F, the number of features :func:`token_features` writes per token for attribute
    rows ``attrs`` (with or without cluster columns) and context columns ``ctx``."""
    clusters = N_CLUSTER_FEATURES if attrs.shape[1] > N_ATTRS else 0
    return N_BASE_FEATURES + clusters + N_CONTEXT_FEATURES * ctx.shape[1]


@njit(cache=True)
def token_features(attrs, start, end, i, ctx, prev1, prev2, out):
    """Fill ``out[:F]`` with the feature hashes of token ``i`` of the sentence
    ``start..end-1`` (rows of ``attrs`` (N, N_ATTRS) uint64); ``ctx`` (N, C) int32 holds
    the context columns' class ids, ``prev1`` / ``prev2`` this stage's predictions at
    i-1 / i-2 (-1 before the sentence). F: :func:`feature_count`; cluster features (rows
    with cluster columns) come after the base features, then the context features."""
    w0 = attrs[i, A_LOWER]
    wm1 = _at(attrs, start, end, i - 1, A_LOWER)
    wp1 = _at(attrs, start, end, i + 1, A_LOWER)
    first = np.uint64(1 if i == start else 0)
    out[0] = _f(0, first)
    out[1] = _f(1, w0)
    out[2] = _f(2, attrs[i, A_FORM])
    out[3] = _f(3, attrs[i, A_SUF1])
    out[4] = _f(4, attrs[i, A_SUF2])
    out[5] = _f(5, attrs[i, A_SUF3])
    out[6] = _f(6, attrs[i, A_SUF4])
    out[7] = _f(7, attrs[i, A_SUF5])
    out[8] = _f(8, attrs[i, A_PRE1])
    out[9] = _f(9, attrs[i, A_PRE2])
    out[10] = _f(10, attrs[i, A_PRE3])
    out[11] = _f(11, attrs[i, A_SHAPE], first)
    out[12] = _f(12, attrs[i, A_AMBIG])
    out[13] = _f(13, wm1)
    out[14] = _f(14, wp1)
    out[15] = _f(15, _at(attrs, start, end, i - 2, A_LOWER))
    out[16] = _f(16, _at(attrs, start, end, i + 2, A_LOWER))
    out[17] = _f(17, _at(attrs, start, end, i - 1, A_SUF3))
    out[18] = _f(18, _at(attrs, start, end, i + 1, A_SUF3))
    out[19] = _f(19, _at(attrs, start, end, i - 1, A_AMBIG))
    out[20] = _f(20, _at(attrs, start, end, i + 1, A_AMBIG))
    out[21] = _f(21, _at(attrs, start, end, i + 2, A_AMBIG))
    out[22] = _f(22, _at(attrs, start, end, i - 1, A_SHAPE))
    out[23] = _f(23, _at(attrs, start, end, i + 1, A_SHAPE))
    out[24] = history_feature(0, attrs, start, end, i, prev1, prev2)
    out[25] = history_feature(N_HISTORY1_FEATURES, attrs, start, end, i, prev1, prev2)
    out[26] = history_feature(1, attrs, start, end, i, prev1, prev2)
    out[27] = _f(27, wm1, w0)
    out[28] = _f(28, w0, wp1)
    out[29] = history_feature(2, attrs, start, end, i, prev1, prev2)
    out[30] = _f(30, attrs[i, A_SHAPE], attrs[i, A_SUF3])
    out[31] = history_feature(3, attrs, start, end, i, prev1, prev2)
    out[32] = _f(32, wm1, attrs[i, A_SUF3])
    out[33] = _f(33, attrs[i, A_PRE3], attrs[i, A_SUF3])
    out[34] = _f(34, attrs[i, A_SUF3], _at(attrs, start, end, i + 1, A_AMBIG))
    k = N_BASE_FEATURES
    if attrs.shape[1] > N_ATTRS:
        c6 = attrs[i, A_C6]
        out[k] = _f(40, attrs[i, A_C4])
        out[k + 1] = _f(41, c6)
        out[k + 2] = _f(42, attrs[i, A_CL])
        out[k + 3] = _f(43, _at(attrs, start, end, i - 1, A_CL))
        out[k + 4] = _f(44, _at(attrs, start, end, i + 1, A_CL))
        out[k + 5] = _f(45, _at(attrs, start, end, i - 1, A_C6), c6)
        out[k + 6] = _f(46, c6, _at(attrs, start, end, i + 1, A_C6))
        out[k + 7] = _f(47, attrs[i, A_CL], attrs[i, A_SUF3])
        k += N_CLUSTER_FEATURES
    for c in range(ctx.shape[1]):
        t = 100 + 10 * c
        v0 = np.uint64(ctx[i, c] + 2)
        vm = np.uint64(ctx[i - 1, c] + 2) if i > start else np.uint64(0)
        vp = np.uint64(ctx[i + 1, c] + 2) if i + 1 < end else np.uint64(0)
        out[k] = _f(t, v0)
        out[k + 1] = _f(t + 1, vm, v0)
        out[k + 2] = _f(t + 2, v0, vp)
        out[k + 3] = _f(t + 3, v0, w0)
        out[k + 4] = _f(t + 4, v0, attrs[i, A_SUF3])
        k += N_CONTEXT_FEATURES
    return k


@njit(cache=True)
def static_features(attrs, start, end, i, ctx, out):
    """Fill ``out`` with the features of token ``i`` that do not read the stage's own
    history (those of :func:`token_features` less the :data:`N_HISTORY_FEATURES` of
    :func:`history_feature`), in the same order; returns their number."""
    nf = token_features(attrs, start, end, i, ctx, -1, -1, out)
    k = 0
    for t in range(nf):
        if not _is_history(t):
            out[k] = out[t]
            k += 1
    return k


@njit(cache=True, inline="always")
def feature_offset(f, cond, mask):
    """Where the candidate weights of feature hash ``f`` under condition ``cond`` start."""
    return np.int64(_fmix(_mix(f, np.uint64(cond + 1))) & mask)


@njit(cache=True)
def score_candidates(feats, nf, cond, k, w, mask, scores, offsets):
    """``scores[j] = sum_f w[offset(f) + j]`` for the ``k`` candidates of ``cond``
    (``offsets``: scratch of at least ``nf`` int64).
    The offsets are computed and prefetched first: the reads are random in a table of
    megabytes, and issuing them together overlaps their cache misses."""
    for t in range(nf):
        o = feature_offset(feats[t], cond, mask)
        offsets[t] = o
        prefetch(w, o)
        prefetch(w, o + k - 1)
    for j in range(k):
        scores[j] = 0.0
    for t in range(nf):
        o = offsets[t]
        for j in range(k):
            scores[j] += w[o + j]


@njit(cache=True, inline="always")
def condition(ctx, i, cond_col, n_cond):
    """The condition value of token ``i`` (its row of candidates; 0 when unconditioned
    or out of range)."""
    u = 0 if cond_col < 0 else max(ctx[i, cond_col], 0)
    return u if u < n_cond else 0


@njit(cache=True, inline="always")
def best_candidate(attrs, a, b, i, ctx, cond_col, cand, cand_n, w, mask, p1, p2, feats, scores,
                   offsets):
    """Score token ``i`` of the sentence ``a..b-1``: (condition value, slot of its best
    candidate or -1 when the condition has none, number of features in ``feats``)."""
    u = condition(ctx, i, cond_col, cand.shape[0])
    k = cand_n[u]
    if k == 0:
        return u, -1, 0
    nf = token_features(attrs, a, b, i, ctx, p1, p2, feats)
    score_candidates(feats, nf, u, k, w, mask, scores, offsets)
    best = 0
    for j in range(1, k):
        if scores[j] > scores[best]:
            best = j
    return u, best, nf


@njit(cache=True)
def greedy_tag(attrs, starts, ctx, cond_col, cand, cand_n, w, bits, out):
    """Greedy left-to-right tagging of a packed corpus: ``out[i]`` the class id of token
    i. ``starts`` (S+1,) int64 sentence offsets into the rows of ``attrs`` / ``ctx``;
    ``cond_col``: the context column that conditions the candidates (-1: none).
    O(N * F * candidates)."""
    mask = np.uint64((1 << bits) - 1)
    F = feature_count(attrs, ctx)
    feats = np.empty(F, dtype=np.uint64)
    offsets = np.empty(F, dtype=np.int64)
    scores = np.empty(cand.shape[1], dtype=np.float64)
    for s in range(starts.shape[0] - 1):
        a, b = starts[s], starts[s + 1]
        p1 = -1
        p2 = -1
        for i in range(a, b):
            u, best, _ = best_candidate(attrs, a, b, i, ctx, cond_col, cand, cand_n, w, mask,
                                        p1, p2, feats, scores, offsets)
            out[i] = cand[u, best] if best >= 0 else -1
            p2, p1 = p1, out[i]
    return out


# ---------------------------------------------------------------------- Viterbi
@njit(cache=True, inline="always")
def _class(cand, cand_n, u, j):
    """Class of slot ``j`` of condition ``u`` (-1: no candidates, or a boundary)."""
    return cand[u, j] if j >= 0 and cand_n[u] > 0 else -1


@njit(cache=True)
def viterbi_buffers(n_max, width, n_features, order):
    """Scratch arrays of :func:`viterbi_sentence` for sentences of at most ``n_max``
    words and conditions of at most ``width`` candidates (O(n_max * width) memory at
    order 1, O(n_max * width**2) at order 2)."""
    width = max(width, 1)
    n_max = max(n_max, 1)
    feats = np.empty(max(n_features, 1), dtype=np.uint64)
    offsets = np.empty(max(n_features, 1), dtype=np.int64)
    hoffs = np.empty(N_HISTORY1_FEATURES * width + (width * width if order == 2 else 0),
                     dtype=np.int64)
    scores = np.empty(width, dtype=np.float64)
    best = np.empty(width, dtype=np.float64)
    rows = width if order == 2 else 1
    trans = np.empty((width, width), dtype=np.float64)
    delta = np.empty((rows, width), dtype=np.float64)
    prev = np.empty((rows, width), dtype=np.float64)
    conds = np.empty(n_max, dtype=np.int64)
    bp = np.empty((n_max, rows, width), dtype=np.int16)
    return feats, offsets, hoffs, scores, best, trans, delta, prev, conds, bp


@njit(cache=True)
def viterbi_sentence(attrs, a, b, ctx, cond_col, cand, cand_n, w, mask, order, feats, offsets,
                     hoffs, scores, best, trans, delta, prev, conds, bp, slots):
    """Exact Viterbi decoding of the sentence ``a..b-1`` under weights ``w``: fills
    ``slots[:b - a]`` with the slot of each token's class among its condition's
    candidates (-1 where the condition has none) and returns the sequence's score.

    The score of a sequence is the sum over its tokens of the weights of the features
    :func:`token_features` gives with the sequence's own previous classes as history,
    less the (prev1, prev2) feature at ``order`` 1. Features that do not read the
    history are scored once per (token, candidate) (:func:`static_features`); the
    N_HISTORY1_FEATURES prev1 features once per (token, previous candidate); at
    ``order`` 2 the pair feature once per (token, previous pair).
    States: the previous token's slot at order 1 (O(K_{i-1} K_i) per token), the pair
    of the two previous tokens' slots at order 2 (O(K_{i-2} K_{i-1} K_i)). Scratch
    arrays from :func:`viterbi_buffers`."""
    n = b - a
    if n <= 0:
        return 0.0
    nh = N_HISTORY1_FEATURES
    n_cond = cand.shape[0]
    kpp = 1          # candidates at i-2 and i-1 (1 at the boundary: class -1)
    kp = 1
    prev[0, 0] = 0.0
    for li in range(n):
        i = a + li
        u = condition(ctx, i, cond_col, n_cond)
        conds[li] = u
        k = cand_n[u]
        ke = max(k, 1)
        up = conds[li - 1] if li >= 1 else 0
        upp = conds[li - 2] if li >= 2 else 0
        if k > 0:
            nf = static_features(attrs, a, b, i, ctx, feats)
            score_candidates(feats, nf, u, k, w, mask, scores, offsets)
            for jp in range(kp):
                pc = _class(cand, cand_n, up, jp) if li >= 1 else -1
                for h in range(nh):
                    o = feature_offset(history_feature(h, attrs, a, b, i, pc, -1), u, mask)
                    hoffs[jp * nh + h] = o
                    prefetch(w, o)
                    prefetch(w, o + k - 1)
            if order == 2:
                base = nh * kp
                for jpp in range(kpp):
                    ppc = _class(cand, cand_n, upp, jpp) if li >= 2 else -1
                    for jp in range(kp):
                        pc = _class(cand, cand_n, up, jp) if li >= 1 else -1
                        o = feature_offset(history_feature(nh, attrs, a, b, i, pc, ppc), u,
                                           mask)
                        hoffs[base + jpp * kp + jp] = o
                        prefetch(w, o)
                        prefetch(w, o + k - 1)
            if order == 2:      # (the four prev1 rows summed by hand: N_HISTORY1_FEATURES)
                for jp in range(kp):
                    o0, o1 = hoffs[jp * nh], hoffs[jp * nh + 1]
                    o2, o3 = hoffs[jp * nh + 2], hoffs[jp * nh + 3]
                    for j in range(k):
                        trans[jp, j] = ((np.float64(w[o0 + j]) + w[o1 + j])
                                        + (w[o2 + j] + np.float64(w[o3 + j])))
        else:
            scores[0] = 0.0
            for jp in range(kp):
                trans[jp, 0] = 0.0
        if order == 2:
            base = nh * kp
            for jp in range(kp):
                for j in range(ke):
                    best[j] = -np.inf
                for jpp in range(kpp):
                    d = prev[jpp, jp]
                    if k > 0:
                        o = hoffs[base + jpp * kp + jp]
                        for j in range(k):
                            v = d + w[o + j]
                            if v > best[j]:
                                best[j] = v
                                bp[li, jp, j] = jpp
                    elif d > best[0]:
                        best[0] = d
                        bp[li, jp, 0] = jpp
                for j in range(ke):
                    delta[jp, j] = best[j] + trans[jp, j] + scores[j]
        else:
            # fused: the four prev1 features' weights summed and maximised in one pass
            for j in range(ke):
                delta[0, j] = -np.inf
            for jp in range(kp):
                d = prev[0, jp]
                if k > 0:
                    o0, o1 = hoffs[jp * nh], hoffs[jp * nh + 1]
                    o2, o3 = hoffs[jp * nh + 2], hoffs[jp * nh + 3]
                    for j in range(k):
                        best[j] = d + ((np.float64(w[o0 + j]) + w[o1 + j])
                                       + (w[o2 + j] + np.float64(w[o3 + j])))
                    for j in range(k):
                        if best[j] > delta[0, j]:
                            delta[0, j] = best[j]
                            bp[li, 0, j] = jp
                elif d > delta[0, 0]:
                    delta[0, 0] = d
                    bp[li, 0, 0] = jp
            for j in range(ke):
                delta[0, j] += scores[j]
        delta, prev = prev, delta
        kpp, kp = kp, ke
    # the best final state, then back
    if order == 2:
        bjp, bj = 0, 0
        top = prev[0, 0]
        for jp in range(kpp):
            for j in range(kp):
                if prev[jp, j] > top:
                    top, bjp, bj = prev[jp, j], jp, j
        j, jp = bj, bjp
        for li in range(n - 1, -1, -1):
            slots[li] = j if cand_n[conds[li]] > 0 else -1
            if li >= 1:
                jpp = bp[li, jp, j]
                j, jp = jp, jpp
    else:
        bj = 0
        top = prev[0, 0]
        for j in range(kp):
            if prev[0, j] > top:
                top, bj = prev[0, j], j
        j = bj
        for li in range(n - 1, -1, -1):
            slots[li] = j if cand_n[conds[li]] > 0 else -1
            j = bp[li, 0, j]
    return top


@njit(cache=True)
def viterbi_tag(attrs, starts, ctx, cond_col, cand, cand_n, w, bits, order, out):
    """Exact Viterbi tagging (:func:`viterbi_sentence`, ``order`` 1 or 2) of a packed
    corpus, arguments as :func:`greedy_tag`: ``out[i]`` the class id of token i (-1 where
    its condition has no candidates)."""
    mask = np.uint64((1 << bits) - 1)
    n_max = 0
    for s in range(starts.shape[0] - 1):
        n_max = max(n_max, starts[s + 1] - starts[s])
    F = feature_count(attrs, ctx)
    feats, offsets, hoffs, scores, best, trans, delta, prev, conds, bp = viterbi_buffers(
        n_max, cand.shape[1], F, order)
    slots = np.empty(max(n_max, 1), dtype=np.int64)
    for s in range(starts.shape[0] - 1):
        a, b = starts[s], starts[s + 1]
        viterbi_sentence(attrs, a, b, ctx, cond_col, cand, cand_n, w, mask, order, feats,
                         offsets, hoffs, scores, best, trans, delta, prev, conds, bp, slots)
        for li in range(b - a):
            out[a + li] = _class(cand, cand_n, conds[li], slots[li])
    return out
