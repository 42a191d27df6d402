"""Log-linear (CRF) training: objective and gradient exact, tiny treebank fitted."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from _arc_mock import mock_data
from brute_force import all_trees, tree_scores

from arboreal.learn import LEARNERS, TrainingData
from arboreal.learn.loglinear import LogLinear, ScoredBuckets, length_buckets, loglinear_objective
from arboreal.inference.structure import projective_or_not

MODES = [(p, r) for p in (True, False) for r in (True, False)]


def _brute_objective(data, w, C):
    value = 0.5 * float(w @ w)
    for enc, gold in zip(data.encoded, data.heads):
        n = enc.n
        S = data.features.arc_scores(enc, w)
        T = all_trees(n, projective=data.projective, single_root=data.single_root)
        ts = tree_scores(S, T)
        logz = ts.max() + np.log(np.exp(ts - ts.max()).sum())
        value += C * (logz - tree_scores(S, gold[None])[0])
    return value


def test_length_buckets_cover_every_sentence_once():
    lengths = np.array([3, 50, 7, 7, 120, 1, 0, 33, 34, 35, 8])
    buckets = length_buckets(lengths, max_entries=2000)
    idx = np.sort(np.concatenate(buckets))
    assert (idx == np.arange(len(lengths))).all()
    for b in buckets:
        top = lengths[b].max()
        assert len(b) == 1 or len(b) * (top + 1) ** 2 <= 2000


@pytest.mark.parametrize("projective,single_root", MODES)
def test_objective_matches_brute_force_and_gradient_matches_finite_differences(projective, single_root):
    trees = lambda n: all_trees(n, projective=projective, single_root=single_root)  # noqa: E731
    data = mock_data([2, 3, 4, 5, 4], dim=30, seed=1, projective=projective,
                     single_root=single_root, trees=trees)
    rng = np.random.default_rng(2)
    w = rng.normal(0, 0.7, size=30)
    C = 1.7
    sb = ScoredBuckets(data)
    value, grad = loglinear_objective(sb, w, C, projective_or_not(projective, single_root))
    assert value == pytest.approx(_brute_objective(data, w, C), rel=1e-10)
    eps = 1e-5
    fd = np.empty_like(w)
    for j in range(len(w)):
        e = np.zeros_like(w)
        e[j] = eps
        fd[j] = (loglinear_objective(sb, w + e, C, projective_or_not(projective, single_root))[0]
                 - loglinear_objective(sb, w - e, C, projective_or_not(projective, single_root))[0]) / (2 * eps)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-6)


def test_lbfgs_decreases_objective_and_reports_each_iteration():
    trees = lambda n: all_trees(n, projective=False, single_root=True)  # noqa: E731
    data = mock_data([3, 4, 5, 5, 4, 3], dim=25, seed=3, projective=False, trees=trees)
    seen = []
    learner = LogLinear(C=2.0)
    w = learner.fit(data, epochs=15, on_epoch=lambda e, w: seen.append(e))
    objs = [r["objective"] for r in learner.history]
    assert seen == list(range(1, len(seen) + 1)) and len(seen) >= 3
    sb = ScoredBuckets(data)
    v0 = loglinear_objective(sb, np.zeros(25), 2.0, projective_or_not(False, True))[0]
    v1, g1 = loglinear_objective(sb, w, 2.0, projective_or_not(False, True))
    assert v1 < v0 and objs[-1] <= objs[0]
    assert np.abs(g1).max() < 1e-2 * np.abs(loglinear_objective(sb, np.zeros(25), 2.0, projective_or_not(False, True))[1]).max()


def test_adagrad_decreases_objective():
    trees = lambda n: all_trees(n, projective=True, single_root=True)  # noqa: E731
    data = mock_data([3, 4, 5, 5, 4, 3, 2, 5], dim=25, seed=4, projective=True, trees=trees)
    sb = ScoredBuckets(data)
    v0 = loglinear_objective(sb, np.zeros(25), 1.0, projective_or_not(True, True))[0]
    w = LogLinear(C=1.0, optimizer="adagrad", batch_size=3, learning_rate=0.3).fit(data, epochs=20)
    assert loglinear_objective(sb, w, 1.0, projective_or_not(True, True))[0] < 0.8 * v0


def test_registered():
    assert LEARNERS["loglinear"] is LogLinear
    with pytest.raises(TypeError):
        LogLinear(bogus=1)


SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "en_ewt-sample-train.conllu"


def tiny_treebank(k=12, max_len=12):
    from arboreal.features import FeatureSet
    from arboreal.io.conllu import read_conllu
    from arboreal.inference.projective import projectivize

    sents = [s for s in read_conllu(SAMPLE) if 3 <= len(s) <= max_len][:k]
    sents, _, _ = projectivize(sents)
    fs = FeatureSet("default", bits=18).fit(sents)
    return sents, fs, fs.encode(sents)


def train_accuracy(fs, encs, sents, w, projective):
    right = total = 0
    for enc, s in zip(encs, sents):
        pred = projective_or_not(projective, True).decode(fs.arc_scores(enc, w))
        right += int((pred[1:] == s.heads[1:]).sum())
        total += len(s)
    return right / total


@pytest.mark.parametrize("projective", [True, False])
def test_tiny_treebank_fitted_exactly(projective):
    sents, fs, encs = tiny_treebank()
    data = TrainingData(features=fs, encoded=encs, heads=[s.heads for s in sents],
                           structure=projective_or_not(projective, True))
    w = LogLinear(C=10.0).fit(data, epochs=60)
    assert train_accuracy(fs, encs, sents, w, projective) == 1.0


def test_dense_accumulate_equals_feature_set_accumulate_and_is_the_scoring_adjoint():
    from arboreal.features import FeatureSet
    from arboreal.io.conllu import read_conllu
    from arboreal.learn.loglinear import accumulate_dense

    sents = [s for s in read_conllu(SAMPLE)[:40] if len(s) >= 2][:25]
    rng = np.random.default_rng(0)
    for cutoff in (0, 2):
        fs = FeatureSet("default", bits=16, cutoff=cutoff).fit(sents)
        for enc in fs.encode(sents)[:8]:
            n = enc.n
            coef = rng.normal(size=(n + 1, n + 1))
            coef[rng.random((n + 1, n + 1)) < 0.3] = 0.0
            a = np.zeros(fs.dim)
            b = np.zeros(fs.dim)
            fs.accumulate(enc, coef, a, 0.7)
            accumulate_dense(fs, enc, coef, b, 0.7)
            np.testing.assert_allclose(b, a, atol=1e-10)
            if cutoff == 0:  # adjoint: <w, A^T coef> = <scores(w), coef> on scoreable arcs
                w = rng.normal(size=fs.dim)
                S = fs.arc_scores(enc, w)
                valid = np.ones((n + 1, n + 1), bool)
                valid[:, 0] = False
                np.fill_diagonal(valid, False)
                assert w @ b == pytest.approx(0.7 * (S * coef)[valid].sum(), rel=1e-9)


@pytest.mark.parametrize("learner,options", [("loglinear", {"C": 1.0}), ("eg", {"C": 1.0, "primal": False})])
def test_parser_auto_decoder_with_marginal_learners(learner, options, tmp_path):
    """decoder="auto": trained non-projectively, decoder picked on dev, stored in the model."""
    from arboreal.io.conllu import read_conllu
    from arboreal.models import Parser

    sents = [s for s in read_conllu(SAMPLE) if len(s) <= 20][:40]
    p = Parser.train(sents[:30], dev=sents[30:], learner=learner, decoder="auto", epochs=3,
                     hash_bits=16, **options)
    assert p.meta["training"]["train_decoder"] == "cle"
    assert p.decoder in ("eisner", "cle")
    p.save(tmp_path / "m.npz")
    q = Parser.load(tmp_path / "m.npz")
    assert q.decoder == p.decoder
    heads, _ = q.predict(sents[30:])
    assert all(len(h) == len(s) + 1 for h, s in zip(heads, sents[30:]))
