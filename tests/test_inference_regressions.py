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
