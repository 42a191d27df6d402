"""``arboreal projectivize IN OUT``: replace non-projective trees by minimum-loss projective ones."""
from __future__ import annotations

import argparse
import logging


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "projectivize",
        help="make every tree projective with the fewest re-attached words",
        description=(
            "Replace each non-projective tree of IN by a projective tree with the fewest "
            "words whose head changes (Eisner's algorithm with score +1 on gold arcs and -1 "
            "elsewhere; Koo et al. 2007, footnote 4) and write the result to OUT. A re-attached "
            "word keeps its DEPREL; every other column, comment, multiword token and empty node "
            "is kept. Single-root trees stay single-root. OUT is written atomically ('-' for "
            "standard output). A summary goes to standard error."
        ),
    )
    p.add_argument("input", metavar="IN", help="CoNLL-U file ('-' for standard input)")
    p.add_argument("output", metavar="OUT", help="CoNLL-U file to write ('-' for standard output)")
    p.add_argument("--single-root", action="store_true",
                   help="force one word attached to the root in every re-attached tree "
                        "(default: keep each tree's own root count constraint)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from arboreal.io.conllu import read_conllu, write_conllu
    from arboreal.inference.projective import projectivize

    sentences = read_conllu(args.input)
    out, n_sent, n_words = projectivize(sentences, single_root=True if args.single_root else None)
    write_conllu(out, args.output)
    words = sum(len(s) for s in sentences)
    logging.getLogger(__name__).info(f"projectivized {n_sent} of {len(sentences)} sentences; "
                                     f"{n_words} of {words} words re-attached")
    return 0
