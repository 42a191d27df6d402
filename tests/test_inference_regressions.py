"""Inputs that once broke the inference core (found by benchmarks/inference.py)."""
import numpy as np

from arboreal.inference import chu_liu_edmonds, log_partition, log_partition_and_marginals


def test_peaked_scores_sentence_once_gave_infinite_log_z():
    # sentence 146 of this batch gave log Z = +inf (single root) in mid-session code
    scores = np.random.default_rng(20261121 + 1000).standard_normal((256, 41, 41))[146] * 1000
    logz, mu = log_partition_and_marginals(scores)
    assert np.isfinite(logz)
    heads = chu_liu_edmonds(scores)
    best = scores[heads[1:], np.arange(1, 41)].sum()
    # log Z lies between the best tree's score and that plus log(number of trees)
    assert best - 1e-6 * abs(best) <= logz <= best + 39 * np.log(40) + 1e-6 * abs(best)
    assert np.allclose(mu[:, 1:].sum(axis=0), 1.0, atol=1e-9)
    assert np.isclose(log_partition(scores), logz, rtol=1e-12)


def test_log_z_alone_equals_the_one_pass_result_on_peaked_batches():
    # the log-Z-only path skips the backward pass, so it must detect overflow by itself
    rng = np.random.default_rng(7)
    for scale in (100.0, 1000.0, 1e4):
        batch = rng.standard_normal((64, 31, 31)) * scale
        lengths = rng.integers(1, 31, size=64)
        for projective in (False, True):
            for single_root in (True, False):
                kw = dict(projective=projective, single_root=single_root, lengths=lengths)
                alone = log_partition(batch, **kw)
                together, mu = log_partition_and_marginals(batch, **kw)
                assert np.isfinite(alone).all()
                np.testing.assert_allclose(alone, together, rtol=1e-12)
