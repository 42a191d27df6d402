"""Partition functions and arc marginals over dependency trees.

``log_partition`` and ``marginals`` dispatch on the tree family:

* non-projective (default): Matrix-Tree Theorem, evaluated by a
  subtraction-free (GTH) elimination in float64 with a log-space fallback
  for very peaked scores; marginals by its hand-written reverse mode
  (see :mod:`arboreal.inference.matrix_tree`);
* projective: inside-outside over Eisner's chart in log space
  (see :mod:`arboreal.inference.inside_outside`);
* ``single_root=True`` (default): exactly one word attaches to the root;
  ``single_root=False``: any number;
* ``labeled=True``: scores (..., n+1, n+1, L); log Z over trees *and*
  labels is the unlabeled log Z of ``logsumexp`` over the labels
  (Koo et al. 2007, §3.4), and the marginal of (h, m, l) is the arc
  marginal times the softmax over labels of ``scores[h, m, :]``.

All routines take one sentence (n+1, n+1) or a batch (B, N+1, N+1) with
``lengths`` (B,); a batch runs in one numba kernel (no Python loop over
sentences).  Computation is float64 whatever the input; the results come
back in the input's float dtype (float32 in -> float32 out; integer input
gives float64).  Scores of -inf forbid an arc; NaN or +inf in the active
region raise ``ValueError``.  If no tree has positive weight, log Z is -inf
and the marginals are 0.  Cost: O(n^3) per sentence (+ O(L n^2) labeled).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from arboreal._interrupt import interruptible
from arboreal.inference._batch import as_batch
from arboreal.inference.inside_outside import _io_batch
from arboreal.inference.matrix_tree import _mtt_batch

_MAX_LANES = 32
_LANE_BYTES = 1 << 26  # cap on one lane-layout work array (64 MiB)


def _reduce_labels(scores: np.ndarray) -> np.ndarray:
    """logsumexp over the last axis, float64, -inf where all labels are -inf."""
    x = scores.astype(np.float64, copy=False)
    m = x.max(axis=-1)
    safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.log(np.exp(x - safe[..., None]).sum(axis=-1)) + safe
    return np.where(m == -np.inf, -np.inf, np.where(np.isnan(m) | (m == np.inf), m, s))


def _run(scores, projective, single_root, labeled, lengths, want, force_log=False):
    batch, lengths, single = as_batch(scores, lengths, labeled=labeled)
    if batch.dtype not in (np.float32, np.float64):
        batch = batch.astype(np.float64)
    dtype = batch.dtype
    arcs = _reduce_labels(batch) if labeled else batch
    B, N1 = arcs.shape[0], arcs.shape[1]
    logz = np.zeros(B, dtype=np.float64)
    out = np.zeros((B, N1, N1), dtype=np.float64 if labeled else dtype)
    bad = np.zeros(B, dtype=np.bool_)
    if projective:
        _io_batch(arcs, lengths, bool(single_root), want, logz, out, bad)
    else:
        lanes = max(1, min(_MAX_LANES, B, _LANE_BYTES // (8 * N1 * N1)))
        order = np.argsort(-lengths, kind="stable")
        used_log = np.zeros(B, dtype=np.bool_)
        interruptible(_mtt_batch, arcs, lengths, order, lanes, bool(single_root), want, logz,
                      out, bad, used_log, force_log, work=float(N1) ** 3)
    if bad.any():
        b = int(np.flatnonzero(bad)[0])
        where = "" if single else f" (sentence {b} of the batch)"
        raise ValueError(f"scores contain NaN or +inf{where}")
    if want and labeled:
        x = batch.astype(np.float64, copy=False)
        with np.errstate(invalid="ignore", over="ignore"):
            lab = np.exp(x - arcs[..., None])  # softmax over labels
        # garbage on the ignored diagonal / column 0 / padding meets out = 0
        lab = np.nan_to_num(lab, nan=0.0, posinf=0.0) * out[..., None]
        out = lab.astype(dtype, copy=False)
    return logz.astype(dtype, copy=False), out, single


def log_partition(scores: np.ndarray, projective: bool = False, single_root: bool = True,
                  labeled: bool = False, lengths: np.ndarray | None = None
                  ) -> float | np.ndarray:
    """log of the sum over all trees of exp(sum of their arc scores).

    scores: (n+1, n+1) or (B, N+1, N+1) (labeled: one more axis L); lengths
    (B,) for a batch.  Returns a float for one sentence, else a (B,) array,
    in the input's float dtype (computed in float64).  O(n^3) per sentence.
    """
    logz, _, single = _run(scores, projective, single_root, labeled, lengths, False)
    return float(logz[0]) if single else logz


def marginals(scores: np.ndarray, projective: bool = False, single_root: bool = True,
              labeled: bool = False, lengths: np.ndarray | None = None) -> np.ndarray:
    """Arc marginals P(h -> m) = d log Z / d scores[h, m], the shape of ``scores``.

    Zeros on column 0, the diagonal and padding; each word's column sums
    to 1.  Labeled: P(h -> m with label l).  In the input's float dtype
    (computed in float64).  O(n^3) per sentence (+ O(L n^2) labeled).
    """
    _, out, single = _run(scores, projective, single_root, labeled, lengths, True)
    return out[0] if single else out


def log_partition_and_marginals(scores: np.ndarray, projective: bool = False,
                                single_root: bool = True, labeled: bool = False,
                                lengths: np.ndarray | None = None
                                ) -> tuple[float | np.ndarray, np.ndarray]:
    """``(log_partition(...), marginals(...))`` from one pass (the marginals
    need log Z anyway): what training wants.  Same shapes and dtypes."""
    logz, out, single = _run(scores, projective, single_root, labeled, lengths, True)
    if single:
        return float(logz[0]), out[0]
    return logz, out


@njit(cache=True)
def sentence_marginals_kernel(scores, projective, single_root, out):
    """Arc marginals of one sentence, callable from numba code (no validation, no copies).

    scores (1, n+1, n+1) float64; out (1, n+1, n+1) float64 receives the marginals
    (zeros on column 0 and the diagonal). Returns log Z, or NaN when the scores hold
    NaN or +inf. O(n^3).
    """
    lengths = np.full(1, scores.shape[1] - 1, dtype=np.int64)
    logz = np.zeros(1)
    bad = np.zeros(1, dtype=np.bool_)
    if projective:
        _io_batch(scores, lengths, single_root, True, logz, out, bad)
    else:
        order = np.zeros(1, dtype=np.int64)
        used_log = np.zeros(1, dtype=np.bool_)
        _mtt_batch(scores, lengths, order, 1, single_root, True, logz, out, bad, used_log, False)
    return np.nan if bad[0] else logz[0]
