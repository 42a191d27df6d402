"""First-order (arc-factored) features: s(h, m) = w . f(x, h, m), by feature hashing.

Design (speed and memory): a sentence is encoded once into a small int32 matrix of
token codes (:class:`EncodedSentence`, attributes x positions), computed for the whole
corpus at a time: one dictionary pass per column, then array indexing (that pass is
the only per-token Python work).
The ids of the features of an arc are never stored: a numba kernel recomputes them by
hashing small tuples of codes into ``2**bits`` buckets each time the arc is scored or
updated, so memory is O(corpus words) and scoring a sentence costs
O(n^2 * T + n^3 * T_between) hash-and-gather operations with no Python loop.

Feature sets:

* ``"mcdonald"``: McDonald, Crammer & Pereira (2006) Table 1 / Appendix C over FORM
  and UPOS: unigram and bigram word/POS templates of head and modifier, the same
  templates with 5-character prefixes for words longer than 5 characters, in-between
  POS trigrams, surrounding-POS 4-grams and their trigram back-offs.
* ``"default"``: the McDonald templates over lower-cased forms, plus XPOS and lemma
  variants, morphological features (FEATS) and 3-character suffixes of head and
  modifier, wider context (POS at +-1 of both words with the word itself, POS 4-grams
  reaching two words away, the words next to head and modifier with both POS), and
  direction/distance-only bias features.

Every template fires twice: plain and conjoined with (direction, distance bucket
1, 2, 3, 4, 5, 6-10, >10) — MSTParser's scheme.

Feature-count cut-off (``cutoff=K``): only features that occur at least K times in the
gold trees of the training data get weights (K = 0: every hashed feature may be
updated). Implemented as a boolean mask over buckets consulted by the update kernels.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from numba import njit

from arboreal._cores import available_cores
from arboreal.features.clusters import NOCL
from arboreal.features.lexical import LexicalFeatures, LexicalSentence
from arboreal.features.hashing import (accumulate_dense_batch_kernel, accumulate_dense_kernel,
                                       arc_ids, arc_scores_batch_kernel, arc_scores_rows_kernel,
                                       compile_templates, partial_hashes)

ATTRS = ("word", "p5", "pos", "xpos", "lemma", "feats", "suf3", "long", "c4", "c6", "cl")
#: word-cluster attributes (4- and 6-bit prefixes and the whole bit string of the word's
#: Brown cluster, Koo et al. 2008); NOCL without a clustering or for unknown words
CLUSTER_ATTRS = {"c4": 4, "c6": 6, "cl": None}
#: the word attributes whose vocabularies ``top_words`` prunes (Koo et al. 2008's
#: lexical features; clusters, tags and suffixes are not affected)
LEXICAL_ATTRS = ("word", "p5", "lemma")
#: arcs scored per kernel call for long sentences (bounds the time between checks for
#: Ctrl-C and the scratch memory of one call)
ROW_CHUNK_ARCS = 1 << 21


ATTR_INDEX = {a: i for i, a in enumerate(ATTRS)}
LONG = ATTR_INDEX["long"]
#: attributes whose head/modifier pairs key shared hash blocks (rare, cache-missing)
SHARED_BLOCK_ATTRS = ("word", "p5", "lemma")
# reserved codes
PAD_LEFT, PAD_RIGHT, ROOT, UNK = 0, 1, 2, 3
N_RESERVED = 4

_UNI = ["h.W h.P", "h.W", "h.P", "m.W m.P", "m.W", "m.P"]
_BI = ["h.W h.P m.W m.P", "h.P m.W m.P", "h.W m.W m.P", "h.W h.P m.P",
       "h.W h.P m.W", "h.W m.W", "h.P m.P"]
_CONTEXT = ["h.P b.P m.P",
            "h.P h+1.P m-1.P m.P", "h-1.P h.P m-1.P m.P",
            "h.P h+1.P m.P m+1.P", "h-1.P h.P m.P m+1.P",
            "h.P m-1.P m.P", "h.P h+1.P m.P", "h-1.P h.P m.P", "h.P m.P m+1.P"]


def _expand(templates: list[str], word: str, pos: str) -> list[str]:
    return [t.replace("W", word).replace("P", pos) for t in templates]


def mcdonald_templates() -> list[str]:
    """McDonald et al. 2006, Table 1 (a, b, c) + 5-char prefix variants (Appendix C)."""
    lex = _UNI + _BI
    out = _expand(lex, "word", "pos")
    out += [t for t in _expand(lex, "p5", "pos") if "p5" in t]
    out += _expand(_CONTEXT, "word", "pos")
    return out


def default_templates() -> list[str]:
    """McDonald's templates plus XPOS, lemma, FEATS, suffix and extra context templates."""
    out = mcdonald_templates()
    lex = _UNI + _BI
    out += [t for t in _expand(lex, "lemma", "xpos") if "lemma" in t or "xpos" in t]
    out += _expand(_CONTEXT, "word", "xpos")
    out += [
        # morphology and suffixes
        "h.feats m.feats", "h.pos h.feats m.pos m.feats", "h.pos m.pos m.feats",
        "h.pos h.feats m.pos", "h.suf3 m.suf3", "h.pos m.suf3", "h.suf3 m.pos",
        "h.word m.pos m.suf3",
        # words with context tags
        "h.word h+1.pos m.pos", "h.word h-1.pos m.pos", "h.pos m.word m-1.pos",
        # "h.word m.word m.pos h.pos" reads the same slots as McDonald's first bigram
        # template: a second, separately learned copy (kept because dropping it lowered
        # the averaged perceptron's EWT dev UAS; benchmarks/feature_variants.py)
        "h.pos m.word m+1.pos", "h.word m.word m.pos h.pos",
        "h-1.pos h.pos h+1.pos m.pos", "h.pos m-1.pos m.pos m+1.pos",
        "h.lemma m.pos m+1.pos", "h.pos m.lemma h+1.pos",
        # POS two words away, and the words next to head and modifier: added together
        # (each group alone helped less) after comparing variants on EWT dev with
        # benchmarks/feature_variants.py, whose figures move with seeds and template order
        "h-2.pos h-1.pos h.pos m.pos", "h.pos m.pos m+1.pos m+2.pos",
        "h.pos h+1.pos h+2.pos m.pos", "h.pos m-2.pos m-1.pos m.pos",
        "h.pos m.pos m+1.word", "h.pos m.pos m-1.word",
        "h.pos h+1.word m.pos", "h.pos h-1.word m.pos",
        # between words (coarse and fine)
        # direction / distance only
        "",
    ]
    return out


def words_templates() -> list[str]:
    """Word forms only, no tags (the setting of Wang et al. 2006): McDonald's unigram,
    bigram and context templates with the word (and its 5-character prefix) in place of
    the POS tag; "" (direction and distance)."""
    lex = [t for t in _UNI + _BI if "P" not in t]
    out = _expand(lex, "word", "word") + [t for t in _expand(lex, "p5", "p5") if "p5" in t]
    out += ["h.word m.p5", "h.p5 m.word"]
    # the context templates but the one over every word in between (too sparse)
    out += [t for t in _expand(_CONTEXT, "word", "word") if "b." not in t]
    return out + [""]


TEMPLATE_SETS = {"mcdonald": mcdonald_templates, "default": default_templates,
                 "words": words_templates}

#: the token attributes that come from tag columns (a tagger or the input provides them)
TAG_ATTRS = ("pos", "xpos", "feats", "lemma")


def templates_read_tags(templates) -> bool:
    """Whether some template (of any kind: arc, lexical, part, label) has a slot
    ``anchor.ATTR`` with ATTR in :data:`TAG_ATTRS`."""
    return any(slot.partition(".")[2] in TAG_ATTRS for t in templates for slot in t.split())

#: arc templates over word clusters, added to a named template set when the feature set
#: has a clustering (Koo, Carreras & Collins 2008: cluster prefixes of head and modifier
#: alone, with each other, with POS and with words, and in the POS context templates)
CLUSTER_TEMPLATES = [
    "h.c4", "m.c4", "h.cl", "m.cl",
    "h.c4 m.c4", "h.c6 m.c6", "h.cl m.cl",
    "h.c4 m.pos", "h.pos m.c4", "h.c6 m.pos", "h.pos m.c6", "h.cl m.pos", "h.pos m.cl",
    "h.c4 m.word", "h.word m.c4", "h.c4 h.pos m.c4 m.pos",
    "h.c4 b.pos m.c4", "h.c4 h+1.c4 m-1.c4 m.c4", "h-1.c4 h.c4 m.c4 m+1.c4",
]


@dataclass
class EncodedSentence:
    """Token-level integer codes of one sentence, computed once.

    codes: int32 (A, n+3); ``codes[a, p + 1]`` is attribute ``a`` (see ``ATTRS``) at
    position p in -1..n+1 (p = -1, n+1: boundaries; p = 0: root).
    """

    codes: np.ndarray
    #: the lexical features' view of the sentence (word keys, PMI), when the feature
    #: set has lexical templates (:mod:`arboreal.features.lexical`)
    lexical: LexicalSentence | None = None

    @property
    def n(self) -> int:
        return self.codes.shape[1] - 3


@dataclass
class PackedSentences:
    """Encoded sentences side by side: sentence b's codes are
    ``flat[:, starts[b]:starts[b+1]]``; ``lengths`` (B,) their word counts."""

    flat: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    #: each sentence's :class:`~arboreal.features.lexical.LexicalSentence` (or None)
    lexical: list | None = None

    @classmethod
    def of(cls, encoded: list[EncodedSentence]) -> "PackedSentences":
        widths = np.array([e.codes.shape[1] for e in encoded], dtype=np.int64)
        starts = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(widths, out=starts[1:])
        flat = (np.ascontiguousarray(np.concatenate([e.codes for e in encoded], axis=1))
                if encoded else np.zeros((len(ATTRS), 0), dtype=np.int32))
        lexical = [e.lexical for e in encoded]
        return cls(flat, starts, widths - 3,
                   lexical if any(x is not None for x in lexical) else None)

    def sentences(self) -> list[EncodedSentence]:
        """The packed sentences as :class:`EncodedSentence` views."""
        lexical = self.lexical or [None] * self.lengths.size
        return [EncodedSentence(self.flat[:, self.starts[b]:self.starts[b + 1]], lexical[b])
                for b in range(self.lengths.size)]


_DIGIT_TABLE = str.maketrans("0123456789", "0000000000")


#: 2**bits hashed feature weights of a parser by default (32 MB of float32)
DEFAULT_HASH_BITS = 23


class FeatureSet:
    """Hashed first-order arc features (see the module docstring).

    Args:
        templates: ``"default"``, ``"mcdonald"`` or an explicit list of template
            strings (syntax of :func:`arboreal.features.hashing.compile_templates`,
            attributes ``ATTRS``).
        bits: weight vector size is ``2**bits``.
        cutoff: feature-count cut-off on the gold training trees (0 = none).
        lowercase: lower-case forms before coding (default: True except "mcdonald").
        share_blocks: templates that read the same word-pair attributes of head and
            modifier (``word``, ``p5``, ``lemma``) share one hash block per pair, each
            at its own rotation (see :func:`~arboreal.features.hashing.compile_templates`):
            one cache miss per family instead of one per template (default True).
        clusters: a word clustering for the ``c4``, ``c6``, ``cl`` attributes.
        lexicon: word statistics from unlabeled text
            (:class:`~arboreal.features.lexicon.Lexicon`) for the lexical templates.
        lexical_templates: lexical arc templates (:mod:`arboreal.features.lexical`);
            None: its defaults when there is a lexicon, no lexical features otherwise.
        top_words: when > 0, the word, 5-prefix and lemma vocabularies keep only their
            ``top_words`` most frequent values in the training data; rarer values
            share the unknown code (the feature pruning of Koo et al. 2008, who keep
            the 800 most frequent English words and leave cluster features alone).

    Each feature's slots are rotated inside its hash block (``spread``, see
    :func:`~arboreal.features.hashing._slot`): features sharing a block collide on a
    slot only by chance.

    Call :meth:`fit` on training sentences (builds the vocabularies and the cut-off
    mask) before :meth:`encode`.
    """

    def __init__(self, templates: str | list[str] = "default", bits: int = DEFAULT_HASH_BITS,
                 cutoff: int = 0, lowercase: bool | None = None, share_blocks: bool = True,
                 clusters=None, lexicon=None, lexical_templates: list[str] | None = None,
                 top_words: int = 0):
        if top_words < 0:
            raise ValueError("top_words must be >= 0")
        self.top_words = int(top_words)
        #: the word clustering of the ``c4``, ``c6``, ``cl`` attributes
        #: (:class:`~arboreal.features.clusters.Clusters`), or None
        self.clusters = clusters
        if isinstance(templates, str):
            if templates not in TEMPLATE_SETS:
                raise ValueError(f"unknown feature set {templates!r}; choose from {sorted(TEMPLATE_SETS)}")
            self.name = templates
            self.templates = TEMPLATE_SETS[templates]() + (CLUSTER_TEMPLATES if clusters else [])
        else:
            self.name = "custom"
            self.templates = list(templates)
        if not 10 <= bits <= 30:
            raise ValueError("bits must lie in 10..30")
        self.bits = int(bits)
        self.spread = 1
        self.cutoff = int(cutoff)
        self.lowercase = (self.name != "mcdonald") if lowercase is None else bool(lowercase)
        self.share_blocks = bool(share_blocks)
        self.table = compile_templates(self.templates, ATTR_INDEX,
                                       SHARED_BLOCK_ATTRS if share_blocks else ())
        #: the lexical arc features (:class:`~arboreal.features.lexical.LexicalFeatures`)
        self.lexical = (LexicalFeatures(lexical_templates, lexicon, self.bits, ATTR_INDEX)
                        if lexicon is not None or lexical_templates is not None else None)
        self.vocabs: dict[str, np.ndarray] = {}
        self.allowed: np.ndarray | None = None  # bool (dim,) when cutoff > 0
        n_loop = int((self.table[:, 2] >= 0).sum())
        self._n_plain = len(self.templates) - n_loop
        self._n_loop = n_loop

    # ------------------------------------------------------------------ vocabularies
    @property
    def dim(self) -> int:
        """Size of the weight vector (2**bits)."""
        return 1 << self.bits

    def _columns(self, sentences) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], np.ndarray]:
        """Corpus-wide columns as (distinct values, inverse index) per attribute.

        Each CoNLL-U column of the whole corpus is reduced to its distinct values (in
        first-seen order) and an inverse index by one dictionary pass; derived attributes (normalized
        word, prefix, suffix, length flag) are computed once per distinct form, never
        per token. Returns ``({attr: (values, inverse)}, long_flag_per_token)``.
        """
        def cat(name: str) -> np.ndarray:
            parts = [getattr(s, name)[1:] for s in sentences]
            if not parts:
                return np.zeros(0, dtype=object)
            return np.concatenate(parts).astype(object)

        def uniq(col: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            # a dict in first-seen order: hashing the strings is several times faster
            # than np.unique's comparison sort of an object array
            index: dict = {}
            inv = np.fromiter((index.setdefault(x, len(index)) for x in col.tolist()),
                              dtype=np.int64, count=col.size)
            return np.array(list(index), dtype=object), inv

        forms_u, forms_inv = uniq(cat("forms"))
        if self.lowercase:
            word_types = [f.lower().translate(_DIGIT_TABLE) for f in forms_u.tolist()]
        else:
            word_types = forms_u.tolist()
        # derived attributes per distinct form (types, not tokens)
        derived = {
            "word": np.array(word_types, dtype=object),
            "p5": np.array([w[:5] for w in word_types], dtype=object),
            "suf3": np.array([w[-3:] for w in word_types], dtype=object),
        }
        paths = (self.clusters.lookup(forms_u.tolist()) if self.clusters is not None
                 else [NOCL] * forms_u.size)
        for attr, k in CLUSTER_ATTRS.items():
            derived[attr] = np.array([p if k is None or p == NOCL else p[:k] for p in paths],
                                     dtype=object)
        cols = {name: (vals, forms_inv) for name, vals in derived.items()}
        long_flag = np.array([len(w) > 5 for w in word_types], dtype=np.int32)[forms_inv] \
            if forms_inv.size else np.zeros(0, dtype=np.int32)
        cols["pos"] = uniq(cat("upos"))
        cols["xpos"] = uniq(cat("xpos"))
        lem_u, lem_inv = uniq(cat("lemmas"))
        cols["lemma"] = (np.array([x.lower() for x in lem_u.tolist()], dtype=object), lem_inv)
        cols["feats"] = uniq(cat("feats"))
        return cols, long_flag

    def fit(self, sentences) -> "FeatureSet":
        """Build vocabularies (and the cut-off mask) from training sentences."""
        cols, long_flag = self._columns(sentences)
        # encode(sentences) right after fit(sentences) reuses the corpus columns
        self._fit_cache = (sentences, cols, long_flag)
        for name, (vals, inv) in cols.items():
            if not vals.size:
                self.vocabs[name] = np.zeros(0, dtype=str)
            elif self.top_words and name in LEXICAL_ATTRS:
                values, counts = np.unique(vals.astype(str)[inv], return_counts=True)
                frequent = np.lexsort((values, -counts))[: self.top_words]  # ties by value
                self.vocabs[name] = np.sort(values[frequent])
            else:
                self.vocabs[name] = np.unique(vals.astype(str))
        for attr, k in CLUSTER_ATTRS.items():
            # every cluster of the clustering, not only those of training words: words
            # unseen in training then still get their cluster's features
            known = {b if k is None else b[:k] for b in self.clusters.bits} \
                if self.clusters is not None else set()
            self.vocabs[attr] = np.array(sorted(known | {NOCL}), dtype=str)
        self._lookup = {}
        if self.cutoff > 0:
            counts = np.zeros(self.dim, dtype=np.int32)
            encs = self.encode(sentences)
            for enc, s in zip(encs, sentences):
                _count_tree(enc.codes, self.table, s.heads.astype(np.int64), LONG,
                            self.bits, counts, self.spread)
            self.allowed = counts >= self.cutoff
        return self

    def _codes_of(self, name: str, values: np.ndarray) -> np.ndarray:
        """Codes (int32) of distinct values: vocabulary index + N_RESERVED, or UNK."""
        lookup = self.__dict__.setdefault("_lookup", {})
        table = lookup.get(name)
        if table is None:
            table = {v: i + N_RESERVED for i, v in enumerate(self.vocabs[name].tolist())}
            lookup[name] = table
        return np.array([table.get(v, UNK) for v in values.tolist()], dtype=np.int32)

    def encode(self, sentences) -> list[EncodedSentence]:
        """Token codes of every sentence, vectorized over the corpus.

        O(words) for the corpus-wide dictionary pass plus O(types) vocabulary
        look-ups; the per-sentence arrays are slices of one corpus array.
        """
        if not self.vocabs:
            raise RuntimeError("FeatureSet.fit must be called before encode")
        lengths = np.array([len(s) for s in sentences], dtype=np.int64)
        cache = self.__dict__.pop("_fit_cache", None)
        if cache is not None and cache[0] is sentences:
            cols, long_flag = cache[1], cache[2]
        else:
            cols, long_flag = self._columns(sentences)
        total = int(lengths.sum())
        A = len(ATTRS)
        nsent = len(sentences)
        # one corpus array with 3 padding columns per sentence: left pad, root, ..., right pad
        starts = np.zeros(nsent + 1, dtype=np.int64)
        np.cumsum(lengths + 3, out=starts[1:])
        flat = np.empty((A, int(starts[-1])), dtype=np.int32)
        flat[:, starts[:-1]] = PAD_LEFT
        flat[:, starts[:-1] + 1] = ROOT
        flat[:, starts[1:] - 1] = PAD_RIGHT
        word_pos = (np.arange(total) + 2 + 3 * np.repeat(np.arange(nsent), lengths)
                    if total else np.zeros(0, dtype=np.int64))
        for name, (vals, inv) in cols.items():
            flat[ATTR_INDEX[name], word_pos] = self._codes_of(name, vals)[inv] if total else UNK
        flat[LONG] = 0
        flat[LONG, word_pos] = long_flag
        encoded = [EncodedSentence(np.ascontiguousarray(flat[:, starts[i]:starts[i + 1]]))
                   for i in range(nsent)]
        if self.lexical is not None:
            vals, inv = cols["word"]
            lexicon = self.lexical.lexicon
            type_ids = (lexicon.ids(vals.tolist()) if lexicon is not None and vals.size
                        else np.full(vals.size, -1, dtype=np.int64))
            token_ids = type_ids[inv] if total else np.zeros(0, dtype=np.int64)
            codes = flat[ATTR_INDEX["word"], word_pos]
            ends = np.cumsum(lengths)
            for i, enc in enumerate(encoded):
                a, b = ends[i] - lengths[i], ends[i]
                enc.lexical = self.lexical.sentence(token_ids[a:b], codes[a:b])
        return encoded

    # ------------------------------------------------------------------ kernels
    def _mask_arg(self) -> np.ndarray:
        return self.allowed if self.allowed is not None else _EMPTY_BOOL

    def arc_scores(self, enc: EncodedSentence, weights: np.ndarray,
                   out: np.ndarray | None = None) -> np.ndarray:
        """(n+1, n+1) float64 arc scores ``w . f(h, m)``; column 0 and diagonal are 0.

        O(n^2 T + n^3 T_between) gathers from ``weights`` (shape (dim,), any float dtype).
        The heads are scored in chunks of about :data:`ROW_CHUNK_ARCS` arcs, one kernel
        call each, so that a long sentence's scoring can be interrupted (Ctrl-C) between
        chunks and its scratch memory stays O(chunk) besides the result; several chunks
        are scored at once by threads, one per available core (the chunks write
        disjoint rows, so the result does not depend on the threads). ``out``: a zeroed
        (>= n+1, >= n+1) float64 array to fill instead of a new one.
        """
        n = enc.n
        if out is None:
            out = np.zeros((n + 1, n + 1))
        rows = max(1, ROW_CHUNK_ARCS // (n + 1))
        starts = range(0, n + 1, rows)

        def score(h0: int) -> None:
            arc_scores_rows_kernel(enc.codes, self.table, weights, LONG, self.bits, self.spread,
                                   h0, min(h0 + rows, n + 1), out)

        workers = min(len(starts), available_cores())
        if workers <= 1:
            for h0 in starts:
                score(h0)
        else:
            with ThreadPoolExecutor(workers) as pool:
                futures = [pool.submit(score, h0) for h0 in starts]
                try:
                    for f in futures:
                        f.result()
                except BaseException:          # Ctrl-C: drop the chunks not started yet
                    for f in futures:
                        f.cancel()
                    raise
        if self.lexical is not None:
            self.lexical.add_scores(enc.codes, enc.lexical, weights, out)
        return out

    def accumulate(self, enc: EncodedSentence, coef: np.ndarray, out: np.ndarray,
                   scale: float = 1.0) -> None:
        """``out[f] += scale * coef[h, m]`` for every feature f of every arc with coef != 0.

        coef: (n+1, n+1); out: (dim,) float array, updated in place. Buckets masked by
        the cut-off are skipped. Cost O(nnz(coef) * T (+ n T_between)).
        """
        _accumulate(enc.codes, self.table, np.ascontiguousarray(coef, dtype=np.float64), out,
                    float(scale), LONG, self.bits, self._mask_arg(), self.spread)
        if self.lexical is not None:
            self.lexical.accumulate(enc.codes, enc.lexical, coef, out, scale)

    def accumulate_head_diff(self, enc: EncodedSentence, gold: np.ndarray, pred: np.ndarray,
                             w: np.ndarray, u: np.ndarray, c: float) -> None:
        """The perceptron's lazy-averaging update in one kernel call: for every word m with
        ``gold[m] != pred[m]``, the features of arc (gold[m], m) get +1 in ``w`` and +c in
        ``u``, those of (pred[m], m) -1 and -c. Same result as two :meth:`accumulate` calls
        with coef +1 / -1 on those arcs. O(#wrong words * T (+ n T_between)).
        """
        _accumulate_head_diff(enc.codes, self.table, np.asarray(gold, dtype=np.int64),
                              np.asarray(pred, dtype=np.int64), w, u, float(c), LONG,
                              self.bits, self._mask_arg(), self.spread)
        if self.lexical is not None:
            gold, pred = np.asarray(gold, dtype=np.int64), np.asarray(pred, dtype=np.int64)
            wrong = np.flatnonzero(gold[1:] != pred[1:]) + 1
            if wrong.size:
                hs = np.concatenate([gold[wrong], pred[wrong]])
                ms = np.concatenate([wrong, wrong])
                sign = np.repeat([1.0, -1.0], wrong.size)
                self.lexical.add_arcs(enc.codes, enc.lexical, hs, ms, sign, w, 1.0)
                self.lexical.add_arcs(enc.codes, enc.lexical, hs, ms, sign, u, c)

    def pack(self, encoded: list[EncodedSentence]) -> "PackedSentences":
        """A batch of encoded sentences in one array, for the ``*_batch`` methods."""
        return PackedSentences.of(encoded)

    def arc_scores_batch(self, packed: "PackedSentences", weights: np.ndarray) -> np.ndarray:
        """Padded arc scores (B, N+1, N+1) float64 of a packed batch (N = longest);
        ``[b, :n+1, :n+1]`` equals :meth:`arc_scores` of sentence b exactly, the rest is 0.

        Faster than one call per sentence: templates over both words of an arc are
        scored template by template over the whole batch, so the weights each touches
        stay in cache (see :func:`~arboreal.features.hashing.arc_scores_batch_kernel`).
        """
        N = int(packed.lengths.max()) if packed.lengths.size else 0
        out = np.zeros((packed.lengths.size, N + 1, N + 1))
        if (N + 1) ** 2 > ROW_CHUNK_ARCS:
            # long sentences: one at a time, in interruptible chunks of heads (the
            # batch kernel's gain, weights shared across sentences, is small there)
            for b, enc in enumerate(packed.sentences()):
                self.arc_scores(enc, weights, out[b])
            return out
        arc_scores_batch_kernel(packed.flat, packed.starts, self.table, weights, LONG,
                                self.bits, self.spread, out)
        if self.lexical is not None:
            for b, enc in enumerate(packed.sentences()):
                self.lexical.add_scores(enc.codes, enc.lexical, weights, out[b])
        return out

    def accumulate_dense_batch(self, packed: "PackedSentences", coef: np.ndarray,
                               out: np.ndarray, scale: float = 1.0) -> None:
        """:meth:`accumulate_dense` for a packed batch: coef (B, N'+1, N'+1) padded with
        N' >= the longest sentence; ``out`` float64 (other dtypes: one sentence at a time)."""
        if out.dtype != np.float64:
            for b, enc in enumerate(packed.sentences()):
                self.accumulate(enc, coef[b, : enc.n + 1, : enc.n + 1], out, scale)
            return
        accumulate_dense_batch_kernel(packed.flat, packed.starts, self.table,
                                      np.ascontiguousarray(coef, dtype=np.float64), out,
                                      float(scale), LONG, self.bits, self._mask_arg(),
                                      self.spread)
        if self.lexical is not None:
            for b, enc in enumerate(packed.sentences()):
                self.lexical.accumulate(enc.codes, enc.lexical, coef[b], out, scale)

    def accumulate_dense(self, enc: EncodedSentence, coef: np.ndarray, out: np.ndarray,
                         scale: float = 1.0) -> None:
        """:meth:`accumulate` for dense coefficients (e.g. arc marginals), faster.

        Runs the adjoint of the scoring kernel (between-word templates summed by class),
        O(n^2 T + n^2 T_between * #distinct classes between) instead of O(n^3 T_between).
        Column 0 and the diagonal of coef are ignored. ``out`` other than float64 falls
        back to :meth:`accumulate`.
        """
        if out.dtype != np.float64:
            self.accumulate(enc, coef, out, scale)
            return
        accumulate_dense_kernel(enc.codes, self.table, np.ascontiguousarray(coef, dtype=np.float64),
                                out, float(scale), LONG, self.bits, self._mask_arg(), self.spread)
        if self.lexical is not None:
            self.lexical.accumulate(enc.codes, enc.lexical, coef, out, scale)

    def accumulate_tree(self, enc: EncodedSentence, heads: np.ndarray, out: np.ndarray,
                        scale: float = 1.0) -> None:
        """``out[f] += scale`` for every feature f of every arc (heads[m], m), m = 1..n."""
        n = enc.n
        heads = np.asarray(heads, dtype=np.int64)
        coef = np.zeros((n + 1, n + 1))
        coef[heads[1:], np.arange(1, n + 1)] = 1.0
        self.accumulate(enc, coef, out, scale)

    def arc_features(self, enc: EncodedSentence, hs: np.ndarray, ms: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Explicit features of arcs (hs[i], ms[i]) in CSR layout ``(offsets, ids, vals)``.

        offsets (len(hs)+1,) int64, ids int64, vals float64 parallel to ids: arc i's
        feature vector is ``sum_q vals[q] e_{ids[q]}`` over ``q`` in
        ``offsets[i]:offsets[i+1]`` (ids may repeat: in-between templates fire once per
        word between). vals are 1 except for real-valued lexical features. Buckets
        masked by the cut-off are dropped. O(arcs * T (+ distance * T_between)).
        """
        hs = np.asarray(hs, dtype=np.int64)
        ms = np.asarray(ms, dtype=np.int64)
        offsets, ids = _arc_features(enc.codes, self.table, hs, ms, LONG, self.bits,
                                     self._mask_arg(), self.spread)
        if self.lexical is None or not len(self.lexical) or hs.size == 0:
            return offsets, ids, np.ones(ids.size)
        lex_ids, lex_vals = self.lexical.items(enc.codes, enc.lexical, hs, ms)  # (T, A)
        T = lex_ids.shape[0]
        counts = np.diff(offsets)
        new_offsets = offsets + T * np.arange(offsets.size)
        # arc i: its arc ids, then its T lexical ids
        is_lex = np.zeros(new_offsets[-1], dtype=bool)
        lex_pos = (new_offsets[:-1, None] + counts[:, None] + np.arange(T)[None, :]).ravel()
        is_lex[lex_pos] = True
        all_ids = np.empty(new_offsets[-1], dtype=np.int64)
        all_vals = np.ones(new_offsets[-1])
        all_ids[~is_lex] = ids
        all_ids[lex_pos] = lex_ids.T.ravel()
        all_vals[lex_pos] = lex_vals.T.ravel()
        return new_offsets, all_ids, all_vals

    def lexical_graph(self, encoded: list[EncodedSentence], heads: list[np.ndarray]):
        """``(feature_ids, S)``: the similarity graph of the word-pair features on the gold
        arcs ``heads`` of ``encoded`` for Laplacian regularization
        (:meth:`~arboreal.features.lexical.LexicalFeatures.graph`); ValueError without a
        lexicon."""
        if self.lexical is None:
            raise ValueError("the Laplacian needs a lexicon (arboreal train --lexicon LEX)")
        return self.lexical.graph(encoded, heads)

    @property
    def reads_tags(self) -> bool:
        """Whether the arc or lexical templates read a tag column (UPOS, XPOS, FEATS,
        LEMMA); ``--features words`` without clusters does not."""
        lexical = self.lexical.templates if self.lexical is not None else []
        return templates_read_tags(list(self.templates) + list(lexical))

    # ------------------------------------------------------------------ persistence
    def config(self) -> dict:
        """JSON-able description (vocabularies and mask are saved separately as arrays)."""
        cfg = {"name": self.name, "templates": self.templates, "bits": self.bits,
               "cutoff": self.cutoff, "lowercase": self.lowercase,
               "share_blocks": self.share_blocks, "clusters": self.clusters is not None,
               "top_words": self.top_words}
        if self.lexical is not None:
            cfg["lexical_templates"] = list(self.lexical.templates)
            cfg["lexicon"] = self.lexical.lexicon is not None
        return cfg

    @classmethod
    def from_config(cls, cfg: dict, vocabs: dict[str, np.ndarray],
                    allowed: np.ndarray | None, clusters=None, lexicon=None) -> "FeatureSet":
        fs = cls(templates=cfg["templates"], bits=cfg["bits"], cutoff=cfg["cutoff"],
                 lowercase=cfg["lowercase"], share_blocks=cfg["share_blocks"],
                 clusters=clusters, lexicon=lexicon,
                 lexical_templates=cfg.get("lexical_templates"),
                 top_words=cfg.get("top_words", 0))
        fs.name = cfg["name"]
        fs.vocabs = {k: np.asarray(v, dtype=str) for k, v in vocabs.items()}
        fs._lookup = {}
        fs.allowed = allowed
        return fs


_EMPTY_BOOL = np.zeros(0, dtype=np.bool_)
_EMPTY_HEADS = np.zeros(0, dtype=np.int64)


@njit(cache=True)
def _n_buf(table, n):
    n_loop = 0
    for t in range(table.shape[0]):
        if table[t, 2] >= 0:
            n_loop += 1
    return 2 * (table.shape[0] + n_loop * (n + 2))


@njit(cache=True)
def _accumulate(codes, table, coef, out, scale, long_attr, bits, allowed, spread):
    n = codes.shape[1] - 3
    buf = np.empty(_n_buf(table, n), dtype=np.int64)
    G = partial_hashes(codes, table, _EMPTY_HEADS)
    use_mask = allowed.shape[0] > 0
    for h in range(n + 1):
        for m in range(1, n + 1):
            c = coef[h, m]
            if c == 0.0 or h == m:
                continue
            k = arc_ids(codes, table, G, h, m, _EMPTY_HEADS, long_attr, bits, buf, spread)
            v = scale * c
            for i in range(k):
                f = buf[i]
                if use_mask and not allowed[f]:
                    continue
                out[f] += v


@njit(cache=True)
def _accumulate_head_diff(codes, table, gold, pred, w, u, c, long_attr, bits, allowed, spread):
    n = codes.shape[1] - 3
    buf = np.empty(_n_buf(table, n), dtype=np.int64)
    G = partial_hashes(codes, table, _EMPTY_HEADS)
    use_mask = allowed.shape[0] > 0
    for m in range(1, n + 1):
        if gold[m] == pred[m]:
            continue
        for side in range(2):
            h = gold[m] if side == 0 else pred[m]
            sign = 1.0 if side == 0 else -1.0
            k = arc_ids(codes, table, G, h, m, _EMPTY_HEADS, long_attr, bits, buf, spread)
            for i in range(k):
                f = buf[i]
                if use_mask and not allowed[f]:
                    continue
                w[f] += sign
                u[f] += sign * c


@njit(cache=True)
def _arc_features(codes, table, hs, ms, long_attr, bits, allowed, spread):
    n = codes.shape[1] - 3
    buf = np.empty(_n_buf(table, n), dtype=np.int64)
    G = partial_hashes(codes, table, _EMPTY_HEADS)
    use_mask = allowed.shape[0] > 0
    offsets = np.zeros(hs.shape[0] + 1, dtype=np.int64)
    cap = max(16, hs.shape[0] * buf.shape[0] // 2)
    ids = np.empty(cap, dtype=np.int64)
    pos = 0
    for i in range(hs.shape[0]):
        k = arc_ids(codes, table, G, hs[i], ms[i], _EMPTY_HEADS, long_attr, bits, buf, spread)
        if pos + k > ids.shape[0]:
            new = np.empty(max(2 * ids.shape[0], pos + k), dtype=np.int64)
            new[:pos] = ids[:pos]
            ids = new
        for j in range(k):
            f = buf[j]
            if use_mask and not allowed[f]:
                continue
            ids[pos] = f
            pos += 1
        offsets[i + 1] = pos
    return offsets, ids[:pos].copy()


@njit(cache=True)
def _count_tree(codes, table, heads, long_attr, bits, counts, spread):
    n = codes.shape[1] - 3
    buf = np.empty(_n_buf(table, n), dtype=np.int64)
    G = partial_hashes(codes, table, _EMPTY_HEADS)
    for m in range(1, n + 1):
        h = heads[m]
        if h < 0:
            continue
        k = arc_ids(codes, table, G, h, m, _EMPTY_HEADS, long_attr, bits, buf, spread)
        for i in range(k):
            counts[buf[i]] += 1
