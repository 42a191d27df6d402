"""CoNLL 2018 shared-task evaluation: scoring a system whose tokenization differs from gold.

This follows the method of the official evaluation script of the CoNLL 2018
shared task (``conll18_ud_eval.py``, version 1.2, Zeman et al. 2018) and gives
the same figures; it is an independent implementation (the tests compare the
two on many files).

Alignment
---------
Every token (a multiword-token range line, or a word outside any range) is a
span of character offsets in the text made by concatenating the token forms of
the whole file with the whitespace removed (every character of Unicode
category Zs). Gold and system must have the same such text, otherwise the
evaluation stops with an :class:`TextMismatchError`. Empty nodes (``8.1``) are
ignored.

Syntactic words take the span of their token. Words outside multiword tokens
are aligned when their spans are equal. Around multiword tokens, a *multiword
span* is grown: the smallest stretch of text that starts at a multiword token
(gold or system) and that no multiword token of either side crosses; the gold
and system words in it are aligned by a longest common subsequence of their
lowercased forms (ties resolved as the official script does).

Metrics
-------
Each metric has ``precision`` (correct / system count), ``recall`` (correct /
gold count), ``f1`` (2 correct / (gold + system)) and ``aligned_accuracy``
(correct / aligned words; None for Tokens, Sentences and Words, 0.0 when no
word is aligned), all fractions 0..1 (0.0 when the denominator is 0).

* ``Tokens``, ``Sentences``: spans equal in gold and system.
* ``Words``: aligned words.
* ``UPOS``, ``XPOS``, ``UFeats``, ``AllTags`` (UPOS, XPOS and UFeats), ``Lemmas``:
  aligned words with the same value. UFeats compares only the universal
  features (:data:`UNIVERSAL_FEATURES`); a gold lemma ``_`` matches any lemma.
* ``UAS``: aligned words whose system head is aligned to the gold head (or both
  heads are the root). ``LAS``: also the same universal relation (DEPREL up to
  the first ``:``).
* ``CLAS``: LAS restricted to words with a content relation
  (:data:`CONTENT_RELATIONS`; the gold relation decides for aligned words).
  ``MLAS``: CLAS plus UPOS, UFeats and the function-word children (relations in
  :data:`FUNCTION_RELATIONS`; each child aligned to the gold child, same
  relation, UPOS and UFeats). ``BLEX``: CLAS plus the lemma.

Differences from the official script, for input it rejects: a system word
with HEAD ``_`` counts as wrongly attached, and a sentence with several words
on the root is scored as it is. A gold word without a head is an error.
O(words), plus a quadratic LCS inside each (short) multiword span.
"""
from __future__ import annotations

import os
import unicodedata
from bisect import bisect_right
from collections.abc import Sequence
from typing import Optional, Union

from arboreal.errors import ArborealError
from arboreal.io.sentence import Sentence

Corpus = Union[str, os.PathLike, Sequence[Sentence]]

#: metric names, in the order of the official table
METRICS = ("Tokens", "Sentences", "Words", "UPOS", "XPOS", "UFeats", "AllTags", "Lemmas",
           "UAS", "LAS", "CLAS", "MLAS", "BLEX")

#: universal relations of content words (CLAS, MLAS and BLEX score these words)
CONTENT_RELATIONS = frozenset((
    "nsubj", "obj", "iobj", "csubj", "ccomp", "xcomp", "obl", "vocative", "expl",
    "dislocated", "advcl", "advmod", "discourse", "nmod", "appos", "nummod", "acl",
    "amod", "conj", "fixed", "flat", "compound", "list", "parataxis", "orphan",
    "goeswith", "reparandum", "root", "dep",
))

#: universal relations of function words (their attachment is part of MLAS)
FUNCTION_RELATIONS = frozenset(("aux", "cop", "mark", "det", "clf", "case", "cc"))

#: the features UFeats compares (the others are dropped before comparing)
UNIVERSAL_FEATURES = frozenset((
    "PronType", "NumType", "Poss", "Reflex", "Foreign", "Abbr", "Gender", "Animacy",
    "Number", "Case", "Definite", "Degree", "VerbForm", "Mood", "Tense", "Aspect",
    "Voice", "Evident", "Polarity", "Person", "Polite",
))

# head codes besides word indices >= 0
_ROOT, _UNALIGNED, _NO_HEAD = -1, -2, -3


class TextMismatchError(ArborealError):
    """Gold and system do not hold the same text (whitespace ignored)."""


def _without_spaces(form: str) -> str:
    if form.isascii():
        return form.replace(" ", "")
    return "".join(c for c in form if unicodedata.category(c) != "Zs")


def _universal_feats(feats: str) -> str:
    """The universal features of a FEATS value, sorted, joined by '|' ('' when none)."""
    return "|".join(sorted(f for f in feats.split("|") if f.split("=", 1)[0] in UNIVERSAL_FEATURES))


class _Memo(dict):
    """A dict that computes a missing value with ``fn`` (and keeps it)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def __missing__(self, key):
        value = self[key] = self.fn(key)
        return value


def _describe(i: int, s: Sentence) -> str:
    where = f"sentence {i + 1}"
    sid = s.sent_id
    if sid is not None:
        where += f" (sent_id {sid})"
    if s.line is not None:
        where += f", line {s.line}"
    return where


class _Side:
    """One file flattened for the alignment: token and sentence spans, word columns."""

    def __init__(self, sentences: list[Sentence], name: str, is_gold: bool,
                 memo_spaces: _Memo, memo_feats: _Memo, memo_rel: _Memo):
        self.name = name
        self.sentences = sentences
        pieces: list[str] = []          # token texts, spaces removed
        self.tok_start: list[int] = []
        self.tok_end: list[int] = []
        self.tok_sent: list[int] = []
        self.sent_span: list[tuple[int, int]] = []
        # one entry per syntactic word, corpus-wide
        self.start: list[int] = []     # span of the word's token
        self.end: list[int] = []
        self.mwt: list[bool] = []      # inside a multiword token
        self.form: list[str] = []      # lowercased form for the LCS alignment
        self.upos: list[str] = []
        self.xpos: list[str] = []
        self.feats: list[str] = []     # universal features only
        self.lemma: list[str] = []
        self.rel: list[str] = []       # universal relation
        self.head: list[int] = []      # corpus-wide word index, _ROOT or _NO_HEAD
        pos = 0
        for i, s in enumerate(sentences):
            n = len(s)
            base = len(self.start)
            forms = s.forms.tolist()
            ranges = {}
            for _, line in s.extra:
                cols = line.split("\t")
                first, dash, last = cols[0].partition("-")
                if dash:
                    ranges[int(first)] = (int(last), cols[1] if len(cols) > 1 else "")
            sent_start = pos
            m = 1
            while m <= n:
                last, surface = ranges.get(m, (m, None))
                mwt = surface is not None
                text = memo_spaces[surface if mwt else forms[m]]
                if not text:
                    raise ArborealError(f"{name}: {_describe(i, s)}: token {m} "
                                        f"({(surface if mwt else forms[m])!r}) is only whitespace")
                end = pos + len(text)
                pieces.append(text)
                self.tok_start.append(pos)
                self.tok_end.append(end)
                self.tok_sent.append(i)
                for w in range(m, min(last, n) + 1):
                    self.start.append(pos)
                    self.end.append(end)
                    self.mwt.append(mwt)
                    # (the official script compares the forms of words inside multiword
                    # tokens as written, those of other words without their spaces)
                    self.form.append((forms[w] if mwt else text).lower())
                pos = end
                m = last + 1
            if n:
                self.sent_span.append((sent_start, pos))
            self.upos += s.upos[1:].tolist()
            self.xpos += s.xpos[1:].tolist()
            self.lemma += s.lemmas[1:].tolist()
            self.feats += map(memo_feats.__getitem__, s.feats[1:].tolist())
            self.rel += map(memo_rel.__getitem__, s.deprels[1:].tolist())
            for m, h in enumerate(s.heads[1:].tolist(), 1):
                if h > n:
                    raise ArborealError(f"{name}: {_describe(i, s)}: HEAD {h} of word {m} is out of "
                                        f"range (the sentence has {n} words)")
                if h < 0 and is_gold:
                    raise ArborealError(f"{name}: {_describe(i, s)}: word {m} has no head "
                                        "(gold needs trees)")
                self.head.append(base + h - 1 if h > 0 else (_ROOT if h == 0 else _NO_HEAD))
        self.text = "".join(pieces)
        self.content = [r in CONTENT_RELATIONS for r in self.rel]
        # function-word children of each word, in word order
        children: list[list[int]] = [[] for _ in self.head]
        for w, (h, r) in enumerate(zip(self.head, self.rel)):
            if h >= 0 and r in FUNCTION_RELATIONS:
                children[h].append(w)
        self.children = children

    def where(self, char: int) -> str:
        """The sentence holding character ``char`` of the text (or the end of the file)."""
        t = bisect_right(self.tok_start, char) - 1
        if t < 0 or char >= len(self.text):
            return "end of file"
        i = self.tok_sent[t]
        return _describe(i, self.sentences[i])


def _check_texts(g: _Side, s: _Side) -> None:
    a, b = g.text, s.text
    if a == b:
        return
    k = 0
    n = min(len(a), len(b))
    step = 4096
    while k < n and a[k:k + step] == b[k:k + step]:  # skip equal blocks, then go character by character
        k += step
    k = min(k, n)
    while k < n and a[k] == b[k]:
        k += 1
    before = a[max(0, k - 20):k]
    raise TextMismatchError(
        f"{g.name} (gold) and {s.name} (system) do not hold the same text (whitespace ignored): "
        f"they differ at character {k + 1}, after {before!r}: gold has {a[k:k + 20]!r} "
        f"({g.where(k)}), the system output {b[k:k + 20]!r} ({s.where(k)})")


def _multiword_span(g: _Side, s: _Side, gi: int, si: int) -> tuple[int, int, int, int]:
    """The words [gs, ge) and [ss, se) of the multiword span that starts at gold word
    ``gi`` or system word ``si`` (one of which is inside a multiword token)."""
    G, S = len(g.start), len(s.start)
    if g.mwt[gi]:
        limit = g.end[gi]
        if not s.mwt[si] and s.start[si] < g.start[gi]:
            si += 1
    else:
        limit = s.end[si]
        if g.start[gi] < s.start[si]:
            gi += 1
    gs, ss = gi, si

    def inside(side: _Side, i: int, count: int) -> bool:
        # a multiword word is inside when it starts before the limit, another word when it
        # ends by the limit
        if i >= count:
            return False
        return side.start[i] < limit if side.mwt[i] else side.end[i] <= limit

    while inside(g, gi, G) or inside(s, si, S):
        if gi < G and (si >= S or g.start[gi] <= s.start[si]):
            if g.mwt[gi] and g.end[gi] > limit:
                limit = g.end[gi]
            gi += 1
        else:
            if s.mwt[si] and s.end[si] > limit:
                limit = s.end[si]
            si += 1
    return gs, gi, ss, si


def _lcs_pairs(gf: list[str], sf: list[str]) -> list[tuple[int, int]]:
    """Index pairs of a longest common subsequence of ``gf`` and ``sf``, walked from the
    start: equal forms are paired, otherwise the gold side advances when that keeps
    the LCS length."""
    a, b = len(gf), len(sf)
    # table[i][j]: LCS length of gf[i:] and sf[j:]
    table = [[0] * (b + 1) for _ in range(a + 1)]
    for i in range(a - 1, -1, -1):
        row, below = table[i], table[i + 1]
        x = gf[i]
        for j in range(b - 1, -1, -1):
            row[j] = below[j + 1] + 1 if x == sf[j] else max(below[j], row[j + 1])
    pairs = []
    i = j = 0
    while i < a and j < b:
        if gf[i] == sf[j]:
            pairs.append((i, j))
            i += 1
            j += 1
        elif table[i][j] == table[i + 1][j]:
            i += 1
        else:
            j += 1
    return pairs


def _align(g: _Side, s: _Side) -> list[tuple[int, int]]:
    """Aligned (gold word, system word) pairs, in order."""
    G, S = len(g.start), len(s.start)
    pairs: list[tuple[int, int]] = []
    gi = si = 0
    while gi < G and si < S:
        if g.mwt[gi] or s.mwt[si]:
            gs, gi, ss, si = _multiword_span(g, s, gi, si)
            if gi > gs and si > ss:
                pairs += [(gs + x, ss + y) for x, y in _lcs_pairs(g.form[gs:gi], s.form[ss:si])]
        elif g.start[gi] == s.start[si] and g.end[gi] == s.end[si]:
            pairs.append((gi, si))
            gi += 1
            si += 1
        elif g.start[gi] <= s.start[si]:
            gi += 1
        else:
            si += 1
    return pairs


def _score(correct: int, gold: int, system: int, aligned: Optional[int]) -> dict:
    return {
        "precision": correct / system if system else 0.0,
        "recall": correct / gold if gold else 0.0,
        "f1": 2 * correct / (gold + system) if gold + system else 0.0,
        "aligned_accuracy": None if aligned is None else (correct / aligned if aligned else 0.0),
        "correct": correct,
        "gold": gold,
        "system": system,
        "aligned": aligned,
    }


def _load(corpus: Corpus, name: Optional[str], default: str) -> tuple[list[Sentence], str]:
    if isinstance(corpus, (str, os.PathLike)):
        from arboreal.io.conllu import read_conllu

        if name is None:
            name = "<stdin>" if str(corpus) == "-" else str(corpus)
        return read_conllu(corpus, allow_missing_heads=True), name
    return list(corpus), default if name is None else name


def same_words(gold: Sequence[Sentence], system: Sequence[Sentence]) -> bool:
    """True when both hold the same sentences with the same word forms (the case
    :func:`arboreal.evaluation.evaluate` scores)."""
    return len(gold) == len(system) and all(
        len(a) == len(b) and a.forms.tolist() == b.forms.tolist() for a, b in zip(gold, system))


def evaluate_ud(gold: Corpus, system: Corpus, *, gold_name: Optional[str] = None,
                system_name: Optional[str] = None) -> dict[str, dict]:
    """CoNLL 2018 shared-task scores of ``system`` against ``gold``.

    ``gold``, ``system``: paths to CoNLL-U files (read with HEAD ``_`` allowed in
    the system) or lists of :class:`Sentence`; their tokenization, sentence
    splitting and multiword tokens may differ, but not their text (whitespace
    ignored). ``gold_name``, ``system_name``: how error messages call them
    (default: the path, or "gold" / "system").

    Returns ``{metric: {"precision", "recall", "f1", "aligned_accuracy", "correct",
    "gold", "system", "aligned"}}`` for each name in :data:`METRICS` (fractions
    0..1 and counts; see the module docstring).

    Raises :class:`TextMismatchError` (an :class:`ArborealError`) when the texts
    differ, naming both files, the first differing character and its sentences;
    :class:`ArborealError` when a gold word has no head;
    :class:`~arboreal.errors.FormatError` for a malformed file.
    """
    g_sents, g_name = _load(gold, gold_name, "gold")
    s_sents, s_name = _load(system, system_name, "system")
    memo_spaces, memo_feats = _Memo(_without_spaces), _Memo(_universal_feats)
    memo_rel = _Memo(lambda r: r.split(":", 1)[0])
    g = _Side(g_sents, g_name, True, memo_spaces, memo_feats, memo_rel)
    s = _Side(s_sents, s_name, False, memo_spaces, memo_feats, memo_rel)
    _check_texts(g, s)

    pairs = _align(g, s)
    to_gold = [_UNALIGNED] * len(s.start)
    for a, b in pairs:
        to_gold[b] = a

    def gold_head(h: int) -> int:
        """A system head as the gold word it is aligned to (roots and missing heads kept)."""
        return h if h < 0 else to_gold[h]

    names = ("UPOS", "XPOS", "UFeats", "AllTags", "Lemmas", "UAS", "LAS", "CLAS", "MLAS", "BLEX")
    correct = dict.fromkeys(names, 0)
    aligned_content = 0
    for a, b in pairs:
        upos = g.upos[a] == s.upos[b]
        xpos = g.xpos[a] == s.xpos[b]
        feats = g.feats[a] == s.feats[b]
        lemma = g.lemma[a] == "_" or g.lemma[a] == s.lemma[b]
        uas = g.head[a] == gold_head(s.head[b])
        las = uas and g.rel[a] == s.rel[b]
        correct["UPOS"] += upos
        correct["XPOS"] += xpos
        correct["UFeats"] += feats
        correct["AllTags"] += upos and xpos and feats
        correct["Lemmas"] += lemma
        correct["UAS"] += uas
        correct["LAS"] += las
        if not g.content[a]:
            continue
        aligned_content += 1
        correct["CLAS"] += las
        correct["BLEX"] += las and lemma
        if las and upos and feats:
            gc, sc = g.children[a], s.children[b]
            correct["MLAS"] += len(gc) == len(sc) and all(
                x == to_gold[y] and g.rel[x] == s.rel[y] and g.upos[x] == s.upos[y]
                and g.feats[x] == s.feats[y] for x, y in zip(gc, sc))

    G, S, A = len(g.start), len(s.start), len(pairs)
    Gc, Sc = sum(g.content), sum(s.content)
    tokens = len(set(zip(g.tok_start, g.tok_end)) & set(zip(s.tok_start, s.tok_end)))
    sentences = len(set(g.sent_span) & set(s.sent_span))
    out = {
        "Tokens": _score(tokens, len(g.tok_start), len(s.tok_start), None),
        "Sentences": _score(sentences, len(g.sent_span), len(s.sent_span), None),
        "Words": _score(A, G, S, None),
    }
    for name in names:
        if name in ("CLAS", "MLAS", "BLEX"):
            out[name] = _score(correct[name], Gc, Sc, aligned_content)
        else:
            out[name] = _score(correct[name], G, S, A)
    return out


def format_ud_table(scores: dict[str, dict], title: Optional[str] = None) -> str:
    """The table of the official script's verbose output (percentages, two decimals)."""
    lines = [title] if title else []
    lines.append("Metric     | Precision |    Recall |  F1 Score | AligndAcc")
    lines.append("-----------+-----------+-----------+-----------+-----------")
    for name in METRICS:
        r = scores[name]
        acc = r["aligned_accuracy"]
        cell = "" if acc is None else f"{100 * acc:10.2f}"
        lines.append(f"{name:11}|{100 * r['precision']:10.2f} |{100 * r['recall']:10.2f} |"
                     f"{100 * r['f1']:10.2f} |{cell}")
    return "\n".join(lines)
