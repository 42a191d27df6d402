"""Second-stage dependency label classifier (McDonald, Lerman & Pereira 2006, two-stage).

Why two stages: first-order decoding stays exact and as cheap as unlabeled decoding.
Scoring labeled arcs s(h, m, l) jointly would multiply the cost of feature scoring by
the number of labels (about 50 in UD) for every one of the n^2 candidate arcs; with
a separate classifier the label of each word is chosen once its head is known, at a
cost of O(n T L) per sentence, and the classifier can use features of the whole
predicted tree (grandparent, the modifier's children, its siblings) that an
arc-factored labeled model could not. The price is that labels cannot influence the
choice of heads.

Model: a multiclass linear classifier trained by the learners of :mod:`arboreal.learn`
(the averaged perceptron by default, or MIRA) through the same online loop as the
parsers: :class:`LabelingData` presents a sentence's labels given its gold tree as
the structure to predict. Features are hashed templates over the arc (h, m) and its
tree context (anchors ``g`` grandparent, ``c`` each child of m, ``s`` each sibling of
m), every template also conjoined with direction and distance; a feature id selects
a row of the weight matrix W (2**bits, L), so scoring all labels of a word is a
gather of rows: O(T L).
"""
from __future__ import annotations

import warnings
from typing import Callable

import numpy as np
from numba import njit

from arboreal._prefetch import prefetch
from arboreal.features.first_order import ATTR_INDEX, LONG
from arboreal.features.labels import constrain_root_label
from arboreal.features.hashing import (BETWEEN, CHILD, GRAND, HEAD, MOD, SIBLING, arc_ids,
                                       compile_templates, partial_hashes)

ANCHOR_CODES = {"h": HEAD, "m": MOD, "b": BETWEEN, "g": GRAND, "c": CHILD, "s": SIBLING}

LABEL_TEMPLATES = [
    "", "m.word", "m.p5", "m.pos", "m.xpos", "m.lemma", "m.feats", "m.suf3",
    "h.word", "h.pos", "h.xpos", "h.lemma", "h.feats",
    "h.pos m.pos", "h.xpos m.xpos", "h.lemma m.lemma", "h.pos m.word", "h.word m.pos",
    "h.word m.word", "h.pos m.pos m.feats", "h.pos h.feats m.pos", "m.pos m.suf3",
    "m-1.pos m.pos", "m.pos m+1.pos", "m-1.word m.pos", "m+1.word m.pos",
    "m-1.pos m.pos m+1.pos", "h.pos m.pos m+1.pos", "h.pos m-1.pos m.pos",
    "g.pos h.pos m.pos", "g.word h.pos", "g.pos h.word m.pos",
    "c.pos m.pos", "c.word m.pos", "c.word h.pos m.pos", "c.pos c.word m.word",
    "c.lemma m.lemma", "c.feats m.pos",
    "s.pos h.pos m.pos", "s.word m.pos",
    # word clusters (used when the parser has a clustering)
    "m.c4", "m.c6", "m.cl", "h.c4 m.c4", "h.pos m.c6", "h.c6 m.pos", "c.c4 m.c4",
]


#: Weight-table entries (2**bits rows x labels) a training run may allocate: training
#: holds W (float32) and its average (float64), 12 bytes an entry. With ~50 labels
#: (UD) the default 2**18 rows fit; thousands of distinct DEPRELs get fewer rows.
TRAIN_TABLE_ENTRIES = 1 << 26
#: The largest table a model file may declare (1 GiB of float32).
MAX_TABLE_ENTRIES = 1 << 28
MIN_BITS, MAX_BITS = 4, 24
#: Anchors a label template may use (see ``compile_templates``): the arc and its tree
#: context, never the words between head and modifier.
LABEL_ANCHORS = "hmgcs"


def fitting_bits(bits: int, entries: Callable[[int], int], budget: int = TRAIN_TABLE_ENTRIES,
                 min_bits: int = MIN_BITS) -> int | None:
    """The largest row-count exponent in [min_bits, bits] whose table has at most
    ``budget`` entries (``entries(b)``: the table's entries with 2**b rows), or None
    if even ``min_bits`` does not fit. Shared by the label classifier and the joint
    label features, whose tables grow with the number of labels."""
    while bits > min_bits and entries(bits) > budget:
        bits -= 1
    return bits if entries(bits) <= budget else None


def label_templates(attrs: set[str]) -> list[str]:
    """The label templates that only read attributes in ``attrs``."""
    out = []
    for t in LABEL_TEMPLATES:
        used = {slot.partition(".")[2] for slot in t.split()}
        if used <= attrs:
            out.append(t)
    return out


def check_templates(fields, key: str, templates: list[str], anchors: str) -> None:
    """ModelError (from ``fields``, a ``MetaFields``) unless every template compiles and
    reads only the anchors in ``anchors`` (a kernel given another anchor would read
    tree context it is not passed)."""
    allowed = {ANCHOR_CODES[a] for a in anchors}
    try:
        table = compile_templates(templates, ATTR_INDEX)
    except (ValueError, IndexError) as exc:
        raise fields.fail(key, f"holds a bad template ({exc})") from None
    for t in range(table.shape[0]):
        for slot in range(table[t, 0]):
            if table[t, 4 + 3 * slot] not in allowed:
                raise fields.fail(key, f"template {templates[t]!r} reads an anchor "
                                       f"outside {', '.join(anchors)}")


class Labeler:
    """Multiclass averaged perceptron choosing DEPREL given the tree.

    labels: array of str (the label set seen in training).
    templates: template strings; bits: W has 2**bits rows.
    budget: the most entries W (2**bits x labels) may have; with more labels than
        fit, ``bits`` is lowered (with a warning) so that training memory stays
        bounded (a treebank with thousands of distinct DEPRELs). None: ``bits`` as
        given (a model file, whose size the loader has checked).
    """

    def __init__(self, templates: list[str], labels: np.ndarray, bits: int = 18,
                 budget: int | None = TRAIN_TABLE_ENTRIES):
        self.templates = list(templates)
        self.labels = np.asarray(labels, dtype=str)
        self.bits = int(bits)
        if budget is not None:
            cols = max(1, len(self.labels))
            fitted = fitting_bits(self.bits, lambda b: (1 << b) * cols, budget)
            if fitted is None:
                raise ValueError(f"{len(self.labels)} distinct labels are too many for the label "
                                 f"classifier (at most {budget >> MIN_BITS})")
            if fitted != self.bits:
                warnings.warn(f"{len(self.labels)} distinct labels: the label classifier gets "
                              f"2^{fitted} feature rows instead of 2^{self.bits}, to keep its "
                              f"table within {budget} weights", stacklevel=2)
                self.bits = fitted
        self.table = compile_templates(self.templates, ATTR_INDEX)
        self.W = np.zeros((1 << self.bits, max(1, len(self.labels))), dtype=np.float32)

    @classmethod
    def from_file_contents(cls, fields, arrays) -> "Labeler":
        """The labeler of a model file: metadata section ``labeler`` (``fields`` a
        :class:`~arboreal.io.model_file.MetaFields`), arrays ``labels`` and
        ``l_*``. ModelError (bad metadata) or ValueError (arrays disagreeing with it)."""
        from arboreal.io.model_file import get_strings, get_weights

        section = fields.section("labeler")
        bits = section.int("bits", MIN_BITS, MAX_BITS)
        templates = section.strings("templates")
        check_templates(section, "templates", templates, LABEL_ANCHORS)
        labels = get_strings(arrays, "labels", max_count=MAX_TABLE_ENTRIES >> bits)
        if (1 << bits) * max(1, len(labels)) > MAX_TABLE_ENTRIES:
            raise section.fail("bits", f"with {len(labels)} labels exceeds the "
                                       f"{MAX_TABLE_ENTRIES} weights a label table may have")
        labeler = cls(templates, labels, bits=bits, budget=None)
        labeler.W = get_weights(arrays, "l", labeler.W.size).reshape(labeler.W.shape)
        return labeler

    def predict(self, enc, heads: np.ndarray) -> np.ndarray:
        """Label index (n+1,) of every word given the tree (index 0 unused, -1): the
        best-scoring label, ``root`` exactly for the words on the root when the label
        set is UD's (:func:`~arboreal.features.labels.constrain_root_label`)."""
        rows = constrain_root_label(self.label_scores(enc, heads), heads, self.labels)
        out = np.full(len(rows), -1, dtype=np.int64)
        if len(rows) > 1 and rows.shape[1]:
            out[1:] = rows[1:].argmax(axis=1)
        return out

    def label_scores(self, enc, heads: np.ndarray) -> np.ndarray:
        """Every label's score (n+1, L) float64 for every word given the tree ``heads``
        (row 0 zeros). O(n x templates x L)."""
        return _label_scores(enc.codes, self.table, np.asarray(heads, dtype=np.int64), LONG,
                             self.bits, self.W)

    def predict_labels(self, enc, heads: np.ndarray) -> np.ndarray:
        """DEPREL strings (n+1,) object array, index 0 the root token."""
        idx = self.predict(enc, heads)
        out = np.empty(len(idx), dtype=object)
        out[1:] = self.labels[idx[1:]] if len(self.labels) else "_"
        out[0] = "<root>"
        return out


@njit(cache=True)
def _scores_of(W, buf, k, scores):
    # rows are scattered over a table of tens of MB: ask for all of their cache lines
    # before summing any, so the misses overlap (see arboreal._prefetch)
    L = W.shape[1]
    for i in range(k):
        first = buf[i] * L
        for off in range(0, L, 16):
            prefetch(W, first + off)
        prefetch(W, first + L - 1)
    scores[:] = 0.0
    for i in range(k):
        row = buf[i]
        for lab in range(W.shape[1]):
            scores[lab] += W[row, lab]


class _Dim:
    def __init__(self, dim: int):
        self.dim = dim


class LabelingData:
    """The label classifier's training data in the interface of the learners of
    :mod:`arboreal.learn` (like :class:`~arboreal.learn.TrainingData` with parts): the
    structure of sentence i is its label sequence ``heads[i]`` (n+1,) int64 (label
    indices, -1 at 0 and for labels outside the label set, which are never scored)
    given the gold tree ``trees[i]``; the weights are ``W`` flattened, (2**bits * L,).
    """

    arc_factored = False
    progress = None

    def __init__(self, labeler: "Labeler", encoded: list, trees: list, labels: list):
        self.labeler = labeler
        self.encoded = encoded
        self.trees = trees
        self.heads = labels
        self.features = _Dim(labeler.W.size)

    def __len__(self) -> int:
        return len(self.encoded)

    def wrap(self, order, epoch: int):
        return order

    def decode(self, i: int, w: np.ndarray, cost: float = 0.0) -> np.ndarray:
        """The best label of every word under weights w (-1 where gold has none); with
        ``cost`` > 0 every label but the gold one scores ``cost`` more (cost-augmented,
        as :meth:`arboreal.learn.TrainingData.decode`)."""
        lab = self.labeler
        scores = _label_scores(self.encoded[i].codes, lab.table, self.trees[i], LONG, lab.bits,
                               w.reshape(lab.W.shape))
        if cost:
            gold = self.heads[i]
            wrong = np.ones(scores.shape, dtype=bool)
            words = np.flatnonzero(gold >= 0)
            wrong[words, gold[words]] = False
            scores = np.where(wrong, scores + cost, scores)
        out = scores.argmax(axis=1)
        out[self.heads[i] < 0] = -1
        return out

    def tree_items(self, i: int, gold: np.ndarray, trees: list[np.ndarray]):
        """phi(gold) - phi(labels) of each label sequence as signed feature items (see
        :meth:`arboreal.learn.TrainingData.tree_items`): for each word a sequence gets
        wrong, an item of its gold label and one of the sequence's, their ids the
        word's feature rows times L plus the label. O(features of those words)."""
        lab = self.labeler
        L = lab.W.shape[1]
        wrongs = [np.flatnonzero(gold[1:] != t[1:]) + 1 for t in trees]
        ms = np.concatenate(wrongs).astype(np.int64)
        offsets, rows = _word_rows(self.encoded[i].codes, lab.table, self.trees[i], ms, LONG,
                                   lab.bits)
        word_of_item, label_of_item, con_item, con_coef, ptr = [], [], [], [], [0]
        first_word = 0
        for tree, wrong in zip(trees, wrongs):
            k = wrong.size
            words = first_word + np.arange(k)
            word_of_item += [words, words]
            label_of_item += [gold[wrong], tree[wrong]]
            con_item.append(2 * first_word + np.arange(2 * k))
            con_coef.append(np.repeat([1.0, -1.0], k))
            ptr.append(ptr[-1] + 2 * k)
            first_word += k
        word_of_item = np.concatenate(word_of_item).astype(np.int64)
        label_of_item = np.concatenate(label_of_item).astype(np.int64)
        counts = np.diff(offsets)[word_of_item]
        item_offsets = np.zeros(counts.size + 1, dtype=np.int64)
        np.cumsum(counts, out=item_offsets[1:])
        within = np.arange(item_offsets[-1]) - np.repeat(item_offsets[:-1], counts)
        ids = rows[np.repeat(offsets[word_of_item], counts) + within] * L \
            + np.repeat(label_of_item, counts)
        return (item_offsets, ids.astype(np.int64), np.ones(ids.size),
                np.asarray(ptr, dtype=np.int64), np.concatenate(con_item).astype(np.int64),
                np.concatenate(con_coef))


@njit(cache=True)
def _word_rows(codes, table, heads, words, long_attr, bits):
    """Feature rows of each word's arc (heads[m], m) in its tree context, as CSR:
    (offsets (len(words)+1,), rows)."""
    n = codes.shape[1] - 3
    n_loop = 0
    for t in range(table.shape[0]):
        if table[t, 2] >= 0:
            n_loop += 1
    per = 2 * (table.shape[0] + n_loop * (n + 2))
    buf = np.empty(per, dtype=np.int64)
    rows = np.empty(per * words.shape[0], dtype=np.int64)
    offsets = np.zeros(words.shape[0] + 1, dtype=np.int64)
    G = partial_hashes(codes, table, heads)
    pos = 0
    for j in range(words.shape[0]):
        m = words[j]
        k = arc_ids(codes, table, G, heads[m], m, heads, long_attr, bits, buf)
        for q in range(k):
            rows[pos + q] = buf[q]
        pos += k
        offsets[j + 1] = pos
    return offsets, rows[:pos]


@njit(cache=True)
def _label_scores(codes, table, heads, long_attr, bits, W):
    """Score of every label (n+1, L) for every word given the tree (row 0 and words
    without a head: zeros)."""
    n = codes.shape[1] - 3
    n_loop = 0
    for t in range(table.shape[0]):
        if table[t, 2] >= 0:
            n_loop += 1
    buf = np.empty(2 * (table.shape[0] + n_loop * (n + 2)), dtype=np.int64)
    G = partial_hashes(codes, table, heads)
    out = np.zeros((n + 1, W.shape[1]))
    for m in range(1, n + 1):
        if heads[m] < 0:
            continue
        k = arc_ids(codes, table, G, heads[m], m, heads, long_attr, bits, buf)
        _scores_of(W, buf, k, out[m])
    return out
