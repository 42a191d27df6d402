"""Learners for arc-factored (first-order) parsers.

Every learner implements the :class:`Learner` protocol: it receives an
:class:`ArcFactoredData` (feature engine, encoded sentences, gold heads, decoding
options) and returns a weight vector of shape ``(data.features.dim,)``. Learners
never read files; the model layer (``arboreal.models``) does I/O and dev evaluation
through the ``on_epoch`` callback.

Registry: ``LEARNERS`` maps the CLI name (``arboreal train --learner NAME``) to the
learner class. A learner class is constructed with keyword options
(``cls(**options)``; unknown options must raise ``TypeError``) and exposes ``name``.
To add one (e.g. the marginal-based ``loglinear`` and ``eg`` learners), define the
class in ``arboreal/learn/<module>.py`` and add it to ``_LAZY`` below (module path
and class name); ``get_learner(name)`` imports it on first use, so this package
stays cheap to import.

The feature engine API a learner may use (``data.features``, a
:class:`arboreal.features.FeatureSet`):

* ``arc_scores(enc, w) -> (n+1, n+1)`` scores,
* ``accumulate(enc, coef, out, scale)``: ``out += scale * sum_{h,m} coef[h,m] f(h,m)``
  (expected feature counts from marginals: pass ``coef = marginals``),
* ``accumulate_tree(enc, heads, out, scale)``,
* ``arc_features(enc, hs, ms) -> (offsets, ids)``: explicit ids per arc (CSR).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

__all__ = ["ArcFactoredData", "Learner", "LEARNERS", "get_learner", "decode", "decode_kbest"]


@dataclass
class ArcFactoredData:
    """Training data of an arc-factored learner.

    features: the :class:`~arboreal.features.FeatureSet` (fitted).
    encoded: list of :class:`~arboreal.features.EncodedSentence`, one per sentence.
    heads: list of gold heads arrays (n+1,), ``heads[0] = -1``.
    projective: decode with Eisner (True) or Chu-Liu-Edmonds (False).
    single_root: exactly one word attached to the root.
    progress: optional ``progress(iterable, epoch) -> iterable`` wrapping the
        sentence order of an epoch (the CLI passes a tqdm bar); learners iterate
        ``data.wrap(order, epoch)``.
    extra: free-form per-learner data (e.g. gold labels).
    """

    features: object
    encoded: list
    heads: list
    projective: bool = True
    single_root: bool = True
    progress: Callable | None = None
    extra: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.encoded)

    def wrap(self, order, epoch: int):
        """The sentence indices of one epoch, wrapped by ``progress`` if given."""
        return order if self.progress is None else self.progress(order, epoch)


EpochCallback = Callable[[int, np.ndarray], None]


class Learner(Protocol):
    """Protocol of a learner.

    ``fit`` trains for ``epochs`` passes over ``data`` (in an order shuffled by
    ``np.random.default_rng(seed)``) and returns the final weights (dim,) float32 or float64.
    After each epoch e (1-based) it calls ``on_epoch(e, weights)`` with the weights
    a parser would use at that point (e.g. the averaged ones); the callback may copy
    them but must not modify them.
    """

    name: str

    def fit(self, data: ArcFactoredData, epochs: int, on_epoch: EpochCallback | None = None,
            seed: int = 0) -> np.ndarray: ...


def decode(scores: np.ndarray, projective: bool, single_root: bool,
           lengths: np.ndarray | None = None) -> np.ndarray:
    """Best tree (n+1,) for arc scores (n+1, n+1): Eisner or Chu-Liu-Edmonds.

    A padded batch (B, N+1, N+1) with ``lengths`` (B,) gives heads (B, N+1).
    """
    if projective:
        from arboreal.inference.eisner import eisner
        return np.asarray(eisner(scores, single_root=single_root, lengths=lengths))
    from arboreal.inference.mst import chu_liu_edmonds
    return np.asarray(chu_liu_edmonds(scores, single_root=single_root, lengths=lengths))


def decode_kbest(scores: np.ndarray, k: int, single_root: bool) -> np.ndarray:
    """k best projective trees (k', n+1), k' <= k (Eisner k-best)."""
    from arboreal.inference.eisner import eisner_kbest
    heads, tree_scores = eisner_kbest(scores, k, single_root=single_root)
    heads = np.asarray(heads)
    ok = np.isfinite(np.asarray(tree_scores))
    return heads[ok]


_LAZY: dict[str, tuple[str, str]] = {
    "perceptron": ("arboreal.learn.perceptron", "Perceptron"),
    "mira": ("arboreal.learn.mira", "Mira"),
    "kbest-mira": ("arboreal.learn.mira", "KBestMira"),
    "factored-mira": ("arboreal.learn.mira", "FactoredMira"),
    # the marginal-based learners register here:
    "loglinear": ("arboreal.learn.loglinear", "LogLinear"),
    "loglinear-labeled": ("arboreal.learn.labeled_loglinear", "LabeledLogLinear"),
    "eg": ("arboreal.learn.eg", "ExponentiatedGradient"),
}


class _Registry(dict):
    """name -> class, importing the defining module on first access."""

    def __missing__(self, name: str):
        if name not in _LAZY:
            raise KeyError(name)
        module, cls = _LAZY[name]
        value = getattr(importlib.import_module(module), cls)
        self[name] = value
        return value

    def __contains__(self, name: object) -> bool:
        return name in _LAZY or dict.__contains__(self, name)

    def names(self) -> list[str]:
        return sorted(set(_LAZY) | set(dict.keys(self)))


#: CLI name -> learner class (lazy).
LEARNERS: _Registry = _Registry()


def get_learner(name: str, **options) -> Learner:
    """Instantiate learner ``name`` with its keyword options (ValueError if unknown)."""
    if name not in LEARNERS:
        raise ValueError(f"unknown learner {name!r}; choose from {', '.join(LEARNERS.names())}")
    return LEARNERS[name](**options)
