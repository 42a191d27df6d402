"""Token features for sequence tagging (UPOS, XPOS, FEATS, lemma rules).

A word type is described once by a row of :data:`N_ATTRS` 64-bit *attribute hashes*
(:class:`WordAttributes`, cached per type): the form, its normalised lower-case form
(digits -> 0), suffixes of 1-5 and prefixes of 1-3 characters, a word shape, and the
*ambiguity class* (the set of UPOS tags the training data gave the word, for words seen
at least :data:`MIN_AMBIGUITY_COUNT` times; while training, the tags the *other* parts
of the training data gave it, see ``arboreal.models.tagger``). Hashes are stable across
processes (BLAKE2b), so a model file means the same thing everywhere; no string
vocabulary is stored.

A tagging *stage* predicts one column left to right (greedy). At token ``i`` its
features (:func:`token_features`) are the attributes of the words at ``i-2..i+2``, its own
predictions at ``i-1`` and ``i-2``, and the values of earlier stages' columns (the
*context*, e.g. the predicted UPOS for the FEATS stage) at ``i-1, i, i+1``. A stage's
classes may be restricted by a *condition* (one context column): the candidates of
condition value ``u`` are ``cand[u, :cand_n[u]]``. Weights are one flat float32 vector
of ``2**bits + MAX_CANDIDATES`` entries: feature ``f`` under condition ``u`` reads the
``cand_n[u]`` consecutive weights at a hashed offset, one per candidate, so scoring a
token costs one contiguous read per feature (:func:`score_candidates`).
"""
from __future__ import annotations

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
#: features per token from the words and the stage's own history
N_BASE_FEATURES = 35
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


def word_shape(form: str) -> str:
    """Compressed shape: character classes (X upper, x lower, d digit, other kept),
    runs collapsed, at most 6 symbols; e.g. ``McDonald`` -> ``XxXx``, ``1,000`` -> ``d,d``."""
    out: list[str] = []
    for ch in form:
        if ch.isdigit():
            c = "d"
        elif ch.isalpha():
            c = "X" if ch.isupper() else "x"
            if not ch.isupper() and not ch.islower():   # scripts without case
                c = "a"
        else:
            cat = unicodedata.category(ch)
            c = ch if cat[0] == "P" or cat[0] == "S" else cat[0]
        if not out or out[-1] != c:
            out.append(c)
    if len(out) > 6:
        out = out[:3] + ["~"] + out[-2:]
    return "".join(out)


class WordAttributes:
    """Attribute rows (N_ATTRS,) uint64 of word types, computed once per type.

    ``ambiguity`` maps a normalised form to its ambiguity-class string (from training
    data); other words get :data:`UNKNOWN` in column ``A_AMBIG``. The cache is dropped
    when it passes ``max_cache`` types, so memory stays bounded on any corpus.
    """

    def __init__(self, ambiguity: dict[str, str] | None = None, max_cache: int = 1 << 20):
        self.ambiguity = dict(ambiguity or {})
        self.max_cache = max_cache
        self._cache: dict[str, np.ndarray] = {}

    def _row(self, form: str) -> np.ndarray:
        low = normalize(form)
        values = [stable_hash("f" + form), stable_hash("l" + low)]
        values += [stable_hash(f"s{k}" + low[-k:]) for k in range(1, 6)]
        values += [stable_hash(f"p{k}" + low[:k]) for k in range(1, 4)]
        values.append(stable_hash("h" + word_shape(form)))
        amb = self.ambiguity.get(low)
        values.append(stable_hash("a" + amb) if amb is not None else int(UNKNOWN))
        return np.array(values, dtype=np.uint64)

    def rows(self, forms) -> np.ndarray:
        """(len(forms), N_ATTRS) uint64 attribute rows of a sequence of forms."""
        out = np.empty((len(forms), N_ATTRS), dtype=np.uint64)
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


@njit(cache=True)
def token_features(attrs, start, end, i, ctx, prev1, prev2, out):
    """Fill ``out[:F]`` with the feature hashes of token ``i`` of the sentence
    ``start..end-1`` (rows of ``attrs`` (N, N_ATTRS) uint64); ``ctx`` (N, C) int32 holds
    the context columns' class ids, ``prev1`` / ``prev2`` this stage's predictions at
    i-1 / i-2 (-1 before the sentence). F = N_BASE_FEATURES + N_CONTEXT_FEATURES * C."""
    w0 = attrs[i, A_LOWER]
    wm1 = _at(attrs, start, end, i - 1, A_LOWER)
    wp1 = _at(attrs, start, end, i + 1, A_LOWER)
    p1 = np.uint64(prev1 + 2)
    p2 = np.uint64(prev2 + 2)
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
    out[24] = _f(24, p1)
    out[25] = _f(25, p1, p2)
    out[26] = _f(26, p1, w0)
    out[27] = _f(27, wm1, w0)
    out[28] = _f(28, w0, wp1)
    out[29] = _f(29, p1, _at(attrs, start, end, i + 1, A_AMBIG))
    out[30] = _f(30, attrs[i, A_SHAPE], attrs[i, A_SUF3])
    out[31] = _f(31, p1, attrs[i, A_SUF2])
    out[32] = _f(32, wm1, attrs[i, A_SUF3])
    out[33] = _f(33, attrs[i, A_PRE3], attrs[i, A_SUF3])
    out[34] = _f(34, attrs[i, A_SUF3], _at(attrs, start, end, i + 1, A_AMBIG))
    k = N_BASE_FEATURES
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
def best_candidate(attrs, a, b, i, ctx, cond_col, cand, cand_n, w, mask, p1, p2, feats, scores,
                   offsets):
    """Score token ``i`` of the sentence ``a..b-1``: (condition value, slot of its best
    candidate or -1 when the condition has none, number of features in ``feats``)."""
    u = 0 if cond_col < 0 else max(ctx[i, cond_col], 0)
    if u >= cand.shape[0]:
        u = 0
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
    F = N_BASE_FEATURES + N_CONTEXT_FEATURES * ctx.shape[1]
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
