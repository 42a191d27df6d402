"""Lexical arc features (word pair, PMI, distance; Wang et al. 2006) in the feature set,
the learners and the model file."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from arboreal.features import FeatureSet
from arboreal.features.lexical import (DEFAULT_LEXICAL_TEMPLATES, DIST_CAP, DIST_SCALE,
                                       PMI_BIN, LexicalFeatures)
from arboreal.features.first_order import ATTR_INDEX
from arboreal.features.lexicon import build_lexicon, count_cooccurrences
from arboreal.io.conllu import read_conllu
from arboreal.learn import TrainingData

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "en_ewt-sample-train.conllu"
TEST = SAMPLE.with_name("en_ewt-sample-test.conllu")


@pytest.fixture(scope="module")
def sents():
    return [s for s in read_conllu(SAMPLE) if 2 <= len(s) <= 25][:40]


@pytest.fixture(scope="module")
def lexicon(sents):
    text = "\n".join(" ".join(s.forms[1:].tolist()) for s in read_conllu(SAMPLE)).encode()
    counts = count_cooccurrences([io.BytesIO(text)], "tokenized", 5)
    return build_lexicon(counts, 1, 1, neighbours=5, similar_words=500)


@pytest.fixture(scope="module")
def fs(sents, lexicon):
    return FeatureSet("words", bits=16, lexicon=lexicon).fit(sents)


def _arcs(n):
    hs, ms = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    keep = (ms > 0) & (hs != ms)
    return hs[keep], ms[keep]


def test_scores_features_and_accumulate_agree(fs, sents):
    rng = np.random.default_rng(0)
    w = rng.normal(size=fs.dim).astype(np.float32)
    encoded = fs.encode(sents)
    batch = fs.arc_scores_batch(fs.pack(encoded[:6]), w)
    for b, enc in enumerate(encoded[:6]):
        n = enc.n
        scores = fs.arc_scores(enc, w)
        assert np.allclose(batch[b, : n + 1, : n + 1], scores)
        hs, ms = _arcs(n)
        offsets, ids, vals = fs.arc_features(enc, hs, ms)
        assert (vals != 1.0).any()          # real-valued features are there
        by_arc = np.add.reduceat(w[ids].astype(np.float64) * vals, offsets[:-1])
        assert np.allclose(by_arc, scores[hs, ms], atol=1e-4)
        # accumulate is the adjoint of scoring: <accumulate(coef), w> = sum coef * scores
        coef = rng.normal(size=(n + 1, n + 1))
        out = np.zeros(fs.dim)
        fs.accumulate(enc, coef, out)
        dense = np.zeros(fs.dim)
        fs.accumulate_dense(enc, coef, dense)
        assert np.allclose(out, dense)
        mask = np.zeros_like(coef, dtype=bool)
        mask[hs, ms] = True
        assert out @ w == pytest.approx((coef * scores)[mask].sum(), rel=1e-6, abs=1e-6)


def test_lexical_values_are_the_documented_ones(lexicon, sents):
    lf = LexicalFeatures(["=pmi", "=dist", "=dist2", "pmi"], lexicon, 16, ATTR_INDEX)
    s = sents[0]
    fs = FeatureSet("words", bits=16, lexicon=lexicon).fit(sents)
    enc = fs.encode([s])[0]
    hs, ms = np.array([0, 1, 2, 3]), np.array([2, 3, 1, 1])
    ids, vals = lf.items(enc.codes, enc.lexical, hs, ms)
    for a, (h, m) in enumerate(zip(hs, ms)):
        pmi = lexicon.pmi(s.forms[h], s.forms[m]) if h > 0 else None
        assert vals[0, a] == pytest.approx(0.0 if pmi is None else pmi, abs=1e-6)
        assert vals[1, a] == pytest.approx(min(abs(h - m), DIST_CAP) / DIST_SCALE)
        assert vals[2, a] == pytest.approx((min(abs(h - m), DIST_CAP) / DIST_SCALE) ** 2)
    # long arcs are capped
    far = lf.items(enc.codes, enc.lexical, np.array([0]), np.array([len(s) - 1]))[1]
    assert far[2, 0] <= (DIST_CAP / DIST_SCALE) ** 2
    # the PMI bin feature: two arcs with known PMI share its id exactly when their bins
    # agree (up to a hash collision, improbable in 2^16 slots for a handful of bins)
    known = [a for a in range(4) if vals[0, a] != 0.0]
    bins = {a: int(np.floor(vals[0, a] / PMI_BIN)) for a in known}
    for a in known:
        for b in known:
            assert (ids[3, a] == ids[3, b]) == (bins[a] == bins[b])


def test_pair_is_unordered_and_works_without_lexicon(sents):
    fs = FeatureSet("words", bits=16, lexical_templates=["pair"]).fit(sents)
    enc = fs.encode(sents[:1])[0]
    offsets, ids, _ = fs.arc_features(enc, np.array([1, 2]), np.array([2, 1]))
    assert ids[offsets[1] - 1] == ids[offsets[2] - 1]      # {h, m} either way


@pytest.mark.parametrize("template, problem", [
    ("pmi", "needs a lexicon"), ("=pmi", "needs a lexicon"), ("word", "bad slot"),
    ("=dist =dist2", "at most one value"), ("dir dir", "appears twice"), ("x.word", "bad slot"),
    ("h+1.pos", "bad slot"), ("h.nonsense", "bad slot")])
def test_bad_templates_are_refused(sents, template, problem):
    with pytest.raises(ValueError, match=problem):
        FeatureSet("words", bits=16, lexical_templates=[template])


def test_learners_update_real_valued_features(fs, sents):
    """The perceptron's and MIRA's updates add phi(gold) - phi(pred) including the
    real-valued lexical features: afterwards the gold tree outscores the prediction."""
    from arboreal.learn import get_learner

    encoded = fs.encode(sents)
    data = TrainingData(fs, encoded, [s.heads.astype(np.int64) for s in sents])
    for name in ("perceptron", "mira"):
        learner = get_learner(name)
        update = learner.make_update(data)
        w = np.zeros(fs.dim, dtype=np.float32)
        u = np.zeros(fs.dim, dtype=np.float32)
        w[np.random.default_rng(1).integers(0, fs.dim, 300)] = 0.5
        before = w.copy()
        i = 2
        gold = data.heads[i]
        pred = data.decode(i, w)
        assert not np.array_equal(gold, pred)
        update(i, w, u, 1.0)
        delta = (w - before).astype(np.float64)
        diff = np.zeros(fs.dim)
        fs.accumulate_tree(encoded[i], gold, diff, 1.0)
        fs.accumulate_tree(encoded[i], pred, diff, -1.0)
        # the update is a positive multiple of the feature difference
        scale = delta @ diff / (diff @ diff)
        assert scale > 0
        assert np.allclose(delta, scale * diff, atol=1e-5)


def test_graph_links_similar_pairs(fs, sents, lexicon):
    encoded = fs.encode(sents)
    heads = [s.heads.astype(np.int64) for s in sents]
    ids, S = fs.lexical_graph(encoded, heads)
    assert S.shape == (ids.size, ids.size)
    assert (S != S.T).nnz == 0 and S.diagonal().max() == 0 and S.data.min() > 0
    assert S.data.max() <= 1.0
    # one gold pair (a, b) and a neighbour a' of a: the pair features are linked with
    # weight sqrt(sim(a, a')) (times sim(b, b) = 1), unless hashing merged ids
    lf = fs.lexical
    t = lf.templates.index("pair")
    for s, enc, h in zip(sents, encoded, heads):
        for m in range(1, len(s)):
            a = lexicon.index(s.forms[m])
            nb, sims = lexicon.neighbour_ids(a)
            if h[m] == 0 or nb.size == 0:
                continue
            b_key = enc.lexical.keys[h[m]]
            own = lf._hash(lf._parsed[t], [np.array([min(a, b_key)]), np.array([max(a, b_key)])])
            other = lf._hash(lf._parsed[t], [np.array([min(nb[0], b_key)]),
                                             np.array([max(nb[0], b_key)])])
            i, j = np.searchsorted(ids, own[0]), np.searchsorted(ids, other[0])
            assert ids[i] == own[0] and ids[j] == other[0]
            assert S[i, j] >= np.sqrt(sims[0]) - 1e-6
            return
    pytest.fail("no gold pair with a neighbour in the sample")


def test_model_with_lexicon_round_trips(tmp_path, sents, lexicon):
    from arboreal.models import Parser, load_model

    model = Parser.train(sents, epochs=2, features="words", hash_bits=16, lexicon=lexicon)
    path = tmp_path / "m.npz"
    model.save(path)
    again = load_model(path)
    test = read_conllu(TEST)[:20]
    h1, _ = model.predict(test)
    h2, _ = again.predict(test)
    assert all(np.array_equal(a, b) for a, b in zip(h1, h2))
    assert again.features.lexical.templates == DEFAULT_LEXICAL_TEMPLATES
    assert len(again.features.lexical.lexicon) == len(lexicon)
    # a model file whose lexical templates were tampered with is refused cleanly
    from arboreal.errors import ArborealError

    from arboreal.io.model_file import load_model_file, save_model_file

    meta, arrays = load_model_file(path)
    meta["features"]["lexical_templates"] = ["pmi nonsense"]
    bad = tmp_path / "bad.npz"
    save_model_file(bad, meta, {k: np.asarray(arrays[k]) for k in arrays})
    with pytest.raises(ArborealError, match="lexical_templates"):
        load_model(bad)
    # and one whose lexicon arrays are missing or whose flag is not a boolean
    meta, arrays = load_model_file(path)
    save_model_file(bad, meta, {k: np.asarray(arrays[k]) for k in arrays
                                if k != "lexicon_pmi"})
    with pytest.raises(ArborealError, match="lexicon_pmi"):
        load_model(bad)
    meta["features"]["lexicon"] = "yes"
    save_model_file(bad, meta, {k: np.asarray(arrays[k]) for k in arrays})
    with pytest.raises(ArborealError, match="features.lexicon"):
        load_model(bad)


def test_train_cli_with_lexicon(tmp_path, lexicon):
    from arboreal.cli import main

    lex = tmp_path / "lex.npz"
    lexicon.save(lex)
    out = tmp_path / "m.npz"
    assert main(["train", str(SAMPLE), "-o", str(out), "--no-tagger", "--no-tokenizer",
                 "--features", "words", "--lexicon", str(lex), "--epochs", "1",
                 "--hash-bits", "16", "--quiet"]) == 0
    assert out.exists()
    assert main(["train", str(SAMPLE), "-o", str(tmp_path / "x.npz"), "--learner",
                 "local-margin", "--learner-option", "laplacian=1", "--no-tagger",
                 "--quiet"]) == 2


def test_laplacian_penalty_value_and_gradient():
    import scipy.sparse as sp

    from arboreal.learn.laplacian import LaplacianGraph

    rng = np.random.default_rng(0)
    K = 12
    A = sp.random(K, K, density=0.3, random_state=1, format="csr")
    S = A.maximum(A.T).tolil()
    S.setdiag(0.0)
    S = S.tocsr()
    ids = np.sort(rng.choice(1000, K, replace=False))
    graph = LaplacianGraph(ids, S, 1000)
    w = rng.normal(size=1000)
    value, grad = graph.penalty(w, 0.7)
    t = w[ids]
    Sd = S.toarray()
    ref = 0.7 * 0.25 * sum(Sd[i, j] * (t[i] - t[j]) ** 2 for i in range(K) for j in range(K))
    assert value == pytest.approx(ref, rel=1e-12)
    for k in range(K):                      # finite differences, coordinate by coordinate
        e = np.zeros(1000)
        e[ids[k]] = 1e-6
        fd = (graph.penalty(w + e, 0.7)[0] - graph.penalty(w - e, 0.7)[0]) / 2e-6
        assert grad[k] == pytest.approx(fd, rel=1e-5, abs=1e-8)


def test_loglinear_laplacian_gives_unseen_similar_pairs_weights(fs, sents):
    from arboreal.learn import get_learner
    from arboreal.learn.laplacian import lexical_graph

    encoded = fs.encode(sents)
    data = TrainingData(fs, encoded, [s.heads.astype(np.int64) for s in sents])
    graph = lexical_graph(data)
    fired = np.zeros(fs.dim)
    for enc in encoded:                      # every feature some training arc fires
        n = enc.n
        fs.accumulate(enc, np.ones((n + 1, n + 1)), fired, 1.0)
    unseen = graph.ids[fired[graph.ids] == 0]
    assert unseen.size > 0
    plain = get_learner("loglinear", C=1.0).fit(data, 15)
    # converged (the check below holds at the optimum)
    tied = get_learner("loglinear", C=1.0, laplacian=1.0).fit(data, 500)
    assert np.all(plain[unseen] == 0)
    assert np.count_nonzero(tied[unseen]) > 0.5 * unseen.size
    # at the optimum an unseen pair's weight is lambda * sum_j S_uj w_j / (1 + lambda D_u)
    index = {f: k for k, f in enumerate(graph.ids.tolist())}
    for f in unseen[:200].tolist():
        row = graph.S.getrow(index[f])
        expect = float(row.data @ tied[graph.ids[row.indices]]) / (1.0 + row.data.sum())
        assert tied[f] == pytest.approx(expect, abs=1e-4)


def test_a_model_of_forms_only_parses_untagged_input(sents):
    """--features words reads no tag column: untagged input needs no tagger; a model
    whose templates read UPOS still refuses it."""
    from arboreal.io.text import iter_tokenized
    from arboreal.models import Parser
    from arboreal.models.pipeline import UntaggedInputError, complete_tags

    words = Parser.train(sents, epochs=1, features="words", hash_bits=16)
    tagged = Parser.train(sents, epochs=1, hash_bits=16)
    assert not words.reads_tags and tagged.reads_tags
    # a lexical template over UPOS makes the feature set read tags
    assert FeatureSet("words", bits=16, lexical_templates=["pair h.pos"]).reads_tags
    untagged = list(iter_tokenized(io.BytesIO(b"The cat sat on the mat .\n")))
    assert complete_tags(words, untagged) == untagged
    heads, _ = words.predict(untagged)
    assert len(heads[0]) == 8
    with pytest.raises(UntaggedInputError):
        complete_tags(tagged, untagged)
