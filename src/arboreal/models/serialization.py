"""Model files: one ``.npz`` (no pickle) holding arrays plus a JSON metadata string.

Layout: array ``__meta__`` is a 0-d str array with JSON
``{"format": "arboreal-model", "format_version": 1, "model_type": ..., ...}``;
every other entry is a plain numeric or str array. Writes go to a temporary file in
the target directory and are renamed into place (atomic). Any problem reading a
file (missing, truncated, not a zip, foreign npz, wrong version) raises
:class:`~arboreal.errors.ModelError` naming the file.
"""
from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np

from arboreal._atomic import atomic_write
from arboreal.errors import ModelError

FORMAT = "arboreal-model"
FORMAT_VERSION = 1


def save_model_file(path: str | os.PathLike, meta: dict, arrays: dict[str, np.ndarray]) -> None:
    """Write ``meta`` (JSON-able; format keys added) and ``arrays`` atomically to ``path``."""
    path = Path(path)
    full = {"format": FORMAT, "format_version": FORMAT_VERSION, **meta}
    payload = {"__meta__": np.array(json.dumps(full))}
    for name, arr in arrays.items():
        arr = np.asarray(arr)
        if arr.dtype == object:
            arr = arr.astype(str)
        payload[name] = arr
    atomic_write(path, lambda f: np.savez_compressed(f, **payload))


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


def sparse_vector(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indices, values) of the non-zero entries of a flat array.

    Indices are int32 when they fit (half the bytes to store and decompress), else int64.
    """
    flat = np.ravel(w)
    idx = np.flatnonzero(flat)
    return idx.astype(np.int32 if flat.size < 2**31 else np.int64), flat[idx]


def dense_vector(idx: np.ndarray, val: np.ndarray, size: int, dtype=np.float32) -> np.ndarray:
    """Inverse of :func:`sparse_vector` (ModelError if indices are out of range)."""
    out = np.zeros(size, dtype=dtype)
    idx = np.asarray(idx)
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        raise ModelError("model file is corrupt: weight index out of range")
    out[idx] = val
    return out
