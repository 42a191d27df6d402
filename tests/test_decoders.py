"""Exact decoders: Eisner, k-best Eisner, Chu-Liu-Edmonds, MBR.

Checked against brute-force enumeration of every tree (n <= 6) in every mode
(projective / non-projective x single / multi root), against an independent
slow recursive Chu-Liu-Edmonds for medium n, and for batch/single agreement,
float32 input, forbidden (-inf) arcs and input validation.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brute_force import all_trees, tree_scores

# Import the modules directly (not arboreal.inference) so these tests do not
# depend on the partition-function module.
from arboreal.inference.eisner import eisner, eisner_kbest
from arboreal.inference.kbest import kbest
from arboreal.inference.mbr import mbr_decode
from arboreal.inference.mst import chu_liu_edmonds

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------
def make_scores(n: int, kind: str, seed: int, dtype=np.float64) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "normal":
        s = rng.normal(size=(n + 1, n + 1))
    elif kind == "ties":           # many equal scores: exercises tie-breaking
        s = rng.integers(0, 3, size=(n + 1, n + 1)).astype(float)
    elif kind == "large":          # peaked scores as trained models produce
        s = rng.normal(scale=1e4, size=(n + 1, n + 1))
    elif kind == "forbidden":      # some arcs forbidden; maybe no tree at all
        s = rng.normal(size=(n + 1, n + 1))
        s[rng.random(s.shape) < 0.35] = -np.inf
    else:
        raise AssertionError(kind)
    return s.astype(dtype)


def is_tree(heads: np.ndarray, single_root: bool) -> bool:
    n = len(heads) - 1
    if heads[0] != -1:
        return False
    if n == 0:
        return True
    if ((heads[1:] < 0) | (heads[1:] > n) | (heads[1:] == np.arange(1, n + 1))).any():
        return False
    # every word reaches the root: walk all words up in lock-step
    cur = np.arange(1, n + 1)
    for _ in range(n):
        cur = np.where(cur == 0, 0, heads[cur])
    if (cur != 0).any():
        return False
    return not single_root or int((heads[1:] == 0).sum()) == 1


def is_projective(heads: np.ndarray) -> bool:
    n = len(heads) - 1
    for m in range(1, n + 1):
        h = heads[m]
        for m2 in range(1, n + 1):
            h2 = heads[m2]
            a, b = sorted((h, m))
            c, d = sorted((h2, m2))
            if a < c < b < d or c < a < d < b:   # crossing arcs
                return False
    return True


def tree_score(scores: np.ndarray, heads: np.ndarray) -> float:
    return float(tree_scores(np.asarray(scores, dtype=np.float64), heads[None])[0])


def tol(scores: np.ndarray) -> float:
    finite = np.abs(scores[np.isfinite(scores)])
    return 1e-9 * (1.0 + (finite.max() if finite.size else 0.0)) * scores.shape[0]


modes = st.sampled_from([(True, True), (True, False), (False, True), (False, False)])
kinds = st.sampled_from(["normal", "ties", "large", "forbidden"])
dtypes = st.sampled_from([np.float64, np.float32])


# ---------------------------------------------------------------------------
# argmax against brute force
# ---------------------------------------------------------------------------
@SETTINGS
@given(n=st.integers(1, 6), mode=modes, kind=kinds, dtype=dtypes, seed=st.integers(0, 2**31))
def test_argmax_matches_brute_force(n, mode, kind, dtype, seed):
    projective, single_root = mode
    s = make_scores(n, kind, seed, dtype)
    trees = all_trees(n, projective, single_root)
    best = tree_scores(s.astype(np.float64), trees).max()
    decode = eisner if projective else chu_liu_edmonds
    if not np.isfinite(best):
        with pytest.raises(ValueError, match="no .*tree with a finite score"):
            decode(s, single_root=single_root)
        return
    heads = decode(s, single_root=single_root)
    assert heads.shape == (n + 1,)
    assert is_tree(heads, single_root)
    if projective:
        assert is_projective(heads)
    assert abs(tree_score(s, heads) - best) <= tol(s)
    # deterministic
    assert np.array_equal(decode(s, single_root=single_root), heads)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 6), single_root=st.booleans(), kind=kinds, dtype=dtypes,
       k=st.integers(1, 8), seed=st.integers(0, 2**31))
@pytest.mark.parametrize("projective", [True, False])
def test_kbest_matches_brute_force(projective, n, single_root, kind, dtype, k, seed):
    s = make_scores(n, kind, seed, dtype)
    trees = all_trees(n, projective, single_root)
    enum = np.sort(tree_scores(s.astype(np.float64), trees))[::-1]
    enum = enum[np.isfinite(enum)][:k]
    if enum.size == 0:
        with pytest.raises(ValueError, match="no .*tree with a finite score"):
            kbest(s, k, projective, single_root=single_root)
        return
    heads, scores = kbest(s, k, projective, single_root=single_root)
    assert heads.shape == (enum.size, n + 1) and scores.shape == (enum.size,)
    np.testing.assert_allclose(scores, enum, rtol=0, atol=tol(s))
    assert (np.diff(scores) <= 0).all()                      # best first
    assert len({tuple(h) for h in heads}) == len(heads)      # distinct
    for h, sc in zip(heads, scores):
        assert is_tree(h, single_root) and (not projective or is_projective(h))
        assert abs(tree_score(s, h) - sc) <= tol(s)
    # the first tree is an argmax, as the 1-best decoder's
    decode = eisner if projective else chu_liu_edmonds
    assert abs(tree_score(s, decode(s, single_root=single_root)) - scores[0]) <= tol(s)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 5), single_root=st.booleans(),
       kind=st.sampled_from(["normal", "ties", "forbidden"]), seed=st.integers(0, 2**31))
@pytest.mark.parametrize("projective", [True, False])
def test_kbest_enumerates_every_tree(projective, n, single_root, kind, seed):
    # k above the number of trees: every finite tree exactly once, best first (large
    # k also makes the lazy k-best grow its heap pool)
    s = make_scores(n, kind, seed)
    trees = all_trees(n, projective, single_root)
    sc = tree_scores(s, trees)
    finite = trees[np.isfinite(sc)]
    if len(finite) == 0:
        return
    heads, scores = kbest(s, len(trees) + 3, projective, single_root=single_root)
    assert len(heads) == len(finite)
    assert {tuple(h) for h in heads} == {tuple(h) for h in finite}
    assert (np.diff(scores) <= 0).all()
    np.testing.assert_allclose(scores, tree_scores(s, heads), rtol=0, atol=tol(s))


def test_kbest_rejects_bad_scores():
    s = np.zeros((4, 4))
    s[1, 2] = np.nan
    for projective in (True, False):
        with pytest.raises(ValueError, match="NaN"):
            kbest(s, 3, projective)
        with pytest.raises(ValueError, match="k must be"):
            kbest(np.zeros((3, 3)), 0, projective)


# ---------------------------------------------------------------------------
# batches
# ---------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31), single_root=st.booleans(), dtype=dtypes,
       B=st.sampled_from([7, 37]), ties=st.booleans())
def test_batched_equals_single(seed, single_root, dtype, B, ties):
    # B = 37 takes the batched Eisner kernel's 8-sentence chunks
    rng = np.random.default_rng(seed)
    N = 12
    lengths = rng.integers(0, N + 1, size=B)
    lengths[0] = N
    if ties:
        batch = rng.integers(0, 3, size=(B, N + 1, N + 1)).astype(dtype)
    else:
        batch = rng.normal(size=(B, N + 1, N + 1)).astype(dtype)
    for b, n in enumerate(lengths):          # padding must be ignored
        batch[b, n + 1:, :] = np.nan
        batch[b, :, n + 1:] = np.nan
    k = 4
    for decode in (eisner, chu_liu_edmonds):
        out = decode(batch, single_root=single_root, lengths=lengths)
        assert out.shape == (B, N + 1) and out.dtype.kind == "i"
        for b, n in enumerate(lengths):
            one = decode(batch[b, :n + 1, :n + 1], single_root=single_root)
            assert np.array_equal(out[b, :n + 1], one)
            assert (out[b, n + 1:] == -1).all()
    kh, ks = eisner_kbest(batch, k, single_root=single_root, lengths=lengths)
    assert kh.shape == (B, k, N + 1) and ks.shape == (B, k)
    for b, n in enumerate(lengths):
        h1, s1 = eisner_kbest(batch[b, :n + 1, :n + 1], k, single_root=single_root)
        kk = len(s1)
        assert np.array_equal(kh[b, :kk, :n + 1], h1)
        assert np.array_equal(ks[b, :kk], s1)
        assert (kh[b, kk:] == -1).all() and (kh[b, :, n + 1:] == -1).all()
        assert np.isneginf(ks[b, kk:]).all()


@settings(max_examples=20, deadline=None)
@given(n=st.integers(7, 40), seed=st.integers(0, 2**31), single_root=st.booleans())
def test_planted_tree_recovered(n, seed, single_root):
    # medium n: a projective tree whose arcs get +100 over N(0, 1) noise is
    # the unique argmax for every decoder
    rng = np.random.default_rng(seed)
    planted = eisner(rng.normal(size=(n + 1, n + 1)), single_root=single_root)
    assert is_tree(planted, single_root) and is_projective(planted)
    s = rng.normal(size=(n + 1, n + 1))
    s[planted[1:], np.arange(1, n + 1)] += 100.0
    assert np.array_equal(eisner(s, single_root=single_root), planted)
    assert np.array_equal(chu_liu_edmonds(s, single_root=single_root), planted)
    h, sc = eisner_kbest(s, 3, single_root=single_root)
    assert np.array_equal(h[0], planted) and len(h) == 3
    assert sc[1] < sc[0] - 50                 # every other tree misses a bonus
    batch = np.repeat(s[None], 17, axis=0)    # the chunked batch kernel
    assert (eisner(batch, single_root=single_root) == planted).all()


def test_fewer_trees_than_k():
    s = np.zeros((3, 3))                      # n = 2: 2 single-root, 3 multi-root trees
    h, sc = eisner_kbest(s, 10)
    assert h.shape == (2, 3) and sc.shape == (2,)
    h, sc = eisner_kbest(s, 10, single_root=False)
    assert h.shape == (3, 3)
    batch_h, batch_s = eisner_kbest(np.zeros((2, 3, 3)), 5, lengths=np.array([2, 1]))
    assert np.isneginf(batch_s[0, 2:]).all() and np.isneginf(batch_s[1, 1:]).all()
    assert np.array_equal(batch_h[1, 0], [-1, 0, -1])


def test_empty_and_one_word():
    assert np.array_equal(eisner(np.zeros((1, 1))), [-1])
    assert np.array_equal(chu_liu_edmonds(np.zeros((1, 1))), [-1])
    h, sc = eisner_kbest(np.zeros((1, 1)), 3)
    assert np.array_equal(h, [[-1]]) and np.array_equal(sc, [0.0])
    for sr in (True, False):
        assert np.array_equal(eisner(np.ones((2, 2)), single_root=sr), [-1, 0])
        assert np.array_equal(chu_liu_edmonds(np.ones((2, 2)), single_root=sr), [-1, 0])


# ---------------------------------------------------------------------------
# Chu-Liu-Edmonds on larger graphs
# ---------------------------------------------------------------------------
def _ref_mst(s: np.ndarray) -> np.ndarray:
    """Slow textbook recursive Chu-Liu-Edmonds (multi-root), finite scores."""
    n1 = s.shape[0]
    w = s.astype(np.float64).copy()
    np.fill_diagonal(w, -np.inf)
    w[:, 0] = -np.inf
    heads = np.full(n1, -1)
    heads[1:] = np.argmax(w[:, 1:], axis=0)
    # find a cycle
    for start in range(1, n1):
        seen, v = [], start
        while v != 0 and v not in seen:
            seen.append(v)
            v = heads[v]
        if v != 0:
            cycle = seen[seen.index(v):]
            break
    else:
        return heads
    cyc = set(cycle)
    rest = [v for v in range(n1) if v not in cyc]     # rest[0] == 0
    c = len(rest)                                      # index of the new node
    idx = {v: i for i, v in enumerate(rest)}
    w2 = np.full((c + 1, c + 1), -np.inf)
    enter, leave = {}, {}
    for u in rest:
        for v in rest:
            if u != v:
                w2[idx[u], idx[v]] = w[u, v]
        gains = [(w[u, v] - w[heads[v], v], v) for v in cycle]
        g, v = max(gains)
        w2[idx[u], c], enter[u] = g, v
        if u != 0:
            g, x = max((w[x, u], x) for x in cycle)
            w2[c, idx[u]], leave[u] = g, x
    h2 = _ref_mst(w2)
    out = heads.copy()
    for v in rest[1:]:
        out[v] = leave[v] if h2[idx[v]] == c else rest[h2[idx[v]]]
    u = rest[h2[c]]
    out[enter[u]] = u
    return out


def _ref_single_root(s: np.ndarray) -> float:
    """Best single-root score: for every root child r, forbid all other root
    arcs (finite big penalty) and take the multi-root MST."""
    best = -np.inf
    for r in range(1, s.shape[0]):
        t = s.copy()
        t[0, 1:] = -1e9
        t[0, r] = s[0, r]
        best = max(best, tree_score(s, _ref_mst(t)))
    return best


@settings(max_examples=30, deadline=None)
@given(n=st.integers(7, 25), seed=st.integers(0, 2**31), ties=st.booleans())
def test_cle_matches_reference_medium(n, seed, ties):
    s = make_scores(n, "ties" if ties else "normal", seed)
    h_multi = chu_liu_edmonds(s, single_root=False)
    h_single = chu_liu_edmonds(s, single_root=True)
    assert is_tree(h_multi, False) and is_tree(h_single, True)
    assert abs(tree_score(s, h_multi) - tree_score(s, _ref_mst(s))) < 1e-9
    assert abs(tree_score(s, h_single) - _ref_single_root(s)) < 1e-9


def _greedy_repaired(s: np.ndarray) -> np.ndarray:
    """A cheap valid single-root tree: greedy heads, one root child, every
    cycle broken by attaching one of its words to that root child."""
    n = s.shape[0] - 1
    w = s.copy()
    np.fill_diagonal(w, -np.inf)
    heads = np.concatenate([[-1], np.argmax(w[:, 1:], axis=0)])
    r = int(np.argmax(s[0, 1:])) + 1
    heads[heads == 0] = r
    heads[r] = 0
    for m in range(1, n + 1):
        path, v = [], m
        while v != 0 and v not in path:
            path.append(v)
            v = heads[v]
        if v != 0:
            heads[v] = r
    return heads


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cle_1000_words(dtype):
    rng = np.random.default_rng(7)
    n = 1000
    s = rng.normal(size=(n + 1, n + 1)).astype(dtype)
    h = chu_liu_edmonds(s)
    assert is_tree(h, True)
    greedy = _greedy_repaired(s)
    assert is_tree(greedy, True)
    sc = tree_score(s, h)
    assert sc >= tree_score(s, greedy) - 1e-6
    assert sc >= tree_score(s, eisner(s)) - 1e-6
    hm = chu_liu_edmonds(s, single_root=False)
    assert is_tree(hm, False) and tree_score(s, hm) >= sc - 1e-6


def test_cle_large_scores_exact_single_root():
    # scores of magnitude 1e4 in float32 with root arcs 0.01 apart: the
    # single-root constraint must not cost precision (a float penalty of
    # n * spread ~ 1e6 would leave float32 steps of 0.06 between them).
    rng = np.random.default_rng(3)
    s = rng.normal(scale=1e4, size=(15, 15)).astype(np.float32)
    s[0, 1:] = np.float32(1e4) + np.arange(14, dtype=np.float32) * np.float32(0.01)
    h = chu_liu_edmonds(s)
    assert is_tree(h, True)
    assert abs(tree_score(s, h) - _ref_single_root(s.astype(np.float64))) < 1e-6


def test_forbidden_arcs_respected():
    rng = np.random.default_rng(0)
    s = rng.normal(size=(9, 9))
    s[0, 2:] = -np.inf                        # only word 1 may attach to the root
    s[3, 4] = s[4, 5] = -np.inf
    for decode in (eisner, chu_liu_edmonds):
        for sr in (True, False):
            h = decode(s, single_root=sr)
            assert np.isfinite(tree_score(s, h)) and h[1] == 0
    s2 = np.full((4, 4), -np.inf)
    s2[0, 1] = s2[0, 2] = s2[0, 3] = 0.0      # only root arcs: multi-root only
    assert np.array_equal(chu_liu_edmonds(s2, single_root=False), [-1, 0, 0, 0])
    with pytest.raises(ValueError, match="no single-root tree"):
        chu_liu_edmonds(s2)
    with pytest.raises(ValueError, match="no projective single-root tree"):
        eisner(s2)
    with pytest.raises(ValueError, match="sentence 1 of the batch"):
        chu_liu_edmonds(np.stack([np.zeros((4, 4)), s2]))


# ---------------------------------------------------------------------------
# MBR
# ---------------------------------------------------------------------------
def _enum_marginals(s, trees):
    sc = tree_scores(s, trees)
    p = np.exp(sc - sc.max())
    p /= p.sum()
    n = trees.shape[1] - 1
    mu = np.zeros_like(s)
    np.add.at(mu, (trees[:, 1:], np.broadcast_to(np.arange(1, n + 1), trees[:, 1:].shape)),
              p[:, None])
    return mu


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 6), mode=modes, seed=st.integers(0, 2**31))
def test_mbr_maximises_expected_correct_arcs(n, mode, seed):
    projective, single_root = mode
    s = make_scores(n, "normal", seed) * 2
    trees = all_trees(n, projective, single_root)
    mu = _enum_marginals(s, trees)
    h = mbr_decode(mu, projective=projective, single_root=single_root)
    assert is_tree(h, single_root) and (not projective or is_projective(h))
    assert abs(tree_score(mu, h) - tree_scores(mu, trees).max()) < 1e-12
    hb = mbr_decode(mu[None], projective=projective, single_root=single_root,
                    lengths=np.array([n]))
    assert np.array_equal(hb[0], h)


# ---------------------------------------------------------------------------
# input validation
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("decode", [
    eisner, chu_liu_edmonds, lambda s, **kw: eisner_kbest(s, 3, **kw),
    lambda s, **kw: mbr_decode(s, **kw)])
def test_bad_input(decode):
    with pytest.raises(ValueError, match="shape"):
        decode(np.zeros(4))
    with pytest.raises(ValueError, match="square"):
        decode(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="lengths"):
        decode(np.zeros((2, 4, 4)), lengths=np.array([3]))
    with pytest.raises(ValueError, match="lengths"):
        decode(np.zeros((2, 4, 4)), lengths=np.array([3, 4]))
    s = np.zeros((4, 4))
    s[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        decode(s)
    s[1, 2] = np.inf
    with pytest.raises(ValueError, match=r"\+inf"):
        decode(s)
    # NaN on the ignored diagonal / column 0 is fine
    s = np.zeros((4, 4))
    s[2, 2] = s[3, 0] = np.nan
    decode(s)


def test_bad_k_and_mbr_neginf():
    with pytest.raises(ValueError, match="k must be"):
        eisner_kbest(np.zeros((3, 3)), 0)
    mu = np.full((3, 3), 0.5)
    mu[0, 1] = -np.inf
    with pytest.raises(ValueError, match="-inf"):
        mbr_decode(mu)
