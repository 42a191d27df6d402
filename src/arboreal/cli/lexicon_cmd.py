"""``arboreal lexicon``: word counts, co-occurrence PMI and similar words from unlabeled
text, for parser features (Wang, Cherry, Lizotte & Schuurmans 2006)."""
from __future__ import annotations

import logging
import time

from arboreal.cli._args import int_in
from arboreal.cli._logging import is_terminal
from arboreal._compile import notice_if_compiling
from arboreal.cli._corpus import (
    AUTO_HELP, check_output, check_sources, resolve_corpus, stage_bar, token_bar,
)
from arboreal.errors import ArborealError


def add_parser(subparsers) -> None:
    from arboreal.features.clusters import CORPUS_FORMATS
    from arboreal.features.lexicon import MAX_NEIGHBOURS, MAX_WINDOW

    p = subparsers.add_parser(
        "lexicon", help="word counts, pair PMI and similar words from unlabeled text",
        description="Count the words of unlabeled corpora and the pairs of words that occur "
                    "within a window of each other in a line, and write a lexicon file (an "
                    ".npz model file) holding: each word's count; the pointwise mutual "
                    "information of each pair, PMI(a, b) = ln(p(a, b) / (p(a) p(b))) with "
                    "p(a, b) = count(a, b) / pairs and p(a) = count(a) / tokens, pairs "
                    "unordered (a b and b a count alike); and for the most frequent words "
                    "their most similar words, by the cosine of their positive-PMI context "
                    "vectors. Words are lower-cased and every digit becomes 0, for counting "
                    "and for lookups alike. Corpora of any size are streamed (memory grows "
                    "with the distinct words and word pairs, not with the tokens).")
    p.add_argument("corpus", metavar="CORPUS", nargs="+",
                   help="corpus files, read in turn ('-' for standard input)")
    p.add_argument("-o", "--output", metavar="LEX", required=True,
                   help="output lexicon file (.npz), written atomically")
    p.add_argument("--input", dest="input_format", choices=("auto", *CORPUS_FORMATS),
                   default="auto",
                   help=AUTO_HELP + "tokenized: one sentence per line, tokens separated by "
                        "whitespace; text: raw text, each line split into tokens by a fixed "
                        "rule (as arboreal clusters --input text); conllu: the FORM column of "
                        "CoNLL-U (HEAD may be '_'). Pairs are counted within a line (a "
                        "sentence for CoNLL-U)")
    p.add_argument("--window", type=int_in(1, MAX_WINDOW), default=5, metavar="W",
                   help="two tokens of a line form a pair when at most W positions apart "
                        "(default 5; 1: adjacent tokens only)")
    p.add_argument("--min-count", type=int_in(1), default=2, metavar="K",
                   help="keep only words seen at least K times (default 2); a rarer word's "
                        "pairs are dropped, and the words around it are not brought closer")
    p.add_argument("--min-pair-count", type=int_in(1), default=2, metavar="K",
                   help="keep only pairs seen at least K times (default 2)")
    p.add_argument("--neighbours", type=int_in(0, MAX_NEIGHBOURS), default=10, metavar="K",
                   help="similar words kept per word (default 10; 0: no similarity graph)")
    p.add_argument("--similar-words", type=int_in(0), default=20000, metavar="N",
                   help="compute similar words for the N most frequent words, among "
                        "themselves (default 20000); time grows with N^2")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars and no summary on stderr (the bars only show when "
                        "stderr is a terminal)")
    p.set_defaults(func=run)


def _check_output(path: str) -> None:
    """Fail now, not after the long work, if the lexicon cannot be written there."""
    if path == "-":
        raise ArborealError("a lexicon is a binary .npz file: give -o a file name, not '-'")
    check_output(path)


def run(args) -> int:
    from arboreal.features.clusters import _hash_tokens, _merge_sorted
    from arboreal.features.lexicon import build_lexicon, count_cooccurrences

    _check_output(args.output)
    check_sources(args.corpus)
    sources, input_format = resolve_corpus(args.corpus, args.input_format)
    show = not args.quiet and is_terminal()
    start = time.perf_counter()
    notice_if_compiling(args.quiet, (_hash_tokens, _merge_sorted), "counting")
    with token_bar(show) as counted:
        counts = count_cooccurrences(sources, input_format, args.window,
                                     progress=counted)
    with stage_bar(show, " words", "similar words") as compared:
        lexicon = build_lexicon(counts, args.min_count, args.min_pair_count, args.neighbours,
                                args.similar_words, progress=compared)
    del counts
    lexicon.save(args.output)
    rows = lexicon.nb_indptr.size - 1
    logging.getLogger(__name__).info(
        f"arboreal: lexicon: {lexicon.tokens:,} tokens, {len(lexicon):,} words "
        f"(--min-count {args.min_count}), {lexicon.pair_keys.size:,} pairs "
        f"(--window {args.window}, --min-pair-count {args.min_pair_count}), "
        f"{lexicon.nb_indices.size:,} neighbours of {rows:,} words, "
        f"{time.perf_counter() - start:.1f} s")
    return 0
