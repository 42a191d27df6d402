"""``arboreal validate FILE...``: read each file with every check, report OK or the first error."""
from __future__ import annotations

import argparse
import logging

_log = logging.getLogger(__name__)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "validate",
        help="check CoNLL-U files (columns, IDs, heads, cycles, roots, UTF-8)",
        description=(
            "Read each FILE with all of arboreal's checks and print 'FILE: OK' with its size, "
            "or the first error as 'arboreal: error: FILE:LINE: problem'. "
            "Exit status 2 if any file has an error."
        ),
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="CoNLL-U file(s) ('-' for standard input)")
    p.add_argument("--allow-missing-heads", action="store_true",
                   help="accept HEAD '_' (tagged but unparsed input)")
    p.add_argument("--format", choices=("conllu", "conllx"), default="conllu",
                   help="conllu (default; also reads CoNLL-X) or conllx (rejects comments, "
                        "multiword ranges and empty nodes)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from arboreal.errors import ArborealError, FormatError
    from arboreal.io.conllu import read_conllu

    status = 0
    for path in args.files:
        try:
            sentences = read_conllu(path, allow_missing_heads=args.allow_missing_heads, format=args.format)
        except ArborealError as exc:
            hint = ""
            if isinstance(exc, FormatError) and exc.problem.startswith("HEAD is '_'"):
                hint = "; --allow-missing-heads accepts it"
            _log.error("%s%s", str(exc), hint)   # text: see cli.main
            status = 2
            continue
        except OSError as exc:
            _log.error("%s: %s", path, exc.strerror or str(exc))
            status = 2
            continue
        words = sum(len(s) for s in sentences)
        name = "<stdin>" if path == "-" else path
        print(f"{name}: OK ({len(sentences)} sentences, {words} words)")
    return status
