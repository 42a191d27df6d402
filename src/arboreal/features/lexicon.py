"""Word statistics from unlabeled text: counts, co-occurrence PMI, similar words.

The word-pair statistics of Wang, Cherry, Lizotte & Schuurmans (2006), "Improved Large
Margin Dependency Parsing via Local Constraints and Laplacian Regularization": the
pointwise mutual information of words that occur near each other, and a graph of
distributionally similar words, for parser features to look up.

Definitions (the exact estimates)
---------------------------------
**Tokens** are read as ``arboreal clusters`` reads them (:data:`CORPUS_FORMATS`,
:mod:`arboreal.features.clusters`) and normalised by :func:`normalize_word` (lower
case, every decimal digit ``0``), for counting and for every lookup.

**Window.** Two tokens at positions ``i < j`` of one line (one sentence of CoNLL-U)
co-occur when ``j - i <= W`` (``window``): each token is paired with each of the next
``W`` tokens of its line, so ``W = 1`` counts adjacent tokens only. A window never
crosses a line end, nor the end of a file. Pairs are **unordered**: ``(a, b)`` and
``(b, a)`` are one pair, stored under ``(min id, max id)``, since a parser asks about
(head, modifier) in either order; a word may pair with itself (``the ... the``).

**Totals.** ``T`` = every token of the corpus; ``N`` = every co-occurring pair of
tokens (each ``(i, j)`` above). Both are counted before any filtering.

**Filtering.** A word seen fewer than ``min_count`` times (or longer than
:data:`MAX_WORD_CHARS` characters) gets no id and its pairs are dropped, but it keeps its
position: the words around it are not brought closer. A pair of kept words seen fewer
than ``min_pair_count`` times is dropped. Filtering changes what is stored, not the
estimates of what is kept (``T`` and ``N`` stay the totals of the whole corpus).

**PMI** of a kept pair, natural logarithm, computed in float64 and stored as float32::

    PMI(a, b) = ln( p(a, b) / (p(a) p(b)) ),  p(a, b) = c(a, b) / N,  p(a) = c(a) / T

where ``c(a, b)`` counts the unordered pair. Because the pair is unordered, two
independent distinct words score about ``ln 2`` (either order counts), a word with
itself about ``0``.

**Similar words.** Word ``a``'s context vector has ``x_a[b] = max(PMI(a, b), 0)``
(positive PMI) for every kept pair ``{a, b}``, both directions (the pair gives
``x_a[b]`` and ``x_b[a]``; a pair ``(a, a)`` gives ``x_a[a]``), over all kept words
``b``. ``sim(a, b)`` is the cosine of ``x_a`` and ``x_b``, rounded to float32 (and at
most 1). For each of the ``S = min(similar_words, V)`` most frequent words its
neighbours are the at most ``K`` (``neighbours``) other words among those ``S`` with
``sim > 0``, most similar first, ties broken by the smaller word id.

**Word ids** are ranks: most frequent first, ties in code-point order of the word, so
the ``S`` words with neighbour lists are ids ``0 .. S-1``.

Public API::

    count_cooccurrences(sources, input_format, window, progress) -> CooccurrenceCounts
    build_lexicon(counts, min_count, min_pair_count, neighbours, similar_words,
                  progress) -> Lexicon
    Lexicon: .words, .counts, .index(word), .ids(words), .pmi(a, b), .pmi_many(ids_a,
             ids_b), .neighbours(word), .to_arrays(), Lexicon.from_arrays(arrays),
             .save(path), Lexicon.load(path)

Memory: counting streams the corpus (1 MiB blocks); it holds the vocabulary of every
distinct word (as :class:`arboreal.features.clusters._Counter` does) and 16 bytes per
distinct pair of co-occurring words (all words: the word filter needs the final
counts), in sorted runs merged as they grow; never anything per token. The similarity
graph is computed ``_SIM_BLOCK_ENTRIES`` similarities at a time.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

import numpy as np

from arboreal.errors import ArborealError, ModelError
from arboreal.features.clusters import (CORPUS_FORMATS, MAX_WORD_CHARS, _CONTROL, _Counter,
                                        normalize_word, ranked_vocabulary, stream_into)

#: ``model_type`` of a lexicon file, and the version of its layout
MODEL_TYPE = "lexicon"
LEXICON_VERSION = 1
#: largest --window: a window wider than a sentence adds nothing
MAX_WINDOW = 64
#: largest --neighbours
MAX_NEIGHBOURS = 1000
#: most words a lexicon holds (the limit of a string list in a model file)
MAX_LEXICON_WORDS = 1 << 24
#: a count larger than this in a file is corrupt (no corpus has that many tokens)
_MAX_COUNT = 1 << 60
_LOW32 = np.int64(0xFFFFFFFF)
#: window pairs packed into keys per np.unique call while counting
_PAIR_KEYS_PER_STEP = 1 << 22
#: similarities computed at once (a dense block of rows x S float32)
_SIM_BLOCK_ENTRIES = 1 << 22


# ---------------------------------------------------------------------------------------
# counting


class _PairCounter(_Counter):
    """Unigram counts and unordered window-pair counts of a token stream; the vocabulary
    and the sorted-run merging are those of :class:`~arboreal.features.clusters._Counter`
    (whose bigram runs here hold window pairs, key ``min(id) << 32 | max(id)`` in
    first-seen ids)."""

    def __init__(self, window: int) -> None:
        super().__init__()
        self.window = window
        self.pair_tokens = 0

    def add(self, data: bytes, by_unit: bool = False) -> None:
        """Count one buffer of whole lines (see :func:`_hash_tokens`). O(W n) numpy work
        for n tokens, plus sorting the buffer's pair keys."""
        ids = self.token_ids(data, by_unit)
        k = ids.size
        if not k:
            return
        # line of each position (id 0 ends a line): positions i < j share a line, and no
        # line end lies in (i, j], when their line numbers are equal and ids[i] != 0
        line = np.cumsum(ids == 0)
        step = max(1, _PAIR_KEYS_PER_STEP // k)
        for d0 in range(1, min(self.window, k - 1) + 1, step):
            parts = []
            for d in range(d0, min(d0 + step, self.window + 1, k)):
                a, b = ids[:-d], ids[d:]
                ok = (line[:-d] == line[d:]) & (a != 0)
                a, b = a[ok], b[ok]
                parts.append((np.minimum(a, b) << 32) | np.maximum(a, b))
            keys = np.concatenate(parts)
            if keys.size:
                self.pair_tokens += keys.size
                kk, c = np.unique(keys, return_counts=True)
                self._push(kk, c.astype(np.int64))


@dataclass
class CooccurrenceCounts:
    """Word counts and unordered window-pair counts of a corpus, before filtering.

    ``words[i]`` (normalised) seen ``counts[i]`` times, in rank order (most frequent
    first, ties in code-point order); ``keys[j] = a << 32 | b`` (``a <= b`` word ids,
    sorted, distinct) seen ``pair_counts[j]`` times. ``tokens`` = T, ``pair_tokens`` =
    N of the module docstring.
    """
    words: list
    counts: np.ndarray
    keys: np.ndarray
    pair_counts: np.ndarray
    window: int
    tokens: int = 0
    pair_tokens: int = 0
    sentences: int = 0
    sources: list = field(default_factory=list)


def count_cooccurrences(sources: Iterable, input_format: str = "tokenized", window: int = 5,
                        progress: Callable[[int], object] | None = None) -> CooccurrenceCounts:
    """Count the words and the unordered window pairs (``j - i <= window`` within a line)
    of one or more corpora (paths, ``"-"`` for standard input, or open binary files),
    streamed; the inputs are those of :func:`arboreal.features.clusters.count_corpus`.

    ``progress(tokens)`` is called after each block. FormatError (file, line) for invalid
    UTF-8 or a control character; ArborealError if there is no token at all.
    Time O(W T + D log D) for T tokens and D distinct pairs; memory O(words + D).
    """
    if input_format not in CORPUS_FORMATS:
        raise ValueError(f"input format must be one of {', '.join(CORPUS_FORMATS)}, "
                         f"not {input_format!r}")
    if not 1 <= window <= MAX_WINDOW:
        raise ArborealError(f"the window must be in 1..{MAX_WINDOW}, not {window}")
    counter = _PairCounter(window)
    names = stream_into(counter, sources, input_format, progress, "count")
    keys, pc = counter.bigrams()
    words, counts, rank = ranked_vocabulary(counter)
    a, b = rank[keys >> 32], rank[keys & _LOW32]
    new = (np.minimum(a, b) << 32) | np.maximum(a, b)
    del a, b
    perm = np.argsort(new, kind="stable")
    return CooccurrenceCounts(words, counts, new[perm], pc[perm], window, counter.tokens,
                              counter.pair_tokens, counter.sentences, names)


# ---------------------------------------------------------------------------------------
# the lexicon


def _pmi(pair_counts: np.ndarray, ca: np.ndarray, cb: np.ndarray, tokens: int,
         pair_tokens: int) -> np.ndarray:
    """float32 ln((c(a,b)/N) / ((c(a)/T) (c(b)/T))), in float64 until the end."""
    pmi = (np.log(pair_counts.astype(np.float64)) + 2.0 * math.log(tokens)
           - math.log(pair_tokens) - np.log(ca.astype(np.float64)) - np.log(cb.astype(np.float64)))
    return pmi.astype(np.float32)


def _similarity_graph(V: int, a: np.ndarray, b: np.ndarray, pmi: np.ndarray, S: int, K: int,
                      progress: Callable[[int, int], object] | None = None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr (S+1,) int64, indices (nnz,) int32, weights (nnz,) float32): the top-K
    cosine neighbours among words 0..S-1 of each of them (module docstring).

    The PPMI rows of the S words (CSR, S x V, unit length) are multiplied by their
    transpose ``block`` rows at a time, the block made dense (block x S float32) and
    cut to its top K per row: memory O(nnz + _SIM_BLOCK_ENTRIES), time that of the
    sparse product plus O(S^2) for the selection."""
    import scipy.sparse as sp

    indptr = np.zeros(S + 1, dtype=np.int64)
    if S == 0 or K == 0:
        return indptr, np.zeros(0, np.int32), np.zeros(0, np.float32)
    v = pmi.astype(np.float64)
    pos = v > 0                                     # positive PMI: the others are 0
    a, b, v = a[pos], b[pos], v[pos]
    first = a < S                                   # x_a[b]
    second = (b < S) & (a != b)                     # x_b[a]
    rows = np.concatenate([a[first], b[second]])
    cols = np.concatenate([b[first], a[second]])
    vals = np.concatenate([v[first], v[second]])
    X = sp.csr_matrix((vals, (rows, cols)), shape=(S, V), dtype=np.float64)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.diags(np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 0.0)) @ X
    X = X.tocsr()
    XT = X.T.tocsr()
    K = min(K, S - 1)
    block = max(1, min(S, _SIM_BLOCK_ENTRIES // S))
    out_c: list[np.ndarray] = []
    out_v: list[np.ndarray] = []
    lengths = np.zeros(S, dtype=np.int64)
    for r0 in range(0, S, block):
        r1 = min(S, r0 + block)
        n = r1 - r0
        D = (X[r0:r1] @ XT).toarray().astype(np.float32)
        np.minimum(D, 1.0, out=D)
        D[np.arange(n), np.arange(r0, r1)] = 0.0    # never one's own neighbour
        if K > 0:
            kth = -np.partition(-D, K - 1, axis=1)[:, K - 1]
            r, c = np.nonzero((D >= kth[:, None]) & (D > 0))
            val = D[r, c]
            order = np.lexsort((c, -val, r))
            r, c, val = r[order], c[order], val[order]
            rank = np.arange(r.size) - np.searchsorted(r, r)
            keep = rank < K
            r, c, val = r[keep], c[keep], val[keep]
            lengths[r0:r1] = np.bincount(r, minlength=n)
            out_c.append(c.astype(np.int32))
            out_v.append(val.astype(np.float32))
        if progress is not None:
            progress(r1, S)
    np.cumsum(lengths, out=indptr[1:])
    indices = np.concatenate(out_c) if out_c else np.zeros(0, np.int32)
    weights = np.concatenate(out_v) if out_v else np.zeros(0, np.float32)
    return indptr, indices, weights


def build_lexicon(counts: CooccurrenceCounts, min_count: int = 2, min_pair_count: int = 2,
                  neighbours: int = 10, similar_words: int = 20000,
                  progress: Callable[[int, int], object] | None = None) -> "Lexicon":
    """The lexicon of counted text: the words seen at least ``min_count`` times, their
    pairs seen at least ``min_pair_count`` times with their PMI, and the ``neighbours``
    most similar words of each of the ``similar_words`` most frequent words (0: no
    similarity graph). ``progress(rows, S)`` reports the similarity rows done.
    ArborealError if no word is kept or a setting is out of range."""
    if min_count < 1 or min_pair_count < 1:
        raise ArborealError("--min-count and --min-pair-count must be at least 1")
    if not 0 <= neighbours <= MAX_NEIGHBOURS:
        raise ArborealError(f"--neighbours must be in 0..{MAX_NEIGHBOURS}, not {neighbours}")
    if similar_words < 0:
        raise ArborealError(f"--similar-words must be at least 0, not {similar_words}")
    keep = (counts.counts >= min_count) & np.fromiter(
        (0 < len(w) <= MAX_WORD_CHARS for w in counts.words), bool, len(counts.words))
    V = int(keep.sum())
    if V == 0:
        raise ArborealError(f"no word is seen {min_count} times or more (--min-count)")
    if V > MAX_LEXICON_WORDS:
        raise ArborealError(f"{V} words are seen {min_count} times or more, more than the "
                            f"{MAX_LEXICON_WORDS} a lexicon holds; raise --min-count")
    # counts are in rank order, so the kept words keep their relative order
    new_id = np.full(len(counts.words), -1, dtype=np.int64)
    new_id[keep] = np.arange(V)
    a, b = new_id[counts.keys >> 32], new_id[counts.keys & _LOW32]
    ok = (a >= 0) & (b >= 0) & (counts.pair_counts >= min_pair_count)
    a, b, pc = a[ok], b[ok], counts.pair_counts[ok]
    keys = (a << 32) | b                # a <= b still, and sorted: the map is increasing
    wc = counts.counts[keep]
    pmi = _pmi(pc, wc[a], wc[b], counts.tokens, counts.pair_tokens)
    S = min(similar_words, V) if neighbours else 0
    graph = _similarity_graph(V, a, b, pmi, S, neighbours, progress)
    words = [w for w, k in zip(counts.words, keep.tolist()) if k]
    return Lexicon(words, wc, keys, pc, pmi, *graph, window=counts.window,
                   min_count=min_count, min_pair_count=min_pair_count,
                   neighbours=neighbours, similar_words=similar_words,
                   tokens=counts.tokens, pair_tokens=counts.pair_tokens,
                   sentences=counts.sentences)


_SETTINGS = ("window", "min_count", "min_pair_count", "neighbours", "similar_words",
             "tokens", "pair_tokens", "sentences")
#: settings stored under another attribute name (``neighbours`` is a method)
_ATTRIBUTE = {"neighbours": "n_neighbours"}


class Lexicon:
    """Word counts, PMI of word pairs and a similar-word graph (module docstring).

    Arrays (V words, P pairs, S words with neighbour lists, E neighbour entries):

    - ``words`` (list of V normalised str, rank order), ``counts`` (V,) int64;
    - ``pair_keys`` (P,) int64, ``a << 32 | b`` with ``a <= b`` word ids, strictly
      increasing; ``pair_counts`` (P,) int64; ``pmi_values`` (P,) float32;
    - ``nb_indptr`` (S+1,) int64, ``nb_indices`` (E,) int32, ``nb_weights`` (E,)
      float32: CSR rows of words 0..S-1, each most similar first, ties by id.

    Settings and totals (``window``, ``min_count``, ``min_pair_count``,
    ``n_neighbours`` (the setting ``neighbours``), ``similar_words``, ``tokens``,
    ``pair_tokens``, ``sentences``) are attributes, None when unknown. Lookups normalise words; ``pmi_many`` is O(n log P).
    """

    def __init__(self, words: list[str], counts, pair_keys, pair_counts, pmi, nb_indptr=None,
                 nb_indices=None, nb_weights=None, **settings) -> None:
        self.words = list(words)
        self.counts = np.asarray(counts, dtype=np.int64)
        self.pair_keys = np.asarray(pair_keys, dtype=np.int64)
        self.pair_counts = np.asarray(pair_counts, dtype=np.int64)
        self.pmi_values = np.asarray(pmi, dtype=np.float32)
        self.nb_indptr = (np.zeros(1, np.int64) if nb_indptr is None
                          else np.asarray(nb_indptr, dtype=np.int64))
        self.nb_indices = (np.zeros(0, np.int32) if nb_indices is None
                           else np.asarray(nb_indices, dtype=np.int32))
        self.nb_weights = (np.zeros(0, np.float32) if nb_weights is None
                           else np.asarray(nb_weights, dtype=np.float32))
        unknown = set(settings) - set(_SETTINGS)
        if unknown:
            raise TypeError(f"unknown settings {sorted(unknown)}")
        for key in _SETTINGS:
            setattr(self, _ATTRIBUTE.get(key, key), settings.get(key))
        _check(self)
        self._index = {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return normalize_word(word) in self._index

    def __repr__(self) -> str:
        return (f"Lexicon({len(self)} words, {self.pair_keys.size} pairs, "
                f"{self.nb_indptr.size - 1} words with neighbours)")

    # ---- lookups

    def index(self, word: str) -> int:
        """The id of ``normalize_word(word)``, -1 if unknown."""
        return self._index.get(normalize_word(word), -1)

    def ids(self, words: Iterable[str]) -> np.ndarray:
        """``index`` of many words: (n,) int64, -1 for unknown ones."""
        get = self._index.get
        return np.array([get(normalize_word(w), -1) for w in words], dtype=np.int64)

    def pair_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """(a, b): the word ids of the pairs, (P,) int64 each, ``a <= b``."""
        return self.pair_keys >> 32, self.pair_keys & _LOW32

    def pmi(self, a: str | int, b: str | int) -> float | None:
        """PMI of the pair of words (or word ids) ``a`` and ``b``, either order; None
        when the pair is not in the lexicon."""
        ia = a if isinstance(a, (int, np.integer)) else self.index(a)
        ib = b if isinstance(b, (int, np.integer)) else self.index(b)
        v = self.pmi_many(np.array([ia]), np.array([ib]))[0]
        return None if np.isnan(v) else float(v)

    def pmi_many(self, ids_a, ids_b) -> np.ndarray:
        """PMI of pairs of word ids (arrays of any broadcastable shapes, either order):
        float32 of the broadcast shape, NaN where the pair is unknown or an id is out of
        range (-1 included). O(n log P)."""
        ia, ib = np.broadcast_arrays(np.asarray(ids_a, dtype=np.int64),
                                     np.asarray(ids_b, dtype=np.int64))
        V = len(self.words)
        valid = (ia >= 0) & (ia < V) & (ib >= 0) & (ib < V)
        key = np.where(valid, (np.minimum(ia, ib) << 32) | np.maximum(ia, ib), -1)
        out = np.full(key.shape, np.nan, dtype=np.float32)
        P = self.pair_keys.size
        if P == 0:
            return out
        pos = np.minimum(np.searchsorted(self.pair_keys, key), P - 1)
        found = valid & (self.pair_keys[pos] == key)
        out[found] = self.pmi_values[pos[found]]
        return out

    def neighbour_ids(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids int32, similarities float32) of word id ``i``'s neighbours, most similar
        first; empty for a word without a neighbour list."""
        if not 0 <= i < self.nb_indptr.size - 1:
            return self.nb_indices[:0], self.nb_weights[:0]
        lo, hi = int(self.nb_indptr[i]), int(self.nb_indptr[i + 1])
        return self.nb_indices[lo:hi], self.nb_weights[lo:hi]

    def neighbours(self, word: str) -> list[tuple[str, float]]:
        """The most similar words of ``normalize_word(word)`` with their cosine
        similarities, most similar first; [] for a word without a neighbour list."""
        ids, sims = self.neighbour_ids(self.index(word))
        return [(self.words[j], s) for j, s in zip(ids.tolist(), sims.tolist())]

    # ---- storage

    def metadata(self) -> dict:
        """JSON-able settings and totals for a model file's metadata."""
        meta = {key: getattr(self, _ATTRIBUTE.get(key, key)) for key in _SETTINGS}
        meta.update(words=len(self), pairs=int(self.pair_keys.size))
        return meta

    def to_arrays(self, prefix: str = "lexicon") -> dict[str, np.ndarray]:
        """Arrays for a model file: ``{prefix}_words`` (a UTF-8 buffer of
        :func:`~arboreal.io.model_file.put_strings`), ``_counts``, ``_pair_keys``,
        ``_pair_counts`` (int64), ``_pmi`` (float32), ``_nb_indptr`` (int64),
        ``_nb_indices`` (int32), ``_nb_weights`` (float32)."""
        from arboreal.io.model_file import put_strings

        arrays: dict[str, np.ndarray] = {}
        put_strings(arrays, f"{prefix}_words", self.words)
        arrays[f"{prefix}_counts"] = self.counts
        arrays[f"{prefix}_pair_keys"] = self.pair_keys
        arrays[f"{prefix}_pair_counts"] = self.pair_counts
        arrays[f"{prefix}_pmi"] = self.pmi_values
        arrays[f"{prefix}_nb_indptr"] = self.nb_indptr
        arrays[f"{prefix}_nb_indices"] = self.nb_indices
        arrays[f"{prefix}_nb_weights"] = self.nb_weights
        return arrays

    @classmethod
    def from_arrays(cls, arrays: Mapping, prefix: str = "lexicon", **settings) -> "Lexicon":
        """Inverse of :meth:`to_arrays`; ValueError for anything malformed. Every
        array's shape (against the others) and dtype is checked before any string is
        decoded, then the values: counts positive and non-increasing, pair keys strictly
        increasing with ``0 <= a <= b < V``, PMI finite, neighbour rows well formed (ids
        in range, not the row's own, sorted by similarity then id, similarities in
        (0, 1]); with ``settings`` (those of :meth:`metadata`) also the filters and
        limits they state."""
        from arboreal.io.model_file import array_shape, get_string_list

        def vector(name: str, kinds: str, size: int | None = None) -> int:
            key = f"{prefix}_{name}"
            shape = array_shape(arrays, key)
            if len(shape) != 1 or (size is not None and shape[0] != size):
                want = "a vector" if size is None else f"({size},)"
                raise ValueError(f"{key} has shape {shape}, expected {want}")
            dtype = (arrays.dtype(key) if hasattr(arrays, "dtype")
                     else np.asarray(arrays[key]).dtype)
            if dtype.kind not in kinds:
                raise ValueError(f"{key} has type {dtype.str}, expected "
                                 f"{'integers' if 'f' not in kinds else 'floats'}")
            return shape[0]

        V = vector("counts", "iu")
        if V > MAX_LEXICON_WORDS:
            raise ValueError(f"{prefix}_counts: {V} words, more than {MAX_LEXICON_WORDS}")
        P = vector("pair_keys", "i")
        vector("pair_counts", "iu", P)
        vector("pmi", "f", P)
        rows = vector("nb_indptr", "i") - 1
        if not 0 <= rows <= V:
            raise ValueError(f"{prefix}_nb_indptr: {rows + 1} entries for {V} words")
        E = vector("nb_indices", "iu")
        vector("nb_weights", "f", E)
        # only now the strings: their count must be V before anything is decoded
        words = get_string_list(arrays, f"{prefix}_words", V)
        if len(words) != V:
            raise ValueError(f"{prefix}_words holds {len(words)} words, expected {V}")

        def ints(name: str, lo: int, hi: int) -> np.ndarray:
            a = np.asarray(arrays[f"{prefix}_{name}"])
            if a.size and (a.min() < lo or a.max() > hi):
                raise ValueError(f"{prefix}_{name}: values out of range {lo}..{hi}")
            return a.astype(np.int64)

        counts = ints("counts", 1, _MAX_COUNT)
        keys = ints("pair_keys", 0, ((V - 1) << 32) | (V - 1) if V else -1)
        pair_counts = ints("pair_counts", 1, _MAX_COUNT)
        indptr = ints("nb_indptr", 0, E)
        indices = ints("nb_indices", 0, V - 1)
        pmi = np.asarray(arrays[f"{prefix}_pmi"])
        weights = np.asarray(arrays[f"{prefix}_nb_weights"])
        for w in words:
            if not w or len(w) > MAX_WORD_CHARS or _CONTROL.search(w):
                raise ValueError(f"{prefix}_words: {w[:40]!r} is not a word")
        return cls(words, counts, keys, pair_counts, pmi, indptr, indices, weights, **settings)

    @classmethod
    def from_file_contents(cls, path: str, meta: dict, arrays: Mapping) -> "Lexicon":
        """A lexicon from a model file's metadata and arrays
        (:func:`~arboreal.io.model_file.load_model_file`); ModelError naming the
        file on any problem."""
        from arboreal.io.model_file import MetaFields

        if meta.get("model_type") != MODEL_TYPE:
            raise ModelError(f"{path}: model type {meta.get('model_type')!r:.40} is not "
                             f"{MODEL_TYPE!r}")
        fields = MetaFields(path, meta)
        fields.int("lexicon_version", LEXICON_VERSION, LEXICON_VERSION)
        settings = {
            "window": fields.int("window", 1, MAX_WINDOW),
            "min_count": fields.int("min_count", 1, _MAX_COUNT),
            "min_pair_count": fields.int("min_pair_count", 1, _MAX_COUNT),
            "neighbours": fields.int("neighbours", 0, MAX_NEIGHBOURS),
            "similar_words": fields.int("similar_words", 0, _MAX_COUNT),
            "tokens": fields.int("tokens", 1, _MAX_COUNT),
            "pair_tokens": fields.int("pair_tokens", 0, _MAX_COUNT),
            "sentences": fields.int("sentences", 0, _MAX_COUNT),
        }
        try:
            return cls.from_arrays(arrays, "lexicon", **settings)
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"{path}: lexicon file is incomplete or corrupt ({exc})") from None

    def save(self, path: str | os.PathLike) -> None:
        """Write the lexicon as a model file (``.npz``, no pickle), atomically."""
        from arboreal.io.model_file import save_model_file

        meta = {"model_type": MODEL_TYPE, "lexicon_version": LEXICON_VERSION,
                **self.metadata()}
        save_model_file(path, meta, self.to_arrays())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Lexicon":
        """Read a file written by :meth:`save` (:func:`arboreal.load`, checked to hold a
        lexicon); ModelError naming the file for a missing, damaged or foreign file
        (another model type included)."""
        import arboreal

        return arboreal.load(path, MODEL_TYPE)


def _check(lex: Lexicon) -> None:
    """ValueError unless the lexicon's arrays are consistent (see :meth:`from_arrays`).
    O(V + P + E) vectorised, plus a pass over the words."""
    V = len(lex.words)
    counts, keys = lex.counts, lex.pair_keys
    P, E = keys.size, lex.nb_indices.size
    if counts.shape != (V,):
        raise ValueError("words and counts differ in number")
    if lex.pair_counts.shape != (P,) or lex.pmi_values.shape != (P,) or keys.ndim != 1:
        raise ValueError("pair keys, pair counts and PMI values differ in number")
    if counts.size and (counts.min() < 1 or np.any(np.diff(counts) > 0)):
        raise ValueError("word counts must be positive and non-increasing (rank order)")
    if P:
        a, b = keys >> 32, keys & _LOW32
        if keys.min() < 0 or np.any(a > b) or b.max() >= V:
            raise ValueError("a pair key holds a word id out of range (or a > b)")
        if np.any(np.diff(keys) <= 0):
            raise ValueError("pair keys are not strictly increasing")
        if lex.pair_counts.min() < 1:
            raise ValueError("pair counts must be positive")
        if not np.isfinite(lex.pmi_values).all():
            raise ValueError("PMI values must be finite")
    indptr, idx, w = lex.nb_indptr, lex.nb_indices, lex.nb_weights
    S = indptr.size - 1
    if indptr.ndim != 1 or not 0 <= S <= V or w.shape != (E,) or idx.ndim != 1:
        raise ValueError("neighbour arrays differ in shape")
    if indptr[0] != 0 or indptr[-1] != E or np.any(np.diff(indptr) < 0):
        raise ValueError("neighbour row pointers are not 0 .. entries, non-decreasing")
    if E:
        row = np.repeat(np.arange(S, dtype=np.int64), np.diff(indptr))
        if idx.min() < 0 or idx.max() >= S or np.any(idx == row):
            raise ValueError("a neighbour id is out of range or a word's own")
        if not (np.isfinite(w).all() and w.min() > 0 and w.max() <= 1):
            raise ValueError("neighbour similarities must lie in (0, 1]")
        same = row[1:] == row[:-1]
        ordered = (w[:-1] > w[1:]) | ((w[:-1] == w[1:]) & (idx[:-1] < idx[1:]))
        if np.any(same & ~ordered):
            raise ValueError("a neighbour row is not sorted by similarity, then id")
        pairs = np.sort(row * S + idx)
        if np.any(pairs[1:] == pairs[:-1]):
            raise ValueError("a word is listed twice as a neighbour")
    joined = "\n".join(lex.words)                       # one pass, not one per word
    if joined.count("\n") != max(V - 1, 0) or normalize_word(joined) != joined:
        odd = next(w for w in lex.words if "\n" in w or normalize_word(w) != w)
        raise ValueError(f"word {odd[:40]!r} is not normalised (normalize_word) or holds a "
                         "line break")
    if len(set(lex.words)) != V:
        raise ValueError("a word is listed twice")
    # the settings, where known, bound the arrays
    if lex.min_count is not None and counts.size and counts.min() < lex.min_count:
        raise ValueError("a word is seen fewer times than min_count")
    if lex.min_pair_count is not None and P and lex.pair_counts.min() < lex.min_pair_count:
        raise ValueError("a pair is seen fewer times than min_pair_count")
    if lex.n_neighbours is not None and S and np.diff(indptr).max() > lex.n_neighbours:
        raise ValueError("a word has more neighbours than the neighbours setting")
    if lex.similar_words is not None and lex.n_neighbours is not None:
        want = min(lex.similar_words, V) if lex.n_neighbours else 0
        if S != want:
            raise ValueError(f"{S} neighbour rows, expected {want}")
    # float64 sums: int64 ones could overflow on a hostile file
    if lex.tokens is not None and counts.sum(dtype=np.float64) > lex.tokens * (1 + 1e-9):
        raise ValueError("the word counts exceed the token total")
    if (lex.pair_tokens is not None
            and lex.pair_counts.sum(dtype=np.float64) > lex.pair_tokens * (1 + 1e-9)):
        raise ValueError("the pair counts exceed the pair total")
