"""Training a parser: the validated training configuration and the flow of ``train``.

:class:`TrainingConfig` holds every option of :meth:`arboreal.models.Parser.train` with
its default, in one place (the learner's own default number of epochs included); the
command line (``arboreal train``) and the Python API both build one, and the model
records it (``meta["training"]["config"]``).

:func:`train_parser` is the flow: the feature vocabularies; the label classifier on
the gold trees (:func:`train_labeler`); for a higher-order factorization the
first-order pruner (:func:`train_pruner`); then the learner over arcs (and parts),
run by the one epoch loop, :class:`arboreal.learn.trainer.Trainer`: with dev data it
evaluates UAS and LAS after every epoch (decoder ``auto``: with both decoders, the
better one kept with its epoch) and keeps the best epoch; patience; and for a learner
with a grid of C values and no C given, one run per C value (on dev, or on a held-out
tenth of train, then the chosen C and epochs on all of it), the best epoch over all
of them kept. With a checkpoint (:class:`arboreal.models.checkpoint.ParserCheckpoint`)
the trainer's state is saved after every epoch and a killed run goes on from it.

This is the training side of the parser: parsing never imports it (nor
:mod:`arboreal.learn`); ``Parser.train`` imports it when called.
"""
from __future__ import annotations

import dataclasses
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from arboreal.errors import ArborealError
from arboreal.features.first_order import (ATTRS, CLUSTER_ATTRS, DEFAULT_HASH_BITS, N_RESERVED,
                                           FeatureSet)
from arboreal.features.higher_order import (CLUSTER_PART_TEMPLATES, DEFAULT_PART_TEMPLATES,
                                            HigherOrderFeatures)
from arboreal.inference.higher_order import PartIndex
from arboreal.inference.higher_order.memory import DEFAULT_BUDGET, MemoryBudgetWarning
from arboreal.inference.structure import (ArrayFamily, NonProjectiveTrees, ProjectiveTrees,
                                          family_names, tree_structure)
from arboreal.learn import DEFAULT_LEARNER, LEARNERS, TrainingData, get_learner
from arboreal.learn.trainer import KeepBest, Trainer, load_keep, held_out_split
from arboreal.models.higher_order import (GRAND_SCOPES, HEAD_LIMITS, HELD_OUT,
                                          TEMPERATURE_MAX_WORDS, TEMPERATURE_SENTENCES,
                                          TEMPERATURES, HigherOrder, default_pruner_epochs,
                                          parse_parts)
from arboreal.scorers.labeler import (TRAIN_TABLE_ENTRIES, Labeler, LabelingData, fitting_bits,
                                     label_templates)
from arboreal.models.parser import attachment_scores
from arboreal.trees.properties import is_projective
from arboreal.scorers.hashed import HashedScorer

#: --decoder auto: train non-projectively, choose the decoder with the epoch on dev
AUTO = "auto"


def decoder_names() -> tuple[str, ...]:
    """What ``--decoder`` takes: the registered tree families, then ``auto``."""
    return (*family_names(), AUTO)
#: training epochs of a learner that names no default of its own
DEFAULT_EPOCHS = 10
#: the scorer kinds whose recipes are arboreal's own (others: :data:`arboreal.scorers.RECIPES`)
BUILT_IN_SCORERS = ("hashed", "neural")
#: the options of higher-order models (named options of :class:`TrainingConfig` and of
#: ``arboreal train``; once ``--learner-option`` keys)
HIGHER_ORDER_OPTIONS = ("pruner_epochs", "max_heads", "threshold", "prune_temperature",
                        "prune_recall", "parse_prune_recall", "grand_scope", "memory_budget")
#: options of the linear (hashed) scorer only, and of the neural one only, with the
#: command-line spelling used in messages
HASHED_ONLY = ("learner", "learner_options", "order", "parts", "part_templates", "features",
               "hash_bits", "feature_cutoff", "top_words", "label_epochs", "label_bits",
               "label_feature_bits", "projectivize", "lexical_templates",
               *HIGHER_ORDER_OPTIONS)
NEURAL_ONLY = ("scorer_options", "embeddings", "encoder", "max_seconds", "device")


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


@dataclass
class TrainingConfig:
    """Every option of :meth:`arboreal.models.Parser.train`, with its default.

    Linear (``scorer="hashed"``) models: ``learner`` (a name of
    :data:`arboreal.learn.LEARNERS`) with its ``learner_options``; ``epochs`` (None: the
    learner's own default, :meth:`epochs_to_run`); ``patience`` (with dev data: stop a
    run once dev UAS has not improved for that many epochs); ``seed``; ``decoder``
    ("eisner", "cle" or "auto": chosen on dev with the epoch); ``single_root``;
    ``projectivize`` (None: at first order and for marginal-based learners); the
    features (``features``, ``hash_bits``, ``feature_cutoff``, ``top_words``,
    ``lexical_templates``); the label classifier (``label_epochs``: None = min(epochs,
    5); ``label_bits``; ``label_feature_bits`` for the jointly labeled learner); the
    factorization (``order`` 1-3, ``parts``, ``part_templates``) and the options of
    higher orders (the pruner's ``pruner_epochs`` (None: :func:`default_pruner_epochs`),
    ``max_heads`` and ``prune_temperature`` (None: chosen to keep ``prune_recall`` of the
    gold heads of dev or held-out data), ``threshold``, ``parse_prune_recall`` (None: the
    training pruning), ``grand_scope``, ``memory_budget``).

    Neural models (``scorer="neural"``): ``scorer_options`` (sizes and training
    options, :mod:`arboreal.models.neural`; ``epochs`` and ``patience`` go there too),
    ``embeddings``, ``encoder`` (a pretrained transformer), ``max_seconds``, ``device``.
    """

    scorer: str = "hashed"
    learner: str = DEFAULT_LEARNER
    learner_options: dict = field(default_factory=dict)
    epochs: int | None = None
    patience: int | None = None
    seed: int = 0
    decoder: str = "eisner"
    single_root: bool = True
    projectivize: bool | None = None
    features: str = "default"
    hash_bits: int = DEFAULT_HASH_BITS
    feature_cutoff: int = 0
    top_words: int = 0
    lexical_templates: list | None = None
    label_epochs: int | None = None
    label_bits: int = 18
    label_feature_bits: int = 16
    order: int = 1
    parts: list | None = None
    part_templates: dict | None = None
    pruner_epochs: int | None = None
    max_heads: int | None = None
    threshold: float = 1e-4
    prune_temperature: float | None = None
    prune_recall: float = 0.995
    parse_prune_recall: float | None = None
    grand_scope: str = "all"
    memory_budget: float | None = DEFAULT_BUDGET
    scorer_options: dict = field(default_factory=dict)
    embeddings: str | None = None
    encoder: str | None = None
    max_seconds: float | None = None
    device: str = "cpu"

    @classmethod
    def from_options(cls, **options) -> "TrainingConfig":
        """A config from keyword options: the fields by name, any other keyword a
        learner option (as ``Parser.train(C=0.1)``)."""
        names = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in options.items() if k in names}
        extra = {k: v for k, v in options.items() if k not in names}
        if extra:
            known["learner_options"] = {**known.get("learner_options", {}), **extra}
        if isinstance(known.get("parts"), str):
            known["parts"] = [known["parts"]]
        return cls(**known)

    def as_dict(self) -> dict:
        """Every field (JSON-able), as saved in a model's metadata."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "TrainingConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})

    def given(self) -> list[str]:
        """The names of the fields that differ from their defaults."""
        return [f.name for f in dataclasses.fields(self)
                if getattr(self, f.name) != TrainingConfig.__dataclass_fields__[f.name].default
                and not (f.default_factory is not dataclasses.MISSING
                         and getattr(self, f.name) == f.default_factory())]

    def epochs_to_run(self) -> int:
        """``epochs``, or the learner's own default (``default_epochs``: 25 for
        loglinear and eg, 15 for local-margin, :data:`DEFAULT_EPOCHS` for the others)."""
        if self.epochs is not None:
            return self.epochs
        learner = LEARNERS[self.learner] if self.learner in LEARNERS else None
        return getattr(learner, "default_epochs", DEFAULT_EPOCHS)

    def kinds(self) -> tuple[str, ...]:
        """The higher-order part kinds (empty at first order)."""
        try:
            return parse_parts(self.order, self.parts)
        except ValueError as exc:
            raise ArborealError(str(exc)) from None

    def validate(self, mixing: bool = False) -> None:
        """ArborealError naming the first option that is wrong or does not apply."""
        def bad(message: str) -> None:
            raise ArborealError(message)

        scorers = trainable_scorers()
        if self.scorer not in scorers:
            bad(f"unknown scorer {self.scorer!r}; choose from {', '.join(scorers)}")
        if self.decoder not in decoder_names():
            bad(f"unknown decoder {self.decoder!r}; choose from {', '.join(decoder_names())}")
        if self.epochs is not None and self.epochs < 1:
            bad("epochs must be at least 1")
        if self.patience is not None and self.patience < 1:
            bad("patience must be at least 1 epoch")
        given = set(self.given())
        if self.scorer not in BUILT_IN_SCORERS:
            other = sorted(given & (set(HASHED_ONLY) | set(NEURAL_ONLY)) - {"scorer_options"})
            if other or mixing:
                bad(f"the {self.scorer} scorer takes its options as scorer_options "
                    "(--scorer-option KEY=VALUE)"
                    + (f"; {', '.join(other)} do not apply" if other else
                       "; --scheduler does not apply"))
            return
        if self.scorer == "neural":
            linear = sorted(given & set(HASHED_ONLY) - {"order"})
            if linear or mixing:
                bad("the neural scorer trains by gradient: --parts, --learner options, "
                    "the pruner's options and --scheduler do not apply"
                    + (f" ({', '.join(linear)})" if linear else ""))
            if self.order not in (1, 2):
                bad("the neural scorer trains orders 1 (arcs) and 2 (arcs, siblings and "
                    "grandparents)")
            if self.order == 2 and self.decoder != AUTO \
                    and not tree_structure(self.decoder).projective:
                bad("second-order neural models decode projective trees: --decoder eisner")
            from arboreal.models.neural import ENCODER_OPTIONS

            unused = sorted(set(self.scorer_options or {}) & set(ENCODER_OPTIONS))
            if unused and not self.encoder:
                bad(f"neural scorer option(s) {', '.join(unused)} apply to a pretrained "
                    "transformer: give --encoder")
            return
        neural = sorted(given & set(NEURAL_ONLY))
        if neural:
            bad(f"{', '.join(neural)}: for the neural scorer only")
        if self.learner not in LEARNERS:
            bad(f"unknown learner {self.learner!r}; choose from {', '.join(LEARNERS.names())}")
        misplaced = sorted(set(self.learner_options) & set(HIGHER_ORDER_OPTIONS))
        if misplaced:
            bad(f"{', '.join(misplaced)}: options of the higher-order model, not of the "
                "learner (--" + misplaced[0].replace("_", "-") + ")")
        learner = self.make_learner()        # its options, checked by its constructor
        kinds = self.kinds()
        ho_given = sorted(given & set(HIGHER_ORDER_OPTIONS))
        if ho_given and not kinds:
            bad(f"option(s) {', '.join(ho_given)} need a higher-order model (--order 2 or 3)")
        if kinds:
            if self.decoder == AUTO or not isinstance(tree_structure(self.decoder),
                                                      ArrayFamily):
                bad("higher-order models take --decoder eisner (projective) or cle "
                    "(projective tree + hill-climbing)")
            if not getattr(learner, "trains_parts", False):
                bad(f"learner {self.learner!r} is not supported with --order 2/3; choose "
                    "from perceptron, mira, kbest-mira (1-best there), loglinear, eg "
                    "(order 2)")
            # a learner of probabilities needs gold trees its distribution covers: at
            # higher orders the projective trees of the model's decoder
            if getattr(learner, "marginal_based", False) and (
                    not set(kinds) <= HigherOrder.MARGINAL_KINDS
                    or not tree_structure(self.decoder, self.single_root).projective):
                bad(f"learner {self.learner!r} needs part marginals: at higher orders it "
                    "trains siblings, grandparents and grand-siblings (order 2, Model 1) "
                    "with --decoder eisner, not tri-siblings")
            if getattr(learner, "labeled", False):
                bad("joint labeled training (--learner loglinear-labeled) is first-order "
                    "only")
            if mixing:
                bad("iterative parameter mixing trains first-order parsers; train higher "
                    "orders without it")
            if self.feature_cutoff:
                bad("--feature-cutoff is not supported with --order 2/3")
            if self.grand_scope not in GRAND_SCOPES:
                bad(f"grand_scope must be one of {', '.join(GRAND_SCOPES)}, "
                    f"got {self.grand_scope!r}")
            if not 0.0 < self.prune_recall <= 1.0:
                bad("prune_recall must lie in (0, 1]")
            if self.parse_prune_recall is not None and not 0.0 < self.parse_prune_recall <= 1.0:
                bad("parse_prune_recall must lie in (0, 1]")
            if self.pruner_epochs is not None and self.pruner_epochs < 1:
                bad("pruner_epochs must be at least 1")
            if ((self.max_heads is not None and self.max_heads < 1)
                    or (self.prune_temperature is not None and not self.prune_temperature > 0)
                    or not 0.0 <= self.threshold <= 1.0):
                bad("pruning needs max_heads >= 1, threshold in [0, 1] and "
                    "prune_temperature > 0")
            if self.memory_budget is not None and not self.memory_budget > 0:
                bad("memory_budget must be positive")

    def make_learner(self, **overrides):
        """The learner object of ``learner`` with its options (and ``overrides``)."""
        try:
            return get_learner(self.learner, **{**self.learner_options, **overrides})
        except (ValueError, TypeError) as exc:
            raise ArborealError(str(exc)) from None


def check_trees(sentences: list, what: str) -> None:
    for k, s in enumerate(sentences):
        if not s.has_heads:
            raise ArborealError(f"{what}: sentence {k + 1} has words without a head; "
                                "training and dev data need complete trees")


def train_parser(cls, train_sentences: list, dev: list | None, config: TrainingConfig,
                 progress: Callable | None = None, log: Callable | None = None,
                 mixing: Callable | None = None, clusters=None, lexicon=None, checkpoint=None):
    """A parser of class ``cls`` trained on ``train_sentences`` as ``config`` says (the
    flow in the module docstring; the arguments those of ``Parser.train``)."""
    config.validate(mixing is not None)
    if not train_sentences:
        raise ArborealError("no training sentences")
    check_trees(train_sentences, "training data")
    if dev:
        check_trees(dev, "dev data")
    saved = checkpoint.load() if checkpoint is not None else None
    if saved is not None and saved.get("config") != _identity(config):
        raise ArborealError("the checkpoint was saved by a training with other options; "
                            "resume it with the same options")
    run = TrainingRun(progress, log, mixing, clusters, lexicon, checkpoint, saved)
    return recipe_of(config.scorer)(cls, train_sentences, dev, config, run)


@dataclass
class TrainingRun:
    """What a training is given besides its options (the objects of ``Parser.train``):
    ``progress`` and ``log`` (reporting), ``mixing``, ``clusters`` and ``lexicon`` (the
    linear scorer's), ``checkpoint`` (a ParserCheckpoint or None) and ``saved`` (its
    state to resume from, or None)."""

    progress: Callable | None = None
    log: Callable | None = None
    mixing: Callable | None = None
    clusters: object = None
    lexicon: object = None
    checkpoint: object = None
    saved: dict | None = None


def trainable_scorers() -> tuple[str, ...]:
    """The scorer kinds that have a recipe: the built-in two, then those registered with
    one (:func:`arboreal.scorers.register_scorer`, plugins included)."""
    from arboreal.scorers import RECIPES, load_plugins

    load_plugins()
    return BUILT_IN_SCORERS + tuple(k for k in RECIPES if k not in BUILT_IN_SCORERS)


def recipe_of(kind: str) -> Callable:
    """The training recipe of scorer ``kind``: ``recipe(cls, train, dev, config, run)
    -> Parser`` (:data:`arboreal.scorers.RECIPES`)."""
    if kind == "hashed":
        return train_linear
    if kind == "neural":
        return train_neural_recipe
    from arboreal.scorers import RECIPES, load_plugins

    load_plugins()
    recipe = RECIPES.get(kind)
    if recipe is None:
        raise ArborealError(f"scorer {kind!r} has no training recipe; choose from "
                            f"{', '.join(trainable_scorers())}")
    if isinstance(recipe, str):
        import importlib

        module, name = recipe.split(":")
        recipe = getattr(importlib.import_module(module), name)
    return recipe


def needs_tagger(kind: str) -> bool:
    """Whether ``arboreal train --scorer KIND`` trains the linear tagger in front of the
    parser (False for a recipe that tags by itself: the neural one)."""
    if kind in BUILT_IN_SCORERS:
        return kind == "hashed"
    return bool(getattr(recipe_of(kind), "needs_tagger", True))


def train_linear(cls, train_sentences: list, dev: list | None, config: TrainingConfig,
                 run: TrainingRun):
    """The recipe of the linear (hashed-feature) scorer: :class:`_LinearTraining`."""
    return _LinearTraining(cls, train_sentences, dev, config, run.progress, run.log,
                           run.mixing, run.clusters, run.lexicon, run.checkpoint,
                           run.saved).run()


def train_neural_recipe(cls, train_sentences: list, dev: list | None, config: TrainingConfig,
                        run: TrainingRun):
    """The recipe of the neural scorer: :func:`arboreal.models.neural.train_neural` with
    the config's options (epochs and patience among the scorer's options)."""
    from arboreal.models.neural import train_neural

    options = dict(config.scorer_options)
    if config.patience is not None:
        options["patience"] = config.patience
    if config.epochs is not None:
        options["epochs"] = config.epochs
    save = None
    if run.checkpoint is not None:
        def save(state: dict) -> None:
            run.checkpoint.save({"config": _identity(config), "run": 0, "done": [],
                                 "trainer": state})
    decoder = config.decoder
    if decoder == AUTO:
        decoder = (ProjectiveTrees if config.order > 1 else NonProjectiveTrees).name
    return train_neural(cls, train_sentences, dev, decoder, config.single_root, config.seed,
                        config.embeddings, options, config.max_seconds, device=config.device,
                        progress=run.progress, log=run.log,
                        resume=None if run.saved is None else run.saved["trainer"],
                        save=save, encoder=config.encoder, order=config.order)


class _LinearTraining:
    """The training of a linear (hashed-feature) parser, step by step (module docstring)."""

    def __init__(self, cls, train_sentences, dev, config: TrainingConfig, progress, log, mixing,
                 clusters, lexicon, checkpoint, saved: dict | None):
        self.cls, self.train, self.dev, self.config = cls, train_sentences, dev, config
        self.progress, self.log, self.mixing = progress, log, mixing
        self.clusters, self.lexicon, self.checkpoint = clusters, lexicon, checkpoint
        #: the checkpoint's state to resume from (None: a new training)
        self.saved = saved
        self.kinds = config.kinds()
        self.epochs = config.epochs_to_run()
        self.learn = config.make_learner()
        #: the decoder and tree family of training ("auto" trains non-projectively)
        self.train_decoder = NonProjectiveTrees.name if config.decoder == AUTO else config.decoder
        self.structure = tree_structure(self.train_decoder, config.single_root)
        # (the learner's fit to the orders and the decoder is checked by config.validate)
        self.marginal_based = bool(getattr(self.learn, "marginal_based", False))
        self.joint = bool(getattr(self.learn, "labeled", False))
        if mixing is not None:   # iterative parameter mixing (arboreal.learn.mixing)
            self.learn = mixing(self.learn)
        self.seconds: dict = {}

    # ------------------------------------------------------------------ the flow
    def run(self):
        config = self.config
        parser, fs, enc, heads = self._features_and_labels()
        data, dev_enc, dev_masks, pruning, n_projectivized = self._training_data(parser, fs,
                                                                                 enc, heads)
        t0 = time.perf_counter()
        weights, decoder, best_epoch, selection, history, stopped = self._epochs(
            parser, data, dev_enc, dev_masks)
        self.seconds["arcs"] = time.perf_counter() - t0
        parser.set_weights(weights)
        chosen = self.train_decoder
        if config.decoder == AUTO:
            chosen = decoder or (ProjectiveTrees.name if all(is_projective(h) for h in heads)
                                 else NonProjectiveTrees.name)
        parser.decoder = chosen
        calibration = {"data": None}   # probabilities at temperature 1: uncalibrated
        if self.dev_for_calibration is not None and not self.kinds:
            from arboreal.models.analysis import fit_temperatures

            calibration = fit_temperatures(parser, *self.dev_for_calibration)
        learner_options = dict(config.learner_options)
        if selection:
            learner_options["C"] = selection["C"]
        parser.meta = {
            "training": {"learner": config.learner, "learner_options": learner_options,
                         "decoder": config.decoder, "train_decoder": self.train_decoder,
                         "single_root": config.single_root, "epochs": self.epochs,
                         "seed": config.seed, "features": config.features,
                         "hash_bits": config.hash_bits, "feature_cutoff": config.feature_cutoff,
                         "top_words": config.top_words, "label_bits": config.label_bits,
                         "patience": config.patience,
                         **({"stopped_after_epochs": stopped} if stopped else {}),
                         "joint_labels": self.joint, "order": parser.order,
                         **({"higher_order": pruning} if self.kinds else {}),
                         "projectivized_trees": n_projectivized,
                         "train_sentences": len(self.train),
                         "dev_sentences": len(self.dev) if self.dev else 0,
                         **({"parameter_mixing": self.learn.config()}
                            if self.mixing is not None else {}),
                         "config": config.as_dict()},
            "best_epoch": best_epoch,
            **({"selection": selection} if selection else {}),
            "history": history,
            "calibration": calibration,
            "seconds": {k: round(self.seconds.get(k, 0.0), 3)
                        for k in ("features", "labels", "pruner", "arcs")},
        }
        return parser

    def _features_and_labels(self):
        """The fitted features, the encoded training trees and the parser with its
        label classifier (trained on the gold trees; none for a jointly labeled model)."""
        config, train = self.config, self.train
        t0 = time.perf_counter()
        try:
            fs = FeatureSet(config.features, bits=config.hash_bits, cutoff=config.feature_cutoff,
                            clusters=self.clusters, lexicon=self.lexicon,
                            lexical_templates=config.lexical_templates,
                            top_words=config.top_words)
        except ValueError as exc:
            raise ArborealError(str(exc)) from None
        fs.fit(train)
        enc = fs.encode(train)
        heads = [np.asarray(s.heads, dtype=np.int64) for s in train]
        self.seconds["features"] = time.perf_counter() - t0
        # second stage: labels, trained on gold trees
        t0 = time.perf_counter()
        labels = np.unique(np.concatenate([s.deprels[1:] for s in train]).astype(str))
        used = {"mcdonald": {"word", "p5", "pos"}, "words": {"word", "p5"}}.get(fs.name,
                                                                              set(ATTRS))
        if self.clusters is None:
            used -= set(CLUSTER_ATTRS)
        else:
            used |= set(CLUSTER_ATTRS)
        try:
            # Labeler lowers the bits (warning) if 2^bits x labels would exceed its budget
            labeler = Labeler(label_templates(used), labels,
                              bits=config.label_bits if not self.joint else 10)
        except ValueError as exc:
            raise ArborealError(str(exc)) from None
        if not self.joint:
            train_labeler(labeler, enc, heads, [s.deprels for s in train],
                          epochs=(config.label_epochs if config.label_epochs is not None
                                  else min(self.epochs, 5)), seed=config.seed)
        self.seconds["labels"] = time.perf_counter() - t0
        parser = self.cls(HashedScorer(fs, np.zeros(fs.dim, dtype=np.float32), labeler),
                          self.train_decoder, config.single_root)
        self.labels = labels
        return parser, fs, enc, heads

    def _joint_extra(self, parser, fs) -> dict:
        """The label features and gold labels of a jointly labeled model (TrainingData.extra)."""
        from arboreal.features.labels import LabelFeatures

        config, labels = self.config, self.labels
        n_pos = N_RESERVED + len(fs.vocabs.get("pos", ()))
        lf_bits = fitting_bits(config.label_feature_bits,
                               lambda b: LabelFeatures.table_entries(b, n_pos, len(labels)),
                               TRAIN_TABLE_ENTRIES, min_bits=8)
        if lf_bits is None:
            raise ArborealError(f"{len(labels)} distinct DEPRELs and {n_pos} UPOS codes are "
                                "too many for joint labeled training (its label table would "
                                f"exceed {TRAIN_TABLE_ENTRIES} weights); train with another "
                                "learner")
        if lf_bits != config.label_feature_bits:
            warnings.warn(f"{len(labels)} distinct labels: the joint label features get "
                          f"2^{lf_bits} rows instead of 2^{config.label_feature_bits}, to keep "
                          f"their table within {TRAIN_TABLE_ENTRIES} weights", stacklevel=4)
        lf = LabelFeatures.for_features(fs, labels, bits=lf_bits)
        index = {lab: i for i, lab in enumerate(labels.tolist())}
        parser.scorer.label_features = lf
        parser.scorer.label_weights = np.zeros(lf.dim, dtype=np.float32)
        return {"label_features": lf,
                "labels": [np.array([-1] + [index[d] for d in s.deprels[1:].tolist()],
                                    dtype=np.int64) for s in self.train]}

    def _training_data(self, parser, fs, enc, heads):
        """The learner's TrainingData (projectivized trees; with parts the pruner and
        its masks), the dev encodings and masks, the pruning facts and how many trees
        were projectivized."""
        config, kinds = self.config, self.kinds
        extra = self._joint_extra(parser, fs) if self.joint else {}
        projectivize = config.projectivize
        if projectivize is None:
            projectivize = not kinds or self.marginal_based
        arc_heads, n_projectivized = heads, 0
        if projectivize and self.structure.projective:
            from arboreal.inference.projective import min_loss_projective

            arc_heads = min_loss_projective(heads, [config.single_root] * len(heads))
            n_projectivized = sum(int((a != h).any()) for a, h in zip(arc_heads, heads))
        dev_enc = fs.encode(self.dev) if self.dev else None
        dev_masks, pruning = None, {}
        data_enc, data_decoder, data_part_index = enc, None, None
        self.data_rows = list(range(len(enc)))   # the training sentence of each data row
        part_templates = config.part_templates
        if kinds and part_templates is None and self.clusters is not None:
            part_templates = {k: DEFAULT_PART_TEMPLATES[k] + CLUSTER_PART_TEMPLATES[k]
                              for k in kinds}
        if kinds:
            t0 = time.perf_counter()
            tune_on = None
            if dev_enc is not None:
                tune_on = (dev_enc, [np.asarray(s.heads, dtype=np.int64) for s in self.dev])
            parser.higher_order, self.data_rows, data_enc, arc_heads, data_decoder, \
                data_part_index, pruning = self._higher_order(fs, enc, heads, arc_heads,
                                                              part_templates, tune_on)
            parser.train_skipped = len(enc) - len(data_enc)
            if dev_enc is not None:
                dev_masks = parser.higher_order.masks(dev_enc)
            self.seconds["pruner"] = time.perf_counter() - t0
        data = TrainingData(fs, data_enc, arc_heads, self.structure, progress=self.progress,
                            extra=extra,
                            parts=parser.higher_order.parts if kinds else None,
                            decoder=data_decoder, part_index=data_part_index)
        return data, dev_enc, dev_masks, pruning, n_projectivized

    def _higher_order(self, fs, enc, heads, arc_heads, part_templates, tune_on):
        """The pruner, the pruning masks of the training sentences (gold arcs
        ``arc_heads`` kept) and which of them fit the memory budget: ``(HigherOrder, the
        indices of the training sentences of the epochs, their encodings and arc-model
        heads, their decoder (i, w) -> heads, their part_index (see TrainingData; None
        when the parts have no marginals), the pruning facts for the metadata)``."""
        config, log = self.config, self.log
        pruner_epochs = config.pruner_epochs or default_pruner_epochs(
            sum(len(h) - 1 for h in heads), self.epochs)

        def pruner_log(epoch: int, seconds: float) -> None:
            if log is not None:
                log(EpochReport(epoch, seconds, None, None, False, stage="pruner"))

        try:
            ho = train_pruner(fs, enc, heads, self.kinds, pruner_epochs, config.seed,
                              config.single_root, projective=self.structure.projective,
                              templates=part_templates, log=pruner_log, tune_on=tune_on,
                              grand_scope=config.grand_scope, max_heads=config.max_heads,
                              threshold=config.threshold,
                              prune_temperature=config.prune_temperature,
                              prune_recall=config.prune_recall,
                              memory_budget=config.memory_budget)
        except (ValueError, TypeError) as exc:
            raise ArborealError(str(exc)) from None
        masks = ho.masks(enc, arc_heads)
        fit = [i for i, a in enumerate(masks) if a is not None and ho.mask_fits(a)]
        if len(fit) < len(enc):
            warnings.warn(f"{len(enc) - len(fit)} training sentence(s) over the memory budget "
                          f"({ho.memory_budget / 2**20:.4g} MiB) left out of the "
                          f"order-{ho.order} epochs (used by the first-order pruner and the "
                          f"labeler only)", MemoryBudgetWarning, stacklevel=4)
        fit_enc = [enc[i] for i in fit]
        fit_masks = [masks[i] for i in fit]
        recall, per_word = ho.pruning_recall(enc, heads)
        options = {k: getattr(config, k) for k in HIGHER_ORDER_OPTIONS
                   if k not in ("pruner_epochs", "parse_prune_recall")}
        pruning = {"pruner_epochs": pruner_epochs, "gold_heads_kept_train": recall,
                   "kept_heads_per_word_train": per_word, "temperature": ho.prune_temperature,
                   "temperature_choice": ho.temperature_choice, "options": options}
        parse_recall = config.parse_prune_recall
        if parse_recall is not None:
            # the training masks above keep many competitors of the gold arcs for the
            # learner; parsing (and the dev scores of the epochs) may prune harder
            t_encs, t_golds, tuned_on = ho.tuning_set
            table = (ho.tuning_table if ho.tuning_table is not None
                     else ho.pruning_table(t_encs, t_golds))
            choice = ho.use_pruning(ho.choose_pruning(table, parse_recall))
            pruning["parse_choice"] = {**choice, "target": parse_recall, "on": tuned_on}

        def decode(i: int, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
            arc = None if bias is None else ho.features.arc_scores(fit_enc[i], w) + bias
            return ho.decode(fit_enc[i], fit_masks[i], w, arc)

        part_index = None
        if ho.has_marginals and self.structure.projective:
            indexes: dict[int, PartIndex] = {}   # built on first use, kept for the epochs

            def part_index(i: int) -> PartIndex:
                index = indexes.get(i)
                if index is None:
                    index = indexes[i] = PartIndex.compact(fit_masks[i])
                return index

        return ho, fit, fit_enc, [arc_heads[i] for i in fit], decode, part_index, pruning

    # ------------------------------------------------------------------ the epochs
    def _evaluator(self, parser, dev: list, dev_enc: list, dev_masks):
        """``evaluate(weights, epoch)`` of the trainer: dev UAS (the score) and LAS; with
        decoder "auto" each epoch is scored with both decoders and the better one is
        kept with it (Koo et al. 2007 §6.2: the test-time decoder is a meta-parameter
        like the epoch)."""
        decoders = ((ProjectiveTrees.name, NonProjectiveTrees.name)
                    if self.config.decoder == AUTO else (self.train_decoder,))

        def evaluate(weights: np.ndarray, epoch: int) -> dict:
            parser.set_weights(weights)
            out: dict = {}
            by_decoder: dict[str, float] = {}
            for d in decoders:
                parser.decoder = d
                uas, las = attachment_scores(dev, *parser.predict_encoded(dev_enc, dev_masks)[:2])
                by_decoder[d] = uas
                if not out or uas > out["uas"]:
                    out = {"score": uas, "uas": uas, "las": las, "decoder": d}
            parser.decoder = self.train_decoder
            if len(decoders) > 1:
                out["uas_by_decoder"] = by_decoder
            return out
        return evaluate

    def _report(self, record) -> None:
        """The trainer's epoch record as the ``log`` callback's EpochReport."""
        if self.log is not None:
            dev = record.dev or {}
            self.log(EpochReport(record.epoch, record.seconds, dev.get("uas"), dev.get("las"),
                                 record.best, setting=", ".join(
                                     f"{k}={v:g}" for k, v in record.setting.items())))

    def _epochs(self, parser, data: TrainingData, dev_enc, dev_masks):
        """Run the learner under the trainer: ``(weights, the decoder chosen on dev or
        held-out data (None: none), the best epoch, the C selection (None without a
        grid), the history (the metadata's), the epochs where patience stopped a run)``. Without a C
        grid one run; with one, a run per C value on dev or on a held-out tenth of train
        (then the chosen C and epochs again on all of it); the best epoch over every run
        is kept."""
        config, dev = self.config, self.dev
        c_grid = (tuple(getattr(type(self.learn), "C_GRID", ()))
                  if "C" not in config.learner_options and self.mixing is None else ())
        select_on, select_data = "dev", data
        if c_grid and dev_enc is None:
            # Koo et al. 2007: C and the number of iterations are chosen on held-out data
            select_on = "a held-out tenth of the training data"
            held, rest = held_out_split(len(data.encoded), config.seed)
            dev = [self.train[self.data_rows[i]] for i in held]
            dev_enc = [data.encoded[i] for i in held]
            if self.kinds:
                dev_masks = parser.higher_order.masks(dev_enc)
            select_data = data.subset(rest)
        self.dev_for_calibration = (dev_enc, dev) if dev_enc is not None and self.dev else None
        evaluate = self._evaluator(parser, dev, dev_enc, dev_masks) if dev_enc is not None \
            else None
        keep = KeepBest()
        # (learner option overrides, data, epochs, the setting recorded, evaluate); no
        # overrides: the learner object built already
        runs: list = ([(None, select_data, self.epochs, {}, evaluate)] if not c_grid else
                      [({"C": C}, select_data, self.epochs, {"C": C}, evaluate) for C in c_grid])
        saved = self.saved
        if saved is not None:
            load_keep(keep, saved["trainer"]["keep"], None)
        results: list = []
        while len(results) < len(runs):
            k = len(results)
            overrides, train_data, epochs, setting, run_evaluate = runs[k]
            learn = self.learn if overrides is None else config.make_learner(**overrides)
            results.append(self._run(k, learn, train_data, epochs, setting, run_evaluate,
                                     keep, saved, results))
            if c_grid and len(results) == len(c_grid) and select_data is not data:
                # the chosen (C, epochs) again on all of the training data
                runs.append(({"C": keep.record.setting["C"]}, data, keep.epoch, {}, None))
        history = [self._entry(r) for res in results for r in res.history]
        stopped = [res.history[-1].epoch for res in results if res.stopped == "patience"]
        selection = None
        decoder = keep.record.dev.get("decoder") if keep.record is not None else None
        if c_grid:
            by_C = {C: max((r.dev["uas"] for r in res.history if r.dev is not None),
                           default=None) for C, res in zip(c_grid, results)}
            selection = {"C_grid": list(c_grid), "C": keep.record.setting["C"],
                         "epochs": keep.epoch, "on": select_on, "dev_uas_by_C": by_C}
            if select_data is not data:   # the final run's weights, chosen on held-out data
                return (results[-1].snapshot.astype(np.float32), decoder, selection["epochs"],
                        selection, history, stopped)
        if keep.record is not None:
            return keep.snapshot.astype(np.float32), decoder, keep.epoch, selection, history, \
                stopped
        return results[-1].snapshot.astype(np.float32), None, self.epochs, selection, history, \
            stopped

    def _run(self, k: int, learn, data: TrainingData, epochs: int, setting: dict, evaluate,
             keep: KeepBest, saved: dict | None, done: list):
        """Run ``k`` of the training (resumed from ``saved`` when it is there)."""
        resume = None
        if saved is not None and saved["run"] == k:
            resume = saved["trainer"]
        save = None
        if self.checkpoint is not None:
            finished = [{"history": [r.state() for r in res.history], "stopped": res.stopped}
                        for res in done]

            def save(state: dict) -> None:
                self.checkpoint.save({"config": _identity(self.config), "run": k,
                                      "done": finished, "trainer": state})
        trainer = Trainer(epochs, self.config.seed, self.config.patience if evaluate else None,
                          log=self._report)
        try:
            if saved is not None and saved["run"] > k:
                return _finished_run(saved["done"][k])
            return trainer.run(learn.start(data, self.config.seed), evaluate, keep, setting,
                               resume=resume, save=save)
        except ValueError as exc:    # a learner that cannot train these parts
            raise ArborealError(str(exc)) from None

    @staticmethod
    def _entry(record) -> dict:
        """The metadata's history entry of an epoch."""
        dev = record.dev if record.dev is not None and "score" in record.dev else None
        entry = {"epoch": record.epoch, "seconds": round(record.seconds, 3),
                 "cpu_seconds": round(record.cpu_seconds, 3),
                 "dev_uas": dev["uas"] if dev else None, "dev_las": dev["las"] if dev else None,
                 **record.setting}
        if dev and "uas_by_decoder" in dev:
            entry["dev_uas_by_decoder"] = dev["uas_by_decoder"]
        return entry


def _plain(value):
    """``value`` as it comes back from JSON (tuples as lists)."""
    import json

    return json.loads(json.dumps(value))


def _identity(config: TrainingConfig) -> dict:
    """What a checkpoint must agree with to be resumed: the config as JSON gives it,
    without the learners' ``verbose`` (a report, not an option of the model)."""
    values = config.as_dict()
    values["learner_options"] = {k: v for k, v in values["learner_options"].items()
                                 if k != "verbose"}
    return _plain(values)


def _finished_run(state: dict):
    """The result of a finished run of a resumed training (its history only)."""
    from arboreal.learn.trainer import EpochRecord, TrainingResult

    history = [EpochRecord.from_state(r) for r in state["history"]]
    return TrainingResult(None, 0, history, state["stopped"], None)


# ---------------------------------------------------------------------- the label classifier
def train_labeler(labeler: Labeler, encoded: list, heads: list, deprels: list, epochs: int,
                  seed: int = 0, learner: str = "perceptron", **options) -> Labeler:
    """Train ``labeler`` on gold trees (:meth:`Labeler.fit`): encoded sentences, heads
    (n+1,), deprels (n+1,) of str, with a learner of :mod:`arboreal.learn` that trains
    structures other than arc-factored trees (perceptron, mira), for ``epochs`` epochs
    under the trainer."""
    index = {lab: i for i, lab in enumerate(labeler.labels.tolist())}
    gold = [np.array([-1] + [index.get(d, -1) for d in dep[1:].tolist()], dtype=np.int64)
            for dep in deprels]
    learn = get_learner(learner, **options)
    if not getattr(learn, "trains_parts", False):
        raise ValueError(f"learner {learner!r} cannot train the label classifier")
    data = LabelingData(labeler, encoded, [np.asarray(h, dtype=np.int64) for h in heads], gold)
    w = Trainer(epochs, seed).run(learn.start(data, seed)).snapshot
    labeler.W = np.asarray(w, dtype=np.float32).reshape(labeler.W.shape)
    return labeler


# ---------------------------------------------------------------------- the pruner
def train_pruner(features: FeatureSet, encs: list, golds: list, kinds, epochs: int, seed: int,
                 single_root: bool, projective: bool, grand_scope: str = "all",
                 max_heads: int | None = None, threshold: float = 1e-4,
                 prune_temperature: float | None = None, prune_recall: float = 0.995,
                 memory_budget: float | None = DEFAULT_BUDGET,
                 tune_on: tuple[list, list] | None = None, templates: dict | None = None,
                 log: Callable[[int, float], None] | None = None) -> HigherOrder:
    """Train the pruner (averaged perceptron, Eisner, ``epochs`` epochs under the
    trainer) on the encoded gold trees and return the higher-order component around it
    (:meth:`HigherOrder.train`, which documents the arguments)."""
    if grand_scope not in GRAND_SCOPES:
        raise ValueError(f"grand_scope must be one of {', '.join(GRAND_SCOPES)}, "
                         f"got {grand_scope!r}")
    outer_only = "trisib" in kinds and grand_scope == "outer"
    parts = HigherOrderFeatures(kinds, features.bits, outer_only=outer_only,
                                templates=templates)
    if not 0.0 < prune_recall <= 1.0:
        raise ValueError("prune_recall must lie in (0, 1]")
    tuned_on = "dev"
    train_encs, train_golds = encs, golds
    choose = prune_temperature is None or max_heads is None
    if choose and (tune_on is None or not tune_on[0]) and len(encs) >= 2:
        held, rest = held_out_split(len(encs), seed)
        held = [i for i in held if encs[i].n <= TEMPERATURE_MAX_WORDS][:TEMPERATURE_SENTENCES]
        if held:
            tune_on = ([encs[i] for i in held], [golds[i] for i in held])
            train_encs = [encs[i] for i in rest]
            train_golds = [golds[i] for i in rest]
            tuned_on = HELD_OUT
    if tune_on is None or not tune_on[0]:      # one training sentence: tune on it
        tune_on, tuned_on = HigherOrder.tuning_data(encs, golds, None), "train"
    pruner = get_learner("perceptron").start(
        TrainingData(features, train_encs, train_golds, ProjectiveTrees(single_root)), seed)
    w = Trainer(epochs, seed, log=None if log is None else
                (lambda record: log(record.epoch, record.seconds))).run(pruner).snapshot
    ho = HigherOrder(features, parts, w, projective=projective, single_root=single_root,
                     max_heads=HEAD_LIMITS[0] if max_heads is None else max_heads,
                     threshold=threshold,
                     prune_temperature=(TEMPERATURES[0] if prune_temperature is None
                                        else prune_temperature),
                     memory_budget=memory_budget)
    ho.tuning_set = (tune_on[0], tune_on[1], tuned_on)
    if prune_temperature is None or max_heads is None:
        table = ho.pruning_table(
            *tune_on, TEMPERATURES if prune_temperature is None else (prune_temperature,),
            HEAD_LIMITS if max_heads is None else (max_heads,))
        choice = ho.use_pruning(ho.choose_pruning(table, prune_recall))
        ho.temperature_choice = {**choice, "target": prune_recall, "on": tuned_on}
        if prune_temperature is None and max_heads is None:
            ho.tuning_table = table
    return ho
