"""Objectives on arc scores and the tree structure, against brute force over every tree.

Each objective's loss is checked against its definition computed by enumerating all
trees; its gradient against finite differences of that loss (where the loss is smooth)
and against its closed form (marginals - gold for the CRF, the indicator difference of
the best tree for the decoding objectives).
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import logsumexp

from arboreal.inference.structure import (TreeStructure, cost_bias, projective_or_not, length_buckets,
                                          pad_batch, pad_heads)
from arboreal.learn.objectives import OBJECTIVES, crf, get_objective, head_selection, hinge
from brute_force import all_trees, tree_scores

MODES = list(itertools.product([True, False], [True, False]))   # (projective, single_root)


def _problem(rng, n: int, projective: bool, single_root: bool, scale: float = 2.0):
    scores = rng.normal(scale=scale, size=(n + 1, n + 1))
    trees = all_trees(n, projective, single_root)
    gold = trees[rng.integers(len(trees))]
    return scores, gold, trees


@pytest.mark.parametrize("projective,single_root", MODES)
def test_structure_decodes_and_sums_like_brute_force(projective, single_root):
    rng = np.random.default_rng(1)
    st = projective_or_not(projective, single_root)
    for n in (1, 2, 4, 5):
        scores, gold, trees = _problem(rng, n, projective, single_root)
        ts = tree_scores(scores, trees)
        assert np.isclose(st.log_partition(scores), logsumexp(ts))
        assert st.tree_scores(scores, gold) == pytest.approx(tree_scores(scores, gold[None])[0])
        best = st.decode(scores)
        assert tree_scores(scores, best[None])[0] == pytest.approx(ts.max())
        aug = st.decode_cost_augmented(scores, gold, 1.5)
        target = ts + 1.5 * (trees[:, 1:] != gold[1:]).sum(axis=1)
        assert tree_scores(scores, aug[None])[0] + 1.5 * (aug[1:] != gold[1:]).sum() \
            == pytest.approx(target.max())
        p = np.exp(ts - logsumexp(ts))
        mu = sum(pi * st.indicators(t) for pi, t in zip(p, trees))
        assert np.allclose(st.marginals(scores), mu, atol=1e-9)


def test_cost_offsets_match_cost_bias_and_pad():
    heads = np.array([-1, 2, 0, 2])
    assert np.array_equal(TreeStructure.cost_offsets(heads, 2.0), cost_bias(heads, 2.0))
    batch = pad_heads([heads, np.array([-1, 0])])
    off = TreeStructure.cost_offsets(batch, 1.0)
    assert off.shape == (2, 4, 4)
    assert np.array_equal(off[0], cost_bias(heads, 1.0))
    assert off[1, 0, 1] == 0.0 and off[1, 2, 1] == 1.0


@pytest.mark.parametrize("projective,single_root", MODES)
def test_crf_loss_is_nll_and_gradient_is_marginals_minus_gold(projective, single_root):
    rng = np.random.default_rng(2)
    st = projective_or_not(projective, single_root)
    mats, golds = [], []
    for n in (3, 5, 4):
        scores, gold, _ = _problem(rng, n, projective, single_root)
        mats.append(scores)
        golds.append(gold)
    batch, lengths = pad_batch(mats)
    heads = pad_heads(golds)
    loss, grad = crf(batch, heads, lengths, st)
    for b, (scores, gold) in enumerate(zip(mats, golds)):
        n = len(gold) - 1
        ts = tree_scores(scores, all_trees(n, projective, single_root))
        assert loss[b] == pytest.approx(logsumexp(ts) - tree_scores(scores, gold[None])[0])
        expected = st.marginals(scores) - st.indicators(gold)
        assert np.allclose(grad[b, :n + 1, :n + 1], expected, atol=1e-9)
        assert not grad[b, n + 1:].any() and not grad[b, :, n + 1:].any()
    # finite differences of the loss on one active arc of each sentence
    eps = 1e-6
    for b, n in enumerate(lengths):
        h, m = 0, int(n)
        bumped = batch.copy()
        bumped[b, h, m] += eps
        lo = batch.copy()
        lo[b, h, m] -= eps
        fd = (crf(bumped, heads, lengths, st)[0][b] - crf(lo, heads, lengths, st)[0][b]) / (2 * eps)
        assert fd == pytest.approx(grad[b, h, m], abs=1e-6)


@pytest.mark.parametrize("projective,single_root", MODES)
@pytest.mark.parametrize("cost", [0.0, 1.0])
def test_hinge_is_the_largest_margin_violation(projective, single_root, cost):
    rng = np.random.default_rng(3)
    st = projective_or_not(projective, single_root)
    for n in (2, 4, 5):
        scores, gold, trees = _problem(rng, n, projective, single_root)
        loss, grad = hinge(scores[None], gold[None], np.array([n]), st, cost=cost)
        ts = tree_scores(scores, trees) + cost * (trees[:, 1:] != gold[1:]).sum(axis=1)
        assert loss[0] == pytest.approx(ts.max() - tree_scores(scores, gold[None])[0])
        assert loss[0] >= -1e-9
        # the gradient is the indicator difference of a maximizing tree
        pred = grad[0] + st.indicators(gold)
        assert set(np.unique(pred)) <= {0.0, 1.0}
        heads = np.r_[-1, pred[:, 1:].argmax(axis=0)]
        assert tree_scores(scores, heads[None])[0] + cost * (heads[1:] != gold[1:]).sum() \
            == pytest.approx(ts.max())


def test_head_selection_matches_column_softmax_and_finite_differences():
    rng = np.random.default_rng(4)
    mats = [rng.normal(size=(n + 1, n + 1)) for n in (3, 1, 4)]
    golds = [np.r_[-1, rng.integers(0, n + 1, size=n)] for n in (3, 1, 4)]
    for g in golds:                     # no self-loops in the gold heads
        for m in range(1, len(g)):
            if g[m] == m:
                g[m] = 0
    batch, lengths = pad_batch(mats)
    heads = pad_heads(golds)
    loss, grad = head_selection(batch, heads, lengths)
    for b, (s, g) in enumerate(zip(mats, golds)):
        n = len(g) - 1
        total = 0.0
        for m in range(1, n + 1):
            cand = [h for h in range(n + 1) if h != m]
            z = logsumexp(s[cand, m])
            total += z - s[g[m], m]
            p = np.exp(s[cand, m] - z)
            assert np.allclose(grad[b, cand, m], p - (np.array(cand) == g[m]))
            assert grad[b, m, m] == 0.0
        assert loss[b] == pytest.approx(total)
    eps = 1e-6
    bumped = batch.copy()
    bumped[2, 1, 3] += eps
    fd = (head_selection(bumped, heads, lengths)[0][2] - loss[2]) / eps
    assert fd == pytest.approx(grad[2, 1, 3], abs=1e-4)


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_objectives_stay_finite_at_large_scores(name):
    rng = np.random.default_rng(5)
    st = projective_or_not(False, True)
    scores = rng.normal(scale=1e4, size=(1, 7, 7))
    gold = all_trees(6, False, True)[17][None]
    loss, grad = get_objective(name)(scores, gold, np.array([6]), st)
    assert np.isfinite(loss).all() and np.isfinite(grad).all()


def test_unknown_objective_names_the_choices():
    with pytest.raises(ValueError, match="crf"):
        get_objective("nope")


def test_length_buckets_cover_every_sentence_once():
    lengths = np.array([5, 1, 40, 7, 6, 39, 0, 120])
    buckets = length_buckets(lengths, max_entries=3000)
    seen = np.sort(np.concatenate(buckets))
    assert np.array_equal(seen, np.arange(len(lengths)))
    for b in buckets:
        top = lengths[b].max()
        assert len(b) == 1 or len(b) * (top + 1) ** 2 <= 3000
