"""``arboreal eval GOLD SYSTEM``: attachment scores of a parsed file against gold, or the
CoNLL 2018 shared-task scores when the tokenization differs."""
from __future__ import annotations

import argparse
import json


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "eval",
        help="score a parsed CoNLL-U file against gold (UAS, LAS, root, complete match; "
             "CoNLL 2018 scores when the tokenization differs)",
        description=(
            "Score SYSTEM against GOLD. When both files hold the same sentences and words: "
            "UAS, LAS (universal part of DEPREL, as in CoNLL 2018), LAS on full relations, "
            "root accuracy, complete match unlabeled and labeled (McDonald et al. 2006), "
            "percentages with two decimals. When the words or sentences differ (a system "
            "that tokenized raw text), or with --conll18: the evaluation of the CoNLL 2018 "
            "shared task (conll18_ud_eval.py): words aligned through character offsets "
            "(whitespace ignored, multiword tokens aligned by their forms), and precision, "
            "recall, F1 and aligned accuracy of Tokens, Sentences, Words, UPOS, XPOS, "
            "UFeats, AllTags, Lemmas, UAS, LAS, CLAS, MLAS and BLEX. The two files must "
            "hold the same text apart from whitespace."
        ),
    )
    p.add_argument("gold", metavar="GOLD", help="gold CoNLL-U file ('-' for standard input)")
    p.add_argument("system", metavar="SYSTEM", help="system CoNLL-U file ('-' for standard input)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: with the keys uas, las, las_full, root, "
                        "complete, complete_labeled, words, sentences; in the CoNLL 2018 "
                        "evaluation, {metric: {precision, recall, f1, aligned_accuracy}} "
                        "(percentages; aligned_accuracy null for Tokens, Sentences, Words)")
    p.add_argument("--conll18", action="store_true",
                   help="print the CoNLL 2018 shared-task table even when the words are identical")
    p.add_argument("--exclude-punct", action="store_true",
                   help="do not score words whose gold UPOS is PUNCT (attachment scores only, "
                        "not with the CoNLL 2018 evaluation)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from arboreal.errors import ArborealError
    from arboreal.evaluation import compare, format_table
    from arboreal.evaluation_ud import format_ud_table

    if args.gold == "-" and args.system == "-":
        raise ArborealError("GOLD and SYSTEM cannot both be standard input")
    result = compare(args.gold, args.system, exclude_punct=args.exclude_punct,
                     conll18=args.conll18)
    if args.json:
        print(json.dumps(result.as_dict()))
    elif not result.conll18:
        note = " (punctuation excluded)" if args.exclude_punct else ""
        print(format_table(result.scores, title=f"{args.system} against {args.gold}{note}"))
    else:
        lines = [f"{args.system} against {args.gold}"]
        if result.tokenization_differs:
            lines.append("Tokenization differs from gold: CoNLL 2018 shared-task evaluation "
                         "(words aligned through character offsets).")
        print(format_ud_table(result.scores, title="\n".join(lines)))
    return 0
