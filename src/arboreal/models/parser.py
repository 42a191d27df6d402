"""The parser: hashed features, a factorization into parts, a learner, exact decoding.

One class for every order. ``Parser.train`` fits the feature vocabularies, trains the
label classifier on the gold trees (see :mod:`arboreal.models.labeler` for the
two-stage design), and, for a higher-order factorization (``order`` 2 or 3, or
``parts``), the first-order pruner of :mod:`arboreal.models.higher_order`; then it
runs a learner from :data:`arboreal.learn.LEARNERS` over arcs (and parts); with a dev
set it evaluates UAS and LAS after every epoch and keeps the best epoch's weights.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

from arboreal.errors import ArborealError, ModelError
from arboreal.inference.higher_order import PartIndex
from arboreal.inference.higher_order.memory import MemoryBudgetWarning
from arboreal.features.first_order import (ATTRS, CLUSTER_ATTRS, N_RESERVED, FeatureSet,
                                          templates_read_tags)
from arboreal.features.higher_order import CLUSTER_PART_TEMPLATES, DEFAULT_PART_TEMPLATES
from arboreal.features.hashing import as_aligned
from arboreal.inference.structure import TreeStructure
from arboreal.learn import DEFAULT_LEARNER, TrainingData, get_learner
from arboreal.learn.trainer import held_out_split
from arboreal.models.analysis import analyze, arc_marginals, score_matrices
from arboreal.models.higher_order import (OPTIONS as HIGHER_ORDER_OPTIONS, HigherOrder,
                                          default_pruner_epochs, parse_parts)
from arboreal.models.pieces import parse_in_pieces
from arboreal.models.pipeline import (PIPELINE_SECTIONS, PipelineMixin, attach_pipeline,
                                       complete_tags, put_pipeline)
from arboreal.models.labeler import TRAIN_TABLE_ENTRIES, Labeler, fitting_bits, label_templates
from arboreal.models.serialization import (MetaFields, put_weights,
                                           save_model_file)
from arboreal.scorers import SCORERS, scorer_class
from arboreal.scorers.hashed import SECTIONS as HASHED_SECTIONS, HashedScorer

DECODERS = ("eisner", "cle", "auto")
#: training epochs of a learner that names no default of its own
DEFAULT_EPOCHS = 10
#: the metadata sections every scorer may write (not the parser's own)
SCORER_SECTIONS = (*HASHED_SECTIONS, "neural")


class _StopEarly(Exception):
    """Raised by ``Parser.train``'s epoch callback to end a learner's run early."""

    def __init__(self, epoch: int):
        super().__init__(epoch)
        self.epoch = epoch


@dataclass
class EpochReport:
    """What ``Parser.train`` reports after each epoch (passed to ``log``); ``stage``
    "pruner" for the epochs of a higher-order model's first-order pruner."""

    epoch: int
    seconds: float
    dev_uas: float | None
    dev_las: float | None
    best: bool
    stage: str = "parser"
    #: the meta-parameter value being tried, e.g. "C=0.1" (empty when none is searched)
    setting: str = ""


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


def _check_trees(sentences: list, what: str) -> None:
    for k, s in enumerate(sentences):
        if not s.has_heads:
            raise ArborealError(f"{what}: sentence {k + 1} has words without a head; "
                                "training and dev data need complete trees")


def _train_higher_order(fs: FeatureSet, enc: list, heads: list, arc_heads: list, kinds: tuple,
                        epochs: int, seed: int, single_root: bool, projective: bool,
                        part_templates: dict | None, options: dict,
                        tune_on: tuple | None, log: Callable | None):
    """The higher-order side of ``Parser.train``: the pruner (``options``: the
    higher-order options with their defaults), the pruning masks of the training
    sentences (gold arcs ``arc_heads`` kept) and which of them fit the memory budget.
    Returns ``(HigherOrder, the indices of the training sentences of the epochs, their
    encodings and arc-model heads, their decoder (i, w) -> heads, their part_index
    (see TrainingData; None when the parts have no marginals), the pruning facts for
    the model's metadata)``."""
    options = dict(options)
    pruner_epochs = (options.pop("pruner_epochs")
                     or default_pruner_epochs(sum(len(h) - 1 for h in heads), epochs))
    parse_recall = options.pop("parse_prune_recall")
    if parse_recall is not None and not 0.0 < parse_recall <= 1.0:
        raise ArborealError("parse_prune_recall must lie in (0, 1]")

    def pruner_log(epoch: int, seconds: float) -> None:
        if log is not None:
            log(EpochReport(epoch, seconds, None, None, False, stage="pruner"))

    try:
        ho = HigherOrder.train(fs, enc, heads, kinds, pruner_epochs, seed, single_root,
                               projective=projective, templates=part_templates,
                               log=pruner_log, tune_on=tune_on, **options)
    except (ValueError, TypeError) as exc:
        raise ArborealError(str(exc)) from None
    masks = ho.masks(enc, arc_heads)
    fit = [i for i, a in enumerate(masks) if a is not None and ho.mask_fits(a)]
    if len(fit) < len(enc):
        warnings.warn(f"{len(enc) - len(fit)} training sentence(s) over the memory budget "
                      f"({ho.memory_budget / 2**20:.4g} MiB) left out of the order-{ho.order} "
                      f"epochs (used by the first-order pruner and the labeler only)",
                      MemoryBudgetWarning, stacklevel=3)
    fit_enc = [enc[i] for i in fit]
    fit_masks = [masks[i] for i in fit]
    recall, per_word = ho.pruning_recall(enc, heads)
    pruning = {"pruner_epochs": pruner_epochs, "gold_heads_kept_train": recall,
               "kept_heads_per_word_train": per_word, "temperature": ho.prune_temperature,
               "temperature_choice": ho.temperature_choice, "options": options}
    if parse_recall is not None:
        # the training masks above keep many competitors of the gold arcs for the
        # learner; parsing (and the dev scores of the epochs) may prune harder
        t_encs, t_golds, tuned_on = ho.tuning_set
        table = ho.tuning_table if ho.tuning_table is not None else ho.pruning_table(t_encs,
                                                                                     t_golds)
        choice = ho.use_pruning(ho.choose_pruning(table, parse_recall))
        pruning["parse_choice"] = {**choice, "target": parse_recall, "on": tuned_on}

    def decode(i: int, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
        arc = None if bias is None else ho.features.arc_scores(fit_enc[i], w) + bias
        return ho.decode(fit_enc[i], fit_masks[i], w, arc)

    part_index = None
    if ho.has_marginals and projective:
        indexes: dict[int, PartIndex] = {}   # built on first use, kept for the epochs

        def part_index(i: int) -> PartIndex:
            index = indexes.get(i)
            if index is None:
                index = indexes[i] = PartIndex.compact(fit_masks[i])
            return index

    return ho, fit, fit_enc, [arc_heads[i] for i in fit], decode, part_index, pruning


def _tag_values(column: str, sentence, values: np.ndarray) -> np.ndarray:
    """A scorer's predicted classes of ``column`` as the column's values: lemma rules
    applied to the forms, other classes as they are."""
    if column != "lemmas":
        return values
    from arboreal.models.tagger import apply_rule

    return np.array([apply_rule(f, r) for f, r in zip(sentence.forms[1:].tolist(),
                                                       values.tolist())], dtype=object)


def _with_columns(original, tagged):
    """``original`` with the tag columns of ``tagged`` (a parsed copy of it)."""
    from dataclasses import replace

    return replace(original, **{c: getattr(tagged, c) for c in
                                ("upos", "xpos", "feats", "lemmas")})


def _is_projective(heads: np.ndarray) -> bool:
    n = len(heads) - 1
    for m in range(1, n + 1):
        h = heads[m]
        lo, hi = min(h, m), max(h, m)
        for x in range(lo + 1, hi):
            a = x
            while a > 0 and a != h:
                a = heads[a]
            if a != h:
                return False
    return True


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
        return TreeStructure.of_decoder(self.decoder, self.single_root)

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
        return 1 if self.higher_order is None else self.higher_order.order

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
        if self.higher_order is not None:
            raise ArborealError(f"{what} needs a first-order model (exact marginals and "
                                f"k-best trees); this model is of order {self.order}")

    # ------------------------------------------------------------------ training
    @classmethod
    def train(cls, train_sentences: list, dev: list | None = None, learner: str = DEFAULT_LEARNER,
              decoder: str = "eisner", single_root: bool = True, epochs: int | None = None,
              seed: int = 0,
              features: str = "default", hash_bits: int = 23, feature_cutoff: int = 0,
              label_epochs: int | None = None, label_bits: int = 18,
              progress: Callable | None = None, log: Callable[[EpochReport], None] | None = None,
              projectivize: bool | None = None, label_feature_bits: int = 16,
              mixing: Callable | None = None, order: int = 1,
              parts: str | list[str] | None = None, part_templates: dict | None = None,
              clusters=None, lexicon=None, lexical_templates: list[str] | None = None,
              top_words: int = 0, patience: int | None = None, scorer: str = "hashed",
              scorer_options: dict | None = None, embeddings: str | None = None,
              max_seconds: float | None = None, device: str = "cpu",
              **learner_options) -> "Parser":
        """Train a parser.

        scorer: "hashed" (linear, the learners below) or "neural" (BiLSTM and biaffine
            scores trained by gradient, see :mod:`arboreal.models.neural`: its
            ``scorer_options``, pretrained ``embeddings``, ``max_seconds``, ``device``;
            decoder "cle" or "eisner" (default for it: "cle"); the linear options do not
            apply).

        train_sentences / dev: lists of Sentence with complete trees.
        learner: a name in ``arboreal.learn.LEARNERS`` (perceptron, mira, kbest-mira,
            factored-mira, ...); ``learner_options`` go to its constructor.
        decoder: "eisner" (projective), "cle" (non-projective) or "auto" (train
            non-projectively; every epoch is scored on dev with both decoders and the
            best epoch and decoder are kept together; without dev, CLE if the training
            data has non-projective trees, else Eisner).
        features: "default", "mcdonald" or "words" (forms only, no tags);
            hash_bits: 2**hash_bits weights;
        feature_cutoff: keep features seen >= K times in gold training trees.
        top_words: word, 5-prefix and lemma features only for the N most frequent
            values in training (0: all; see :class:`~arboreal.features.FeatureSet`).
        progress(iterable, epoch) wraps each epoch's iteration (progress bar);
        log(EpochReport) is called after each epoch.
        projectivize: when training projectively (decoder "eisner"), replace each
            non-projective training tree by a minimum-loss projective tree for the arc
            model (Koo et al. 2007, footnote 4); the labeler still sees the gold trees.
            Default (None): at first order only.
        order / parts: the factorization: order 1 (arcs), 2 (siblings and
            grandparents) or 3 (also grand-siblings and tri-siblings), or the part
            kinds by name (sibling, grandparent, grand-sibling, tri-sibling);
            ``part_templates`` {kind: templates} replaces their default templates.
            Higher orders train the first-order pruner of
            :mod:`arboreal.models.higher_order` first; its options
            (``HIGHER_ORDER_OPTIONS``: pruner_epochs, max_heads, threshold,
            prune_temperature, grand_scope, memory_budget) may be given among
            ``learner_options``. The learner must then be an online one (perceptron,
            mira, kbest-mira: 1-best there); decoder "eisner" (exact projective) or
            "cle" (projective tree, then hill-climbing; sibling and grandparent parts).
        clusters: a word clustering (:class:`~arboreal.features.clusters.Clusters`,
            e.g. from ``arboreal clusters``): cluster templates are added to the arc,
            part and label templates (Koo, Carreras & Collins 2008) and the clustering
            is stored in the model.
        lexicon / lexical_templates: word statistics from unlabeled text
            (:class:`~arboreal.features.lexicon.Lexicon`, from ``arboreal lexicon``) and
            the lexical arc templates over them (:mod:`arboreal.features.lexical`: word
            pair, PMI, distance; default ``DEFAULT_LEXICAL_TEMPLATES``); the lexicon is
            stored in the model. Lexical templates without a lexicon may not read PMI.
        A learner with ``labeled = True`` (``loglinear-labeled``) trains labels jointly
        with the arcs through the labeled partition function; no second-stage labeler
        is trained then, and ``label_feature_bits`` sizes its label feature table.
        patience: with dev data, stop training once dev UAS has not improved for this
            many epochs (the best epoch's weights are kept in any case); None: run
            every epoch. Each value of a searched meta-parameter (log-linear C) gets
            its own count.
        mixing: trains the learner by iterative parameter mixing instead, e.g. on a Dask
            cluster: ``arboreal.learn.mixing.parameter_mixing(client, shards, mode)``
            (online learners only); dev evaluation then sees the mixed averaged weights.
        """
        if scorer == "neural":
            from arboreal.models.neural import train_neural

            if order != 1 or parts or learner_options or mixing is not None:
                raise ArborealError("the neural scorer trains first-order parsers by gradient: "
                                    "--order, --parts, --learner options and --scheduler do "
                                    "not apply")
            if not train_sentences:
                raise ArborealError("no training sentences")
            _check_trees(train_sentences, "training data")
            if dev:
                _check_trees(dev, "dev data")
            options = dict(scorer_options or {})
            if patience is not None:
                options["patience"] = patience
            if epochs is not None:
                options["epochs"] = epochs
            return train_neural(cls, train_sentences, dev,
                                "cle" if decoder == "auto" else decoder, single_root, seed,
                                embeddings, options, max_seconds, device=device,
                                progress=progress, log=log)
        if scorer != "hashed":
            raise ArborealError(f"unknown scorer {scorer!r}; choose from hashed, neural")
        if decoder not in DECODERS:
            raise ArborealError(f"unknown decoder {decoder!r}; choose from {', '.join(DECODERS)}")
        try:
            kinds = parse_parts(order, parts)
        except ValueError as exc:
            raise ArborealError(str(exc)) from None
        ho_options = {k: learner_options.pop(k) for k in list(learner_options)
                      if k in HIGHER_ORDER_OPTIONS}
        if ho_options and not kinds:
            raise ArborealError(f"option(s) {', '.join(sorted(ho_options))} need a "
                                "higher-order model (--order 2 or 3)")
        if kinds:
            if decoder == "auto":
                raise ArborealError("higher-order models take --decoder eisner (projective) "
                                    "or cle (projective tree + hill-climbing)")
            if mixing is not None:
                raise ArborealError("iterative parameter mixing trains first-order parsers; "
                                    "train higher orders without it")
            if feature_cutoff:
                raise ArborealError("--feature-cutoff is not supported with --order 2/3")
        if epochs is None:     # the learner's own default (10 for the online learners)
            from arboreal.learn import LEARNERS

            epochs = (getattr(LEARNERS[learner], "default_epochs", DEFAULT_EPOCHS)
                      if learner in LEARNERS else DEFAULT_EPOCHS)
        if epochs < 1:
            raise ArborealError("epochs must be at least 1")
        if patience is not None and patience < 1:
            raise ArborealError("patience must be at least 1 epoch")
        if not train_sentences:
            raise ArborealError("no training sentences")
        _check_trees(train_sentences, "training data")
        if dev:
            _check_trees(dev, "dev data")
        try:
            learn = get_learner(learner, **learner_options)
        except (ValueError, TypeError) as exc:
            raise ArborealError(str(exc)) from None
        if kinds and not getattr(learn, "trains_parts", False):
            raise ArborealError(f"learner {learner!r} is not supported with --order 2/3; "
                                "choose from perceptron, mira, kbest-mira (1-best there), "
                                "loglinear, eg (order 2)")
        # a learner of probabilities needs gold trees its distribution covers: at higher
        # orders the projective trees of the model's decoder
        marginal_based = bool(getattr(learn, "marginal_based", False))
        if kinds and marginal_based and (not set(kinds) <= HigherOrder.MARGINAL_KINDS
                                         or decoder != "eisner"):
            raise ArborealError(f"learner {learner!r} needs part marginals: at higher orders "
                                "it trains siblings, grandparents and grand-siblings (order "
                                "2, Model 1) with --decoder eisner, not tri-siblings")
        if projectivize is None:
            projectivize = not kinds or marginal_based
        if mixing is not None:   # iterative parameter mixing (arboreal.learn.mixing)
            learn = mixing(learn)
        t0 = time.perf_counter()
        try:
            fs = FeatureSet(features, bits=hash_bits, cutoff=feature_cutoff, clusters=clusters,
                            lexicon=lexicon, lexical_templates=lexical_templates,
                            top_words=top_words)
        except ValueError as exc:
            raise ArborealError(str(exc)) from None
        fs.fit(train_sentences)
        enc = fs.encode(train_sentences)
        heads = [np.asarray(s.heads, dtype=np.int64) for s in train_sentences]
        t_features = time.perf_counter() - t0

        # second stage: labels, trained on gold trees
        t0 = time.perf_counter()
        labels = np.unique(np.concatenate([s.deprels[1:] for s in train_sentences]).astype(str))
        used = {"mcdonald": {"word", "p5", "pos"}, "words": {"word", "p5"}}.get(fs.name,
                                                                              set(ATTRS))
        if clusters is None:
            used -= set(CLUSTER_ATTRS)
        else:
            used |= set(CLUSTER_ATTRS)
        if kinds and part_templates is None and clusters is not None:
            part_templates = {k: DEFAULT_PART_TEMPLATES[k] + CLUSTER_PART_TEMPLATES[k]
                              for k in kinds}
        joint = bool(getattr(learn, "labeled", False))
        try:
            # Labeler lowers the bits (warning) if 2^bits x labels would exceed its budget
            labeler = Labeler(label_templates(used), labels, bits=label_bits if not joint else 10)
        except ValueError as exc:
            raise ArborealError(str(exc)) from None
        if joint and kinds:
            raise ArborealError("joint labeled training (--labeled-partition) is first-order "
                                "only")
        if not joint:
            labeler.fit(enc, heads, [s.deprels for s in train_sentences],
                        epochs=label_epochs if label_epochs is not None else min(epochs, 5),
                        seed=seed)
        t_labels = time.perf_counter() - t0

        train_decoder = "cle" if decoder == "auto" else decoder
        parser = cls(HashedScorer(fs, np.zeros(fs.dim, dtype=np.float32), labeler), train_decoder,
                     single_root)
        extra: dict = {}
        if joint:
            from arboreal.features.labels import LabelFeatures

            n_pos = N_RESERVED + len(fs.vocabs.get("pos", ()))
            lf_bits = fitting_bits(label_feature_bits,
                                   lambda b: LabelFeatures.table_entries(b, n_pos, len(labels)),
                                   TRAIN_TABLE_ENTRIES, min_bits=8)
            if lf_bits is None:
                raise ArborealError(f"{len(labels)} distinct DEPRELs and {n_pos} UPOS codes are "
                                    "too many for joint labeled training (its label table would "
                                    f"exceed {TRAIN_TABLE_ENTRIES} weights); train without "
                                    "--labeled-partition")
            if lf_bits != label_feature_bits:
                warnings.warn(f"{len(labels)} distinct labels: the joint label features get "
                              f"2^{lf_bits} rows instead of 2^{label_feature_bits}, to keep "
                              f"their table within {TRAIN_TABLE_ENTRIES} weights", stacklevel=2)
            lf = LabelFeatures.for_features(fs, labels, bits=lf_bits)
            index = {lab: i for i, lab in enumerate(labels.tolist())}
            extra = {"label_features": lf,
                     "labels": [np.array([-1] + [index[d] for d in s.deprels[1:].tolist()],
                                         dtype=np.int64) for s in train_sentences]}
            parser.scorer.label_features = lf
            parser.scorer.label_weights = np.zeros(lf.dim, dtype=np.float32)
        arc_heads = heads
        n_projectivized = 0
        if projectivize and train_decoder == "eisner":
            from arboreal.trees.projectivize import min_loss_projective
            arc_heads = min_loss_projective(heads, [single_root] * len(heads))
            n_projectivized = sum(int((a != h).any()) for a, h in zip(arc_heads, heads))
        dev_enc = fs.encode(dev) if dev else None
        dev_masks = None
        t_pruner = 0.0
        data_enc, data_decoder, data_part_index = enc, None, None
        data_rows = list(range(len(enc)))   # the training sentence of each data row
        pruning: dict = {}
        if kinds:
            t0 = time.perf_counter()
            tune_on = None
            if dev_enc is not None:
                tune_on = (dev_enc, [np.asarray(s.heads, dtype=np.int64) for s in dev])
            parser.higher_order, data_rows, data_enc, arc_heads, data_decoder, \
                data_part_index, pruning = _train_higher_order(
                    fs, enc, heads, arc_heads, kinds, epochs, seed, single_root,
                    train_decoder == "eisner", part_templates,
                    {**HIGHER_ORDER_OPTIONS, **ho_options}, tune_on, log)
            parser.train_skipped = len(enc) - len(data_enc)
            if dev_enc is not None:
                dev_masks = parser.higher_order.masks(dev_enc)
            t_pruner = time.perf_counter() - t0
        history: list[dict] = []
        best = {"uas": -1.0, "weights": None, "epoch": 0}
        # the best dev UAS of the current learner run, for early stopping
        run = {"uas": -1.0, "epoch": 0}
        # C chosen on held-out data when the learner has a grid and none was given
        c_grid = tuple(getattr(type(learn), "C_GRID", ())) \
            if "C" not in learner_options and mixing is None else ()
        trying: dict = {}
        # the epoch's own time: from the end of the previous epoch's dev evaluation
        clock = [time.perf_counter(), time.process_time()]

        def on_epoch(epoch: int, w: np.ndarray) -> None:
            seconds = time.perf_counter() - clock[0]
            cpu_seconds = time.process_time() - clock[1]
            uas = las = None
            is_best = False
            by_decoder: dict[str, float] = {}
            if dev_enc is not None:
                parser._set_weights(w)
                # decoder "auto" (Koo et al. 2007 §6.2): the test-time decoder is a
                # meta-parameter like the epoch, so each epoch is scored on dev with both
                # and the best (epoch, decoder) pair is kept
                for d in (("eisner", "cle") if decoder == "auto" else (train_decoder,)):
                    parser.decoder = d
                    ph, pl = parser._predict_encoded(dev_enc, dev_masks)
                    d_uas, d_las = attachment_scores(dev, ph, pl)
                    by_decoder[d] = d_uas
                    if uas is None or d_uas > uas:
                        uas, las, chosen_here = d_uas, d_las, d
                parser.decoder = train_decoder
                if uas > best["uas"]:
                    best.update(uas=uas, weights=w.astype(np.float32), epoch=epoch,
                                decoder=chosen_here, **trying)
                    is_best = True
                if uas > run["uas"]:
                    run.update(uas=uas, epoch=epoch)
            entry = {"epoch": epoch, "seconds": round(seconds, 3),
                     "cpu_seconds": round(cpu_seconds, 3), "dev_uas": uas, "dev_las": las,
                     **trying}
            if decoder == "auto" and by_decoder:
                entry["dev_uas_by_decoder"] = by_decoder
            history.append(entry)
            if log is not None:
                log(EpochReport(epoch, seconds, uas, las, is_best,
                                setting=", ".join(f"{k}={v:g}" for k, v in trying.items())))
            clock[0], clock[1] = time.perf_counter(), time.process_time()
            if patience is not None and uas is not None and epoch - run["epoch"] >= patience:
                raise _StopEarly(epoch)

        def fit(learner_object, train_data, n_epochs: int) -> np.ndarray | None:
            """The learner's final weights, or None when stopped early (the best dev
            epoch's weights are then in ``best``)."""
            run.update(uas=-1.0, epoch=0)
            try:
                return learner_object.fit(train_data, n_epochs, on_epoch=on_epoch, seed=seed)
            except _StopEarly as stop:
                if stop.epoch < n_epochs:      # not merely the run's last epoch
                    stopped.append(stop.epoch)
                return None

        stopped: list[int] = []
        data = TrainingData(fs, data_enc, arc_heads, projective=(train_decoder == "eisner"),
                            single_root=single_root, progress=progress, extra=extra,
                            parts=parser.higher_order.parts if kinds else None,
                            decoder=data_decoder, part_index=data_part_index)
        t0 = time.perf_counter()
        clock[0], clock[1] = t0, time.process_time()
        selection = None
        try:
            if c_grid:
                # Koo et al. 2007: C and the number of iterations are chosen on held-out
                # data, here by dev UAS (every iteration of every C is scored); without
                # dev, on a held-out tenth of train, then the chosen (C, iterations) are
                # trained on all of train
                select_on = "dev"
                select_data = data
                if dev_enc is None:
                    select_on = "a held-out tenth of the training data"
                    held, rest = held_out_split(len(data_enc), seed)
                    dev = [train_sentences[data_rows[i]] for i in held]
                    dev_enc = [data_enc[i] for i in held]
                    if kinds:
                        dev_masks = parser.higher_order.masks(dev_enc)
                    select_data = data.subset(rest)
                by_C = {}
                for C in c_grid:
                    trying["C"] = C
                    fit(get_learner(learner, **learner_options, C=C), select_data, epochs)
                    by_C[C] = max((h["dev_uas"] for h in history if h.get("C") == C),
                                  default=None)
                trying.clear()
                learner_options = {**learner_options, "C": best["C"]}
                selection = {"C_grid": list(c_grid), "C": best["C"], "epochs": best["epoch"],
                             "on": select_on, "dev_uas_by_C": by_C}
                if select_data is not data:
                    chosen_decoder = best.get("decoder")
                    dev = dev_enc = None   # the held-out part is training data again
                    best.update(weights=None, epoch=best["epoch"], decoder=chosen_decoder)
                    final = fit(get_learner(learner, **learner_options), data,
                                selection["epochs"])
                else:
                    final = best["weights"]
            else:
                final = fit(learn, data, epochs)
        except ValueError as exc:    # a learner that cannot train these parts
            raise ArborealError(str(exc)) from None
        t_train = time.perf_counter() - t0
        weights = best["weights"] if best["weights"] is not None else final.astype(np.float32)
        parser._set_weights(weights)

        chosen = train_decoder
        if decoder == "auto":
            if best.get("decoder") is not None:
                chosen = best["decoder"]
            else:
                chosen = "eisner" if all(_is_projective(h) for h in heads) else "cle"
        parser.decoder = chosen
        calibration = {"data": None}   # probabilities at temperature 1: uncalibrated
        if dev_enc is not None and not kinds:
            from arboreal.models.analysis import fit_temperatures

            calibration = fit_temperatures(parser, dev_enc, dev)
        parser.meta = {
            "training": {"learner": learner, "learner_options": learner_options,
                         "decoder": decoder, "train_decoder": train_decoder,
                         "single_root": single_root, "epochs": epochs, "seed": seed,
                         "features": features, "hash_bits": hash_bits,
                         "feature_cutoff": feature_cutoff, "top_words": top_words,
                         "label_bits": label_bits, "patience": patience,
                         **({"stopped_after_epochs": stopped} if stopped else {}),
                         "joint_labels": joint, "order": parser.order,
                         **({"higher_order": pruning} if kinds else {}),
                         "projectivized_trees": n_projectivized,
                         "train_sentences": len(train_sentences),
                         "dev_sentences": len(dev) if dev else 0,
                         **({"parameter_mixing": learn.config()} if mixing is not None
                            else {})},
            "best_epoch": (best["epoch"] if best["weights"] is not None
                           else selection["epochs"] if selection else epochs),
            **({"selection": selection} if selection else {}),
            "history": history,
            "calibration": calibration,
            "seconds": {"features": round(t_features, 3), "labels": round(t_labels, 3),
                        "pruner": round(t_pruner, 3), "arcs": round(t_train, 3)},
        }
        return parser

    # ------------------------------------------------------------------ parsing
    def _set_weights(self, w: np.ndarray) -> None:
        """Set a linear scorer's weights from a learner's vector ([w, v] for a jointly
        labeled model)."""
        self.scorer.set_weights(w)

    def _predict_encoded(self, encoded, masks: list | None = None
                         ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """(heads, labels) of encoded sentences; ``masks``: a higher-order model's
        pruning masks of them, if already computed."""
        heads, labels, _ = self._predict_all(encoded, masks)
        return heads, labels

    def _predict_all(self, encoded, masks: list | None = None, tags: tuple = ()
                     ) -> tuple[list, list, dict]:
        """(heads, labels, {column: values}) of encoded sentences, the scorer's ``tags``
        columns among them; batch by batch, so that a scorer that computes labels and
        tags from the same states as the arc scores computes them once."""
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
            if self.higher_order is None:
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

    def _decode_all(self, encoded, masks: list | None = None) -> list[np.ndarray]:
        return self._predict_all(encoded, masks)[0]

    def predict_heads(self, sentences: list) -> list[np.ndarray]:
        """Heads (n+1,) of every sentence (tags as given)."""
        return self._decode_all(self.scorer.encode(list(sentences)))

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
        return self._predict_encoded(self.scorer.encode(sentences))

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
                sentences = self._filled_tags(sentences, retag)
        else:
            sentences = complete_tags(self, sentences, retag)
        if decode == "map" and not probabilities:
            def whole(batch: list) -> list:
                return self._parse_whole(batch, retag)
        else:
            def whole(batch: list) -> list:
                return [trees[0] for trees in analyze(self, batch, 1, decode, probabilities)]
        parsed, split = parse_in_pieces(whole, sentences, self.single_root)
        self.split_total += split
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

    def _filled_tags(self, sentences: list, retag: bool) -> list:
        """Copies of ``sentences`` with the scorer's tags where they lack them (all with
        ``retag``); their trees as given."""
        return [_with_columns(orig, s)
                for orig, s in zip(sentences, self._parse_whole(sentences, retag))]

    def _parse_whole(self, sentences: list, retag: bool = False) -> list:
        columns = tuple(self.scorer.tag_columns)
        heads, labels, tags = self._predict_all(self.scorer.encode(sentences), tags=columns)
        out = [s.with_tree(h, d) for s, h, d in zip(sentences, heads, labels)]
        if columns:
            # a scorer that tags fills the columns a sentence lacks (every one with retag)
            for k, s in enumerate(out):
                for c in columns:
                    if retag or all(v == "_" for v in getattr(s, c)[1:].tolist()):
                        col = np.array(getattr(s, c), dtype=object)
                        col[1:] = _tag_values(c, s, tags[c][k])
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
        decoder = fields.choice("decoder", ("eisner", "cle"))
        single_root = fields.bool("single_root")
        kind = fields.choice("scorer", tuple(SCORERS), default="hashed")
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
                if (decoder == "eisner") != ho.projective:
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
