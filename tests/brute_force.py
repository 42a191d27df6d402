"""Slow, obviously-correct references for tests: enumerate every dependency tree.

Used by the inference tests (decoders, partition functions, k-best) and by the
higher-order decoders' tests. Only for small n (n <= 7).
"""
from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np


def _is_projective(heads: np.ndarray) -> bool:
    n = len(heads) - 1
    for m in range(1, n + 1):
        h = heads[m]
        lo, hi = min(h, m), max(h, m)
        for k in range(lo + 1, hi):
            a = k  # k must be a descendant of h
            while a != h and a != 0:
                a = heads[a]
            if a != h:
                return False
    return True


@lru_cache(maxsize=None)
def _all_trees(n: int, projective: bool, single_root: bool) -> np.ndarray:
    rows = []
    for tail in itertools.product(range(n + 1), repeat=n):
        heads = np.array((-1,) + tail)
        if any(heads[m] == m for m in range(1, n + 1)):
            continue
        ok = True
        for m in range(1, n + 1):  # every word reaches the root within n steps
            a, steps = m, 0
            while a != 0 and steps <= n:
                a, steps = heads[a], steps + 1
            if a != 0:
                ok = False
                break
        if not ok:
            continue
        if single_root and int((heads[1:] == 0).sum()) != 1:
            continue
        if projective and not _is_projective(heads):
            continue
        rows.append(heads)
    return np.array(rows, dtype=np.int64).reshape(-1, n + 1)


def all_trees(n: int, projective: bool = False, single_root: bool = True) -> np.ndarray:
    """Every tree over n words as rows of a (T, n+1) heads array (heads[:, 0] = -1)."""
    return _all_trees(n, projective, single_root)


def tree_scores(scores: np.ndarray, trees: np.ndarray) -> np.ndarray:
    """Score of each tree: the sum of scores[heads[m], m] over m = 1..n. Shape (T,)."""
    n = trees.shape[1] - 1
    mods = np.arange(1, n + 1)
    return scores[trees[:, 1:], mods].sum(axis=1)
