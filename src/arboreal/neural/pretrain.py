"""Word embeddings from unlabeled text, for ``arboreal train --scorer neural --embeddings``.

gensim's word2vec (skip-gram with negative sampling; Mikolov et al. 2013) does this well,
so arboreal does not: ``arboreal embeddings CORPUS -o VECTORS`` runs it on a corpus of
one tokenized sentence per line (tokens separated by spaces, e.g. the output of
benchmarks/unlabeled_corpus.py), lower-cased as the neural scorer looks words up, and
writes word2vec text format. gensim is an optional extra (``pip install
"arboreal[embeddings]"``).
"""
from __future__ import annotations

import os

from arboreal.errors import ArborealError


class _Sentences:
    """The corpus as an iterable of token lists, re-read on every pass (bounded memory)."""

    def __init__(self, path: str):
        self.path = path

    def __iter__(self):
        with open(self.path, encoding="utf-8", errors="replace") as f:
            for line in f:
                tokens = line.lower().split()
                if tokens:
                    yield tokens


def train_embeddings(corpus: str | os.PathLike, output: str | os.PathLike, dim: int = 100,
                     window: int = 5, min_count: int = 3, epochs: int = 5, seed: int = 0,
                     threads: int | None = None, max_words: int | None = None) -> int:
    """Train skip-gram word2vec vectors of size ``dim`` on ``corpus`` and write them to
    ``output`` (word2vec text format, most frequent words first, at most ``max_words``).
    Returns the number of words written. ArborealError when gensim is missing."""
    try:
        from gensim.models import Word2Vec
    except ImportError:
        raise ArborealError("training embeddings needs gensim: pip install "
                            "'arboreal[embeddings]'") from None
    import numpy as np

    from arboreal.neural.embeddings import write_embeddings

    corpus = os.fspath(corpus)
    if not os.path.isfile(corpus):
        raise ArborealError(f"{corpus}: no such corpus file")
    model = Word2Vec(_Sentences(corpus), vector_size=dim, window=window, min_count=min_count,
                     sg=1, negative=5, epochs=epochs, seed=seed,
                     workers=threads or os.cpu_count() or 1)
    words = list(model.wv.index_to_key)   # by falling frequency
    if max_words is not None:
        words = words[:max_words]
    write_embeddings(output, words, np.asarray(model.wv[words], dtype=np.float32))
    return len(words)
