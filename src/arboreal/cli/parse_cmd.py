"""``arboreal parse``: parse CoNLL-U input with a trained model."""
from __future__ import annotations


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
    write_conllu(parse_iter(model, sentences), args.output)
    return 0
