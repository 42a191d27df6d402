"""Higher-order parser: siblings, grandparents, grand-siblings, tri-siblings.

Pipeline (Koo & Collins 2010):

1. a first-order *pruner* (averaged perceptron over the first-order FeatureSet,
   Eisner decoding) is trained first;
2. each sentence's arcs are pruned with the pruner's first-order marginals
   (:func:`arboreal.inference.higher_order.prune_arcs`: ratio threshold and K heads
   per word; gold arcs are added back during training);
3. the higher-order model (first-order arc features + higher-order part features
   of :mod:`arboreal.features.higher_order`, one hashed weight vector) is trained
   with the averaged perceptron or averaged 1-best MIRA (``learner="mira"``, update
   on phi(gold) - phi(pred) over arc and part features, loss = wrong heads, step
   ``min(C, (loss - w.diff) / ||diff||^2)`` as in :mod:`arboreal.learn.mira`),
   decoding exactly over the pruned arcs. The pruner is always the perceptron.
   With ``projective=False`` (``--decoder cle``; sibling and grandparent parts
   only) the exact projective tree is then improved by hill-climbing over
   non-projective trees (McDonald & Pereira 2006), in training and parsing.

Orders and parts (``--parts`` overrides): order 2 = siblings + grandparents
(Model 1 decoder without grand-siblings, O(n^4) but ~O(K^2 n^2) after pruning);
order 3 = grand-siblings + tri-siblings. With tri-siblings, ``grand_scope``
chooses the decoder: "outer" = Koo & Collins's Model 2 (grandparent and
grand-sibling parts of each head's outermost child per side only, which is what
Model 2's O(n^3)-space program can see), "all" = every part for every child
(``grand_tri_sibling_decode``, Model 2's spans with the grandparent index; exact,
affordable after pruning). The decoder follows from the parts: {sib} -> sibling
O(n^3), {grand} -> Model 0, with trisib -> Model 2 / all-parts, otherwise Model 1.

Labels: the first-order parser's second-stage :class:`~arboreal.models.labeler.Labeler`
(trained on gold trees).

Files: the common arboreal model format of :mod:`arboreal.models.serialization`
(one ``.npz`` without pickle + JSON metadata, ``model_type = "higher-order"``);
``arboreal.models.load_model`` dispatches to :meth:`HigherOrderParser.from_file_contents`.
The CLI (``arboreal train --order 2|3 [--parts ...]``) calls :func:`train`.

Memory budget (``memory_budget``, bytes per sentence, default 1 GiB; None: no
limit): before a sentence's part scores and charts are allocated, their size is
computed from its pruning mask (:func:`arboreal.inference.higher_order.memory.estimate_bytes`:
O(n^2) tables + part scores + charts of (kept arcs + 1) x (n+1) cells). A sentence
over the budget is pruned harder: ``max_heads`` is halved until it fits (its
decoding stays exact over the fewer kept heads; memory is linear in them), down
to one head per word (plus the pruner's best tree). A sentence that still does not
fit is parsed at first order (the pruner's weights and the first-order decoder,
Eisner or Chu-Liu-Edmonds as the model's ``projective``), counted in
``last_fallbacks`` / ``fallbacks_total`` (``last_tightened`` / ``tightened_total``
for the harder-pruned ones) and reported by one ``MemoryBudgetWarning`` per call;
in training it is left out of the higher-order epochs (``train_skipped``, one
warning). Nothing is ever allocated beyond the budget plus the first-order
parser's own O(n^2) arrays.
"""
from __future__ import annotations

import os
import time
import warnings
from typing import Callable, Sequence

import numpy as np

from arboreal.errors import ArborealError, ModelError
from arboreal.features.first_order import ATTRS, FeatureSet
from arboreal.features.higher_order import KINDS, HigherOrderFeatures, compile_part_templates
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
from arboreal.models.labeler import Labeler, label_templates
from arboreal.models.pieces import parse_in_pieces
from arboreal.models.pipeline import (PipelineMixin, attach_pipeline,
                                       complete_tags, put_pipeline)
from arboreal.models.serialization import (get_weights, load_model_file, put_strings,
                                           put_vocabs, put_weights, save_model_file)

PART_NAMES = {"sibling": "sib", "grandparent": "grand", "grand-sibling": "gsib",
              "tri-sibling": "trisib"}
DEFAULT_PARTS = {1: (), 2: ("sib", "grand"), 3: ("sib", "grand", "gsib", "trisib")}
FORMAT_VERSION = 3   # layout of this module's arrays inside the common model format
#: version 3 stores the part templates in the file; older files hashed hand-written ones
OLDEST_FORMAT = 3
LEARNERS = ("perceptron", "mira")
GRAND_SCOPES = ("outer", "all")


def parse_parts(order: int, parts: str | Sequence[str] | None) -> tuple[str, ...]:
    """Part kinds for ``--order`` / ``--parts`` (CLI names or internal kinds)."""
    if parts is None:
        if order not in DEFAULT_PARTS:
            raise ValueError(f"order must be 1, 2 or 3, got {order}")
        return DEFAULT_PARTS[order]
    if isinstance(parts, str):
        parts = [p for p in parts.split(",") if p.strip()]
    out = []
    for p in parts:
        p = p.strip()
        kind = PART_NAMES.get(p, p)
        if kind not in KINDS:
            raise ValueError(f"unknown part {p!r}; choose from {', '.join(PART_NAMES)}")
        out.append(kind)
    return tuple(k for k in KINDS if k in out)


PRUNE_BATCH = 64   # sentences of similar length per batched marginals / Eisner call
PRUNE_CELLS = 1 << 22   # at most this many padded (n+1)^2 cells per batch


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


class HigherOrderParser(PipelineMixin):
    """Second/third-order parser trained with the averaged perceptron or MIRA.

    Args:
        order: 1, 2 or 3 (default parts per order: see the module docstring).
        parts: optional list or comma string of parts (sibling, grandparent,
            grand-sibling, tri-sibling), overriding ``order``'s default.
        features: first-order template set of :class:`FeatureSet` ("mcdonald", "default").
        bits: hashed weight vector size 2**bits (shared by all part kinds).
        epochs / pruner_epochs: perceptron passes of the model / of the pruner
            (order 1 with epochs=0: the first-order pruner alone is the parser).
        max_heads, threshold: pruning (K heads per word, marginal ratio).
        prune_temperature: the pruner's scores are divided by it before the
            marginals (perceptron scores are not calibrated probabilities).
        single_root: exactly one word attached to the root.
        learner: "perceptron" or "mira" (averaged 1-best MIRA) for the model epochs.
        C: MIRA's step bound (default inf, as in McDonald et al. 2006).
        projective: True (default): exact projective decoding. False (sibling and
            grandparent parts only): the projective tree is improved by hill-climbing
            over non-projective trees under the same part scores and pruning
            (McDonald & Pereira 2006), in training and parsing alike.
        grand_scope: with tri-sibling parts, "all" (default: grandparent and
            grand-sibling parts of every child) or "outer" (Koo & Collins's Model 2:
            only of each head's outermost child per side). Chosen on EWT dev UAS in
            the reduced setting; on the full training set dev does not separate
            them (docs/benchmarks.md, sections higher_order and higher_order_full).
        projectivize: with projective decoding, the model epochs learn from each
            gold tree's minimum-loss projective version (Koo et al. 2007, fn. 4; the
            tree a projective decoder can reach) instead of the tree as given. The
            pruner and the labeler always see the trees as given.
        memory_budget: bytes one sentence's higher-order decoding may allocate
            (None: no limit); over it, harder pruning, then first order (module
            docstring). A runtime setting, not stored in the model file.
    """

    model_type = "higher-order"

    def __init__(self, order: int = 2, parts: str | Sequence[str] | None = None,
                 features: str = "default", bits: int = 22, epochs: int = 10,
                 pruner_epochs: int = 5, max_heads: int = 10, threshold: float = 1e-4,
                 single_root: bool = True, seed: int = 0, learner: str = "perceptron",
                 prune_temperature: float = 30.0, C: float = np.inf, projective: bool = True,
                 grand_scope: str = "all", projectivize: bool = False,
                 memory_budget: float | None = DEFAULT_BUDGET,
                 part_templates: dict[str, list[str]] | None = None):
        if learner not in LEARNERS:
            raise ValueError(f"learner {learner!r} is not available for higher-order models "
                             f"(choose from {', '.join(LEARNERS)})")
        if grand_scope not in GRAND_SCOPES:
            raise ValueError(f"grand_scope must be one of {', '.join(GRAND_SCOPES)}, "
                             f"got {grand_scope!r}")
        self.grand_scope = grand_scope
        self.projectivize = bool(projectivize)
        self.C = float(C)
        if not self.C > 0:
            raise ValueError("MIRA option C must be > 0")
        self.order = int(order)
        self.parts = parse_parts(self.order, parts)
        self.projective = bool(projective)
        if not self.projective and not set(self.parts) <= {"sib", "grand"}:
            raise ValueError("non-projective decoding (hill-climbing) supports sibling and "
                             "grandparent parts only")
        self.features_name = features
        self.bits = int(bits)
        self.epochs = int(epochs)
        self.pruner_epochs = int(pruner_epochs)
        self.max_heads = int(max_heads)
        self.threshold = float(threshold)
        self.prune_temperature = float(prune_temperature)
        self.single_root = bool(single_root)
        self.seed = int(seed)
        self.learner = learner
        self.fs: FeatureSet | None = None
        self.hof = HigherOrderFeatures(self.parts, self.bits, outer_only=self.outer_only,
                                       templates=part_templates)
        self.w_prune: np.ndarray | None = None
        self.w: np.ndarray | None = None
        self.labeler: Labeler | None = None
        self.stats: dict = {}
        self.meta: dict = {}
        if memory_budget is not None and not memory_budget > 0:
            raise ValueError("memory_budget must be positive (or None: no limit)")
        self.memory_budget = memory_budget
        #: sentences of the last parse / predict_heads call decoded at first order
        #: (over the memory budget) and pruned harder to fit it; totals over all calls
        self.last_fallbacks = self.last_tightened = 0
        self.fallbacks_total = self.tightened_total = 0
        #: sentences parsed in pieces so far (longer than arboreal.models.pieces.MAX_WORDS)
        self.split_total = 0
        #: the Tokenizer and Tagger before the parser (arboreal.models.pipeline)
        self.tokenizer = self.tagger = None
        #: training sentences left out of the higher-order epochs (over the budget)
        self.train_skipped = 0

    @property
    def outer_only(self) -> bool:
        """Grand / gsib parts only of each head's outermost child (Model 2)."""
        return "trisib" in self.parts and self.grand_scope == "outer"

    @property
    def first_order_only(self) -> bool:
        """order 1 with 0 model epochs: the pruner (first-order, Eisner) is the parser."""
        return not self.parts and self.epochs == 0

    # ------------------------------------------------------------------ decoding
    def _decode(self, arc: np.ndarray, index: PartIndex, ps: dict) -> np.ndarray:
        p = set(self.parts)
        sr = self.single_root
        if not self.projective:
            return hill_climb(arc, ps.get("sib"), ps.get("grand"), single_root=sr, index=index)
        if not p or p == {"sib"}:
            return sibling_decode(arc, ps.get("sib"), single_root=sr, index=index)
        if p == {"grand"}:
            return grandparent_decode(arc, ps["grand"], single_root=sr, index=index)
        if "trisib" in p and not self.outer_only:
            return grand_tri_sibling_decode(arc, ps.get("sib"), ps["trisib"], ps.get("grand"),
                                            ps.get("gsib"), single_root=sr, index=index)
        if "trisib" in p:
            return tri_sibling_decode(arc, ps.get("sib"), ps["trisib"], ps.get("grand"),
                                      ps.get("gsib"), single_root=sr, index=index)
        return grand_sibling_decode(arc, ps.get("sib"), ps.get("grand"), ps.get("gsib"),
                                    single_root=sr, index=index)

    def _first_order_best(self, enc, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(all arc scores, best projective tree) of the first-order weights ``w``."""
        scores = self.fs.arc_scores(enc, w)
        return scores, sibling_decode(scores, None, single_root=self.single_root)

    def _allowed(self, enc, gold: np.ndarray | None = None) -> np.ndarray:
        return self._allowed_many([enc], None if gold is None else [gold])[0]

    def _allowed_many(self, encs: Sequence,
                      golds: Sequence | None = None) -> list[np.ndarray | None]:
        """Pruning masks (n+1, n+1) bool of many sentences (gold arcs added if given);
        None for a sentence over the memory budget whatever the pruning
        (:meth:`_over_budget_anyway`), which is neither pruned nor decoded at this order.

        The pruner's arc scores are computed per sentence; its best projective trees
        (always kept) and Matrix-Tree marginals come from one batched call per
        PRUNE_BATCH sentences of similar length (no per-sentence Python overhead).
        """
        out: list = [None] * len(encs)
        lengths = np.array([e.n for e in encs], dtype=np.int64)
        for i in np.flatnonzero(lengths <= 1):
            out[i] = np.ones((lengths[i] + 1,) * 2, dtype=bool)
        big = np.flatnonzero((lengths > 1) & ~self._over_budget_anyway(lengths))
        big = big[np.argsort(lengths[big], kind="stable")]
        for pos in _length_chunks(lengths[big]):
            chunk = big[pos]
            ns = lengths[chunk]
            N = int(ns.max()) + 1
            batch = np.zeros((chunk.size, N, N))
            for j, i in enumerate(chunk):
                batch[j, :ns[j] + 1, :ns[j] + 1] = self.fs.arc_scores(encs[i], self.w_prune)
            keep = eisner(batch, single_root=self.single_root, lengths=ns)
            batch /= self.prune_temperature
            mu = marginals(batch, projective=False, single_root=self.single_root, lengths=ns)
            for j, i in enumerate(chunk):
                n1 = ns[j] + 1
                out[i] = self._prune_within_budget(mu[j, :n1, :n1], keep[j, :n1],
                                                   None if golds is None else golds[i])
        if golds is not None:
            for a, g in zip(out, golds):
                if a is not None:
                    a[g[1:], np.arange(1, len(g))] = True
        return out

    def _over_budget_anyway(self, lengths: np.ndarray) -> np.ndarray:
        """Which sentences of these lengths exceed the memory budget even with one head
        per word: the estimate's quadratic term alone is over it. Deciding this before
        pruning spares such a sentence the pruner's O(n^3) marginals."""
        if self.memory_budget is None or not self.parts:
            return np.zeros(len(lengths), dtype=bool)
        return quadratic_bytes(np.asarray(lengths, dtype=np.float64)) > self.memory_budget

    # ------------------------------------------------------------------ memory budget
    def estimate_bytes(self, counts: PartCounts) -> int:
        """Bytes decoding a sentence of these :class:`PartCounts` allocates with this
        model's parts and decoder (formula: :mod:`arboreal.inference.higher_order.memory`)."""
        return estimate_bytes(counts, self.parts, self.projective, self.outer_only)

    def _fits(self, counts: PartCounts) -> bool:
        return self.memory_budget is None or self.estimate_bytes(counts) <= self.memory_budget

    def _mask_fits(self, allowed: np.ndarray) -> bool:
        """Whether the sentence of pruning mask ``allowed`` fits the memory budget. O(1)
        for sentences too short to reach it whatever the pruning, else O(n^2)."""
        if self.memory_budget is None or not self.parts:
            return True
        N = allowed.shape[0]
        if 40 * N ** 4 <= self.memory_budget:   # bounds the formula with every arc kept
            return True
        return self._fits(part_counts(allowed))

    def _prune_within_budget(self, mu: np.ndarray, keep: np.ndarray,
                             gold: np.ndarray | None) -> np.ndarray:
        """Pruning mask (n+1, n+1) from marginals ``mu`` with ``max_heads`` halved until
        the sentence fits the memory budget (down to 1; gold arcs added if given)."""
        K = self.max_heads
        while True:
            a = prune_arcs(mu, self.threshold, K, self.single_root, keep=keep)
            if gold is not None:
                a[gold[1:], np.arange(1, len(gold))] = True
            if K == 1 or self._mask_fits(a):
                break
            K = max(1, K // 2)
        if K < self.max_heads:
            self.last_tightened += 1
            self.tightened_total += 1
        return a

    def _first_order_heads(self, enc) -> np.ndarray:
        """The fallback of a sentence over the memory budget: the pruner's first-order
        tree (Eisner, or Chu-Liu-Edmonds for a non-projective model). O(n^2) memory."""
        scores = self.fs.arc_scores(enc, self.w_prune)
        if self.projective:   # Eisner: its long-sentence path is fast and interruptible
            return eisner(scores, single_root=self.single_root)
        return chu_liu_edmonds(scores, single_root=self.single_root)

    def _predict(self, enc, allowed: np.ndarray | None, w: np.ndarray) -> np.ndarray:
        index = None if allowed is None else PartIndex.compact(allowed)
        if index is None or self.parts and not self._fits(PartCounts(
                index.n, int(index.grand_off.shape[0]), int(index.width[0]), index.n_sib,
                index.n_grand, index.n_gsib, index.n_tri)):
            self.last_fallbacks += 1
            self.fallbacks_total += 1
            return self._first_order_heads(enc)
        # all n^2 arc scores (the decoders read only the kept ones): the feature
        # engine's scoring kernel is faster than hashing only the kept arcs
        arc = self.fs.arc_scores(enc, w)
        ps = self.hof.part_scores(enc.codes, index, w, self.projective) if self.parts else {}
        return self._decode(arc, index, ps)

    # ------------------------------------------------------------------ training
    def _learner(self, name: str):
        """The :mod:`arboreal.learn` learner of the model epochs (or of the pruner)."""
        from arboreal.learn import get_learner

        return get_learner(name, **({"C": self.C} if name == "mira" else {}))

    def train(self, sentences: Sequence, dev: Sequence | None = None,
              log: Callable[[str], None] | None = None,
              pruner: "HigherOrderParser | None" = None, progress: Callable | None = None,
              report: Callable | None = None) -> "HigherOrderParser":
        """Train pruner, higher-order model and labeler on gold-tree sentences.

        dev: with it, dev UAS is measured after every model epoch and the best
            epoch's weights are kept. log(str): progress lines.
        pruner: a trained parser whose first-order pruner (vocabularies and weights)
            is reused instead of training a new one (same training sentences).
        progress(iterable, epoch) wraps each model epoch; report(epoch, seconds,
            dev_uas, dev_las, best) is called after each model epoch.
        """
        sentences = [s for s in sentences if len(s) > 0]
        if not sentences:
            raise ModelError("no training sentences")
        for s in sentences:
            if not s.has_heads:
                raise ModelError("training sentences need gold heads")
        t0 = time.perf_counter()
        if pruner is not None:
            if pruner.bits != self.bits or pruner.w_prune is None:
                raise ModelError("the pruner to reuse is untrained or has other bits")
            self.fs = pruner.fs
            self.w_prune = pruner.w_prune
            self.features_name, self.pruner_epochs = pruner.features_name, pruner.pruner_epochs
        else:
            self.fs = FeatureSet(self.features_name, bits=self.bits).fit(sentences)
        encs = self.fs.encode(sentences)
        golds = [np.asarray(s.heads, dtype=np.int64) for s in sentences]

        clock = [time.perf_counter()]

        def lap() -> float:
            now = time.perf_counter()
            seconds, clock[0] = now - clock[0], now
            return seconds

        if pruner is None:
            from arboreal.learn import TrainingData

            def pruner_epoch(epoch, w):
                if log:
                    log(f"pruner epoch {epoch} ({lap():.1f}s)")

            clock[0] = time.perf_counter()
            self.w_prune = self._learner("perceptron").fit(
                TrainingData(self.fs, encs, golds, projective=True,
                             single_root=self.single_root),
                self.pruner_epochs, on_epoch=pruner_epoch, seed=self.seed).astype(np.float32)
            t1 = time.perf_counter()
        else:
            t1 = time.perf_counter()
            t0 = t1 - pruner.stats.get("pruner_train_s", 0.0)
        self.labeler = self._fit_labeler(encs, golds, sentences)
        t_lab = time.perf_counter()
        if self.first_order_only:
            self.w = np.zeros(0, dtype=np.float32)
            self.stats = {"pruner_train_s": t1 - t0, "labeler_train_s": t_lab - t1}
            self.meta = {"best_epoch": self.pruner_epochs}
            return self
        if self.projectivize and self.projective:
            from arboreal.trees.projectivize import min_loss_projective
            golds = min_loss_projective(golds, [self.single_root] * len(golds))
        allowed = self._allowed_many(encs, golds)
        kept = sum(int(a.sum()) for a in allowed if a is not None)
        words = sum(e.n for e in encs)
        fit = [i for i, a in enumerate(allowed) if a is not None and self._mask_fits(a)]
        self.train_skipped = len(encs) - len(fit)
        if self.train_skipped:
            warnings.warn(f"{self.train_skipped} training sentence(s) over the memory budget "
                          f"({self.memory_budget / 2**20:.4g} MiB) left out of the "
                          f"order-{self.order} epochs (used by the first-order pruner and "
                          f"the labeler only)", MemoryBudgetWarning, stacklevel=2)
            encs = [encs[i] for i in fit]
            golds = [golds[i] for i in fit]
            allowed = [allowed[i] for i in fit]
        t2 = time.perf_counter()
        dev = [s for s in dev if len(s) > 0] if dev else []
        dev_encs = self.fs.encode(dev) if dev else []
        dev_allowed = self._allowed_many(dev_encs)
        best = {"uas": -1.0, "w": None, "epoch": self.epochs}
        history = []

        def on_epoch(epoch, w):
            seconds = lap()
            if log:
                log(f"order-{self.order} epoch {epoch} ({seconds:.1f}s)")
            dev_uas = dev_las = None
            is_best = False
            if dev:
                w32 = w.astype(np.float32)
                heads = [self._predict(e, a, w32) for e, a in zip(dev_encs, dev_allowed)]
                hit = sum(int((h[1:] == s.heads[1:]).sum()) for h, s in zip(heads, dev))
                dev_uas = 100.0 * hit / max(sum(len(s) for s in dev), 1)
                labs = [self.labeler.predict_labels(e, h) for e, h in zip(dev_encs, heads)]
                lhit = sum(int(((h[1:] == s.heads[1:]) & (lb[1:] == s.deprels[1:])).sum())
                           for h, lb, s in zip(heads, labs, dev))
                dev_las = 100.0 * lhit / max(sum(len(s) for s in dev), 1)
                if dev_uas > best["uas"]:
                    best.update(uas=dev_uas, w=w32, epoch=epoch)
                    is_best = True
                if log:
                    log(f"order-{self.order} epoch {epoch}: dev UAS {dev_uas:.2f} LAS {dev_las:.2f}")
            history.append({"epoch": epoch, "seconds": round(seconds, 3), "dev_uas": dev_uas,
                            "dev_las": dev_las})
            if report:
                report(epoch, seconds, dev_uas, dev_las, is_best)

        from arboreal.learn import TrainingData

        data = TrainingData(self.fs, encs, golds, projective=self.projective,
                            single_root=self.single_root, progress=progress,
                            parts=self.hof if self.parts else None,
                            decoder=lambda i, w: self._predict(encs[i], allowed[i], w))
        clock[0] = time.perf_counter()
        try:
            final = self._learner(self.learner).fit(data, self.epochs, on_epoch=on_epoch,
                                                    seed=self.seed)
        except ValueError as exc:
            raise ModelError(str(exc)) from None
        self.w = best["w"] if best["w"] is not None else final.astype(np.float32)
        t3 = time.perf_counter()
        self.stats = {"pruner_train_s": t1 - t0, "labeler_train_s": t_lab - t1,
                      "prune_s": t2 - t_lab, "model_train_s": t3 - t2,
                      "kept_arcs_per_word": kept / max(words, 1)}
        self.meta = {"best_epoch": best["epoch"], "history": history}
        return self

    def _fit_labeler(self, encs, golds, sentences) -> Labeler:
        labels = np.unique(np.concatenate([s.deprels[1:] for s in sentences]).astype(str))
        used = set(ATTRS) if self.fs.name != "mcdonald" else {"word", "p5", "pos"}
        lab = Labeler(label_templates(used), labels, bits=18)
        return lab.fit(encs, golds, [s.deprels for s in sentences],
                       epochs=min(max(self.epochs, self.pruner_epochs), 10), seed=self.seed)

    # ------------------------------------------------------------------ parsing
    def _heads_of(self, encs: list) -> list[np.ndarray]:
        self.last_fallbacks = self.last_tightened = 0
        if self.first_order_only:
            return [np.array([-1], dtype=np.int64) if enc.n == 0
                    else self._first_order_best(enc, self.w_prune)[1] for enc in encs]
        allowed = self._allowed_many(encs)
        heads = [np.array([-1], dtype=np.int64) if enc.n == 0
                 else self._predict(enc, a, self.w) for enc, a in zip(encs, allowed)]
        if self.last_fallbacks:
            warnings.warn(f"{self.last_fallbacks} sentence(s) over the order-{self.order} "
                          f"memory budget ({self.memory_budget / 2**20:.4g} MiB) parsed at "
                          f"first order", MemoryBudgetWarning, stacklevel=3)
        return heads

    def predict_heads(self, sentences: Sequence) -> list[np.ndarray]:
        """Heads (n+1,) of every sentence."""
        self._check_trained()
        return self._heads_of(self.fs.encode(list(sentences)))

    def parse(self, sentences: Sequence, retag: bool = False) -> list:
        """Copies of the sentences with predicted HEAD and DEPREL columns (DEPS ``_``),
        missing tag columns filled by the model's tagger (all with ``retag``; see
        :func:`arboreal.models.pipeline.complete_tags`).
        Sentences over :data:`arboreal.models.pieces.MAX_WORDS` words are parsed in
        pieces (bounded memory; counted in ``split_total``)."""
        self._check_trained()
        sentences = complete_tags(self, sentences, retag)
        parsed, split = parse_in_pieces(self._parse_whole, sentences, self.single_root)
        self.split_total += split
        return parsed

    def _parse_whole(self, sentences: list) -> list:
        encs = self.fs.encode(sentences)
        heads = self._heads_of(encs)
        labels = [self.labeler.predict_labels(e, h) for e, h in zip(encs, heads)]
        return [s.with_tree(h, d) for s, h, d in zip(sentences, heads, labels)]

    def pruning_recall(self, sentences: Sequence) -> tuple[float, float]:
        """(fraction of gold arcs kept by pruning, kept arcs per word) on gold sentences."""
        self._check_trained()
        encs = self.fs.encode(list(sentences))
        hit = tot = kept = 0
        for s, enc, a in zip(sentences, encs, self._allowed_many(encs)):
            n = len(s)
            if n == 0:
                continue
            if a is None:        # parsed at first order: its only arcs are that tree's
                a = np.zeros((n + 1, n + 1), dtype=bool)
                a[self._first_order_heads(enc)[1:], np.arange(1, n + 1)] = True
            hit += int(a[s.heads[1:], np.arange(1, n + 1)].sum())
            tot += n
            kept += int(a.sum())
        return hit / max(tot, 1), kept / max(tot, 1)

    def _check_trained(self) -> None:
        if self.w is None or self.fs is None or self.w_prune is None:
            raise ModelError("the model is not trained")

    # ------------------------------------------------------------------ persistence
    def _options(self) -> dict:
        return {"order": self.order, "parts": list(self.parts), "bits": self.bits,
                "epochs": self.epochs, "pruner_epochs": self.pruner_epochs,
                "max_heads": self.max_heads, "threshold": self.threshold,
                "prune_temperature": self.prune_temperature, "single_root": self.single_root,
                "seed": self.seed, "learner": self.learner,
                "C": None if np.isinf(self.C) else self.C, "projective": self.projective,
                "grand_scope": self.grand_scope, "projectivize": self.projectivize}

    def save(self, path: str | os.PathLike) -> None:
        """Write the model atomically as one .npz (no pickle), common arboreal format."""
        self._check_trained()
        arrays: dict = {}
        put_strings(arrays, "labels", self.labeler.labels.tolist())
        put_weights(arrays, "w", self.w)
        put_weights(arrays, "p", self.w_prune)
        put_weights(arrays, "l", self.labeler.W)
        put_vocabs(arrays, self.fs.vocabs)
        if self.fs.allowed is not None:
            arrays["allowed"] = np.packbits(self.fs.allowed)
        meta = {"model_type": self.model_type, "module_version": FORMAT_VERSION,
                "options": self._options(), "features": self.fs.config(),
                "part_templates": self.hof.templates,
                "labeler": {"templates": self.labeler.templates, "bits": self.labeler.bits},
                "stats": self.stats, **self.meta}
        put_pipeline(self, meta, arrays)
        save_model_file(path, meta, arrays)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "HigherOrderParser":
        """Read a model written by :meth:`save` (ModelError if it is not one)."""
        meta, arrays = load_model_file(path)
        return cls.from_file_contents(str(path), meta, arrays)

    @classmethod
    def from_file_contents(cls, path: str, meta: dict, arrays) -> "HigherOrderParser":
        """A model from a file's metadata and arrays (``load_model_file``): every field
        is type- and range-checked and every array checked against the metadata before
        it is read (ModelError naming the file and the field)."""
        from arboreal.models.parser import feature_set_from_file
        from arboreal.models.serialization import MAX_WEIGHT_BITS, MetaFields

        if meta.get("model_type") != cls.model_type:
            raise ModelError(f"{path}: model type {meta.get('model_type')!r:.40} is not "
                             f"{cls.model_type!r}")
        fields = MetaFields(path, meta)
        version = fields.int("module_version", 1, FORMAT_VERSION, default=FORMAT_VERSION)
        if version < OLDEST_FORMAT:
            raise ModelError(f"{path}: higher-order model of format {version}, written by an "
                             f"older arboreal whose part features this version no longer "
                             f"computes; retrain it")
        o = fields.section("options")
        C = o.number("C", 0.0, float(np.finfo(np.float64).max), default=None, lo_open=True,
                     none_ok=True)
        options = dict(
            order=o.int("order", 1, 3), parts=o.strings("parts", max_items=len(KINDS)),
            bits=o.int("bits", 10, MAX_WEIGHT_BITS), epochs=o.int("epochs", 0, 1 << 31),
            pruner_epochs=o.int("pruner_epochs", 0, 1 << 31),
            max_heads=o.int("max_heads", 1, 1 << 31),
            threshold=o.number("threshold", 0.0, 1.0),
            prune_temperature=o.number("prune_temperature", 0.0, 1e12, lo_open=True),
            single_root=o.bool("single_root"), seed=o.int("seed", -(1 << 63), (1 << 64) - 1),
            learner=o.choice("learner", LEARNERS, default="perceptron"),
            C=np.inf if C is None else C, projective=o.bool("projective", default=True),
            grand_scope=o.choice("grand_scope", GRAND_SCOPES, default="outer"),
            projectivize=o.bool("projectivize", default=False))
        stats = fields.json("stats", dict, default={})
        try:
            kinds = parse_parts(options["order"], options["parts"])
        except ValueError as exc:
            raise o.fail("parts", str(exc)) from None
        section = fields.section("part_templates")
        templates = {k: section.strings(k) for k in kinds}
        for k in kinds:
            try:
                compile_part_templates(k, templates[k])
            except ValueError as exc:
                raise section.fail(k, f"holds a bad template ({exc})") from None
        options["part_templates"] = templates
        try:
            p = cls(**options)
            p.fs = feature_set_from_file(fields, arrays)
            if p.fs.bits != p.bits:
                raise o.fail("bits", f"is {p.bits} but the feature set has {p.fs.bits}")
            p.features_name = p.fs.name
            p.w = get_weights(arrays, "w", 0 if p.first_order_only else p.fs.dim)
            p.w_prune = get_weights(arrays, "p", p.fs.dim)
            p.labeler = Labeler.from_file_contents(fields, arrays)
            p.stats = stats
            p.meta = {k: meta[k] for k in ("best_epoch", "history") if k in meta}
            attach_pipeline(p, path, meta, arrays)
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"{path}: model file is incomplete or corrupt ({exc})") from None
        return p


def train(train_sentences: list, dev: list | None = None, order: int = 2,
          parts: str | Sequence[str] | None = None, progress: Callable | None = None,
          log: Callable | None = None, learner: str = "perceptron", decoder: str = "eisner",
          single_root: bool = True, epochs: int = 10, seed: int = 0,
          features: str = "default", feature_cutoff: int = 0, hash_bits: int = 22,
          **options) -> HigherOrderParser:
    """Entry point of ``arboreal train --order 2|3 [--parts ...]`` (the CLI's hook).

    ``log`` receives the first-order parser's EpochReport objects (one per model
    epoch). learner: "perceptron" or "mira" (others raise ArborealError). decoder:
    "eisner" (exact projective) or "cle" (non-projective: projective decoding then
    hill-climbing; sibling and grandparent parts only).
    Options (``--learner-option KEY=VALUE``): C (mira only, default inf), pruner_epochs (default = epochs),
    max_heads (10), threshold (1e-4), prune_temperature (30, chosen on EWT dev over 10:
    it keeps more gold arcs and gives order 2 a better dev UAS; docs/benchmarks.md,
    section higher_order),
    grand_scope ("outer" or "all", with tri-siblings), projectivize (true/false),
    memory_budget (bytes per training sentence, default 1 GiB; see the module docstring).
    """
    from arboreal.models.parser import EpochReport

    if learner not in LEARNERS:
        raise ArborealError(f"learner {learner!r} is not supported with --order 2/3; "
                            f"choose from {', '.join(LEARNERS)}")
    if decoder not in ("eisner", "cle"):
        raise ArborealError("higher-order models take --decoder eisner (projective) or cle "
                            "(projective tree + hill-climbing over non-projective trees)")
    if feature_cutoff:
        raise ArborealError("--feature-cutoff is not supported with --order 2/3")
    allowed_opts = {"pruner_epochs", "max_heads", "threshold", "prune_temperature",
                    "grand_scope", "projectivize", "memory_budget"}
    if learner == "mira":
        allowed_opts.add("C")
    bad = set(options) - allowed_opts
    if bad:
        raise ArborealError(f"unknown higher-order option(s) {sorted(bad)}; "
                            f"choose from {sorted(allowed_opts)}")
    if not 10 <= hash_bits <= 30:
        raise ArborealError("--hash-bits must lie in 10..30")
    if isinstance(parts, (list, tuple)):
        parts = ",".join(parts)
    try:
        model = HigherOrderParser(order=order, parts=parts, features=features, bits=hash_bits,
                                  epochs=epochs, pruner_epochs=options.get("pruner_epochs", epochs),
                                  max_heads=options.get("max_heads", 10),
                                  threshold=options.get("threshold", 1e-4),
                                  prune_temperature=options.get("prune_temperature", 30.0),
                                  single_root=single_root, seed=seed, learner=learner,
                                  C=float(options.get("C", np.inf)),
                                  projective=decoder == "eisner",
                                  grand_scope=options.get("grand_scope", "all"),
                                  projectivize=bool(options.get("projectivize", False)),
                                  memory_budget=float(options.get("memory_budget",
                                                                  DEFAULT_BUDGET)))
    except ValueError as exc:
        raise ArborealError(str(exc)) from None
    report = None
    if log is not None:
        def report(epoch, seconds, dev_uas, dev_las, best):
            log(EpochReport(epoch, seconds, dev_uas, dev_las, best))
    return model.train(train_sentences, dev, progress=progress, report=report)


def _register() -> None:
    try:
        from arboreal.models import register_model_type
    except ImportError:
        return
    register_model_type(HigherOrderParser.model_type, HigherOrderParser)


_register()
