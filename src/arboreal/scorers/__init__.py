"""Scorers: where arc, label and tag scores come from (the seam between a model's
parameters and arboreal's exact inference).

A scorer owns its parameters and turns sentences into scores in the one convention
(``scores[h, m]``, head 0 the root); a :class:`~arboreal.inference.structure.TreeStructure`
turns scores into trees, marginals or log Z; a learner (:mod:`arboreal.learn`) turns
scores and gold trees into updates of the scorer. The parser (:class:`arboreal.models.Parser`)
only wires them together, so a new kind of scorer is one module plus its entry in
:data:`SCORERS` (:func:`register_scorer`, with its training recipe in :data:`RECIPES`);
a module outside arboreal is found through ``$ARBOREAL_PLUGINS`` or the
``arboreal.scorers`` entry points (:func:`load_plugins`).

The role (duck-typed; :class:`Scorer` documents it):

* ``kind``: the name in model files (``"hashed"``, ``"neural"``);
* ``encode(sentences) -> encoded``: whatever the scorer needs of the words, once;
  ``lengths(encoded) -> (S,)``; ``batches(lengths) -> [rows]``: sentences grouped in
  batches of similar length, as the scorer computes best;
* ``arc_scores(encoded, rows, summed=False) -> (B, N+1, N+1)``: a padded batch of the
  arc scores of sentences ``rows`` (``summed``: the scores whose exponentials sum over
  trees, when they differ from the decoder's: a jointly labeled model's log-sum-exp
  over labels);
* ``label_scores(encoded, i, heads) -> (n+1, L)``: each word's label scores given a
  tree; ``predict_labels(encoded, rows, heads) -> [deprels (n+1,)]``;
* ``labels``: the label strings; ``reads_tags``; ``tag_columns`` and
  ``predict_tags(encoded, rows) -> {column: [values (n,)]}`` for the tags it predicts;
  ``lemma_lookup``: (form, UPOS key) -> lemma, used before a predicted lemma rule
  (:func:`arboreal.features.lemmas.lookup_lemmas`; empty where it predicts no lemmas);
* ``put(meta, arrays)`` and ``from_file(fields, arrays)`` (classmethod): model files.

Scorers trained by gradient also offer ``forward`` (torch); linear scorers expose their
linear form (``features``, ``weights``) to the learners that need it (MIRA's QP, EG's
dual).
"""
from __future__ import annotations

import importlib
from typing import Protocol, Sequence

import numpy as np

#: kind -> "module:Class" (imported on first use: a neural scorer imports torch)
SCORERS: dict[str, str] = {
    "hashed": "arboreal.scorers.hashed:HashedScorer",
    "neural": "arboreal.neural.scorer:NeuralScorer",
}


class Scorer(Protocol):
    """The scorer role (see the module docstring)."""

    kind: str
    labels: np.ndarray
    reads_tags: bool
    tag_columns: list
    lemma_lookup: dict

    def encode(self, sentences: Sequence): ...

    def lengths(self, encoded) -> np.ndarray: ...

    def batches(self, lengths: np.ndarray) -> list: ...

    def arc_scores(self, encoded, rows: np.ndarray, summed: bool = False) -> np.ndarray: ...

    def label_scores(self, encoded, i: int, heads: np.ndarray) -> np.ndarray: ...

    def predict_labels(self, encoded, rows: np.ndarray, heads: list) -> list: ...

    def predict_tags(self, encoded, rows: np.ndarray) -> dict: ...

    def put(self, meta: dict, arrays: dict) -> None: ...


#: kind -> its training recipe, for scorers registered from outside arboreal (the
#: built-in kinds' recipes are :mod:`arboreal.models.training`'s): a callable
#: ``recipe(parser_class, train, dev, config, run) -> Parser`` (config a
#: :class:`~arboreal.models.training.TrainingConfig`, run its
#: :class:`~arboreal.models.training.TrainingRun`), or its ``"module:function"`` path. A
#: recipe whose ``needs_tagger`` attribute is False tags by itself; otherwise
#: ``arboreal train`` trains the linear tagger in front of it, as for the hashed scorer.
RECIPES: dict = {}
#: the environment variable naming plugin modules (comma-separated module names or
#: paths of .py files) that :func:`load_plugins` imports
PLUGINS_VARIABLE = "ARBOREAL_PLUGINS"
#: the entry-point group of installed packages that register scorers when imported
ENTRY_POINT_GROUP = "arboreal.scorers"
_PLUGINS_LOADED = False


def register_scorer(kind: str, cls, recipe=None) -> None:
    """Make model files whose ``scorer`` is ``kind`` load with ``cls`` (a class, or its
    ``"module:Class"`` path), so that a scorer defined outside arboreal is one module:
    it registers itself when imported. ``recipe`` (see :data:`RECIPES`) makes
    ``arboreal train --scorer KIND`` and ``Parser.train(scorer=KIND)`` train it."""
    SCORERS[kind] = cls if isinstance(cls, str) else f"{cls.__module__}:{cls.__qualname__}"
    if recipe is not None:
        RECIPES[kind] = recipe


def load_plugins() -> None:
    """Import, once, the modules named in ``$ARBOREAL_PLUGINS`` and the entry points of
    the ``arboreal.scorers`` group (each registers its scorers when imported);
    ArborealError naming a plugin that cannot be imported."""
    global _PLUGINS_LOADED
    if _PLUGINS_LOADED:
        return
    _PLUGINS_LOADED = True
    import os

    from arboreal.errors import ArborealError

    for name in filter(None, (n.strip() for n in
                              os.environ.get(PLUGINS_VARIABLE, "").split(","))):
        try:
            if name.endswith(".py"):
                import importlib.util
                import sys

                stem = os.path.splitext(os.path.basename(name))[0]
                spec = importlib.util.spec_from_file_location(stem, name)
                if spec is None or not os.path.isfile(name):
                    raise ImportError(f"no such file {name}")
                module = importlib.util.module_from_spec(spec)
                sys.modules.setdefault(stem, module)
                spec.loader.exec_module(module)
            else:
                importlib.import_module(name)
        except Exception as exc:       # a plugin's own error, reported as one line
            raise ArborealError(f"{PLUGINS_VARIABLE}: cannot import {name}: {exc}") from None
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            point.load()
        except Exception as exc:
            raise ArborealError(f"entry point {point.name} ({point.value}) of "
                                f"{ENTRY_POINT_GROUP}: {exc}") from None


def scorer_kinds() -> tuple[str, ...]:
    """The registered scorer kinds, plugins included (:func:`load_plugins`)."""
    load_plugins()
    return tuple(SCORERS)


def scorer_class(kind: str):
    """The class of scorer ``kind`` (ValueError naming the kinds otherwise)."""
    if kind not in SCORERS:
        load_plugins()
    if kind not in SCORERS:
        raise ValueError(f"unknown scorer {kind!r}; choose from {', '.join(SCORERS)}")
    module, name = SCORERS[kind].split(":")
    return getattr(importlib.import_module(module), name)
