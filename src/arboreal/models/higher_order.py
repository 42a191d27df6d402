"""Higher-order projective parser: siblings, grandparents, grand-siblings, tri-siblings.

Pipeline (Koo & Collins 2010):

1. a first-order *pruner* (averaged perceptron over the first-order FeatureSet,
   Eisner decoding) is trained first;
2. each sentence's arcs are pruned with the pruner's first-order marginals
   (:func:`arboreal.inference.higher_order.prune_arcs`: ratio threshold and K heads
   per word; gold arcs are added back during training);
3. the higher-order model (first-order arc features + higher-order part features
   of :mod:`arboreal.features.higher_order`, one hashed weight vector) is trained
   with the averaged perceptron, decoding exactly over the pruned arcs.

Orders and parts (``--parts`` overrides): order 2 = siblings + grandparents
(Model 1 decoder without grand-siblings, O(n^4) but ~O(K^2 n^2) after pruning);
order 3 = grand-siblings + tri-siblings (Model 2 decoder; grandparent and
grand-sibling parts of each head's outermost child per side only, which is what
Model 2 can see). The decoder follows from the parts: {sib} -> sibling O(n^3),
{grand} -> Model 0, with trisib -> Model 2, otherwise Model 1.

Labels: a second-stage table labeler (most frequent relation of (head UPOS,
modifier UPOS, direction), backing off to modifier UPOS, then overall).

Saved without pickle: one ``.npz`` (allow_pickle=False) holding weights,
vocabularies and a JSON metadata string.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
from numba import njit

from arboreal.errors import ModelError
from arboreal.features.first_order import FeatureSet
from arboreal.features.higher_order import KINDS, HigherOrderFeatures
from arboreal.inference.higher_order import (
    PartIndex,
    grand_sibling_decode,
    grandparent_decode,
    prune_arcs,
    sibling_decode,
    tri_sibling_decode,
)

PART_NAMES = {"sibling": "sib", "grandparent": "grand", "grand-sibling": "gsib",
              "tri-sibling": "trisib"}
DEFAULT_PARTS = {1: (), 2: ("sib", "grand"), 3: ("sib", "grand", "gsib", "trisib")}
FORMAT_VERSION = 1


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


def first_order_marginals(scores: np.ndarray, single_root: bool = True) -> np.ndarray:
    """Non-projective first-order arc marginals (Matrix-Tree Theorem), (n+1, n+1).

    Falls back to per-word head posteriors (a softmax over each column, which
    ignores the tree constraint) only while arboreal.inference.partition is absent.
    """
    try:
        from arboreal.inference.partition import marginals
    except ImportError:
        s = np.array(scores, dtype=np.float64)
        s[:, 0] = -np.inf
        np.fill_diagonal(s, -np.inf)
        s[:, 1:] -= s[:, 1:].max(axis=0, keepdims=True)
        e = np.exp(s)
        e[:, 1:] /= e[:, 1:].sum(axis=0, keepdims=True)
        e[:, 0] = 0.0
        return e
    return np.asarray(marginals(scores, projective=False, single_root=single_root))


@njit(cache=True)
def _scatter_sums(n, hs, ms, offsets, ids, w):
    """arc[hs[i], ms[i]] = sum of w over the ids of arc i (CSR offsets)."""
    arc = np.zeros((n + 1, n + 1))
    for i in range(hs.shape[0]):
        s = 0.0
        for j in range(offsets[i], offsets[i + 1]):
            s += w[ids[j]]
        arc[hs[i], ms[i]] = s
    return arc


class _LabelTable:
    """Most frequent relation given (head UPOS, modifier UPOS, direction), with back-offs."""

    def __init__(self) -> None:
        self.keys = np.zeros(0, dtype=str)
        self.labels = np.zeros(0, dtype=str)
        self.mod_keys = np.zeros(0, dtype=str)
        self.mod_labels = np.zeros(0, dtype=str)
        self.default = "dep"

    @staticmethod
    def _key(hp: np.ndarray, mp: np.ndarray, right: np.ndarray) -> np.ndarray:
        return np.char.add(np.char.add(np.char.add(hp.astype(str), "|"), mp.astype(str)),
                           np.where(right, ">", "<"))

    @staticmethod
    def _majority(keys: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pairs = np.char.add(np.char.add(keys, "\t"), labels)
        up, counts = np.unique(pairs, return_counts=True)
        k = np.array([p.split("\t")[0] for p in up.tolist()])
        lab = np.array([p.split("\t")[1] for p in up.tolist()])
        order = np.lexsort((-counts, k))
        k, lab = k[order], lab[order]
        first = np.r_[True, k[1:] != k[:-1]]
        return k[first], lab[first]

    def fit(self, sentences) -> "_LabelTable":
        hp, mp, right, lab = self._columns(sentences, gold=True)
        if lab.size:
            self.keys, self.labels = self._majority(self._key(hp, mp, right), lab)
            self.mod_keys, self.mod_labels = self._majority(mp.astype(str), lab)
            u, c = np.unique(lab, return_counts=True)
            self.default = str(u[np.argmax(c)])
        return self

    @staticmethod
    def _columns(sentences, gold: bool, heads_list=None):
        hp, mp, right, lab = [], [], [], []
        for i, s in enumerate(sentences):
            heads = s.heads if heads_list is None else heads_list[i]
            m = np.arange(1, len(s) + 1)
            h = np.asarray(heads)[1:]
            ok = h >= 0
            hp.append(s.upos[h[ok]])
            mp.append(s.upos[1:][ok])
            right.append(m[ok] > h[ok])
            if gold:
                lab.append(s.deprels[1:][ok])
        cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0, dtype=str))
        return cat(hp), cat(mp), cat(right).astype(bool), cat(lab) if gold else None

    def _lookup(self, keys: np.ndarray, table_k: np.ndarray, table_v: np.ndarray):
        if table_k.size == 0:
            return np.zeros(len(keys), dtype=bool), np.full(len(keys), self.default)
        idx = np.minimum(np.searchsorted(table_k, keys), table_k.size - 1)
        found = table_k[idx] == keys
        return found, table_v[idx]

    def predict(self, sentences, heads_list) -> list[np.ndarray]:
        hp, mp, right, _ = self._columns(sentences, gold=False, heads_list=heads_list)
        f1, l1 = self._lookup(self._key(hp, mp, right), self.keys, self.labels)
        f2, l2 = self._lookup(mp.astype(str), self.mod_keys, self.mod_labels)
        lab = np.where(f1, l1, np.where(f2, l2, self.default)).astype(object)
        out, k = [], 0
        for s in sentences:
            n = len(s)
            d = np.empty(n + 1, dtype=object)
            d[0] = "_"
            d[1:] = lab[k:k + n]
            k += n
            out.append(d)
        return out


class HigherOrderParser:
    """Second/third-order projective parser trained with the averaged perceptron.

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
    """

    model_type = "higher-order"

    def __init__(self, order: int = 2, parts: str | Sequence[str] | None = None,
                 features: str = "mcdonald", bits: int = 22, epochs: int = 10,
                 pruner_epochs: int = 5, max_heads: int = 10, threshold: float = 1e-4,
                 single_root: bool = True, seed: int = 0, learner: str = "perceptron",
                 prune_temperature: float = 1.0):
        if learner != "perceptron":
            raise ValueError(f"learner {learner!r} is not available for higher-order models "
                             "(only 'perceptron')")
        self.order = int(order)
        self.parts = parse_parts(self.order, parts)
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
        self.hof = HigherOrderFeatures(self.parts, self.bits, outer_only="trisib" in self.parts)
        self.w_prune: np.ndarray | None = None
        self.w: np.ndarray | None = None
        self.labeler = _LabelTable()
        self.stats: dict = {}

    @property
    def first_order_only(self) -> bool:
        """order 1 with 0 model epochs: the pruner (first-order, Eisner) is the parser."""
        return not self.parts and self.epochs == 0

    # ------------------------------------------------------------------ decoding
    def _decode(self, arc: np.ndarray, index: PartIndex, ps: dict) -> np.ndarray:
        p = set(self.parts)
        sr = self.single_root
        if not p or p == {"sib"}:
            return sibling_decode(arc, ps.get("sib"), single_root=sr, index=index)
        if p == {"grand"}:
            return grandparent_decode(arc, ps["grand"], single_root=sr, index=index)
        if "trisib" in p:
            return tri_sibling_decode(arc, ps.get("sib"), ps["trisib"], ps.get("grand"),
                                      ps.get("gsib"), single_root=sr, index=index)
        return grand_sibling_decode(arc, ps.get("sib"), ps.get("grand"), ps.get("gsib"),
                                    single_root=sr, index=index)

    def _allowed(self, enc, gold: np.ndarray | None = None) -> np.ndarray:
        scores = self._kept_arc_scores(enc, None, self.w_prune)
        n = enc.n
        if n <= 1:
            allowed = np.ones((n + 1, n + 1), dtype=bool)
        else:
            mu = first_order_marginals(scores / self.prune_temperature, self.single_root)
            keep = sibling_decode(scores, None, single_root=self.single_root)
            allowed = prune_arcs(mu, self.threshold, self.max_heads, self.single_root, keep=keep)
        if gold is not None:
            allowed[gold[1:], np.arange(1, n + 1)] = True
        return allowed

    def _kept_arc_scores(self, enc, allowed: np.ndarray | None, w: np.ndarray) -> np.ndarray:
        """First-order scores of the kept arcs (all arcs when ``allowed`` is None; pruned
        ones stay 0, the decoders skip them), from ``FeatureSet.arc_features``, the
        same feature ids that ``accumulate`` updates.

        Hashing only the K-per-word kept arcs instead of all n^2 makes the model's
        arc scoring several times cheaper than the pruner's.
        """
        n = enc.n
        if allowed is None:
            allowed = np.ones((n + 1, n + 1), dtype=bool)
            allowed[:, 0] = False
            np.fill_diagonal(allowed, False)
        hs, ms = np.nonzero(allowed)
        if not hs.size:
            return np.zeros((n + 1, n + 1))
        offsets, ids = self.fs.arc_features(enc, hs, ms)
        return _scatter_sums(n, hs, ms, offsets, ids, w)

    def _predict(self, enc, allowed: np.ndarray, w: np.ndarray) -> np.ndarray:
        index = PartIndex.compact(allowed)
        arc = self._kept_arc_scores(enc, index.allowed, w)
        ps = self.hof.part_scores(enc.codes, index, w) if self.parts else {}
        return self._decode(arc, index, ps)

    # ------------------------------------------------------------------ training
    def _perceptron(self, encs, golds, epochs: int, decode: Callable, use_parts: bool,
                    log: Callable[[str], None] | None, what: str) -> np.ndarray:
        dim = 1 << self.bits
        w = np.zeros(dim)
        u = np.zeros(dim)
        c = 1.0
        rng = np.random.default_rng(self.seed)
        for epoch in range(1, epochs + 1):
            t0 = time.perf_counter()
            wrong = 0
            total = 0
            for i in rng.permutation(len(encs)):
                enc, gold = encs[i], golds[i]
                pred = decode(i, w)
                n = enc.n
                errors = int((pred[1:] != gold[1:]).sum())
                total += n
                if errors:
                    wrong += errors
                    coef = np.zeros((n + 1, n + 1))
                    m = np.arange(1, n + 1)
                    coef[gold[1:], m] += 1.0
                    coef[pred[1:], m] -= 1.0
                    self.fs.accumulate(enc, coef, w, 1.0)
                    self.fs.accumulate(enc, coef, u, c)
                    if use_parts:
                        for vec, sc in ((w, 1.0), (u, c)):
                            self.hof.accumulate_tree(enc.codes, gold, vec, sc)
                            self.hof.accumulate_tree(enc.codes, pred, vec, -sc)
                c += 1.0
            if log:
                log(f"{what} epoch {epoch}: train UAS {1 - wrong / max(total, 1):.4f} "
                    f"({time.perf_counter() - t0:.1f}s)")
        return w - u / c

    def train(self, sentences: Sequence, dev: Sequence | None = None,
              log: Callable[[str], None] | None = None,
              pruner: "HigherOrderParser | None" = None) -> "HigherOrderParser":
        """Train pruner, higher-order model and labeler on gold-tree sentences.

        ``pruner``: a trained parser whose first-order pruner (feature vocabularies
        and weights) is reused instead of training a new one; it must have been
        trained on the same sentences. ``dev`` is unused (kept for the CLI's
        signature).
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

        def decode_first(i, w):
            return sibling_decode(self._kept_arc_scores(encs[i], None, w), None,
                                  single_root=self.single_root)

        if pruner is None:
            self.w_prune = self._perceptron(encs, golds, self.pruner_epochs, decode_first,
                                            False, log, "pruner")
            t1 = time.perf_counter()
        else:
            t1 = time.perf_counter()
            t0 = t1 - pruner.stats.get("pruner_train_s", 0.0)
        if self.first_order_only:
            self.w_prune = self.w_prune.astype(np.float32).astype(np.float64)
            self.w = np.zeros(0)
            self.labeler.fit(sentences)
            self.stats = {"pruner_train_s": t1 - t0}
            return self
        allowed = [self._allowed(e, g) for e, g in zip(encs, golds)]
        kept = sum(int(a.sum()) for a in allowed)
        words = sum(e.n for e in encs)
        t2 = time.perf_counter()

        def decode_ho(i, w):
            return self._predict(encs[i], allowed[i], w)

        self.w = self._perceptron(encs, golds, self.epochs, decode_ho, bool(self.parts), log,
                                  f"order-{self.order}")
        t3 = time.perf_counter()
        # the model is saved as float32: parse with exactly the weights that get saved
        self.w = self.w.astype(np.float32).astype(np.float64)
        self.w_prune = self.w_prune.astype(np.float32).astype(np.float64)
        self.labeler.fit(sentences)
        self.stats = {"pruner_train_s": t1 - t0, "prune_s": t2 - t1, "model_train_s": t3 - t2,
                      "kept_arcs_per_word": kept / max(words, 1)}
        return self

    # ------------------------------------------------------------------ parsing
    def predict_heads(self, sentences: Sequence) -> list[np.ndarray]:
        """Heads (n+1,) of every sentence."""
        self._check_trained()
        out = []
        encs = self.fs.encode(list(sentences))
        for s, enc in zip(sentences, encs):
            n = len(s)
            if n == 0:
                out.append(np.array([-1], dtype=np.int64))
                continue
            if self.first_order_only:
                out.append(sibling_decode(self._kept_arc_scores(enc, None, self.w_prune), None,
                                          single_root=self.single_root))
            else:
                out.append(self._predict(enc, self._allowed(enc), self.w))
        return out

    def parse(self, sentences: Sequence) -> list:
        """Copies of the sentences with predicted HEAD and DEPREL columns."""
        sentences = list(sentences)
        heads = self.predict_heads(sentences)
        labels = self.labeler.predict(sentences, heads)
        return [s.with_tree(h, d) for s, h, d in zip(sentences, heads, labels)]

    def pruning_recall(self, sentences: Sequence) -> tuple[float, float]:
        """(fraction of gold arcs kept by pruning, kept arcs per word) on gold sentences."""
        self._check_trained()
        encs = self.fs.encode(list(sentences))
        hit = tot = kept = 0
        for s, enc in zip(sentences, encs):
            n = len(s)
            if n == 0:
                continue
            a = self._allowed(enc)
            hit += int(a[s.heads[1:], np.arange(1, n + 1)].sum())
            tot += n
            kept += int(a.sum())
        return hit / max(tot, 1), kept / max(tot, 1)

    def _check_trained(self) -> None:
        if self.w is None or self.fs is None:
            raise ModelError("the model is not trained")

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike) -> None:
        """Write the model atomically as one .npz (no pickle)."""
        self._check_trained()
        meta = {
            "model_type": self.model_type, "format_version": FORMAT_VERSION,
            "order": self.order, "parts": list(self.parts), "features": self.fs.config(),
            "bits": self.bits, "epochs": self.epochs, "pruner_epochs": self.pruner_epochs,
            "max_heads": self.max_heads, "threshold": self.threshold,
            "prune_temperature": self.prune_temperature,
            "single_root": self.single_root, "seed": self.seed, "learner": self.learner,
            "label_default": self.labeler.default, "stats": self.stats,
        }
        arrays = {"meta": np.array(json.dumps(meta)),
                  "w": self.w.astype(np.float32), "w_prune": self.w_prune.astype(np.float32),
                  "lab_keys": self.labeler.keys, "lab_labels": self.labeler.labels,
                  "lab_mod_keys": self.labeler.mod_keys, "lab_mod_labels": self.labeler.mod_labels}
        for name, v in self.fs.vocabs.items():
            arrays[f"vocab_{name}"] = v
        if self.fs.allowed is not None:
            arrays["feature_mask"] = self.fs.allowed
        path = Path(path)
        fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=".arboreal.", suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **arrays)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    @classmethod
    def load(cls, path: str | os.PathLike) -> "HigherOrderParser":
        """Read a model written by :meth:`save` (ModelError if it is not one)."""
        try:
            with np.load(path, allow_pickle=False) as z:
                data = {k: z[k] for k in z.files}
            meta = json.loads(str(data["meta"]))
        except (OSError, ValueError, KeyError) as e:
            raise ModelError(f"{path}: not a readable arboreal model ({e})") from None
        if meta.get("model_type") != cls.model_type:
            raise ModelError(f"{path}: model type {meta.get('model_type')!r} is not 'higher-order'")
        p = cls(order=meta["order"], parts=meta["parts"], features=meta["features"]["name"]
                if meta["features"]["name"] in ("mcdonald", "default") else "mcdonald",
                bits=meta["bits"], epochs=meta["epochs"], pruner_epochs=meta["pruner_epochs"],
                max_heads=meta["max_heads"], threshold=meta["threshold"],
                prune_temperature=meta["prune_temperature"],
                single_root=meta["single_root"], seed=meta["seed"])
        vocabs = {k[len("vocab_"):]: v for k, v in data.items() if k.startswith("vocab_")}
        p.fs = FeatureSet.from_config(meta["features"], vocabs, data.get("feature_mask"))
        p.w = data["w"].astype(np.float64)
        p.w_prune = data["w_prune"].astype(np.float64)
        p.labeler.keys, p.labeler.labels = data["lab_keys"], data["lab_labels"]
        p.labeler.mod_keys, p.labeler.mod_labels = data["lab_mod_keys"], data["lab_mod_labels"]
        p.labeler.default = meta["label_default"]
        p.stats = meta.get("stats", {})
        return p
