"""Single-sentence / batch dispatch shared by every inference routine.

A single sentence is scores of shape (n+1, n+1) (labeled: (n+1, n+1, L));
a batch is (B, N+1, N+1) (labeled: (B, N+1, N+1, L)) with ``lengths`` (B,).
"""
from __future__ import annotations

import numpy as np


def as_batch(scores: np.ndarray, lengths: np.ndarray | None, labeled: bool = False
             ) -> tuple[np.ndarray, np.ndarray, bool]:
    """Return ``(batched_scores, lengths, was_single)``.

    Validates shapes; lengths default to the full size N for every sentence.
    The returned scores are C-contiguous (float32 or float64 kept as given;
    integer input becomes float64).
    """
    scores = np.asarray(scores)
    if not np.issubdtype(scores.dtype, np.floating):
        scores = scores.astype(np.float64)
    core = 3 if labeled else 2
    if scores.ndim == core:
        if lengths is not None:
            raise ValueError("lengths= is only for batched scores")
        single = True
        scores = scores[None]
    elif scores.ndim == core + 1:
        single = False
    else:
        kind = "(n+1, n+1, L)" if labeled else "(n+1, n+1)"
        raise ValueError(f"scores must have shape {kind} or a batch of them, got {scores.shape}")
    if scores.shape[1] != scores.shape[2] or scores.shape[1] < 1:
        raise ValueError(f"scores must be square in (head, modifier), got {scores.shape}")
    if lengths is None:
        lengths = np.full(scores.shape[0], scores.shape[1] - 1, dtype=np.int64)
    else:
        lengths = np.asarray(lengths, dtype=np.int64)
        if lengths.shape != (scores.shape[0],):
            raise ValueError(f"lengths must have shape ({scores.shape[0]},), got {lengths.shape}")
        if (lengths < 0).any() or (lengths > scores.shape[1] - 1).any():
            raise ValueError("lengths must lie in 0..N")
    return np.ascontiguousarray(scores), lengths, single
