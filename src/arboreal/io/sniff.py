"""What kind of input a file holds, told from its first lines: CoNLL-U, plain text, or
an arboreal model file (what ``--input auto`` of ``arboreal parse`` decides by).

The rule reads lines up to the first one that is neither blank nor a comment: a line
starting with a word ID and a tab (``1\\t``, ``1-2\\t``, ``1.1\\t``) makes the input
CoNLL-U (or CoNLL-X), any other line makes it text. Input of comments and blank lines
only counts as CoNLL-U (the CoNLL-U reader then says it has no sentence). A file
starting with a zip archive's signature is a model file (``arboreal train`` writes
``.npz`` zip archives). Standard input is read once: :func:`sniff` hands back a stream
that replays the lines it looked at, then reads on.
"""
from __future__ import annotations

import io
import os
import re
from typing import BinaryIO

#: the first bytes of a zip archive, as of every arboreal model file
ZIP_MAGIC = b"PK\x03\x04"
#: what a CoNLL-U reader says of a model file
MODEL_FILE = "this is an arboreal model file (a zip archive), not a CoNLL-U treebank"
#: bytes looked at before deciding when every line so far is a comment or blank
SNIFF_BYTES = 1 << 16
_TOKEN_LINE = re.compile(rb"[0-9]+(?:[-.][0-9]+)?\t")
_BOM = b"\xef\xbb\xbf"

CONLLU, TEXT, MODEL = "conllu", "text", "model"


def classify(head: bytes) -> tuple[str, int, bytes | None]:
    """``(kind, line, text)`` of an input starting with ``head`` (complete lines, or all
    of a short input): kind :data:`CONLLU`, :data:`TEXT` or :data:`MODEL`; the 1-based
    number and the bytes of the line that decided (1 and None for a model file, or when
    no line did). O(len(head))."""
    if head.startswith(ZIP_MAGIC):
        return MODEL, 1, None
    if head.startswith(_BOM):   # as the CoNLL-U reader skips it
        head = head[len(_BOM):]
    for number, line in enumerate(head.split(b"\n"), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith(b"#"):
            continue
        return (CONLLU if _TOKEN_LINE.match(line) else TEXT), number, line.rstrip(b"\r")
    return CONLLU, 1, None


def is_token_line(line: bytes | None) -> bool:
    """Whether ``line`` is a whole CoNLL-U word line: a word ID, then ten tab-separated
    columns in all (stricter than :func:`classify`, which calls a line CoNLL-U from its
    ID and first tab, so that a malformed file gets the CoNLL-U reader's message)."""
    return line is not None and bool(_TOKEN_LINE.match(line)) and line.count(b"\t") == 9


def _head(stream, limit: int = SNIFF_BYTES) -> bytes:
    """Whole lines read from ``stream`` up to the first deciding line (or ``limit``
    bytes, or the end)."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        line = stream.readline(limit - size)
        if isinstance(line, str):
            line = line.encode("utf-8")
        if not line:
            break
        chunks.append(line)
        size += len(line)
        if len(chunks) == 1:
            if line.startswith(ZIP_MAGIC):
                break
            if line.startswith(_BOM):
                line = line[len(_BOM):]
        stripped = line.strip()
        if stripped and not stripped.startswith(b"#"):
            break
    return b"".join(chunks)


class _Replay(io.RawIOBase):
    """The bytes already read from a stream, then the rest of the stream."""

    def __init__(self, head: bytes, rest, name: str, own: bool = False):
        self._head = head
        self._rest = rest
        self._own = own   # the stream was opened here: closed with this one
        self.name = name

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if self._own and not self.closed:
            self._rest.close()
        super().close()

    def readinto(self, buffer) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        read = getattr(self._rest, "read1", self._rest.read)
        data = read(len(buffer))
        if isinstance(data, str):
            data = data.encode("utf-8")
        buffer[:len(data)] = data
        return len(data)


def sniff(source, name: str | None = None) -> tuple[str, int, bytes | None, "str | BinaryIO"]:
    """``(kind, line, text, source)`` for a path, ``"-"`` (standard input) or an open
    binary file: see :func:`classify`. A regular file is opened, looked at and closed
    (its path is handed back); anything else (standard input, a pipe such as a shell's
    ``<(command)``, an open file) can be read once only, so a stream replaying what was
    looked at, then reading on, is handed back in its place. ``name``: the stream's
    name in error messages."""
    from arboreal.io.conllu import _source_name, open_binary

    if isinstance(source, (str, os.PathLike)) and str(source) != "-" \
            and os.path.isfile(source):
        with open(source, "rb") as f:
            head = _head(f)
        return (*_classify_text(head, name or _source_name(source)), source)
    stream, own = open_binary(source)
    head = _head(stream)
    kind = _classify_text(head, name or _source_name(source))
    replay = io.BufferedReader(_Replay(head, stream, name or _source_name(source), own))
    return (*kind, replay)


def _classify_text(head: bytes, name: str) -> tuple[str, int, bytes | None]:
    """:func:`classify`, with a NUL byte in an input that is not a model file a
    FormatError first (binary input: a device such as ``/dev/zero`` is not read on)."""
    kind = classify(head)
    if kind[0] != MODEL and b"\0" in head:
        from arboreal.errors import FormatError

        at = head.index(b"\0")
        raise FormatError(name, head.count(b"\n", 0, at) + 1,
                          "control character U+0000 in the line (binary input?)")
    return kind
