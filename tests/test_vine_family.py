"""The worked example of a tree family (arboreal.inference.families.vine): every routine
against brute-force enumeration of the vine trees, and the family through the registry,
training and a model file."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp

from brute_force import all_trees, tree_scores

from arboreal.inference.families.vine import VineTrees
from arboreal.inference.structure import family_names, pad_batch, tree_structure


def vine_trees(n: int, bound: int, single_root: bool) -> np.ndarray:
    """Every projective tree over n words whose arcs between words span <= bound."""
    trees = all_trees(n, projective=True, single_root=single_root)
    m = np.arange(1, n + 1)
    heads = trees[:, 1:]
    ok = ((heads == 0) | (np.abs(heads - m) <= bound)).all(axis=1)
    return trees[ok]


CASES = [(n, bound, single_root) for n in (2, 4, 6) for bound in (1, 2)
         for single_root in (True, False)]


@pytest.mark.parametrize("n,bound,single_root", CASES)
def test_vine_routines_equal_brute_force(n, bound, single_root):
    rng = np.random.default_rng(n * 10 + bound)
    scores = rng.normal(0, 2, (n + 1, n + 1))
    family = VineTrees(single_root, max_length=bound)
    trees = vine_trees(n, bound, single_root)
    if n - 1 > bound:       # some arc between words is too long: the family is smaller
        assert len(trees) < len(all_trees(n, True, single_root))
    values = tree_scores(scores, trees)
    best = trees[values.argmax()]
    assert np.array_equal(family.decode(scores), best)
    logz = logsumexp(values)
    assert family.log_partition(scores) == pytest.approx(logz, abs=1e-9)
    p = np.exp(values - logz)
    want = np.zeros((n + 1, n + 1))
    for tree, weight in zip(trees, p):
        want[tree[1:], np.arange(1, n + 1)] += weight
    got_logz, got = family.log_partition_and_marginals(scores)
    assert got_logz == pytest.approx(logz, abs=1e-9)
    assert np.allclose(got, want, atol=1e-9)
    assert np.allclose(family.marginals(scores), want, atol=1e-9)
    # k-best: the family's trees in score order, and no tree outside it
    k = min(5, len(trees))
    heads, kscores = family.kbest(scores, 5)
    assert len(heads) == k
    assert np.allclose(kscores, np.sort(values)[::-1][:k])
    allowed = {tuple(t) for t in trees}
    assert all(tuple(h) in allowed for h in heads)
    # MBR: the family's tree with the largest sum of marginals
    gains = np.array([want[t[1:], np.arange(1, n + 1)].sum() for t in trees])
    assert np.isclose(want[family.mbr(want)[1:], np.arange(1, n + 1)].sum(), gains.max())


def test_vine_marginals_are_the_gradient_of_log_z():
    rng = np.random.default_rng(3)
    n, family = 6, VineTrees(max_length=2)
    scores = rng.normal(0, 1, (n + 1, n + 1))
    mu = family.marginals(scores)
    eps = 1e-6
    for h, m in [(0, 3), (2, 3), (4, 3), (5, 6), (1, 2)]:
        up, down = scores.copy(), scores.copy()
        up[h, m] += eps
        down[h, m] -= eps
        fd = (family.log_partition(up) - family.log_partition(down)) / (2 * eps)
        assert fd == pytest.approx(mu[h, m], abs=1e-6)
    assert mu[1, 4] == 0.0 and mu[6, 2] == 0.0        # longer than the bound: no mass


def test_vine_batches_labels_and_large_scores():
    rng = np.random.default_rng(4)
    family = VineTrees(max_length=2)
    mats = [rng.normal(0, 1, (k + 1, k + 1)) for k in (3, 6, 5)]
    batch, lengths = pad_batch(mats)
    heads = family.decode(batch, lengths)
    logz, mu = family.log_partition_and_marginals(batch, lengths)
    for b, s in enumerate(mats):
        n1 = s.shape[0]
        assert np.array_equal(heads[b, :n1], family.decode(s))
        assert logz[b] == pytest.approx(family.log_partition(s), abs=1e-9)
        assert np.allclose(mu[b, :n1, :n1], family.marginals(s), atol=1e-9)
    labeled = rng.normal(0, 1, (6, 6, 3))
    assert family.log_partition(labeled, labeled=True) == pytest.approx(
        family.log_partition(logsumexp(labeled, axis=-1)), abs=1e-9)
    big = 1e4 * rng.normal(0, 1, (7, 7))
    assert np.isfinite(family.log_partition(big))
    assert np.isfinite(family.marginals(big)).all()


def test_vine_is_registered_and_trains_a_parser(tmp_path):
    assert "vine" in family_names()
    assert tree_structure("vine", single_root=False) == VineTrees(False)
    with pytest.raises(ValueError, match="vine"):
        tree_structure("no-such-family")
    import arboreal
    from arboreal.models import Parser

    train = arboreal.read_conllu("data/sample/en_ewt-sample-train.conllu")[:60]
    parser = Parser.train(train, decoder="vine", epochs=1, hash_bits=16)
    path = tmp_path / "vine.model"
    parser.save(path)
    loaded = arboreal.load(path)
    assert loaded.decoder == "vine"
    out = loaded.parse(train[:20])
    bound = VineTrees().max_length
    for s in out:
        m = np.arange(1, len(s.heads))
        h = np.asarray(s.heads)[1:]
        assert ((h == 0) | (np.abs(h - m) <= bound)).all()
    assert [list(s.heads) for s in out] == [list(s.heads) for s in parser.parse(train[:20])]


def test_objectives_take_the_family():
    from arboreal.learn.objectives import OBJECTIVES

    rng = np.random.default_rng(5)
    n, family = 6, VineTrees(max_length=2)
    scores = rng.normal(0, 1, (1, n + 1, n + 1))
    trees = vine_trees(n, 2, True)
    gold = trees[7][None]
    lengths = np.array([n])
    loss, grad = OBJECTIVES["crf"](scores, gold, lengths, family)
    values = tree_scores(scores[0], trees)
    assert loss[0] == pytest.approx(logsumexp(values) - tree_scores(scores[0], gold)[0])
    assert np.allclose(grad[0], family.marginals(scores[0]) - family.indicators(gold[0]))
    loss, grad = OBJECTIVES["hinge"](scores, gold, lengths, family)
    wrong = (trees[:, 1:] != gold[0, 1:]).sum(axis=1)
    assert loss[0] == pytest.approx((values + wrong).max() - tree_scores(scores[0], gold)[0])


def test_learners_with_flag_kernels_refuse_other_families():
    from arboreal.features import FeatureSet
    from arboreal.learn import TrainingData, get_learner

    import arboreal

    train = arboreal.read_conllu("data/sample/en_ewt-sample-train.conllu")[:5]
    fs = FeatureSet("default", bits=12).fit(train)
    data = TrainingData(fs, fs.encode(train), [s.heads for s in train], VineTrees())
    with pytest.raises(ValueError, match="eisner or cle"):
        get_learner("eg").start(data)
