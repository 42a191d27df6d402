"""Scorers: where arc, label and tag scores come from (the seam between a model's
parameters and arboreal's exact inference).

A scorer owns its parameters and turns sentences into scores in the one convention
(``scores[h, m]``, head 0 the root); a :class:`~arboreal.inference.structure.TreeStructure`
turns scores into trees, marginals or log Z; a learner (:mod:`arboreal.learn`) turns
scores and gold trees into updates of the scorer. The parser (:class:`arboreal.models.Parser`)
only wires them together, so a new kind of scorer is one module here plus its entry
in :data:`SCORERS`.

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


def register_scorer(kind: str, cls) -> None:
    """Make model files whose ``scorer`` is ``kind`` load with ``cls`` (a class, or its
    ``"module:Class"`` path), so that a scorer defined outside arboreal is one module:
    it registers itself when imported."""
    SCORERS[kind] = cls if isinstance(cls, str) else f"{cls.__module__}:{cls.__qualname__}"


def scorer_class(kind: str):
    """The class of scorer ``kind`` (ValueError naming the kinds otherwise)."""
    if kind not in SCORERS:
        raise ValueError(f"unknown scorer {kind!r}; choose from {', '.join(SCORERS)}")
    module, name = SCORERS[kind].split(":")
    return getattr(importlib.import_module(module), name)
