"""Higher-order decoders against brute force over every projective tree (n <= 7).

The reference scorer here is written independently of the library: it lists the
parts of each tree in plain Python (conventions of arboreal.inference.higher_order)
and sums dense part tensors with numpy.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arboreal.inference.higher_order import (
    PartIndex,
    grand_sibling_decode,
    grand_tri_sibling_decode,
    grandparent_decode,
    hill_climb,
    hill_climb_sibling,
    prune_arcs,
    score_tree,
    sibling_decode,
    tri_sibling_decode,
)
from brute_force import all_trees

SETTINGS = dict(max_examples=12, deadline=None, derandomize=True)


# ---------------------------------------------------------------- enumeration
@lru_cache(maxsize=None)
def projective_trees(n: int, single_root: bool) -> np.ndarray:
    """Every projective tree over n words, via Eisner's unambiguous span derivation."""

    @lru_cache(maxsize=None)
    def complete(h: int, e: int) -> tuple:   # h heads every word strictly between h and e, and e
        if h == e:
            return ((),)
        d = 1 if e > h else -1
        out = []
        for m in range(h + d, e + d, d):
            for left in incomplete(h, m):
                for right in complete(m, e):
                    out.append(left + right)
        return tuple(out)

    @lru_cache(maxsize=None)
    def incomplete(h: int, m: int) -> tuple:  # arc h -> m and everything between
        out = []
        if m > h:
            for r in range(h, m):
                for a in complete(h, r):
                    for b in complete(m, r + 1):
                        out.append(a + b + ((m, h),))
        else:
            for r in range(m, h):
                for a in complete(m, r):
                    for b in complete(h, r + 1):
                        out.append(a + b + ((m, h),))
        return tuple(out)

    if single_root:
        arcsets = [((m, 0),) + a + b for m in range(1, n + 1)
                   for a in complete(m, 1) for b in complete(m, n)]
    else:
        arcsets = list(complete(0, n))
    trees = np.full((len(arcsets), n + 1), -1, dtype=np.int64)
    for i, arcs in enumerate(arcsets):
        for m, h in arcs:
            trees[i, m] = h
    return trees


def test_projective_enumerator_matches_brute_force():
    for n in range(1, 6):
        for single_root in (True, False):
            ours = {tuple(t) for t in projective_trees(n, single_root)}
            ref = {tuple(t) for t in all_trees(n, projective=True, single_root=single_root)}
            assert ours == ref and len(ours) == len(projective_trees(n, single_root))


# ---------------------------------------------------------------- reference scorer
def tree_parts(heads, outer_only=False):
    """Part tuples of one tree, by kind (the package's conventions, written out)."""
    n = len(heads) - 1
    parts = {"arc": [], "sib": [], "grand": [], "gsib": [], "trisib": []}
    for m in range(1, n + 1):
        parts["arc"].append((heads[m], m))
    for h in range(n + 1):
        for side in (1, -1):
            kids = [m for m in (range(h + 1, n + 1) if side == 1 else range(h - 1, 0, -1))
                    if heads[m] == h]
            chain = [h] + kids
            for i in range(1, len(chain)):
                parts["sib"].append((h, chain[i - 1], chain[i]))
                if i >= 2:
                    parts["trisib"].append((h, chain[i - 2], chain[i - 1], chain[i]))
                if h >= 1 and (not outer_only or i == len(chain) - 1):
                    parts["grand"].append((heads[h], h, chain[i]))
                    parts["gsib"].append((heads[h], h, chain[i - 1], chain[i]))
    return parts


@lru_cache(maxsize=None)
def part_indices(n: int, single_root: bool, outer_only: bool, projective: bool = True):
    """For each kind, (T, P) flat indices into the dense tensor (padding -> a zero slot)."""
    N = n + 1
    trees = projective_trees(n, single_root) if projective else all_trees(n, False, single_root)
    sizes = {"arc": N ** 2, "sib": N ** 3, "grand": N ** 3, "gsib": N ** 4, "trisib": N ** 4}
    rows = {k: [] for k in sizes}
    for heads in trees:
        p = tree_parts(list(heads), outer_only)
        for k in sizes:
            rows[k].append([int(np.ravel_multi_index(t, (N,) * len(t))) for t in p[k]])
    out = {}
    for k, rs in rows.items():
        width = max([len(r) for r in rs] + [1])
        a = np.full((len(rs), width), sizes[k], dtype=np.int64)
        for i, r in enumerate(rs):
            a[i, :len(r)] = r
        out[k] = a
    return trees, out


def reference_scores(n, single_root, tensors, outer_only=False, projective=True):
    trees, idx = part_indices(n, single_root, outer_only, projective)
    total = np.zeros(len(trees))
    for k, t in tensors.items():
        if t is not None:
            total += np.append(t.reshape(-1), 0.0)[idx[k]].sum(axis=1)
    return trees, total


def random_tensors(rng, n, kinds, scale=1.0):
    N = n + 1
    order = {"arc": 2, "sib": 3, "grand": 3, "gsib": 4, "trisib": 4}
    return {k: rng.normal(0.0, scale, (N,) * order[k]) for k in kinds}


def check_exact(n, single_root, heads, tensors, outer_only=False, allowed=None):
    trees, scores = reference_scores(n, single_root, tensors, outer_only)
    if allowed is not None:
        ok = allowed[trees[:, 1:], np.arange(1, n + 1)].all(axis=1)
        trees, scores = trees[ok], scores[ok]
    match = np.nonzero((trees == heads).all(axis=1))[0]
    assert len(match) == 1, f"decoder returned a tree outside the search space: {heads}"
    assert scores[match[0]] == pytest.approx(scores.max(), abs=1e-9)


DECODERS = {
    "sibling": (lambda t, **kw: sibling_decode(t["arc"], t["sib"], **kw), ("arc", "sib"), False),
    "grandparent": (lambda t, **kw: grandparent_decode(t["arc"], t["grand"], **kw),
                    ("arc", "grand"), False),
    "sib+grand": (lambda t, **kw: grand_sibling_decode(t["arc"], t["sib"], t["grand"], **kw),
                  ("arc", "sib", "grand"), False),
    "model1": (lambda t, **kw: grand_sibling_decode(t["arc"], t["sib"], t["grand"], t["gsib"], **kw),
               ("arc", "sib", "grand", "gsib"), False),
    "model2": (lambda t, **kw: tri_sibling_decode(t["arc"], t["sib"], t["trisib"], t["grand"],
                                                  t["gsib"], **kw),
               ("arc", "sib", "grand", "gsib", "trisib"), True),
    "model1+2": (lambda t, **kw: grand_tri_sibling_decode(t["arc"], t["sib"], t["trisib"],
                                                          t["grand"], t["gsib"], **kw),
                 ("arc", "sib", "grand", "gsib", "trisib"), False),
}


# ---------------------------------------------------------------- exactness
@pytest.mark.parametrize("name", list(DECODERS))
@settings(**SETTINGS)
@given(n=st.integers(1, 6), single_root=st.booleans(), seed=st.integers(0, 2 ** 31))
def test_decoder_is_exact(name, n, single_root, seed):
    decode, kinds, outer = DECODERS[name]
    t = random_tensors(np.random.default_rng(seed), n, kinds)
    heads = decode(t, single_root=single_root)
    check_exact(n, single_root, heads, t, outer)


@pytest.mark.parametrize("name", list(DECODERS))
@pytest.mark.parametrize("single_root", [True, False])
def test_decoder_is_exact_n7(name, single_root):
    decode, kinds, outer = DECODERS[name]
    rng = np.random.default_rng(7 + single_root)
    for _ in range(1):
        t = random_tensors(rng, 7, kinds)
        check_exact(7, single_root, decode(t, single_root=single_root), t, outer)


@pytest.mark.parametrize("name", list(DECODERS))
def test_decoder_part_scores_matter(name):
    """Higher-order parts alone (arc scores 0) must steer the decoder: guards against
    a decoder that ignores a table yet passes because arcs dominate."""
    decode, kinds, outer = DECODERS[name]
    rng = np.random.default_rng(3)
    for _ in range(5):
        t = random_tensors(rng, 5, kinds, scale=1.0)
        t["arc"][:] = 0.0
        check_exact(5, False, decode(t, single_root=False), t, outer)


@pytest.mark.parametrize("name", list(DECODERS))
@settings(**SETTINGS)
@given(n=st.integers(2, 6), single_root=st.booleans(), seed=st.integers(0, 2 ** 31))
def test_pruned_decoding_is_exact_over_allowed_trees(name, n, single_root, seed):
    decode, kinds, outer = DECODERS[name]
    rng = np.random.default_rng(seed)
    t = random_tensors(rng, n, kinds)
    trees = projective_trees(n, single_root)
    keep = trees[rng.integers(len(trees))]
    allowed = rng.random((n + 1, n + 1)) < 0.4
    allowed[keep[1:], np.arange(1, n + 1)] = True
    heads = decode(t, single_root=single_root, allowed=allowed)
    check_exact(n, single_root, heads, t, outer, allowed=allowed)


def to_compact(index: PartIndex, t: dict) -> dict:
    """Copy dense tensors into the flat arrays of a compact index (reference loops)."""
    n = index.n
    out = {"arc": t["arc"]}
    kept = {h: [h] + [m for m in range(1, n + 1) if index.slot[h, m] >= 0 and m != h]
            for h in range(n + 1)}
    for kind in ("sib", "grand", "gsib", "trisib"):
        if kind not in t:
            continue
        size = {"sib": index.n_sib, "grand": index.n_grand, "gsib": index.n_gsib,
                "trisib": index.n_tri}[kind]
        f = np.full(size, np.nan)
        for h in range(n + 1):
            W, sl = index.width[h], index.slot[h]
            if kind == "sib":
                for x in kept[h]:
                    for y in kept[h]:
                        f[index.sib_off[h] + sl[x] * W + sl[y]] = t["sib"][h, x, y]
            elif kind == "trisib":
                for x in kept[h]:
                    for y in kept[h]:
                        for z in kept[h]:
                            f[index.tri_off[h] + (sl[x] * W + sl[y]) * W + sl[z]] = t["trisib"][h, x, y, z]
            else:
                for g in range(n + 1):
                    a = index.arcid[g, h]
                    if a < 0:
                        continue
                    for y in kept[h]:
                        if kind == "grand":
                            f[index.grand_off[a] + sl[y]] = t["grand"][g, h, y]
                        else:
                            for x in kept[h]:
                                f[index.gsib_off[a] + sl[x] * W + sl[y]] = t["gsib"][g, h, x, y]
        # entries no kept configuration can reach are never read: leave them NaN
        out[kind] = f
    return out


@pytest.mark.parametrize("name", list(DECODERS))
def test_compact_index_matches_dense(name):
    decode, kinds, outer = DECODERS[name]
    rng = np.random.default_rng(11)
    for n in (4, 6, 7):
        t = random_tensors(rng, n, kinds)
        keep = projective_trees(n, True)[rng.integers(len(projective_trees(n, True)))]
        allowed = rng.random((n + 1, n + 1)) < 0.5
        allowed[keep[1:], np.arange(1, n + 1)] = True
        index = PartIndex.compact(allowed)
        assert index.n_gsib < (n + 1) ** 4
        c = to_compact(index, t)
        full = {k: c.get(k) for k in ("arc", "sib", "grand", "gsib", "trisib")}
        got = decode(full, single_root=True, index=index)
        want = decode(t, single_root=True, allowed=allowed)
        assert np.array_equal(got, want)


@pytest.mark.parametrize("outer_only", [False, True])
def test_score_tree_matches_reference(outer_only):
    rng = np.random.default_rng(5)
    n = 5
    t = random_tensors(rng, n, ("arc", "sib", "grand", "gsib", "trisib"))
    trees, ref = reference_scores(n, False, t, outer_only, projective=False)
    index = PartIndex.dense(n)
    for i in rng.choice(len(trees), 40, replace=False):
        got = score_tree(trees[i], index, t["arc"], t["sib"], t["grand"], t["gsib"],
                         t["trisib"], outer_only=outer_only)
        assert got == pytest.approx(ref[i])


def test_large_scores_stay_finite_and_exact():
    rng = np.random.default_rng(2)
    t = random_tensors(rng, 6, ("arc", "sib", "grand", "gsib", "trisib"), scale=1e4)
    for name, (decode, kinds, outer) in DECODERS.items():
        sub = {k: t[k] for k in kinds}
        check_exact(6, True, decode(sub, single_root=True), sub, outer)


def test_trivial_sentences_and_bad_shapes():
    assert list(sibling_decode(np.zeros((1, 1)))) == [-1]
    assert list(grand_sibling_decode(np.zeros((2, 2)))) == [-1, 0]
    assert list(tri_sibling_decode(np.zeros((2, 2)), single_root=False)) == [-1, 0]
    with pytest.raises(ValueError, match="sib scores must have shape"):
        sibling_decode(np.zeros((4, 4)), np.zeros((4, 4)))
    with pytest.raises(ValueError, match="arc scores"):
        grandparent_decode(np.zeros((4, 3)))
    allowed = np.zeros((4, 4), dtype=bool)
    allowed[0, 1] = allowed[0, 2] = allowed[0, 3] = True   # single-root: no tree left
    with pytest.raises(ValueError, match="no projective tree"):
        grand_sibling_decode(np.zeros((4, 4)), allowed=allowed)


# ---------------------------------------------------------------- hill climbing
@settings(**SETTINGS)
@given(n=st.integers(2, 5), single_root=st.booleans(), seed=st.integers(0, 2 ** 31))
def test_hill_climb_improves_on_projective(n, single_root, seed):
    rng = np.random.default_rng(seed)
    t = random_tensors(rng, n, ("arc", "sib"))
    start = sibling_decode(t["arc"], t["sib"], single_root=single_root)
    heads = hill_climb_sibling(t["arc"], t["sib"], single_root=single_root)
    trees, scores = reference_scores(n, single_root, t, projective=False)
    got = np.nonzero((trees == heads).all(axis=1))[0]
    st_ = np.nonzero((trees == start).all(axis=1))[0]
    assert len(got) == 1, "hill climbing left the space of trees"
    assert scores[got[0]] >= scores[st_[0]] - 1e-9
    # local optimum: no single head change that keeps a tree scores higher
    neighbours = np.nonzero((trees != heads).sum(axis=1) == 1)[0]
    assert (scores[neighbours] <= scores[got[0]] + 1e-9).all()


@settings(**SETTINGS)
@given(n=st.integers(2, 5), single_root=st.booleans(), seed=st.integers(0, 2 ** 31),
       pruned=st.booleans())
def test_hill_climb_with_grandparents_is_a_local_optimum(n, single_root, seed, pruned):
    """sib + grand hill-climbing: a tree over allowed arcs, never below the projective
    start, and no single head change (kept arc, still a tree) scores higher."""
    rng = np.random.default_rng(seed)
    t = random_tensors(rng, n, ("arc", "sib", "grand"))
    trees, scores = reference_scores(n, single_root, t, projective=False)
    allowed = None
    if pruned:
        gold = trees[rng.integers(len(trees))]
        allowed = rng.random((n + 1, n + 1)) < 0.5
        allowed[gold[1:], np.arange(1, n + 1)] = True
        proj = projective_trees(n, single_root)
        allowed[proj[rng.integers(len(proj))][1:], np.arange(1, n + 1)] = True
        ok = allowed[trees[:, 1:], np.arange(1, n + 1)].all(axis=1)
        trees, scores = trees[ok], scores[ok]
    start = grand_sibling_decode(t["arc"], t["sib"], t["grand"], single_root=single_root,
                                 allowed=allowed)
    heads = hill_climb(t["arc"], t["sib"], t["grand"], single_root=single_root, allowed=allowed)
    got = np.nonzero((trees == heads).all(axis=1))[0]
    st_ = np.nonzero((trees == start).all(axis=1))[0]
    assert len(got) == 1, "hill climbing left the space of (allowed) trees"
    assert heads[0] == -1 and (not single_root or (heads[1:] == 0).sum() == 1)
    assert scores[got[0]] >= scores[st_[0]] - 1e-9
    neighbours = np.nonzero((trees != heads).sum(axis=1) == 1)[0]
    assert (scores[neighbours] <= scores[got[0]] + 1e-9).all()


def test_hill_climb_grandparent_gain_on_compact_index():
    """Compact index: the same tree as with dense tensors."""
    rng = np.random.default_rng(3)
    n = 9
    t = random_tensors(rng, n, ("arc", "sib", "grand"))
    allowed = rng.random((n + 1, n + 1)) < 0.6
    allowed[0, 1:] = True
    allowed[1, 2:] = True
    index = PartIndex.compact(allowed)
    N = n + 1
    sib = np.zeros(index.n_sib)
    grand = np.zeros(index.n_grand)
    for h in range(N):
        for a in range(N):
            for b in range(1, N):
                if index.slot[h, a] >= 0 and index.slot[h, b] >= 0:
                    W = index.width[h]
                    sib[index.sib_off[h] + index.slot[h, a] * W + index.slot[h, b]] = t["sib"][h, a, b]
    for g in range(N):
        for h in range(1, N):
            if index.arcid[g, h] >= 0:
                for m in range(1, N):
                    if index.slot[h, m] > 0:
                        grand[index.grand_off[index.arcid[g, h]] + index.slot[h, m]] = t["grand"][g, h, m]
    want = hill_climb(t["arc"], t["sib"], t["grand"], allowed=allowed)
    got = hill_climb(t["arc"], sib, grand, index=index)
    assert np.array_equal(want, got)
    proj = grand_sibling_decode(t["arc"], t["sib"], t["grand"], allowed=allowed)
    assert score_tree(got, index, t["arc"], sib, grand) >= score_tree(proj, index, t["arc"], sib, grand)


def test_hill_climb_finds_non_projective_gain():
    # arcs favour 0->2, 2->3, 2->4, 4->1, where 4->1 crosses 2->3: not projective
    n = 4
    arc = np.full((n + 1, n + 1), -5.0)
    for h, m in [(0, 2), (2, 4), (4, 1), (2, 3)]:   # 4 -> 1 crosses 2 -> 3
        arc[h, m] = 5.0
    heads = hill_climb_sibling(arc, np.zeros((n + 1,) * 3))
    assert list(heads) == [-1, 4, 0, 2, 2]
    proj = sibling_decode(arc, None)
    assert list(proj) != list(heads)


# ---------------------------------------------------------------- pruning
def test_prune_arcs_rules():
    rng = np.random.default_rng(0)
    n = 9
    mu = rng.random((n + 1, n + 1)) ** 6
    mu[3, 5] = 1e-7 * mu[:, 5].max()   # below the ratio threshold
    allowed = prune_arcs(mu, threshold=1e-4, max_heads=3)
    keep = sibling_decode(np.log(np.where(mu > 0, mu, 1e-300)), None)
    assert not allowed[:, 0].any() and not allowed.diagonal().any()
    assert allowed[keep[1:], np.arange(1, n + 1)].all()
    mu_off = mu.copy()
    np.fill_diagonal(mu_off, -1)
    for m in range(1, n + 1):
        kept = set(np.nonzero(allowed[:, m])[0])
        top = set(np.argsort(-mu_off[:, m], kind="stable")[:3])
        assert kept - {keep[m]} <= top
        assert len(kept) <= 4
        assert top <= kept | {h for h in top if mu_off[h, m] < 1e-4 * mu_off[:, m].max()}
    if keep[5] != 3:
        assert not allowed[3, 5]


def test_pruned_index_is_small_and_decodes():
    rng = np.random.default_rng(1)
    n = 40
    arc = rng.normal(0, 3, (n + 1, n + 1))
    mu = np.exp(arc - arc.max(axis=0, keepdims=True))
    allowed = prune_arcs(mu / mu.sum(axis=0, keepdims=True), max_heads=4)
    index = PartIndex.compact(allowed)
    assert allowed.sum(axis=0)[1:].max() <= 5
    assert index.n_gsib < 0.05 * (n + 1) ** 4
    sib = rng.normal(0, 1, index.n_sib)
    gsib = rng.normal(0, 1, index.n_gsib)
    grand = rng.normal(0, 1, index.n_grand)
    tri = rng.normal(0, 1, index.n_tri)
    h1 = grand_sibling_decode(arc, sib, grand, gsib, index=index)
    h2 = tri_sibling_decode(arc, sib, tri, grand, gsib, index=index)
    for h in (h1, h2):
        assert allowed[h[1:], np.arange(1, n + 1)].all()
        assert (h[1:] == 0).sum() == 1
