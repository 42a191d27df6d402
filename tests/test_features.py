"""Feature engine: kernels agree with the pure-Python reference and with each other."""
from __future__ import annotations

import numpy as np
import pytest

from arboreal.features import FeatureSet
from arboreal.features.first_order import LONG
from arboreal.features.hashing import arc_ids, group_hashes, reference_arc_ids
from arboreal.io.sentence import Sentence
from arboreal.scorers.labeler import LABEL_TEMPLATES
from arboreal.features.hashing import compile_templates
from arboreal.features.first_order import ATTR_INDEX

WORDS = ["The", "quick", "brownish", "fox", "jumped", "over", "3", "lazy", "dogs", "yesterday"]
POS = ["DET", "ADJ", "ADJ", "NOUN", "VERB", "ADP", "NUM", "ADJ", "NOUN", "ADV"]


def make_sentence(words, pos, heads=None, seed=0) -> Sentence:
    n = len(words)
    rng = np.random.default_rng(seed)
    if heads is None:  # a random tree: attach each word to an earlier-visited one
        order = rng.permutation(np.arange(1, n + 1))
        heads = np.full(n + 1, -1)
        placed = [0]
        for m in order:
            heads[m] = placed[rng.integers(len(placed))]
            placed.append(m)
    col = lambda xs: np.array(["<root>"] + list(xs), dtype=object)  # noqa: E731
    return Sentence(forms=col(words), lemmas=col(w.lower() for w in words), upos=col(pos),
                    xpos=col(p[:2] for p in pos), feats=col("_" if p != "NOUN" else "Number=Sing" for p in pos),
                    heads=np.asarray(heads, dtype=np.int32), deprels=col(["dep"] * n),
                    deps=col(["_"] * n), misc=col(["_"] * n))


@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(1)
    sents = []
    for k in range(6):
        n = int(rng.integers(1, 9))
        idx = rng.integers(0, len(WORDS), n)
        sents.append(make_sentence([WORDS[i] for i in idx], [POS[i] for i in idx], seed=k))
    return sents


# offsets of two words (clamped to the sentence boundary) and a word-pair family
WIDE = ["h-2.pos h-1.pos h.pos m.pos", "h.pos m.pos m+1.pos m+2.pos", "h.pos m.pos m+2.word",
        "h.word m.word", "h.word h.pos m.word", "h.pos b.pos m.pos", "h+2.word", ""]


@pytest.mark.parametrize("name", ["mcdonald", "default", "wide"])
def test_arc_scores_match_reference_dot_product(corpus, name):
    fs = FeatureSet(WIDE if name == "wide" else name, bits=14).fit(corpus[:4])
    w = np.random.default_rng(2).standard_normal(fs.dim)
    for enc in fs.encode(corpus):
        scores = fs.arc_scores(enc, w)
        n = enc.n
        for h in range(n + 1):
            for m in range(1, n + 1):
                if h == m:
                    continue
                ids = reference_arc_ids(enc.codes, fs.table, h, m, np.zeros(0, int), LONG, fs.bits,
                                        True)
                assert ids, "every arc has features"
                assert scores[h, m] == pytest.approx(sum(w[i] for i in ids), abs=1e-9)
        assert (scores[:, 0] == 0).all() and (np.diag(scores) == 0).all()


def test_unknown_words_get_unk_code_and_prefix_templates_need_long_words(corpus):
    fs = FeatureSet("mcdonald", bits=14).fit(corpus)
    enc = fs.encode([make_sentence(["zzzz"], ["NOUN"])])[0]
    assert enc.codes[0, 2] == 3  # UNK
    # "h.p5" templates fire only for words longer than 5 characters
    short = fs.encode([make_sentence(["dogs", "fox"], ["NOUN", "NOUN"])])[0]
    long_ = fs.encode([make_sentence(["yesterday", "fox"], ["ADV", "NOUN"])])[0]
    k_short = len(reference_arc_ids(short.codes, fs.table, 1, 2, np.zeros(0, int), LONG, fs.bits))
    k_long = len(reference_arc_ids(long_.codes, fs.table, 1, 2, np.zeros(0, int), LONG, fs.bits))
    assert k_long > k_short


@pytest.mark.parametrize("name", ["mcdonald", "default"])
def test_accumulate_agrees_with_arc_scores(corpus, name):
    fs = FeatureSet(name, bits=14).fit(corpus)
    rng = np.random.default_rng(3)
    w = rng.standard_normal(fs.dim)
    for enc, s in zip(fs.encode(corpus), corpus):
        n = enc.n
        coef = rng.standard_normal((n + 1, n + 1)) * (rng.random((n + 1, n + 1)) < 0.5)
        out = np.zeros(fs.dim)
        fs.accumulate(enc, coef, out, scale=2.0)
        scores = fs.arc_scores(enc, w)
        mask = ~np.eye(n + 1, dtype=bool)
        mask[:, 0] = False
        assert w @ out == pytest.approx(2.0 * (coef * scores)[mask].sum(), rel=1e-9, abs=1e-9)
        tree = np.zeros(fs.dim)
        fs.accumulate_tree(enc, s.heads, tree, scale=-1.0)
        assert w @ tree == pytest.approx(-sum(scores[s.heads[m], m] for m in range(1, n + 1)))
        # explicit per-arc ids agree with the reference (as multisets)
        hs, ms = np.nonzero(mask)
        offsets, ids, vals = fs.arc_features(enc, hs, ms)
        assert (vals == 1.0).all()
        for i, (h, m) in enumerate(zip(hs, ms)):
            ref = reference_arc_ids(enc.codes, fs.table, h, m, np.zeros(0, int), LONG, fs.bits,
                                    True)
            assert sorted(ids[offsets[i]:offsets[i + 1]].tolist()) == sorted(ref)


def test_tree_anchored_templates_match_reference(corpus):
    table = compile_templates(LABEL_TEMPLATES, ATTR_INDEX)
    fs = FeatureSet("default", bits=14).fit(corpus)
    for enc, s in zip(fs.encode(corpus), corpus):
        heads = s.heads.astype(np.int64)
        G = group_hashes(enc.codes, table, heads)
        buf = np.empty(2 * len(LABEL_TEMPLATES) * (enc.n + 3), dtype=np.int64)
        for m in range(1, enc.n + 1):
            k = arc_ids(enc.codes, table, G, heads[m], m, heads, LONG, 12, buf)
            ref = reference_arc_ids(enc.codes, table, int(heads[m]), m, heads, LONG, 12)
            assert buf[:k].tolist() == ref


def test_feature_cutoff_masks_rare_features(corpus):
    fs = FeatureSet("mcdonald", bits=14, cutoff=2).fit(corpus)
    assert fs.allowed is not None and 0 < fs.allowed.sum() < fs.dim
    enc = fs.encode(corpus)
    out = np.zeros(fs.dim)
    for e, s in zip(enc, corpus):
        fs.accumulate_tree(e, s.heads, out)
    assert (out[~fs.allowed] == 0).all()
    assert (out[fs.allowed] >= 2).all()


def test_encode_is_deterministic_and_compact(corpus):
    fs = FeatureSet("default", bits=14).fit(corpus)
    a, b = fs.encode(corpus), fs.encode(corpus)
    for x, y in zip(a, b):
        assert x.codes.dtype == np.int32 and (x.codes == y.codes).all()
        assert x.codes.shape[1] == x.n + 3


def test_bad_options():
    with pytest.raises(ValueError):
        FeatureSet("nope")
    with pytest.raises(ValueError):
        FeatureSet(["h.word q.pos"])
    with pytest.raises(RuntimeError):
        FeatureSet("mcdonald").encode([])


def test_features_rotate_their_slots_inside_their_blocks(corpus):
    rotated = FeatureSet("default", bits=14, share_blocks=False).fit(corpus)
    assert rotated.spread
    enc = rotated.encode(corpus[:1])[0]
    plain = reference_arc_ids(enc.codes, rotated.table, 0, 1, np.zeros(0, int), LONG, 14, False)
    spread = reference_arc_ids(enc.codes, rotated.table, 0, 1, np.zeros(0, int), LONG, 14, True)
    # same blocks, but the plain slot is no longer always the first of its block
    assert [i // 16 for i in plain] == [i // 16 for i in spread]
    assert all(i % 16 == 0 for i in plain[::2]) and any(i % 16 for i in spread[::2])
    w = np.random.default_rng(0).standard_normal(rotated.dim)
    assert rotated.arc_scores(enc, w)[0, 1] == pytest.approx(sum(w[i] for i in spread), abs=1e-9)


def test_word_pair_templates_share_one_block_per_family(corpus):
    shared = FeatureSet("default", bits=16).fit(corpus)
    assert shared.share_blocks and shared.config()["share_blocks"] is True
    own = FeatureSet("default", bits=16, share_blocks=False).fit(corpus)
    enc = shared.encode(corpus[:1])[0]
    h, m = 1, 2
    T = shared.templates
    family = [t for t, spec in enumerate(T) if "h.word" in spec.split() and "m.word" in spec.split()]
    assert len(family) >= 4
    # one id pair per template (none of them iterates): plain slot, then (dir, dist) slot
    ids_shared = reference_arc_ids(enc.codes, shared.table, h, m, np.zeros(0, int), LONG, 16, True)
    ids_own = reference_arc_ids(enc.codes, own.table, h, m, np.zeros(0, int), LONG, 16, True)
    hlong, mlong = enc.codes[LONG, h + 1] != 0, enc.codes[LONG, m + 1] != 0
    fired = [t for t, (cond, loop) in enumerate(shared.table[:, 1:3].tolist()) if loop < 0
             and (cond == 0 or (cond & 1 and hlong) or (cond & 2 and mlong))]
    pos = {t: i for i, t in enumerate(fired)}
    blocks_shared = {ids_shared[2 * pos[t]] // 16 for t in family}
    blocks_own = {ids_own[2 * pos[t]] // 16 for t in family}
    assert len(blocks_shared) == 1 and len(blocks_own) == len(family)
    # rotations stay per template: the plain slots of the family are not all equal
    assert len({ids_shared[2 * pos[t]] for t in family}) > 1
    # templates outside any family keep their own blocks
    lone = T.index("h.pos m.pos")
    assert ids_shared[2 * pos[lone]] == ids_own[2 * pos[lone]]
    # the same family for the same words wherever they stand, another for other words
    other = reference_arc_ids(enc.codes, shared.table, 2, 1, np.zeros(0, int), LONG, 16, True)
    assert other[2 * pos[family[0]]] // 16 != ids_shared[2 * pos[family[0]]] // 16


def test_weight_vectors_are_cache_line_aligned():
    from arboreal._arrays import aligned_zeros, as_aligned

    for dtype in (np.float32, np.float64):
        w = aligned_zeros(1000, dtype)
        assert w.ctypes.data % 64 == 0 and w.dtype == dtype and w.shape == (1000,)
        assert not w.any()
        assert as_aligned(w, dtype) is w                  # no copy when already aligned
    v = np.arange(1, 11, dtype=np.float64)[1:]            # misaligned, other dtype
    a = as_aligned(v)
    assert a.ctypes.data % 64 == 0 and a.dtype == np.float32
    assert np.array_equal(a, v.astype(np.float32))


@pytest.mark.parametrize("cutoff", [0, 1])
def test_perceptron_update_kernel_equals_two_accumulates(corpus, cutoff):
    from arboreal.learn.perceptron import update_coef

    fs = FeatureSet("default", bits=14, cutoff=cutoff).fit(corpus)
    rng = np.random.default_rng(5)
    for enc, s in zip(fs.encode(corpus), corpus):
        gold = s.heads.astype(np.int64)
        pred = gold.copy()
        pred[1:] = rng.integers(0, enc.n + 1, enc.n)
        pred[1:][pred[1:] == np.arange(1, enc.n + 1)] = 0   # no self-loops
        w1, u1 = np.zeros(fs.dim), np.zeros(fs.dim)
        w2, u2 = np.zeros(fs.dim), np.zeros(fs.dim)
        fs.accumulate_head_diff(enc, gold, pred, w1, u1, 7.0)
        coef = update_coef(enc.n, gold, pred)
        if coef is not None:
            fs.accumulate(enc, coef, w2, 1.0)
            fs.accumulate(enc, coef, u2, 7.0)
        assert np.array_equal(w1, w2) and np.array_equal(u1, u2)
        assert w1.any() == (coef is not None)


@pytest.mark.parametrize("cutoff", [0, 2])
@pytest.mark.parametrize("name", ["mcdonald", "default", "wide"])
def test_batch_kernels_equal_the_per_sentence_ones(corpus, name, cutoff):
    """A packed batch (sentences of different lengths, one without words) is scored to
    the bit as sentence by sentence, and its accumulate equals the per-sentence one."""
    fs = FeatureSet(WIDE if name == "wide" else name, bits=14, cutoff=cutoff).fit(corpus)
    empty = make_sentence([], [])
    sents = list(corpus) + [empty] + list(corpus[:2])
    encs = fs.encode(sents)
    packed = fs.pack(encs)
    rng = np.random.default_rng(5)
    w = rng.standard_normal(fs.dim).astype(np.float32)
    S = fs.arc_scores_batch(packed, w)
    N = max(e.n for e in encs)
    assert S.shape == (len(encs), N + 1, N + 1)
    coef = np.zeros_like(S)
    expected = np.zeros(fs.dim)
    for b, enc in enumerate(encs):
        n = enc.n
        np.testing.assert_array_equal(S[b, : n + 1, : n + 1], fs.arc_scores(enc, w))
        assert not S[b, n + 1:].any() and not S[b, :, n + 1:].any()
        coef[b, : n + 1, : n + 1] = rng.standard_normal((n + 1, n + 1))
        fs.accumulate_dense(enc, coef[b, : n + 1, : n + 1], expected, 0.5)
    got = np.zeros(fs.dim)
    fs.accumulate_dense_batch(packed, coef, got, 0.5)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    assert got.any()


@pytest.mark.parametrize("name", ["mcdonald", "default", "wide"])
def test_long_sentences_are_scored_in_chunks_of_heads_to_the_bit(corpus, name, monkeypatch):
    """Scoring in chunks of heads (what long sentences get, so Ctrl-C is honoured between
    kernel calls) gives the whole kernel's scores to the bit, per sentence and batched."""
    import arboreal.features.first_order as first_order
    from arboreal.features.hashing import arc_scores_kernel

    fs = FeatureSet(WIDE if name == "wide" else name, bits=14).fit(corpus)
    rng = np.random.default_rng(3)
    idx = rng.integers(0, len(WORDS), 40)
    long = make_sentence([WORDS[i] for i in idx], [POS[i] for i in idx], seed=9)
    encs = fs.encode(list(corpus) + [long])
    w = rng.standard_normal(fs.dim).astype(np.float32)
    whole = [arc_scores_kernel(e.codes, fs.table, w, LONG, fs.bits, fs.spread) for e in encs]
    batch_kernel = fs.arc_scores_batch(fs.pack(encs), w)
    for chunk in (1, 7, 41, 100):      # arcs per call: from one head a call to several
        monkeypatch.setattr(first_order, "ROW_CHUNK_ARCS", chunk)
        chunked = fs.arc_scores_batch(fs.pack(encs), w)
        for b, enc in enumerate(encs):
            np.testing.assert_array_equal(fs.arc_scores(enc, w), whole[b])
            np.testing.assert_array_equal(chunked[b], batch_kernel[b])


def test_prefetch_hints_change_nothing_and_never_fault():
    """The kernels prefetch weights they are about to read or update: a hint must not
    change any value, and must be safe for any index (hashes are not range-checked
    before their prefetch) and for arrays of any layout."""
    from numba import njit

    from arboreal._prefetch import prefetch, prefetch_write

    @njit
    def hinted_sum(a, b, far):
        s = 0.0
        for i in range(a.size):
            prefetch(a, i + far)          # far beyond the end of the array
            prefetch_write(a, -far)       # before its start
            prefetch(b, i)                # b strided: no flat address, no hint
            s += a[i] + b[i]
        return s

    a = np.arange(1000, dtype=np.float64)
    b = np.arange(4000, dtype=np.float32)[::4]
    assert hinted_sum(a, b, 1 << 40) == float(a.sum() + b.sum())
    W = np.arange(12.0).reshape(3, 4)

    @njit
    def hinted_rows(W, rows):
        s = 0.0
        for r in rows:
            prefetch(W, r * W.shape[1])
        for r in rows:
            s += W[r].sum()
        return s

    assert hinted_rows(W, np.array([2, 0, 2])) == float(W[2].sum() * 2 + W[0].sum())
