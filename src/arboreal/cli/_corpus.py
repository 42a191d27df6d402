"""What the commands over unlabeled corpora (``clusters``, ``lexicon``) share: checking
their inputs and output before the long work, and the two progress bars (tokens read,
then the command's own stage). Their compile notice is
:func:`arboreal._compile.notice_if_compiling` with their kernels as probes."""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Callable, Iterator

from arboreal.errors import ArborealError


def check_output(path: str) -> None:
    """Fail now, not after the long work, if the output cannot be written."""
    if path == "-":
        return
    if os.path.isdir(path):
        raise OSError(21, "is a directory", path)
    folder = os.path.dirname(os.path.realpath(path)) or "."
    if not os.path.isdir(folder):
        raise OSError(2, "no such directory", path)
    if not os.access(folder, os.W_OK) and not (os.path.exists(path) and os.access(path, os.W_OK)):
        raise OSError(13, "permission denied", path)


def check_sources(corpus: list[str]) -> None:
    """Every corpus file exists; standard input ('-') at most once."""
    for source in corpus:
        if source != "-" and not os.path.exists(source):
            raise OSError(2, "no such file", source)
    if corpus.count("-") > 1:
        raise ArborealError("standard input ('-') can be read only once")


@contextmanager
def token_bar(show: bool) -> Iterator[Callable[[int], None] | None]:
    """The ``progress(tokens read so far)`` callback of a tqdm bar on stderr (None when
    not ``show``), closed on exit."""
    if not show:
        yield None
        return
    from tqdm import tqdm

    bar = tqdm(unit=" tokens", unit_scale=True, file=sys.stderr, mininterval=0.5,
               leave=False, desc="counting")
    try:
        yield lambda tokens: bar.update(tokens - bar.n)
    finally:
        bar.close()


@contextmanager
def stage_bar(show: bool, unit: str, desc: str) -> Iterator[Callable[[int, int], None] | None]:
    """The ``progress(done, total)`` callback of a tqdm bar opened at its first call
    (None when not ``show``), closed on exit."""
    if not show:
        yield None
        return
    bars: list = []

    def progress(done: int, total: int) -> None:
        if not bars:
            from tqdm import tqdm

            bars.append(tqdm(total=total, unit=unit, file=sys.stderr, mininterval=0.5,
                             leave=False, desc=desc))
        bars[0].update(done - bars[0].n)

    try:
        yield progress
    finally:
        if bars:
            bars[0].close()
