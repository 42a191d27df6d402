"""``arboreal warmup``: compile the parsing kernels ahead of their first use."""
from __future__ import annotations

import logging


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "warmup", help="compile the kernels ahead of first use (for containers)",
        description="Every numba kernel of arboreal is compiled on its first use on a "
                    "machine and cached on disk (in the package's __pycache__ folders, or "
                    "NUMBA_CACHE_DIR). This command does that first use now: with no "
                    "model, it trains a tiny pipeline on built-in sentences and parses "
                    "raw text with it (both decoders, probabilities, k-best, minimum-risk "
                    "decoding); with models, it runs each of them the same way. Run it "
                    "when building a container image, so that the first real command "
                    "starts at once.")
    p.add_argument("models", metavar="MODEL", nargs="*",
                   help="model files or names to warm up (default: a built-in tiny model)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def run(args) -> int:
    import time
    import warnings

    from arboreal._compile import kernels_cached, warmup

    say = None if args.quiet else logging.getLogger(__name__).info
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the tiny treebank's own warnings mean nothing
        warmup(args.models, say)
    if say is not None:
        state = "cached" if kernels_cached() else "compiled, but the cache is not writable"
        say(f"warmup: done in {time.perf_counter() - t0:.1f} s (kernels {state})")
    return 0
