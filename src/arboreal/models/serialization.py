"""Model files: one ``.npz`` (no pickle) holding arrays plus a JSON metadata string.

Layout: array ``__meta__`` is a 0-d str array with JSON
``{"format": "arboreal-model", "format_version": 1, "model_type": ..., ...}``;
every other entry is a plain numeric or str array. Weight vectors are stored as a
bitmap of their non-zero entries plus the float32 values (:func:`put_weights`), string
lists as one UTF-8 buffer (:func:`put_strings`); members are zlib-compressed except the
weight values, which barely compress and would cost more to inflate than to read.
Writes go to a temporary file in the target directory and are renamed into place
(atomic). Any problem reading a
file (missing, truncated, not a zip, foreign npz, wrong version) raises
:class:`~arboreal.errors.ModelError` naming the file.
"""
from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np
from numba import njit

from arboreal._atomic import atomic_write
from arboreal.errors import ModelError
from arboreal.features.hashing import aligned_zeros


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
def _scatter_bitmap(bits, values, out):
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


FORMAT = "arboreal-model"
FORMAT_VERSION = 1


STORED_SUFFIX = "_nz"   # members whose name ends so are written without compression


def save_model_file(path: str | os.PathLike, meta: dict, arrays: dict[str, np.ndarray]) -> None:
    """Write ``meta`` (JSON-able; format keys added) and ``arrays`` atomically to ``path``.

    The file is an ordinary ``.npz`` (``np.load`` reads it); members named ``*_nz``
    are stored uncompressed, all others deflated.
    """
    path = Path(path)
    full = {"format": FORMAT, "format_version": FORMAT_VERSION, **meta}
    payload = {"__meta__": np.array(json.dumps(full))}
    for name, arr in arrays.items():
        arr = np.asarray(arr)
        if arr.dtype == object:
            arr = arr.astype(str)
        payload[name] = arr

    def write(f) -> None:
        with zipfile.ZipFile(f, "w", allowZip64=True) as zf:
            for name, arr in payload.items():
                kind = zipfile.ZIP_STORED if name.endswith(STORED_SUFFIX) else zipfile.ZIP_DEFLATED
                info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = kind
                with zf.open(info, "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, arr, allow_pickle=False)

    atomic_write(path, write)


def load_model_file(path: str | os.PathLike) -> tuple[dict, dict[str, np.ndarray]]:
    """Read a model file: ``(meta, arrays)``; ModelError on any problem."""
    path = str(path)
    if not os.path.exists(path):
        raise ModelError(f"{path}: no such model file")
    if os.path.isdir(path):
        raise ModelError(f"{path}: is a directory, not a model file")
    try:
        with np.load(path, allow_pickle=False) as z:
            if not hasattr(z, "files") or "__meta__" not in z.files:
                raise ModelError(f"{path}: not an arboreal model (no metadata)")
            meta = json.loads(str(z["__meta__"]))
            arrays = {k: z[k] for k in z.files if k != "__meta__"}
    except ModelError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError, json.JSONDecodeError,
            zipfile.LargeZipFile, RuntimeError) as exc:
        raise ModelError(f"{path}: not a readable arboreal model file ({exc.__class__.__name__}: {exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ModelError(f"{path}: not an arboreal model (foreign .npz file)")
    if meta.get("format_version") != FORMAT_VERSION:
        raise ModelError(f"{path}: model format version {meta.get('format_version')!r} is not "
                         f"supported (this arboreal reads version {FORMAT_VERSION})")
    return meta, arrays


def put_weights(arrays: dict, prefix: str, w: np.ndarray) -> None:
    """Add a weight vector to ``arrays`` as ``prefix_mask`` (bit per weight: non-zero)
    and ``prefix_nz`` (the non-zero values, float32, in order).

    A trained hashed vector is typically 20-60% non-zero: the bitmap costs 1/32 of the
    dense array, and loading is one vectorized scatter.
    """
    flat = np.ravel(w).astype(np.float32)
    nonzero = flat != 0
    arrays[f"{prefix}_mask"] = np.packbits(nonzero)
    arrays[f"{prefix}_nz"] = flat[nonzero]


def get_weights(arrays: dict, prefix: str, size: int) -> np.ndarray:
    """Inverse of :func:`put_weights`: a float32 vector of ``size`` weights (64-byte aligned).

    Also reads the encodings of earlier files (``prefix_idx`` + ``prefix_val``, or
    ``prefix_dense``). ValueError if the stored vector does not have ``size`` weights.
    """
    if f"{prefix}_mask" in arrays:
        bits = np.asarray(arrays[f"{prefix}_mask"], dtype=np.uint8)
        values = np.asarray(arrays[f"{prefix}_nz"], dtype=np.float32)
        if bits.size != (size + 7) // 8:
            raise ValueError(f"{prefix}_mask covers {8 * bits.size} weights, expected {size}")
        out = aligned_zeros(size)
        used = _scatter_bitmap(bits, values, out)
        if used != values.size:
            raise ValueError(f"{prefix}_nz has {values.size} values for "
                             f"{int(np.unpackbits(bits, count=size).sum())} non-zero weights")
        return out
    if f"{prefix}_dense" in arrays:
        dense = np.asarray(arrays[f"{prefix}_dense"], dtype=np.float32)
        if dense.shape != (size,):
            raise ValueError(f"{prefix}_dense has {dense.size} weights, expected {size}")
        out = aligned_zeros(size)
        out[:] = dense
        return out
    idx = np.asarray(arrays[f"{prefix}_idx"])
    out = aligned_zeros(size)
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        raise ValueError(f"{prefix}_idx: weight index out of range")
    out[idx] = arrays[f"{prefix}_val"]
    return out


def put_strings(arrays: dict, name: str, strings) -> None:
    """Add a list of strings (none containing a newline) as one UTF-8 buffer ``name``:
    a fixed-width unicode array would cost 4 bytes times the longest string per entry."""
    arrays[name] = np.frombuffer("\n".join(strings).encode("utf-8"), dtype=np.uint8)
    arrays[name + "_count"] = np.array(len(strings), dtype=np.int64)


def get_strings(arrays: dict, name: str) -> np.ndarray:
    """Inverse of :func:`put_strings` (also reads a plain str array): a str array."""
    arr = np.asarray(arrays[name])
    if arr.dtype.kind == "U":
        return arr
    count = int(arrays[name + "_count"])
    if count == 0:
        return np.zeros(0, dtype=str)
    out = arr.tobytes().decode("utf-8").split("\n")
    if len(out) != count:
        raise ValueError(f"{name} holds {len(out)} strings, expected {count}")
    return np.array(out, dtype=str)


def put_vocabs(arrays: dict, vocabs: dict) -> None:
    """Add a feature set's vocabularies as ``vocab_<name>`` string buffers."""
    for name, vocab in vocabs.items():
        put_strings(arrays, f"vocab_{name}", [str(v) for v in np.asarray(vocab).tolist()])


def get_vocabs(arrays: dict) -> dict[str, np.ndarray]:
    """Inverse of :func:`put_vocabs` (also reads earlier files' str arrays)."""
    return {k[len("vocab_"):]: get_strings(arrays, k) for k in arrays
            if k.startswith("vocab_") and not k.endswith("_count")}
