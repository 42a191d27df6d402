"""Exactness of log_partition / marginals against brute-force enumeration.

Every mode: projective / non-projective x single / multi root x unlabeled /
labeled.  log Z to 1e-9 relative, marginals to 1e-8 absolute, marginals
equal the finite-difference gradient of log Z, batches equal single calls.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

from arboreal.inference import partition
from arboreal.inference.partition import log_partition, marginals
from brute_force import all_trees, tree_scores

MODES = list(itertools.product([False, True], [True, False]))  # (projective, single_root)


def brute(S, projective, single_root):
    """log Z and marginals by enumerating every tree."""
    n = S.shape[0] - 1
    trees = all_trees(n, projective, single_root)
    ts = tree_scores(S, trees)
    logz = logsumexp(ts)
    p = np.exp(ts - logz)
    mu = np.zeros_like(S, dtype=np.float64)
    mods = np.arange(1, n + 1)
    for t, w in zip(trees, p):
        mu[t[1:], mods] += w
    return logz, mu


def brute_labeled(S, projective, single_root):
    """Enumerate trees x label assignments (independent of the label
    reduction used by the library)."""
    n, L = S.shape[0] - 1, S.shape[2]
    trees = all_trees(n, projective, single_root)
    mods = np.arange(1, n + 1)
    labelings = np.array(list(itertools.product(range(L), repeat=n))).reshape(-1, n)
    scores, index = [], []
    for ti, t in enumerate(trees):
        per = S[t[1:], mods]  # (n, L)
        sc = per[np.arange(n)[None, :], labelings].sum(axis=1)
        scores.append(sc)
        index.extend((ti, li) for li in range(len(labelings)))
    scores = np.concatenate(scores)
    logz = logsumexp(scores)
    p = np.exp(scores - logz)
    mu = np.zeros(S.shape)
    for (ti, li), w in zip(index, p):
        mu[trees[ti][1:], mods, labelings[li]] += w
    return logz, mu


def random_scores(seed, n, scale, labels=0):
    rng = np.random.default_rng(seed)
    shape = (n + 1, n + 1) + ((labels,) if labels else ())
    return rng.normal(size=shape) * scale


@settings(max_examples=60, deadline=None)
@given(mode=st.sampled_from(MODES), n=st.integers(1, 6), seed=st.integers(0, 2**32 - 1),
       scale=st.sampled_from([0.1, 1.0, 3.0, 10.0]))
def test_unlabeled_matches_brute_force(mode, n, seed, scale):
    projective, single_root = mode
    S = random_scores(seed, n, scale)
    ref_z, ref_mu = brute(S, projective, single_root)
    z = log_partition(S, projective=projective, single_root=single_root)
    mu = marginals(S, projective=projective, single_root=single_root)
    assert isinstance(z, float)
    assert abs(z - ref_z) <= 1e-9 * max(1.0, abs(ref_z))
    assert mu.shape == S.shape
    np.testing.assert_allclose(mu, ref_mu, rtol=0, atol=1e-8)


@settings(max_examples=30, deadline=None)
@given(mode=st.sampled_from(MODES), n=st.integers(1, 4), labels=st.integers(1, 3),
       seed=st.integers(0, 2**32 - 1), scale=st.sampled_from([0.5, 2.0, 8.0]))
def test_labeled_matches_brute_force(mode, n, labels, seed, scale):
    projective, single_root = mode
    S = random_scores(seed, n, scale, labels)
    ref_z, ref_mu = brute_labeled(S, projective, single_root)
    z = log_partition(S, projective=projective, single_root=single_root, labeled=True)
    mu = marginals(S, projective=projective, single_root=single_root, labeled=True)
    assert abs(z - ref_z) <= 1e-9 * max(1.0, abs(ref_z))
    assert mu.shape == S.shape
    np.testing.assert_allclose(mu, ref_mu, rtol=0, atol=1e-8)


@settings(max_examples=25, deadline=None)
@given(single_root=st.booleans(), n=st.integers(2, 6), seed=st.integers(0, 2**32 - 1),
       scale=st.sampled_from([1.0, 5.0, 30.0]))
def test_log_space_path_matches_brute_force(single_root, n, seed, scale):
    """The non-projective fallback (used for very peaked scores) on its own."""
    S = random_scores(seed, n, scale)
    ref_z, ref_mu = brute(S, False, single_root)
    z, mu, _ = partition._run(S, False, single_root, False, None, True, force_log=True)
    assert abs(z[0] - ref_z) <= 1e-9 * max(1.0, abs(ref_z))
    np.testing.assert_allclose(mu[0], ref_mu, rtol=0, atol=1e-8)


@pytest.mark.parametrize("projective,single_root", MODES)
@pytest.mark.parametrize("labeled", [False, True])
def test_marginals_are_the_gradient_of_log_partition(projective, single_root, labeled):
    S = random_scores(7, 5, 2.0, 2 if labeled else 0)
    kw = dict(projective=projective, single_root=single_root, labeled=labeled)
    mu = marginals(S, **kw)
    n = 5
    eps = 1e-5
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(12):
        h, m = rng.integers(0, n + 1), rng.integers(1, n + 1)
        if h == m:
            continue
        idx = (h, m) + ((rng.integers(0, 2),) if labeled else ())
        up, down = S.copy(), S.copy()
        up[idx] += eps
        down[idx] -= eps
        fd = (log_partition(up, **kw) - log_partition(down, **kw)) / (2 * eps)
        assert abs(fd - mu[idx]) <= 1e-8, (idx, fd, mu[idx])
        checked += 1
    assert checked >= 5
    # entries outside the active region do not move log Z and have no mass
    S2 = S.copy()
    S2[2, 2] += 5.0
    S2[3, 0] -= 5.0
    assert log_partition(S2, **kw) == log_partition(S, **kw)
    assert np.all(mu[:, 0] == 0) and mu[2, 2].sum() == 0


@pytest.mark.parametrize("projective,single_root", MODES)
@pytest.mark.parametrize("labeled", [False, True])
def test_batch_equals_single_calls(projective, single_root, labeled):
    rng = np.random.default_rng(11)
    B, N = 37, 9  # more sentences than one lane group, ragged lengths
    lengths = rng.integers(0, N + 1, size=B)
    lengths[3] = N
    shape = (B, N + 1, N + 1) + ((3,) if labeled else ())
    S = rng.normal(size=shape) * 3
    kw = dict(projective=projective, single_root=single_root, labeled=labeled)
    z = log_partition(S, lengths=lengths, **kw)
    mu = marginals(S, lengths=lengths, **kw)
    assert z.shape == (B,) and mu.shape == S.shape
    for b in range(B):
        n = lengths[b]
        one = S[b, : n + 1, : n + 1]
        if n == 0:
            assert z[b] == 0.0
        else:
            assert abs(z[b] - log_partition(one, **kw)) <= 1e-12 * max(1, abs(z[b]))
            np.testing.assert_allclose(mu[b, : n + 1, : n + 1], marginals(one, **kw),
                                       rtol=0, atol=1e-13)
        assert np.all(mu[b, n + 1:] == 0) and np.all(mu[b, :, n + 1:] == 0)


@pytest.mark.parametrize("projective", [False, True])
def test_dtypes(projective):
    S = random_scores(5, 6, 1.0)
    for dt in (np.float32, np.float64):
        z = log_partition(S.astype(dt)[None], projective=projective)
        mu = marginals(S.astype(dt), projective=projective)
        assert z.dtype == dt and mu.dtype == dt
    z64 = log_partition(S, projective=projective)
    z32 = log_partition(S.astype(np.float32), projective=projective)
    assert abs(z32 - z64) < 1e-4 * abs(z64)  # float32 input, float64 inside
    zi = log_partition(np.round(S * 3).astype(np.int64), projective=projective)
    assert isinstance(zi, float)


@pytest.mark.parametrize("projective", [False, True])
@pytest.mark.parametrize("single_root", [False, True])
def test_forbidden_arcs_and_degenerate_cases(projective, single_root):
    n = 4
    S = np.full((n + 1, n + 1), -np.inf)
    for m in range(1, n + 1):  # only the chain 0 -> 1 -> 2 -> ... is allowed
        S[m - 1, m] = 0.5 * m
    z = log_partition(S, projective=projective, single_root=single_root)
    assert z == pytest.approx(0.5 * n * (n + 1) / 2, rel=1e-12)
    mu = marginals(S, projective=projective, single_root=single_root)
    expected = np.zeros_like(S)
    expected[np.arange(n), np.arange(1, n + 1)] = 1
    np.testing.assert_allclose(mu, expected, atol=1e-12)
    # no tree at all: a word without any allowed head
    S[:, 2] = -np.inf
    assert log_partition(S, projective=projective, single_root=single_root) == -np.inf
    assert np.all(marginals(S, projective=projective, single_root=single_root) == 0)
    # one word, no word
    one = np.array([[0.0, 1.25], [0.0, 0.0]])
    assert log_partition(one, projective=projective, single_root=single_root) == 1.25
    assert marginals(one, projective=projective, single_root=single_root)[0, 1] == 1.0
    assert log_partition(np.zeros((1, 1)), projective=projective) == 0.0


@pytest.mark.parametrize("projective", [False, True])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_bad_scores_raise(projective, bad):
    S = random_scores(1, 4, 1.0)
    S[2, 3] = bad
    with pytest.raises(ValueError, match="NaN or \\+inf"):
        log_partition(S, projective=projective)
    batch = np.stack([random_scores(2, 4, 1.0), S])
    with pytest.raises(ValueError, match="sentence 1"):
        marginals(batch, projective=projective)
    S[2, 2] = np.nan  # the diagonal is ignored
    S[2, 3] = 0.0
    assert np.isfinite(log_partition(S, projective=projective))
    with pytest.raises(ValueError):
        log_partition(np.zeros((3, 4)))


@settings(max_examples=40, deadline=None)
@given(mode=st.sampled_from(MODES), n=st.integers(2, 5), seed=st.integers(0, 2**32 - 1),
       density=st.sampled_from([0.3, 0.6]), force_log=st.booleans())
def test_forbidden_arcs_match_brute_force(mode, n, seed, density, force_log):
    """Random -inf masks: zero pivots, words that only the root may head."""
    projective, single_root = mode
    rng = np.random.default_rng(seed)
    S = rng.normal(size=(n + 1, n + 1)) * 2
    S[rng.random(S.shape) < density] = -np.inf
    trees = all_trees(n, projective, single_root)
    ts = tree_scores(S, trees)
    z, mu, _ = partition._run(S, projective, single_root, False, None, True,
                              force_log=force_log)
    if np.all(ts == -np.inf):
        assert z[0] == -np.inf and np.all(mu == 0)
        return
    ref_z, ref_mu = brute(S, projective, single_root)
    assert abs(z[0] - ref_z) <= 1e-9 * max(1.0, abs(ref_z))
    np.testing.assert_allclose(mu[0], ref_mu, rtol=0, atol=1e-8)


@pytest.mark.parametrize("projective", [False, True])
def test_log_partition_and_marginals_in_one_pass(projective):
    rng = np.random.default_rng(4)
    S = rng.normal(size=(6, 8, 8))
    lengths = np.array([7, 3, 0, 5, 7, 1])
    z, mu = partition.log_partition_and_marginals(S, projective=projective, lengths=lengths)
    np.testing.assert_array_equal(z, log_partition(S, projective=projective, lengths=lengths))
    np.testing.assert_array_equal(mu, marginals(S, projective=projective, lengths=lengths))
    z1, mu1 = partition.log_partition_and_marginals(S[0], projective=projective)
    assert isinstance(z1, float) and z1 == log_partition(S[0], projective=projective)


@pytest.mark.parametrize("projective", [True, False])
@pytest.mark.parametrize("single_root", [True, False])
def test_numba_callable_sentence_marginals_match_the_public_ones(projective, single_root):
    from arboreal.inference.partition import sentence_marginals_kernel

    rng = np.random.default_rng(3)
    for n in (1, 2, 5, 9):
        scores = rng.normal(scale=2.0, size=(n + 1, n + 1))
        out = np.zeros((1, n + 1, n + 1))
        logz = sentence_marginals_kernel(scores[None].copy(), projective, single_root, out)
        assert np.isclose(logz, log_partition(scores, projective=projective,
                                              single_root=single_root))
        assert np.allclose(out[0], marginals(scores, projective=projective,
                                             single_root=single_root), atol=1e-12)
    bad = np.zeros((1, 4, 4))
    bad[0, 1, 2] = np.nan
    assert np.isnan(sentence_marginals_kernel(bad, projective, single_root, np.zeros((1, 4, 4))))
