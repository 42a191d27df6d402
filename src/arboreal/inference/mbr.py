"""Minimum-Bayes-risk decoding (Smith & Smith 2007).

Method and complexity
---------------------
Under the expected attachment (Hamming) loss, the minimum-risk tree is the
tree whose sum of arc marginals is largest, so MBR decoding is exact argmax
decoding with the marginal matrix as arc scores: Eisner's algorithm
(O(n^3)) for projective trees, Chu-Liu-Edmonds (O(n^2)) otherwise, with the
same single-root / multi-root choice as the model the marginals came from.
"""
from __future__ import annotations

import numpy as np

from arboreal.inference.eisner import _prepare, eisner
from arboreal.inference.mst import chu_liu_edmonds


def mbr_decode(marginals: np.ndarray, projective: bool = False, single_root: bool = True,
               lengths: np.ndarray | None = None) -> np.ndarray:
    """Tree maximising the sum of its arc marginals.

    Parameters
    ----------
    marginals : (n+1, n+1) or (B, N+1, N+1); ``marginals[h, m]`` is the
        posterior probability of the arc h -> m (any finite weights work;
        column 0 and the diagonal are ignored).  NaN / inf raise ValueError.
    projective : decode with Eisner (True) or Chu-Liu-Edmonds (False).
    single_root : exactly one word attaches to the root (default).
    lengths : (B,) sentence lengths for a batch.

    Returns
    -------
    heads : (n+1,) int64 with heads[0] = -1, or (B, N+1) with -1 in padding.
    """
    batch, lens, single = _prepare(marginals, lengths, what="marginals")
    if np.isneginf(batch).any():
        # -inf is meaningful for scores, never for probabilities; look only
        # at the active region so that padding is free to hold anything
        n1 = batch.shape[1]
        idx = np.arange(n1)
        act = (idx[None, :] <= lens[:, None])
        mask = act[:, :, None] & act[:, None, :]
        mask[:, :, 0] = False
        mask[:, idx, idx] = False
        if np.isneginf(batch[mask]).any():
            raise ValueError("marginals contain -inf; expected finite arc probabilities")
    decode = eisner if projective else chu_liu_edmonds
    heads = decode(batch, single_root=single_root, lengths=lens)
    return heads[0] if single else heads
