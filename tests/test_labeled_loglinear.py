"""Jointly labeled log-linear training through the labeled partition function."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from brute_force import all_trees

from arboreal.features import FeatureSet
from arboreal.features.labels import LabelFeatures
from arboreal.io.sentence import Sentence
from arboreal.learn import LEARNERS, TrainingData
from arboreal.learn.labeled_loglinear import (LabeledBuckets, LabeledLogLinear, decode_labeled,
                                              labeled_objective)
from arboreal.inference.structure import projective_or_not

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
MODES = [(p, r) for p in (True, False) for r in (True, False)]


@pytest.fixture(scope="module")
def sample():
    from arboreal.io.conllu import read_conllu

    return read_conllu(SAMPLE / "en_ewt-sample-train.conllu")


def _small_sentences(sample, lengths, L, projective, single_root, seed):
    """Prefixes of real sentences with random gold trees of the mode and random labels."""
    rng = np.random.default_rng(seed)
    out = []
    for k, n in enumerate(lengths):
        s = sample[k]
        if n <= 6:
            T = all_trees(n, projective=projective, single_root=single_root)
            heads = T[rng.integers(len(T))][1:]
        else:  # a chain: valid in every mode
            heads = np.arange(n)
        labels = [f"l{j}" for j in rng.integers(L, size=n)]
        out.append(Sentence.from_columns(s.forms[1:n + 1], heads, labels,
                                         lemmas=s.lemmas[1:n + 1], upos=s.upos[1:n + 1],
                                         xpos=s.xpos[1:n + 1], feats=s.feats[1:n + 1]))
    return out


def _data(sents, L, projective, single_root, bits=10, label_bits=8):
    fs = FeatureSet("default", bits=bits).fit(sents)
    enc = fs.encode(sents)
    labels = np.array([f"l{j}" for j in range(L)])
    lf = LabelFeatures.for_features(fs, labels, bits=label_bits)
    index = {lab: i for i, lab in enumerate(labels)}
    gold = [np.array([-1] + [index[d] for d in s.deprels[1:]]) for s in sents]
    return TrainingData(fs, enc, [np.asarray(s.heads, dtype=np.int64) for s in sents],
                           projective_or_not(projective, single_root),
                           extra={"label_features": lf, "labels": gold})


def _brute_logz(S, projective, single_root):
    """log sum over every tree and every labeling of exp(score), by enumeration."""
    n, L = S.shape[0] - 1, S.shape[2]
    totals = []
    ms = np.arange(1, n + 1)
    for heads in all_trees(n, projective=projective, single_root=single_root):
        arc = S[heads[1:], ms]  # (n, L)
        for lab in np.ndindex(*(L,) * n):
            totals.append(arc[np.arange(n), lab].sum())
    totals = np.array(totals)
    return totals.max() + np.log(np.exp(totals - totals.max()).sum())


def test_registry_names_the_labeled_learner():
    assert LEARNERS["loglinear-labeled"] is LabeledLogLinear
    assert LabeledLogLinear.labeled


def test_label_scores_are_the_adjoint_of_accumulate(sample):
    """v . accumulate(coef) == sum(coef * scores(v)) for random v and coef."""
    sents = _small_sentences(sample, [6, 9], 3, False, False, 0)
    data = _data(sents, 3, False, False)
    lf = data.extra["label_features"]
    rng = np.random.default_rng(1)
    v = rng.normal(size=lf.dim)
    for enc in data.encoded:
        G = lf.scores(enc, v)
        n = enc.n
        assert G.shape == (n + 1, n + 1, 3)
        coef = rng.normal(size=G.shape)
        coef[:, 0] = 0.0
        coef[np.arange(n + 1), np.arange(n + 1)] = 0.0
        out = np.zeros(lf.dim)
        lf.accumulate(enc, coef, out, 1.0)
        assert float(out @ v) == pytest.approx(float((coef * G).sum()), rel=1e-10)


@pytest.mark.parametrize("projective,single_root", MODES)
def test_labeled_log_z_matches_enumeration(sample, projective, single_root):
    """The objective's log Z terms equal brute force over all labeled trees (n <= 4)."""
    for L, lengths in ((2, [1, 2, 4, 3]), (3, [3, 4])):
        sents = _small_sentences(sample, lengths, L, projective, single_root, L)
        data = _data(sents, L, projective, single_root)
        lb = LabeledBuckets(data)
        rng = np.random.default_rng(7)
        x = rng.normal(0, 0.5, size=lb.dim)
        C = 0.9
        value, _ = labeled_objective(lb, x, C, projective_or_not(projective, single_root))
        expect = 0.5 * float(x @ x)
        for i, enc in enumerate(data.encoded):
            S = (data.features.arc_scores(enc, x[: lb.dim_w])[:, :, None]
                 + data.extra["label_features"].scores(enc, x[lb.dim_w:]))
            h, lab = data.heads[i], data.extra["labels"][i]
            gold = S[h[1:], np.arange(1, enc.n + 1), lab[1:]].sum()
            expect += C * (_brute_logz(S, projective, single_root) - gold)
        assert value == pytest.approx(expect, rel=1e-10)


@pytest.mark.parametrize("projective,single_root", MODES)
def test_gradient_matches_finite_differences(sample, projective, single_root):
    sents = _small_sentences(sample, [3, 5, 4, 6], 3, projective, single_root, 11)
    data = _data(sents, 3, projective, single_root)
    lb = LabeledBuckets(data)
    active = lb.active_labeled()
    rng = np.random.default_rng(3)
    x = np.zeros(lb.dim)
    x[active] = rng.normal(0, 0.3, size=len(active))
    C = 1.3
    value, grad = labeled_objective(lb, x, C, projective_or_not(projective, single_root))
    # coordinates of w and of each part of v (hashed rows, D, P), plus a random direction
    w_act = active[active < lb.dim_w]
    v_act = active[active >= lb.dim_w]
    pick = np.concatenate([rng.choice(w_act, 8, replace=False), rng.choice(v_act, 24, replace=False),
                           v_act[-6:]])
    eps = 1e-5
    for j in pick:
        e = np.zeros(lb.dim)
        e[j] = eps
        fd = (labeled_objective(lb, x + e, C, projective_or_not(projective, single_root))[0]
              - labeled_objective(lb, x - e, C, projective_or_not(projective, single_root))[0]) / (2 * eps)
        assert grad[j] == pytest.approx(fd, rel=1e-5, abs=1e-6)
    d = np.zeros(lb.dim)
    d[active] = rng.normal(size=len(active))
    fd = (labeled_objective(lb, x + eps * d, C, projective_or_not(projective, single_root))[0]
          - labeled_objective(lb, x - eps * d, C, projective_or_not(projective, single_root))[0]) / (2 * eps)
    assert float(grad @ d) == pytest.approx(fd, rel=1e-5)
    # untouched coordinates have a purely regularizer gradient (= x = 0)
    inactive = np.setdiff1d(np.arange(lb.dim), active)
    assert not grad[inactive].any()


def test_decode_labeled_is_the_best_labeled_tree(sample):
    """argmax-label then decode == brute-force best labeled tree (n = 4, L = 3)."""
    sents = _small_sentences(sample, [4, 4, 3], 3, True, True, 5)
    for projective in (True, False):
        data = _data(sents, 3, projective, True)
        lf = data.extra["label_features"]
        rng = np.random.default_rng(9)
        w = rng.normal(size=data.features.dim)
        v = rng.normal(size=lf.dim)
        for enc in data.encoded:
            heads, labels = decode_labeled(data.features, lf, enc, w, v, projective_or_not(projective, True))
            S = data.features.arc_scores(enc, w)[:, :, None] + lf.scores(enc, v)
            n = enc.n
            ms = np.arange(1, n + 1)
            best = max(S[t[1:], ms].max(axis=-1).sum()
                       for t in all_trees(n, projective=projective, single_root=True))
            assert S[heads[1:], ms, labels[1:]].sum() == pytest.approx(best, rel=1e-12)


@pytest.fixture(scope="module")
def tiny(sample):
    from arboreal.trees.properties import is_projective as _is_projective

    return [s for s in sample if 3 <= len(s) <= 15 and _is_projective(s.heads)][:25]


@pytest.fixture(scope="module")
def joint_model(tiny):
    from arboreal.models import Parser

    return Parser.train(tiny, learner="loglinear-labeled", epochs=15, C=100.0, hash_bits=16,
                        label_feature_bits=12)


def test_joint_model_fits_its_training_data(tiny, joint_model):
    from arboreal.models import attachment_scores

    assert joint_model.label_features is not None
    assert joint_model.meta["training"]["joint_labels"]
    assert not joint_model.labeler.W.any()  # labels do not come from the labeler
    heads, labels = joint_model.predict(tiny)
    uas, las = attachment_scores(tiny, heads, labels)
    assert (uas, las) == (100.0, 100.0)


def test_joint_model_save_load_round_trip(tmp_path, tiny, joint_model):
    from arboreal.models import load_model

    path = tmp_path / "joint.model"
    joint_model.save(path)
    loaded = load_model(path)
    assert loaded.label_features is not None
    np.testing.assert_array_equal(loaded.label_weights, joint_model.label_weights)
    a, b = joint_model.predict(tiny), loaded.predict(tiny)
    for x, y in zip(a[0] + a[1], b[0] + b[1]):
        assert (np.asarray(x) == np.asarray(y)).all()


def test_two_stage_model_files_still_load_without_label_features(tmp_path, tiny):
    from arboreal.models import Parser, load_model

    p = Parser.train(tiny[:8], learner="perceptron", epochs=1, hash_bits=14, label_bits=12)
    p.save(tmp_path / "two.model")
    q = load_model(tmp_path / "two.model")
    assert q.label_features is None and q.label_weights is None
    assert [list(x) for x in q.predict(tiny[:8])[1]] == [list(x) for x in p.predict(tiny[:8])[1]]


def test_cli_labeled_learner(tmp_path, sample):
    from arboreal.cli import main
    from arboreal.io.conllu import write_conllu

    model = tmp_path / "m.model"
    out = tmp_path / "out.conllu"
    train = tmp_path / "train.conllu"
    write_conllu(sample[:40], train)
    assert main(["train", str(train), "-o", str(model), "--learner", "loglinear-labeled",
                 "--epochs", "2", "--hash-bits", "14", "--quiet"]) == 0
    from arboreal.models import load_model

    assert load_model(model).label_features is not None
    assert main(["parse", str(model), str(SAMPLE / "en_ewt-sample-test.conllu"), "-o", str(out)]) == 0
    assert out.read_text().strip()
    assert main(["train", str(train), "-o", str(model), "--learner", "loglinear-labeled",
                 "--order", "2", "--quiet"]) == 2
