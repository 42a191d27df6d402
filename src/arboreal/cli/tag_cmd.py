"""``arboreal tag``: predict UPOS, XPOS, FEATS and LEMMA with a model's tagger."""
from __future__ import annotations


def add_parser(subparsers) -> None:
    from arboreal.cli.parse_cmd import MODEL_HELP, add_input_arguments

    p = subparsers.add_parser(
        "tag", help="tokenize, tag and lemmatize text (no parsing)",
        description="Fill the tag columns (UPOS, XPOS, FEATS, LEMMA) that are '_' "
                    "throughout a sentence with the predictions of the model's tagger "
                    "(every one with --retag); HEAD and DEPREL are left as they are. "
                    "Streamed; an output file is written atomically.")
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    add_input_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from arboreal.cli.parse_cmd import run_stream

    return run_stream(args, tag_only=True)
