"""Conversion between :class:`Sentence` and the ``conllu`` package's ``TokenList``.

Needs the optional package ``conllu`` (``pip install 'arboreal[conllu]'``), imported
on first use: ``import arboreal.io.adapters`` works without it, and each function then
raises :class:`~arboreal.errors.MissingExtraError` (an ArborealError and an
ImportError) naming the install command.

A ``TokenList`` holds one token (a ``conllu.models.Token``, a dict) per CoNLL-U line:
the syntactic words (integer ``id`` 1..n) and, in place, the multiword-token ranges
(``id == (3, "-", 4)``) and empty nodes (``id == (8, ".", 1)``), which arboreal keeps
in ``Sentence.extra``. The values are those ``conllu.parse`` gives::

    id      int (words) or tuple (ranges, empty nodes)
    form, lemma, upos, deprel     str, "_" kept as "_"
    xpos    str, or None for "_"
    feats, misc   dict {name: value} ("A=B|C" -> {"A": "B", "C": ""}; a value "_"
                  -> None), or None for "_"
    head    int, or None for "_" (an unknown head, -1 in arboreal)
    deps    list of (deprel, head id) pairs, or None for "_"

A FEATS, MISC or DEPS value that such a dict or list cannot reproduce character for
character (a repeated name, an empty part, an irregular DEPS) is kept as its string,
which the ``conllu`` serializer writes unchanged, so no column is ever altered.
(Unlike ``conllu.parse``, a value containing "=" -- ``Gloss=a=b`` -- keeps all of it.)

Comments go to ``TokenList.metadata`` as ``conllu.parse`` puts them: ``# key = value``
-> ``metadata[key] = value``, ``# newpar`` -> ``metadata["newpar"] = None``. Comments
without ``=`` (``# orig_file_sentence 001#1``) are kept too, as ``{key: None}``
(``conllu.parse`` drops them unless given ``metadata_parsers=KEEP_ALL_COMMENTS``).
Back in :func:`from_tokenlist`, each entry becomes ``# key = value`` (``# key`` for
None). When the metadata cannot spell the comments exactly (a repeated key,
non-canonical spacing), :func:`to_tokenlist` also stores the original lines in the
token list's attribute ``arboreal_comments`` (with a copy of the metadata);
:func:`from_tokenlist` uses them while the metadata is unchanged, so
``from_tokenlist(to_tokenlist(s))`` reproduces ``s``'s CoNLL-U byte for byte.

Round trips: ``format_conllu([from_tokenlist(t) for t in conllu.parse(text,
metadata_parsers=KEEP_ALL_COMMENTS)])`` equals ``format_conllu(read_conllu(text))``
for any file arboreal reads whose comments are ``# key = value`` or ``# key``, whose
fields hold no run of two spaces (``conllu.parse`` splits fields there too) and whose
FEATS and MISC values hold no ``=`` or empty part (``conllu.parse`` reads
``UnidicInfo=,=,x`` as ``{"UnidicInfo": ","}`` and ``Translit=|bA`` as two entries;
:func:`to_tokenlist` keeps such values exactly, as strings where no dict spells them).
Checked on the UD English-EWT, Spanish-AnCora and Czech-CAC dev sets (ranges and
empty nodes included) by ``tests/test_adapters.py``.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from arboreal.errors import ArborealError
from arboreal.errors import require
from arboreal.io.sentence import Sentence

if TYPE_CHECKING:  # pragma: no cover
    from conllu.models import TokenList

__all__ = ["KEEP_ALL_COMMENTS", "to_tokenlist", "to_tokenlists", "from_tokenlist",
           "from_tokenlists"]

#: the ten CoNLL-U fields, as the ``conllu`` package names a token's keys
FIELDS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel", "deps", "misc")
#: Sentence attributes of the string fields (all but ID and HEAD)
_ATTR = {"form": "forms", "lemma": "lemmas", "upos": "upos", "xpos": "xpos", "feats": "feats",
         "deprel": "deprels", "deps": "deps", "misc": "misc"}

#: ``metadata_parsers`` for ``conllu.parse`` that keeps every comment line, those
#: without ``=`` included (as ``{key: None}``), as :func:`to_tokenlist` does
KEEP_ALL_COMMENTS: dict[str, Callable[[str, Any], Any]] = {
    "__fallback__": lambda key, value: (key, value)}


class _Conllu:
    """The parts of the ``conllu`` package used here, imported on first use."""

    def __init__(self) -> None:
        require("conllu", "conllu")
        models = require("conllu.models", "conllu")
        parser = require("conllu.parser", "conllu")
        self.Token, self.TokenList, self.Metadata = models.Token, models.TokenList, models.Metadata
        self.ParseException = require("conllu.exceptions", "conllu").ParseException
        self.serialize_field = require("conllu.serializer", "conllu").serialize_field
        self.parse_id_value = parser.parse_id_value
        self.parse_int_value = parser.parse_int_value
        self.parse_paired_list_value = parser.parse_paired_list_value
        self.parse_pair_value = parser.parse_pair_value


_CONLLU: _Conllu | None = None


def _conllu() -> _Conllu:
    """The ``conllu`` package (MissingExtraError naming the extra when absent)."""
    global _CONLLU
    if _CONLLU is None:
        _CONLLU = _Conllu()
    return _CONLLU


# ----------------------------------------------------------------------------
# Sentence -> TokenList


def _exact(parsed: Any, text: str, serialize) -> Any:
    """``parsed`` when the conllu serializer turns it back into ``text``, else ``text``."""
    try:
        if serialize(parsed) == text:
            return parsed
    except Exception:  # an unserializable candidate: keep the string
        pass
    return text


def _dict_value(text: str, serialize) -> Any:
    if text == "_":
        return None
    d: dict[str, str | None] = {}
    for part in text.split("|"):
        key, sep, value = part.partition("=")
        d[key] = (None if value == "_" else value) if sep else ""
    return _exact(d, text, serialize)


def _converters(cp) -> dict[str, Callable[[str], Any]]:
    """str -> conllu value for each field (see the module docstring)."""
    ser = cp.serialize_field

    def nullable(text: str):
        return None if text == "_" else text

    def id_value(text: str):
        try:
            return _exact(cp.parse_id_value(text), text, ser)
        except cp.ParseException:
            return text

    def int_value(text: str):
        try:
            return _exact(cp.parse_int_value(text), text, ser)
        except cp.ParseException:
            return text

    def deps(text: str):
        return _exact(cp.parse_paired_list_value(text), text, ser)

    def same(text: str):
        return text

    return {"id": id_value, "form": same, "lemma": same, "upos": same, "xpos": nullable,
            "feats": lambda t: _dict_value(t, ser), "head": int_value, "deprel": same,
            "deps": deps, "misc": lambda t: _dict_value(t, ser)}


def _comment_line(key: Any, value: Any) -> str:
    return f"# {key}" if value is None else f"# {key} = {value}"


def _metadata(comments: list[str], cp):
    """(conllu Metadata of ``comments``, whether it spells them exactly)."""
    metadata = cp.Metadata()
    for line in comments:
        body = line[1:] if line.startswith("#") else line
        key, value = cp.parse_pair_value(body)
        if key:
            metadata[key] = value
    exact = [_comment_line(k, v) for k, v in metadata.items()] == list(comments)
    return metadata, exact


def to_tokenlist(sentence: Sentence) -> "TokenList":
    """The ``conllu.models.TokenList`` of one sentence: a token per word, range and
    empty node, in CoNLL-U order, values as ``conllu.parse`` gives them, comments in
    ``metadata`` (see the module docstring). O(words)."""
    cp = _conllu()
    conv = _converters(cp)
    columns = [getattr(sentence, _ATTR[f]) if f in _ATTR else None for f in FIELDS]
    heads = sentence.heads
    extra = sorted(enumerate(sentence.extra), key=lambda e: (int(e[1][0]), e[0]))
    tokens = []
    e = 0
    n = len(sentence)
    for k in range(n + 1):
        while e < len(extra) and (int(extra[e][1][0]) <= k or k == n):
            line = extra[e][1][1]
            tokens.append(cp.Token((f, conv[f](v)) for f, v in zip(FIELDS, line.split("\t"))))
            e += 1
        if k == n:
            break
        m = k + 1
        token = cp.Token()
        for f, col in zip(FIELDS, columns):
            if f == "id":
                token[f] = m
            elif f == "head":
                h = int(heads[m])
                token[f] = None if h < 0 else h
            else:
                token[f] = conv[f](str(col[m]))
        tokens.append(token)
    metadata, exact = _metadata(sentence.comments, cp)
    tokenlist = cp.TokenList(tokens, metadata, default_fields=list(FIELDS))
    if not exact:
        tokenlist.arboreal_comments = (dict(metadata), list(sentence.comments))
    return tokenlist


def to_tokenlists(sentences: Iterable[Sentence]) -> list:
    """:func:`to_tokenlist` of every sentence."""
    return [to_tokenlist(s) for s in sentences]


# ----------------------------------------------------------------------------
# TokenList -> Sentence


def _name(tokenlist, index: int | None) -> str:
    sent_id = None
    metadata = getattr(tokenlist, "metadata", None)
    if isinstance(metadata, dict):
        sent_id = metadata.get("sent_id")
    what = f"sentence {sent_id}" if sent_id is not None else (
        f"sentence {index + 1}" if index is not None else "token list")
    return what


def _check_tree(heads: np.ndarray) -> str | None:  # O(n)
    """The first tree problem of ``heads`` (shape (n+1,), -1 = unknown), or None."""
    heads = heads.tolist()
    n = len(heads) - 1
    for m in range(1, n + 1):
        if heads[m] == m:
            return f"word {m} is its own head"
    state = [0] * (n + 1)  # 0 new, 1 on the current path, 2 done
    for m in range(1, n + 1):
        x = m
        while x > 0 and state[x] == 0:
            state[x] = 1
            x = heads[x]
        if x > 0 and state[x] == 1:
            return f"the heads form a cycle through word {x}"
        y = m
        while y > 0 and state[y] == 1:
            state[y] = 2
            y = heads[y]
    return None


def from_tokenlist(tokenlist, check_trees: bool = True, *, _index: int | None = None) -> Sentence:
    """The :class:`Sentence` of a ``conllu`` TokenList (any list of token dicts with a
    ``metadata`` dict works). Words must have ids 1..n in order; ranges ``(a, "-", b)``
    must stand right before word a, with a <= b <= n; empty nodes ``(k, ".", j)`` right
    after word k. ``head`` must be an integer 0..n or None (unknown: -1). Values are
    written as the conllu serializer writes them (None -> ``_``). ``check_trees``: also
    refuse a word that is its own head and a cycle (which is also what a sentence with
    every head known but none on the root has). ArborealError naming the sentence (its
    ``sent_id`` when it has one) and the problem. O(words)."""
    cp = _conllu()
    ser = cp.serialize_field
    where = _name(tokenlist, _index)

    def fail(problem: str):
        raise ArborealError(f"{where}: {problem}")

    def text(token, field: str, what: str) -> str:
        value = token.get(field) if hasattr(token, "get") else None
        try:
            s = ser(value)
        except Exception as exc:
            fail(f"{what}: field {field.upper()} cannot be written ({exc})")
        if any(c in s for c in "\t\n\r"):
            fail(f"{what}: field {field.upper()} contains a tab or line break ({s[:60]!r})")
        if s == "":
            fail(f"{what}: field {field.upper()} is empty")
        return s

    rows: list[list[str]] = []
    raw_heads: list[Any] = []
    extra: list[tuple[int, str]] = []
    ranges: list[tuple[int, int, int]] = []  # (position in extra, a, b)
    for pos, token in enumerate(tokenlist):
        if not isinstance(token, dict):
            fail(f"token {pos + 1} is a {type(token).__name__}, not a dict")
        tid = token.get("id")
        k = len(rows)
        if isinstance(tid, (int, np.integer)) and not isinstance(tid, bool):
            if int(tid) != k + 1:
                fail(f"word ids must be 1..n in order: token {pos + 1} has id {tid}, "
                     f"expected {k + 1}")
            what = f"word {k + 1}"
            rows.append([text(token, f, what) for f in FIELDS[1:] if f != "head"])
            raw_heads.append(token.get("head"))
        elif isinstance(tid, tuple) and len(tid) == 3 and tid[1] in ("-", "."):
            a, sep, b = tid
            if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                       for v in (a, b)):
                fail(f"token {pos + 1} has an invalid id {tid!r}")
            if sep == "-":
                if not 1 <= a <= b or a != k + 1:
                    fail(f"multiword token {a}-{b} must come right before word {a} "
                         f"and end at or after it (it follows word {k})")
                ranges.append((len(extra), int(a), int(b)))
            elif a != k or b < 1:
                fail(f"empty node {a}.{b} must come right after word {a} (it follows word {k})")
            line = "\t".join(text(token, f, f"token {pos + 1} ({ser(tid)})") for f in FIELDS)
            extra.append((k, line))
        else:
            fail(f"token {pos + 1} has an invalid id {tid!r} (expected an integer, "
                 "(a, '-', b) or (k, '.', j))")
    n = len(rows)
    if n == 0:
        fail("no words (tokens with integer ids)")
    for _, a, b in ranges:
        if b > n:
            fail(f"multiword token {a}-{b} ends after the last word ({n})")

    heads = np.full(n + 1, -1, dtype=np.int32)
    for m, h in enumerate(raw_heads, 1):
        if h is None:
            continue
        if isinstance(h, bool) or not isinstance(h, (int, np.integer)):
            fail(f"word {m}: HEAD must be an integer or None, not {h!r}")
        if not 0 <= h <= n:
            fail(f"word {m}: HEAD {h} is out of range 0..{n}")
        heads[m] = h
    if check_trees:
        problem = _check_tree(heads)
        if problem:
            fail(problem)

    metadata = getattr(tokenlist, "metadata", None) or {}
    saved = getattr(tokenlist, "arboreal_comments", None)
    if saved is not None and saved[0] == dict(metadata):
        comments = list(saved[1])
    else:
        comments = [_comment_line(k, v) for k, v in metadata.items()]
        for c in comments:
            if "\n" in c or "\r" in c:
                fail(f"metadata {c[:60]!r} contains a line break")

    cols = list(zip(*rows))
    s = Sentence.from_columns(
        cols[0], None, cols[5], lemmas=cols[1], upos=cols[2], xpos=cols[3], feats=cols[4],
        deps=cols[6], misc=cols[7], comments=comments)
    s.heads = heads
    s.extra = extra
    return s


def from_tokenlists(tokenlists: Iterable, check_trees: bool = True) -> list[Sentence]:
    """:func:`from_tokenlist` of every token list (errors without a ``sent_id`` name the
    sentence by its 1-based position)."""
    return [from_tokenlist(t, check_trees, _index=i) for i, t in enumerate(tokenlists)]
