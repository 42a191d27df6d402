"""Learners for factored parsers (arcs, and higher-order parts).

Every learner implements the :class:`Learner` protocol: ``start(data, seed)`` takes a
:class:`TrainingData` (feature engine, encoded sentences, gold heads, decoding options;
with higher-order ``parts`` the model's decoder) and returns an
:class:`~arboreal.learn.trainer.EpochLearner`, which the one epoch loop,
:class:`~arboreal.learn.trainer.Trainer`, runs (its snapshots: weight vectors of shape
``(data.features.dim,)``); ``fit(data, epochs, on_epoch, seed)`` is that loop without dev
data (:func:`~arboreal.learn.trainer.run_epochs`). Learners never read files; the model
layer (:mod:`arboreal.models.training`) does I/O, dev evaluation and checkpoints.

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
* ``arc_features(enc, hs, ms) -> (offsets, ids, vals)``: explicit features per arc
  (CSR; ``vals`` the value of each id occurrence, 1 but for real-valued features).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

import numpy as np

from arboreal.inference.structure import ProjectiveTrees, TreeStructure, cost_bias

__all__ = ["TrainingData", "require_arc_factored", "require_marginals", "part_expectation", "Learner", "LEARNERS", "get_learner", "DEFAULT_LEARNER", "cost_bias",
           "BatchLearner"]


@dataclass
class TrainingData:
    """Training data of a learner: a factorization of trees into scored parts.

    features: the :class:`~arboreal.features.FeatureSet` (fitted): the arc parts.
    encoded: list of :class:`~arboreal.features.EncodedSentence`, one per sentence.
    heads: list of gold heads arrays (n+1,), ``heads[0] = -1``.
    structure: the :class:`~arboreal.inference.structure.TreeStructure` (tree family
        and root rule) that decoding, k-best and marginals go through; ``projective``
        and ``single_root`` read it.
    progress: optional ``progress(iterable, epoch) -> iterable`` wrapping the
        sentence order of an epoch (the CLI passes a tqdm bar); learners iterate
        ``data.wrap(order, epoch)``.
    extra: free-form per-learner data (e.g. gold labels).
    parts: higher-order part features sharing the arc features' weight vector
        (:class:`~arboreal.features.higher_order.HigherOrderFeatures`), or None for
        an arc-factored model.
    decoder: ``decoder(i, w, bias) -> heads`` (n+1,) the best tree of sentence i under
        weights w over arcs and parts, with ``bias`` None or (n+1, n+1) offsets added
        to the arc scores (cost-augmented decoding, :func:`cost_bias`); required with
        ``parts`` (the model owns pruning and the higher-order decoders); None:
        arc-factored decoding by ``structure``.
    part_index: ``part_index(i) -> PartIndex``: the pruned arcs and part layout of
        sentence i (:class:`~arboreal.inference.higher_order.PartIndex`; the model
        owns pruning). Given with ``parts`` that have marginals (siblings,
        grandparents, grand-siblings; projective decoding): what the marginal-based
        learners need beyond first order (:func:`part_expectation`). None otherwise.
    """

    features: object
    encoded: list
    heads: list
    structure: TreeStructure = field(default_factory=ProjectiveTrees)
    progress: Callable | None = None
    extra: dict = field(default_factory=dict)
    parts: object | None = None
    decoder: Callable[[int, np.ndarray], np.ndarray] | None = None
    part_index: Callable[[int], object] | None = None

    def __post_init__(self) -> None:
        if self.parts is not None and self.decoder is None:
            raise ValueError("higher-order parts need the model's decoder")

    def __len__(self) -> int:
        return len(self.encoded)

    @property
    def projective(self) -> bool:
        """Whether the structure's trees are all projective."""
        return self.structure.projective

    @property
    def single_root(self) -> bool:
        """Whether exactly one word attaches to the root."""
        return self.structure.single_root

    @property
    def arc_factored(self) -> bool:
        """Whether trees factor into arcs only (the exact first-order routines apply)."""
        return self.parts is None

    def subset(self, keep: Sequence[int]) -> "TrainingData":
        """The same factorization over sentences ``keep`` (indices into this data),
        renumbered 0..len(keep)-1; per-sentence lists of ``extra`` are restricted too."""
        keep = [int(i) for i in keep]
        n = len(self.encoded)
        decoder = None if self.decoder is None else \
            (lambda i, w, bias=None, _d=self.decoder: _d(keep[i], w, bias))
        part_index = None if self.part_index is None else \
            (lambda i, _p=self.part_index: _p(keep[i]))
        extra = {k: [v[i] for i in keep] if isinstance(v, list) and len(v) == n else v
                 for k, v in self.extra.items()}
        return TrainingData(self.features, [self.encoded[i] for i in keep],
                            [self.heads[i] for i in keep], self.structure, self.progress, extra, self.parts, decoder, part_index)

    def observed(self, out: np.ndarray, scale: float = 1.0) -> None:
        """``out += scale * sum_i F(x_i, y_i)``: the gold trees' arc and part features."""
        for enc, heads in zip(self.encoded, self.heads):
            self.features.accumulate_tree(enc, heads, out, scale)
            if self.parts is not None:
                self.parts.accumulate_tree(enc.codes, heads, out, scale)

    def wrap(self, order, epoch: int):
        """The sentence indices of one epoch, wrapped by ``progress`` if given."""
        return order if self.progress is None else self.progress(order, epoch)

    def decode(self, i: int, w: np.ndarray, cost: float = 0.0) -> np.ndarray:
        """The best tree (n+1,) of sentence i under weights w; with ``cost`` > 0 the
        cost-augmented one: every arc but the gold ones scores ``cost`` more (the tree
        maximizing score + cost * wrong heads)."""
        bias = cost_bias(self.heads[i], cost) if cost else None
        if self.decoder is not None:
            return self.decoder(i, w, bias)
        scores = self.features.arc_scores(self.encoded[i], w)
        return self.structure.decode(scores if bias is None else scores + bias)

    def tree_items(self, i: int, gold: np.ndarray, trees: list[np.ndarray]
                   ) -> tuple[np.ndarray, ...]:
        """phi(gold) - phi(tree) of each tree as signed lists of feature *items*
        (arcs, and with ``parts`` each tree's higher-order parts as one item):
        ``(offsets, ids, vals, con_ptr, con_item, con_coef)``: item a is the vector
        ``sum_q vals[q] e_{ids[q]}`` over q in ``offsets[a]:offsets[a+1]``, constraint j (tree j) is
        ``sum_p con_coef[p] * item(con_item[p])`` for p in
        ``con_ptr[j]:con_ptr[j+1]``. Only arcs on which a tree differs from gold are
        listed. O(features of those arcs and of the trees' parts)."""
        enc = self.encoded[i]
        arc_h, arc_m, con_ptr, con_item, con_coef = [], [], [0], [], []
        for tree in trees:
            wrong = np.flatnonzero(gold[1:] != tree[1:]) + 1
            base = sum(len(x) for x in arc_h)
            arc_h += [gold[wrong], tree[wrong]]
            arc_m += [wrong, wrong]
            k = wrong.size
            con_item.append(base + np.arange(2 * k))
            con_coef.append(np.repeat([1.0, -1.0], k))
            con_ptr.append(con_ptr[-1] + 2 * k)
        n_arcs = int(sum(len(x) for x in arc_h))
        offsets, ids, vals = self.features.arc_features(
            enc, np.concatenate(arc_h).astype(np.int64), np.concatenate(arc_m).astype(np.int64))
        if self.parts is not None:
            # the gold tree's parts, then each tree's, one item each
            blocks = [self.parts.tree_ids(enc.codes, t) for t in [gold, *trees]]
            ends = offsets[-1] + np.cumsum([b.size for b in blocks])
            offsets = np.concatenate([offsets, ends])
            ids = np.concatenate([ids, *blocks])
            vals = np.concatenate([vals, np.ones(ids.size - vals.size)])
            ptr = [0]
            items, coefs = [], []
            for j in range(len(trees)):
                a, b = con_ptr[j], con_ptr[j + 1]
                items.append(np.concatenate([con_item[j], [n_arcs, n_arcs + 1 + j]]))
                coefs.append(np.concatenate([con_coef[j], [1.0, -1.0]]))
                ptr.append(ptr[-1] + (b - a) + 2)
            con_item, con_coef, con_ptr = items, coefs, ptr
        return (np.asarray(offsets, dtype=np.int64), np.asarray(ids, dtype=np.int64),
                np.asarray(vals, dtype=np.float64), np.asarray(con_ptr, dtype=np.int64),
                np.concatenate(con_item).astype(np.int64) if con_item else np.zeros(0, np.int64),
                np.concatenate(con_coef) if con_coef else np.zeros(0))


def require_arc_factored(data: TrainingData, learner: str) -> None:
    """ValueError unless ``data`` is arc-factored (learners that need the exact
    first-order routines)."""
    if not data.arc_factored:
        raise ValueError(f"learner {learner} needs an arc-factored model (first order)")


def require_marginals(data: TrainingData, learner: str) -> None:
    """ValueError unless ``data`` is arc-factored or its parts have marginals."""
    if not data.arc_factored and data.part_index is None:
        raise ValueError(f"learner {learner} needs part marginals, which these parts do not "
                         "have (first order, or second order: siblings and grandparents)")


def part_scores(data: TrainingData, i: int, w: np.ndarray) -> tuple[np.ndarray, dict]:
    """Arc scores (n+1, n+1) and flat part scores {kind: array or None} of sentence i
    under w, in the layout of ``data.part_index(i)``."""
    enc = data.encoded[i]
    return (data.features.arc_scores(enc, w),
            data.parts.part_scores(enc.codes, data.part_index(i), w, True))


def part_marginals(data: TrainingData, i: int, arc: np.ndarray, parts: dict
                   ) -> tuple[float, dict]:
    """log Z and the marginals {"arc": (n+1, n+1), kind: flat} of sentence i's
    projective trees over its pruned arcs under arc and part scores (the model's
    decoder admitted the sentence within its memory budget; these charts take twice
    the decoder's). O(K^2 n^2)."""
    from arboreal.inference.higher_order import grand_sibling_marginals

    return grand_sibling_marginals(arc, parts.get("sib"), parts.get("grand"),
                                   parts.get("gsib"), single_root=data.single_root,
                                   index=data.part_index(i))


def accumulate_marginals(data: TrainingData, i: int, mu: dict, out: np.ndarray,
                         scale: float) -> None:
    """``out += scale * sum_part mu[part] f(part)`` over sentence i's arcs and parts."""
    enc = data.encoded[i]
    data.features.accumulate_dense(enc, mu["arc"], out, scale)
    data.parts.accumulate_parts(enc.codes, data.part_index(i), mu, out, scale)


def part_expectation(data: TrainingData, i: int, w: np.ndarray, out: np.ndarray,
                     scale: float) -> float:
    """``out += scale * E_w[F(x_i, y)]`` over sentence i's projective trees within its
    pruned arcs, and log Z of that distribution (models with parts)."""
    logz, mu = part_marginals(data, i, *part_scores(data, i, w))
    accumulate_marginals(data, i, mu, out, scale)
    return logz


EpochCallback = Callable[[int, np.ndarray], None]


class BatchLearner:
    """Base of the batch learners (``loglinear``, ``eg``, ``local-margin``): a progress
    line per pass, logged (INFO, logger ``arboreal.learn``) when the learner's
    ``verbose`` is set (the CLI sets it)."""

    verbose: bool = False

    def _log(self, msg: str) -> None:
        if self.verbose:
            import logging

            logging.getLogger(__name__).info("%s", msg)


class Learner(Protocol):
    """Protocol of a learner.

    ``start`` returns the :class:`~arboreal.learn.trainer.EpochLearner` training on
    ``data`` (its own generator, if it draws within epochs, seeded by ``seed``). ``fit``
    trains for ``epochs`` passes over ``data`` (in an order shuffled by
    ``np.random.default_rng(seed)``) and returns the final weights (dim,) float32 or float64.
    After each epoch e (1-based) it calls ``on_epoch(e, weights)`` with the weights
    a parser would use at that point (e.g. the averaged ones); the callback may copy
    them but must not modify them.
    """

    name: str

    def start(self, data: TrainingData, seed: int = 0): ...

    def fit(self, data: TrainingData, epochs: int, on_epoch: EpochCallback | None = None,
            seed: int = 0) -> np.ndarray: ...


_LAZY: dict[str, tuple[str, str]] = {
    "perceptron": ("arboreal.learn.perceptron", "Perceptron"),
    "mira": ("arboreal.learn.mira", "Mira"),
    "kbest-mira": ("arboreal.learn.mira", "KBestMira"),
    "factored-mira": ("arboreal.learn.mira", "FactoredMira"),
    # the marginal-based learners register here:
    "loglinear": ("arboreal.learn.loglinear", "LogLinear"),
    "loglinear-labeled": ("arboreal.learn.labeled_loglinear", "LabeledLogLinear"),
    "eg": ("arboreal.learn.eg", "ExponentiatedGradient"),
    "local-margin": ("arboreal.learn.local_margin", "LocalMargin"),
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
#: the learner of ``arboreal train`` and ``Parser.train`` at every order when none is
#: named: averaged 1-best MIRA with cost-augmented constraints (docs/benchmarks.md,
#: sections "orders_mira_cost" and "learner_defaults_mira")
DEFAULT_LEARNER = "mira"


def get_learner(name: str, **options) -> Learner:
    """Instantiate learner ``name`` with its keyword options (ValueError if unknown)."""
    if name not in LEARNERS:
        raise ValueError(f"unknown learner {name!r}; choose from {', '.join(LEARNERS.names())}")
    return LEARNERS[name](**options)
