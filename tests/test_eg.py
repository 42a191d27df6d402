"""Max-margin EG training: dual monotone under halving, weak duality, exact hinge, tiny treebank fitted."""
from __future__ import annotations

import numpy as np
import pytest

from _arc_mock import mock_data
from brute_force import all_trees, tree_scores
from test_loglinear import tiny_treebank, train_accuracy

from arboreal.learn import LEARNERS, TrainingData
from arboreal.learn.eg import ExponentiatedGradient, primal_objective
from arboreal.learn.loglinear import ScoredBuckets
from arboreal.inference.structure import projective_or_not

MODES = [(p, r) for p in (True, False) for r in (True, False)]


def _trees(projective, single_root):
    return lambda n: all_trees(n, projective=projective, single_root=single_root)


@pytest.mark.parametrize("projective,single_root", MODES)
def test_primal_hinge_is_the_brute_force_maximum(projective, single_root):
    data = mock_data([2, 3, 4, 5], dim=20, seed=5, projective=projective,
                     single_root=single_root, trees=_trees(projective, single_root))
    w = np.random.default_rng(6).normal(0, 1, 20)
    C = 0.7
    value, hinge = primal_objective(ScoredBuckets(data), w, C, projective_or_not(projective, single_root))
    expect = 0.0
    for enc, gold in zip(data.encoded, data.heads):
        S = data.features.arc_scores(enc, w)
        T = all_trees(enc.n, projective=projective, single_root=single_root)
        loss = (T[:, 1:] != gold[1:]).sum(axis=1)
        expect += (loss + tree_scores(S, T)).max() - tree_scores(S, gold[None])[0]
    assert hinge == pytest.approx(expect, rel=1e-12, abs=1e-12)
    assert value == pytest.approx(C * expect + 0.5 * w @ w, rel=1e-12)


@pytest.mark.parametrize("projective,single_root", MODES)
def test_dual_never_decreases_with_halving_and_weak_duality_holds(projective, single_root):
    data = mock_data([3, 4, 5, 5, 4, 3, 5], dim=20, seed=7, projective=projective,
                     single_root=single_root, trees=_trees(projective, single_root))
    # a learning rate far too large, so the per-sentence halving rule must act
    learner = ExponentiatedGradient(C=2.0, eta=50.0, primal=True)
    learner.fit(data, epochs=25)
    hist = learner.history
    assert len(hist) == 25
    assert hist[0]["halvings"] > 0, "the halving rule was never exercised"
    assert hist[0]["eta"] < 50.0
    duals = [r["dual"] for r in hist]
    assert all(b >= a - 1e-9 * max(1.0, abs(a)) for a, b in zip(duals, duals[1:]))
    assert duals[-1] > duals[0]
    for r in hist:
        assert r["primal"] >= r["dual"] - 1e-9 * max(1.0, abs(r["dual"]))


def test_each_sentence_keeps_its_own_rate():
    """A sentence whose step is refused has its rate halved without slowing the others:
    after one pass from a rate far too large, the rates differ between sentences."""
    data = mock_data([2, 3, 6, 6, 2], dim=20, seed=3, projective=False,
                     trees=_trees(False, True))
    learner = ExponentiatedGradient(C=2.0, eta=50.0, primal=False, shuffle=False)
    learner.fit(data, epochs=1)
    assert learner.history[0]["halvings"] > 0
    assert len(set(np.round(learner.rates, 12))) > 1


def test_weights_equal_dual_expression_of_the_stored_theta():
    """w = C * sum_i (I_i - mu(theta_i)) f after any number of passes (bookkeeping check)."""
    from arboreal.inference.partition import marginals
    data = mock_data([3, 4, 5, 4], dim=15, seed=8, projective=False,
                     trees=_trees(False, True))
    learner = ExponentiatedGradient(C=1.5, eta=0.2, primal=False)
    w = learner.fit(data, epochs=6)
    expect = np.zeros(15)
    for i, (enc, gold) in enumerate(zip(data.encoded, data.heads)):
        n = enc.n
        lo, hi = learner.offsets[i], learner.offsets[i + 1]
        theta = learner.theta[lo:hi].reshape(n + 1, n + 1).astype(np.float64)
        mu = np.asarray(marginals(theta, projective=False, single_root=True))
        coef = -mu
        coef[gold[1:], np.arange(1, n + 1)] += 1.0
        data.features.accumulate(enc, coef, expect, 1.5)
    np.testing.assert_allclose(w, expect, atol=1e-8)


def test_dual_converges_to_primal_on_small_problem():
    data = mock_data([3, 4, 4, 5], dim=12, seed=9, projective=True, trees=_trees(True, True))
    learner = ExponentiatedGradient(C=0.5, eta=1.0, primal=True)
    learner.fit(data, epochs=150)
    last = learner.history[-1]
    first = learner.history[0]
    assert last["primal"] - last["dual"] < 0.05 * (first["primal"] - first["dual"])


def test_registered():
    assert LEARNERS["eg"] is ExponentiatedGradient
    with pytest.raises(TypeError):
        ExponentiatedGradient(bogus=1)


@pytest.mark.parametrize("projective", [True, False])
def test_tiny_treebank_fitted_exactly(projective):
    sents, fs, encs = tiny_treebank()
    data = TrainingData(features=fs, encoded=encs, heads=[s.heads for s in sents],
                           structure=projective_or_not(projective, True))
    w = ExponentiatedGradient(C=1.0, primal=False).fit(data, epochs=30)
    assert train_accuracy(fs, encs, sents, w, projective) == 1.0
