"""Plain-text inputs: tokenized text (one sentence per line, tokens separated by spaces).

Sentences read from text have FORM filled and every other column ``_``; each carries
``# sent_id`` and ``# text`` comments so that the CoNLL-U written for it is complete.
"""
from __future__ import annotations

import re
from typing import Iterator

from arboreal.errors import FormatError
from arboreal.io.conllu import MAX_SENTENCE_BYTES, _decode, _source_name, open_binary
from arboreal.io.sentence import Sentence

#: control characters that are not whitespace (whitespace separates tokens)
_CONTROL = re.compile("[\x00-\x08\x0e-\x1b\x7f]")


#: a line is read this many bytes at a time (a NUL is found before a long line is read)
_LINE_PIECE = 1 << 20


def _read_line(f, name: str, number: int) -> bytes:
    """One line of ``f`` (b"" at the end), read a piece at a time: FormatError at once
    for a NUL byte (binary input, such as ``/dev/zero``), else at most
    MAX_SENTENCE_BYTES + 1 bytes."""
    parts, size = [], 0
    while True:
        piece = f.readline(min(_LINE_PIECE, MAX_SENTENCE_BYTES + 1 - size))
        if isinstance(piece, str):
            piece = piece.encode("utf-8")
        if b"\0" in piece:
            raise FormatError(name, number, "control character U+0000 in the line "
                                            "(binary input?)")
        parts.append(piece)
        size += len(piece)
        if not piece or piece.endswith(b"\n") or size > MAX_SENTENCE_BYTES:
            return b"".join(parts)


def _lines(path_or_file, name: str) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes without the line end) of a byte stream, each line at most
    MAX_SENTENCE_BYTES long (FormatError otherwise)."""
    f, own = open_binary(path_or_file)
    try:
        number = 0
        while True:
            number += 1
            line = _read_line(f, name, number)
            if not line:
                return
            if number == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]                  # a UTF-8 byte order mark
            if len(line) > MAX_SENTENCE_BYTES and not line.endswith(b"\n"):
                raise FormatError(name, number, f"line longer than {MAX_SENTENCE_BYTES >> 20} "
                                  "MiB (one sentence per line is expected)")
            yield number, line.rstrip(b"\r\n")
    finally:
        if own:
            f.close()


def iter_tokenized(path_or_file, first_id: int = 1) -> Iterator[Sentence]:
    """Sentences of tokenized text: one sentence per non-blank line, tokens separated
    by whitespace, numbered (``# sent_id``) from ``first_id``. FormatError (file, line) for invalid UTF-8, a control character that is
    not whitespace or a line over
    MAX_SENTENCE_BYTES; an input without any token is an error too. O(bytes)."""
    name = _source_name(path_or_file)
    count = 0
    for number, raw in _lines(path_or_file, name):
        text = _decode(raw, name, number)
        _check_controls(text, name, number)
        tokens = text.split()
        if not tokens:
            continue
        count += 1
        s = Sentence.from_columns(tokens, comments=[f"# sent_id = {count + first_id - 1}",
                                                    f"# text = {' '.join(tokens)}"])
        s.line = number
        yield s
    if count == 0:
        raise FormatError(name, 1, "empty input (no tokens)")


def iter_lines(path_or_file) -> Iterator[tuple[str, bool]]:
    """``(line, starts a paragraph)`` of each non-blank line of raw text given one
    sentence per line (``--input lines``); a line starts a paragraph at the start of the
    input and after a blank line. Same checks as :func:`iter_tokenized`."""
    name = _source_name(path_or_file)
    after_blank = True
    seen = False
    for number, raw in _lines(path_or_file, name):
        text = _decode(raw, name, number)
        _check_controls(text, name, number)
        if not text.strip():
            after_blank = True
            continue
        seen = True
        yield text, after_blank
        after_blank = False
    if not seen:
        raise FormatError(name, 1, "empty input (no text)")


def paragraphs_of(text: str) -> list[str]:
    """The paragraphs of a text, as :func:`iter_paragraphs` reads them from a file:
    blocks of lines separated by blank lines (lines of whitespace), each block's lines
    (without their LF or CRLF ends) joined by single line feeds."""
    out: list[str] = []
    block: list[str] = []
    for line in text.split("\n"):
        line = line.rstrip("\r")
        if line.strip():
            block.append(line)
        elif block:
            out.append("\n".join(block))
            block = []
    if block:
        out.append("\n".join(block))
    return out


def iter_paragraphs(path_or_file) -> Iterator[str]:
    """Stream the paragraphs of a raw-text file (blank lines separate them; a line is
    at most MAX_SENTENCE_BYTES, a paragraph too, else FormatError). Same checks as
    :func:`iter_tokenized` (UTF-8, control characters, not empty)."""
    name = _source_name(path_or_file)
    lines: list[str] = []
    size = 0
    seen = False
    for number, raw in _lines(path_or_file, name):
        text = _decode(raw, name, number)
        _check_controls(text, name, number)
        if not text.strip():
            if lines:
                seen = True
                yield "\n".join(lines)
                lines, size = [], 0
            continue
        lines.append(text)
        size += len(raw) + 1
        if size > MAX_SENTENCE_BYTES:
            raise FormatError(name, number, f"paragraph longer than {MAX_SENTENCE_BYTES >> 20} "
                              "MiB without a blank line")
    if lines:
        seen = True
        yield "\n".join(lines)
    if not seen:
        raise FormatError(name, 1, "empty input (no text)")


def _check_controls(text: str, name: str, number: int) -> None:
    bad = _CONTROL.search(text)
    if bad:
        hint = "binary input?" if bad.group() == "\x00" else "no CoNLL-U field may hold one"
        raise FormatError(name, number, f"control character U+{ord(bad.group()):04X} in "
                          f"the line ({hint})")


#: the input formats of ``arboreal parse`` / ``arboreal tag`` (--input)
INPUT_FORMATS = ("conllu", "tokenized", "words", "text", "lines")


def iter_input(path_or_file, input_format: str = "conllu", tokenizer=None) -> Iterator[Sentence]:
    """Stream the sentences of a file to be tagged or parsed: ``conllu`` (HEAD may be
    ``_``; trees are not checked since they are about to be replaced), ``tokenized``
    (:func:`iter_tokenized`, its multiword tokens expanded into words by ``tokenizer``
    when given: :meth:`~arboreal.models.tokenizer.Tokenizer.expand_tokens`), ``words``
    (:func:`iter_tokenized`, each token a word) or ``text`` (raw text, paragraphs cut by ``tokenizer``,
    a :class:`~arboreal.models.tokenizer.Tokenizer`) or ``lines`` (raw text, one
    sentence per line)."""
    if input_format in ("text", "lines"):
        if tokenizer is None:
            raise ValueError("raw text needs a tokenizer")
        if input_format == "lines":
            return tokenizer.tokenize_lines(iter_lines(path_or_file))
        return tokenizer.tokenize(iter_paragraphs(path_or_file))
    if input_format == "conllu":
        from arboreal.io.conllu import iter_conllu

        return iter_conllu(path_or_file, allow_missing_heads=True, check_trees=False)
    if input_format == "tokenized" and tokenizer is not None:
        return tokenizer.expand_tokens(iter_tokenized(path_or_file))
    if input_format in ("tokenized", "words"):
        return iter_tokenized(path_or_file)
    raise ValueError(f"input format must be one of {', '.join(INPUT_FORMATS)}, "
                     f"not {input_format!r}")
