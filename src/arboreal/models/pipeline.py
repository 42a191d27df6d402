"""Tagger and parser in one model: what the parser sees is what it was trained on.

A parser's features read UPOS, XPOS, FEATS and LEMMA; text to be parsed rarely has
them. A model trained by :func:`train_pipeline` carries a :class:`Tagger` (attribute
``tagger``, saved in the same model file) and its parser is trained on *jackknifed*
predicted tags: the training treebank is cut into :data:`JACKKNIFE_FOLDS` consecutive
parts, each tagged by a tagger trained on the others, so the parser learns from tags
as wrong as the ones it will see. Five folds: each fold tagger sees 80% of the data
(its tags are a little worse than the final tagger's, which sees all of it), at the
cost of five extra tagger trainings (ten folds would double it). By default
(:data:`DEFAULT_PARSER_TAGS`) the parser also sees every training sentence with the
treebank's own tags, so that it learns what correct tags say as well as how far to
trust predicted ones; both copies beat the jackknifed tags alone
(docs/benchmarks.md, "pipeline_parser_tags").

:func:`complete_tags` is what every model's ``parse`` calls first: columns that are
``_`` throughout a sentence are predicted by the model's tagger (all of them with
``retag``); a model without a tagger refuses a sentence without UPOS rather than
parse it badly.

A parser whose scorer tags by itself (the neural scorer's joint classifiers) is trained
with ``tagger="choose"``: the linear tagger is trained beside it, and with dev data
the one whose tags score higher on dev (:func:`choose_tagger`) tags at parse time.
"""
from __future__ import annotations

import io
import warnings
from dataclasses import replace
from typing import Callable, Sequence

from arboreal.errors import ArborealError
from arboreal.io.model_file import MetaFields
from arboreal.models.tagger import COLUMNS, DEFAULT_EPOCHS, Tagger

JACKKNIFE_FOLDS = 5
#: what the parser of a pipeline trains on: "predicted" (the jackknifed tags), or
#: "both" (every training sentence twice, with its jackknifed tags and with the
#: treebank's own: the parser learns the tags' evidence and how far to trust it;
#: docs/benchmarks.md, "pipeline_parser_tags")
PARSER_TAGS = ("predicted", "both")
DEFAULT_PARSER_TAGS = "both"
#: fewer training sentences per fold than this: no jackknifing (a warning)
MIN_SENTENCES_PER_FOLD = 10
#: the columns a tagger can fill, as Sentence attributes
TAG_COLUMNS = tuple(COLUMNS.values())


class UntaggedInputError(ArborealError):
    """Input a model cannot tag: no UPOS and no tagger, or ``retag`` without a tagger."""


def has_column(sentences: Sequence, column: str) -> bool:
    """Whether some word of ``sentences`` has a value other than ``_`` in ``column``
    (a Sentence attribute: "upos", "xpos", "feats", "lemma"). O(words)."""
    return any(v != "_" for s in sentences for v in getattr(s, column)[1:].tolist())


def _missing(s, columns: Sequence[str]) -> tuple[str, ...]:
    """The columns of ``columns`` that are ``_`` for every word of ``s``."""
    if len(s) == 0:
        return ()
    return tuple(c for c in columns if all(v == "_" for v in getattr(s, c)[1:].tolist()))


def _where(i: int, s) -> str:
    return f"sentence {i + 1}" + (f" (line {s.line})" if s.line is not None else "")


def complete_tags(model, sentences: Sequence, retag: bool = False) -> list:
    """``sentences`` with the tagger's predictions where they lack tags (see the module
    docstring); the sentences themselves are not modified. UntaggedInputError for a
    sentence without UPOS (or ``retag``) when ``model`` has no tagger. O(words) plus the tagging."""
    sentences = list(sentences)
    tagger = getattr(model, "tagger", None)
    if tagger is None and getattr(getattr(model, "scorer", None), "tag_columns", None):
        return model.filled_tags(sentences, retag)      # a scorer that tags
    if tagger is None:
        if retag:
            raise UntaggedInputError("this model has no tagger, so it cannot retag its input "
                                "(train it without --no-tagger)")
        if not getattr(model, "reads_tags", True):   # a model of forms only
            return sentences
        for i, s in enumerate(sentences):
            if _missing(s, ("upos",)):
                raise UntaggedInputError(
                    f"{_where(i, s)} has no UPOS tags and this model has no tagger: its "
                    "parser needs tagged input (give tagged CoNLL-U, or train the model "
                    "with its tagger, the default of 'arboreal train')")
        return sentences
    wanted = [tagger.columns if retag else _missing(s, tagger.columns) for s in sentences]
    todo = [i for i, w in enumerate(wanted) if w]
    if not todo:
        return sentences
    tagged = tagger.tag([sentences[i] for i in todo])
    out = list(sentences)
    for i, t in zip(todo, tagged):
        out[i] = replace(sentences[i], **{c: getattr(t, c) for c in wanted[i]})
    return out


def jackknife(sentences: Sequence, folds: int = JACKKNIFE_FOLDS,
              train_tagger: Callable[[list], Tagger] | None = None,
              log: Callable[[str], None] | None = None) -> list:
    """Copies of ``sentences`` whose tag columns are predicted by taggers that did not
    see them: ``folds`` consecutive parts, each tagged by ``train_tagger(rest)``
    (default: ``Tagger.train`` with its defaults). O(folds) tagger trainings."""
    sentences = list(sentences)
    if folds < 2:
        raise ArborealError("jackknifing needs at least 2 folds")
    if len(sentences) < folds:
        raise ArborealError(f"{len(sentences)} training sentences are too few for "
                            f"{folds}-fold jackknifing of the tags (train with --no-tagger)")
    train_tagger = train_tagger or (lambda part: Tagger.train(part))
    bounds = [len(sentences) * k // folds for k in range(folds + 1)]
    out: list = []
    for k in range(folds):
        a, b = bounds[k], bounds[k + 1]
        if log is not None:
            log(f"tagger: jackknife fold {k + 1}/{folds} (sentences {a + 1}-{b})")
        tagger = train_tagger(sentences[:a] + sentences[b:])
        out.extend(tagger.tag(sentences[a:b]))
    return out


def train_pipeline(train: list, dev: list | None, parser_options: dict | None = None,
                   tagger: bool | str = True, tokenizer: bool = True, folds: int = JACKKNIFE_FOLDS,
                   tagger_epochs: int = DEFAULT_EPOCHS, seed: int = 0,
                   log: Callable[[str], None] | None = None, parser_reads_tags: bool = True,
                   clusters=None, parser_tags: str = DEFAULT_PARSER_TAGS, checkpoint=None):
    """Train a tokenizer on the ``# text`` lines of ``train`` (when ``tokenizer``; skipped
    with a warning when the treebank has none), a tagger (best epoch per stage on
    ``dev``), then the parser by ``Parser.train(train, dev, **parser_options)`` (its
    config, progress, log, checkpoint and other keywords) on jackknifed tags (dev
    tagged by the final tagger, as at parse time; ``parser_tags="both"``: the training
    sentences with jackknifed tags and again with their own, see :data:`PARSER_TAGS`);
    the returned parser carries the tokenizer and the tagger. ``tagger=False``: the parser on the given tags.
    ``tagger="choose"`` (a parser that tags by itself): the parser on the given tags and
    the linear tagger beside it, kept where its tags beat the parser's own on ``dev``
    (:func:`choose_tagger`; without dev the parser's own).
    ``parser_reads_tags=False`` (a parser of forms only): no jackknifing, the tagger only
    tags the output. ``clusters``: word clusters for the tagger's features (every
    jackknifing tagger's too). ``checkpoint``: a
    :class:`~arboreal.models.checkpoint.TrainingCheckpoint`; each finished stage
    (tokenizer, tagger, jackknifed tags) is saved there and taken from there when the
    training is resumed (the parser's epochs are checkpointed by the ``checkpoint``
    keyword of ``parser_options``)."""
    from arboreal.models.parser import Parser

    options = dict(parser_options or {})

    def train_parser(sentences, dev_sentences):
        return Parser.train(sentences, dev_sentences, **options)

    stages = _Stages(checkpoint)
    text_model = None
    if tokenizer:
        text_model = stages.tokenizer(lambda: _train_tokenizer(train, dev, seed, log))
    if parser_tags not in PARSER_TAGS:
        raise ArborealError(f"parser tags must be one of {', '.join(PARSER_TAGS)}, "
                            f"got {parser_tags!r}")
    from arboreal.learn.trainer import TrainingInterrupted

    try:
        model = _tagger_and_parser(train, dev, train_parser, tagger, folds, tagger_epochs,
                                   seed, log, parser_reads_tags, clusters, parser_tags, stages)
    except TrainingInterrupted as stop:
        if stop.model is not None:      # the best epoch so far, saved by the command line
            stop.model.tokenizer = text_model
        raise
    model.tokenizer = text_model
    return model


def _train_tokenizer(train, dev, seed, log):
    from arboreal.models.tokenizer import Tokenizer

    try:
        return Tokenizer.train(train, dev, seed=seed, log=log)
    except ArborealError as exc:
        warnings.warn(f"no tokenizer: {exc}", stacklevel=3)
        return None


def _tagger_and_parser(train, dev, train_parser, tagger, folds, tagger_epochs, seed, log,
                       parser_reads_tags=True, clusters=None, parser_tags=DEFAULT_PARSER_TAGS,
                       stages=None):
    stages = stages or _Stages(None)
    if tagger == "choose":
        linear = None
        if dev and has_column(train, "upos"):
            linear = stages.tagger(lambda: Tagger.train(train, dev, epochs=tagger_epochs,
                                                        seed=seed, log=log,
                                                        clusters=clusters), clusters)
        model = train_parser(train, dev)
        if linear is not None:
            model.tagger = choose_tagger(model, linear, dev, log)
        return model
    if not tagger:
        return train_parser(train, dev)
    if not has_column(train, "upos"):
        if parser_reads_tags:
            warnings.warn("the training data has no UPOS tags: no tagger is trained, and the "
                          "parser needs tagged input", stacklevel=2)
        return train_parser(train, dev)
    final = stages.tagger(lambda: Tagger.train(train, dev, epochs=tagger_epochs, seed=seed,
                                               log=log, clusters=clusters), clusters)
    if not parser_reads_tags:
        tagged_train = train
    elif len(train) < MIN_SENTENCES_PER_FOLD * folds:
        warnings.warn(f"{len(train)} training sentences are too few for {folds}-fold "
                      "jackknifing: the parser is trained on the treebank's own tags",
                      stacklevel=2)
        tagged_train = train
    else:
        # the fold taggers train as long as the final tagger's stages did on dev, and
        # decode as they do (greedy or Viterbi, chosen on dev)
        epochs = {name: max(st.epochs, 1) for name, st in final.stages.items()}
        decoding = {name: st.decoding for name, st in final.stages.items()}
        tagged_train = stages.jackknife(
            train, lambda: jackknife(train, folds,
                                     lambda part: Tagger.train(part, epochs=epochs, seed=seed,
                                                               decoding=decoding,
                                                               clusters=clusters), log))
        if parser_tags == "both":
            tagged_train = tagged_train + list(train)
        final.meta["parser_tags"] = parser_tags
    tagged_dev = final.tag(dev) if dev else None
    model = train_parser(tagged_train, tagged_dev)
    model.tagger = final
    final.meta["jackknife_folds"] = folds
    return model


def tagging_accuracy(predicted: Sequence, gold: Sequence, columns: Sequence[str]) -> dict:
    """column -> percentage of the words of ``gold`` whose value in ``predicted`` (the
    same sentences, tagged) is gold's. O(words x columns)."""
    import numpy as np

    out = {}
    words = max(sum(len(s) for s in gold), 1)
    for c in columns:
        right = sum(int(np.sum(getattr(p, c)[1:] == getattr(g, c)[1:]))
                    for p, g in zip(predicted, gold))
        out[c] = 100.0 * right / words
    return out


def choose_tagger(model, linear: Tagger, dev: Sequence, log: Callable | None = None):
    """``linear`` where its tags beat the tags of ``model``'s own scorer on ``dev`` (the
    mean accuracy over the tag columns dev annotates, each predicted from dev's words
    alone; a column a side does not predict counts 0 for it), else None (the scorer
    tags). The figures go to ``model.meta["tagger_choice"]``. O(dev words)."""
    columns = [c for c in TAG_COLUMNS if has_column(dev, c)]
    if not columns:
        return None
    blank = words_only(dev)
    own = model.filled_tags(blank, retag=True) if model.scorer.tag_columns else blank
    scores = {"scorer": tagging_accuracy(own, dev, columns),
              "linear": tagging_accuracy(linear.tag(blank), dev, columns)}
    mean = {k: sum(v.values()) / len(v) for k, v in scores.items()}
    chosen = "linear" if mean["linear"] > mean["scorer"] else "scorer"
    model.meta["tagger_choice"] = {"chosen": chosen, "on": "dev", "columns": columns,
                                   **{k: {c: round(x, 2) for c, x in v.items()}
                                      for k, v in scores.items()}}
    if log is not None:
        log(f"tagger: the {chosen} tags, dev accuracy " + ", ".join(
            f"{k} {mean[k]:.2f}" for k in ("scorer", "linear")) + " (mean over "
            + ", ".join(columns) + ")")
    return linear if chosen == "linear" else None


def words_only(sentences: Sequence) -> list:
    """Copies of ``sentences`` with every tag column (UPOS, XPOS, FEATS, lemmas) ``_``:
    what a model gets from tokenized text. O(words)."""
    import numpy as np

    def blank(column):
        out = np.array(column, dtype=object)
        out[1:] = "_"
        return out

    return [replace(s, **{c: blank(getattr(s, c)) for c in TAG_COLUMNS}) for s in sentences]


def scores_from_words(model, gold: Sequence) -> tuple[float, float]:
    """(UAS, LAS) of ``model`` on ``gold`` parsed from its words alone
    (:func:`words_only`: its tagger, or its scorer's own tags, fill the tag columns)."""
    from arboreal.models.parser import attachment_scores

    parsed = model.parse(words_only(gold))
    return attachment_scores(list(gold), [p.heads for p in parsed], [p.deprels for p in parsed])


class _Stages:
    """The pipeline's stages through a checkpoint folder: each one trained, then saved
    (with a checkpoint), or read back when a resumed training finished it before."""

    def __init__(self, checkpoint):
        self.checkpoint = checkpoint

    def _done(self, name: str) -> bool:
        return self.checkpoint is not None and self.checkpoint.has(name)

    def tokenizer(self, train: Callable):
        from arboreal.models.tokenizer import Tokenizer

        if self._done("tokenizer"):
            path, meta, arrays = self.checkpoint.load_stage("tokenizer")
            if "none" in meta:
                warnings.warn(f"no tokenizer: {meta['none']}", stacklevel=3)
                return None
            return Tokenizer.from_file_contents(MetaFields(path, meta), arrays)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = train()
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if self.checkpoint is not None:
            meta, arrays = {}, {}
            if model is None:
                why = [str(w.message) for w in caught if str(w.message).startswith("no tok")]
                meta["none"] = why[-1].removeprefix("no tokenizer: ") if why else "none"
            else:
                model.put(meta, arrays)
            self.checkpoint.save_stage("tokenizer", meta, arrays)
        return model

    def tagger(self, train: Callable, clusters) -> Tagger:
        if self._done("tagger"):
            path, meta, arrays = self.checkpoint.load_stage("tagger")
            return Tagger.from_file_contents(MetaFields(path, meta), arrays)
        final = train()
        if self.checkpoint is not None:
            meta, arrays = {}, {}
            final.put(meta, arrays)
            self.checkpoint.save_stage("tagger", meta, arrays)
        return final

    def jackknife(self, train: list, tag: Callable) -> list:
        """The jackknifed copies of ``train``: their tag columns are what the stage
        keeps (the rest is ``train``'s)."""
        import numpy as np

        from arboreal.io.model_file import get_string_list, put_strings

        if self._done("jackknife"):
            path, meta, arrays = self.checkpoint.load_stage("jackknife")
            out = list(train)
            for column in meta["columns"]:
                values = get_string_list(arrays, f"jk_{column}")
                k = 0
                for i, s in enumerate(out):
                    n = len(s)
                    col = np.array(getattr(s, column), dtype=object)
                    col[1:] = values[k: k + n]
                    out[i] = replace(out[i], **{column: col})
                    k += n
            return out
        tagged = tag()
        if self.checkpoint is not None:
            arrays: dict = {}
            for column in TAG_COLUMNS:
                put_strings(arrays, f"jk_{column}",
                            [v for s in tagged for v in getattr(s, column)[1:].tolist()])
            self.checkpoint.save_stage("jackknife", {"columns": list(TAG_COLUMNS)}, arrays)
        return tagged


#: the metadata sections of the pipeline's parts (not the parser's own)
PIPELINE_SECTIONS = ("tagger", "tokenizer")


def put_pipeline(model, meta: dict, arrays: dict) -> None:
    """Add ``model.tagger`` and ``model.tokenizer`` (those present) to a model file
    being written."""
    for part in PIPELINE_SECTIONS:
        if getattr(model, part, None) is not None:
            getattr(model, part).put(meta, arrays)


def attach_pipeline(model, path: str, meta: dict, arrays) -> None:
    """Set ``model.tagger`` and ``model.tokenizer`` from a model file (None where the
    file has none); ModelError naming the file when one is inconsistent."""
    from arboreal.errors import ModelError
    from arboreal.models.tokenizer import Tokenizer

    # the tagger's clusters are the parser's arrays when they are the same clustering:
    # read (and validated) once
    shared = {"tagger": {"parser_clusters": getattr(getattr(model, "features", None),
                                                    "clusters", None)}}
    for part, cls in (("tagger", Tagger), ("tokenizer", Tokenizer)):
        value = None
        if part in meta:
            try:
                value = cls.from_file_contents(MetaFields(path, meta), arrays,
                                               **shared.get(part, {}))
            except (KeyError, TypeError, ValueError) as exc:
                raise ModelError(f"{path}: model file's {part} is incomplete or corrupt "
                                 f"({exc})") from None
        setattr(model, part, value)


class PipelineMixin:
    """Text-level entry points shared by every parser class (``tagger`` and
    ``tokenizer`` attributes, ``parse(sentences, retag)`` method)."""

    tagger = None
    tokenizer = None

    def __call__(self, text: str, lines: bool = False):
        """``nlp(text)``: the :class:`~arboreal.io.document.Document` of raw text
        (:meth:`parse_text`); a list of token lists is parsed as given sentences."""
        from arboreal.io.document import Document

        if isinstance(text, str):
            return Document(self.parse_text(text, lines), text)
        if isinstance(text, (list, tuple)) and all(isinstance(t, (list, tuple)) for t in text):
            return Document(self.parse_tokens(text))
        raise TypeError("nlp(...) takes a text (str), or a list of sentences as lists of "
                        "tokens; for several texts use nlp.pipe(texts)")

    def pipe(self, texts, lines: bool = False, batch_size: int = 64):
        """One :class:`~arboreal.io.document.Document` per text of ``texts`` (any
        iterable, consumed lazily), parsed ``batch_size`` texts at a time (the parser
        batches their sentences by length)."""
        from arboreal.io.conllu import batched
        from arboreal.io.document import Document

        for group in batched(texts, batch_size):
            tokenized = [self._tokenized(t, lines) for t in group]
            parsed = self.parse([s for sentences in tokenized for s in sentences])
            at = 0
            for text, sentences in zip(group, tokenized):
                yield Document(parsed[at: at + len(sentences)], text)
                at += len(sentences)

    def _tokenized(self, text: str, lines: bool) -> list:
        """The sentences of raw ``text`` (one per line with ``lines``), tokenized."""
        if not isinstance(text, str):
            raise TypeError(f"a text must be a str, not {type(text).__name__}; for several "
                            "texts use nlp.pipe(texts)")
        if self.tokenizer is None:
            raise ArborealError("this model has no tokenizer (its treebank had no '# text' "
                                "lines, or it was trained with --no-tokenizer); give "
                                "tokenized input instead")
        if not text.strip():
            return []
        if lines:
            from arboreal.io.text import iter_lines

            return list(self.tokenizer.tokenize_lines(
                iter_lines(io.BytesIO(text.encode("utf-8")))))
        from arboreal.io.text import paragraphs_of

        return list(self.tokenizer.tokenize(paragraphs_of(text)))

    def parse_text(self, text: str, lines: bool = False) -> list:
        """Parse raw text: paragraphs separated by blank lines are tokenized, split into
        sentences, tagged and parsed; ``lines``: the text holds one sentence per line,
        tokenized and never split. ArborealError for a model without a tokenizer. A list
        of texts is parsed as the paragraphs of one text."""
        if isinstance(text, (list, tuple)) and all(isinstance(t, str) for t in text):
            text = "\n\n".join(text)
        return self.parse(self._tokenized(text, lines))

    def parse_tokens(self, sentences: Sequence[Sequence[str]]) -> list:
        """Parse pre-tokenized sentences (each a list of word forms)."""
        from arboreal.io.sentence import Sentence

        return self.parse([Sentence.from_columns(list(words)) for words in sentences])
