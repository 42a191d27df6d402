"""Partition function and part marginals of the siblings + grandparents factorization
against brute force over every projective tree, and as the gradient of log Z."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arboreal.inference.higher_order import PartIndex, grand_sibling_marginals, prune_arcs
from test_higher_order_decoders import part_indices, random_tensors, reference_scores

SETTINGS = dict(max_examples=15, deadline=None, derandomize=True)
FACTORIZATIONS = {"sib": ("arc", "sib"), "grand": ("arc", "grand"),
                  "sib+grand": ("arc", "sib", "grand"), "model1": ("arc", "sib", "grand", "gsib")}


def brute_force(n, single_root, tensors, allowed=None):
    """(log Z, marginals by kind) by enumerating every projective tree."""
    trees, scores = reference_scores(n, single_root, tensors)
    _, idx = part_indices(n, single_root, False)
    keep = np.ones(len(trees), dtype=bool)
    if allowed is not None:
        keep = allowed[trees[:, 1:], np.arange(1, n + 1)].all(axis=1)
    top = scores[keep].max()
    p = np.where(keep, np.exp(scores - top), 0.0)
    logz = top + np.log(p.sum())
    p /= p.sum()
    mu = {}
    for k, t in tensors.items():
        rows = idx[k]
        flat = np.bincount(rows.ravel(), weights=np.repeat(p, rows.shape[1]),
                           minlength=t.size + 1)[: t.size]
        mu[k] = flat.reshape(t.shape)
    return logz, mu


def call(tensors, **kw):
    return grand_sibling_marginals(tensors["arc"], tensors.get("sib"), tensors.get("grand"),
                                   tensors.get("gsib"), **kw)


@pytest.mark.parametrize("name", list(FACTORIZATIONS))
@settings(**SETTINGS)
@given(n=st.integers(1, 6), single_root=st.booleans(), seed=st.integers(0, 2 ** 31))
def test_marginals_match_brute_force(name, n, single_root, seed):
    t = random_tensors(np.random.default_rng(seed), n, FACTORIZATIONS[name], scale=2.0)
    logz, mu = call(t, single_root=single_root)
    ref_logz, ref_mu = brute_force(n, single_root, t)
    assert logz == pytest.approx(ref_logz, abs=1e-9)
    for k in t:
        np.testing.assert_allclose(mu[k], ref_mu[k], atol=1e-9)
    # every word has exactly one head
    np.testing.assert_allclose(mu["arc"][:, 1:].sum(axis=0), 1.0, atol=1e-9)


@pytest.mark.parametrize("single_root", [True, False])
def test_pruned_compact_index_matches_brute_force(single_root):
    """Compact (pruned) score arrays: the same log Z and marginals as brute force over
    the trees that use only kept arcs."""
    rng = np.random.default_rng(11 + single_root)
    n = 6
    for _ in range(3):
        t = random_tensors(rng, n, FACTORIZATIONS["model1"], scale=1.5)
        allowed = prune_arcs(rng.random((n + 1, n + 1)), threshold=0.0, max_heads=3,
                             single_root=single_root)
        index = PartIndex.compact(allowed)
        compact = {"arc": t["arc"]}
        # gather each dense tensor into the compact layout, entry by entry
        for k in ("sib", "grand", "gsib"):
            compact[k] = np.zeros(getattr(index, "n_" + k))
        N = n + 1
        sl, W = index.slot, index.width
        for h in range(N):
            for m in range(1, N):
                if m == h or sl[h, m] < 0:
                    continue
                for x in range(N):
                    if sl[h, x] >= 0:
                        compact["sib"][index.sib_off[h] + sl[h, x] * W[h] + sl[h, m]] = \
                            t["sib"][h, x, m]
                for g in range(N):
                    a = index.arcid[g, h]
                    if a < 0:
                        continue
                    compact["grand"][index.grand_off[a] + sl[h, m]] = t["grand"][g, h, m]
                    for x in range(N):
                        if sl[h, x] >= 0:
                            compact["gsib"][index.gsib_off[a] + sl[h, x] * W[h] + sl[h, m]] = \
                                t["gsib"][g, h, x, m]
        logz, mu = call(compact, single_root=single_root, index=index)
        ref_logz, ref_mu = brute_force(n, single_root, t, allowed)
        assert logz == pytest.approx(ref_logz, abs=1e-9)
        np.testing.assert_allclose(mu["arc"], ref_mu["arc"], atol=1e-9)
        for g in range(N):
            for h in range(N):
                a = index.arcid[g, h]
                for m in range(N):
                    if index.slot[h, m] < 0 or m == h:
                        continue
                    if a >= 0:
                        assert mu["grand"][index.grand_off[a] + index.slot[h, m]] == \
                            pytest.approx(ref_mu["grand"][g, h, m], abs=1e-9)
                    for x in range(N):
                        if index.slot[h, x] < 0:
                            continue
                        j = index.slot[h, x] * index.width[h] + index.slot[h, m]
                        if g == 0:
                            assert mu["sib"][index.sib_off[h] + j] == \
                                pytest.approx(ref_mu["sib"][h, x, m], abs=1e-9)
                        if a >= 0:
                            assert mu["gsib"][index.gsib_off[a] + j] == \
                                pytest.approx(ref_mu["gsib"][g, h, x, m], abs=1e-9)


def test_marginals_are_the_gradient_of_log_z():
    rng = np.random.default_rng(5)
    n = 5
    t = random_tensors(rng, n, FACTORIZATIONS["model1"])
    logz, mu = call(t, single_root=True)
    eps = 1e-6
    for k in t:
        for _ in range(6):
            j = tuple(rng.integers(0, n + 1, t[k].ndim))
            bumped = {q: v.copy() for q, v in t.items()}
            bumped[k][j] += eps
            lo = {q: v.copy() for q, v in t.items()}
            lo[k][j] -= eps
            grad = (call(bumped, single_root=True)[0] - call(lo, single_root=True)[0]) / (2 * eps)
            assert mu[k][j] == pytest.approx(grad, abs=1e-6)


@pytest.mark.parametrize("single_root", [True, False])
def test_large_scores_stay_finite(single_root):
    rng = np.random.default_rng(2)
    n = 12
    t = random_tensors(rng, n, FACTORIZATIONS["model1"], scale=1e4)
    logz, mu = call(t, single_root=single_root)
    assert np.isfinite(logz)
    for k in t:
        assert np.isfinite(mu[k]).all()
    np.testing.assert_allclose(mu["arc"][:, 1:].sum(axis=0), 1.0, atol=1e-9)


def test_no_tree_allowed_is_an_error():
    t = random_tensors(np.random.default_rng(0), 3, FACTORIZATIONS["sib"])
    allowed = np.zeros((4, 4), dtype=bool)
    allowed[0, 1] = allowed[1, 2] = True   # word 3 has no allowed head
    with pytest.raises(ValueError, match="no projective tree"):
        call(t, allowed=allowed)


# ---------------------------------------------------------------- learning at order 2
@pytest.fixture(scope="module")
def small_model():
    """Features and parts of short sample sentences (every arc kept)."""
    from pathlib import Path

    from arboreal.features.first_order import FeatureSet
    from arboreal.features.higher_order import HigherOrderFeatures
    from arboreal.io.conllu import read_conllu
    from arboreal.models.higher_order import HigherOrder

    sample = Path(__file__).resolve().parents[1] / "data" / "sample"
    train = [s for s in read_conllu(sample / "en_ewt-sample-train.conllu") if 3 <= len(s) <= 9]
    fs = FeatureSet("mcdonald", bits=14).fit(train)
    parts = HigherOrderFeatures(("sib", "grand", "gsib"), 14)
    ho = HigherOrder(fs, parts, np.zeros(fs.dim), memory_budget=None)
    return train, fs.encode(train), ho


def test_part_features_adjoint(small_model):
    """accumulate_parts is the adjoint of part_scores: c . scores(w) == w . acc(c)."""
    train, encs, ho = small_model
    rng = np.random.default_rng(0)
    for enc in encs[:5]:
        index = PartIndex.compact(np.ones((enc.n + 1,) * 2, dtype=bool))
        w = rng.normal(size=ho.features.dim)
        scores = ho.parts.part_scores(enc.codes, index, w)
        coef = {k: rng.normal(size=v.size) for k, v in scores.items() if v is not None}
        acc = np.zeros(ho.features.dim)
        ho.parts.accumulate_parts(enc.codes, index, coef, acc)
        lhs = sum(float(coef[k] @ scores[k]) for k in coef)
        assert lhs == pytest.approx(float(w @ acc), rel=1e-9, abs=1e-9)


def test_expected_features_are_the_gradient_of_log_z(small_model):
    """part_expectation: d/dt log Z(w + t v) = v . E[F] (scoring, inside-outside and
    the adjoints together)."""
    from arboreal.learn import TrainingData, part_expectation

    train, encs, ho = small_model
    encs = encs[:4]
    indexes = [PartIndex.compact(np.ones((e.n + 1,) * 2, dtype=bool)) for e in encs]
    data = TrainingData(ho.features, encs, [s.heads for s in train[:4]], parts=ho.parts,
                        decoder=lambda i, w: None, part_index=indexes.__getitem__)
    rng = np.random.default_rng(1)
    dim = ho.features.dim
    for i in range(len(encs)):
        w = rng.normal(0, 0.3, dim)
        v = rng.normal(0, 1.0, dim)
        expected = np.zeros(dim)
        logz = part_expectation(data, i, w, expected, 1.0)
        eps = 1e-5
        hi = part_expectation(data, i, w + eps * v, np.zeros(dim), 1.0)
        lo = part_expectation(data, i, w - eps * v, np.zeros(dim), 1.0)
        assert (hi - lo) / (2 * eps) == pytest.approx(float(v @ expected), rel=1e-5, abs=1e-6)
        assert np.isfinite(logz)


@pytest.mark.parametrize("learner,C", [("loglinear", 1.0), ("eg", 0.03)])
def test_marginal_learners_train_order_2(tmp_path, learner, C):
    """arboreal's log-linear and EG learners at order 2 learn (held-out UAS well above
    the untrained model's, which is the pruner's alone), and a saved model parses the
    same; EG's dual never falls."""
    from pathlib import Path

    from arboreal.io.conllu import read_conllu
    from arboreal.learn.eg import ExponentiatedGradient
    from arboreal.models import Parser, load_model

    sample = Path(__file__).resolve().parents[1] / "data" / "sample"
    train = [s for s in read_conllu(sample / "en_ewt-sample-train.conllu") if 3 <= len(s) <= 15]
    test = read_conllu(sample / "en_ewt-sample-test.conllu")
    gold = np.concatenate([s.heads[1:] for s in test])

    def uas(model):
        return (np.concatenate([h[1:] for h in model.predict_heads(test)]) == gold).mean()

    owners = []
    start = ExponentiatedGradient.start

    def spy(self, *args, **kw):        # the learner Parser.train builds
        owners.append(self)
        return start(self, *args, **kw)

    ExponentiatedGradient.start = spy
    try:
        model = Parser.train(train, order=2, learner=learner, epochs=8, C=C, hash_bits=16)
    finally:
        ExponentiatedGradient.start = start
    duals = [r["dual"] for owner in owners for r in owner.history]
    untrained = Parser.train(train, order=2, learner="loglinear", epochs=1, C=1e-6,
                             hash_bits=16)
    assert model.meta["training"]["learner"] == learner
    assert uas(model) > uas(untrained) + 0.03
    if learner == "eg":
        assert len(duals) == 8 and np.all(np.diff(duals) >= -1e-9 * abs(duals[-1]))
    model.save(tmp_path / "m.model")
    again = load_model(tmp_path / "m.model")
    assert all(np.array_equal(a, b) for a, b in
               zip(again.predict_heads(test), model.predict_heads(test)))
