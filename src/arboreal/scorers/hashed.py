"""The linear scorer: hashed sparse features and their weights (McDonald et al. 2006).

Arc scores are ``w . f(h, m)`` over the templates of a
:class:`~arboreal.features.FeatureSet`; label scores come from the second-stage
:class:`~arboreal.scorers.labeler.Labeler`, or, for a jointly labeled model (learner
``loglinear-labeled``), from :class:`~arboreal.features.labels.LabelFeatures` with
weights ``label_weights``: then the decoder maximises ``w . f(h, m) + max_l v . g(h, m,
l)`` and the partition function sums ``exp`` of ``w . f(h, m) + logsumexp_l v . g``.
The learners that need the linear form read ``features`` and ``weights``.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from arboreal._arrays import as_aligned
from arboreal.features.first_order import (ATTR_INDEX, N_RESERVED, TEMPLATE_SETS,
                                          FeatureSet)
from arboreal.features.labels import constrain_root_arcs
from arboreal.scorers.labeler import MAX_TABLE_ENTRIES, Labeler, check_templates
from arboreal.io.model_file import (MAX_WEIGHT_BITS, MetaFields, array_shape,
                                           get_strings, get_weights, put_strings,
                                           put_vocabs, put_weights)

#: the vocabularies FeatureSet.encode looks up (every fitted feature set has all)
VOCAB_NAMES = ("word", "p5", "suf3", "pos", "xpos", "lemma", "feats", "c4", "c6", "cl")
#: arc feature templates read the head, the modifier and the words between them
ARC_ANCHORS = "hmb"
#: the metadata sections of a linear model's scorer
SECTIONS = ("features", "labeler", "label_features")


def _logsumexp(G: np.ndarray) -> np.ndarray:
    top = G.max(axis=-1)
    return top + np.log(np.exp(G - top[..., None]).sum(axis=-1))


class HashedScorer:
    """features (:class:`~arboreal.features.FeatureSet`), weights (dim,) float32,
    labeler, and for a jointly labeled model label_features and label_weights."""

    kind = "hashed"
    tag_columns: list = []
    lemma_lookup: dict = {}

    def __init__(self, features, weights: np.ndarray, labeler, label_features=None,
                 label_weights: np.ndarray | None = None):
        self.features = features
        self.weights = as_aligned(weights)
        self.labeler = labeler
        self.label_features = label_features
        self.label_weights = (None if label_weights is None
                              else np.asarray(label_weights, dtype=np.float32))

    @property
    def labels(self) -> np.ndarray:
        return (self.label_features.labels if self.label_features is not None
                else self.labeler.labels)

    @property
    def joint(self) -> bool:
        """Whether labels are scored jointly with the arcs (``loglinear-labeled``)."""
        return self.label_features is not None

    def set_weights(self, w: np.ndarray) -> None:
        """Set the weights from a learner's vector ([w, v] for a jointly labeled model)."""
        dim = self.features.dim
        self.weights = as_aligned(w[:dim])
        if self.label_features is not None:
            self.label_weights = np.asarray(w[dim:], dtype=np.float32)

    # ------------------------------------------------------------------ scores
    def encode(self, sentences: Sequence) -> list:
        return self.features.encode(list(sentences))

    @staticmethod
    def lengths(encoded: list) -> np.ndarray:
        return np.array([e.n for e in encoded], dtype=np.int64)

    @staticmethod
    def batches(lengths: np.ndarray) -> list[np.ndarray]:
        """Sentence indices in buckets of similar length (padding wastes little)."""
        from arboreal.inference.structure import length_buckets

        return length_buckets(lengths)

    def arc_scores(self, encoded: list, rows: np.ndarray, summed: bool = False) -> np.ndarray:
        """(B, N+1, N+1) float32 arc scores of ``rows`` (float64 for a jointly labeled
        model, whose label term is added). O(n^2 x templates) per sentence."""
        fs = self.features
        S = fs.arc_scores_batch(fs.pack([encoded[i] for i in rows]), self.weights)
        if self.label_features is None:
            return S
        S = S.astype(np.float64)
        for b, i in enumerate(rows):
            e = encoded[i]
            if e.n == 0:
                continue
            G = self.label_features.scores(e, self.label_weights).astype(np.float64)
            if not summed:
                G = constrain_root_arcs(G, self.label_features.labels)
            n1 = e.n + 1
            S[b, :n1, :n1] += _logsumexp(G) if summed else G.max(axis=-1)
        return S

    def label_scores(self, encoded: list, i: int, heads: np.ndarray) -> np.ndarray:
        """(n+1, L) float64 label scores of sentence i's words given ``heads`` (the root
        rule not applied)."""
        e = encoded[i]
        if self.label_features is None:
            return self.labeler.label_scores(e, heads)
        G = self.label_features.scores(e, self.label_weights).astype(np.float64)
        rows = np.zeros((len(heads), G.shape[-1]))
        rows[1:] = G[heads[1:], np.arange(1, len(heads))]
        return rows

    def predict_labels(self, encoded: list, rows: np.ndarray, heads: list) -> list:
        """DEPREL arrays (n+1,) of the given trees (UD's root rule applied)."""
        if self.label_features is None:
            return [self.labeler.predict_labels(encoded[i], h) for i, h in zip(rows, heads)]
        from arboreal.features.labels import constrain_root_label

        out = []
        labels = self.labels
        for i, h in zip(rows, heads):
            r = constrain_root_label(self.label_scores(encoded, i, h), h, labels)
            d = np.empty(len(h), dtype=object)
            d[0] = "<root>"
            if len(h) > 1:
                d[1:] = labels[r[1:].argmax(axis=1)]
            out.append(d)
        return out

    def predict_tags(self, encoded: list, rows: np.ndarray) -> dict:
        return {}

    # ------------------------------------------------------------------ files
    def put(self, meta: dict, arrays: dict) -> None:
        """Add the scorer to a model file being written: sections ``features``,
        ``labeler`` (and ``label_features``), arrays ``w``, ``l``, ``labels``,
        ``vocab_*`` (and clusters, lexicon, cut-off mask, ``lv``)."""
        fs = self.features
        put_weights(arrays, "w", self.weights)
        put_weights(arrays, "l", self.labeler.W)
        put_strings(arrays, "labels", self.labeler.labels.tolist())
        put_vocabs(arrays, fs.vocabs)
        if fs.clusters is not None:
            arrays.update(fs.clusters.to_arrays("clusters"))
        if fs.lexical is not None and fs.lexical.lexicon is not None:
            arrays.update(fs.lexical.lexicon.to_arrays("lexicon"))
        if fs.allowed is not None:
            arrays["allowed"] = np.packbits(fs.allowed)
        meta["features"] = fs.config()
        meta["labeler"] = {"templates": self.labeler.templates, "bits": self.labeler.bits}
        if self.label_features is not None:
            put_weights(arrays, "lv", self.label_weights)
            meta["label_features"] = self.label_features.config()

    @classmethod
    def from_file(cls, fields: MetaFields, arrays) -> "HashedScorer":
        """The scorer of a model file, every array checked against the metadata
        (ModelError for bad metadata, ValueError / KeyError for arrays)."""
        fs = feature_set_from_file(fields, arrays)
        weights = get_weights(arrays, "w", fs.dim)
        labeler = Labeler.from_file_contents(fields, arrays)
        lf = lv = None
        if fields.has("label_features"):  # jointly labeled model
            lf = label_features_from_file(fields, labeler.labels, len(fs.vocabs["pos"]))
            lv = get_weights(arrays, "lv", lf.dim)
        return cls(fs, weights, labeler, lf, lv)


def feature_set_from_file(fields: MetaFields, arrays) -> FeatureSet:
    """The first-order :class:`FeatureSet` of a model file: metadata section
    ``features``, arrays ``vocab_*`` and ``allowed``, all checked (ModelError for bad
    metadata, ValueError for arrays that disagree with it). Shared by every model type."""
    cfg = fields.section("features")
    templates = cfg.strings("templates")
    check_templates(cfg, "templates", templates, ARC_ANCHORS)
    bits = cfg.int("bits", 10, MAX_WEIGHT_BITS)
    share_blocks = cfg.bool("share_blocks")
    clusters = None
    if cfg.bool("clusters"):
        from arboreal.features.clusters import Clusters

        clusters = Clusters.from_arrays(arrays, "clusters")
    lexicon = None
    if cfg.bool("lexicon", False):
        from arboreal.features.lexicon import Lexicon

        lexicon = Lexicon.from_arrays(arrays, "lexicon")
    clean = {"name": cfg.choice("name", (*TEMPLATE_SETS, "custom")), "templates": templates,
             "bits": bits, "cutoff": cfg.int("cutoff", 0, 2**31),
             "lowercase": cfg.bool("lowercase"), "share_blocks": share_blocks,
             "top_words": cfg.int("top_words", 0, 2**31) if cfg.has("top_words") else 0}
    if cfg.has("lexical_templates"):
        clean["lexical_templates"] = cfg.strings("lexical_templates", max_items=256)
        from arboreal.features.lexical import parse_lexical_template

        for t in clean["lexical_templates"]:
            try:
                parse_lexical_template(t, ATTR_INDEX, lexicon is not None)
            except ValueError as exc:
                raise cfg.fail("lexical_templates", str(exc)) from None
    names = {k[len("vocab_"):] for k in arrays if k.startswith("vocab_") and not k.endswith("_count")}
    if names != set(VOCAB_NAMES):
        raise ValueError(f"vocabularies {sorted(names)}, expected {sorted(VOCAB_NAMES)}")
    vocabs = {name: get_strings(arrays, f"vocab_{name}") for name in VOCAB_NAMES}
    allowed = None
    if "allowed" in arrays:
        if array_shape(arrays, "allowed") != (((1 << bits) + 7) // 8,):
            raise ValueError(f"the cut-off mask 'allowed' does not cover 2^{bits} weights")
        packed = np.asarray(arrays["allowed"])
        if packed.dtype != np.uint8:
            raise ValueError("the cut-off mask 'allowed' is not a byte array")
        allowed = np.unpackbits(packed)[: 1 << bits].astype(bool)
    return FeatureSet.from_config(clean, vocabs, allowed, clusters, lexicon)


def label_features_from_file(fields: MetaFields, labels: np.ndarray, n_pos_vocab: int):
    """The :class:`~arboreal.features.labels.LabelFeatures` of a jointly labeled model
    file (metadata section ``label_features``), checked against the labels and the
    UPOS vocabulary it was built with."""
    from arboreal.features.labels import LabelFeatures

    cfg = fields.section("label_features")
    n_pos = cfg.int("n_pos", N_RESERVED + n_pos_vocab, N_RESERVED + n_pos_vocab)
    bits = cfg.int("bits", 8, 24)
    head = cfg.strings("head_templates")
    mod = cfg.strings("mod_templates")
    check_templates(cfg, "head_templates", head, "h")
    check_templates(cfg, "mod_templates", mod, "m")
    if LabelFeatures.table_entries(bits, n_pos, len(labels)) > MAX_TABLE_ENTRIES:
        raise cfg.fail("bits", f"with {len(labels)} labels and {n_pos} UPOS codes exceeds "
                               f"the {MAX_TABLE_ENTRIES} weights a label table may have")
    return LabelFeatures(labels, n_pos, head, mod, bits)
