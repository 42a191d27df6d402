"""MIRA updates from explicit feature ids (learn/mira.py) against the sparse-matrix
formulation: constraint vectors as scipy CSR rows, Gram matrix M M^T, Hildreth,
delta = M^T alpha. The kernel must give the same weights bit for bit."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from arboreal.features import FeatureSet
from arboreal.inference.eisner import eisner_kbest
from arboreal.learn import TrainingData
from arboreal.learn.hildreth import hildreth
from arboreal.learn.mira import (FactoredMira, KBestMira, _HashScratch, _pairwise_sum,
                                 _solve_apply)
from arboreal.inference.structure import projective_or_not

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "en_ewt-sample-train.conllu"


@pytest.fixture(scope="module", params=[None, "lexical"])
def setup(request):
    """The data, with and without lexical features (whose distance features are
    real-valued: the updates then weigh ids by their values)."""
    from arboreal.features.lexical import NO_LEXICON_TEMPLATES
    from arboreal.io.conllu import read_conllu

    sents = [s for s in read_conllu(SAMPLE) if 2 <= len(s) <= 30][:12]
    fs = FeatureSet("mcdonald", bits=16, lexical_templates=NO_LEXICON_TEMPLATES
                    if request.param else None).fit(sents)
    data = TrainingData(fs, fs.encode(sents), [s.heads.astype(np.int64) for s in sents])
    return fs, data


def _reference(fs, enc, cons, C, closed_form_single, w, u, c):
    """The update with explicit sparse constraint vectors (scipy)."""
    b, arc_h, arc_m, con_ptr, con_arc, con_coef = cons
    k = b.shape[0]
    rows = np.repeat(np.arange(k), np.diff(con_ptr))
    offsets, ids, vals = fs.arc_features(enc, arc_h[con_arc], arc_m[con_arc])
    counts = np.diff(offsets)
    U, cols = np.unique(ids, return_inverse=True)
    M = sp.csr_matrix((np.repeat(con_coef, counts) * vals, (np.repeat(rows, counts), cols)),
                      shape=(k, len(U)))
    M.sum_duplicates()
    G = (M @ M.T).toarray()
    if closed_form_single and k == 1:
        if G[0, 0] <= 0:
            return False
        alpha = np.array([min(C, max(0.0, b[0] / G[0, 0]))])
    else:
        alpha = hildreth(G, b, C)
    if not alpha.any():
        return False
    delta = np.asarray(M.T @ alpha).ravel()
    w[U] += delta.astype(np.float32)
    u[U] += (c * delta).astype(np.float32)
    return True


@pytest.mark.parametrize("learner", ["kbest", "kbest1", "factored"])
@pytest.mark.parametrize("C", [np.inf, 0.05])
def test_update_matches_sparse_reference(setup, learner, C):
    fs, data = setup
    rng = np.random.default_rng(3)
    scratch = _HashScratch()
    if learner == "factored":
        lrn = FactoredMira(C=C, max_per_word=3)
    else:
        lrn = KBestMira(C=C, k=1 if learner == "kbest1" else 6)
    checked = 0
    for i, enc in enumerate(data.encoded):
        gold = data.heads[i]
        w = (rng.normal(size=fs.dim) * 0.3).astype(np.float32)
        u = (rng.normal(size=fs.dim)).astype(np.float32)
        scores = fs.arc_scores(enc, w)
        cons = lrn._constraints(data, enc, gold, scores)
        if cons is None:
            continue
        w_ref, u_ref = w.copy(), u.copy()
        c = float(rng.integers(1, 1000))
        changed_ref = _reference(fs, enc, cons, lrn.C, lrn._closed_form_single, w_ref, u_ref, c)
        offsets, ids, vals = fs.arc_features(enc, cons[1], cons[2])
        scratch.fit(ids.shape[0])
        b, _, _, con_ptr, con_arc, con_coef = cons
        changed = _solve_apply(offsets, ids, vals, con_ptr, con_arc, con_coef, b, lrn.C,
                               lrn._closed_form_single, w, u, c, scratch.keys, scratch.kcol,
                               10000, 1e-8)
        assert changed == changed_ref
        assert np.array_equal(w, w_ref) and np.array_equal(u, u_ref)
        assert (scratch.keys == -1).all()          # the hash table is left empty
        checked += changed
    assert checked >= 5


def test_tree_constraints(setup):
    fs, data = setup
    enc, gold = data.encoded[0], data.heads[0]
    n = enc.n
    scores = np.random.default_rng(0).normal(size=(n + 1, n + 1))
    trees, _ = eisner_kbest(scores, 4)
    trees = np.vstack([gold[None], trees])            # the gold tree gives no constraint
    cons = KBestMira._tree_constraints(gold, scores, trees)
    assert cons is not None
    b, arc_h, arc_m, con_ptr, con_arc, con_coef = cons
    wrong = [t for t in trees if (t[1:] != gold[1:]).any()]
    assert b.shape == (len(wrong),)
    assert len(set(zip(arc_h.tolist(), arc_m.tolist()))) == len(arc_h)   # distinct arcs
    for i, y in enumerate(wrong):
        ms = np.nonzero(y[1:] != gold[1:])[0] + 1
        margin = scores[gold[ms], ms].sum() - scores[y[ms], ms].sum()
        assert b[i] == len(ms) - margin
        sl = slice(con_ptr[i], con_ptr[i + 1])
        got = sorted(zip(arc_h[con_arc[sl]].tolist(), arc_m[con_arc[sl]].tolist(),
                         con_coef[sl].tolist()))
        want = sorted([(int(gold[m]), int(m), 1.0) for m in ms]
                      + [(int(y[m]), int(m), -1.0) for m in ms])
        assert got == want


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 700), seed=st.integers(0, 2**31))
def test_pairwise_sum_is_numpys(n, seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n) * 10.0 ** rng.integers(-3, 5, size=n)
    assert _pairwise_sum(a, 0, n) == 0.0 + a.sum()


def _first_constraint_tree(gold, cons):
    """The tree of the first constraint: gold with its -1 arcs."""
    _, arc_h, arc_m, con_ptr, con_arc, con_coef = cons
    y = gold.copy()
    for p in range(con_ptr[0], con_ptr[1]):
        if con_coef[p] < 0:
            y[arc_m[con_arc[p]]] = arc_h[con_arc[p]]
    return y


@settings(max_examples=80, deadline=None)
@given(n=st.integers(2, 6), projective=st.booleans(), single_root=st.booleans(),
       cost=st.sampled_from([0.0, 0.5, 1.0, 2.0]), kbest=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_constraint_tree_is_cost_augmented(n, projective, single_root, cost, kbest, seed):
    """1-best MIRA's constraint tree maximizes score + cost * wrong heads (brute force
    over every tree, ties allowed), its b is its loss minus its margin under the
    model's own scores, and with the default cost 1 it is the most violated margin
    constraint s(gold) - s(y) >= L(y); k-best MIRA's constraints include that one."""
    from types import SimpleNamespace

    from brute_force import all_trees, tree_scores

    from arboreal.learn.mira import Mira

    rng = np.random.default_rng(seed)
    trees = all_trees(n, projective, single_root)
    gold = trees[rng.integers(len(trees))]
    scores = rng.normal(size=(n + 1, n + 1)).round(1)   # ties are likely
    s_trees = tree_scores(scores, trees)
    s_gold = tree_scores(scores, gold[None])[0]
    loss = (trees[:, 1:] != gold[1:]).sum(axis=1)
    violation = loss - (s_gold - s_trees)
    best = (s_trees + cost * loss).max()
    data = SimpleNamespace(projective=projective, single_root=single_root,
                           structure=projective_or_not(projective, single_root))
    if kbest and projective:
        cons = KBestMira(k=3, cost=1.0)._constraints(data, None, gold, scores)
        assert np.isclose(0.0 if cons is None else cons[0].max(), max(0.0, violation.max()))
        return
    cons = Mira(cost=cost)._constraints(data, None, gold, scores)
    if cons is None:   # the tree found is gold or not violated
        argmax = np.isclose(s_trees + cost * loss, best)
        assert ((loss == 0) | (violation <= 1e-9))[argmax].any()
    else:
        y = _first_constraint_tree(gold, cons)
        s_y = tree_scores(scores, y[None])[0]
        l_y = int((y[1:] != gold[1:]).sum())
        assert np.isclose(s_y + cost * l_y, best)
        assert np.isclose(cons[0][0], l_y - (s_gold - s_y)) and cons[0][0] > 0
    if cost == 1.0:
        assert np.isclose(0.0 if cons is None else cons[0][0], max(0.0, violation.max()))
