"""``arboreal clusters``: Brown word clusters from unlabeled text, in wcluster's paths format."""
from __future__ import annotations

import logging
import time

from arboreal.cli._args import int_in
from arboreal.cli._logging import is_terminal
from arboreal._compile import notice_if_compiling
from arboreal.cli._corpus import (
    AUTO_HELP, check_output, check_sources, resolve_corpus, stage_bar, token_bar,
)


def add_parser(subparsers) -> None:
    from arboreal.features.brown import MAX_CLUSTERS
    from arboreal.features.clusters import CORPUS_FORMATS

    p = subparsers.add_parser(
        "clusters", help="Brown word clusters from unlabeled text (wcluster's paths format)",
        description="Cluster the words of unlabeled corpora with Brown et al.'s (1992) "
                    "class bigram model and Liang's (2005) window of C clusters: the words "
                    "by decreasing frequency, each in turn added as a cluster and the pair of "
                    "clusters losing the least average mutual information merged, then the "
                    "last C clusters merged into one tree. Writes one line per word, "
                    "'bitstring<TAB>word<TAB>count', the bit string being the path from the "
                    "root to the word's cluster (the 'paths' file of Liang's wcluster). "
                    "Words are lower-cased and every digit becomes 0, for clustering and "
                    "for lookups alike. Corpora of any size are streamed (memory grows with "
                    "the distinct words and word pairs, not with the tokens); the clustering "
                    "itself needs about 40 (C+1)^2 bytes (40 MB at C = 1000).")
    p.add_argument("corpus", metavar="CORPUS", nargs="+",
                   help="corpus files, read in turn ('-' for standard input)")
    p.add_argument("-o", "--output", metavar="PATHS", required=True,
                   help="output paths file, written atomically ('-' for standard output)")
    p.add_argument("--input", dest="input_format", choices=("auto", *CORPUS_FORMATS),
                   default="auto",
                   help=AUTO_HELP + "tokenized: one sentence per line, tokens separated by "
                        "whitespace; text: raw text, each line split into tokens by a fixed "
                        "rule (runs of letters and digits, possibly joined by inner - ' . or "
                        ", as in e-mail, don't, 3.14; any other non-space character alone), "
                        "not a model's trained tokenizer; conllu: the FORM column of CoNLL-U "
                        "(HEAD may be '_'). Word pairs are counted within a line (a sentence "
                        "for CoNLL-U)")
    p.add_argument("--clusters", type=int_in(1, MAX_CLUSTERS), default=1000, metavar="C",
                   help="number of clusters (default 1000, as Koo et al. 2008); time grows "
                        "with C^2")
    p.add_argument("--min-count", type=int_in(1), default=1, metavar="K",
                   help="cluster only words seen at least K times (default 1, every word, as "
                        "wcluster); rarer words get no line and are looked up as NOCL. Time "
                        "grows with the number of words clustered, so K = 2..5 is much faster "
                        "on large corpora")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars and no summary on stderr (the bars only show when "
                        "stderr is a terminal)")
    p.set_defaults(func=run)


def run(args) -> int:
    from arboreal.features.brown import _run
    from arboreal.features.clusters import _hash_tokens, brown_clusters, count_corpus, write_paths

    check_output(args.output)
    check_sources(args.corpus)
    sources, input_format = resolve_corpus(args.corpus, args.input_format)
    show = not args.quiet and is_terminal()
    start = time.perf_counter()
    notice_if_compiling(args.quiet, (_run, _hash_tokens), "clustering")
    with token_bar(show) as counted:
        counts = count_corpus(sources, input_format, progress=counted)
    with stage_bar(show, " merges", "clustering") as merged:
        clusters = brown_clusters(counts, args.clusters, args.min_count, progress=merged)
    write_paths(clusters, args.output)
    logging.getLogger(__name__).info(
        f"arboreal: clusters: {counts.tokens:,} tokens, {len(counts.words):,} words, "
        f"{len(clusters):,} clustered (--min-count {args.min_count}) into "
        f"{clusters.n_clusters} cluster{'s' if clusters.n_clusters != 1 else ''}, "
        f"AMI {clusters.ami:.4f} bits, {time.perf_counter() - start:.1f} s")
    return 0
