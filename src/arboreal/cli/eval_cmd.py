"""``arboreal eval GOLD SYSTEM``: attachment scores of a parsed file against gold."""
from __future__ import annotations

import argparse
import json


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "eval",
        help="score a parsed CoNLL-U file against gold (UAS, LAS, root, complete match)",
        description=(
            "Score SYSTEM against GOLD: UAS, LAS (universal part of DEPREL, as in CoNLL 2018), "
            "LAS on full relations, root accuracy, complete match unlabeled and labeled "
            "(McDonald et al. 2006). Percentages with two decimals. Both files must hold "
            "the same sentences and words."
        ),
    )
    p.add_argument("gold", metavar="GOLD", help="gold CoNLL-U file ('-' for standard input)")
    p.add_argument("system", metavar="SYSTEM", help="system CoNLL-U file ('-' for standard input)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object with the keys uas, las, las_full, root, complete, "
                        "complete_labeled, words, sentences")
    p.add_argument("--exclude-punct", action="store_true",
                   help="do not score words whose gold UPOS is PUNCT")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from arboreal.errors import ArborealError
    from arboreal.evaluation import evaluate, format_table

    if args.gold == "-" and args.system == "-":
        raise ArborealError("GOLD and SYSTEM cannot both be standard input")
    scores = evaluate(args.gold, args.system, exclude_punct=args.exclude_punct)
    if args.json:
        print(json.dumps(scores))
    else:
        note = " (punctuation excluded)" if args.exclude_punct else ""
        print(format_table(scores, title=f"{args.system} against {args.gold}{note}"))
    return 0
