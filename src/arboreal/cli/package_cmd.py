"""``arboreal package MODEL -o DIR``: a model as a pip-installable wheel."""
from __future__ import annotations

import sys


def add_parser(subparsers) -> None:
    from arboreal.cli.parse_cmd import MODEL_HELP
    from arboreal.cli.shrink_cmd import add_compact_arguments

    p = subparsers.add_parser(
        "package", help="write a model as a wheel that pip installs (then used by name)",
        description="Write DIR/arboreal_model_NAME-VERSION-py3-none-any.whl, the Python "
                    "distribution arboreal-model-NAME holding the model file (compact, as "
                    "'arboreal shrink' makes it, unless --no-shrink) and its card, with an "
                    "entry point (group arboreal_models) through which every command and "
                    "arboreal.load find it by NAME once installed: pip install "
                    "DIR/arboreal_model_NAME-VERSION-py3-none-any.whl (offline: add "
                    "--no-index), or from any package index.")
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    p.add_argument("-o", "--output-dir", metavar="DIR", required=True,
                   help="folder to write the wheel into (created if missing)")
    p.add_argument("--name", default=None,
                   help="the model's name (default: its card's name, else the file name "
                        "without extension)")
    p.add_argument("--version", dest="model_version", default=None,
                   help="the package version, PEP 440 (default: the card's, else 1.0)")
    p.add_argument("--card", metavar="CARD.json", default=None,
                   help="a JSON object of card fields to set: version, description, "
                        "treebank, license, scores, speed")
    p.add_argument("--license", default=None,
                   help="the model's license (that of its training treebank, e.g. "
                        "'CC BY-SA 4.0'; an NC license marks it non-commercial)")
    p.add_argument("--description", default=None, help="one line on the model")
    p.add_argument("--no-shrink", action="store_true",
                   help="package the model file as it is (default: compact it)")
    add_compact_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from arboreal.cli.shrink_cmd import thresholds_of
    from arboreal.errors import ArborealError
    from arboreal.models.cards import read_card_file
    from arboreal.models.distribute import package

    card: dict = {}
    if args.card is not None:
        try:
            card = read_card_file(args.card)
        except ArborealError as exc:
            raise ArborealError(f"--card {exc}") from None
    for key, value in (("version", args.model_version), ("license", args.license),
                       ("description", args.description)):
        if value is not None:
            card[key] = value
    wheel, full = package(args.model, args.output_dir, args.name, card,
                          compact=not args.no_shrink, thresholds=thresholds_of(args),
                          float16=not args.float32, significant_bits=args.bits)
    print(f"saved {wheel} (model {full['name']} {full['version']}, "
          f"{full['size_bytes'] / 1e6:.2f} MB); install it with: pip install {wheel}",
          file=sys.stderr)
    return 0
