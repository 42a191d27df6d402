"""Numerical stability of log_partition / marginals for spread-out scores.

Scores ~ N(0, s^2), s in {1, 10, 100, 1000}, n in {10, 20, 40, 80}:
results are finite, each word's marginals sum to 1, and (on a cheap
subset) they agree with the converged mpmath reference (tests/mp_reference)
to 1e-9 relative on log Z and 1e-6 absolute on marginals, in float64.
torch-struct, SuPar and a plain column-shifted Laplacian all return
non-finite values at s = 1000.
"""
from __future__ import annotations

import numpy as np
import pytest

import mp_reference as ref
from arboreal.inference import partition
from arboreal.inference.partition import log_partition, marginals

SCALES = [1, 10, 100, 1000]
LENGTHS = [10, 20, 40, 80]


def scores(n, s, seed):
    return np.random.default_rng(seed).normal(size=(n + 1, n + 1)) * s


def check_marginals(mu, n):
    assert np.all(np.isfinite(mu))
    assert mu.min() >= 0 and mu.max() <= 1 + 1e-12
    np.testing.assert_allclose(mu[:, 1:n + 1].sum(axis=0), 1.0, rtol=0, atol=1e-9)


@pytest.mark.parametrize("projective", [False, True])
@pytest.mark.parametrize("single_root", [True, False])
def test_grid_is_finite_and_normalised(projective, single_root):
    """The whole s x n grid as one padded batch per scale."""
    for s in SCALES:
        N = max(LENGTHS)
        rng = np.random.default_rng(s)
        S = rng.normal(size=(len(LENGTHS), N + 1, N + 1)) * s
        lengths = np.array(LENGTHS)
        kw = dict(projective=projective, single_root=single_root, lengths=lengths)
        z = log_partition(S, **kw)
        mu = marginals(S, **kw)
        assert np.all(np.isfinite(z))
        for b, n in enumerate(LENGTHS):
            check_marginals(mu[b], n)


@pytest.mark.parametrize("single_root", [True, False])
def test_linear_and_log_space_paths_agree(single_root):
    """Where the fast path is valid the two non-projective implementations
    (linear GTH, log-space GTH) must agree closely."""
    N = max(LENGTHS)
    for s in [1, 10]:
        S = np.random.default_rng(100 + s).normal(size=(len(LENGTHS), N + 1, N + 1)) * s
        lengths = np.array(LENGTHS)
        fast = partition._run(S, False, single_root, False, lengths, True)
        slow = partition._run(S, False, single_root, False, lengths, True, force_log=True)
        np.testing.assert_allclose(fast[0], slow[0], rtol=1e-12)
        np.testing.assert_allclose(fast[1], slow[1], rtol=0, atol=1e-10)


# (n, s) pairs compared with mpmath: every scale at n = 10 and 20, and the
# hardest case at n = 40 (mpmath is slow; n = 80 is covered by the grid test
# and by the agreement of the two float64 paths).
MP_CASES = ([(10, s, sr) for s in SCALES for sr in (True, False)]
            + [(20, s, sr) for s in SCALES for sr in (True, False)] + [(40, 1000, True)])


@pytest.mark.parametrize("n,s,single_root", MP_CASES)
def test_nonprojective_matches_mpmath(n, s, single_root):
    S = scores(n, s, seed=n * 7 + s)
    z = log_partition(S, single_root=single_root)
    mu = marginals(S, single_root=single_root)
    rz, rmu = ref.nonprojective(S, single_root, dps=ref.digits_hint(S, z))
    assert abs(z - rz) <= 1e-9 * abs(rz)
    np.testing.assert_allclose(mu, rmu, rtol=0, atol=1e-6)
    check_marginals(mu, n)


@pytest.mark.parametrize("n,s", [(10, s) for s in SCALES] + [(20, 1000)])
@pytest.mark.parametrize("single_root", [True, False])
def test_projective_matches_mpmath(n, s, single_root):
    S = scores(n, s, seed=n * 11 + s)
    z = log_partition(S, projective=True, single_root=single_root)
    mu = marginals(S, projective=True, single_root=single_root)
    rz, rmu = ref.projective(S, single_root)
    assert abs(z - rz) <= 1e-9 * abs(rz)
    np.testing.assert_allclose(mu, rmu, rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_peaked_batch_like_the_peers_fail_on(dtype):
    """B = 64 sentences, n = 40, s = 1000 (torch-struct / SuPar: all NaN)."""
    S = np.random.default_rng(5).normal(size=(64, 41, 41)).astype(dtype) * 1000
    lengths = np.full(64, 40)
    z = log_partition(S, lengths=lengths)
    mu = marginals(S, lengths=lengths)
    assert z.dtype == dtype and np.all(np.isfinite(z))
    for b in range(64):
        assert np.all(np.isfinite(mu[b]))
        np.testing.assert_allclose(mu[b, :, 1:].sum(axis=0), 1.0, atol=1e-5)


@pytest.mark.parametrize("projective", [False, True])
def test_scores_up_to_1e4(projective):
    rng = np.random.default_rng(9)
    for n in [5, 30]:
        S = rng.uniform(-1e4, 1e4, size=(n + 1, n + 1))
        for single_root in [True, False]:
            z = log_partition(S, projective=projective, single_root=single_root)
            mu = marginals(S, projective=projective, single_root=single_root)
            assert np.isfinite(z)
            check_marginals(mu, n)
