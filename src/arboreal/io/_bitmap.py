"""The kernels that read weight vectors from model files (numba): the bitmap scatter
of sparse vectors and the merge of a compact file's float16 byte planes, apart from
:mod:`arboreal.io.model_file` so that reading a model file's metadata does not
import numba."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def _scatter_byte_checked(b, base, values, j, out):
    """The set bits of one bitmap byte, each index and value checked; -1 if one fails."""
    for k in range(8):
        if b & (0x80 >> k):
            if j >= values.shape[0] or base + k >= out.shape[0]:
                return -1
            out[base + k] = values[j]
            j += 1
    return j


@njit(cache=True)
def scatter_bitmap(bits, values, out):
    """``out[i] = next value`` for every set bit i of the big-endian bitmap ``bits``
    (``np.packbits`` order), other entries untouched; returns how many values were
    used, or -1 if the bitmap has more set bits than values or bits past ``out``'s end.
    One pass, O(size / 8 + nnz), faster than numpy's boolean-mask assignment. Bytes
    away from both ends take a branch-free path (a select per bit instead of a branch
    that mispredicts on half of them)."""
    j = 0
    nv = values.shape[0]
    size = out.shape[0]
    for i in range(bits.shape[0]):
        b = bits[i]
        if b == 0:
            continue
        base = i * 8
        if base + 8 > size or j + 8 > nv:
            j = _scatter_byte_checked(b, base, values, j, out)
            if j < 0:
                return -1
            continue
        for k in range(8):
            bit = (b >> (7 - k)) & 1
            v = values[j]
            out[base + k] = v if bit else out[base + k]
            j += bit
    return j


@njit(cache=True)
def merge_half_planes(hi, lo, kept, out):
    """``out[i]``: the uint16 pattern of the i-th float16 value of a compact weight
    vector, from its high byte ``hi[i]`` and the ``kept`` (1..8) significant bits of its
    low byte, bit-packed big-endian in ``lo`` (``np.packbits`` order; the bits dropped
    are zero). ``lo`` must hold at least ``ceil(len(hi) * kept / 8)`` bytes. O(n), one
    pass: each field is read from the 16-bit window of the two bytes it spans."""
    n = hi.shape[0]
    last = lo.shape[0] - 1
    mask = (1 << kept) - 1
    for i in range(n):
        pos = i * kept
        j = pos >> 3
        window = np.uint32(lo[j]) << 8
        if j < last:
            window |= np.uint32(lo[j + 1])
        field = (window >> (16 - (pos & 7) - kept)) & mask
        out[i] = (np.uint16(hi[i]) << 8) | np.uint16(field << (8 - kept))
