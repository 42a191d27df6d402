"""Scoring a system's trees against gold: what ``arboreal eval`` prints.

:func:`evaluate` (also ``arboreal.evaluate``) is the one entry point, shared with the
command: when both files hold the same sentences and words it returns the attachment
scores below (:func:`attachment_scores`); when the tokenization or the sentence
splitting differs (a system that read raw text), or with ``conll18=True``, it returns
the CoNLL 2018 shared-task scores (:func:`arboreal.evaluation_ud.evaluate_ud`), in
percentages, as ``arboreal eval --json`` prints them.

Attachment scores: UAS, LAS, root accuracy, complete match.

Metrics (McDonald et al. 2006, section 5.4; CoNLL 2018 for LAS), as
percentages 0-100 over the *scored* words (all words, or all but punctuation):

* ``uas``: words whose head is right.
* ``las``: head right and universal relation right: DEPREL up to the first
  ':' (``nmod:poss`` -> ``nmod``), as in the CoNLL 2018 shared task.
* ``las_full``: head right and the full DEPREL right.
* ``root``: sentences whose set of scored words attached to the root (HEAD 0)
  equals gold's.
* ``complete``: sentences whose scored words all have the right head;
  ``complete_labeled``: ... the right head and universal relation.
  A sentence without scored words counts as complete.
* ``words``: number of scored words; ``sentences``: number of sentences.

Punctuation (``exclude_punct=True``): words whose *gold* UPOS is ``PUNCT``
(the UD convention; ``SYM`` is scored). A system head of -1 (no head) is
wrong. Only syntactic words are scored: multiword-token lines and empty nodes
are ignored. Everything is computed on corpus-level arrays (no Python loop
over words).
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple, Optional, Union

import numpy as np

from arboreal.errors import ArborealError
from arboreal.io.sentence import Sentence

Corpus = Union[str, os.PathLike, Sequence[Sentence]]

KEYS = ("uas", "las", "las_full", "root", "complete", "complete_labeled", "words", "sentences")


def _load(corpus: Corpus) -> list[Sentence]:
    if isinstance(corpus, (str, os.PathLike)):
        from arboreal.io.conllu import read_conllu

        return read_conllu(corpus, allow_missing_heads=True)
    return list(corpus)


def _describe(i: int, s: Sentence) -> str:
    sid = s.sent_id
    where = f"sentence {i + 1}"
    if sid is not None:
        where += f" (sent_id {sid})"
    if s.line is not None:
        where += f", line {s.line}"
    return where


def _universal(labels: np.ndarray) -> np.ndarray:
    """Universal part of each relation (before the first ':'); a dict over distinct labels only."""
    table = {x: x.split(":", 1)[0] for x in set(labels.tolist())}
    return np.array(list(map(table.__getitem__, labels.tolist())), dtype=object)


def attachment_scores(gold: Corpus, system: Corpus,
                      exclude_punct: bool = False) -> dict[str, float | int]:
    """Attachment scores of a system's trees against gold trees over the same words.

    ``gold``, ``system``: lists of :class:`Sentence` or paths to CoNLL-U files
    (the system file may have HEAD ``_``: those words count as wrong). Both
    must have the same sentences with the same word forms.

    Returns a dict with the keys ``uas``, ``las``, ``las_full``, ``root``,
    ``complete``, ``complete_labeled`` (floats, percentages 0-100) and ``words``,
    ``sentences`` (ints); see the module docstring. O(words).

    Raises :class:`ArborealError` when the word sequences differ (naming the
    first differing sentence), when gold lacks heads, or when there is nothing
    to score. :func:`evaluate` scores differing tokenizations instead.
    """
    g = _load(gold)
    s = _load(system)
    if not g and not s:
        raise ArborealError("nothing to evaluate: no sentences")
    ng = np.fromiter(map(len, g), np.int64, len(g))
    ns = np.fromiter(map(len, s), np.int64, len(s))
    common = min(len(g), len(s))
    differ = np.flatnonzero(ng[:common] != ns[:common])
    k = int(differ[0]) if len(differ) else common  # sentences [0, k) have equal lengths

    n = ng[:k]
    is_word = np.ones(int(n.sum()) + k, bool)
    is_word[np.cumsum(n + 1) - n - 1] = False  # drop the root entries

    def column(corpus: list[Sentence], name: str) -> np.ndarray:
        if k == 0:
            return np.zeros(0, dtype=object)
        return np.concatenate([getattr(x, name) for x in corpus[:k]])[is_word]

    gf, sf = column(g, "forms"), column(s, "forms")
    diff = gf != sf
    if diff.any():
        w = int(np.argmax(diff))
        i = int(np.searchsorted(np.cumsum(n), w, side="right"))
        m = w - int(n[:i].sum()) + 1
        raise ArborealError(f"gold and system differ at {_describe(i, g[i])}: word {m} is "
                            f"{gf[w]!r} in gold, {sf[w]!r} in the system output")
    if k < common:
        raise ArborealError(f"gold and system differ at {_describe(k, g[k])}: "
                            f"{len(g[k])} words in gold, {len(s[k])} in the system output")
    if len(g) != len(s):
        first = f"{_describe(k, g[k])} is missing from the system output" if k < len(g) else \
            f"the system output has an extra {_describe(k, s[k])}"
        raise ArborealError(f"gold has {len(g)} sentences, the system output {len(s)}: {first}")
    S = k
    sent = np.repeat(np.arange(S), n)
    gh, sh = column(g, "heads").astype(np.int64), column(s, "heads").astype(np.int64)
    if (gh < 0).any():
        w = int(np.argmax(gh < 0))
        raise ArborealError(f"gold has a word without a head in {_describe(int(sent[w]), g[int(sent[w])])}")
    gl, sl = column(g, "deprels"), column(s, "deprels")

    scored = np.ones(len(gh), bool)
    if exclude_punct:
        scored = column(g, "upos") != "PUNCT"
    words = int(scored.sum())
    if words == 0:
        raise ArborealError("nothing to evaluate: no scored words")

    head_ok = gh == sh
    full_ok = head_ok & (gl == sl)
    univ_ok = head_ok & (_universal(gl) == _universal(sl))
    root_diff = (gh == 0) != (sh == 0)

    def per_sentence_all(ok: np.ndarray) -> np.ndarray:
        wrong = np.bincount(sent, weights=(scored & ~ok), minlength=S)
        return wrong == 0

    pct = lambda k, total: 100.0 * float(k) / float(total)  # noqa: E731
    return {
        "uas": pct(np.count_nonzero(head_ok & scored), words),
        "las": pct(np.count_nonzero(univ_ok & scored), words),
        "las_full": pct(np.count_nonzero(full_ok & scored), words),
        "root": pct(np.count_nonzero(per_sentence_all(~root_diff)), S),
        "complete": pct(np.count_nonzero(per_sentence_all(head_ok)), S),
        "complete_labeled": pct(np.count_nonzero(per_sentence_all(univ_ok)), S),
        "words": words,
        "sentences": S,
    }


class Evaluation(NamedTuple):
    """What :func:`compare` found.

    ``conll18``: True when ``scores`` are the CoNLL 2018 shared-task scores
    (:func:`arboreal.evaluation_ud.evaluate_ud`'s dict: fractions 0..1 and counts),
    False when they are :func:`attachment_scores`'s dict (percentages).
    ``tokenization_differs``: the words or sentences of the two files differ.
    """

    conll18: bool
    tokenization_differs: bool
    scores: dict

    def as_dict(self) -> dict:
        """The scores as ``arboreal eval --json`` prints them: the attachment scores'
        dict, or ``{metric: {"precision", "recall", "f1", "aligned_accuracy"}}`` in
        percentages (``aligned_accuracy`` None for Tokens, Sentences and Words)."""
        if not self.conll18:
            return dict(self.scores)
        from arboreal.evaluation_ud import METRICS

        return {m: {k: (None if self.scores[m][k] is None else 100.0 * self.scores[m][k])
                    for k in ("precision", "recall", "f1", "aligned_accuracy")}
                for m in METRICS}


def _read(corpus: Corpus, name: Optional[str], default: str) -> tuple[list[Sentence], str]:
    if isinstance(corpus, (str, os.PathLike)):
        if name is None:
            name = "<stdin>" if str(corpus) == "-" else str(corpus)
        return _load(corpus), name
    return list(corpus), default if name is None else name


def compare(gold: Corpus, system: Corpus, *, exclude_punct: bool = False, conll18: bool = False,
            gold_name: Optional[str] = None, system_name: Optional[str] = None) -> Evaluation:
    """Score ``system`` against ``gold`` as ``arboreal eval`` does (the command calls this).

    ``gold``, ``system``: paths to CoNLL-U files (``"-"``: standard input; HEAD ``_``
    allowed, counted wrong in the system) or lists of :class:`Sentence`. When both hold
    the same sentences and words and ``conll18`` is False: :func:`attachment_scores`
    (``exclude_punct`` applies). Otherwise the CoNLL 2018 shared-task evaluation
    (:func:`arboreal.evaluation_ud.evaluate_ud`: words aligned through character
    offsets). ``gold_name``, ``system_name``: how error messages call the two inputs.

    Raises :class:`ArborealError` when the two texts differ (naming the first differing
    word when every sentence has as many words on both sides, else the first differing
    character), with ``exclude_punct`` in the CoNLL 2018 evaluation, and as
    :func:`attachment_scores` and :func:`~arboreal.evaluation_ud.evaluate_ud` do.
    O(words).
    """
    from arboreal.evaluation_ud import TextMismatchError, evaluate_ud, same_words

    g, gold_name = _read(gold, gold_name, "gold")
    s, system_name = _read(system, system_name, "system")
    identical = same_words(g, s)
    if identical and not conll18:
        return Evaluation(False, False, attachment_scores(g, s, exclude_punct=exclude_punct))
    try:
        scores = evaluate_ud(g, s, gold_name=gold_name, system_name=system_name)
    except TextMismatchError:
        if len(g) == len(s) and all(len(a) == len(b) for a, b in zip(g, s)):
            # same sentence and word counts: naming the first differing word is clearer
            attachment_scores(g, s)
        raise
    if exclude_punct:
        why = "--conll18 was given" if identical else "the words of GOLD and SYSTEM differ"
        raise ArborealError(f"--exclude-punct (exclude_punct) applies to the attachment scores "
                            f"of identically tokenized files, not to the CoNLL 2018 evaluation "
                            f"({why})")
    return Evaluation(True, not identical, scores)


def evaluate(gold: Corpus, system: Corpus, exclude_punct: bool = False, *,
             conll18: bool = False) -> dict:
    """What ``arboreal eval --json GOLD SYSTEM`` prints, as a dict.

    Identically tokenized inputs (same sentences, same words) and ``conll18`` False:
    the attachment scores, ``{"uas", "las", "las_full", "root", "complete",
    "complete_labeled"}`` (percentages 0-100) with ``"words"`` and ``"sentences"``
    (counts); see :func:`attachment_scores`. Otherwise (a system that tokenized raw
    text, or ``conll18=True``): the CoNLL 2018 shared-task scores,
    ``{metric: {"precision", "recall", "f1", "aligned_accuracy"}}`` in percentages for
    each metric of :data:`arboreal.evaluation_ud.METRICS`. Arguments and errors: see
    :func:`compare`. O(words).
    """
    return compare(gold, system, exclude_punct=exclude_punct, conll18=conll18).as_dict()


def format_table(scores: dict[str, float | int], title: str | None = None) -> str:
    """A readable table of :func:`attachment_scores`'s result, percentages with two
    decimals."""
    rows = [
        ("UAS", "uas"),
        ("LAS (universal relations)", "las"),
        ("LAS (full relations)", "las_full"),
        ("Root accuracy", "root"),
        ("Complete match (unlabeled)", "complete"),
        ("Complete match (labeled)", "complete_labeled"),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [title] if title else []
    lines.append(f"{'Metric':<{width}}  {'Score':>7}")
    lines.append(f"{'-' * width}  {'-' * 7}")
    for label, key in rows:
        lines.append(f"{label:<{width}}  {scores[key]:>7.2f}")
    lines.append(f"{'Words scored':<{width}}  {scores['words']:>7d}")
    lines.append(f"{'Sentences':<{width}}  {scores['sentences']:>7d}")
    return "\n".join(lines)
