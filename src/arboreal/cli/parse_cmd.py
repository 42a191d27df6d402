"""``arboreal parse``: parse CoNLL-U or tokenized text with a trained model."""
from __future__ import annotations

import sys
import warnings

from arboreal.errors import ArborealError


def add_input_arguments(p) -> None:
    """INPUT, -o, --input and --retag: shared by ``parse`` and ``tag``."""
    from arboreal.io.text import INPUT_FORMATS

    p.add_argument("input", metavar="INPUT", nargs="?", default="-",
                   help="input file (default: standard input)")
    p.add_argument("-o", "--output", metavar="OUTPUT.conllu", default="-",
                   help="output file, written atomically (default: standard output)")
    p.add_argument("--input", dest="input_format", choices=INPUT_FORMATS, default="conllu",
                   help="conllu (default): CoNLL-U, tag columns that are '_' throughout a "
                        "sentence predicted; tokenized: one sentence per line, tokens "
                        "separated by spaces; text: raw text, paragraphs separated by blank "
                        "lines (tokenized and split into sentences by the model)")
    p.add_argument("--retag", action="store_true",
                   help="predict UPOS, XPOS, FEATS and LEMMA even where the input has them")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "parse", help="parse raw text, tokenized text or CoNLL-U with a trained model",
        description="Fill HEAD and DEPREL of every word; every other column, comment, "
                    "multiword token and empty node is kept, except tag columns (UPOS, "
                    "XPOS, FEATS, LEMMA) that are '_' throughout a sentence: the model's "
                    "tagger fills them (a model without a tagger refuses input without "
                    "UPOS). Reads standard input and writes standard output when no file "
                    "is given; HEAD may be '_' in the input. The input is streamed (a batch "
                    "of sentences at a time), so memory does not grow with the corpus; an "
                    "output file is written atomically.")
    p.add_argument("model", metavar="MODEL", help="model file written by 'arboreal train'")
    add_input_arguments(p)
    p.set_defaults(func=run)


def _input_name(args) -> str:
    return "<stdin>" if args.input == "-" else args.input


def input_sentences(model, args):
    """The input's sentences, streamed in the format of ``--input`` (raw text through
    the model's tokenizer)."""
    from arboreal.io.text import iter_input

    if args.input_format == "text" and getattr(model, "tokenizer", None) is None:
        raise ArborealError(f"{args.model}: this model has no tokenizer (its treebank had no "
                            "'# text' lines, or it was trained with --no-tokenizer): give "
                            "--input tokenized or conllu")
    return iter_input(args.input, args.input_format, getattr(model, "tokenizer", None))


def tagged_input(model, args):
    """The input's sentences with missing tags predicted (a stream, a batch at a time);
    an error about a sentence names the input file."""
    from arboreal.io.conllu import batched
    from arboreal.models.pipeline import UntaggedInputError, complete_tags

    for batch in batched(input_sentences(model, args), 4096):
        try:
            batch = complete_tags(model, batch, args.retag)
        except UntaggedInputError as exc:
            raise ArborealError(f"{_input_name(args)}: {exc}") from None
        yield from batch


def run(args) -> int:
    from arboreal.io.conllu import write_conllu
    from arboreal.models import load_model, parse_iter
    from arboreal.models.pipeline import UntaggedInputError

    model = load_model(args.model)
    # streamed: read, tag, parse and write a batch of sentences at a time, so a corpus
    # of any size parses in bounded memory (an output file still appears only complete);
    # model.parse fills missing tags first (arboreal.models.pipeline.complete_tags)
    with warnings.catch_warnings():   # summed up in one line below instead
        warnings.filterwarnings("ignore", message=r".*memory budget")
        try:
            write_conllu(parse_iter(model, input_sentences(model, args), retag=args.retag),
                         args.output)
        except UntaggedInputError as exc:
            raise ArborealError(f"{_input_name(args)}: {exc}") from None
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
