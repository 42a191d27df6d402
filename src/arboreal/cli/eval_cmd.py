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
    from arboreal.evaluation import evaluate, format_table
    from arboreal.evaluation_ud import (
        METRICS, TextMismatchError, evaluate_ud, format_ud_table, same_words,
    )
    from arboreal.io.conllu import read_conllu

    if args.gold == "-" and args.system == "-":
        raise ArborealError("GOLD and SYSTEM cannot both be standard input")
    gold = read_conllu(args.gold, allow_missing_heads=True)
    system = read_conllu(args.system, allow_missing_heads=True)
    identical = same_words(gold, system)
    if identical and not args.conll18:
        scores = evaluate(gold, system, exclude_punct=args.exclude_punct)
        if args.json:
            print(json.dumps(scores))
        else:
            note = " (punctuation excluded)" if args.exclude_punct else ""
            print(format_table(scores, title=f"{args.system} against {args.gold}{note}"))
        return 0

    names = {"gold_name": "<stdin>" if args.gold == "-" else args.gold,
             "system_name": "<stdin>" if args.system == "-" else args.system}
    try:
        ud = evaluate_ud(gold, system, **names)
    except TextMismatchError:
        if len(gold) == len(system) and all(len(a) == len(b) for a, b in zip(gold, system)):
            # same sentence and word counts: naming the first differing word is clearer
            evaluate(gold, system)
        raise
    if args.exclude_punct:
        why = "--conll18 was given" if args.conll18 else "the words of GOLD and SYSTEM differ"
        raise ArborealError(f"--exclude-punct applies to the attachment scores of identically "
                            f"tokenized files, not to the CoNLL 2018 evaluation ({why})")
    if args.json:
        print(json.dumps({m: {k: (None if ud[m][k] is None else 100.0 * ud[m][k])
                              for k in ("precision", "recall", "f1", "aligned_accuracy")}
                          for m in METRICS}))
    else:
        lines = [f"{args.system} against {args.gold}"]
        if not identical:
            lines.append("Tokenization differs from gold: CoNLL 2018 shared-task evaluation "
                         "(words aligned through character offsets).")
        print(format_ud_table(ud, title="\n".join(lines)))
    return 0
