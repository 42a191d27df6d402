"""Word clusters from unlabeled text: Brown clustering, the ``paths`` file, lookups.

Brown clusters (Brown et al. 1992; Koo, Carreras & Collins 2008 use them as parser
features) group the words of a large unlabeled corpus so that the clusters of adjacent
words carry as much mutual information as possible, in a binary tree: each word gets a
bit string, the path from the root to its cluster, and its prefixes are coarser
clusters. The algorithm is in :mod:`arboreal.features.brown`; this module reads corpora,
counts, and reads and writes Percy Liang's ``wcluster`` ``paths`` format, one line per
word::

    bitstring<TAB>word<TAB>count

**Words are normalised** by :func:`normalize_word` (lower case, every decimal digit
``0``) both when clustering and when looking up, so ``"The"`` and ``"the"`` share a
cluster and ``"1984"`` is looked up as ``"0000"``. A word absent from the clustering has
the cluster ``"NOCL"``.

Public API::

    normalize_word(word) -> str
    tokenize_text(line) -> list[str]                 # the rule of --input text
    count_corpus(sources, input_format) -> CorpusCounts
    brown_clusters(counts, n_clusters=1000, min_count=1, progress=None) -> Clusters
    read_paths(path) -> Clusters;  write_paths(clusters, path)
    Clusters: .cluster(word), .prefix(word, k), .to_arrays(), Clusters.from_arrays(arrays)
    average_mutual_information(counts, clusters) -> float (bits)

Corpora are streamed, 1 MiB at a time: memory grows with the number of distinct words
and of distinct bigrams, never with the number of tokens. The tokens of a block are
hashed by a compiled kernel into a vocabulary held in numpy arrays (a hash table and the
words' UTF-8 bytes, about 40 bytes a word), and the block's bigrams, packed into int64
keys, are counted with ``np.unique`` and merged into sorted runs (16 bytes a distinct
bigram). Normalisation (``str.lower``, digits) is done on the whole block in Python.
"""
from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import numpy as np
from numba import njit

from arboreal._atomic import atomic_write
from arboreal.errors import ArborealError, FormatError
from arboreal.features.brown import MAX_CLUSTERS, average_mutual_information as _ami
from arboreal.features.brown import brown_cluster

#: the cluster of a word that the clustering does not know
NOCL = "NOCL"
#: longest bit string read or written (a tree over at most MAX_CLUSTERS clusters is at
#: most MAX_CLUSTERS - 1 deep)
MAX_BITS = MAX_CLUSTERS
#: longer tokens are counted but get no cluster (URLs, base64, broken text)
MAX_WORD_CHARS = 1000
#: a paths file's limits, checked before reading (regular files) or while reading
MAX_PATHS_BYTES = 128 << 20
MAX_PATHS_WORDS = 2_000_000
#: longest line of a paths file: bits, a word of MAX_WORD_CHARS characters, a count
MAX_PATHS_LINE_BYTES = MAX_BITS + 4 * MAX_WORD_CHARS + 64
#: input formats of ``arboreal clusters``
CORPUS_FORMATS = ("tokenized", "text", "conllu")

_DIGIT = re.compile(r"\d")
#: --input text: runs of word characters, joined by single inner - ' ’ . , ; any other
#: non-space character is a token by itself
_TOKEN = re.compile(r"\w+(?:[-'\u2019.,]\w+)*|[^\w\s]")
_BITS = re.compile(r"[01]*")
_COUNT = re.compile(r"[0-9]{1,18}")
_CONTROL = re.compile("[\x00-\x08\x0e-\x1b\x7f]")
_SENTINEL = "\x00"            # sentence end inside a batch (control characters are refused)
_BATCH_TOKENS = 1 << 19
#: whitespace that str.split() splits on beyond ASCII: replaced by a space before hashing
_UNICODE_SPACE = re.compile("[\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
_CHUNK_BYTES = 1 << 20


def normalize_word(word: str) -> str:
    """The form under which a word is clustered and looked up: lower case (``str.lower``)
    with every decimal digit (Unicode category Nd) replaced by ``0``."""
    return _DIGIT.sub("0", word.lower())


def tokenize_text(line: str) -> list[str]:
    """Tokens of raw text for clustering (``--input text``), a simple fixed rule, not the
    trained tokenizer of a model: maximal runs of word characters (letters, digits,
    marks, ``_``), which may be joined by single inner hyphens, apostrophes, periods or
    commas (``e-mail``, ``don't``, ``U.S``, ``3.14``, ``1,000``); every other character
    that is not whitespace is a token by itself (``"Hi!"`` -> ``Hi``, ``!``)."""
    return _TOKEN.findall(line)


# ---------------------------------------------------------------------------------------
# counting


@njit(cache=True)
def _merge_sorted(k1, c1, k2, c2):
    """Union of two sorted runs of distinct keys, counts added."""
    out_k = np.empty(k1.shape[0] + k2.shape[0], dtype=np.int64)
    out_c = np.empty(k1.shape[0] + k2.shape[0], dtype=np.int64)
    i = j = m = 0
    while i < k1.shape[0] and j < k2.shape[0]:
        if k1[i] < k2[j]:
            out_k[m] = k1[i]
            out_c[m] = c1[i]
            i += 1
        elif k2[j] < k1[i]:
            out_k[m] = k2[j]
            out_c[m] = c2[j]
            j += 1
        else:
            out_k[m] = k1[i]
            out_c[m] = c1[i] + c2[j]
            i += 1
            j += 1
        m += 1
    while i < k1.shape[0]:
        out_k[m] = k1[i]
        out_c[m] = c1[i]
        i += 1
        m += 1
    while j < k2.shape[0]:
        out_k[m] = k2[j]
        out_c[m] = c2[j]
        j += 1
        m += 1
    return out_k[:m].copy(), out_c[:m].copy()


@njit(cache=True)
def _hash_tokens(buf, by_unit, table, wstart, wlen, whash, arena, counts, ids):
    """Word ids of the tokens of ``buf`` (UTF-8) into ``ids``, new words added to the
    vocabulary (open addressing on FNV-1a hashes; the words' bytes in ``arena``).

    ``by_unit`` False: tokens are separated by ASCII whitespace (and bytes 28-31, as
    str.split does), and a line feed or NUL ends a line; True: tokens are separated by
    byte 1 and NUL ends a sentence (CoNLL-U forms may hold spaces). A line end gives
    id 0. ``counts`` = [words, arena bytes used]; the caller leaves room for every token
    of ``buf`` being new. Returns the number of ids."""
    n = buf.shape[0]
    mask = table.shape[0] - 1
    nw = counts[0]
    used = counts[1]
    out = 0
    i = 0
    while i < n:
        b = buf[i]
        if b == 0 or (b == 10 and not by_unit):
            ids[out] = 0
            out += 1
            i += 1
            continue
        if (b == 1) if by_unit else (b == 32 or 9 <= b <= 13 or 28 <= b <= 31):
            i += 1
            continue
        j = i
        h = np.uint64(14695981039346656037)
        while j < n:
            c = buf[j]
            if c == 0 or ((c == 1) if by_unit else (c == 32 or 9 <= c <= 13 or 28 <= c <= 31)):
                break
            h = (h ^ np.uint64(c)) * np.uint64(1099511628211)
            j += 1
        length = j - i
        slot = np.int64(h & np.uint64(mask))
        while True:
            w = table[slot]
            if w < 0:
                w = nw
                nw += 1
                table[slot] = w
                wstart[w] = used
                wlen[w] = length
                whash[w] = h
                arena[used:used + length] = buf[i:j]
                used += length
                break
            if whash[w] == h and wlen[w] == length:
                a = wstart[w]
                same = True
                for k in range(length):
                    if arena[a + k] != buf[i + k]:
                        same = False
                        break
                if same:
                    break
            slot = (slot + 1) & mask
        ids[out] = w
        out += 1
        i = j
    counts[0] = nw
    counts[1] = used
    return out


class _Counter:
    """Unigram and bigram counts of a token stream, fed as UTF-8 buffers of normalised
    tokens (see :func:`_hash_tokens`) in which id 0 (a line end) separates sentences;
    no bigram crosses it, nor a buffer's end. The vocabulary lives in numpy arrays (a
    hash table and the words' bytes), not in Python objects."""

    def __init__(self) -> None:
        self.table = np.full(1 << 16, -1, dtype=np.int64)
        self.wstart = np.zeros(1 << 14, dtype=np.int64)
        self.wlen = np.zeros(1 << 14, dtype=np.int64)
        self.whash = np.zeros(1 << 14, dtype=np.uint64)
        self.arena = np.zeros(1 << 16, dtype=np.uint8)
        self.state = np.array([1, 0], dtype=np.int64)       # word 0: the line end, empty
        self.table_full = 0
        self.unigrams = np.zeros(1 << 14, dtype=np.int64)
        self.runs: list[tuple[np.ndarray, np.ndarray]] = []
        self.tokens = 0
        self.sentences = 0

    @staticmethod
    def _grown(a: np.ndarray, size: int, fill=0) -> np.ndarray:
        if a.shape[0] >= size:
            return a
        new = np.full(max(size, 2 * a.shape[0]), fill, dtype=a.dtype)
        new[:a.shape[0]] = a
        return new

    def _reserve(self, nbytes: int) -> None:
        """Room for every token of an nbytes buffer being a new word."""
        nw, used = int(self.state[0]), int(self.state[1])
        most = nw + nbytes // 2 + 2
        self.wstart = self._grown(self.wstart, most)
        self.wlen = self._grown(self.wlen, most)
        self.whash = self._grown(self.whash, most)
        self.arena = self._grown(self.arena, used + nbytes)
        if 2 * most > self.table.shape[0]:                  # load factor at most 1/2
            size = self.table.shape[0]
            while 2 * most > size:
                size *= 2
            self.table = np.full(size, -1, dtype=np.int64)
            slots = self.whash[1:nw] & np.uint64(size - 1)
            for w, slot in zip(range(1, nw), slots.tolist()):   # rare: a few times a run
                while self.table[slot] >= 0:
                    slot = (slot + 1) & (size - 1)
                self.table[slot] = w

    def token_ids(self, data: bytes, by_unit: bool = False) -> np.ndarray:
        """Word ids of one buffer of whole lines (0 ends a line; :func:`_hash_tokens`),
        with the unigram, line and token counts updated. O(bytes)."""
        if not data:
            return np.zeros(0, dtype=np.int64)
        buf = np.frombuffer(data, dtype=np.uint8)
        self._reserve(buf.shape[0])
        ids = np.empty(buf.shape[0] + 1, dtype=np.int64)
        k = _hash_tokens(buf, by_unit, self.table, self.wstart, self.wlen, self.whash,
                         self.arena, self.state, ids)
        ids = ids[:k]
        if not k:
            return ids
        self.unigrams = self._grown(self.unigrams, int(self.state[0]))
        uni = np.bincount(ids)
        self.unigrams[:uni.size] += uni
        sentences = int(uni[0])
        self.sentences += sentences
        self.tokens += k - sentences
        return ids

    def add(self, data: bytes, by_unit: bool = False) -> None:
        ids = self.token_ids(data, by_unit)
        if not ids.size:
            return
        a, b = ids[:-1], ids[1:]
        ok = (a != 0) & (b != 0)
        keys = (a[ok] << 32) | b[ok]
        if keys.size:
            kk, c = np.unique(keys, return_counts=True)
            self._push(kk, c.astype(np.int64))

    def words(self) -> list[str]:
        nw = int(self.state[0])
        arena = self.arena
        starts = self.wstart[:nw].tolist()
        ends = (self.wstart[:nw] + self.wlen[:nw]).tolist()
        raw = arena[:int(self.state[1])].tobytes()
        return [raw[a:b].decode("utf-8") for a, b in zip(starts, ends)]

    def _push(self, k: np.ndarray, c: np.ndarray) -> None:
        # runs of decreasing size, two neighbours merged when the newer is at least half
        # the older: O(D log D) for D distinct bigrams, memory a few times D
        self.runs.append((k, c))
        while len(self.runs) >= 2 and 2 * self.runs[-1][0].size >= self.runs[-2][0].size:
            k2, c2 = self.runs.pop()
            k1, c1 = self.runs.pop()
            self.runs.append(_merge_sorted(k1, c1, k2, c2))

    def bigrams(self) -> tuple[np.ndarray, np.ndarray]:
        while len(self.runs) >= 2:
            k2, c2 = self.runs.pop()
            k1, c1 = self.runs.pop()
            self.runs.append(_merge_sorted(k1, c1, k2, c2))
        if not self.runs:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return self.runs[0]


@dataclass
class CorpusCounts:
    """Word and bigram counts of a corpus (words as normalised, ``"\\x00"`` excluded).

    ``words[i]`` seen ``counts[i]`` times, in rank order (most frequent first, ties in
    code-point order of the word); bigram ``(w1[j], w2[j])`` (word ids) seen
    ``bigram_counts[j]`` times, adjacent tokens of one sentence or line.
    """
    words: list
    counts: np.ndarray
    w1: np.ndarray
    w2: np.ndarray
    bigram_counts: np.ndarray
    tokens: int = 0
    sentences: int = 0          # lines (sentences of CoNLL-U), blank ones included
    sources: list = field(default_factory=list)

    def restrict(self, min_count: int = 1) -> "CorpusCounts":
        """The words seen at least ``min_count`` times and at most MAX_WORD_CHARS long,
        and the bigrams between two of them (a dropped word's bigrams are dropped, its
        neighbours are not joined); ranks kept."""
        keep = (self.counts >= min_count) & np.fromiter(
            (0 < len(w) <= MAX_WORD_CHARS for w in self.words), bool, len(self.words))
        if keep.all():
            return self
        new_id = np.full(len(self.words), -1, dtype=np.int64)
        new_id[keep] = np.arange(int(keep.sum()))
        a, b = new_id[self.w1], new_id[self.w2]
        ok = (a >= 0) & (b >= 0)
        idx = np.flatnonzero(keep)
        return CorpusCounts([self.words[i] for i in idx.tolist()], self.counts[keep], a[ok],
                            b[ok], self.bigram_counts[ok], self.tokens, self.sentences,
                            list(self.sources))

    def csr(self) -> tuple[np.ndarray, ...]:
        """(rptr, rnb, rcnt, lptr, lnb, lcnt): right and left neighbours of each word."""
        V = len(self.words)
        order = np.lexsort((self.w2, self.w1))
        rptr = np.zeros(V + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.w1, minlength=V), out=rptr[1:])
        rnb, rcnt = self.w2[order], self.bigram_counts[order]
        order = np.lexsort((self.w1, self.w2))
        lptr = np.zeros(V + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.w2, minlength=V), out=lptr[1:])
        lnb, lcnt = self.w1[order], self.bigram_counts[order]
        return rptr, rnb, rcnt, lptr, lnb, lcnt


def rank_words(words: list[str], counts: np.ndarray) -> np.ndarray:
    """Order of the words by decreasing count, ties in code-point order of the word."""
    alphabetical = np.array(sorted(range(len(words)), key=words.__getitem__), dtype=np.int64)
    by_count = np.argsort(-np.asarray(counts, dtype=np.int64)[alphabetical], kind="stable")
    return alphabetical[by_count]


def _batches_of_lines(source, input_format: str) -> Iterator[bytes]:
    """UTF-8 buffers of normalised tokens separated by spaces, lines by line feeds (or
    NUL), of a tokenized or raw-text file."""
    from arboreal.io.conllu import _decode, _source_name, iter_blocks

    name = _source_name(source)
    for data, line in iter_blocks(source, _CHUNK_BYTES, blank_lines=False):
        text = _decode(data, name, line)
        if line == 1 and text.startswith("\ufeff"):        # a byte-order mark
            text = text[1:]
        bad = _CONTROL.search(text)
        if bad:
            where = line + text.count("\n", 0, bad.start())
            hint = "binary input?" if bad.group() == "\x00" else "text must not hold one"
            raise FormatError(name, where, f"control character U+{ord(bad.group()):04X} "
                              f"in the line ({hint})")
        text = normalize_word(text)
        if input_format == "text":
            text = " ".join(_TOKEN.findall(text.replace("\n", _SENTINEL)))
        elif not text.isascii():
            text = _UNICODE_SPACE.sub(" ", text)        # what str.split() splits on
        yield text.encode("utf-8")


def _batches_of_conllu(source) -> Iterator[bytes]:
    """UTF-8 buffers of normalised forms separated by byte 1, sentences by NUL."""
    from arboreal.io.conllu import iter_conllu

    parts: list[str] = []
    for s in iter_conllu(source, allow_missing_heads=True, check_trees=False):
        parts.extend(s.forms[1:].tolist())      # index 0 is the artificial root
        parts.append(_SENTINEL)
        if len(parts) >= _BATCH_TOKENS:
            yield normalize_word("\x01".join(parts)).encode("utf-8")
            parts = []
    if parts:
        yield normalize_word("\x01".join(parts)).encode("utf-8")


def count_corpus(sources: Iterable, input_format: str = "tokenized",
                 progress: Callable[[int], object] | None = None) -> CorpusCounts:
    """Count the words and bigrams of one or more corpora (paths, ``"-"`` for standard
    input, or open binary files), streamed.

    ``input_format``: ``tokenized`` (one sentence per line, tokens separated by
    whitespace), ``text`` (raw text, one line at a time, tokenized by
    :func:`tokenize_text`) or ``conllu`` (the FORM column of CoNLL-U; sentences from
    :func:`arboreal.io.conllu.iter_conllu`, heads not needed). Bigrams are adjacent
    tokens of one line (one sentence for CoNLL-U). ``progress(tokens)`` is called after
    each batch with the tokens counted so far. FormatError (file, line) for invalid
    UTF-8 or a control character; ArborealError if there is no token at all.
    """
    if input_format not in CORPUS_FORMATS:
        raise ValueError(f"input format must be one of {', '.join(CORPUS_FORMATS)}, "
                         f"not {input_format!r}")
    counter = _Counter()
    names = stream_into(counter, sources, input_format, progress, "cluster")
    keys, bc = counter.bigrams()
    words, counts, rank = ranked_vocabulary(counter)
    w1 = rank[keys >> 32]
    w2 = rank[keys & 0xFFFFFFFF]
    return CorpusCounts(words, counts, w1, w2, bc, counter.tokens, counter.sentences, names)


def stream_into(counter: _Counter, sources: Iterable, input_format: str,
                progress: Callable[[int], object] | None, purpose: str) -> list[str]:
    """Feed every batch of every source to ``counter.add`` (a CoNLL-U sentence or a line
    per unit), calling ``progress(tokens so far)`` after each; returns the sources'
    names. ArborealError if they hold no token at all (nothing to ``purpose``)."""
    from arboreal.io.conllu import _source_name

    names = []
    conllu = input_format == "conllu"
    for source in sources:
        names.append(_source_name(source))
        batches = _batches_of_conllu(source) if conllu else _batches_of_lines(source, input_format)
        for batch in batches:
            counter.add(batch, by_unit=conllu)
            if progress is not None:
                progress(counter.tokens)
    if counter.tokens == 0:
        raise ArborealError(f"{', '.join(names) or 'the corpus'}: no tokens to {purpose}")
    return names


def ranked_vocabulary(counter: _Counter) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The counter's words by rank (:func:`rank_words`: most frequent first), their
    counts, and the rank of each of the counter's word ids (-1 for the unit-end
    sentinel, id 0). O(V log V)."""
    words = counter.words()
    size = len(words)
    uni = counter.unigrams[:size].copy()
    uni[0] = 0
    order = rank_words(words, uni)[:-1]             # the sentinel, never seen, ranks last
    rank = np.empty(size, dtype=np.int64)
    rank[order] = np.arange(size - 1)
    rank[0] = -1
    return [words[i] for i in order.tolist()], uni[order], rank


# ---------------------------------------------------------------------------------------
# clusters


class Clusters:
    """A word clustering: each word's bit string (its path in the cluster tree).

    ``words`` must be normalised (:func:`normalize_word`; ValueError otherwise), since
    lookups normalise the word they are given.

    ``cluster(word)`` gives the bit string of the normalised word, or ``NOCL`` for a word
    it does not know; ``prefix(word, k)`` its first k bits (the whole string when it is
    shorter; ``NOCL`` stays ``NOCL``). ``words``, ``bits`` and ``counts`` list the
    entries in file order. Stored in a model file as arrays (:meth:`to_arrays`), no
    pickle.
    """

    def __init__(self, words: list[str], bits: list[str], counts=None, ami: float | None = None):
        if len(words) != len(bits):
            raise ValueError("words and bit strings differ in number")
        self.words = list(words)
        self.bits = list(bits)
        self.counts = (np.zeros(len(words), dtype=np.int64) if counts is None
                       else np.asarray(counts, dtype=np.int64))
        if self.counts.shape != (len(words),):
            raise ValueError("words and counts differ in number")
        self.ami = ami
        self._map = dict(zip(self.words, self.bits))
        if len(self._map) != len(self.words):
            raise ValueError("a word is listed twice")
        joined = "\n".join(self.words)                  # one pass, not one per word
        if joined.count("\n") != max(len(self.words) - 1, 0) or normalize_word(joined) != joined:
            odd = next(w for w in self.words if "\n" in w or normalize_word(w) != w)
            raise ValueError(f"word {odd[:40]!r} is not normalised (normalize_word) or "
                             "holds a line break")

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return normalize_word(word) in self._map

    def __repr__(self) -> str:
        return f"Clusters({len(self)} words, {self.n_clusters} clusters)"

    @property
    def n_clusters(self) -> int:
        """The number of distinct bit strings."""
        return len(set(self.bits))

    def cluster(self, word: str) -> str:
        """The bit string of ``normalize_word(word)``, ``NOCL`` if unknown."""
        return self._map.get(normalize_word(word), NOCL)

    __getitem__ = cluster

    def prefix(self, word: str, k: int) -> str:
        """The first ``k`` bits of the word's bit string (all of it when shorter), or NOCL."""
        bits = self._map.get(normalize_word(word), NOCL)
        return bits if bits is NOCL else bits[:k]

    def lookup(self, words: Iterable[str], k: int | None = None) -> list[str]:
        """``cluster`` (k None) or ``prefix(., k)`` of many words."""
        get = self._map.get
        if k is None:
            return [get(normalize_word(w), NOCL) for w in words]
        out = []
        for w in words:
            b = get(normalize_word(w), NOCL)
            out.append(b if b is NOCL else b[:k])
        return out

    def metadata(self) -> dict:
        """JSON-able facts for a model file's metadata."""
        return {"words": len(self), "clusters": self.n_clusters,
                "max_bits": max((len(b) for b in self.bits), default=0),
                "ami_bits": self.ami}

    def to_arrays(self, prefix: str = "clusters") -> dict[str, np.ndarray]:
        """Arrays for a model file: ``{prefix}_words`` and ``{prefix}_bits`` (UTF-8
        buffers of :func:`arboreal.io.model_file.put_strings`) and
        ``{prefix}_counts`` (int64)."""
        from arboreal.io.model_file import put_strings

        arrays: dict[str, np.ndarray] = {}
        put_strings(arrays, f"{prefix}_words", self.words)
        put_strings(arrays, f"{prefix}_bits", self.bits)
        arrays[f"{prefix}_counts"] = np.asarray(self.counts, dtype=np.int64)
        return arrays

    @classmethod
    def from_arrays(cls, arrays, prefix: str = "clusters") -> "Clusters":
        """Inverse of :meth:`to_arrays`; ValueError for anything malformed (sizes checked
        before decoding, bit strings of 0/1 of at most MAX_BITS, words normalised, not
        empty, distinct, counts non-negative)."""
        from arboreal.io.model_file import array_shape, get_string_list

        words = get_string_list(arrays, f"{prefix}_words", MAX_PATHS_WORDS)
        bits = get_string_list(arrays, f"{prefix}_bits", MAX_PATHS_WORDS)
        if len(bits) != len(words):
            raise ValueError(f"{prefix}: {len(words)} words but {len(bits)} bit strings")
        if array_shape(arrays, f"{prefix}_counts") != (len(words),):
            raise ValueError(f"{prefix}_counts does not have one count per word")
        counts = np.asarray(arrays[f"{prefix}_counts"])
        if counts.dtype.kind not in "iu" or (counts.size and counts.min() < 0):
            raise ValueError(f"{prefix}_counts must be non-negative integers")
        # one pass over all strings; the per-item loops only name the one that failed
        joined_bits = "".join(bits)
        if (max(map(len, bits), default=0) > MAX_BITS
                or len(joined_bits) != joined_bits.count("0") + joined_bits.count("1")):
            odd = next(b for b in bits if len(b) > MAX_BITS or not _BITS.fullmatch(b))
            raise ValueError(f"{prefix}_bits: {odd[:40]!r} is not a bit string of at most "
                             f"{MAX_BITS} bits")
        lengths = list(map(len, words))
        joined_words = "".join(words)
        if (min(lengths, default=1) == 0 or max(lengths, default=0) > MAX_WORD_CHARS
                or _CONTROL.search(joined_words) or "\t" in joined_words):
            odd = next(w for w in words if not w or len(w) > MAX_WORD_CHARS
                       or _CONTROL.search(w) or "\t" in w)
            raise ValueError(f"{prefix}_words: {odd[:40]!r} is not a word")
        try:
            return cls(words, bits, counts.astype(np.int64))
        except ValueError as exc:          # a word listed twice or not normalised
            raise ValueError(f"{prefix}_words: {exc}") from None


def brown_clusters(counts: CorpusCounts, n_clusters: int = 1000, min_count: int = 1,
                   progress: Callable[[int, int], object] | None = None) -> Clusters:
    """Brown clustering of the counted corpus into ``n_clusters`` clusters (fewer when
    there are fewer words), keeping the words seen at least ``min_count`` times.

    ``progress(done, total)`` is called with the merges done and the total (words - 1).
    The result lists the words cluster by cluster in the order of their bit strings
    (as ``wcluster`` does), most frequent first within a cluster; ``.ami`` is the
    average mutual information of the ``n_clusters`` clusters, in bits.
    """
    if not 1 <= n_clusters <= MAX_CLUSTERS:
        raise ArborealError(f"the number of clusters must be in 1..{MAX_CLUSTERS}, "
                            f"not {n_clusters}")
    kept = counts.restrict(min_count)
    V = len(kept.words)
    if V == 0:
        raise ArborealError(f"no word is seen {min_count} times or more (--min-count)")
    total = V - 1
    result = brown_cluster(*kept.csr(), n_clusters=n_clusters,
                           progress=None if progress is None else (lambda k: progress(k, total)))
    order = sorted(range(V), key=lambda i: (result.bits[i], i))
    clusters = Clusters([kept.words[i] for i in order], [result.bits[i] for i in order],
                        kept.counts[np.array(order, dtype=np.int64)])
    clusters.ami = _ami(kept.w1, kept.w2, kept.bigram_counts, result.leaf)
    return clusters


def average_mutual_information(counts: CorpusCounts, clusters: Clusters,
                               min_count: int = 1) -> float:
    """AMI in bits of a clustering (its distinct bit strings, e.g. the C clusters of a
    paths file made by any program) on the bigrams of ``counts`` restricted to
    ``min_count``; bigrams with a word the clustering lacks are left out."""
    kept = counts.restrict(min_count)
    ids = {b: i for i, b in enumerate(sorted(set(clusters.bits)))}
    labels = np.array([ids.get(clusters._map.get(w), -1) for w in kept.words], dtype=np.int64)
    return _ami(kept.w1, kept.w2, kept.bigram_counts, labels)


# ---------------------------------------------------------------------------------------
# paths files


def write_paths(clusters: Clusters, path) -> None:
    """Write ``bitstring<TAB>word<TAB>count`` lines (wcluster's ``paths`` format), in the
    clustering's order, atomically (:func:`arboreal._atomic.atomic_write`); ``"-"``
    writes standard output."""
    def lines() -> Iterator[bytes]:
        batch = []
        for b, w, c in zip(clusters.bits, clusters.words, clusters.counts.tolist()):
            batch.append(f"{b}\t{w}\t{c}\n")
            if len(batch) >= 65536:
                yield "".join(batch).encode("utf-8")
                batch = []
        yield "".join(batch).encode("utf-8")

    if str(path) == "-":
        import sys

        out = sys.stdout.buffer
        for chunk in lines():
            out.write(chunk)
        out.flush()
        return

    def write(f) -> None:
        for chunk in lines():
            f.write(chunk)

    atomic_write(path, write)


def read_paths(path) -> Clusters:
    """Read a ``paths`` file (``bitstring<TAB>word<TAB>count`` per line, as written by
    ``wcluster``, by :func:`write_paths` or by other tools).

    Checks, each a FormatError naming the file and line: UTF-8; exactly three
    tab-separated fields; a bit string of ``0``/``1`` of at most MAX_BITS bits; a
    non-empty word of at most MAX_WORD_CHARS characters without control characters; a
    count of at most 18 decimal digits; no word listed twice; lines of at most
    MAX_PATHS_LINE_BYTES; at most MAX_PATHS_BYTES bytes (a regular file's size is
    checked before reading) and MAX_PATHS_WORDS words; at least one word. Blank lines
    are skipped; CRLF line ends are accepted.

    Words are normalised (:func:`normalize_word`), as lookups are: when a file made
    elsewhere lists two words with the same normal form (``The`` and ``the``), the more
    frequent one's bit string is kept (the first on a tie).
    """
    from arboreal.io.conllu import _source_name, open_binary

    name = _source_name(path)
    f, own = open_binary(path)
    try:
        try:
            info = os.fstat(f.fileno())
        except (OSError, AttributeError, ValueError):
            info = None
        if info is not None and stat.S_ISREG(info.st_mode) and info.st_size > MAX_PATHS_BYTES:
            raise FormatError(name, None, f"{info.st_size} bytes, more than the "
                              f"{MAX_PATHS_BYTES >> 20} MiB a paths file may have")
        words: list[str] = []
        bits: list[str] = []
        counts: list[int] = []
        seen: dict[str, int] = {}           # raw word -> line
        where: dict[str, int] = {}          # normalised word -> index in the lists
        total = 0
        number = 0
        while True:
            raw = f.readline(MAX_PATHS_LINE_BYTES + 1)
            if not raw:
                break
            number += 1
            total += len(raw)
            if total > MAX_PATHS_BYTES:
                raise FormatError(name, number, f"more than the {MAX_PATHS_BYTES >> 20} MiB "
                                  "a paths file may have")
            if len(raw) > MAX_PATHS_LINE_BYTES and not raw.endswith(b"\n"):
                raise FormatError(name, number, f"line longer than {MAX_PATHS_LINE_BYTES} "
                                  "bytes")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise FormatError(name, number, f"invalid UTF-8 (byte 0x{raw[exc.start]:02x} "
                                  f"at byte {exc.start + 1} of the line)") from None
            line = line.rstrip("\n")
            if line.endswith("\r"):
                line = line[:-1]
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 3:
                raise FormatError(name, number, f"{len(fields)} tab-separated fields, expected "
                                  "3: bitstring, word, count")
            b, w, c = fields
            if not _BITS.fullmatch(b):
                raise FormatError(name, number, f"bit string {b[:40]!r} holds characters "
                                  "other than 0 and 1")
            if len(b) > MAX_BITS:
                raise FormatError(name, number, f"bit string of {len(b)} bits, more than "
                                  f"{MAX_BITS}")
            if not w:
                raise FormatError(name, number, "empty word")
            if len(w) > MAX_WORD_CHARS:
                raise FormatError(name, number, f"word of {len(w)} characters, more than "
                                  f"{MAX_WORD_CHARS}")
            bad = _CONTROL.search(w)
            if bad:
                raise FormatError(name, number, f"control character U+{ord(bad.group()):04X} "
                                  "in the word")
            if not _COUNT.fullmatch(c):
                raise FormatError(name, number, f"count {c[:40]!r} is not a non-negative "
                                  "integer of at most 18 digits")
            if w in seen:
                raise FormatError(name, number, f"word {w[:40]!r} already listed on line "
                                  f"{seen[w]}")
            seen[w] = number
            if len(seen) > MAX_PATHS_WORDS:
                raise FormatError(name, number, f"more than {MAX_PATHS_WORDS} words")
            count = int(c)
            key = normalize_word(w)
            i = where.get(key)
            if i is None:
                where[key] = len(words)
                words.append(key)
                bits.append(b)
                counts.append(count)
            elif count > counts[i]:
                bits[i] = b
                counts[i] = count
        if not words:
            raise FormatError(name, 1, "empty paths file (no words)")
        return Clusters(words, bits, np.array(counts, dtype=np.int64))
    finally:
        if own:
            f.close()
