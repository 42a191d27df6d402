"""``arboreal parse``: parse CoNLL-U input with a trained model."""
from __future__ import annotations

import sys
import warnings


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "parse", help="parse CoNLL-U input with a trained model",
        description="Fill HEAD and DEPREL of every word; every other column, comment, "
                    "multiword token and empty node is kept. Reads standard input and writes "
                    "standard output when no file is given; HEAD may be '_' in the input. "
                    "The input is streamed (a batch of sentences at a time), so memory does "
                    "not grow with the corpus; an output file is written atomically.")
    p.add_argument("model", metavar="MODEL", help="model file written by 'arboreal train'")
    p.add_argument("input", metavar="INPUT.conllu", nargs="?", default="-",
                   help="input file (default: standard input)")
    p.add_argument("-o", "--output", metavar="OUTPUT.conllu", default="-",
                   help="output file, written atomically (default: standard output)")
    p.set_defaults(func=run)


def run(args) -> int:
    from arboreal.io.conllu import iter_conllu, write_conllu
    from arboreal.models import load_model, parse_iter

    model = load_model(args.model)
    # streamed: read, parse and write a batch of sentences at a time, so a corpus of
    # any size parses in bounded memory (an output file still appears only complete)
    # the input's trees are replaced, so they are not checked (HEAD may be '_')
    sentences = iter_conllu(args.input, allow_missing_heads=True, check_trees=False)
    with warnings.catch_warnings():   # summed up in one line below instead
        warnings.filterwarnings("ignore", message=r".*memory budget")
        write_conllu(parse_iter(model, sentences), args.output)
    fallbacks = getattr(model, "fallbacks_total", 0)
    if fallbacks:
        print(f"arboreal: warning: {fallbacks} sentence(s) too long for the order-"
              f"{model.order} memory budget were parsed at first order", file=sys.stderr)
    if model.split_total:
        from arboreal.models.pieces import MAX_WORDS

        print(f"arboreal: warning: {model.split_total} sentence(s) longer than {MAX_WORDS} words "
              "were parsed in pieces of at most that many words, joined into one tree",
              file=sys.stderr)
    return 0
