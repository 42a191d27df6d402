"""Character attributes for the tokenizer: raw text as a sequence of characters.

The tokenizer is a tagging stage (:mod:`arboreal.features.tokens`) whose "tokens" are
the characters of a paragraph, so it shares the feature function, the learner and the
greedy decoder with the tagger; only the attribute rows differ. Text is cut into
*chunks* (maximal runs of non-whitespace) and whitespace runs. Row columns for a chunk
character at offset j of chunk ``w`` (lower-cased where it says so), using the
attribute names of :mod:`arboreal.features.tokens`:

===========  ==========================================================================
A_FORM       the character
A_LOWER      the character lower-cased (the feature function pairs it with its
             neighbours: character bi- and trigrams)
A_SUF1       the chunk up to and including j            (``w[:j+1]``)
A_SUF2       the rest of the chunk                        (``w[j+1:]``)
             (these and the sides below: at most :data:`SIDE_WINDOW` characters
             either side of the split, so a chunk costs time linear in its length)
A_SUF3       the whole chunk
A_SUF4       the chunk's shape
A_SUF5       the split ``w[:j+1] | w[j+1:]``
A_PRE1       the three characters before and two after the split
A_PRE2       whether the two sides are known tokens (from training), and where j lies
             in a span that is one token in any text (:data:`ONE_TOKEN`: a URL, an
             e-mail address, a domain or file name, an emoticon): inside it, at its
             last character, or outside
A_PRE3       the shapes of the two sides and the distance of j from the chunk's end
             (capped at 3): the split of words not seen in training
A_SHAPE      the character's class
A_AMBIG      for a chunk seen in training: whether training put a token boundary after
             j (its most frequent segmentation); else UNKNOWN
===========  ==========================================================================

A whitespace character's row describes the chunks around it: A_SUF1 the previous chunk,
A_SUF2 / A_SUF3 the next one, A_SUF4 and A_AMBIG its shape, A_SHAPE the class of its
first character, A_SUF5 the pair, A_PRE1 the characters that meet. The feature function
reads A_SUF3, A_SHAPE and A_AMBIG one position ahead, so the last character of a chunk
sees the next word and whether it is capitalised (does a sentence end here?).
Rows of a chunk are computed once and cached (bounded cache).
"""
from __future__ import annotations

import re

import numpy as np

from arboreal.features.tokens import (A_AMBIG, A_FORM, A_LOWER, A_PRE1, A_PRE2, A_PRE3,
                                      A_SHAPE, A_SUF1, A_SUF2, A_SUF3, A_SUF4, A_SUF5,
                                      N_ATTRS, UNKNOWN, shape_of_symbols,
                                      shape_symbol, stable_hash)

_PIECES = re.compile(r"\S+|\s+")
#: spans of a chunk that are one token whatever the treebank (URLs and e-mail
#: addresses without trailing punctuation, domain and file names, emoticons)
ONE_TOKEN = re.compile(
    r"(?:https?://|ftp://|www\.)[^\s<>\[\]\"']*[^\s<>\[\]\"'.,;:!?)]"
    r"|[\w.+-]+@[\w-]+(?:\.[\w-]+)*"
    r"|(?<![\w.@/-])[^\W_][\w-]*(?:\.[\w-]+)*\.(?:com|org|net|edu|gov|uk|de|ca|doc|docx"
    r"|pdf|xls|xlsx|ppt|htm|html|txt|jpg|gif|png|zip|exe)(?!\w)"
    r"|(?<!\w)(?:[:;=][-o^']?[()\[\]dDpP/\\|*3]+|[()][-o^']?[:;]|<3|\^\^|\^_\^|-_-)(?!\w)",
    re.IGNORECASE)
#: the sides of a split (A_SUF1, A_SUF2, ...) are read this far from it: the whole
#: chunk up to this length
SIDE_WINDOW = 64
#: chunks longer than this have no one-token spans (the pattern's backtracking is
#: quadratic in a chunk's length; no URL is this long)
MAX_ONE_TOKEN_CHUNK = 1000


def one_token_spans(chunk: str) -> list[tuple[int, int]]:
    """(start, end) of the :data:`ONE_TOKEN` spans of a chunk (text without
    whitespace); none in a chunk longer than :data:`MAX_ONE_TOKEN_CHUNK`."""
    if len(chunk) > MAX_ONE_TOKEN_CHUNK:
        return []
    return [m.span() for m in ONE_TOKEN.finditer(chunk)]


#: version of the attribute rows, saved with a tokenizer: rows computed otherwise mean
#: other features, so a model trained with another version is refused
ATTRIBUTES_VERSION = 2
_MASK = (1 << 64) - 1
_O_SPACE = stable_hash("o_space")


def _mix(a: int, b: int) -> int:
    return (((a ^ b) * 0x100000001B3) ^ (a >> 29)) & _MASK


def _char_class(ch: str) -> str:
    if ch.isspace():
        return "n" if ch in "\n\r" else "s"
    if ch.isdigit():
        return "d"
    if ch.isalpha():
        return "X" if ch.isupper() else ("x" if ch.islower() else "a")
    return ch


class CharacterAttributes:
    """Attribute rows (len(text), N_ATTRS) uint64 of the characters of a text.

    ``tokens``: lower-cased token forms seen in training; ``segmentations``: lower-cased
    chunk -> the offsets after which training had a token boundary inside it (its most
    frequent segmentation), as a set.
    """

    def __init__(self, tokens: set[str] | None = None,
                 segmentations: dict[str, frozenset[int]] | None = None,
                 max_cache: int = 1 << 18):
        self.tokens = set(tokens or ())
        self.segmentations = dict(segmentations or {})
        self.max_cache = max_cache
        self._chunks: dict[str, np.ndarray] = {}
        self._spaces: dict[str, tuple[int, int]] = {}
        self._hashes: dict[str, int] = {}

    def _chunk_rows(self, chunk: str) -> np.ndarray:
        low = chunk.lower()
        if len(low) != len(chunk):       # lower-casing changed the length (e.g. U+0130)
            low = "".join(c.lower()[:1] or c for c in chunk)
        n = len(chunk)
        rows = np.empty((n, N_ATTRS), dtype=np.uint64)
        symbols = [shape_symbol(ch) for ch in chunk]
        whole = stable_hash("W" + low)
        shape = stable_hash("S" + shape_of_symbols(symbols))
        small = self._small_hash
        seg = self.segmentations.get(low)
        span = np.zeros(n, dtype=np.int8)      # 1 inside a ONE_TOKEN span, 2 its end
        for a, b in one_token_spans(chunk):
            span[a: b] = 1
            span[b - 1] = 2
        for j, ch in enumerate(chunk):
            # the sides within SIDE_WINDOW characters of j: every feature of a chunk
            # costs O(n x SIDE_WINDOW), not O(n^2) (a megabyte without spaces)
            lo, hi = max(0, j + 1 - SIDE_WINDOW), j + 1 + SIDE_WINDOW
            left, right = low[lo: j + 1], low[j + 1: hi]
            rows[j, A_FORM] = small("c" + ch)
            rows[j, A_LOWER] = small("c" + low[j])
            rows[j, A_SUF1] = small("L" + left)
            rows[j, A_SUF2] = small("R" + right)
            rows[j, A_SUF3] = whole
            rows[j, A_SUF4] = shape
            rows[j, A_SUF5] = stable_hash("B" + left + "|" + right)
            rows[j, A_PRE1] = small("b" + left[-3:] + "|" + right[:2])
            rows[j, A_PRE2] = small(f"k{left in self.tokens}{right in self.tokens}{span[j]}")
            rows[j, A_PRE3] = small(f"o{min(n - 1 - j, 3)}{shape_of_symbols(symbols[lo: j + 1])}"
                                    f"|{shape_of_symbols(symbols[j + 1: hi])}{min(j + 1, 6)}")
            rows[j, A_SHAPE] = small("k" + _char_class(ch))
            rows[j, A_AMBIG] = (small("g" + ("B" if j in seg else "N"))
                                if seg is not None else int(UNKNOWN))
        return rows

    def _small_hash(self, key: str) -> int:
        """``stable_hash(key)`` of the keys that repeat across chunks (a character, its
        class, the chunk's sides, a few flags and shapes), cached; the cache is dropped
        past ``max_cache`` keys."""
        value = self._hashes.get(key)
        if value is None:
            if len(self._hashes) >= self.max_cache:
                self._hashes.clear()
            value = self._hashes[key] = stable_hash(key)
        return value

    def _space_hashes(self, ch: str) -> tuple[int, int]:
        """(character hash, class hash) of a whitespace character, cached."""
        pair = self._spaces.get(ch)
        if pair is None:
            pair = self._spaces[ch] = (stable_hash("c" + ch), stable_hash("k" + _char_class(ch)))
        return pair

    def chunk(self, chunk: str) -> np.ndarray:
        rows = self._chunks.get(chunk)
        if rows is None:
            if len(self._chunks) >= self.max_cache:
                self._chunks.clear()
            rows = self._chunks[chunk] = self._chunk_rows(chunk)
        return rows

    def rows(self, text: str) -> np.ndarray:
        """(len(text), N_ATTRS) uint64 rows of every character of ``text``. O(len(text))
        plus the first sight of each chunk."""
        pieces = [m.group() for m in _PIECES.finditer(text)]
        blocks: list[np.ndarray] = []
        chunk_rows = [None if p[0].isspace() else self.chunk(p) for p in pieces]
        for k, p in enumerate(pieces):
            rows = chunk_rows[k]
            if rows is not None:
                blocks.append(rows)
                continue
            prev = chunk_rows[k - 1] if k > 0 else None
            nxt = chunk_rows[k + 1] if k + 1 < len(pieces) else None
            prev_w = int(prev[0, A_SUF3]) if prev is not None else 1
            next_w = int(nxt[0, A_SUF3]) if nxt is not None else 2
            next_s = int(nxt[0, A_SUF4]) if nxt is not None else 3
            meet = _mix(int(prev[-1, A_LOWER]) if prev is not None else 4,
                        int(nxt[0, A_LOWER]) if nxt is not None else 5)
            next_class = int(nxt[0, A_SHAPE]) if nxt is not None else 6
            space = np.empty((len(p), N_ATTRS), dtype=np.uint64)
            for j, ch in enumerate(p):
                c, k = self._space_hashes(ch)
                space[j] = (c, c, _mix(prev_w, 11), _mix(next_w, 12), next_w, next_s,
                            _mix(prev_w, next_w), meet, _mix(next_s, 13), _O_SPACE,
                            _mix(k, next_class), _mix(next_s, 14))
            blocks.append(space)
        if not blocks:
            return np.zeros((0, N_ATTRS), dtype=np.uint64)
        return np.concatenate(blocks)
