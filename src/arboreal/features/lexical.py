"""Lexical arc features: word pairs, their PMI on unlabeled text, distance (Wang et al. 2006).

Wang, Cherry, Lizotte & Schuurmans (2006) score an arc from words alone: an indicator
of the (unordered) word pair, the pointwise mutual information of the pair estimated
on unlabeled text, and the distance and squared distance of the two words. This module
gives those features to :class:`~arboreal.features.FeatureSet` as templates of the same
language as the arc templates (space-separated slots), over *pair* slots besides the
token slots ``h.ATTR`` / ``m.ATTR``:

=========  ==============================================================================
``pair``   the unordered pair of the two words: ``{key(h), key(m)}``
``pmi``    the PMI bin of the pair: ``floor(PMI / PMI_BIN)`` clipped to
           ``PMI_RANGE``; its own values for a pair the lexicon does not hold and for
           root arcs
``dir``    the direction: head left or right of the modifier
``dist``   MSTParser's distance bucket of ``|h - m|`` (1, 2, 3, 4, 5, 6-10, > 10)
``=pmi``   real value: the PMI in nats (0 for an unknown pair or a root arc)
``=dist``  real value: ``min(|h - m|, DIST_CAP) / DIST_SCALE``
``=dist2`` real value: its square
=========  ==============================================================================

A template is a conjunction of indicator slots, times at most one real value (1 when
it has none): ``"pmi dir"`` fires one feature per (PMI bin, direction) with value 1;
``"=pmi dir"`` one feature per direction with the PMI as its value. A word's **key** is
its id in the lexicon (:class:`~arboreal.features.lexicon.Lexicon`, normalised form)
and, for a word the lexicon lacks, ``-1 - code`` with ``code`` the feature set's word
code (its training vocabulary, UNK for unseen words), so ``pair`` works without a lexicon
too; the root's key is :data:`ROOT_KEY`. Feature ids are hashed into the arc weight
vector, seeded by the template's text (they may collide with arc features by chance, as
arc templates collide with each other). The cut-off of the feature set does
not apply to them.

Per sentence the feature set stores the word keys and lexicon ids (:class:`LexicalSentence`,
O(n) memory); PMIs, feature ids and values are computed from them on each call,
vectorized over all arcs: O(n^2 (templates + log P)) per sentence for P lexicon pairs, no
per-arc Python loop.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from arboreal.features.hashing import template_slots

if TYPE_CHECKING:
    import scipy.sparse

#: width in nats of a PMI bin, and the range of bins (lower PMIs share the lowest
#: bin, higher ones the highest)
PMI_BIN = 0.5
PMI_RANGE = (-8, 16)
#: ``=dist`` is ``min(|h - m|, DIST_CAP) / DIST_SCALE`` (and ``=dist2`` its square): values
#: near 1 for typical arcs, so that one learning rate suits them and the indicators; the
#: cap keeps the long arcs of long sentences from dominating an online update (uncapped,
#: they made 1-best MIRA much worse on Czech-CLTT's long sentences, docs/wang2006.md;
#: the ``dist`` bucket still tells long arcs apart)
DIST_SCALE = 10.0
DIST_CAP = 20
#: the key of the root token in ``pair``
ROOT_KEY = -(1 << 40)
PAIR_SLOTS = ("pair", "pmi", "dir", "dist")
VALUE_SLOTS = ("=pmi", "=dist", "=dist2")

#: the lexical templates ``arboreal train --lexicon`` adds: Wang et al.'s features (word
#: pair, PMI, distance, squared distance), PMI also binned and with direction/distance
DEFAULT_LEXICAL_TEMPLATES = ["pair", "pair dir", "pmi", "pmi dir", "pmi dir dist",
                             "=pmi", "=pmi dir", "=dist", "=dist2"]
#: similar words per word in the Laplacian's pair graph (:meth:`LexicalFeatures.graph`)
GRAPH_NEIGHBOURS = 5
#: the templates without a lexicon (no PMI): pair and distance only
NO_LEXICON_TEMPLATES = ["pair", "pair dir", "=dist", "=dist2"]

_P = np.uint64(0x100000001B3)
_C1 = np.uint64(0xFF51AFD7ED558CCD)
_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_LEX_SEED = 0x4C455849   # "LEXI": lexical template seeds apart from arc templates
#: the token anchors a lexical template may read: the head and the modifier
_TOKEN_ANCHORS = {"h": 0, "m": 1}


@dataclass
class LexicalSentence:
    """What the lexical features read of one sentence: ``keys`` (n+1,) int64 (word keys,
    ``keys[0] = ROOT_KEY``) and ``ids`` (n+1,) int64 (lexicon ids, -1 for unknown words
    and the root). O(n) memory: PMIs are looked up when features are computed."""

    keys: np.ndarray
    ids: np.ndarray


@dataclass(frozen=True)
class _Template:
    text: str
    seed: np.uint64
    slots: tuple        # (kind, attr index or -1)
    value: str | None   # one of VALUE_SLOTS, or None


def _seed(text: str) -> np.uint64:
    return np.uint64((zlib.crc32(text.encode()) << 32) ^ _LEX_SEED ^ 0x9E3779B97F4A7C15)


def parse_lexical_template(text: str, attrs: dict[str, int], lexicon: bool) -> _Template:
    """The slots of lexical template ``text``; ValueError naming the template for an
    unknown slot, two values, a repeated slot, a template without any slot, or a PMI
    slot without a lexicon."""
    slots, value = [], None
    tokens = text.split()
    if not tokens:
        raise ValueError("lexical template '': no slot")
    for tok in tokens:
        if tok in VALUE_SLOTS:
            if value is not None:
                raise ValueError(f"lexical template {text!r}: at most one value slot")
            value = tok
        elif tok in PAIR_SLOTS:
            slots.append((tok, -1))
        else:
            # a token slot, read by the template language's one slot parser
            try:
                [(anchor, offset, attr)] = template_slots(tok, _TOKEN_ANCHORS, attrs, 1)
            except ValueError:
                anchor = offset = None
            if anchor is None or offset != 0:
                raise ValueError(f"lexical template {text!r}: bad slot {tok!r} (slots: "
                                 f"{', '.join(PAIR_SLOTS + VALUE_SLOTS)}, h.ATTR, m.ATTR)")
            slots.append(("h" if anchor == 0 else "m", attrs[attr]))
        if not lexicon and tok in ("pmi", "=pmi"):
            raise ValueError(f"lexical template {text!r}: '{tok}' needs a lexicon "
                             "(arboreal train --lexicon LEX)")
    if len(set(slots)) != len(slots):
        raise ValueError(f"lexical template {text!r}: a slot appears twice")
    return _Template(text, _seed(text), tuple(slots), value)


def _fmix(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> _S33)
    h = h * _C1
    h = h ^ (h >> _S33)
    h = h * _C2
    return h ^ (h >> _S33)


class LexicalFeatures:
    """Hashed lexical arc features (module docstring) over a weight vector of 2**bits.

    Args:
        templates: lexical templates (default: :data:`DEFAULT_LEXICAL_TEMPLATES` with a
            lexicon, :data:`NO_LEXICON_TEMPLATES` without).
        lexicon: the :class:`~arboreal.features.lexicon.Lexicon`, or None.
        bits: the arc weight vector's size is 2**bits.
        attrs: attribute name -> row of the encoded sentence's codes (``h.ATTR`` slots).
    """

    def __init__(self, templates: list[str] | None, lexicon, bits: int, attrs: dict[str, int]):
        if templates is None:
            templates = DEFAULT_LEXICAL_TEMPLATES if lexicon is not None else NO_LEXICON_TEMPLATES
        self.templates = list(templates)
        self.lexicon = lexicon
        self.bits = int(bits)
        self._parsed = [parse_lexical_template(t, attrs, lexicon is not None)
                        for t in self.templates]
        self._mask = np.uint64((1 << self.bits) - 1)

    def __len__(self) -> int:
        return len(self.templates)

    # ------------------------------------------------------------------ per sentence
    def sentence(self, lexicon_ids: np.ndarray, word_codes: np.ndarray) -> LexicalSentence:
        """The :class:`LexicalSentence` of words with lexicon ids ``lexicon_ids`` (n,)
        (-1 unknown) and feature-set word codes ``word_codes`` (n,). O(n)."""
        ids = np.asarray(lexicon_ids, dtype=np.int64)
        keys = np.concatenate([[ROOT_KEY], np.where(ids >= 0, ids,
                                                     -1 - np.asarray(word_codes, np.int64))])
        return LexicalSentence(keys.astype(np.int64), np.concatenate([[-1], ids]))

    def pmi(self, lex: LexicalSentence, hs: np.ndarray, ms: np.ndarray) -> np.ndarray:
        """PMI (float32, NaN when unknown, for the root and without a lexicon) of the
        words of arcs (hs, ms). O(A log P)."""
        if self.lexicon is None:
            return np.full(np.shape(hs), np.nan, dtype=np.float32)
        return self.lexicon.pmi_many(lex.ids[hs], lex.ids[ms])

    def _slot_values(self, kind: str, attr: int, codes: np.ndarray, lex: LexicalSentence,
                     hs: np.ndarray, ms: np.ndarray, pmi: np.ndarray
                     ) -> tuple[np.ndarray, ...]:
        """The int64 value(s) of one indicator slot on arcs (hs, ms) whose PMIs are
        ``pmi``."""
        if kind == "pair":
            a, b = lex.keys[hs], lex.keys[ms]
            return np.minimum(a, b), np.maximum(a, b)
        if kind == "pmi":
            v = pmi
            known = np.isfinite(v)
            b = np.clip(np.floor(np.where(known, v, 0.0) / PMI_BIN), *PMI_RANGE).astype(np.int64)
            return (np.where(known, b, np.where(hs == 0, 1000, 1001)),)
        if kind == "dir":
            return ((hs < ms).astype(np.int64),)
        if kind == "dist":
            d = np.abs(hs - ms)
            return (np.where(d > 10, 6, np.where(d > 5, 5, d - 1)).astype(np.int64),)
        pos = hs if kind == "h" else ms
        return (codes[attr, pos + 1].astype(np.int64),)

    def _value(self, value: str | None, pmi: np.ndarray, hs, ms) -> np.ndarray:
        if value is None:
            return np.ones(hs.shape)
        if value == "=pmi":
            v = pmi.astype(np.float64)
            return np.where(np.isfinite(v), v, 0.0)
        d = np.minimum(np.abs(hs - ms), DIST_CAP) / DIST_SCALE
        return d if value == "=dist" else d * d

    def items(self, codes: np.ndarray, lex: LexicalSentence, hs: np.ndarray, ms: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
        """Feature ids (T, A) int64 and values (T, A) float64 of arcs (hs[i], ms[i])
        (any shape A; one feature per template and arc). O(T * A)."""
        hs = np.asarray(hs, dtype=np.int64)
        ms = np.asarray(ms, dtype=np.int64)
        ids = np.empty((len(self._parsed),) + hs.shape, dtype=np.int64)
        vals = np.empty((len(self._parsed),) + hs.shape)
        pmi = self.pmi(lex, hs, ms)
        for t, tmpl in enumerate(self._parsed):
            ids[t] = self._hash(tmpl, self._slot_arrays(tmpl, codes, lex, hs, ms, pmi))
            vals[t] = self._value(tmpl.value, pmi, hs, ms)
        return ids, vals

    def _slot_arrays(self, tmpl: _Template, codes, lex, hs, ms, pmi) -> list[np.ndarray]:
        """The int64 values hashed for ``tmpl`` on arcs (hs, ms) with PMIs ``pmi``, in
        slot order (two for ``pair``, one for any other slot)."""
        return [v for kind, attr in tmpl.slots
                for v in self._slot_values(kind, attr, codes, lex, hs, ms, pmi)]

    def _hash(self, tmpl: _Template, arrays: list[np.ndarray]) -> np.ndarray:
        """Feature ids (int64 in 0..2**bits-1) of the slot values ``arrays``."""
        shape = np.broadcast_shapes(*(a.shape for a in arrays)) if arrays else ()
        h = np.full(shape, tmpl.seed, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for v in arrays:
                h = (h ^ v.astype(np.uint64)) * _P
            return (_fmix(h) & self._mask).astype(np.int64)

    # ------------------------------------------------------------------ Laplacian
    def graph(self, encoded: list, heads: list, neighbours: int = GRAPH_NEIGHBOURS
              ) -> tuple[np.ndarray, "scipy.sparse.csr_matrix"]:
        """The similarity graph of word-pair features for Laplacian regularization
        (Wang et al. 2006): ``(feature_ids (K,) int64, S (K, K) csr)``, S symmetric,
        nonnegative, zero diagonal, over weight indices ``feature_ids``.

        Nodes: the features of the indicator templates with a ``pair`` slot on the gold
        arcs of ``encoded`` / ``heads``, and the same templates with the pair replaced by
        a similar pair: ``(a', b')`` with ``a'`` equal to ``a`` or among its
        ``neighbours`` most similar words in the lexicon, the same for ``b'`` (the other
        slots unchanged), linked with weight ``sqrt(sim(a, a') sim(b, b'))`` (sim of a
        word with itself: 1). Features of similar pairs never seen in training thus get
        weights through the regularizer. A link found several times (both ways, or
        through hashed ids that collide) keeps its largest weight, so weights lie in
        (0, 1]. O(gold arcs * (neighbours + 1)^2) time and memory.
        """
        import scipy.sparse as sp

        if self.lexicon is None:
            raise ValueError("the Laplacian needs a lexicon (arboreal train --lexicon LEX)")
        k1 = neighbours + 1
        src, dst, wts = [], [], []
        for tmpl in self._parsed:
            if tmpl.value is not None or ("pair", -1) not in tmpl.slots:
                continue
            at = sum(2 if kind == "pair" else 1 for kind, _ in
                     tmpl.slots[: tmpl.slots.index(("pair", -1))])
            per = []
            for enc, h in zip(encoded, heads):
                hs, ms = np.asarray(h[1:], np.int64), np.arange(1, len(h))
                per.append(self._slot_arrays(tmpl, enc.codes, enc.lexical, hs, ms,
                                             self.pmi(enc.lexical, hs, ms)))
            if not per:
                continue
            rows = np.unique(np.stack([np.concatenate(col) for col in zip(*per)], axis=1),
                             axis=0)                       # (R, slots) distinct gold features
            # each key's candidates: itself (similarity 1), then its neighbours
            keys, inv = np.unique(rows[:, at:at + 2], return_inverse=True)
            inv = inv.reshape(-1, 2)
            cand_key = np.full((keys.size, k1), np.iinfo(np.int64).min, dtype=np.int64)
            cand_sim = np.zeros((keys.size, k1))
            cand_key[:, 0], cand_sim[:, 0] = keys, 1.0
            for u in np.flatnonzero(keys >= 0):
                ids, sims = self.lexicon.neighbour_ids(int(keys[u]))
                cand_key[u, 1:1 + min(neighbours, ids.size)] = ids[:neighbours]
                cand_sim[u, 1:1 + min(neighbours, ids.size)] = sims[:neighbours]
            ka, kb = cand_key[inv[:, 0]][:, :, None], cand_key[inv[:, 1]][:, None, :]
            weight = np.sqrt(cand_sim[inv[:, 0]][:, :, None] * cand_sim[inv[:, 1]][:, None, :])
            weight[:, 0, 0] = 0.0                                 # the pair itself
            r, i, j = np.nonzero(weight > 0)
            own = self._hash(tmpl, [rows[:, c] for c in range(rows.shape[1])])
            arrays = [rows[r, c] for c in range(rows.shape[1])]
            a2, b2 = ka[r, i, 0], kb[r, 0, j]
            arrays[at], arrays[at + 1] = np.minimum(a2, b2), np.maximum(a2, b2)
            src.append(own[r])
            dst.append(self._hash(tmpl, arrays))
            wts.append(weight[r, i, j])
        if not src:
            raise ValueError("the Laplacian needs lexical templates with a 'pair' slot")
        src, dst, wts = np.concatenate(src), np.concatenate(dst), np.concatenate(wts)
        feature_ids, idx = np.unique(np.concatenate([src, dst]), return_inverse=True)
        K = feature_ids.size
        i, j = idx[: src.size], idx[src.size:]
        i, j = np.concatenate([i, j]), np.concatenate([j, i])      # symmetric
        wts = np.concatenate([wts, wts])
        keep = i != j                       # a pair merged with its own by hashing
        key = i[keep] * K + j[keep]
        order = np.argsort(key, kind="stable")
        key, wts = key[order], wts[keep][order]
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        S = sp.csr_matrix((np.maximum.reduceat(wts, first) if key.size else wts,
                           (key[first] // K, key[first] % K)), shape=(K, K))
        return feature_ids, S

    def _all_arcs(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        hs, ms = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
        return hs, ms

    def add_scores(self, codes: np.ndarray, lex: LexicalSentence, w: np.ndarray,
                   out: np.ndarray) -> None:
        """``out[h, m] += sum_t w[id_t(h, m)] * value_t(h, m)`` for m >= 1, h != m.
        out (>= n+1, >= n+1). O(n^2 T)."""
        n = lex.keys.size - 1
        if n == 0 or not self._parsed:
            return
        ids, vals = self.items(codes, lex, *self._all_arcs(n))
        s = (w[ids] * vals).sum(axis=0)
        s[:, 0] = 0.0
        np.fill_diagonal(s, 0.0)
        out[: n + 1, : n + 1] += s

    def accumulate(self, codes: np.ndarray, lex: LexicalSentence, coef: np.ndarray,
                   out: np.ndarray, scale: float = 1.0) -> None:
        """``out[id_t(h, m)] += scale * coef[h, m] * value_t(h, m)`` over arcs with
        coef != 0 (m >= 1, h != m). O(nnz(coef) T)."""
        n = lex.keys.size - 1
        c = np.asarray(coef, dtype=np.float64)[: n + 1, : n + 1].copy()
        c[:, 0] = 0.0
        np.fill_diagonal(c, 0.0)
        hs, ms = np.nonzero(c)
        self.add_arcs(codes, lex, hs, ms, c[hs, ms], out, scale)

    def add_arcs(self, codes: np.ndarray, lex: LexicalSentence, hs: np.ndarray,
                 ms: np.ndarray, coef: np.ndarray, out: np.ndarray, scale: float = 1.0) -> None:
        """``out[id_t(h, m)] += scale * coef_a * value_t(h, m)`` for the arcs
        a = (hs[a], ms[a]) (A,), coef (A,). O(A T)."""
        if np.size(hs) == 0 or not self._parsed:
            return
        ids, vals = self.items(codes, lex, hs, ms)
        np.add.at(out, ids.ravel(),
                  (scale * vals * np.asarray(coef, dtype=np.float64)[None, :]).ravel()
                  .astype(out.dtype))

    # ------------------------------------------------------------------ persistence
    def config(self) -> dict:
        return {"templates": self.templates}
