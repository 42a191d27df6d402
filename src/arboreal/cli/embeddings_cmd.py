"""``arboreal embeddings CORPUS -o VECTORS``: word vectors from unlabeled text."""
from __future__ import annotations

import argparse
import logging

from arboreal.cli._args import int_in

_positive = int_in(1)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "embeddings", help="train word vectors on unlabeled text (for --scorer neural)",
        description="Train skip-gram word2vec vectors (gensim) on a corpus of one tokenized "
                    "sentence per line (tokens separated by spaces), lower-cased as the "
                    "neural scorer looks words up, and write them in word2vec text format "
                    "for 'arboreal train --scorer neural --embeddings VECTORS'. Needs gensim: "
                    "pip install 'arboreal[embeddings]'.")
    p.add_argument("corpus", metavar="CORPUS", help="tokenized text, one sentence per line")
    p.add_argument("-o", "--output", metavar="VECTORS", required=True,
                   help="vectors file to write (word2vec text format)")
    p.add_argument("--dim", type=_positive, default=100, help="vector size (default 100)")
    p.add_argument("--window", type=_positive, default=5, help="context window (default 5)")
    p.add_argument("--min-count", type=_positive, default=3,
                   help="words seen fewer times get no vector (default 3)")
    p.add_argument("--epochs", type=_positive, default=5, help="passes (default 5)")
    p.add_argument("--max-words", type=_positive, default=None,
                   help="keep the N most frequent words (default: all)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--threads", type=_positive, default=None,
                   help="worker threads (default: the cores)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from arboreal.neural.pretrain import train_embeddings

    n = train_embeddings(args.corpus, args.output, dim=args.dim, window=args.window,
                         min_count=args.min_count, epochs=args.epochs, seed=args.seed,
                         threads=args.threads, max_words=args.max_words)
    logging.getLogger(__name__).info(f"wrote {n} word vectors to {args.output}")
    return 0
