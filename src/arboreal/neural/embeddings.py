"""Pretrained word embeddings: word2vec / fastText text format in, a matrix out.

The format: an optional header line ``COUNT DIM``, then one line per word: the word and
DIM numbers separated by spaces. Files list words by falling frequency (both tools write
them so), so keeping the first ``max_words`` keeps the most frequent ones. Words are
lower-cased as the neural scorer looks them up (the first vector of a lower-cased word
wins). Bad lines raise :class:`~arboreal.errors.FormatError` naming the file and line.
"""
from __future__ import annotations

import io
import os

import numpy as np

from arboreal.errors import FormatError

#: at most this many words are read by default (100,000 x 100 floats: 20 MB in float16)
MAX_WORDS = 100_000
#: no real embedding has more dimensions
MAX_DIM = 4096


def read_embeddings(path: str | os.PathLike, max_words: int = MAX_WORDS
                    ) -> tuple[list[str], np.ndarray]:
    """(words, vectors (V, D) float32) of a word2vec / fastText text file, at most
    ``max_words`` words (the first ones). O(file size up to the last word kept)."""
    name = os.fspath(path)
    words: list[str] = []
    rows: list[np.ndarray] = []
    seen: set[str] = set()
    dim = None
    try:
        f = open(name, "rb")
    except OSError as exc:
        raise FormatError(name, None, f"cannot read embeddings ({exc.strerror or exc})") from None
    with f:
        text = io.TextIOWrapper(f, encoding="utf-8", errors="strict", newline="\n")
        lineno = 0
        try:
            for line in text:
                lineno += 1
                parts = line.rstrip("\n").rstrip("\r").rstrip(" ").split(" ")
                if lineno == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                    dim = int(parts[1])
                    if not 0 < dim <= MAX_DIM:
                        raise FormatError(name, 1, f"embedding size {dim} outside 1..{MAX_DIM}")
                    continue
                if len(parts) < 2:
                    if line.strip() == "":
                        continue
                    raise FormatError(name, lineno, "expected a word and its vector")
                if dim is None:
                    dim = len(parts) - 1
                    if dim > MAX_DIM:
                        raise FormatError(name, lineno, f"embedding size {dim} over {MAX_DIM}")
                if len(parts) - 1 != dim:
                    raise FormatError(name, lineno, f"{len(parts) - 1} numbers, expected {dim}")
                try:
                    vec = np.array(parts[1:], dtype=np.float32)
                except ValueError:
                    raise FormatError(name, lineno, "a vector entry is not a number") from None
                if not np.isfinite(vec).all():
                    raise FormatError(name, lineno, "the vector holds inf or NaN")
                word = parts[0].lower()
                if word in seen:
                    continue
                seen.add(word)
                words.append(word)
                rows.append(vec)
                if len(words) >= max_words:
                    break
        except UnicodeDecodeError:
            raise FormatError(name, lineno + 1, "not UTF-8 text") from None
    if not words:
        raise FormatError(name, None, "no word vectors found")
    return words, np.stack(rows)


def write_embeddings(path: str | os.PathLike, words: list[str], vectors: np.ndarray) -> None:
    """Write ``words`` and ``vectors`` (V, D) in word2vec text format, atomically."""
    from arboreal._atomic import atomic_write

    def write(f) -> None:
        f.write(f"{len(words)} {vectors.shape[1]}\n".encode())
        for w, v in zip(words, vectors):
            f.write((w + " " + " ".join(f"{x:.5g}" for x in v.tolist()) + "\n").encode())

    atomic_write(path, write)
