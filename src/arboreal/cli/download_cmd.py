"""``arboreal download NAME``: a model from an index into the local cache."""
from __future__ import annotations

import sys


def add_parser(subparsers) -> None:
    from arboreal.cli._args import int_in
    from arboreal.models.download import INDEX_VARIABLE, RETRIES

    p = subparsers.add_parser(
        "download", help="download a model by name into the local cache",
        description="Read the model index (JSON: name, version, url, sha256, size, "
                    "license, scores of each model), download NAME's file into the local "
                    "cache ($ARBOREAL_HOME/models/NAME, default the user cache folder, e.g. "
                    "~/.cache/arboreal), checking its size and SHA-256 before it is moved "
                    "into place; after that every command and arboreal.load take NAME. "
                    "Nothing partial is ever left in the cache; a broken connection is "
                    "resumed where it broke (HTTP Range).")
    p.add_argument("name", metavar="NAME", help="the model's name in the index")
    p.add_argument("--index", metavar="URL|FILE", default=None,
                   help=f"the index: an http(s):// or file:// URL or a path (default: "
                        f"${INDEX_VARIABLE})")
    p.add_argument("--retries", type=int_in(0, 100), default=RETRIES, metavar="N",
                   help=f"times a broken download is resumed (default {RETRIES})")
    p.add_argument("--force", action="store_true",
                   help="download even when the cache holds that very file already")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def run(args) -> int:
    from arboreal.models.download import download

    say = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    bar = None
    if not args.quiet and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(unit="B", unit_scale=True, file=sys.stderr, leave=False)
    try:
        download(args.name, args.index, retries=args.retries, log=say, force=args.force,
                 progress=None if bar is None else bar.update)
    finally:
        if bar is not None:
            bar.close()
    return 0
