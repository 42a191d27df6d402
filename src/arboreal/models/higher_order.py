"""The higher-order parts of the parser: part kinds, the first-order pruner, decoding
within a memory budget.

A :class:`~arboreal.models.parser.Parser` with ``--order 2|3`` (or ``--parts``) holds a
:class:`HigherOrder`: the part features (:class:`~arboreal.features.higher_order.HigherOrderFeatures`,
templates in the template language, sharing the parser's one weight vector with the
full first-order feature set) and a *pruner* (Koo & Collins 2010):

1. a first-order averaged perceptron over the parser's FeatureSet, Eisner decoding,
   trained first (its own weights, ``prune_weights``);
2. each sentence's arcs are pruned with the pruner's first-order marginals
   (:func:`arboreal.inference.higher_order.prune_arcs`: ratio threshold and K heads
   per word; gold arcs are added back during training);
3. the parser's learner (:mod:`arboreal.learn`, the same loop as at first order)
   trains arc and part weights together, decoding exactly over the pruned arcs
   (:func:`decode_parts`). With ``projective=False`` (``--decoder cle``; sibling and
   grandparent parts only) the exact projective tree is then improved by
   hill-climbing over non-projective trees (McDonald & Pereira 2006).

Orders and parts (``--parts`` overrides): order 2 = siblings + grandparents; order 3 =
grand-siblings + tri-siblings as well. With tri-siblings, ``grand_scope`` chooses the
decoder: "all" (default) = grandparent and grand-sibling parts of every child
(``grand_tri_sibling_decode``), "outer" = Koo & Collins's Model 2 (those parts of each
head's outermost child per side only).

Memory budget (``memory_budget``, bytes per sentence, default 1 GiB; None: no limit):
before a sentence's part scores and charts are allocated, their size is computed from
its pruning mask (:func:`arboreal.inference.higher_order.memory.estimate_bytes`). A
sentence over the budget is pruned harder (``max_heads`` halved until it fits, down to
one head per word plus the pruner's best tree); one that still does not fit is parsed
at first order with the pruner's weights, counted in ``last_fallbacks`` /
``fallbacks_total`` (``last_tightened`` / ``tightened_total`` for the harder-pruned
ones) and reported by one ``MemoryBudgetWarning`` per call; in training it is left out
of the epochs. Nothing is allocated beyond the budget plus the first-order O(n^2)
arrays.
"""
from __future__ import annotations

import warnings
from typing import Callable, Sequence

import numpy as np

from arboreal.features.first_order import FeatureSet
from arboreal.features.higher_order import KINDS, HigherOrderFeatures
from arboreal.inference import chu_liu_edmonds, eisner, marginals
from arboreal.inference.higher_order import (
    PartIndex,
    grand_sibling_decode,
    grand_tri_sibling_decode,
    grandparent_decode,
    hill_climb,
    prune_arcs,
    sibling_decode,
    tri_sibling_decode,
)
from arboreal.inference.higher_order.memory import (DEFAULT_BUDGET, MemoryBudgetWarning,
                                                    PartCounts, estimate_bytes, part_counts,
                                                    quadratic_bytes)
from arboreal.models.facts import part_order

PART_NAMES = {"sibling": "sib", "grandparent": "grand", "grand-sibling": "gsib",
              "tri-sibling": "trisib"}
DEFAULT_PARTS = {1: (), 2: ("sib", "grand"), 3: ("sib", "grand", "gsib", "trisib")}
GRAND_SCOPES = ("outer", "all")
#: the training words the pruner reads when no ``pruner_epochs`` is given: as many
#: passes over the training set as make about this many words (at least one, at most
#: the parser's epochs). Chosen on dev UAS with orders 2 and 3 (docs/benchmarks.md,
#: sections "orders" and "orders_*"): on EWT (about 200,000 training words: 4 passes)
#: a pruner trained for fewer passes than the parser keeps more competing heads, in the
#: training masks and at parse time, for the same share of gold heads; on treebanks of
#: a few ten thousand words the parser's 10 epochs did better over both learners (the
#: perceptron's order 2 gained, MIRA's lost less)
PRUNER_WORDS = 800_000


def default_pruner_epochs(train_words: int, epochs: int) -> int:
    """The pruner's passes over ``train_words`` training words when none are given:
    round(PRUNER_WORDS / train_words), at least 1, at most the parser's ``epochs``."""
    return max(1, min(epochs, round(PRUNER_WORDS / max(train_words, 1))))


#: the pruner temperatures tried when none is given
TEMPERATURES = (5.0, 10.0, 20.0, 30.0, 50.0, 80.0, 120.0, 200.0, 400.0, 1000.0)
#: the candidate heads per word (K) tried when no ``max_heads`` is given: of every
#: (temperature, K) pair that keeps the target share of gold heads, the one keeping the
#: fewest heads is used. A pruner trained on small or freely ordered treebanks ranks the
#: gold head below the tenth candidate for a few percent of the words, which no
#: temperature repairs at K = 10.
HEAD_LIMITS = (10, 12, 14, 16, 20, 25, 30, 40)
#: sentences the temperature is chosen on, at most; without dev data they are a
#: held-out tenth of the training sentences (the pruner is trained on the rest), those of
#: at most TEMPERATURE_MAX_WORDS words (a longer one would cost O(n^3) marginals per
#: temperature tried, for a choice about typical sentences)
TEMPERATURE_SENTENCES = 3000
TEMPERATURE_MAX_WORDS = 200
#: where the pruning is chosen without dev data (model metadata and messages)
HELD_OUT = "held-out train"
PRUNE_BATCH = 64   # sentences of similar length per batched marginals / Eisner call
PRUNE_CELLS = 1 << 22   # at most this many padded (n+1)^2 cells per batch


def parse_parts(order: int, parts: str | Sequence[str] | None) -> tuple[str, ...]:
    """Part kinds for ``--order`` / ``--parts`` (CLI names or internal kinds)."""
    if parts is None:
        if order not in DEFAULT_PARTS:
            raise ValueError(f"order must be 1, 2 or 3, got {order}")
        return DEFAULT_PARTS[order]
    if not isinstance(parts, str):
        parts = ",".join(parts)
    parts = [p for p in parts.split(",") if p.strip()]
    out = []
    for p in parts:
        p = p.strip()
        kind = PART_NAMES.get(p, p)
        if kind not in KINDS:
            raise ValueError(f"unknown part {p!r}; choose from {', '.join(PART_NAMES)}")
        out.append(kind)
    return tuple(k for k in KINDS if k in out)


def decode_parts(arc: np.ndarray, part_scores: dict, index: PartIndex, kinds: Sequence[str],
                 projective: bool, outer_only: bool, single_root: bool) -> np.ndarray:
    """The best tree (n+1,) under arc scores (n+1, n+1) and compact part scores (see
    ``PartIndex``) of these kinds: the exact projective decoder of the factorization
    ({sib} or none: sibling O(n^3); {grand}: Model 0; with trisib: Model 2 or the
    all-children decoder; otherwise Model 1), or with ``projective=False``
    hill-climbing from the projective tree (sib and grand parts only)."""
    p = set(kinds)
    ps, sr = part_scores, single_root
    if not projective:
        return hill_climb(arc, ps.get("sib"), ps.get("grand"), single_root=sr, index=index)
    if not p or p == {"sib"}:
        return sibling_decode(arc, ps.get("sib"), single_root=sr, index=index)
    if p == {"grand"}:
        return grandparent_decode(arc, ps["grand"], single_root=sr, index=index)
    if "trisib" in p and not outer_only:
        return grand_tri_sibling_decode(arc, ps.get("sib"), ps["trisib"], ps.get("grand"),
                                        ps.get("gsib"), single_root=sr, index=index)
    if "trisib" in p:
        return tri_sibling_decode(arc, ps.get("sib"), ps["trisib"], ps.get("grand"),
                                  ps.get("gsib"), single_root=sr, index=index)
    return grand_sibling_decode(arc, ps.get("sib"), ps.get("grand"), ps.get("gsib"),
                                single_root=sr, index=index)


def _length_chunks(lengths: np.ndarray) -> list[np.ndarray]:
    """Positions 0..len-1 of ``lengths`` (sorted increasingly) in consecutive chunks
    of at most PRUNE_BATCH sentences and PRUNE_CELLS padded cells (a long sentence
    gets a batch of its own instead of padding many others to its length). O(len)."""
    chunks = []
    start = 0
    for i in range(1, lengths.size + 1):
        if i == lengths.size or i - start >= PRUNE_BATCH \
                or (i + 1 - start) * (int(lengths[i]) + 1) ** 2 > PRUNE_CELLS:
            chunks.append(np.arange(start, i))
            start = i
    return chunks


class HigherOrder:
    """Higher-order parts of a parser and the pruner that makes decoding them affordable.

    Args:
        features: the parser's first-order :class:`FeatureSet` (the pruner's features).
        parts: the part features (their ``bits`` equal the FeatureSet's).
        prune_weights: the pruner's first-order weights (features.dim,) float32.
        projective: exact projective decoding (True) or hill-climbing (sib/grand only).
        single_root: exactly one word on the root.
        max_heads, threshold: pruning (K heads per word, marginal ratio).
        prune_temperature: the pruner's scores are divided by it before the marginals
            (perceptron scores are not calibrated probabilities).
        memory_budget: bytes one sentence's decoding may allocate (None: no limit); a
            runtime setting, not stored in the model file.
    """

    def __init__(self, features: FeatureSet, parts: HigherOrderFeatures,
                 prune_weights: np.ndarray, projective: bool = True, single_root: bool = True,
                 max_heads: int = 10, threshold: float = 1e-4, prune_temperature: float = 30.0,
                 memory_budget: float | None = DEFAULT_BUDGET):
        if not parts.parts:
            raise ValueError("a higher-order model needs at least one part kind")
        if not projective and not set(parts.parts) <= {"sib", "grand"}:
            raise ValueError("non-projective decoding (hill-climbing) supports sibling and "
                             "grandparent parts only")
        if parts.bits != features.bits:
            raise ValueError(f"part features of 2^{parts.bits} weights beside arc features "
                             f"of 2^{features.bits}")
        if memory_budget is not None and not memory_budget > 0:
            raise ValueError("memory_budget must be positive (or None: no limit)")
        if not (max_heads >= 1 and 0.0 <= threshold <= 1.0 and prune_temperature > 0):
            raise ValueError("pruning needs max_heads >= 1, threshold in [0, 1] and "
                             "prune_temperature > 0")
        self.features = features
        self.parts = parts
        self.prune_weights = np.asarray(prune_weights, dtype=np.float32)
        self.projective = bool(projective)
        self.single_root = bool(single_root)
        self.max_heads = int(max_heads)
        self.threshold = float(threshold)
        self.prune_temperature = float(prune_temperature)
        self.memory_budget = memory_budget
        #: sentences of the last ``decode_all`` call decoded at first order (over the
        #: memory budget) and pruned harder to fit it; totals over all calls
        self.last_fallbacks = self.last_tightened = 0
        self.fallbacks_total = self.tightened_total = 0
        #: the rows of the last ``decode_all`` call's sentences decoded at first order
        self.last_fallback_rows: list[int] = []
        #: how training chose ``prune_temperature`` (None: given, or a loaded model)
        self.temperature_choice: dict | None = None
        #: the :meth:`pruning_table` of the whole grid on the tuning data, when training
        #: made one (None: given pruning, or a loaded model)
        self.tuning_table: list[dict] | None = None
        #: (encoded sentences, gold heads, what they are) the pruning was chosen on, after
        #: training (not saved)
        self.tuning_set: tuple | None = None

    @property
    def kinds(self) -> tuple[str, ...]:
        return self.parts.parts

    @property
    def order(self) -> int:
        return part_order(self.kinds)

    @property
    def outer_only(self) -> bool:
        """Grand / gsib parts only of each head's outermost child (Model 2)."""
        return self.parts.outer_only

    def config(self) -> dict:
        """The model file's ``higher_order`` section (with array ``p``: the pruner)."""
        return {**self.parts.config(), "projective": self.projective,
                "max_heads": self.max_heads, "threshold": self.threshold,
                "prune_temperature": self.prune_temperature}

    # ------------------------------------------------------------------ pruning
    def masks(self, encs: Sequence, golds: Sequence | None = None) -> list[np.ndarray | None]:
        """Pruning masks (n+1, n+1) bool of many sentences (gold arcs added if given);
        None for a sentence over the memory budget whatever the pruning, which is
        neither pruned nor decoded at this order.

        The pruner's arc scores are computed per sentence; its best projective trees
        (always kept) and Matrix-Tree marginals come from one batched call per
        PRUNE_BATCH sentences of similar length.
        """
        out: list = [None] * len(encs)
        lengths = np.array([e.n for e in encs], dtype=np.int64)
        for i in np.flatnonzero(lengths <= 1):
            out[i] = np.ones((lengths[i] + 1,) * 2, dtype=bool)
        for chunk, ns, batch, keep in self._pruner_batches(encs):
            mu = marginals(batch / self.prune_temperature, projective=False,
                           single_root=self.single_root, lengths=ns)
            for j, i in enumerate(chunk):
                n1 = ns[j] + 1
                out[i] = self._prune_within_budget(mu[j, :n1, :n1], keep[j, :n1],
                                                   None if golds is None else golds[i])
        if golds is not None:
            for a, g in zip(out, golds):
                if a is not None:
                    a[g[1:], np.arange(1, len(g))] = True
        return out

    def _pruner_batches(self, encs: Sequence):
        """The pruner's arc scores of the sentences of more than one word that can fit
        the memory budget, in padded batches of similar length: yields ``(indices,
        lengths, scores (B, N, N), best projective trees (B, N))``."""
        lengths = np.array([e.n for e in encs], dtype=np.int64)
        big = np.flatnonzero((lengths > 1) & ~self._over_budget_anyway(lengths))
        for chunk, ns, batch in self._arc_batches(encs, big, self.prune_weights):
            yield chunk, ns, batch, eisner(batch, single_root=self.single_root, lengths=ns)

    def _arc_batches(self, encs: Sequence, rows: np.ndarray, w: np.ndarray):
        """Arc scores under ``w`` of the sentences ``rows`` of ``encs``, in padded batches
        of similar length (one batched kernel call each, see :func:`_length_chunks`):
        yields ``(indices, lengths, scores (B, N, N))``."""
        lengths = np.array([encs[i].n for i in rows], dtype=np.int64)
        order = np.argsort(lengths, kind="stable")
        rows, lengths = np.asarray(rows)[order], lengths[order]
        for pos in _length_chunks(lengths):
            yield rows[pos], lengths[pos], self.features.arc_scores_batch(
                self.features.pack([encs[i] for i in rows[pos]]), w)

    def use_pruning(self, choice: dict) -> dict:
        """Prune with the temperature and K of ``choice`` (a :meth:`pruning_table` row)."""
        self.prune_temperature = choice["temperature"]
        self.max_heads = choice["max_heads"]
        return choice

    @staticmethod
    def choose_pruning(table: list[dict], target: float) -> dict:
        """Of the pairs of a :meth:`pruning_table` whose pruning keeps at least ``target``
        of the gold heads, the one keeping the fewest candidate heads (the pair keeping
        the most gold heads if none reaches the target)."""
        enough = [f for f in table if f["gold_heads_kept"] >= target]
        if enough:
            return min(enough, key=lambda f: (f["kept_heads_per_word"], f["max_heads"],
                                              f["temperature"]))
        return max(table, key=lambda f: (f["gold_heads_kept"], -f["kept_heads_per_word"]))

    def pruning_table(self, encs: list, golds: list,
                      temperatures: Sequence[float] = TEMPERATURES,
                      head_limits: Sequence[int] = HEAD_LIMITS) -> list[dict]:
        """{temperature, max_heads, gold_heads_kept, kept_heads_per_word} of pruning these
        sentences (gold heads ``golds``) with every pair of ``temperatures`` x
        ``head_limits``. O(len(temperatures)) batched marginals over the sentences."""
        batches = list(self._pruner_batches(encs))
        words = max(sum(int(ns.sum()) for _, ns, _, _ in batches), 1)
        found = []
        for T in temperatures:
            hit = np.zeros(len(head_limits), dtype=np.int64)
            kept = np.zeros(len(head_limits), dtype=np.int64)
            for chunk, ns, batch, keep in batches:
                mu = marginals(batch / T, projective=False, single_root=self.single_root,
                               lengths=ns)
                for j, i in enumerate(chunk):
                    n1 = ns[j] + 1
                    gold = golds[i]
                    for k, K in enumerate(head_limits):
                        a = prune_arcs(mu[j, :n1, :n1], self.threshold, K,
                                       self.single_root, keep=keep[j, :n1])
                        hit[k] += int(a[gold[1:], np.arange(1, n1)].sum())
                        kept[k] += int(a.sum())
            found += [{"temperature": T, "max_heads": int(K),
                       "gold_heads_kept": int(hit[k]) / words,
                       "kept_heads_per_word": int(kept[k]) / words}
                      for k, K in enumerate(head_limits)]
        return found

    def _over_budget_anyway(self, lengths: np.ndarray) -> np.ndarray:
        """Which sentences of these lengths exceed the memory budget even with one head
        per word (the estimate's quadratic term alone is over it): they are spared
        the pruner's O(n^3) marginals."""
        if self.memory_budget is None:
            return np.zeros(len(lengths), dtype=bool)
        return quadratic_bytes(np.asarray(lengths, dtype=np.float64)) > self.memory_budget

    def _prune_within_budget(self, mu: np.ndarray, keep: np.ndarray,
                             gold: np.ndarray | None) -> np.ndarray:
        """Pruning mask (n+1, n+1) from marginals ``mu`` with ``max_heads`` halved until
        the sentence fits the memory budget (down to 1; gold arcs added if given)."""
        K = self.max_heads
        while True:
            a = prune_arcs(mu, self.threshold, K, self.single_root, keep=keep)
            if gold is not None:
                a[gold[1:], np.arange(1, len(gold))] = True
            if K == 1 or self.mask_fits(a):
                break
            K = max(1, K // 2)
        if K < self.max_heads:
            self.last_tightened += 1
            self.tightened_total += 1
        return a

    # ------------------------------------------------------------------ memory budget
    def estimate_bytes(self, counts: PartCounts) -> int:
        """Bytes decoding a sentence of these :class:`PartCounts` allocates with these
        parts and decoder (formula: :mod:`arboreal.inference.higher_order.memory`)."""
        return estimate_bytes(counts, self.kinds, self.projective, self.outer_only)

    def _fits(self, counts: PartCounts) -> bool:
        return self.memory_budget is None or self.estimate_bytes(counts) <= self.memory_budget

    def mask_fits(self, allowed: np.ndarray) -> bool:
        """Whether the sentence of pruning mask ``allowed`` fits the memory budget. O(1)
        for sentences too short to reach it whatever the pruning, else O(n^2)."""
        if self.memory_budget is None:
            return True
        N = allowed.shape[0]
        if 40 * N ** 4 <= self.memory_budget:   # bounds the formula with every arc kept
            return True
        return self._fits(part_counts(allowed))

    # ------------------------------------------------------------------ decoding
    def first_order_heads(self, enc) -> np.ndarray:
        """The fallback of a sentence over the memory budget: the pruner's first-order
        tree (Eisner, or Chu-Liu-Edmonds for a non-projective model). O(n^2) memory."""
        scores = self.features.arc_scores(enc, self.prune_weights)
        if self.projective:   # Eisner: its long-sentence path is fast and interruptible
            return eisner(scores, single_root=self.single_root)
        return chu_liu_edmonds(scores, single_root=self.single_root)

    def decode(self, enc, allowed: np.ndarray | None, w: np.ndarray,
               arc: np.ndarray | None = None) -> np.ndarray:
        """The best tree of one sentence under weights ``w`` over its pruned arcs and
        their parts (the pruner's tree if the sentence is over the memory budget);
        ``arc``: the first-order arc scores (n+1, n+1) to decode with, by default those
        under ``w`` (training passes them with cost-augmented offsets added)."""
        index = None if allowed is None else PartIndex.compact(allowed)
        if index is None or not self._fits(PartCounts(
                index.n, int(index.grand_off.shape[0]), int(index.width[0]), index.n_sib,
                index.n_grand, index.n_gsib, index.n_tri)):
            self.last_fallbacks += 1
            self.fallbacks_total += 1
            return self.first_order_heads(enc)
        # all n^2 arc scores (the decoders read only the kept ones): the feature
        # engine's scoring kernel is faster than hashing only the kept arcs
        if arc is None:
            arc = self.features.arc_scores(enc, w)
        ps = self.parts.part_scores(enc.codes, index, w, self.projective)
        return decode_parts(arc, ps, index, self.kinds, self.projective, self.outer_only,
                            self.single_root)

    #: part kinds whose marginals exist here (inside-outside over Model 1's spans)
    MARGINAL_KINDS = frozenset({"sib", "grand", "gsib"})

    @property
    def has_marginals(self) -> bool:
        """Whether these parts have marginals (no tri-siblings): the marginal-based
        learners can train them (projective decoding)."""
        return set(self.kinds) <= self.MARGINAL_KINDS

    def decode_all(self, encs: list, w: np.ndarray,
                   masks: list | None = None) -> list[np.ndarray]:
        """Trees of many sentences (masks computed unless given), one
        ``MemoryBudgetWarning`` if some were parsed at first order."""
        self.last_fallbacks = self.last_tightened = 0
        self.last_fallback_rows = []
        if masks is None:
            masks = self.masks(encs)
        heads: list = [np.array([-1], dtype=np.int64)] * len(encs)
        lengths = np.array([e.n for e in encs], dtype=np.int64)
        pruned = np.array([a is not None for a in masks], dtype=bool)
        for i in np.flatnonzero((lengths > 0) & ~pruned):   # over the budget: first order
            heads[i] = self.decode(encs[i], None, w)
            self.last_fallback_rows.append(int(i))
        some = np.flatnonzero((lengths > 0) & pruned)
        for chunk, ns, arcs in self._arc_batches(encs, some, w):
            for j, i in enumerate(chunk):
                n1 = ns[j] + 1
                before = self.last_fallbacks
                heads[i] = self.decode(encs[i], masks[i], w,
                                       np.ascontiguousarray(arcs[j, :n1, :n1]))
                if self.last_fallbacks > before:
                    self.last_fallback_rows.append(int(i))
        if self.last_fallbacks:
            warnings.warn(f"{self.last_fallbacks} sentence(s) over the order-{self.order} "
                          f"memory budget ({self.memory_budget / 2**20:.4g} MiB) parsed at "
                          f"first order", MemoryBudgetWarning, stacklevel=3)
        return heads

    def pruning_recall(self, encs: list, golds: list) -> tuple[float, float]:
        """(share of gold arcs the pruning keeps, kept arcs per word) on gold trees."""
        hit = tot = kept = 0
        for enc, gold, a in zip(encs, golds, self.masks(encs)):
            n = enc.n
            if n == 0:
                continue
            if a is None:        # parsed at first order: its only arcs are that tree's
                a = np.zeros((n + 1, n + 1), dtype=bool)
                a[self.first_order_heads(enc)[1:], np.arange(1, n + 1)] = True
            hit += int(a[gold[1:], np.arange(1, n + 1)].sum())
            tot += n
            kept += int(a.sum())
        return hit / max(tot, 1), kept / max(tot, 1)

    # ------------------------------------------------------------------ training
    @classmethod
    def train(cls, features: FeatureSet, encs: list, golds: list, kinds: Sequence[str],
              epochs: int, seed: int, single_root: bool, projective: bool,
              grand_scope: str = "all", max_heads: int | None = None, threshold: float = 1e-4,
              prune_temperature: float | None = None, prune_recall: float = 0.995,
              memory_budget: float | None = DEFAULT_BUDGET,
              tune_on: tuple[list, list] | None = None,
              templates: dict | None = None, log: Callable[[int, float], None] | None = None
              ) -> "HigherOrder":
        """Train the pruner (averaged perceptron, Eisner, ``epochs`` passes) on the
        encoded gold trees and return the higher-order component around it;
        ``log(epoch, seconds)`` after each pruner epoch. The ``prune_temperature`` and
        ``max_heads`` not given are chosen (:meth:`choose_pruning`) to keep
        ``prune_recall`` of the gold heads of ``tune_on`` (encoded sentences, gold
        heads: the dev data), with the fewest candidate heads; without dev data, of a
        seeded held-out tenth of the training sentences, the pruner then being trained
        on the other nine tenths (a pruner judged on its own training sentences keeps
        nearly every gold head there at any pruning, and prunes far too hard on new
        text). The choice is in ``temperature_choice``, its data in ``tuning_set``."""
        from arboreal.models.training import train_pruner

        return train_pruner(features, encs, golds, kinds, epochs, seed, single_root, projective,
                            grand_scope, max_heads, threshold, prune_temperature, prune_recall,
                            memory_budget, tune_on, templates, log)

    @staticmethod
    def tuning_data(encs: list, golds: list, tune_on: tuple[list, list] | None
                    ) -> tuple[list, list]:
        """The (encoded sentences, gold heads) pruning is chosen on: ``tune_on`` (the dev
        data) if given, else the first TEMPERATURE_SENTENCES training sentences of at
        most TEMPERATURE_MAX_WORDS words."""
        if tune_on is not None and tune_on[0]:
            return tune_on
        rows = [i for i, e in enumerate(encs) if e.n <= TEMPERATURE_MAX_WORDS]
        rows = rows[:TEMPERATURE_SENTENCES]
        return [encs[i] for i in rows], [golds[i] for i in rows]

    @classmethod
    def from_file(cls, fields, arrays, features: FeatureSet, single_root: bool) -> "HigherOrder":
        """The component of a model file: section ``higher_order`` (``fields`` a
        :class:`~arboreal.io.model_file.MetaFields`) and array ``p``, checked
        (ModelError for bad metadata, ValueError for an array that disagrees)."""
        from arboreal.features.higher_order import compile_part_templates
        from arboreal.io.model_file import get_weights

        cfg = fields.section("higher_order")
        try:
            kinds = parse_parts(2, cfg.strings("parts", max_items=len(KINDS)))
        except ValueError as exc:
            raise cfg.fail("parts", str(exc)) from None
        if not kinds:
            raise cfg.fail("parts", "is empty")
        section = cfg.section("templates")
        templates = {k: section.strings(k) for k in kinds}
        for k in kinds:
            try:
                compile_part_templates(k, templates[k])
            except ValueError as exc:
                raise section.fail(k, f"holds a bad template ({exc})") from None
        projective = cfg.bool("projective")
        outer_only = cfg.bool("outer_only")
        if not projective and not set(kinds) <= {"sib", "grand"}:
            raise cfg.fail("projective", "is false with parts hill-climbing cannot decode")
        parts = HigherOrderFeatures(kinds, features.bits, outer_only=outer_only,
                                    templates=templates)
        return cls(features, parts, get_weights(arrays, "p", features.dim),
                   projective=projective, single_root=single_root,
                   max_heads=cfg.int("max_heads", 1, 1 << 31),
                   threshold=cfg.number("threshold", 0.0, 1.0),
                   prune_temperature=cfg.number("prune_temperature", 0.0, 1e12, lo_open=True))
