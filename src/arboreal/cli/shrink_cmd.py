"""``arboreal shrink MODEL -o OUT``: a smaller model file for distribution."""
from __future__ import annotations

import sys


def add_compact_arguments(p) -> None:
    """--threshold, --bits and --float32: shared by ``shrink`` and ``package``."""
    from arboreal.cli._args import int_in
    from arboreal.models.compact import DEFAULT_BITS

    p.add_argument("--threshold", metavar="T|PREFIX=T,...", default=None,
                   help="drop the weights below T times their vector's mean magnitude: one "
                        "number for every weight vector, or per vector, e.g. "
                        "'w=1,l=1,*=0.02' (the default: the parser's arc (w) and label (l) "
                        "weights at 1, the tagger's and tokenizer's at 0.02, chosen on "
                        "EWT's dev set; 0 drops nothing)")
    p.add_argument("--bits", type=int_in(4, 11), default=DEFAULT_BITS, metavar="N",
                   help=f"significant bits kept of each float16 weight, 4..11 (default "
                        f"{DEFAULT_BITS}; 11: all of float16's)")
    p.add_argument("--float32", action="store_true",
                   help="keep the weights float32 (default: float16, scaled, where every "
                        "value fits)")


def thresholds_of(args):
    """The thresholds table of --threshold (None: the default)."""
    from arboreal.errors import ArborealError
    from arboreal.models.compact import parse_thresholds

    if args.threshold is None:
        return None
    try:
        return parse_thresholds(args.threshold)
    except ValueError as exc:
        raise ArborealError(f"--threshold {exc}") from None


def add_parser(subparsers) -> None:
    from arboreal.cli.parse_cmd import MODEL_HELP

    p = subparsers.add_parser(
        "shrink", help="write a smaller copy of a model for distribution",
        description="Write MODEL to OUT with its weight vectors compacted: weights too "
                    "small to matter dropped (below a threshold times the vector's mean "
                    "magnitude), the rest stored float16 (scaled by a power of two, rounded "
                    "to --bits significant bits) where every value fits, else float32; "
                    "everything else copied. The copy parses as the model does except "
                    "where the dropped weights or the rounding decide (docs/benchmarks.md, "
                    "'Compact models', measures how many words change on EWT, and the "
                    "scores). 'arboreal package' does this by default. OUT is written "
                    "atomically.")
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    p.add_argument("-o", "--output", metavar="OUT", required=True, help="model file to write")
    add_compact_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    import os

    from arboreal.models import open_model
    from arboreal.models.distribute import distribution_model

    path, meta, arrays = open_model(args.model)
    arrays.close()
    card = distribution_model(args.model, args.output, thresholds=thresholds_of(args),
                              float16=not args.float32, significant_bits=args.bits)
    before = os.path.getsize(path)
    after = os.path.getsize(args.output)
    if "compact" in meta:
        print(f"saved {args.output}: {after / 1e6:.2f} MB (the model was compact already: "
              "copied)", file=sys.stderr)
        return 0
    print(f"saved {args.output}: {after / 1e6:.2f} MB, from {before / 1e6:.2f} MB "
          f"({before / after:.1f}x smaller); {card['compact']['weights_kept']} weights kept, "
          f"{card['compact']['weights_dropped']} dropped", file=sys.stderr)
    return 0
