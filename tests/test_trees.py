"""Tree utilities against slow, obviously-correct references (and the UD MANIFEST figures)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arboreal.trees import (
    is_projective,
    is_tree,
    nonprojective_arcs,
    nonprojective_mask,
    root_count,
    tree_properties,
)

UD = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "ud"


# ----------------------------------------------------------------------------
# slow references


def ref_is_tree(heads, single_root):
    n = len(heads) - 1
    for m in range(1, n + 1):
        if not (0 <= heads[m] <= n) or heads[m] == m:
            return False
    for m in range(1, n + 1):  # follow heads: must reach 0 within n steps
        a, steps = m, 0
        while a != 0:
            a, steps = heads[a], steps + 1
            if steps > n:
                return False
    roots = sum(1 for m in range(1, n + 1) if heads[m] == 0)
    return roots == 1 if single_root else True


def ref_descends(heads, k, h):
    while k != h and k != 0:
        k = heads[k]
    return k == h


def ref_nonprojective_arcs(heads):
    """Arc h -> m is non-projective when some word strictly between them does not descend from h."""
    n = len(heads) - 1
    out = []
    for m in range(1, n + 1):
        h = heads[m]
        if any(not ref_descends(heads, k, h) for k in range(min(h, m) + 1, max(h, m))):
            out.append((h, m))
    return out


def ref_crossing(heads):
    """Some pair of arcs crosses (spans overlap without nesting)."""
    arcs = [(min(heads[m], m), max(heads[m], m)) for m in range(1, len(heads))]
    return any(a < c < b < d for a, b in arcs for c, d in arcs)


@st.composite
def any_heads(draw, max_n=9):
    n = draw(st.integers(0, max_n))
    heads = [-1] + draw(st.lists(st.integers(-1, n + 1), min_size=n, max_size=n))
    return np.array(heads, dtype=np.int64)


@st.composite
def trees(draw, max_n=10):
    """A random tree (any number of roots): attach words one by one to placed nodes."""
    n = draw(st.integers(1, max_n))
    order = draw(st.permutations(range(1, n + 1)))
    heads = np.full(n + 1, -1, dtype=np.int64)
    placed = [0]
    for m in order:
        heads[m] = draw(st.sampled_from(placed))
        placed.append(m)
    return heads


# ----------------------------------------------------------------------------
# hand-made cases


def test_small_examples():
    assert is_tree(np.array([-1, 2, 0, 2]))
    assert not is_tree(np.array([-1, 0, 0]))  # two roots
    assert is_tree(np.array([-1, 0, 0]), single_root=False)
    assert not is_tree(np.array([-1, 2, 1, 0]), single_root=False)  # cycle 1 <-> 2
    assert not is_tree(np.array([-1, 1, 0]), single_root=False)  # self-loop
    assert not is_tree(np.array([-1, 0, 5]), single_root=False)  # out of range
    assert not is_tree(np.array([-1, 0, -1]), single_root=False)  # unknown head
    assert root_count(np.array([-1, 0, 1, 0])) == 2
    # "A hearing is scheduled on the issue today": the classic crossing arc 2 -> 5
    heads = np.array([-1, 2, 4, 4, 0, 7, 7, 2, 4])
    assert is_tree(heads) and not is_projective(heads)
    assert nonprojective_arcs(heads) == [(2, 7)]
    assert nonprojective_mask(heads).tolist() == [False] * 7 + [True, False]
    assert is_projective(np.array([-1, 2, 0, 2]))
    with pytest.raises(ValueError):
        nonprojective_mask(np.array([-1, 2, 1]))


# ----------------------------------------------------------------------------
# property tests


@settings(max_examples=300, deadline=None)
@given(any_heads())
def test_is_tree_matches_reference(heads):
    assert is_tree(heads, single_root=False) == ref_is_tree(heads, False)
    assert is_tree(heads, single_root=True) == ref_is_tree(heads, True)
    assert root_count(heads) == int(sum(1 for h in heads[1:] if h == 0))


@settings(max_examples=300, deadline=None)
@given(trees())
def test_projectivity_matches_references(heads):
    expected = ref_nonprojective_arcs(heads)
    assert nonprojective_arcs(heads) == expected
    assert is_projective(heads) == (not expected)
    assert is_projective(heads) == (not ref_crossing(heads))  # same notion for trees
    assert is_tree(heads, single_root=False)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(trees(), any_heads()), min_size=0, max_size=12))
def test_batched_properties_equal_single_calls(batch):
    props = tree_properties(batch)
    assert len(props["is_tree"]) == len(batch) == len(props["masks"])
    for heads, ok, roots, npa, mask in zip(batch, props["is_tree"], props["roots"],
                                            props["nonprojective"], props["masks"]):
        assert ok == ref_is_tree(heads, False)
        assert roots == root_count(heads)
        if ok:
            assert npa == len(ref_nonprojective_arcs(heads))
            assert mask.tolist() == nonprojective_mask(heads).tolist()
        else:
            assert npa == -1 and not mask.any()


# ----------------------------------------------------------------------------
# the MANIFEST's independently computed figures


def manifest_rows():
    manifest = UD / "MANIFEST.md"
    if not manifest.is_file():
        return []
    rows = []
    for line in manifest.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| (UD_[^|]+) \| (train|dev|test) \| `data/ud/([^`]+)`[^|]*\| ([\d,]+) \| ([\d,]+) \| "
                     r"([\d.]+) \| ([\d.]+) \|", line)
        if m:
            rows.append((m.group(3), int(m.group(4).replace(",", "")), int(m.group(5).replace(",", "")),
                         float(m.group(6)), float(m.group(7))))
    return rows


SMALL = ("UD_Hungarian-Szeged/hu_szeged-ud-dev.conllu", "UD_Gothic-PROIEL/got_proiel-ud-dev.conllu",
         "UD_English-EWT/en_ewt-ud-dev.conllu", "UD_Czech-CLTT/cs_cltt-ud-dev.conllu")


@pytest.mark.skipif(not (UD / "MANIFEST.md").is_file(), reason="../shared/data/ud not present")
def test_nonprojectivity_matches_ud_manifest():
    from arboreal.io import read_conllu

    rows = {r[0]: r for r in manifest_rows()}
    for rel in SMALL:
        _, sents_expected, words_expected, pct_sent, pct_arcs = rows[rel]
        sents = read_conllu(UD / rel)
        props = tree_properties([s.heads for s in sents])
        words = sum(len(s) for s in sents)
        assert (len(sents), words) == (sents_expected, words_expected)
        assert props["is_tree"].all()
        assert round(100 * (props["nonprojective"] > 0).mean(), 2) == pct_sent, rel
        assert round(100 * props["nonprojective"].sum() / words, 2) == pct_arcs, rel
