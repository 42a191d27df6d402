"""Reading and writing CoNLL-U and CoNLL-X treebanks.

Both formats share one layout: one word per line, 10 tab-separated columns,
sentences separated by a blank line. The columns land in :class:`Sentence`
arrays as follows (CoNLL-X names in brackets)::

    1 ID              -> position in the arrays (must be 1..n in order)
    2 FORM            -> forms
    3 LEMMA           -> lemmas
    4 UPOS  [CPOSTAG] -> upos
    5 XPOS  [POSTAG]  -> xpos
    6 FEATS           -> feats
    7 HEAD            -> heads (int32; "_" -> -1 with allow_missing_heads)
    8 DEPREL          -> deprels
    9 DEPS  [PHEAD]   -> deps
   10 MISC  [PDEPREL] -> misc

CoNLL-U extras are kept and written back unchanged: comment lines
(``Sentence.comments``), multiword-token ranges (``3-4``) and empty nodes
(``8.1``) (``Sentence.extra``, not syntactic words). The default
``format="conllu"`` also reads CoNLL-X files (same columns); ``format="conllx"``
is stricter and rejects the CoNLL-U-only lines (comments, ranges, empty nodes).

Round trip: ``write_conllu(read_conllu(f))`` reproduces ``f`` byte for byte when
``f`` is laid out canonically: UTF-8 without byte-order mark, LF line ends,
every sentence (including the last) followed by exactly one blank line, HEAD
without leading zeros. Otherwise the output is the canonical form of the same
content (CRLF read as LF, a missing final blank line added, runs of blank lines
collapsed, a leading BOM dropped).

Validation: every problem is reported as a :class:`~arboreal.errors.FormatError`
naming the file, the 1-based line and the problem. Structural problems (UTF-8,
column count, IDs, HEAD syntax and range, multiword ranges, misplaced comments)
are checked first over the whole file and the earliest is reported; then tree
problems (word that is its own head, no word attached to the root, head cycle)
in one compiled pass over the whole corpus, reporting the earliest sentence.

Speed: compiled passes over the raw bytes classify the lines, parse ID and
HEAD, and find the distinct values of the string fields by hashing; each
distinct string is decoded once (which also checks UTF-8) and shared by all
its occurrences. Every sentence's arrays are slices (views) of corpus-level
arrays, so there is no Python loop over words or lines.
"""
from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Iterable, Iterator
from itertools import islice
from operator import attrgetter
from typing import IO, Union

import numpy as np

from arboreal._atomic import atomic_write
from arboreal.errors import FormatError
from arboreal.io.sentence import ROOT_TOKEN, Sentence
from arboreal.io.sniff import MODEL_FILE, ZIP_MAGIC

PathOrFile = Union[str, os.PathLike, IO[str], IO[bytes]]

#: Sentence attributes of the string columns 2-6 and 8-10, in file order
STRING_COLUMNS = ("forms", "lemmas", "upos", "xpos", "feats", "deprels", "deps", "misc")
_FIELD_NAMES = ("ID", "FORM", "LEMMA", "UPOS", "XPOS", "FEATS", "HEAD", "DEPREL", "DEPS", "MISC")
_COLUMN_OF_FIELD = (None, "forms", "lemmas", "upos", "xpos", "feats", None, "deprels", "deps", "misc")

# line kinds found by the byte scanner
_BLANK, _COMMENT, _WORD, _RANGE, _EMPTY, _BADID = 0, 1, 2, 3, 4, 5
# HEAD codes besides values >= 0
_HEAD_MISSING, _HEAD_BAD, _HEAD_NONE = -2, -3, -4
_MAX_DIGITS = 9

_CHUNK_BYTES = 8 << 20
#: the longest sentence (bytes between two blank lines) the streaming reader buffers; a
#: 5,000-word sentence is well under 1 MiB, so only a broken file comes near this
MAX_SENTENCE_BYTES = 64 << 20
#: sentences formatted and written at a time by :func:`write_conllu`
_WRITE_BATCH = 4096


# ----------------------------------------------------------------------------
# parsing


def _decode(data: bytes, path: str, first_line: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + data.count(b"\n", 0, exc.start)
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        byte = data[exc.start : exc.start + 1].hex()
        raise FormatError(path, line, f"invalid UTF-8 (byte 0x{byte} at byte {column} of the line)") from None


def _field(line: str, k: int) -> str:
    parts = line.split("\t")
    return parts[k] if k < len(parts) else ""


_CONTROL = np.zeros(256, bool)
_CONTROL[:32] = True
_CONTROL[[9, 10]] = False      # TAB separates fields, LF ends lines
_CONTROL[127] = True


def _check_control_bytes(buf: np.ndarray, data: bytes, path: str, first_line: int) -> None:
    """FormatError at the first ASCII control character other than TAB and LF (a NUL
    in a FORM, a carriage return not followed by LF, ...): no CoNLL-U field holds one,
    and a bare CR most often means a file with classic-Mac line endings. O(bytes)."""
    bad = _CONTROL[buf]
    if not bad.any():
        return
    at = int(np.argmax(bad))
    line = first_line + data.count(b"\n", 0, at)
    byte = data[at]
    if byte == 13:
        problem = ("carriage return (CR) not followed by a line feed: lines must end in LF "
                   "(or CRLF); a file with CR-only line endings must be converted")
    else:
        problem = f"control character U+{byte:04X} in the line (not allowed in any CoNLL-U field)"
    raise FormatError(path, line, problem)


def _parse_chunk(
    data: bytes,
    path: str,
    first_line: int,
    allow_missing_heads: bool,
    fmt: str,
    check_trees: bool = True,
) -> list[Sentence]:
    """Parse ``data`` (whole sentences) whose first line is line ``first_line``."""
    from arboreal.io._conllu_kernels import (_check_trees, _gather_lines, _intern_fields,
                                             _scan_lines)

    if data.startswith(b"\xef\xbb\xbf") and first_line == 1:
        data = data[3:]
    if data.startswith(ZIP_MAGIC) and first_line == 1:
        raise FormatError(path, None, MODEL_FILE)
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")
    buf = np.frombuffer(data, dtype=np.uint8)
    _check_control_bytes(buf, data, path, first_line)
    nl = np.flatnonzero(buf == 10)
    starts = np.empty(len(nl) + 1, np.int64)
    starts[0] = 0
    starts[1:] = nl + 1
    ends = np.empty(len(nl) + 1, np.int64)
    ends[:-1] = nl
    ends[-1] = len(buf)
    nlines = len(starts)
    kind = np.empty(nlines, np.int8)
    tabs = np.empty(nlines, np.int32)
    id1 = np.empty(nlines, np.int64)
    id2 = np.empty(nlines, np.int64)
    head = np.empty(nlines, np.int64)
    empty = np.zeros(nlines, np.int64)
    _scan_lines(buf, starts, ends, kind, tabs, id1, id2, head, empty)

    class _Lines:  # the text of a line, decoded on demand (error messages only)
        def __getitem__(self, i: int) -> str:
            return data[starts[i] : ends[i]].decode("utf-8", errors="replace")

    lines = _Lines()

    def utf8_error() -> None:
        _decode(data, path, first_line)  # raises FormatError at the first bad byte

    errors: list[tuple[int, int, str]] = []  # (0-based line, check order, problem)

    def err(i: int, problem: str) -> None:
        errors.append((int(i), len(errors), problem))

    # --- sentences = runs of non-blank lines
    nonblank = kind != _BLANK
    prev_nonblank = np.zeros(nlines, bool)
    prev_nonblank[1:] = nonblank[:-1]
    run_start = nonblank & ~prev_nonblank
    run_of_line = np.cumsum(run_start) - 1  # valid on non-blank lines
    first_line_of_run = np.flatnonzero(run_start)
    S = len(first_line_of_run)

    is_comment = kind == _COMMENT
    is_token = nonblank & ~is_comment
    is_word = kind == _WORD
    # column count (first: on one line it explains the other problems)
    bad_cols = is_token & (tabs != 9)
    if bad_cols.any():
        i = int(np.argmax(bad_cols))
        if lines[i].strip() == "":
            err(i, "line contains only whitespace (a sentence break must be an empty line)")
        else:
            err(i, f"wrong number of columns: {tabs[i] + 1} (expected 10 tab-separated columns)")

    bad_empty = is_token & (empty > 0) & ~bad_cols
    if bad_empty.any():
        i = int(np.argmax(bad_empty))
        name = _FIELD_NAMES[empty[i] - 1]
        err(i, f"empty field in column {empty[i]} ({name}); an unspecified value is written '_'")

    # a comment must come before the words of its sentence
    prev_kind = np.full(nlines, _BLANK, np.int8)
    prev_kind[1:] = kind[:-1]
    bad_comment = is_comment & ~run_start & (prev_kind != _COMMENT)
    if bad_comment.any():
        err(np.argmax(bad_comment), "comment line inside a sentence (comments must come before its words)")
    if fmt == "conllx" and is_comment.any():
        err(np.argmax(is_comment), "comment line in a CoNLL-X file (use format='conllu')")

    words_per_run = np.bincount(run_of_line[is_word], minlength=S) if S else np.zeros(0, np.int64)
    if S and (words_per_run == 0).any():
        s = int(np.argmax(words_per_run == 0))
        lines_of_run = np.flatnonzero(nonblank & (run_of_line == s))
        if not is_token[lines_of_run].any():
            err(lines_of_run[-1], "comment lines not followed by a sentence")
        else:
            err(lines_of_run[is_token[lines_of_run]][0], "sentence without words (only multiword or empty-node lines)")

    # --- IDs
    bad_id = kind == _BADID
    if bad_id.any():
        i = int(np.argmax(bad_id))
        err(i, f"invalid ID {_field(lines[i], 0)!r} (expected an integer, a range like 3-4 or an empty node like 8.1)")
    if fmt == "conllx":
        cu = (kind == _RANGE) | (kind == _EMPTY)
        if cu.any():
            i = int(np.argmax(cu))
            err(i, f"ID {_field(lines[i], 0)!r} is not an integer (not allowed in CoNLL-X; use format='conllu')")

    word_lines = np.flatnonzero(is_word)
    N = len(word_lines)
    sent_of_word = run_of_line[word_lines]
    word_offsets = np.zeros(S + 1, np.int64)
    np.cumsum(words_per_run, out=word_offsets[1:])
    expected = np.arange(N, dtype=np.int64) - word_offsets[sent_of_word] + 1
    bad = id1[word_lines] != expected
    if bad.any():
        w = int(np.argmax(bad))
        err(word_lines[w], f"ID {_field(lines[word_lines[w]], 0)!r} out of order: expected {expected[w]} "
            "(word IDs must be 1..n in order)")

    # --- multiword ranges and empty nodes (few: a Python loop is fine)
    words_before = np.cumsum(is_word) - is_word  # words before each line, corpus-wide
    extra_lines = np.flatnonzero((kind == _RANGE) | (kind == _EMPTY))
    extra_pos = np.zeros(0, np.int64)
    if len(extra_lines):
        ex_sent = run_of_line[extra_lines]
        extra_pos = words_before[extra_lines] - word_offsets[ex_sent]  # word k it follows
        n_of = words_per_run[ex_sent]
        range_end = 0          # last word covered by the sentence's previous range
        range_sent = -1
        for j, i in enumerate(extra_lines.tolist()):
            k, a, b, n = int(extra_pos[j]), int(id1[i]), int(id2[i]), int(n_of[j])
            if ex_sent[j] != range_sent:
                range_end, range_sent = 0, int(ex_sent[j])
            if kind[i] == _RANGE:
                if not (a == k + 1 and a < b <= n) or a <= range_end:
                    what = f"multiword token {a}-{b}"
                    if b <= a:
                        err(i, f"{what}: range end must be greater than its start")
                    elif b > n:
                        err(i, f"{what} covers words beyond the end of the sentence ({n} words)")
                    elif a <= range_end:
                        err(i, f"{what} overlaps the previous multiword token (which ends at word {range_end})")
                    else:
                        err(i, f"{what} must stand right before word {a} (it follows word {k})")
                    break
                range_end = b
            elif a != k:
                err(i, f"empty node {a}.{b} must follow word {a} (it follows word {k})")
                break

    # --- HEAD
    wh = head[word_lines]
    badh = (wh == _HEAD_BAD) | (wh == _HEAD_NONE)
    if not allow_missing_heads:
        badh |= wh == _HEAD_MISSING
    if badh.any():
        w = int(np.argmax(badh))
        i = word_lines[w]
        if wh[w] == _HEAD_MISSING:
            err(i, "HEAD is '_': a tree is needed here, and this word has no head (unparsed input)")
        else:
            err(i, f"HEAD {_field(lines[i], 6)!r} is not a non-negative integer")

    if errors:
        try:
            utf8_error()
        except FormatError as exc:
            errors.append((exc.line - first_line, -1, exc.problem))
        i, _, problem = min(errors)
        raise FormatError(path, first_line + i, problem)
    if S == 0:
        return []

    # --- corpus-level arrays with a root entry before every sentence
    total = N + S
    root_pos = word_offsets[:-1] + np.arange(S)
    word_pos = np.arange(N) + sent_of_word + 1
    heads = np.full(total, -1, np.int32)
    hv = wh.copy()
    hv[hv < 0] = -1
    heads[word_pos] = hv
    bounds = np.empty(S + 1, np.int64)
    bounds[:-1] = root_pos
    bounds[-1] = total

    code, s, m, h = _check_trees(heads, bounds) if check_trees else (0, 0, 0, 0)
    if code:
        a = bounds[s]
        line_of = lambda m: first_line + int(word_lines[word_offsets[s] + m - 1])  # noqa: E731
        n = int(words_per_run[s])
        if code == 1:
            raise FormatError(path, line_of(m), f"HEAD {h} is out of range (the sentence has {n} words)")
        if code == 2:
            raise FormatError(path, line_of(m), f"word {m} is its own head")
        if code == 3:
            raise FormatError(path, line_of(1), "no word is attached to the root (HEAD 0) in this sentence")
        cycle = [m]
        x = int(heads[a + m])
        while x != m:
            cycle.append(x)
            x = int(heads[a + x])
        first = min(cycle)
        k = cycle.index(first)
        cycle = cycle[k:] + cycle[:k]
        forms = [_field(lines[word_lines[word_offsets[s] + c - 1]], 1) for c in cycle]
        desc = " -> ".join(f"{c} {f!r}" for c, f in zip(cycle, forms))
        raise FormatError(path, line_of(first), f"head cycle: {desc} -> {first}")

    # --- string columns: the distinct values of the 8 string fields are found by
    # hashing bytes (compiled), decoded once (this also checks UTF-8) and shared:
    # equal strings are one Python object. Each column is a strided view of one
    # (rows, 8) object table.
    row_line = np.full(total, -1, np.int64)
    row_line[word_pos] = word_lines
    codes, rep_start, rep_end = _intern_fields(buf, starts, ends, row_line)
    size = int((rep_end - rep_start).sum()) + len(rep_start)
    stream = _gather_lines(buf, rep_start, rep_end, np.arange(len(rep_start)), size).tobytes()
    try:
        distinct = stream.decode("utf-8").split("\n") if len(rep_start) else []
    except UnicodeDecodeError:
        utf8_error()
        raise
    distinct.append(ROOT_TOKEN)  # code -1 on root rows picks the last entry
    table = np.array(distinct, dtype=object)[codes]
    del distinct, stream, codes
    cols = {name: table[:, k] for k, name in enumerate(STRING_COLUMNS)}

    kept = np.flatnonzero(is_comment | (kind == _RANGE) | (kind == _EMPTY))
    size = int((ends[kept] - starts[kept]).sum()) + len(kept)
    try:
        kept_text = _gather_lines(buf, starts, ends, kept, size).tobytes().decode("utf-8").split("\n")
    except UnicodeDecodeError:
        utf8_error()
        raise
    text_of = dict(zip(kept.tolist(), kept_text))
    comments: list[list[str]] = [[] for _ in range(S)]
    for i in np.flatnonzero(is_comment).tolist():
        comments[run_of_line[i]].append(text_of[i])
    extras: list[list[tuple[int, str]]] = [[] for _ in range(S)]
    for j, i in enumerate(extra_lines.tolist()):
        extras[run_of_line[i]].append((int(extra_pos[j]), text_of[i]))

    F, L, U, X, Fe, D, De, Mi = (cols[c] for c in STRING_COLUMNS)
    out = []
    b = bounds.tolist()
    src_lines = (first_line + first_line_of_run).tolist()
    for s in range(S):
        lo, hi = b[s], b[s + 1]
        out.append(
            Sentence(
                forms=F[lo:hi], lemmas=L[lo:hi], upos=U[lo:hi], xpos=X[lo:hi], feats=Fe[lo:hi],
                heads=heads[lo:hi], deprels=D[lo:hi], deps=De[lo:hi], misc=Mi[lo:hi],
                comments=comments[s], extra=extras[s], line=src_lines[s],
            )
        )
    return out


# ----------------------------------------------------------------------------
# public API


def _source_name(source) -> str:
    if isinstance(source, (str, os.PathLike)):
        return "<stdin>" if str(source) == "-" else str(source)
    return str(getattr(source, "name", "<stream>"))


def open_binary(path_or_file) -> tuple:
    """(binary stream, whether the caller must close it) for a path, ``"-"`` (standard
    input) or an open file."""
    if isinstance(path_or_file, (str, os.PathLike)):
        if str(path_or_file) == "-":
            return getattr(sys.stdin, "buffer", sys.stdin), False
        return open(path_or_file, "rb"), True
    return path_or_file, False


def _check_format(fmt: str) -> None:
    if fmt not in ("conllu", "conllx"):
        raise ValueError(f"format must be 'conllu' or 'conllx', not {fmt!r}")


def _read_bytes(f) -> bytes:
    data = f.read()
    if isinstance(data, str):
        return data.encode("utf-8")
    return data


def read_conllu(
    path_or_file: PathOrFile,
    allow_missing_heads: bool = False,
    format: str = "conllu",
    check_trees: bool = True,
) -> list[Sentence]:
    """Read a CoNLL-U (or CoNLL-X) file into a list of sentences.

    ``path_or_file``: a path, ``"-"`` for standard input, or an open file
    (binary or text). ``allow_missing_heads``: accept HEAD ``_`` (unparsed
    input); such words get head -1 and the tree checks skip them.
    ``format``: ``"conllu"`` (reads CoNLL-X too) or ``"conllx"`` (rejects
    comments, ranges and empty nodes). ``check_trees=False`` skips the tree
    checks (HEAD in range, no self-loop or cycle, a word on the root): for input
    whose trees are about to be replaced (parsing); HEAD must still be an integer or ``_``.

    Raises :class:`FormatError` (file, line, problem) on malformed input,
    including an empty file. Time O(bytes); for the measured speed see
    docs/benchmarks.md (benchmarks/read_speed.py).
    """
    _check_format(format)
    name = _source_name(path_or_file)
    if isinstance(path_or_file, (str, os.PathLike)):
        if str(path_or_file) == "-":
            data = _read_bytes(getattr(sys.stdin, "buffer", sys.stdin))
        else:
            with open(path_or_file, "rb") as f:
                data = f.read()
    else:
        data = _read_bytes(path_or_file)
    sentences = _parse_chunk(data, name, 1, allow_missing_heads, format, check_trees)
    if not sentences:
        raise FormatError(name, 1, "empty file (no sentences)")
    return sentences


def iter_conllu(
    path_or_file: PathOrFile,
    allow_missing_heads: bool = False,
    format: str = "conllu",
    chunk_bytes: int = _CHUNK_BYTES,
    check_trees: bool = True,
) -> Iterator[Sentence]:
    """Stream the sentences of a CoNLL-U file, reading ``chunk_bytes`` at a time.

    Same arguments, checks and errors as :func:`read_conllu`; memory stays
    proportional to ``chunk_bytes`` plus the longest sentence, and a sentence (the
    bytes between two blank lines) longer than :data:`MAX_SENTENCE_BYTES` is a
    FormatError rather than an unbounded buffer.
    """
    _check_format(format)
    name = _source_name(path_or_file)

    def overflow(pending: bytes, line: int) -> Exception:
        # an error inside the over-long block is the better message, if there is one
        _parse_chunk(pending[:pending.rfind(b"\n") + 1] or pending[:1],
                     name, line, allow_missing_heads, format, check_trees)
        return FormatError(name, line, f"no blank line in the next "
                           f"{MAX_SENTENCE_BYTES >> 20} MiB: sentences must be "
                           "separated by an empty line")

    seen = False
    for data, line in iter_blocks(path_or_file, chunk_bytes, blank_lines=True,
                                  overflow=overflow):
        for s in _parse_chunk(data, name, line, allow_missing_heads, format, check_trees):
            seen = True
            yield s
    if not seen:
        raise FormatError(name, 1, "empty file (no sentences)")


#: a line end after sentence-final punctuation (and closing quotes or brackets),
#: searched in reversed bytes
_LINE_AFTER_SENTENCE = re.compile(rb"\n[\s\"')\]\xbb\x9d\x80\xe2]*[.!?]")


def iter_blocks(path_or_file: PathOrFile, chunk_bytes: int = _CHUNK_BYTES,
                blank_lines: bool = True, overflow=None,
                line_ends_after: int | None = None,
                drop_bom: bool = False) -> Iterator[tuple[bytes, int]]:
    """``(data, first_line)``: a byte stream in blocks of about ``chunk_bytes`` that end
    after a blank line (``blank_lines``: whole sentences of CoNLL-U, whole paragraphs of
    text) or after a line end (one sentence per line), with the 1-based line number each
    block starts at. With ``line_ends_after`` (raw text), a block that has reached that
    many bytes without a blank line ends at a line end (the last one after
    sentence-final punctuation, if any), so that text without blank lines streams in
    bounded blocks; ``drop_bom``: a UTF-8 byte order mark at the start is dropped (text;
    the CoNLL-U reader drops it itself). A block longer than :data:`MAX_SENTENCE_BYTES` without such an end
    raises ``overflow(pending, line)`` (default: a FormatError). O(bytes)."""
    name = _source_name(path_or_file)
    f, own = open_binary(path_or_file)
    try:
        pending = b""
        line = 1
        eof = False
        first = True
        while not eof:
            block = f.read(chunk_bytes)
            if isinstance(block, str):
                block = block.encode("utf-8")
            if first and block:
                first = False
                if drop_bom and block.startswith(b"\xef\xbb\xbf"):
                    block = block[3:]     # a UTF-8 byte order mark is no part of the text
                    if not block:
                        continue
            if not block:
                eof = True
                data, pending = pending, b""
            elif b"\0" in block:     # binary input (e.g. /dev/zero): said before reading on
                at = (pending + block).index(b"\0")
                raise FormatError(name, line + (pending + block).count(b"\n", 0, at),
                                  "control character U+0000 in the line (binary input?)")
            else:
                # the search starts where a separator could first end, so a long block
                # arriving in many reads is not searched over and over
                search_from = max(len(pending) - 2, 0)
                pending += block
                if blank_lines:   # LF or CRLF files
                    cut = max(pending.rfind(b"\n\n", search_from) + 2,
                              pending.rfind(b"\n\r\n", search_from) + 3)
                    found = cut >= 3
                else:
                    cut = pending.rfind(b"\n", search_from) + 1
                    found = cut >= 1
                if not found and line_ends_after is not None \
                        and len(pending) >= line_ends_after:
                    # text without blank lines: a block ends at a line end, after
                    # sentence-final punctuation where there is one
                    ends = _LINE_AFTER_SENTENCE.search(pending[::-1])
                    cut = len(pending) - ends.start() if ends is not None else \
                        pending.rfind(b"\n") + 1
                    found = cut >= 1
                if not found:
                    if len(pending) > MAX_SENTENCE_BYTES:
                        if overflow is not None:
                            raise overflow(pending, line)
                        raise FormatError(name, line, f"no {'blank line' if blank_lines else 'line end'} "
                                          f"in the next {MAX_SENTENCE_BYTES >> 20} MiB")
                    continue
                data, pending = pending[:cut], pending[cut:]
            if data:
                yield data, line
                line += data.count(b"\n")
    finally:
        if own:
            f.close()


_NUM_STR = np.array(["_"] + [str(i) for i in range(1024)], dtype=object)


def _int_strings(values: np.ndarray) -> np.ndarray:
    """Object array of str(v) for ints v >= 0 and "_" for v < 0 (a table lookup)."""
    global _NUM_STR
    values = np.asarray(values, dtype=np.int64)
    top = int(values.max(initial=0))
    if top + 1 >= len(_NUM_STR):
        _NUM_STR = np.array(["_"] + [str(i) for i in range(2 * top + 2)], dtype=object)
    return _NUM_STR[np.maximum(values, -1) + 1]


def batched(items: Iterable, size: int) -> Iterator[list]:
    """Consecutive lists of ``size`` items (the last one shorter) from any iterable,
    consumed lazily: how a stream of sentences is parsed and written a batch at a time."""
    if size < 1:
        raise ValueError("batch size must be at least 1")
    it = iter(items)
    while True:
        batch = list(islice(it, size))
        if not batch:
            return
        yield batch


def format_conllu(sentences: Iterable[Sentence]) -> str:
    """The CoNLL-U text of ``sentences`` (what :func:`write_conllu` writes).

    Word lines are built column-wise over the whole corpus, then every line
    (comments, words, ``extra`` lines, blank separators) is placed by one
    lexsort on (sentence, slot, order of creation). O(lines log lines).
    """
    sentences = list(sentences)
    S = len(sentences)
    if S == 0:
        return ""
    n = np.fromiter(map(len, sentences), np.int64, S)
    N = int(n.sum())
    sent_of_word = np.repeat(np.arange(S), n)
    k_of_word = np.arange(N) - np.repeat(np.cumsum(n) - n, n) + 1
    is_root = np.zeros(N + S, bool)
    is_root[np.cumsum(n + 1) - n - 1] = True
    cols = [_int_strings(k_of_word)]
    for name in _COLUMN_OF_FIELD[1:]:
        if name is None:
            heads = np.concatenate([s.heads for s in sentences])
            cols.append(_int_strings(heads[~is_root]))
        else:
            arrays = list(map(attrgetter(name), sentences))
            cols.append(np.concatenate(arrays).astype(object, copy=False)[~is_root])
    try:
        words = list(map("\t".join, zip(*cols)))
    except TypeError:  # a column holds something other than str
        words = list(map("\t".join, zip(*(c.astype(str) for c in cols))))

    comments = [c for s in sentences for c in s.comments]
    n_comments = np.fromiter((len(s.comments) for s in sentences), np.int64, S)
    extra = [e for s in sentences for e in s.extra]
    n_extra = np.fromiter((len(s.extra) for s in sentences), np.int64, S)
    extra_k = np.fromiter((min(max(int(k), 0), int(m)) for (k, _), m in
                           zip(extra, np.repeat(n, n_extra))), np.int64, len(extra))
    strings = np.empty(len(comments) + N + len(extra) + S, dtype=object)
    c1 = len(comments)
    c2 = c1 + N
    c3 = c2 + len(extra)
    strings[:c1] = comments
    strings[c1:c2] = words
    strings[c2:c3] = [line for _, line in extra]
    strings[c3:] = ""
    sent = np.concatenate([np.repeat(np.arange(S), n_comments), sent_of_word,
                           np.repeat(np.arange(S), n_extra), np.arange(S)])
    slot = np.concatenate([np.full(c1, -1), 2 * k_of_word, 2 * extra_k + 1, 2 * n + 2])
    order = np.lexsort((np.arange(len(strings)), slot, sent))
    return "\n".join(strings[order].tolist()) + "\n"


def write_conllu(sentences: Iterable[Sentence], path_or_file: PathOrFile) -> None:
    """Write ``sentences`` as CoNLL-U (UTF-8, LF, a blank line after each sentence).

    ``path_or_file``: a path (written atomically: a temporary file in the same
    folder, then renamed over the target), ``"-"`` for standard output, or an
    open file (binary or text). Heads of -1 are written as ``_``.

    ``sentences`` may be any iterable, a generator included: it is formatted and
    written :data:`_WRITE_BATCH` sentences at a time, so streaming a corpus through
    (:func:`iter_conllu`, :func:`arboreal.models.parse_iter`) needs memory for one
    batch only. If the iterable raises, a path is left as it was (the temporary file
    is removed); standard output or an open file keeps the batches already written.
    """
    write_text((format_conllu(batch) for batch in batched(sentences, _WRITE_BATCH)),
               path_or_file)


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``, call after call: a pipe may take part of a write,
    and a reader gone after a part is then BrokenPipeError on the next call (a buffered
    file's write can end silently after the part)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_text(texts: Iterable[str], path_or_file: PathOrFile) -> None:
    """Write the strings of ``texts`` (any iterable, consumed lazily) as UTF-8 to a path
    (atomically), ``"-"`` (standard output, flushed after each string) or an open file:
    how every output format of arboreal is written (see :func:`write_conllu`)."""
    if isinstance(path_or_file, (str, os.PathLike)):
        if str(path_or_file) == "-":
            sys.stdout.flush()
            try:
                fd = sys.stdout.fileno()
            except (AttributeError, ValueError, io.UnsupportedOperation):
                fd = None          # a stand-in stdout (a test's capture): no descriptor
            for text in texts:
                if fd is not None:
                    _write_all(fd, text.encode("utf-8"))
                else:
                    sys.stdout.write(text)
            return

        def write(f) -> None:
            for text in texts:
                f.write(text.encode("utf-8"))

        atomic_write(path_or_file, write)
        return
    for text in texts:
        if isinstance(path_or_file, io.TextIOBase):
            path_or_file.write(text)
        else:
            try:
                path_or_file.write(text.encode("utf-8"))
            except TypeError:
                path_or_file.write(text)


# ----------------------------------------------------------------------------
# integer-coded views


def encode_column(
    sentences: list[Sentence],
    column: str,
    vocab: dict[str, int] | None = None,
    unknown: int = -1,
    universal: bool = False,
) -> tuple[list[np.ndarray], dict[str, int]]:
    """Integer codes of one string column for a whole corpus.

    ``column``: a Sentence attribute (``"forms"``, ``"upos"``, ``"deprels"`` ...).
    ``vocab``: str -> code; when None, one is built from the data (sorted
    strings, codes 0..V-1; the root entry ``ROOT_TOKEN`` is a string like any
    other). Strings missing from a given ``vocab`` get ``unknown``.
    ``universal``: map each string to its part before the first ':' first
    (``"nmod:poss"`` -> ``"nmod"``), the CoNLL 2018 universal relation.

    Returns (codes, vocab): ``codes[i]`` is an int32 array of shape (n_i + 1,)
    aligned with ``sentences[i]`` (index 0 the root); all are views of one
    corpus-level array. Time O(words) in C (a dict lookup per word through
    ``map``) plus a Python loop over the distinct strings only.
    """
    arrays = [np.asarray(getattr(s, column), dtype=object) for s in sentences]
    lengths = np.fromiter((len(a) for a in arrays), np.int64, len(arrays))
    flat = np.concatenate(arrays) if arrays else np.zeros(0, dtype=object)
    distinct = set(flat.tolist())
    if universal:
        to_univ = {x: x.split(":", 1)[0] for x in distinct}
    if vocab is None:
        keys = sorted(set(to_univ.values())) if universal else sorted(distinct)
        vocab = {x: i for i, x in enumerate(keys)}
    if universal:
        lookup = {x: vocab.get(to_univ[x], unknown) for x in distinct}
    else:
        lookup = {x: vocab.get(x, unknown) for x in distinct}
    codes = np.fromiter(map(lookup.__getitem__, flat.tolist()), np.int32, len(flat))
    return np.split(codes, np.cumsum(lengths)[:-1]), vocab
