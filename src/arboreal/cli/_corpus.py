"""What the commands over unlabeled corpora (``clusters``, ``lexicon``) share: checking
their inputs and output before the long work, and the two progress bars (tokens read,
then the command's own stage). Their compile notice is
:func:`arboreal._compile.notice_if_compiling` with their kernels as probes."""
from __future__ import annotations

import logging
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


#: --input of the corpus commands, before the format list
AUTO_HELP = ("auto (default): conllu if the first line of each file that is not a comment "
             "starts with a word ID and a tab, else tokenized; ")


def resolve_corpus(corpus: list[str], input_format: str) -> tuple[list, str]:
    """``(sources, input format)`` of corpus files given ``--input``: for ``auto``,
    conllu if every file looks like CoNLL-U, tokenized if none does (see
    :mod:`arboreal.io.sniff`; standard input is replaced by a stream that replays the
    lines looked at). FormatError for a model file; ArborealError for files of both
    kinds."""
    from arboreal.errors import FormatError
    from arboreal.io.sniff import CONLLU, MODEL, MODEL_FILE, TEXT, sniff

    if input_format != "auto":
        return corpus, input_format
    sources, kinds = [], {}
    for path in corpus:
        name = "<stdin>" if path == "-" else path
        kind, _, _, source = sniff(path, name)
        if kind == MODEL:
            raise FormatError(name, None, MODEL_FILE.replace("treebank", "corpus"))
        sources.append(source)
        kinds.setdefault(kind, name)
    if len(kinds) > 1:
        raise ArborealError(f"{kinds[CONLLU]} is CoNLL-U and {kinds[TEXT]} is not "
                            "(--input auto): give --input conllu, tokenized or text")
    fmt = "conllu" if CONLLU in kinds else "tokenized"
    logging.getLogger(__name__).debug("corpus: %s (--input auto)", fmt)
    return sources, fmt


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
