"""Training a parser with the neural scorer (``arboreal train --scorer neural``).

The recipe: vocabularies of the training treebank, pretrained word vectors if given,
a :class:`~arboreal.neural.scorer.NeuralScorer` (BiLSTM encoder, biaffine arcs and
labels, tag classifiers for UPOS, XPOS, FEATS and lemmas), trained jointly by
:class:`~arboreal.learn.neural.GradientLearner` under :class:`~arboreal.learn.trainer.Trainer`
with the tree objective through arboreal's exact inference (default ``crf``: the
Matrix-Tree Theorem for ``cle`` models, inside-outside for ``eisner`` ones). With dev
data each epoch is scored (LAS, UAS, UPOS) and the best epoch kept; patience stops a run
that no longer gains. The result is an ordinary :class:`~arboreal.models.Parser` whose
scorer is neural: the same decoders, k-best trees, marginals, model file, CLI, server,
Dask and spaCy paths serve it.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import fields as dataclass_fields
from typing import Callable

import numpy as np

from arboreal.errors import ArborealError

#: training options of the neural scorer besides the network's sizes, with defaults
TRAINING_DEFAULTS = {
    "epochs": 40,
    "patience": 8,
    "objective": "crf",
    "learning_rate": 2e-3,
    "decay": 0.1,
    "clip": 5.0,
    #: weight of the moving average of the parameters on its past at each step, the
    #: average then being what is scored on dev and kept (:class:`~arboreal.learn.neural.
    #: GradientLearner`); 0: the live parameters. Off by default: on EWT, 0.999 gained
    #: on dev and lost on test (docs/benchmarks-archive.md, neural_pipeline_average)
    "average": 0.0,
    #: 0: chosen by the treebank's size (:func:`arboreal.learn.neural.train_token_budget`)
    "batch_words": 0,
    "min_word_count": 2,
    "max_pretrained": 100_000,
    #: with --encoder: how a word's pieces are pooled ("mean" or "first")
    "encoder_pooling": "mean",
    #: with --encoder: train the transformer's weights too (they are then stored in the
    #: model file) at their own learning rate, warmed up linearly over that fraction of
    #: the steps; off: the transformer stays frozen, and the model file names it
    "fine_tune": False,
    "encoder_learning_rate": 5e-5,
    "encoder_warmup": 0.1,
}
#: the options (network sizes and training options) that only a pretrained transformer
#: (``--encoder``) uses
ENCODER_OPTIONS = ("encoder_dim", "encoder_layer", "encoder_pooling", "fine_tune",
                   "encoder_learning_rate", "encoder_warmup")
#: with --order 2: units of the sibling and grandparent scorers unless given (Zhang et al.
#: 2020's second-order CRF parser uses 100)
PART_DIM = 100
#: a treebank of fewer training words than this gets the BiLSTM of
#: :data:`SMALL_TREEBANK_SIZES` unless its sizes are given ...
SMALL_TREEBANK_WORDS = 30_000
#: ... two layers of 200 units a direction instead of three of 300: on Hungarian-Szeged
#: (20k words) and Wolof-WTB (24k) higher dev LAS at about half the time per epoch
#: (docs/benchmarks.md, neural_small_sizes)
SMALL_TREEBANK_SIZES = {"lstm_dim": 200, "lstm_layers": 2}
#: sizes of the network that the data decide, not options
DERIVED_SIZES = ("pretrained_dim", "encoder_states", "encoder_hidden")


def neural_options(options: dict) -> tuple[dict, dict]:
    """Split ``options`` ({name: value}) into (network sizes, training options), each
    checked by name and type; ArborealError naming the unknown or bad one."""
    from arboreal.neural.network import NetworkConfig

    sizes = {f.name: f.default for f in dataclass_fields(NetworkConfig)
             if f.name != "word_encoders"}
    net, train = {}, dict(TRAINING_DEFAULTS)
    encoder_names = options.get("word_encoders", "")
    if not isinstance(encoder_names, (str, list)):
        raise ArborealError("neural scorer option word_encoders takes names separated by "
                            "commas")
    encoder_options = {k: v for k, v in options.items() if "." in k}
    if encoder_names or encoder_options:
        from arboreal.neural.encoders import word_encoder_specs

        net["word_encoders"] = word_encoder_specs(encoder_names, encoder_options)
    for key, value in options.items():
        if key == "word_encoders" or key in encoder_options:
            continue
        if key in sizes and key not in DERIVED_SIZES:
            target, default = net, sizes[key]
        elif key in TRAINING_DEFAULTS:
            target, default = train, TRAINING_DEFAULTS[key]
        else:
            choices = sorted([k for k in sizes if k not in DERIVED_SIZES]
                             + list(TRAINING_DEFAULTS) + ["word_encoders"])
            raise ArborealError(f"unknown neural scorer option {key!r}; choose from "
                                f"{', '.join(choices)}")
        lowest = -1 if key == "encoder_layer" else 0
        if isinstance(default, str):
            if not isinstance(value, str):
                raise ArborealError(f"neural scorer option {key} takes a name")
        elif isinstance(default, bool):
            if value not in (0, 1):
                raise ArborealError(f"neural scorer option {key} takes true or false")
            value = bool(value)
        elif isinstance(default, int):
            if not isinstance(value, int) or isinstance(value, bool) or value < lowest:
                raise ArborealError(f"neural scorer option {key} takes a whole number "
                                    f">= {lowest}")
        elif not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise ArborealError(f"neural scorer option {key} takes a number >= 0")
        target[key] = value
    for key in ("dropout", "word_dropout"):
        if key in net and not net[key] < 1:
            raise ArborealError(f"neural scorer option {key} must lie in [0, 1)")
    if not train["average"] < 1:
        raise ArborealError("neural scorer option average must lie in [0, 1)")
    for key in ("lstm_dim", "arc_dim", "label_dim", "word_dim", "char_dim",
                "char_embedding_dim", "tag_hidden"):
        if key in net and net[key] < 1:
            raise ArborealError(f"neural scorer option {key} must be at least 1")
    if train["epochs"] < 1:
        raise ArborealError("neural scorer option epochs must be at least 1")
    if train["encoder_pooling"] not in ("mean", "first"):
        raise ArborealError("neural scorer option encoder_pooling takes mean or first")
    if not train["encoder_warmup"] <= 1:
        raise ArborealError("neural scorer option encoder_warmup must lie in [0, 1]")
    return net, train


def _lemma_lookup(train: list) -> dict:
    """The lemmas of the training words (:func:`arboreal.features.lemmas.build_lemma_lookup`,
    with FEATS where the treebank has them); empty where it has no lemmas."""
    from arboreal.features.lemmas import build_lemma_lookup

    column = [v for s in train for v in s.lemmas[1:].tolist()]
    if all(v == "_" for v in column):
        return {}
    forms = [f for s in train for f in s.forms[1:].tolist()]
    upos = [t for s in train for t in s.upos[1:].tolist()]
    feats = [x for s in train for x in s.feats[1:].tolist()]
    return build_lemma_lookup(forms, upos, column,
                              None if all(x == "_" for x in feats) else feats)


def _pretrained_encoder(name: str | None, opts: dict):
    """(the transformer encoder named ``name``, its record for the model file), or (None,
    None) without one."""
    if name is None:
        return None, None
    from pathlib import Path

    from arboreal.neural.transformer import PretrainedEncoder, locate_encoder

    source = locate_encoder(name)
    encoder = PretrainedEncoder(source.folder, pooling=opts["encoder_pooling"])
    record = {"name": source.name, "sha256": source.sha256,
              "pooling": opts["encoder_pooling"], "fine_tuned": bool(opts["fine_tune"]),
              "requires": source.requirement}
    if Path(name).expanduser().exists():
        record["name"] = record["path"] = str(Path(name).expanduser().resolve())
    return encoder, record


#: a frozen encoder's states are kept for the training and dev data when they take at
#: most this fraction of the memory available
ENCODER_STATE_MEMORY = 0.5


def _precompute_encoder_states(scorer, corpora: list) -> None:
    """Compute a frozen encoder's word states of ``corpora`` once (each epoch then
    gathers them), if they fit in :data:`ENCODER_STATE_MEMORY` of the memory available;
    else they are computed batch by batch, with a warning."""
    if scorer.encoder is None or scorer.fine_tuned:
        return
    need = sum(scorer.encoder_state_bytes(c) for c in corpora)
    try:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        free = None
    if free is not None and need > ENCODER_STATE_MEMORY * free:
        logging.getLogger("arboreal").warning(
            "the encoder's states of the training data (%.1f GB) do not fit in memory: "
            "computing them in every batch (slower)", need / 1e9)
        return
    for corpus in corpora:
        scorer.compute_encoder_states(corpus)


def network_sizes_for(train_words: int) -> dict:
    """The network sizes that a treebank of ``train_words`` words gets unless they are
    given: :data:`SMALL_TREEBANK_SIZES` under :data:`SMALL_TREEBANK_WORDS` words, else
    none (the defaults of :class:`~arboreal.neural.network.NetworkConfig`)."""
    return dict(SMALL_TREEBANK_SIZES) if train_words < SMALL_TREEBANK_WORDS else {}


def dev_scores(parser, dev: list, encoded=None) -> dict:
    """LAS, UAS and UPOS accuracy (percent) of ``parser`` on gold-token ``dev``
    sentences (its predicted tags, not dev's); ``score`` is LAS."""
    from arboreal.models.parser import attachment_scores

    encoded = encoded if encoded is not None else parser.scorer.encode(dev)
    columns = tuple(c for c in ("upos",) if c in parser.scorer.tag_columns)
    heads, labels, tags = parser.predict_encoded(encoded, tags=columns)
    uas, las = attachment_scores(dev, heads, labels)
    out = {"score": las, "las": las, "uas": uas}
    if columns:
        words = max(sum(len(s) for s in dev), 1)
        upos = sum(int((np.asarray(tags["upos"][k], dtype=object) == s.upos[1:]).sum())
                   for k, s in enumerate(dev))
        out["upos"] = 100.0 * upos / words
    return out


def train_neural(parser_class, train: list, dev: list | None, decoder: str = "cle",
                 single_root: bool = True, seed: int = 0, embeddings: str | None = None,
                 options: dict | None = None, max_seconds: float | None = None,
                 threads: int | None = None, device: str = "cpu",
                 progress: Callable | None = None, log: Callable | None = None,
                 resume: dict | None = None, save: Callable[[dict], None] | None = None,
                 encoder: str | None = None, order: int = 1):
    """A parser of class ``parser_class`` whose scorer is neural, trained on ``train``
    (and its best epoch chosen on ``dev``); see the module docstring. ``options``: the
    network's sizes and the training options (:func:`neural_options`). ``encoder``: a
    pretrained transformer under the network (a model folder, a zip of one or a name,
    :func:`arboreal.neural.transformer.locate_encoder`), frozen unless the option
    ``fine_tune`` is on; a frozen one's states are computed once, before the epochs. ``log`` receives
    each epoch's :class:`~arboreal.learn.trainer.EpochRecord`; ``save`` the trainer's state
    after each epoch and ``resume`` goes on from such a state (checkpoints,
    :meth:`~arboreal.learn.trainer.Trainer.run`)."""
    from arboreal.neural.scorer import configure_threads, default_precision, require_torch

    configure_threads(threads)
    torch = require_torch()
    from arboreal.inference.structure import tree_structure
    from arboreal.learn.neural import GradientLearner, train_token_budget
    from arboreal.learn.objectives import OBJECTIVES
    from arboreal.learn.trainer import Trainer, TrainingInterrupted
    from arboreal.neural.network import NetworkConfig
    from arboreal.neural.scorer import NeuralScorer
    from arboreal.neural.vocab import Vocabularies

    net_options, opts = neural_options(options or {})
    part_dims = [k for k in ("sib_dim", "grand_dim") if net_options.get(k)]
    if order == 1 and part_dims:
        raise ArborealError(f"neural scorer option {part_dims[0]}: second-order parts need "
                            "--order 2")
    if order == 2:
        for key in ("sib_dim", "grand_dim"):
            net_options.setdefault(key, PART_DIM)
        if not (net_options["sib_dim"] or net_options["grand_dim"]):
            raise ArborealError("--order 2 needs sib_dim or grand_dim above 0")
    elif order != 1:
        raise ArborealError("the neural scorer trains orders 1 and 2")
    if opts["objective"] not in OBJECTIVES:
        raise ArborealError(f"unknown objective {opts['objective']!r}; choose from "
                            f"{', '.join(OBJECTIVES)}")
    try:
        structure = tree_structure(decoder, single_root)
    except ValueError as exc:
        raise ArborealError(str(exc)) from None
    if order > 1 and (not structure.projective or opts["objective"] != "crf"):
        raise ArborealError("second-order neural models train by the crf objective over "
                            "projective trees (--decoder eisner)")
    if device != "cpu" and not torch.cuda.is_available() and not device.startswith("cpu"):
        raise ArborealError(f"device {device!r} is not available (no GPU found by torch)")
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    t0 = time.perf_counter()
    words = vectors = None
    if embeddings is not None:
        from arboreal.neural.embeddings import read_embeddings

        words, vectors = read_embeddings(embeddings, opts["max_pretrained"])
    transformer, record = _pretrained_encoder(encoder, opts)
    net_options = {**network_sizes_for(sum(len(s) for s in train)), **net_options}
    config = NetworkConfig(**net_options,
                           pretrained_dim=0 if vectors is None else vectors.shape[1],
                           encoder_states=transformer.states if transformer else 0,
                           encoder_hidden=transformer.hidden if transformer else 0)
    if transformer is not None and config.encoder_layer >= config.encoder_states:
        raise ArborealError(f"neural scorer option encoder_layer: the encoder has states "
                            f"0..{config.encoder_states - 1}")
    vocabs = Vocabularies.build(train, min_word_count=opts["min_word_count"],
                                tag_input=bool(config.tag_dim))
    scorer = NeuralScorer(config, vocabs, words, vectors, lemma_lookup=_lemma_lookup(train),
                          encoder=transformer, encoder_record=record)
    scorer.to(device)
    gold = train
    if structure.projective:
        from arboreal.inference.projective import min_loss_projective

        heads = min_loss_projective([np.asarray(s.heads, dtype=np.int64) for s in train],
                                    [single_root] * len(train))
        gold = [s.with_tree(h, s.deprels) if not np.array_equal(h, s.heads) else s
                for s, h in zip(train, heads)]
    corpus = scorer.encode(gold, with_gold=True)
    dev_encoded = scorer.encode(dev) if dev else None
    _precompute_encoder_states(scorer, [c for c in (corpus, dev_encoded) if c is not None])
    if not opts["batch_words"]:
        opts["batch_words"] = train_token_budget(int(corpus.lengths.sum()))
    learner = GradientLearner(scorer, corpus, structure, opts["objective"],
                              opts["learning_rate"], opts["decay"], opts["clip"],
                              opts["batch_words"], progress, opts["epochs"], opts["average"],
                              opts["encoder_learning_rate"], opts["encoder_warmup"])
    parser = parser_class(scorer, decoder, single_root)

    def evaluate(snapshot, epoch):
        with learner.parameters_of(snapshot):
            return dev_scores(parser, dev, dev_encoded)

    trainer = Trainer(opts["epochs"], seed, opts["patience"] if dev else None, max_seconds,
                      log)
    t_setup = time.perf_counter() - t0
    interrupted = None
    try:
        result = trainer.run(learner, evaluate if dev else None, resume=resume, save=save)
    except TrainingInterrupted as stop:
        result = interrupted = stop.result
    if result.snapshot is not None:
        learner.restore(result.snapshot)
    parser.meta = {
        "training": {"scorer": "neural", "decoder": decoder, "single_root": single_root,
                     "seed": seed, "network": config.as_dict(), "options": opts,
                     "embeddings": None if embeddings is None else
                     {"file": str(embeddings).rsplit("/", 1)[-1], "words": len(words)},
                     "encoder": None if record is None else
                     {k: record[k] for k in ("name", "sha256", "fine_tuned")},
                     "train_sentences": len(train), "dev_sentences": len(dev) if dev else 0,
                     **({"stopped": result.stopped} if result.stopped else {}),
                     "order": order},
        "best_epoch": result.epoch,
        "history": [r.as_dict() for r in result.history],
        "calibration": {"data": None},
        "seconds": {"setup": round(t_setup, 3),
                    "epochs": round(sum(r.seconds for r in result.history), 3)},
    }
    if dev and result.snapshot is not None and interrupted is None and order == 1:
        from arboreal.models.analysis import fit_temperatures

        parser.meta["calibration"] = fit_temperatures(parser, dev_encoded, dev)
    if device == "cpu":
        # training and the choice of epoch ran in float32; the parser parses as the
        # saved model will once loaded (NeuralScorer.precision)
        scorer.precision = default_precision()
    if interrupted is not None:
        raise TrainingInterrupted(result, parser if result.snapshot is not None else None)
    return parser
