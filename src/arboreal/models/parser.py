"""The parser: a scorer, a factorization into parts, exact decoding.

One class for every order and scorer. Parsing is here; training
(:meth:`Parser.train`) is :mod:`arboreal.models.training`, which this module imports
only when a parser is trained, so that parsing never loads the learners
(:mod:`arboreal.learn`): it fits the feature vocabularies, trains the label classifier
on the gold trees (see :mod:`arboreal.scorers.labeler` for the two-stage design), for a
higher-order factorization the first-order pruner of
:mod:`arboreal.models.higher_order`, then runs a learner over arcs (and parts) under the
one epoch loop, keeping the best dev epoch.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from arboreal._arrays import as_aligned
from arboreal.errors import ArborealError, ModelError
from arboreal.features.first_order import templates_read_tags
from arboreal.inference.structure import TreeStructure, family_names, tree_structure
from arboreal.models.analysis import analyze, arc_marginals, score_matrices
from arboreal.models.higher_order import HigherOrder
from arboreal.models.pieces import parse_in_pieces
from arboreal.models.pipeline import (PIPELINE_SECTIONS, PipelineMixin, attach_pipeline,
                                       complete_tags, put_pipeline)
from arboreal.io.model_file import (MetaFields, put_weights,
                                           save_model_file)
from arboreal.scorers import scorer_class, scorer_kinds
from arboreal.scorers.hashed import SECTIONS as HASHED_SECTIONS
#: the metadata sections every scorer may write (not the parser's own)
SCORER_SECTIONS = (*HASHED_SECTIONS, "neural")


def attachment_scores(gold: list, pred_heads: list, pred_labels: list | None = None
                      ) -> tuple[float, float]:
    """(UAS, LAS) in percent over every word of ``gold`` sentences."""
    total = correct = lcorrect = 0
    for i, s in enumerate(gold):
        ok = np.asarray(pred_heads[i])[1:] == s.heads[1:]
        total += len(s)
        correct += int(ok.sum())
        if pred_labels is not None:
            lok = ok & (np.asarray(pred_labels[i], dtype=object)[1:] == s.deprels[1:])
            lcorrect += int(lok.sum())
    if total == 0:
        return 0.0, 0.0
    return 100.0 * correct / total, 100.0 * lcorrect / total


def _tag_values(column: str, sentence, values: np.ndarray, lemma_lookup: dict) -> np.ndarray:
    """A scorer's predicted classes of ``column`` as the column's values: a lemma from
    ``lemma_lookup`` by the form and the sentence's UPOS and FEATS, else the predicted
    rule applied to the form; other classes as they are."""
    if column != "lemmas":
        return values
    from arboreal.features.lemmas import lookup_lemmas

    return np.array(lookup_lemmas(lemma_lookup, sentence.forms[1:].tolist(),
                                  sentence.upos[1:].tolist(), sentence.feats[1:].tolist(),
                                  values.tolist()), dtype=object)


def _with_columns(original, tagged):
    """``original`` with the tag columns of ``tagged`` (a parsed copy of it)."""
    from dataclasses import replace

    return replace(original, **{c: getattr(tagged, c) for c in
                                ("upos", "xpos", "feats", "lemmas")})


class Parser(PipelineMixin):
    """Spanning-tree parser: first order (McDonald, Crammer & Pereira 2006) or with
    higher-order parts (Koo & Collins 2010).

    Attributes: ``features`` (:class:`FeatureSet`), ``weights`` (dim,) float32 (arc
    and part features share them), ``labeler`` (:class:`Labeler`), ``decoder``
    ("eisner" or "cle"), ``single_root``, ``meta`` (training options and history,
    saved with the model), ``higher_order`` (:class:`~arboreal.models.higher_order.HigherOrder`:
    parts, pruner, memory budget; None at first order); for a jointly labeled model
    (learner ``loglinear-labeled``) also ``label_features``
    (:class:`~arboreal.features.labels.LabelFeatures`) and ``label_weights``, which
    then choose the labels instead of ``labeler``.
    """

    model_type = "parser"

    def __init__(self, scorer, decoder: str = "eisner", single_root: bool = True,
                 meta: dict | None = None, higher_order: HigherOrder | None = None):
        #: where the scores come from (:mod:`arboreal.scorers`)
        self.scorer = scorer
        self.decoder = decoder
        self.single_root = bool(single_root)
        self.meta = dict(meta or {})
        #: sentences parsed in pieces so far (longer than arboreal.models.pieces.MAX_WORDS)
        self.split_total = 0
        #: the Tokenizer and Tagger before the parser (arboreal.models.pipeline)
        self.tokenizer = self.tagger = None
        self.higher_order = higher_order
        #: training sentences left out of the epochs (over the memory budget)
        self.train_skipped = 0

    @property
    def structure(self) -> TreeStructure:
        """The trees the model decodes (:class:`~arboreal.inference.structure.TreeStructure`)."""
        return tree_structure(self.decoder, self.single_root)

    # the linear scorer's parts, read and set through the parser by the code that works
    # on linear models (None for other scorers)
    features = property(lambda self: getattr(self.scorer, "features", None),
                        lambda self, v: setattr(self.scorer, "features", v))
    weights = property(lambda self: getattr(self.scorer, "weights", None),
                       lambda self, v: setattr(self.scorer, "weights", as_aligned(v)))
    labeler = property(lambda self: getattr(self.scorer, "labeler", None),
                       lambda self, v: setattr(self.scorer, "labeler", v))
    label_features = property(lambda self: getattr(self.scorer, "label_features", None),
                              lambda self, v: setattr(self.scorer, "label_features", v))
    label_weights = property(lambda self: getattr(self.scorer, "label_weights", None),
                             lambda self, v: setattr(self.scorer, "label_weights", v))

    @property
    def order(self) -> int:
        """1 (arcs), 2 (siblings, grandparents) or 3 (grand-siblings, tri-siblings)."""
        if self.higher_order is None:
            return getattr(self.scorer, "order", 1)
        return self.higher_order.order

    @property
    def reads_tags(self) -> bool:
        """Whether some template of the model (arcs, lexical, parts, labels) reads a tag
        column (UPOS, XPOS, FEATS, LEMMA). A model of forms only (``--features words``)
        parses untagged input without a tagger."""
        if self.scorer.kind != "hashed":
            return bool(self.scorer.reads_tags)
        if self.label_features is not None:       # joint label features read UPOS
            return True
        texts = list(self.labeler.templates)
        if self.higher_order is not None:
            texts += [t for ts in self.higher_order.parts.templates.values() for t in ts]
        return self.features.reads_tags or templates_read_tags(texts)

    @property
    def tag_columns(self) -> tuple:
        """The tag columns this model fills (Sentence attributes): its tagger's, or
        those its scorer predicts as it parses (empty: the input must be tagged)."""
        if self.tagger is not None:
            return tuple(self.tagger.columns)
        return tuple(self.scorer.tag_columns)

    @property
    def fallbacks_total(self) -> int:
        """Sentences parsed at first order so far because they were over the
        higher-order memory budget (0 at first order)."""
        return 0 if self.higher_order is None else self.higher_order.fallbacks_total

    def _first_order_only(self, what: str) -> None:
        if self.order > 1:
            raise ArborealError(f"{what} needs a first-order model (exact marginals and "
                                f"k-best trees); this model is of order {self.order}")

    # ------------------------------------------------------------------ training
    @classmethod
    def train(cls, train_sentences: list, dev: list | None = None, config=None, *,
              progress: Callable | None = None, log: Callable | None = None,
              mixing: Callable | None = None, clusters=None, lexicon=None, checkpoint=None,
              **options) -> "Parser":
        """Train a parser on ``train_sentences`` (Sentence objects with complete trees),
        with ``dev`` (the same) to evaluate every epoch on and keep the best one.

        ``config``: a :class:`~arboreal.models.training.TrainingConfig`, which holds every
        option with its default (learner and its options, epochs, patience, seed,
        decoder, features, the factorization and its higher-order options, the neural
        scorer's options), or the same as keyword ``options`` (``Parser.train(sents,
        learner="loglinear", order=2, pruner_epochs=3)``; a keyword that names no option
        is a learner option, e.g. ``C=0.1``). The rest are objects, not options:
        ``progress(iterable, epoch)`` wraps each epoch's iteration (a progress bar);
        ``log(EpochReport)`` is called after each epoch; ``mixing`` trains the learner by
        iterative parameter mixing, e.g. on a Dask cluster
        (``arboreal.learn.mixing.parameter_mixing(client, shards, mode)``); ``clusters``
        (:class:`~arboreal.features.clusters.Clusters`) and ``lexicon``
        (:class:`~arboreal.features.lexicon.Lexicon`) add their features and are stored
        in the model; ``checkpoint`` (a
        :class:`~arboreal.models.checkpoint.ParserCheckpoint`) saves the trainer's state
        after every epoch and resumes from it.

        The flow (features, label classifier, pruner, the epochs under the one trainer,
        the C grid, the decoder choice) is :mod:`arboreal.models.training`, imported
        only here: parsing never loads the learners.
        """
        from arboreal.models.training import TrainingConfig, train_parser

        if isinstance(config, str):     # the learner, once the third argument
            options["learner"], config = config, None
        if config is None:
            try:
                config = TrainingConfig.from_options(**options)
            except TypeError as exc:
                raise ArborealError(str(exc)) from None
        elif options:
            raise ArborealError(f"give the options in the config or as keywords, not both "
                                f"({', '.join(sorted(options))})")
        return train_parser(cls, list(train_sentences), dev, config, progress, log, mixing,
                            clusters, lexicon, checkpoint)

    # ------------------------------------------------------------------ parsing
    def set_weights(self, w: np.ndarray) -> None:
        """Set a linear scorer's weights from a learner's vector ([w, v] for a jointly
        labeled model)."""
        self.scorer.set_weights(w)

    def predict_encoded(self, encoded, masks: list | None = None, tags: tuple = ()
                        ) -> tuple[list, list, dict]:
        """(heads, labels, {column: values}) of encoded sentences (the scorer's
        ``encode``), the scorer's ``tags`` columns among them; ``masks``: a higher-order
        model's pruning masks of them, if already computed. Batch by batch, so that a
        scorer that computes labels and tags from the same states as the arc scores
        computes them once. The one prediction path: :meth:`predict`, :meth:`parse` and
        the trainer's dev scoring go through it."""
        lengths = self.scorer.lengths(encoded)
        out_heads: list = [np.array([-1], dtype=np.int64)] * len(lengths)
        out_labels: list = [np.array(["<root>"], dtype=object)] * len(lengths)
        out_tags: dict = {c: [np.zeros(0, dtype=object)] * len(lengths) for c in tags}
        if self.higher_order is not None:
            out_heads = self.higher_order.decode_all(encoded, self.weights, masks)
        nonempty = np.flatnonzero(lengths > 0)
        structure = self.structure
        for part in self.scorer.batches(lengths[nonempty]):
            rows = nonempty[part]
            if self.higher_order is None and self.order > 1:
                # a scorer of second-order parts: each sentence's arcs pruned by its
                # first-order marginals, then the exact second-order decoder
                for k, p in self.scorer.potentials(encoded, rows):
                    if p.kinds:
                        allowed = structure.prune(structure.marginals(p.arc))
                        out_heads[rows[k]] = structure.decode_parts(p, allowed)
                    else:
                        out_heads[rows[k]] = structure.decode(p.arc)
            elif self.higher_order is None:
                # sentences of similar length are decoded as one padded batch: one kernel
                # call (with the batched Eisner's SIMD lanes) instead of one call each
                S = self.scorer.arc_scores(encoded, rows)
                heads = structure.decode(S, lengths[rows])
                for b, i in enumerate(rows):
                    out_heads[i] = heads[b, : lengths[i] + 1].copy()
            for i, d in zip(rows, self.scorer.predict_labels(encoded, rows,
                                                             [out_heads[i] for i in rows])):
                out_labels[i] = d
            if tags:
                predicted = self.scorer.predict_tags(encoded, rows)
                for c in tags:
                    for i, v in zip(rows, predicted[c]):
                        out_tags[c][i] = v
        return out_heads, out_labels, out_tags

    def predict_heads(self, sentences: list) -> list[np.ndarray]:
        """Heads (n+1,) of every sentence (tags as given): :meth:`predict`'s first half."""
        return self.predict(list(sentences))[0]

    def pruning_recall(self, sentences: list) -> tuple[float, float]:
        """A higher-order model's (share of gold heads its pruning keeps, kept heads per
        word) on gold-tree sentences."""
        if self.higher_order is None:
            raise ArborealError("a first-order model prunes nothing")
        sentences = list(sentences)
        return self.higher_order.pruning_recall(
            self.scorer.encode(sentences), [np.asarray(s.heads) for s in sentences])

    def predict(self, sentences: list) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """(heads, deprels) for every sentence, without building new Sentence objects."""
        heads, labels, _ = self.predict_encoded(self.scorer.encode(sentences))
        return heads, labels

    def parse(self, sentences: list, retag: bool = False, decode: str = "map",
              probabilities: bool = False) -> list:
        """Parsed copies of ``sentences``: HEAD and DEPREL filled, DEPS ``_``, everything
        else kept, except tag columns that are ``_`` throughout a sentence, which the
        model's tagger fills (every tag column with ``retag``; see
        :func:`arboreal.models.pipeline.complete_tags`). Sentences over
        :data:`arboreal.models.pieces.MAX_WORDS` words are parsed in pieces (bounded
        memory; counted in ``split_total``).

        ``decode``: "map" (the best tree) or "mbr" (the tree with the most expected
        correct heads under the arc marginals); ``probabilities``: each word's
        ``HeadProb`` and ``LabelProb`` in MISC (see :mod:`arboreal.models.analysis`)."""
        if decode != "map" or probabilities:
            self._first_order_only("MBR decoding and probabilities")
        if self.scorer.tag_columns and self.tagger is None:
            # the scorer tags as it parses: the tree's pass fills the tags (map), or
            # one pass fills them first (the analyses)
            if decode != "map" or probabilities:
                sentences = self.filled_tags(sentences, retag)
        else:
            sentences = complete_tags(self, sentences, retag)
        fell_back: list = []
        if decode == "map" and not probabilities:
            def whole(batch: list) -> list:
                out = self._parse_whole(batch, retag)
                if self.higher_order is not None:
                    fell_back.extend(self.higher_order.last_fallback_rows)
                return out
        else:
            def whole(batch: list) -> list:
                return [trees[0] for trees in analyze(self, batch, 1, decode, probabilities)]
        owners: list = []
        parsed, split = parse_in_pieces(whole, sentences, self.single_root, owners=owners)
        self.split_total += split
        if split and fell_back:
            # the fallbacks were counted per piece: a sentence counts once
            self.higher_order.fallbacks_total -= len(fell_back) - len(
                {owners[r] for r in fell_back})
        return parsed

    def parse_kbest(self, sentences: list, k: int, retag: bool = False,
                    probabilities: bool = False) -> list[list]:
        """The ``k`` best trees of every sentence (exact, best first, distinct; fewer when
        fewer trees exist) as parsed copies with ``# kbest_rank`` and ``# tree_score``
        comments. O(k n^3) per sentence (Eisner k-best or Lawler-partitioned CLE)."""
        self._first_order_only("k-best parsing")
        return analyze(self, complete_tags(self, sentences, retag), k, "map", probabilities)

    def arc_marginals(self, sentences: list, retag: bool = False) -> list[np.ndarray]:
        """P(head of m is h) as (n+1, n+1) float64 per sentence (column m >= 1 sums to
        1, column 0 zeros), at the temperature fitted on dev at training. O(n^3) each."""
        self._first_order_only("arc marginals")
        sentences = complete_tags(self, sentences, retag)
        mats = score_matrices(self, self.scorer.encode(sentences))
        return [arc_marginals(self, summed) for _, summed in mats]

    def filled_tags(self, sentences: list, retag: bool) -> list:
        """Copies of ``sentences`` with the scorer's tags where they lack them (all with
        ``retag``); their trees as given."""
        return [_with_columns(orig, s)
                for orig, s in zip(sentences, self._parse_whole(sentences, retag))]

    def _parse_whole(self, sentences: list, retag: bool = False) -> list:
        columns = tuple(self.scorer.tag_columns)
        heads, labels, tags = self.predict_encoded(self.scorer.encode(sentences), tags=columns)
        out = [s.with_tree(h, d) for s, h, d in zip(sentences, heads, labels)]
        if columns:
            # a scorer that tags fills the columns a sentence lacks (every one with retag)
            for k, s in enumerate(out):
                for c in columns:
                    if retag or all(v == "_" for v in getattr(s, c)[1:].tolist()):
                        col = np.array(getattr(s, c), dtype=object)
                        # UPOS and FEATS come before lemmas: the lemma lookup reads them
                        col[1:] = _tag_values(c, s, tags[c][k], self.scorer.lemma_lookup)
                        setattr(s, c, col)
        return out

    # ------------------------------------------------------------------ persistence
    def save(self, path) -> None:
        """Write the model to one .npz file (no pickle), atomically."""
        arrays: dict = {}
        meta = {"model_type": self.model_type, "decoder": self.decoder,
                "single_root": self.single_root, **self.meta}
        if self.scorer.kind != "hashed":       # files of linear models name no scorer
            meta["scorer"] = self.scorer.kind
        self.scorer.put(meta, arrays)
        if self.higher_order is not None:
            put_weights(arrays, "p", self.higher_order.prune_weights)
            meta["higher_order"] = self.higher_order.config()
        put_pipeline(self, meta, arrays)
        save_model_file(path, meta, arrays)

    @classmethod
    def load(cls, path) -> "Parser":
        """:func:`arboreal.load` (a path or a model name), checked to be a parser."""
        from arboreal.models import load

        return load(path, cls.model_type)

    @classmethod
    def from_file_contents(cls, path: str, meta: dict, arrays) -> "Parser":
        """A parser from a model file's metadata and arrays (:func:`~arboreal.models.open_model`);
        every field and array is checked against the others, ModelError naming the
        file and the field on any problem."""
        if meta.get("model_type") != cls.model_type:
            raise ModelError(f"{path}: model type {meta.get('model_type')!r:.40} is not "
                             f"{cls.model_type!r}")
        fields = MetaFields(path, meta)
        decoder = fields.choice("decoder", family_names())
        single_root = fields.bool("single_root")
        kind = fields.choice("scorer", scorer_kinds(), default="hashed")
        if fields.has("calibration"):
            cal = fields.section("calibration")
            for key in ("arc_temperature", "label_temperature"):
                cal.number(key, 1e-6, 1e6, default=1.0)
        try:
            scorer = scorer_class(kind).from_file(fields, arrays)
            ho = None
            if fields.has("higher_order"):
                if kind != "hashed":
                    raise fields.fail("higher_order", f"beside a {kind} scorer")
                ho = HigherOrder.from_file(fields, arrays, scorer.features, single_root)
                if tree_structure(decoder).projective != ho.projective:
                    raise fields.fail("decoder", "disagrees with the higher-order decoder")
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"{path}: model file is incomplete or corrupt ({exc})") from None
        if getattr(scorer, "label_features", None) is not None and ho is not None:
            raise fields.fail("label_features", "beside higher-order parts")
        rest = {k: v for k, v in meta.items()
                if k not in ("format", "format_version", "model_type", "decoder", "single_root",
                             "scorer", *SCORER_SECTIONS, "higher_order", *PIPELINE_SECTIONS)}
        parser = cls(scorer, decoder, single_root, rest, ho)
        attach_pipeline(parser, path, meta, arrays)
        return parser
