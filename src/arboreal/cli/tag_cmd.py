"""``arboreal tag``: predict UPOS, XPOS, FEATS and LEMMA with a model's tagger."""
from __future__ import annotations

from arboreal.errors import ArborealError


def add_parser(subparsers) -> None:
    from arboreal.cli.parse_cmd import add_input_arguments

    p = subparsers.add_parser(
        "tag", help="tokenize, tag and lemmatize text (no parsing)",
        description="Fill the tag columns (UPOS, XPOS, FEATS, LEMMA) that are '_' "
                    "throughout a sentence with the predictions of the model's tagger "
                    "(every one with --retag); HEAD and DEPREL are left as they are. "
                    "Streamed; an output file is written atomically.")
    p.add_argument("model", metavar="MODEL", help="model file written by 'arboreal train'")
    add_input_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from arboreal.cli.parse_cmd import tagged_input
    from arboreal.io.conllu import write_conllu
    from arboreal.models import load_model

    model = load_model(args.model)
    if getattr(model, "tagger", None) is None:
        raise ArborealError(f"{args.model}: this model has no tagger (it was trained with "
                            "--no-tagger or on data without UPOS)")
    write_conllu(tagged_input(model, args), args.output)
    return 0
