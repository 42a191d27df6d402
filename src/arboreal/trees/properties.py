"""Properties of dependency trees: well-formedness, roots, projectivity.

A tree is an int array ``heads`` of shape (n+1,) with ``heads[0] = -1`` and
``heads[m]`` in 0..n the head of word m (0 = the artificial root). -1 for a word
marks an unknown head.

Projectivity follows the usual definition with the root at position 0: the arc
h -> m is *projective* when every word strictly between h and m descends from
h. For a tree this is the same as "no two arcs cross", i.e. what Eisner's
algorithm can produce. The non-projective arcs are those that fail the test
(the count reported by treebank statistics such as the UD MANIFEST).

Single-tree functions take one ``heads`` array; the ``*_batch`` /
:func:`tree_properties` variants take a list of trees (or a flat array with
offsets) and run one compiled pass over the whole corpus.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from numba import njit

__all__ = [
    "is_tree",
    "is_projective",
    "nonprojective_arcs",
    "nonprojective_mask",
    "root_count",
    "tree_properties",
]


# ----------------------------------------------------------------------------
# kernels over one sentence: heads[a : a + n + 1]


@njit(cache=True)
def _is_tree_one(heads, a, n, state):
    """Every word has a head in 0..n, no self-loop, every word reaches the root. O(n)."""
    for m in range(1, n + 1):
        h = heads[a + m]
        if h < 0 or h > n or h == m:
            return False
        state[m] = 0
    for m in range(1, n + 1):
        if state[m] != 0:
            continue
        x = m
        while x > 0 and state[x] == 0:
            state[x] = 1
            x = heads[a + x]
        if x > 0 and state[x] == 1:
            return False
        y = m
        while y > 0 and state[y] == 1:
            state[y] = 2
            y = heads[a + y]
    return True


@njit(cache=True)
def _nonproj_one(heads, a, n, mask, tin, tout, child_start, child_next, stack):
    """Mark mask[a + m] for every non-projective arc heads[m] -> m of a tree. O(n^2) worst.

    Uses DFS entry/exit times so that "k descends from h" is
    tin[h] <= tin[k] < tout[h]. Returns the number of non-projective arcs.
    """
    # children lists
    for v in range(n + 1):
        child_start[v] = -1
    for m in range(n, 0, -1):
        h = heads[a + m]
        child_next[m] = child_start[h]
        child_start[h] = m
    # iterative DFS from the root
    t = 0
    top = 0
    stack[0] = 0
    tin[0] = t
    t += 1
    for v in range(n + 1):
        tout[v] = -1
    cursor = child_start  # reused: next child to visit
    while top >= 0:
        v = stack[top]
        c = cursor[v]
        if c == -1:
            tout[v] = t
            top -= 1
        else:
            cursor[v] = child_next[c]
            tin[c] = t
            t += 1
            top += 1
            stack[top] = c
    count = 0
    for m in range(1, n + 1):
        h = heads[a + m]
        lo = min(h, m)
        hi = max(h, m)
        bad = False
        for k in range(lo + 1, hi):
            if not (tin[h] <= tin[k] and tin[k] < tout[h]):
                bad = True
                break
        mask[a + m] = bad
        if bad:
            count += 1
    return count


@njit(cache=True)
def _corpus_properties(heads, starts, max_n):
    """Per-sentence is_tree, root count, non-projective arc count; per-arc mask.

    heads: flat int array, sentence s = heads[starts[s]:starts[s+1]] (root entry first).
    Non-projectivity is computed only for sentences that are trees (else -1).
    """
    S = len(starts) - 1
    is_tree = np.zeros(S, np.bool_)
    roots = np.zeros(S, np.int64)
    nonproj = np.full(S, -1, np.int64)
    mask = np.zeros(len(heads), np.bool_)
    state = np.zeros(max_n + 1, np.int8)
    tin = np.empty(max_n + 1, np.int64)
    tout = np.empty(max_n + 1, np.int64)
    cs = np.empty(max_n + 1, np.int64)
    cn = np.empty(max_n + 1, np.int64)
    stack = np.empty(max_n + 2, np.int64)
    for s in range(S):
        a = starts[s]
        n = starts[s + 1] - a - 1
        r = 0
        for m in range(1, n + 1):
            if heads[a + m] == 0:
                r += 1
        roots[s] = r
        ok = _is_tree_one(heads, a, n, state)
        is_tree[s] = ok
        if ok:
            nonproj[s] = _nonproj_one(heads, a, n, mask, tin, tout, cs, cn, stack)
    return is_tree, roots, nonproj, mask


def _flat(trees: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, int]:
    lengths = np.fromiter((len(t) for t in trees), np.int64, len(trees))
    starts = np.zeros(len(trees) + 1, np.int64)
    np.cumsum(lengths, out=starts[1:])
    flat = np.concatenate([np.asarray(t, dtype=np.int64) for t in trees]) if len(trees) else np.zeros(0, np.int64)
    return flat, starts, int(lengths.max(initial=1)) - 1


def _one(heads) -> tuple[np.ndarray, np.ndarray, int]:
    heads = np.asarray(heads, dtype=np.int64)
    if heads.ndim != 1 or len(heads) < 1:
        raise ValueError("heads must be a 1-d array of shape (n+1,)")
    return heads, np.array([0, len(heads)], np.int64), len(heads) - 1


# ----------------------------------------------------------------------------
# public API


def root_count(heads: np.ndarray) -> int:
    """Number of words attached to the root (heads[m] == 0, m >= 1). O(n)."""
    heads = np.asarray(heads)
    return int((heads[1:] == 0).sum())


def is_tree(heads: np.ndarray, single_root: bool = True) -> bool:
    """True when ``heads`` (n+1,) is a dependency tree over words 1..n.

    Every head known and in 0..n, no word its own head, no cycle (every word
    reaches the root); with ``single_root`` also exactly one word attached to
    the root. O(n).
    """
    flat, starts, n = _one(heads)
    ok, roots, _, _ = _corpus_properties(flat, starts, n)
    return bool(ok[0]) and (not single_root or roots[0] == 1)


def nonprojective_mask(heads: np.ndarray) -> np.ndarray:
    """Boolean (n+1,): True at m when the arc heads[m] -> m is non-projective.

    ``heads`` must be a tree (multiple roots allowed); raises ValueError
    otherwise. O(n^2) worst case, O(n * average arc length) typically.
    """
    flat, starts, n = _one(heads)
    ok, _, _, mask = _corpus_properties(flat, starts, n)
    if not ok[0]:
        raise ValueError("heads is not a tree")
    return mask


def nonprojective_arcs(heads: np.ndarray) -> list[tuple[int, int]]:
    """The non-projective arcs of a tree as a list of (h, m), by increasing m."""
    mask = nonprojective_mask(heads)
    heads = np.asarray(heads)
    return [(int(heads[m]), int(m)) for m in np.flatnonzero(mask)]


def is_projective(heads: np.ndarray) -> bool:
    """True when the tree ``heads`` has no non-projective arc (no crossing arcs)."""
    return not bool(nonprojective_mask(heads).any())


def tree_properties(trees: Sequence[np.ndarray]) -> dict[str, object]:
    """Properties of many trees in one compiled pass. O(sum n^2) worst case.

    ``trees``: list of heads arrays (each (n_i+1,), heads[0] = -1).
    Returns a dict of arrays of shape (S,): ``is_tree`` (bool, multiple roots
    allowed), ``roots`` (int, words attached to the root), ``nonprojective``
    (int, number of non-projective arcs; -1 where not a tree), and ``masks``:
    list of bool (n_i+1,) arrays, non-projective arcs of each tree (all False
    where not a tree).
    """
    flat, starts, max_n = _flat(trees)
    ok, roots, nonproj, mask = _corpus_properties(flat, starts, max(max_n, 0))
    masks = np.split(mask, starts[1:-1]) if len(trees) else []
    return {"is_tree": ok, "roots": roots, "nonprojective": nonproj, "masks": masks}
