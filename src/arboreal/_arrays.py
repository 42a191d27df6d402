"""Memory layout of weight vectors, shared by the feature kernels and the model files."""
from __future__ import annotations

import numpy as np


def aligned_zeros(size: int, dtype=np.float32) -> np.ndarray:
    """A zeroed weight vector whose data starts on a 64-byte boundary.

    Large numpy arrays start 16 bytes into a page, so without this every float32 block
    of BLOCK weights would straddle two cache lines and scoring would miss twice as
    often (a measurable share of the scoring time).
    """
    itemsize = np.dtype(dtype).itemsize
    raw = np.zeros(size + 64 // itemsize, dtype=dtype)
    skip = (-raw.ctypes.data % 64) // itemsize
    return raw[skip:skip + size]


def as_aligned(w: np.ndarray, dtype=np.float32) -> np.ndarray:
    """``w`` as a contiguous ``dtype`` vector on a 64-byte boundary (copied only if needed)."""
    w = np.asarray(w)
    if (w.dtype == dtype and w.ndim == 1 and w.flags.c_contiguous
            and w.ctypes.data % 64 == 0):
        return w
    out = aligned_zeros(w.size, dtype)
    out[:] = np.ravel(w)
    return out
