"""Argument types shared by the subcommands."""
from __future__ import annotations

import argparse
from typing import Callable


def int_in(lo: int, hi: int | None = None, what: str = "an integer") -> Callable[[str], int]:
    """An argparse type: an integer in [lo, hi] (no upper bound when ``hi`` is None)."""
    def parse(value: str) -> int:
        try:
            v = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {value!r}") from None
        if v < lo or (hi is not None and v > hi):
            bounds = f"at least {lo}" if hi is None else f"in {lo}..{hi}"
            raise argparse.ArgumentTypeError(f"must be {bounds}: {value!r}")
        return v

    return parse
