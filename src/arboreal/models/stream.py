"""Tagging and parsing a stream, in one process or several.

The input is cut into blocks of whole sentences (:func:`arboreal.io.conllu.iter_blocks`:
whole paragraphs for raw text, whole lines for tokenized text); each block is read,
tagged, parsed and formatted by :func:`process_block`, and the results are written in
input order. With ``jobs > 1`` the blocks go to worker processes forked from this one
(the loaded model and its compiled kernels are shared, nothing is reloaded; a block
travels as bytes and comes back as text, so little is copied), at most ``2 x jobs``
blocks in flight: memory is that of ``3 x jobs`` blocks plus the model in each worker
(shared copy-on-write pages until written). The output is byte for byte that of one
process.
"""
from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from typing import Callable, Iterator

from arboreal._interrupt import allow_stop_signals, stop_signals_deferred
from arboreal.errors import ArborealError, FormatError

#: bytes per block of text (raw or tokenized): small enough to keep two workers busy on
#: a small file, large enough that a block's fixed costs vanish
BLOCK_BYTES = 1 << 16
#: a block of CoNLL-U is this many times larger: a word's line takes about eight times
#: the bytes of the word in text, so that blocks of every format hold about as many
#: words (a neural scorer batches sentences by length within a block: blocks of a few
#: hundred sentences made small, padded batches)
CONLLU_BLOCK_FACTOR = 8
#: raw text without a blank line in this many blocks' bytes is cut at a line end (a
#: file of one sentence per line would otherwise be one paragraph, read whole first)
TEXT_LINE_BLOCK_FACTOR = 1


@dataclass(frozen=True)
class StreamOptions:
    """What to do with each sentence: ``input_format`` (conllu, tokenized, text),
    ``output_format`` (conllu, json, displacy), ``retag``, ``tag_only`` (no parsing),
    ``decode`` (map, mbr), ``probabilities`` (HeadProb/LabelProb), ``kbest`` (trees per
    sentence), ``name`` (the input's name in error messages)."""

    input_format: str = "conllu"
    output_format: str = "conllu"
    retag: bool = False
    tag_only: bool = False
    decode: str = "map"
    probabilities: bool = False
    kbest: int = 1
    name: str = "<stdin>"


def _shift(exc: FormatError, name: str, first_line: int) -> FormatError:
    line = None if exc.line is None else exc.line + first_line - 1
    return FormatError(name, line, exc.problem)


def read_block(model, data: bytes, first_line: int, first_id: int, options: StreamOptions
               ) -> list:
    """The sentences of one block (its lines numbered from ``first_line``; sentences of
    tokenized text numbered from ``first_id``)."""
    from arboreal.io.conllu import _parse_chunk
    from arboreal.io.text import iter_lines, iter_paragraphs, iter_tokenized

    fmt = options.input_format
    if fmt == "conllu":
        return _parse_chunk(data, options.name, first_line, True, "conllu", False)
    try:
        if fmt in ("tokenized", "words"):
            sentences = list(iter_tokenized(io.BytesIO(data), first_id=first_id))
            tokenizer = getattr(model, "tokenizer", None)
            if fmt == "tokenized" and tokenizer is not None:
                sentences = list(tokenizer.expand_tokens(sentences))
        elif fmt == "text":
            sentences = list(model.tokenizer.tokenize(iter_paragraphs(io.BytesIO(data))))
        elif fmt == "lines":
            sentences = list(model.tokenizer.tokenize_lines(iter_lines(io.BytesIO(data)),
                                                            first_id=first_id))
        else:
            raise ValueError(f"unknown input format {fmt!r}")
    except FormatError as exc:
        if "empty input" in exc.problem:
            return []
        raise _shift(exc, options.name, first_line) from None
    for s in sentences:
        if s.line is not None:
            s.line += first_line - 1
    return sentences


def process_block(model, data: bytes, first_line: int, first_id: int,
                  options: StreamOptions) -> tuple[str, int, tuple[int, int]]:
    """Read, tag, parse and format one block: ``(text, number of input sentences,
    (sentences parsed in pieces, sentences parsed at first order))``; the last two are
    what the CLI warns about (see ``arboreal parse``)."""
    from arboreal.io.json import format_sentences
    from arboreal.models.pipeline import UntaggedInputError, complete_tags

    sentences = read_block(model, data, first_line, first_id, options)
    if not sentences:
        return "", 0, (0, 0)
    split0 = getattr(model, "split_total", 0)
    fallbacks0 = getattr(model, "fallbacks_total", 0)
    try:
        if options.tag_only:
            out = complete_tags(model, sentences, options.retag)
        elif options.kbest > 1:
            out = [t for trees in model.parse_kbest(sentences, options.kbest, options.retag,
                                                    probabilities=options.probabilities)
                   for t in trees]
        elif options.decode != "map" or options.probabilities:
            out = model.parse(sentences, retag=options.retag, decode=options.decode,
                              probabilities=options.probabilities)
        else:
            out = model.parse(sentences, retag=options.retag)
    except UntaggedInputError as exc:
        raise ArborealError(f"{options.name}: {exc}") from None
    notes = (getattr(model, "split_total", 0) - split0,
             getattr(model, "fallbacks_total", 0) - fallbacks0)
    return format_sentences(out, options.output_format), len(sentences), notes


_SENT_ID = {"conllu": re.compile(r"^(# sent_id = )(\d+)$", re.M),
            "json": re.compile(r'^(\{"sent_id": ")(\d+)(")', re.M),
            "displacy": re.compile(r'("title": ")(\d+)("\},?)$', re.M)}


def _renumber(text: str, offset: int, output_format: str) -> str:
    """Add ``offset`` to the sentence numbers a tokenizer gave one block's sentences
    (raw text: how many sentences a block holds is known only once it is tokenized)."""
    if offset == 0:
        return text
    pattern = _SENT_ID[output_format]

    def bump(m: re.Match) -> str:
        return m.group(1) + str(int(m.group(2)) + offset) + "".join(m.groups()[2:])

    text = pattern.sub(bump, text)
    if output_format == "json":   # the comments repeat the sentence id
        text = re.sub(r'("comments": \[(?:"# newpar", )?"# sent_id = )(\d+)"',
                      lambda m: f'{m.group(1)}{int(m.group(2)) + offset}"', text)
    return text


_WORKER: dict = {}


def _worker_init(model, options: StreamOptions) -> None:
    import signal

    # the parent handles Ctrl-C and termination (and then ends the pool); a worker
    # simply stops, without the parent's handlers or tracebacks of its own
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    allow_stop_signals()          # forked with them blocked (see the pool's creation)
    _WORKER["model"], _WORKER["options"] = model, options


def _worker_block(task: tuple[bytes, int, int]):
    data, first_line, first_id = task
    try:
        return process_block(_WORKER["model"], data, first_line, first_id, _WORKER["options"])
    except (ArborealError, ValueError) as exc:   # its message crosses the process boundary
        return None, str(exc), (0, 0)


def _tasks(source, options: StreamOptions) -> Iterator[tuple[bytes, int, int]]:
    from arboreal.io.conllu import iter_blocks

    blank_lines = options.input_format not in ("tokenized", "words", "lines")
    first_id = 1
    block_bytes = BLOCK_BYTES * (CONLLU_BLOCK_FACTOR if options.input_format == "conllu" else 1)
    line_ends_after = TEXT_LINE_BLOCK_FACTOR * block_bytes \
        if options.input_format == "text" else None
    for data, line in iter_blocks(source, block_bytes, blank_lines=blank_lines,
                                  line_ends_after=line_ends_after,
                                  drop_bom=options.input_format != "conllu"):
        yield data, line, first_id
        if options.input_format in ("tokenized", "words", "lines"):
            first_id += sum(1 for row in data.split(b"\n") if row.strip())


#: what an input without a single sentence is called, by input format
_EMPTY = {"conllu": "empty file (no sentences)", "tokenized": "empty input (no tokens)",
          "words": "empty input (no tokens)",
          "text": "empty input (no text)", "lines": "empty input (no text)"}


@dataclass
class StreamReport:
    """What :func:`process_stream` did: input sentences, sentences parsed in pieces
    (over the length limit) and sentences parsed at first order (over a higher-order
    model's memory budget)."""

    sentences: int = 0
    split: int = 0
    fallbacks: int = 0


def process_stream(model, source, output, options: StreamOptions, jobs: int = 1,
                   progress: Callable[[int], None] | None = None) -> StreamReport:
    """Tag/parse ``source`` (a path, "-" or a binary file) into ``output`` (a path,
    written atomically, "-" or a file) in ``options.output_format``, with ``jobs``
    processes; ``progress(sentences)`` after each block. FormatError for an input
    without any sentence; an error in any block stops everything (a path output is then
    left as it was)."""
    from arboreal.io.conllu import write_text
    from arboreal.io.json import array_framing

    if options.input_format in ("text", "lines") and getattr(model, "tokenizer", None) is None:
        raise ArborealError("this model has no tokenizer (its treebank had no '# text' lines, "
                            "or it was trained with --no-tokenizer): give --input tokenized "
                            "or conllu")
    report = StreamReport()

    def results() -> Iterator[str]:
        with contextlib.ExitStack() as stack:
            # the input is closed as soon as this ends, even while an error's traceback
            # is kept somewhere
            tasks = stack.enter_context(contextlib.closing(_tasks(source, options)))
            if jobs <= 1:
                outputs = (process_block(model, *task, options) for task in tasks)
                yield from _ordered(outputs, report, options, progress)
            else:
                import multiprocessing

                context = multiprocessing.get_context("fork")
                with stop_signals_deferred():     # a signal during the forks is not lost
                    pool = stack.enter_context(context.Pool(jobs, _worker_init,
                                                            (model, options)))
                yield from _ordered(_bounded_map(pool, tasks, 2 * jobs), report, options,
                                    progress)
        if report.sentences == 0:   # raised before the output is committed
            raise FormatError(options.name, 1, _EMPTY.get(options.input_format, "empty input"))

    write_text(array_framing(results(), options.output_format), output)
    return report


def _bounded_map(pool, tasks: Iterator, window: int) -> Iterator:
    """``pool``'s results of ``_worker_block`` over ``tasks`` in order, at most ``window``
    tasks submitted ahead (Pool.imap would read the whole input ahead)."""
    from collections import deque

    pending: deque = deque()
    for task in tasks:
        pending.append(pool.apply_async(_worker_block, (task,)))
        if len(pending) >= window:
            yield pending.popleft().get()
    while pending:
        yield pending.popleft().get()


def _ordered(outputs, report: StreamReport, options: StreamOptions, progress
             ) -> Iterator[str]:
    for text, n, (split, fallbacks) in outputs:
        if text is None:
            raise ArborealError(n)
        if options.input_format == "text":
            text = _renumber(text, report.sentences, options.output_format)
        report.sentences += n
        report.split += split
        report.fallbacks += fallbacks
        if progress is not None:
            progress(n)
        if text:
            yield text
