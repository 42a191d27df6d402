"""An arboreal parser as a spaCy v3 pipeline component (``pip install 'arboreal[spacy]'``).

Importing this module registers the factory ``"arboreal"``::

    import spacy
    import arboreal.integrations.spacy  # not needed once the entry point is installed

    nlp = spacy.blank("en")
    nlp.add_pipe("arboreal", config={"model": "en.npz"})
    doc = nlp("The cat sat on the mat. It purred.")
    [(t.text, t.head.i, t.dep_) for t in doc]

Config (all JSON values, so ``nlp.config`` stays serializable):

``model`` (str)
    Path of a model file written by ``arboreal train``, or the name of an installed
    model package or a cached model. It is loaded with :func:`arboreal.load` once, on
    first use (so that ``spacy.load`` of a
    saved pipeline reads the copy saved with it, not this path).
``overwrite_tags`` (bool, default False)
    False: the ``pos_``, ``tag_``, ``lemma_`` and ``morph`` a previous component set are
    kept *and given to the parser*; the model's tagger fills the columns missing
    throughout a sentence (as :meth:`Parser.parse` does with ``_`` columns), and only
    tokens without a value receive one. True: the model's tagger predicts every column
    it knows and overwrites the token's value (columns it does not predict are kept and
    given to the parser as above); a model without a tagger overwrites nothing.
``use_sentences`` (str, default ``"auto"``)
    Where the sentences given to the parser come from: ``"doc"``: ``doc.sents`` when
    the doc already has sentence boundaries (from a sentencizer, senter or parser), else
    the whole doc is one sentence; ``"model"``: arboreal's own sentence splitter (the
    model's tokenizer, trained with it; ArborealError for a model without one; blank
    lines always end a sentence); ``"none"``: the whole doc is one sentence;
    ``"auto"``: the doc's boundaries when it has some, else the model's splitter when
    the model has a tokenizer, else the whole doc.
``noun_chunks`` (str, default ``"auto"``)
    Which iterator gives ``doc.noun_chunks``: ``"arboreal"``: :func:`ud_noun_chunks`,
    base noun phrases read from UD relations (what arboreal's models predict);
    ``"spacy"``: the language's own iterator, left alone; ``"auto"``: ``"arboreal"``
    for the languages whose spaCy iterator reads other labels
    (:data:`NON_UD_NOUN_CHUNK_LANGUAGES`: English's reads ClearNLP labels such as
    ``dobj`` and ``pobj``, German's TIGER labels) and for those without one, else
    ``"spacy"``. The iterator is installed on the pipeline's vocab (docs made after the
    component) and on every doc the component parses.

What the component sets: ``token.head`` and ``token.dep_`` (the UD DEPREL as the model
predicts it; the root's head is the token itself, spaCy's way);
the sentence boundaries then follow the trees (``token.is_sent_start``, ``doc.sents``);
``token.pos_`` (UPOS; a value that is not a spaCy part-of-speech symbol is skipped),
``token.tag_`` (XPOS), ``token.lemma_`` and ``token.morph`` (FEATS) as ``overwrite_tags``
says. spaCy's tokens are the parser's words: spaCy's tokenization is kept, arboreal's
tokenizer only splits sentences.

Whitespace tokens (spaCy makes a token of every run of extra spaces or line breaks,
``token.is_space``) never reach the parser: each is attached, with ``dep_ == "dep"``, to
the nearest word token before it (the first word of the doc for leading whitespace), so
it ends the sentence before it rather than starting the next; its tags are left alone.
A doc with no word token at all is left unparsed.

Scoring: :meth:`ArborealParser.score` (what ``nlp.evaluate`` calls) reports what spaCy's
own parser, tagger, morphologizer and lemmatizer report, with spaCy's own
:class:`spacy.scorer.Scorer` helpers: ``dep_uas``, ``dep_las``, ``dep_las_per_type``
(relations compared lowercased and in full, ``nmod:poss`` is not ``nmod``; ``p`` and
``punct`` are not scored, spaCy's convention, unlike ``arboreal eval``:
``nlp.evaluate(examples, scorer_cfg={"ignore_labels": ()})`` scores them),
``sents_p``, ``sents_r``, ``sents_f``, and ``pos_acc``, ``tag_acc``, ``morph_acc``,
``lemma_acc`` for the columns the model's tagger predicts. Tokens are aligned to the
reference's as spaCy aligns them (``Example.alignment``): a token that is not one
reference word counts as wrong.

Batching: :meth:`ArborealParser.pipe` (what ``nlp.pipe`` calls) parses every sentence
of ``batch_size`` docs in one ``model.parse`` call; ``nlp(text)`` parses one doc.

Serialization: ``to_disk`` writes the model file into the component's folder
(``model.npz``, arboreal's own format: no pickle) and ``from_disk`` loads it, so
``nlp.to_disk(d)`` / ``spacy.load(d)`` carry the model along; ``to_bytes`` /
``from_bytes`` hold the same file's bytes.
"""
import re
import shutil
import tempfile
from bisect import bisect_right
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from arboreal.errors import ArborealError
from arboreal.integrations import require

require("spacy", "spacy")

from spacy.attrs import DEP, HEAD  # noqa: E402
from spacy.language import Language  # noqa: E402
from spacy.parts_of_speech import IDS as _POS_IDS  # noqa: E402
from spacy.tokens import Doc  # noqa: E402
from spacy.util import minibatch  # noqa: E402

__all__ = ["ArborealParser", "make_arboreal", "ud_noun_chunks", "SENTENCE_MODES",
           "NOUN_CHUNK_MODES", "NON_UD_NOUN_CHUNK_LANGUAGES", "MODEL_FILE"]

#: the values of the ``use_sentences`` setting
SENTENCE_MODES = ("auto", "doc", "model", "none")
#: the values of the ``noun_chunks`` setting
NOUN_CHUNK_MODES = ("auto", "arboreal", "spacy")
#: languages whose spaCy noun-chunk iterator reads labels other than UD's (English:
#: ClearNLP's ``dobj``, ``pobj``, ``attr``...; German: TIGER's ``sb``, ``oa``...;
#: Persian: ClearNLP's), so that ``noun_chunks="auto"`` replaces it
NON_UD_NOUN_CHUNK_LANGUAGES = frozenset(("de", "en", "fa"))
#: relations (universal part) of a nominal that heads a base noun phrase
_CHUNK_RELATIONS = frozenset(("nsubj", "obj", "iobj", "obl", "nmod", "appos", "root",
                              "vocative", "dislocated", "expl"))
#: relations (universal part) of the left dependents that belong to a base noun phrase
#: (a determiner, an adjective, a number, a compound, a possessor...); the others
#: (case, cc, punct, cop, a subject left of a nominal predicate...) do not
_CHUNK_INSIDE = frozenset(("det", "amod", "nummod", "compound", "nmod", "flat", "fixed",
                           "clf", "acl"))
#: the model file's name in the folder written by :meth:`ArborealParser.to_disk`
MODEL_FILE = "model.npz"
#: dependency label of whitespace tokens
SPACE_DEP = "dep"
#: (Sentence attribute, how to read a token's value or None when unset)
_TAG_READERS: Tuple[Tuple[str, Callable[[Any], Optional[str]]], ...] = (
    ("upos", lambda t: t.pos_ if t.pos else None),
    ("xpos", lambda t: t.tag_ or None),
    ("lemmas", lambda t: t.lemma_ or None),
    ("feats", lambda t: (str(t.morph) or "_") if t.has_morph() else None),
)
_BLANK_LINES = re.compile(r"\n(?:[^\S\n]*\n)+")


def _set_pos(token, value: str) -> None:
    if value in _POS_IDS:
        token.pos_ = value


def _set_tag(token, value: str) -> None:
    token.tag_ = value


def _set_lemma(token, value: str) -> None:
    token.lemma_ = value


def _set_morph(token, value: str) -> None:
    try:
        token.set_morph(value)
    except (ValueError, KeyError):  # not a FEATS string spaCy accepts: leave the token
        pass


_TAG_WRITERS = {"upos": _set_pos, "xpos": _set_tag, "lemmas": _set_lemma, "feats": _set_morph}


def _relation(token) -> str:
    return token.dep_.split(":", 1)[0].lower()


def ud_noun_chunks(doclike) -> Iterator[Tuple[int, int, int]]:
    """Base noun phrases of a doc (or span) parsed with UD relations, as spaCy's
    noun-chunk iterators yield them: ``(start, end, label)`` token offsets, label
    ``NP``; install with ``nlp.vocab.get_noun_chunks = ud_noun_chunks`` (the component
    does it, see ``noun_chunks`` in the module docstring).

    A chunk is a noun, proper noun or pronoun whose relation is nominal
    (``nsubj``, ``obj``, ``iobj``, ``obl``, ``nmod`` but not ``nmod:poss``, ``appos``,
    ``root``, ``vocative``, ``dislocated``, ``expl``, with any subtype), or one
    coordinated (``conj``) with such a word, together with its left dependents that
    belong to the noun phrase (``det``, ``amod``, ``nummod``, ``compound``,
    ``nmod`` (a possessor), ``flat``, ``fixed``, ``clf``, ``acl``) and their subtrees;
    the chunk ends at the noun (no right modifiers: base noun phrases, as spaCy's
    English iterator). UD attaches prepositions to the noun (``case``), so "on the
    mat" gives the chunk "the mat". Chunks do not nest: a word whose chunk would reach
    into the previous chunk gives none. ValueError (spaCy's E029) for a doc without
    dependency annotation. O(tokens + their left children).
    """
    from spacy.errors import Errors
    from spacy.symbols import NOUN, PRON, PROPN

    doc = doclike.doc
    if not doc.has_annotation("DEP"):
        raise ValueError(Errors.E029)
    label = doc.vocab.strings.add("NP")
    poss = "nmod:poss"
    prev_end = -1
    for word in doclike:
        if word.pos not in (NOUN, PROPN, PRON):
            continue
        head = word
        while _relation(head) == "conj" and head.head.i < head.i:
            head = head.head
        if _relation(head) not in _CHUNK_RELATIONS or head.dep_.lower().startswith(poss):
            continue
        start = word.i
        for child in word.lefts:
            if _relation(child) in _CHUNK_INSIDE:
                start = min(start, child.left_edge.i)
        if start <= prev_end:
            continue
        prev_end = word.i
        yield start, word.i + 1, label


class ArborealParser:
    """The spaCy pipeline component (see the module docstring for the settings).

    ``model``: a model file path (loaded on first use) or an already loaded arboreal
    model (anything with ``parse``); ``nlp`` and ``name`` as spaCy passes them.
    """

    def __init__(self, nlp: Optional[Language] = None, name: str = "arboreal",
                 model: Any = None, *, overwrite_tags: bool = False,
                 use_sentences: str = "auto", noun_chunks: str = "auto") -> None:
        if use_sentences not in SENTENCE_MODES:
            raise ArborealError(f"use_sentences must be one of {', '.join(SENTENCE_MODES)}, "
                                f"not {use_sentences!r}")
        if noun_chunks not in NOUN_CHUNK_MODES:
            raise ArborealError(f"noun_chunks must be one of {', '.join(NOUN_CHUNK_MODES)}, "
                                f"not {noun_chunks!r}")
        self.name = name
        self.overwrite_tags = bool(overwrite_tags)
        self.use_sentences = use_sentences
        self.noun_chunks = noun_chunks
        self._chunker: Optional[Callable] = None
        if noun_chunks == "arboreal" or (noun_chunks == "auto" and nlp is not None and (
                nlp.lang in NON_UD_NOUN_CHUNK_LANGUAGES or nlp.vocab.get_noun_chunks is None)):
            self._chunker = ud_noun_chunks
            if nlp is not None:
                nlp.vocab.get_noun_chunks = ud_noun_chunks
        self._model = None
        self._model_path: Optional[str] = None
        if model is not None and hasattr(model, "parse"):
            self._model = model
        elif model is not None:
            self._model_path = str(model)
        self._error_handler: Optional[Callable] = None

    # ------------------------------------------------------------------ the model
    @property
    def arboreal_model(self):
        """The arboreal model, loaded from ``model_path`` on first access (ModelError
        naming the file when it cannot be read). Not named ``model``: spaCy probes that
        attribute of every component (``hasattr``) for a thinc model, which would load
        the file at ``add_pipe`` and, in ``spacy.load``, before ``from_disk``."""
        if self._model is None:
            if self._model_path is None:
                raise ArborealError(f"spaCy component {self.name!r} has no arboreal model: "
                                    "add it with config={'model': 'path/to/model.npz'}")
            import arboreal

            self._model = arboreal.load(self._model_path)
        return self._model

    @property
    def model_path(self) -> Optional[str]:
        """The file the model was (or will be) loaded from, or None."""
        return self._model_path

    @property
    def labels(self) -> Tuple[str, ...]:
        """The dependency labels the model can predict; empty until the model is loaded
        (first use, or ``from_disk``): spaCy reads this while it loads a saved pipeline,
        before the component's ``from_disk``, which must not load the model named in
        the config."""
        if self._model is None:
            return ()
        labeler = getattr(self._model, "labeler", None)
        labels = getattr(labeler, "labels", ())
        return tuple(str(x) for x in labels)

    # ------------------------------------------------------------------ processing
    def __call__(self, doc: Doc) -> Doc:
        """Parse one doc in place and return it."""
        self._process([doc])
        return doc

    def pipe(self, stream: Iterable[Doc], batch_size: int = 128) -> Iterator[Doc]:
        """Parse docs ``batch_size`` at a time (one ``model.parse`` call per batch),
        yielding them in order. With an error handler set (``nlp.set_error_handler``), a
        failing batch is passed to it instead of raising, and not yielded (spaCy's way)."""
        for batch in minibatch(stream, size=batch_size):
            docs = list(batch)
            try:
                self._process(docs)
            except Exception as exc:
                if self._error_handler is None:
                    raise
                self._error_handler(self.name, self, docs, exc)
                continue
            yield from docs

    def set_error_handler(self, error_handler: Callable) -> None:
        """The function ``(name, component, docs, exception)`` :meth:`pipe` calls when a
        batch fails (spaCy's convention)."""
        self._error_handler = error_handler

    def get_error_handler(self) -> Callable:
        """The error handler (one that raises when none was set)."""
        if self._error_handler is not None:
            return self._error_handler

        def raise_error(name, proc, docs, exc):
            raise exc
        return raise_error

    def _segments(self, doc: Doc, words: List[int]) -> List[List[int]]:
        """The word token indices of each sentence given to the parser (none empty)."""
        mode = self.use_sentences
        if mode in ("auto", "doc") and doc.has_annotation("SENT_START"):
            key = [s.start for s in doc.sents]
            position = words
        elif mode == "model" or (mode == "auto"
                                 and getattr(self.arboreal_model, "tokenizer", None) is not None):
            key = self._sentence_offsets(doc.text)
            position = [doc[i].idx for i in words]
        else:
            return [list(words)]
        groups: dict = {}
        for i, p in zip(words, position):
            groups.setdefault(max(bisect_right(key, p) - 1, 0), []).append(i)
        return [groups[k] for k in sorted(groups)]

    def _sentence_offsets(self, text: str) -> List[int]:
        """Character offsets where the model's sentence splitter starts a sentence;
        blank lines always end one."""
        tokenizer = getattr(self.arboreal_model, "tokenizer", None)
        if tokenizer is None:
            raise ArborealError("use_sentences='model' needs a model with a tokenizer (its "
                                "treebank had '# text' lines and it was not trained with "
                                "--no-tokenizer)")
        bounds, start = [], 0
        for m in _BLANK_LINES.finditer(text):
            bounds.append((start, m.start()))
            start = m.end()
        bounds.append((start, len(text)))
        paragraphs = [(a, b) for a, b in bounds if text[a:b].strip()]
        offsets: List[int] = []
        k = -1
        for _, spans, first in tokenizer.split(text[a:b] for a, b in paragraphs):
            if first:
                k += 1
            offsets.append(paragraphs[k][0] + spans[0][0])
        return offsets

    def _sentence(self, doc: Doc, idx: Sequence[int], retag: Tuple[str, ...]):
        """The arboreal Sentence of the word tokens ``idx`` of ``doc``."""
        from arboreal.io.sentence import Sentence

        tokens = [doc[i] for i in idx]
        columns = {}
        for attr, read in _TAG_READERS:
            if attr in retag:
                continue
            values = [read(t) for t in tokens]
            if any(v is not None for v in values):
                columns[attr] = ["_" if v is None else v for v in values]
        return Sentence.from_columns([t.text for t in tokens], **columns)

    def _process(self, docs: Sequence[Doc]) -> None:
        """Parse every sentence of ``docs`` in one ``model.parse`` call; set the trees
        and tags on the docs."""
        model = self.arboreal_model
        retag = tuple(getattr(model, "tag_columns", ())) if self.overwrite_tags else ()
        plans = []
        sentences = []
        for doc in docs:
            words = [t.i for t in doc if not t.is_space]
            segments = self._segments(doc, words) if words else []
            plans.append(segments)
            sentences.extend(self._sentence(doc, seg, retag) for seg in segments)
        parsed = iter(model.parse(sentences) if sentences else [])
        for doc, segments in zip(docs, plans):
            if segments:
                self._annotate(doc, segments, [next(parsed) for _ in segments], retag)

    def _annotate(self, doc: Doc, segments: List[List[int]], parsed: list,
                  retag: Tuple[str, ...]) -> None:
        """Write the parsed sentences' trees and tags onto ``doc``."""
        n = len(doc)
        heads = np.full(n, -1, dtype=np.int64)
        labels: List[Optional[str]] = [None] * n
        strings = doc.vocab.strings
        for seg, s in zip(segments, parsed):
            h = s.heads.tolist()
            d = s.deprels.tolist()
            for m, i in enumerate(seg, 1):
                if h[m] <= 0:    # spaCy's root is its own head
                    heads[i], labels[i] = i, d[m]
                else:
                    heads[i], labels[i] = seg[h[m] - 1], d[m]
                token = doc[i]
                for attr, write in _TAG_WRITERS.items():
                    value = getattr(s, attr)[m]
                    if value != "_" and (attr in retag or _unset(token, attr)):
                        write(token, value)
        # whitespace tokens: to the word before them (the first word for leading ones)
        previous = segments[0][0]
        for i in range(n):
            if heads[i] >= 0:
                previous = i
            else:
                heads[i] = previous
                labels[i] = SPACE_DEP
        array = np.empty((n, 2), dtype=np.uint64)
        array[:, 0] = (heads - np.arange(n, dtype=np.int64)).astype(np.uint64)
        array[:, 1] = [strings.add(x) for x in labels]
        doc.from_array([HEAD, DEP], array)
        if self._chunker is not None:
            doc.noun_chunks_iterator = self._chunker

    # ------------------------------------------------------------------ scoring
    def score(self, examples: Iterable, **kwargs: Any) -> dict:
        """Scores of ``examples`` (spaCy ``Example``s: the parsed ``predicted`` docs
        against the ``reference`` docs), what ``nlp.evaluate`` reports for this
        component: ``dep_uas``, ``dep_las``, ``dep_las_per_type``, ``sents_p``,
        ``sents_r``, ``sents_f``, and ``pos_acc``, ``tag_acc``, ``morph_acc``,
        ``lemma_acc`` for the columns the model's tagger predicts (all of them before
        the model is loaded). Computed by spaCy's :class:`spacy.scorer.Scorer` as for
        spaCy's own components (see the module docstring); ``kwargs`` (the
        ``scorer_cfg`` of ``nlp.evaluate``) go to its helpers, e.g.
        ``ignore_labels=()`` to score punctuation. Fractions 0..1, None for a score
        with nothing to count. O(tokens)."""
        from spacy.scorer import Scorer
        from spacy.training import validate_examples

        examples = list(examples)
        validate_examples(examples, "ArborealParser.score")
        results: dict = {}
        results.update(Scorer.score_spans(
            examples, "sents", has_annotation=lambda doc: doc.has_annotation("SENT_START"),
            **kwargs))
        results.pop("sents_per_type", None)
        if self._model is None:
            columns = set(_TAG_WRITERS)
        else:
            columns = set(getattr(self._model, "tag_columns", ()))
        plain = {k: v for k, v in kwargs.items() if k != "getter"}
        for attr, name in (("upos", "pos"), ("xpos", "tag"), ("lemmas", "lemma")):
            if attr in columns:
                results.update(Scorer.score_token_attr(examples, name, **plain))
        if "feats" in columns:
            results.update(Scorer.score_token_attr(
                examples, "morph", getter=lambda token, attr: getattr(token, attr).key,
                **plain))
        kwargs.setdefault("getter", _dep_getter)
        kwargs.setdefault("ignore_labels", ("p", "punct"))
        results.update(Scorer.score_deps(examples, "dep", **kwargs))
        return results

    # ------------------------------------------------------------------ serialization
    def _model_bytes(self) -> bytes:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / MODEL_FILE
            self._write_model(path)
            return path.read_bytes()

    def _write_model(self, path: Path) -> None:
        if self._model is not None:
            self._model.save(path)
        elif self._model_path is not None:
            from arboreal.models.names import resolve_model

            shutil.copyfile(resolve_model(self._model_path), path)
        else:
            raise ArborealError(f"spaCy component {self.name!r} has no arboreal model to save")

    def to_disk(self, path, *, exclude: Iterable[str] = ()) -> None:
        """Write the model into the folder ``path`` (as ``model.npz``)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self._write_model(path / MODEL_FILE)

    def from_disk(self, path, *, exclude: Iterable[str] = ()) -> "ArborealParser":
        """Load the model that :meth:`to_disk` wrote into the folder ``path``."""
        import arboreal

        file = Path(path) / MODEL_FILE
        self._model = arboreal.load(file)
        self._model_path = str(file)
        return self

    def to_bytes(self, *, exclude: Iterable[str] = ()) -> bytes:
        """The model file's bytes."""
        return self._model_bytes()

    def from_bytes(self, data: bytes, *, exclude: Iterable[str] = ()) -> "ArborealParser":
        """Load a model from :meth:`to_bytes`'s bytes."""
        import arboreal

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / MODEL_FILE
            path.write_bytes(data)
            self._model = arboreal.load(path)  # the loaders read every array at once
        self._model_path = None
        return self


def _dep_getter(token, attr: str) -> str:
    """A token's relation for scoring, lowercased (spaCy's root is ``ROOT``, UD's ``root``)."""
    return token.vocab.strings.as_string(getattr(token, attr)).lower()


def _unset(token, attr: str) -> bool:
    if attr == "upos":
        return not token.pos
    if attr == "xpos":
        return not token.tag_
    if attr == "lemmas":
        return not token.lemma_
    return not token.has_morph()


@Language.factory(
    "arboreal",
    default_config={"model": None, "overwrite_tags": False, "use_sentences": "auto",
                    "noun_chunks": "auto"},
    assigns=["token.head", "token.dep", "token.is_sent_start", "doc.sents", "token.pos",
             "token.tag", "token.lemma", "token.morph"],
)
def make_arboreal(nlp: Language, name: str, model: Optional[str], overwrite_tags: bool,
                  use_sentences: str, noun_chunks: str = "auto") -> ArborealParser:
    """The spaCy factory ``"arboreal"`` (see the module docstring for the config)."""
    return ArborealParser(nlp, name, model, overwrite_tags=overwrite_tags,
                          use_sentences=use_sentences, noun_chunks=noun_chunks)
