"""Documents, sentences and words as objects, in the manner of Stanza and spaCy, over
the arrays of :class:`~arboreal.io.sentence.Sentence` (kept for speed).

``doc = nlp("text")`` (any model of :func:`arboreal.load`) gives a :class:`Document`:

* ``doc.sentences``: the parsed :class:`~arboreal.io.sentence.Sentence` objects;
  ``len(sentence)`` counts its words, ``for word in sentence`` gives :class:`Word`
  objects 1..n (the root is not one), ``sentence.words`` the same as a list,
  ``sentence.text`` its text;
* a :class:`Word` has ``id`` (1-based), ``form`` (also ``text``), ``lemma``, ``upos``,
  ``xpos``, ``feats``, ``head`` (0 for the root), ``deprel``, ``deps``, ``misc`` and
  ``head_word`` (the :class:`Word` it depends on, None for the root);
* ``doc.words`` every word in order, ``len(doc)`` their number, ``doc.to_conllu()`` the
  CoNLL-U text, ``doc.to_dict()`` lists of word dictionaries (as Stanza's).

Word objects are made when asked for: O(1) each, reading the sentence's arrays.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from arboreal.io.sentence import Sentence

#: the CoNLL-U columns of a word, as :meth:`Word.to_dict` names them
WORD_FIELDS = ("id", "text", "lemma", "upos", "xpos", "feats", "head", "deprel", "deps",
               "misc")


@dataclass(frozen=True, eq=False)
class Word:
    """Word ``id`` (1..n) of ``sentence``: a view of its arrays, read when asked."""

    sentence: Sentence
    id: int

    @property
    def form(self) -> str:
        return str(self.sentence.forms[self.id])

    text = form

    @property
    def lemma(self) -> str:
        return str(self.sentence.lemmas[self.id])

    @property
    def upos(self) -> str:
        return str(self.sentence.upos[self.id])

    @property
    def xpos(self) -> str:
        return str(self.sentence.xpos[self.id])

    @property
    def feats(self) -> str:
        return str(self.sentence.feats[self.id])

    @property
    def head(self) -> int:
        """The id of the word this one depends on: 0 for the root, -1 if unparsed."""
        return int(self.sentence.heads[self.id])

    @property
    def deprel(self) -> str:
        return str(self.sentence.deprels[self.id])

    @property
    def deps(self) -> str:
        return str(self.sentence.deps[self.id])

    @property
    def misc(self) -> str:
        return str(self.sentence.misc[self.id])

    @property
    def head_word(self) -> "Word | None":
        """The :class:`Word` this one depends on (None for the root or unparsed)."""
        h = self.head
        return Word(self.sentence, h) if h > 0 else None

    def to_dict(self) -> dict:
        """The word's columns (:data:`WORD_FIELDS`), as Stanza's ``to_dict`` names them."""
        return {name: getattr(self, name) for name in WORD_FIELDS}

    def __repr__(self) -> str:
        return (f"Word(id={self.id}, text={self.form!r}, upos={self.upos!r}, "
                f"head={self.head}, deprel={self.deprel!r})")


def sentence_words(sentence: Sentence) -> list[Word]:
    """The words 1..n of ``sentence``."""
    return [Word(sentence, k) for k in range(1, len(sentence) + 1)]


def sentence_text(sentence: Sentence) -> str:
    """The ``# text`` comment of ``sentence``, else its forms joined as the MISC column's
    ``SpaceAfter=No`` says."""
    for c in sentence.comments:
        if c.startswith("# text ="):
            return c[len("# text ="):].strip()
    out = []
    for k in range(1, len(sentence) + 1):
        out.append(str(sentence.forms[k]))
        if k < len(sentence) and "SpaceAfter=No" not in str(sentence.misc[k]).split("|"):
            out.append(" ")
    return "".join(out)


class Document:
    """Parsed sentences of one text (see the module docstring)."""

    def __init__(self, sentences: list[Sentence], text: str | None = None):
        self.sentences = list(sentences)
        self._text = text

    @property
    def text(self) -> str:
        """The text parsed (or the sentences' texts, one per line)."""
        if self._text is not None:
            return self._text
        return "\n".join(s.text for s in self.sentences)

    @property
    def words(self) -> list[Word]:
        return [w for s in self.sentences for w in s.words]

    def __len__(self) -> int:
        """The number of words."""
        return sum(len(s) for s in self.sentences)

    def __iter__(self) -> Iterator[Sentence]:
        return iter(self.sentences)

    def __getitem__(self, k: int) -> Sentence:
        return self.sentences[k]

    def to_conllu(self) -> str:
        """The document as CoNLL-U text."""
        from arboreal.io.conllu import format_conllu

        return format_conllu(self.sentences)

    def to_dict(self) -> list[list[dict]]:
        """Per sentence, its words' dictionaries (:meth:`Word.to_dict`)."""
        return [[w.to_dict() for w in s.words] for s in self.sentences]

    def __repr__(self) -> str:
        return f"Document({len(self.sentences)} sentences, {len(self)} words)"
