"""Model files: one ``.npz`` (no pickle) holding arrays plus a JSON metadata string.

Layout: array ``__meta__`` is a 0-d str array with JSON
``{"format": "arboreal-model", "format_version": 1, "model_type": ..., ...}``;
every other entry is a plain numeric or str array. Weight vectors are stored as a
bitmap of their non-zero entries plus the float32 values (:func:`put_weights`; a
compact file, :mod:`arboreal.models.compact`, holds float16 values, :func:`put_half_weights`), string
lists as one UTF-8 buffer (:func:`put_strings`); members are zlib-compressed except the
weight values, which barely compress and would cost more to inflate than to read.
Writes go to a temporary file in the target directory and are renamed into place
(atomic). Any problem reading a
file (missing, truncated, not a zip, foreign npz, wrong version) raises
:class:`~arboreal.errors.ModelError` naming the file.

Reading is defensive, since a model file may come from anyone: the zip's member
names, sizes and compression methods and every ``.npy`` header (dtype, shape, and
the byte count it implies) are checked before any array data is inflated, arrays
are read only when a loader asks for one (:class:`ModelArrays`), after it has
checked the shape against the metadata (:func:`get_weights`, :func:`get_strings`),
and every metadata field a loader reads goes through :class:`MetaFields` (type and
range, the field named in the error).
"""
from __future__ import annotations

import json
import lzma
import math
import os
import re
import stat
import struct
import tokenize
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from arboreal._atomic import atomic_write
from arboreal.errors import ArborealError, ModelError


FORMAT = "arboreal-model"
FORMAT_VERSION = 1


#: members whose name ends so are written without compression: float32 weights and the
#: low bytes of float16 ones, which barely compress and would cost more to inflate than
#: to read
STORED_SUFFIX = ("_nz", "_f16_lo")
#: members whose name starts so are stored too: a neural scorer's float32 parameters and
#: float16 pretrained vectors, which barely compress either
STORED_PREFIX = ("nn_", "np_vectors")

#: Largest hashed weight vector a trainer writes: ``--hash-bits`` and FeatureSet
#: accept 10..30, so 2**30 float32 weights (4 GiB dense) is a legitimate vector.
MAX_WEIGHT_BITS = 30
#: One member: a dense float32 vector of 2**MAX_WEIGHT_BITS weights plus its header.
MAX_MEMBER_BYTES = 4 * (1 << MAX_WEIGHT_BITS) + (1 << 16)
#: All members together: a higher-order model holds two such vectors (model and
#: pruner) plus their bitmaps, the label classifier and the vocabularies.
MAX_TOTAL_BYTES = 2 * MAX_MEMBER_BYTES + (1 << 31)
#: The JSON metadata (templates, options, training history) is small in any real model.
MAX_META_BYTES = 1 << 24
#: One string list (a vocabulary or the label set): bytes and entries.
MAX_STRING_BYTES = 1 << 28
MAX_STRINGS = 1 << 24
MAX_MEMBERS = 256
#: numpy's own default limit for a .npy header (it parses the header with literal_eval)
MAX_HEADER_BYTES = 10_000
#: Weights of a trained model are far below this; larger ones (a corrupted exponent)
#: would make sums of scores overflow to inf and decoding meaningless.
MAX_ABS_WEIGHT = 1e30

_MEMBER_NAME = re.compile(r"[A-Za-z0-9_]{1,64}\.npy")
_ARRAY_KINDS = "biufU"
# the zip library's errors for corrupt members (flipped bits in compressed data or
# in the local headers), besides BadZipFile
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, lzma.LZMAError,
               EOFError, OSError, NotImplementedError, RuntimeError, struct.error,
               OverflowError, ValueError, KeyError)


def save_model_file(path: str | os.PathLike, meta: dict, arrays: dict[str, np.ndarray]) -> None:
    """Write ``meta`` (JSON-able; format keys added) and ``arrays`` atomically to ``path``.

    The file is an ordinary ``.npz`` (``np.load`` reads it); members whose names end
    in :data:`STORED_SUFFIX` or start with :data:`STORED_PREFIX` are stored uncompressed,
    all others deflated.
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
                stored = name.endswith(STORED_SUFFIX) or name.startswith(STORED_PREFIX)
                kind = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
                info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = kind
                with zf.open(info, "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, arr, allow_pickle=False)

    atomic_write(path, write)


def _read_npy_header(f, size: int) -> tuple[tuple[int, ...], np.dtype, bool]:
    """(shape, dtype, fortran_order) of the .npy member ``f`` of ``size`` bytes, checked:
    a plain numeric or str dtype (never object, structured or sub-array) and a shape
    whose byte count is exactly what follows the header. Reads only the header.
    ValueError on any problem."""
    prefix = f.read(12)
    if len(prefix) < 10 or prefix[:6] != b"\x93NUMPY":
        raise ValueError("not a .npy array")
    version = (prefix[6], prefix[7])
    if version == (1, 0):
        hlen, start = struct.unpack("<H", prefix[8:10])[0], 10
    elif version == (2, 0) and len(prefix) == 12:
        hlen, start = struct.unpack("<I", prefix[8:12])[0], 12
    else:
        raise ValueError(f".npy format version {version[0]}.{version[1]} is not supported")
    if hlen > MAX_HEADER_BYTES or start + hlen > size:
        raise ValueError(f".npy header of {hlen} bytes is too long")
    f.seek(0)
    np.lib.format.read_magic(f)
    read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
            else np.lib.format.read_array_header_2_0)
    try:
        shape, fortran, dtype = read(f, max_header_size=MAX_HEADER_BYTES)
    except (SyntaxError, RecursionError, MemoryError, TypeError, tokenize.TokenError) as exc:
        # numpy's header reader tokenizes the header text: a damaged one can fail in
        # the tokenizer (TokenError) as well as in the parser (SyntaxError)
        raise ValueError(f"unreadable .npy header ({exc.__class__.__name__})") from None
    if (dtype.hasobject or dtype.names is not None or dtype.subdtype is not None
            or dtype.kind not in _ARRAY_KINDS):
        raise ValueError(f"array type {dtype.str!r} is not allowed in a model file")
    if not isinstance(shape, tuple) or len(shape) > 8 or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ValueError(f"bad array shape {shape!r}")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes != size - f.tell():
        raise ValueError(f"the header declares {math.prod(shape)} values ({nbytes} bytes) "
                         f"but the member holds {size - f.tell()} bytes of data")
    return shape, dtype, bool(fortran)


class ModelArrays(Mapping):
    """The arrays of a model file, read from the file only when asked for.

    Every member's header was checked when the file was opened, so :meth:`shape` and
    :meth:`dtype` cost nothing and a loader can compare them with its metadata before
    any data is inflated. ``arrays[name]`` reads (once) with ``allow_pickle=False``
    and raises :class:`ModelError` naming the file if the member is corrupt.

    The archive opened to check the headers stays open for the reads that follow (its
    directory is parsed once, not once per member) until :meth:`close`, which a loader
    calls when it is done; an array asked for after that opens the file again.
    """

    def __init__(self, path: str, headers: dict[str, tuple[tuple[int, ...], np.dtype, bool, int]],
                 archive: zipfile.ZipFile | None = None):
        self.path = path
        self._headers = headers
        self._cache: dict[str, np.ndarray] = {}
        self._archive = archive
        #: the open file the archive reads (closed with it)
        self._handle = None

    def close(self) -> None:
        """Close the archive kept open since the headers were read (idempotent)."""
        archive, self._archive = self._archive, None
        if archive is not None:
            archive.close()
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.close()

    def shape(self, name: str) -> tuple[int, ...]:
        """The declared shape of member ``name`` (KeyError if there is none)."""
        return self._headers[name][0]

    def dtype(self, name: str) -> np.dtype:
        """The declared dtype of member ``name`` (KeyError if there is none)."""
        return self._headers[name][1]

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._cache:
            self._cache[name] = self._read(name)
        return self._cache[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._headers)

    def __len__(self) -> int:
        return len(self._headers)

    def _take(self, name: str) -> np.ndarray:
        """Read member ``name`` and drop it from the mapping (the metadata)."""
        arr = self._read(name)
        del self._headers[name]
        return arr

    def _read(self, name: str) -> np.ndarray:
        shape, dtype, fortran, size = self._headers[name]
        try:
            with _same_or_new(self._archive, self.path) as zf:
                info = zf.getinfo(name + ".npy")
                if info.file_size != size:
                    raise ValueError("the file changed while it was read")
                with zf.open(info) as f:
                    if _read_npy_header(f, size) != (shape, dtype, fortran):
                        raise ValueError("the file changed while it was read")
                    f.seek(0)
                    arr = np.lib.format.read_array(f, allow_pickle=False,
                                                   max_header_size=MAX_HEADER_BYTES)
                    f.read(1)   # reaching the end checks the member's CRC
        except _ZIP_ERRORS as exc:
            raise ModelError(f"{self.path}: not a readable arboreal model file (member "
                             f"{name}: {exc.__class__.__name__}: {exc})") from None
        return arr


def _what_it_is(path: str) -> str:
    """What a file that is not a model looks like, for the error message: a CoNLL-U
    file or text (a treebank or input given where the model was expected), else ""."""
    from arboreal.io.sniff import CONLLU, TEXT, sniff

    if not os.path.isfile(path):   # a pipe is not read twice
        return ""
    try:
        kind = sniff(path)[0]
        with open(path, "rb") as f:
            head = f.read(4096)
        (head[:head.rfind(b"\n") + 1] or head).decode("utf-8")   # whole lines
    except (OSError, UnicodeDecodeError, ArborealError):   # binary: no more to say
        return ""
    if b"\0" in head:
        return ""
    if kind == CONLLU:
        return (" (it is a CoNLL-U file; the MODEL is the file 'arboreal train' wrote, "
                "and comes first)")
    if kind == TEXT:
        return " (it is a text file; the MODEL is the file 'arboreal train' wrote)"
    return ""


class _same_or_new:
    """``with``: the open ``archive`` (left open), or ``path`` opened (and closed)."""

    def __init__(self, archive: zipfile.ZipFile | None, path: str):
        self.archive, self.path, self.opened = archive, path, None

    def __enter__(self) -> zipfile.ZipFile:
        if self.archive is not None and self.archive.fp is not None:
            return self.archive
        self.opened = zipfile.ZipFile(self.path)
        return self.opened

    def __exit__(self, *exc) -> None:
        if self.opened is not None:
            self.opened.close()


def _member_headers(path: str, zf: zipfile.ZipFile) -> dict:
    """The checked header of every member of the open archive ``zf`` (ModelError for
    a member that is not one of a model file); reads only the headers."""
    headers: dict = {}
    infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:
        raise ModelError(f"{path}: not an arboreal model file ({len(infos)} members)")
    total = 0
    for info in infos:
        name = info.filename
        if not _MEMBER_NAME.fullmatch(name):
            raise ModelError(f"{path}: not an arboreal model file "
                             f"(unexpected member {name[:80]!r})")
        key = name[:-4]
        if key in headers:
            raise ModelError(f"{path}: corrupt model file (member {name} appears twice)")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise ModelError(f"{path}: corrupt model file (member {name}: "
                             f"compression method {info.compress_type})")
        if info.flag_bits & 0x1:
            raise ModelError(f"{path}: corrupt model file (member {name} is encrypted)")
        limit = MAX_META_BYTES if key == "__meta__" else MAX_MEMBER_BYTES
        if info.file_size > limit:
            raise ModelError(f"{path}: corrupt model file (member {name} would inflate "
                             f"to {info.file_size} bytes, more than the {limit} "
                             "a model member can have)")
        total += info.file_size
        if total > MAX_TOTAL_BYTES:
            raise ModelError(f"{path}: corrupt model file (its members would inflate "
                             f"to more than the {MAX_TOTAL_BYTES} bytes a model can have)")
        with zf.open(info) as f:
            try:
                shape, dtype, fortran = _read_npy_header(f, info.file_size)
            except ValueError as exc:
                raise ModelError(f"{path}: corrupt model file (member {name}: "
                                 f"{exc})") from None
        headers[key] = (shape, dtype, fortran, info.file_size)
    if "__meta__" not in headers:
        raise ModelError(f"{path}: not an arboreal model file (no metadata)")
    if headers["__meta__"][0] != () or headers["__meta__"][1].kind != "U":
        raise ModelError(f"{path}: not an arboreal model file (bad metadata)")
    return headers


def _open_regular(path: str):
    """``path`` opened for reading if it is a regular file (symbolic links followed),
    else ModelError at once: a device (``/dev/zero``), FIFO or socket is never read (a
    FIFO is opened without waiting for a writer, to be refused)."""
    def nonblocking(name, flags):
        return os.open(name, flags | getattr(os, "O_NONBLOCK", 0))

    try:
        f = open(path, "rb", opener=nonblocking)
    except OSError as exc:
        raise ModelError(f"{path}: cannot be read ({exc.strerror})") from None
    info = os.fstat(f.fileno())
    if not stat.S_ISREG(info.st_mode):
        f.close()
        kind = ("a character device" if stat.S_ISCHR(info.st_mode) else
                "a block device" if stat.S_ISBLK(info.st_mode) else
                "a FIFO (named pipe)" if stat.S_ISFIFO(info.st_mode) else
                "a socket" if stat.S_ISSOCK(info.st_mode) else "not a regular file")
        raise ModelError(f"{path}: is {kind}, not a model file")
    if hasattr(os, "set_blocking"):
        os.set_blocking(f.fileno(), True)
    return f


def load_model_file(path: str | os.PathLike) -> tuple[dict, ModelArrays]:
    """Read a model file: ``(meta, arrays)``; ModelError naming the file on any problem.

    The zip structure, member sizes and ``.npy`` headers are checked first; the arrays
    are read lazily (:class:`ModelArrays`, a read-only mapping): a member is inflated
    only when a loader asks for it, after its header was checked."""
    path = str(path)
    if not os.path.exists(path):
        raise ModelError(f"{path}: no such model file")
    if os.path.isdir(path):
        raise ModelError(f"{path}: is a directory, not a model file")
    handle = _open_regular(path)
    zf = None   # stays open for the arrays' reads, until ModelArrays.close
    try:
        if not zipfile.is_zipfile(handle):
            raise ModelError(f"{path}: not an arboreal model file{_what_it_is(path)}")
        zf = zipfile.ZipFile(handle)
        headers = _member_headers(path, zf)
    except BaseException as exc:
        if zf is not None:
            zf.close()
        handle.close()
        if isinstance(exc, _ZIP_ERRORS) and not isinstance(exc, ModelError):
            raise ModelError(f"{path}: not a readable arboreal model file "
                             f"({exc.__class__.__name__}: {exc})") from None
        raise
    arrays = ModelArrays(path, headers, zf)
    arrays._handle = handle          # the file the archive reads, closed with it
    try:
        return _checked_meta(path, arrays)
    except BaseException:
        arrays.close()
        raise


def _checked_meta(path: str, arrays: ModelArrays) -> tuple[dict, ModelArrays]:
    """The metadata of an opened model file, checked: ``(meta, arrays)``."""
    text = str(arrays._take("__meta__"))
    try:
        meta = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ModelError(f"{path}: not an arboreal model file (metadata is not JSON: "
                         f"{exc.__class__.__name__})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ModelError(f"{path}: not an arboreal model (foreign .npz file)")
    if meta.get("format_version") != FORMAT_VERSION:
        raise ModelError(f"{path}: model format version {meta.get('format_version')!r:.40} is "
                         f"not supported (this arboreal reads version {FORMAT_VERSION})")
    return meta, arrays


_REQUIRED: Any = object()


class MetaFields:
    """Typed, range-checked access to one JSON object of a model file's metadata.

    Every accessor raises :class:`ModelError` naming the file and the field (dotted
    path) when the field is missing (and has no default), has the wrong JSON type or
    lies outside its range; booleans are never accepted as numbers.
    """

    def __init__(self, path: str, data: Any, where: str = ""):
        self.path = path
        self.where = where
        if not isinstance(data, dict):
            raise self._error("", "is not a JSON object")
        self.data = data

    def _error(self, key: str, problem: str) -> ModelError:
        name = f"{self.where}.{key}" if self.where and key else (self.where or key or "metadata")
        return ModelError(f"{self.path}: model metadata field {name!r} {problem}")

    def _get(self, key: str, default: Any) -> Any:
        if key in self.data:
            return self.data[key]
        if default is _REQUIRED:
            raise self._error(key, "is missing")
        return default

    def has(self, key: str) -> bool:
        """Whether ``key`` is present."""
        return key in self.data

    def section(self, key: str) -> "MetaFields":
        """The nested object ``key``."""
        value = self._get(key, _REQUIRED)
        if not isinstance(value, dict):
            raise self._error(key, "is not a JSON object")
        return MetaFields(self.path, value, f"{self.where}.{key}" if self.where else key)

    def int(self, key: str, lo: int, hi: int, default: Any = _REQUIRED) -> int:
        """An integer in [lo, hi]."""
        value = self._get(key, default)
        if value is default and default is not _REQUIRED:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._error(key, f"must be an integer, not {type(value).__name__}")
        if not lo <= value <= hi:
            raise self._error(key, f"must lie in {lo}..{hi}")
        return value

    def number(self, key: str, lo: float, hi: float, default: Any = _REQUIRED,
               lo_open: bool = False, none_ok: bool = False) -> float | None:
        """A finite number in [lo, hi] ((lo, hi] with ``lo_open``); None if ``none_ok``."""
        value = self._get(key, default)
        if value is default and default is not _REQUIRED:
            return value
        if value is None and none_ok:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._error(key, f"must be a number, not {type(value).__name__}")
        value = float(value)
        if not (math.isfinite(value) and (lo < value if lo_open else lo <= value) and value <= hi):
            raise self._error(key, f"must lie in {'(' if lo_open else '['}{lo}, {hi}]")
        return value

    def bool(self, key: str, default: Any = _REQUIRED) -> bool:
        """true or false."""
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise self._error(key, f"must be true or false, not {type(value).__name__}")
        return value

    def choice(self, key: str, choices, default: Any = _REQUIRED) -> str:
        """One of the strings ``choices``."""
        value = self._get(key, default)
        if not isinstance(value, str) or value not in choices:
            raise self._error(key, f"must be one of {', '.join(map(str, choices))}")
        return value

    def strings(self, key: str, max_items: int = 4096, max_length: int = 256,
                default: Any = _REQUIRED) -> list[str]:
        """A list of at most ``max_items`` strings of at most ``max_length`` characters."""
        value = self._get(key, default)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._error(key, "must be a list of strings")
        if len(value) > max_items or any(len(v) > max_length for v in value):
            raise self._error(key, f"must hold at most {max_items} strings of at most "
                                   f"{max_length} characters")
        return list(value)

    def json(self, key: str, kind: type, default: Any = _REQUIRED) -> Any:
        """Any JSON value of Python type ``kind`` (dict, list, ...), not interpreted."""
        value = self._get(key, default)
        if not isinstance(value, kind):
            raise self._error(key, f"must be a JSON {kind.__name__}")
        return value

    def fail(self, key: str, problem: str) -> ModelError:
        """A ModelError about field ``key`` (for checks across fields)."""
        return self._error(key, problem)


def array_shape(arrays: Mapping, name: str) -> tuple[int, ...]:
    """Shape of array ``name`` without reading it from a :class:`ModelArrays`
    (KeyError if absent)."""
    if isinstance(arrays, ModelArrays):
        return arrays.shape(name)
    return np.shape(arrays[name])


def _check_vector(arrays: Mapping, name: str, max_size: int) -> None:
    shape = array_shape(arrays, name)
    if len(shape) != 1 or shape[0] > max_size:
        raise ValueError(f"{name} has shape {shape}, expected a vector of at most "
                         f"{max_size} values")


def _check_values(name: str, values: np.ndarray) -> None:
    if values.size and not (np.isfinite(values).all() and np.abs(values).max() <= MAX_ABS_WEIGHT):
        raise ValueError(f"{name} holds non-finite or implausibly large weights")


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


def get_weights(arrays: Mapping, prefix: str, size: int) -> np.ndarray:
    """Inverse of :func:`put_weights`: a float32 vector of ``size`` weights (64-byte aligned).

    Also reads the encodings of earlier files (``prefix_idx`` + ``prefix_val``, or
    ``prefix_dense``). ValueError if the stored vector does not have ``size`` weights
    (checked on the headers before anything is read from a :class:`ModelArrays`) or
    holds non-finite or implausibly large values.
    """
    from arboreal._arrays import aligned_zeros
    from arboreal.io._bitmap import scatter_bitmap

    if f"{prefix}_mask" in arrays:
        mask_shape = array_shape(arrays, f"{prefix}_mask")
        if mask_shape != ((size + 7) // 8,):
            raise ValueError(f"{prefix}_mask covers {8 * math.prod(mask_shape)} weights, "
                             f"expected {size}")
        bits = np.asarray(arrays[f"{prefix}_mask"], dtype=np.uint8)
        if f"{prefix}_f16_hi" in arrays:
            values = _half_values(arrays, prefix, size)
        else:
            _check_vector(arrays, f"{prefix}_nz", size)
            values = np.asarray(arrays[f"{prefix}_nz"], dtype=np.float32)
        _check_values(f"{prefix}_nz", values)
        out = aligned_zeros(size)
        used = scatter_bitmap(bits, values, out)
        if used != values.size:
            raise ValueError(f"{prefix}_nz has {values.size} values for "
                             f"{int(np.unpackbits(bits, count=size).sum())} non-zero weights")
        return out
    if f"{prefix}_dense" in arrays:
        if array_shape(arrays, f"{prefix}_dense") != (size,):
            raise ValueError(f"{prefix}_dense has shape {array_shape(arrays, f'{prefix}_dense')}, "
                             f"expected ({size},)")
        dense = np.asarray(arrays[f"{prefix}_dense"], dtype=np.float32)
        _check_values(f"{prefix}_dense", dense)
        out = aligned_zeros(size)
        out[:] = dense
        return out
    _check_vector(arrays, f"{prefix}_idx", size)
    _check_vector(arrays, f"{prefix}_val", size)
    if array_shape(arrays, f"{prefix}_idx") != array_shape(arrays, f"{prefix}_val"):
        raise ValueError(f"{prefix}_idx and {prefix}_val differ in length")
    idx = np.asarray(arrays[f"{prefix}_idx"])
    if idx.dtype.kind not in "iu":
        raise ValueError(f"{prefix}_idx: weight indices must be integers")
    val = np.asarray(arrays[f"{prefix}_val"], dtype=np.float32)
    _check_values(f"{prefix}_val", val)
    out = aligned_zeros(size)
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        raise ValueError(f"{prefix}_idx: weight index out of range")
    out[idx] = val
    return out


#: float16 keeps 11 significant bits; :func:`put_half_weights` may keep fewer (at least 4)
HALF_BITS = 11


def put_half_weights(arrays: dict, prefix: str, bits: np.ndarray, values: np.ndarray,
                     significant_bits: int = HALF_BITS) -> bool:
    """Store the non-zero ``values`` of a weight vector (in the order of the set bits of
    the bitmap ``bits``) as float16, scaled by a power of two, when that is safe: every
    value, scaled, is a normal float16 (no overflow, no loss to the subnormal range),
    so that each weight keeps its ``significant_bits`` (4..11; rounded to nearest:
    relative error at most 2**-significant_bits).

    Members: ``prefix_mask``; ``prefix_f16_hi``, the high bytes of the little-endian
    float16 values (sign, exponent, two mantissa bits: few distinct values, deflated);
    ``prefix_f16_lo``, the top ``significant_bits - 3`` bits of their low bytes (noise:
    bit-packed and stored), which together weigh less and inflate faster than the
    values deflated whole; ``prefix_f16_scale``, ``[e, significant_bits]`` (weight =
    value * 2**-e, exact). Returns False, writing nothing, when it is not safe.
    O(n) vectorized."""
    if not 4 <= significant_bits <= HALF_BITS:
        raise ValueError(f"significant bits must lie in 4..{HALF_BITS}")
    values = np.asarray(values, dtype=np.float32)
    if values.size == 0 or not np.isfinite(values).all() or not (values != 0).all():
        return False
    magnitude = np.abs(values)
    # the largest scaled value below 2**15 (float16 reaches 65504 < 2**16; rounding to
    # fewer bits may carry it up to 2**15, still finite)
    exponent = 14 - int(np.floor(np.log2(float(magnitude.max()))))
    if not -126 <= exponent <= 126 or float(magnitude.min()) * 2.0 ** exponent < 2.0 ** -14:
        return False
    pattern = (values.astype(np.float64) * 2.0 ** exponent).astype("<f2").view("<u2")
    dropped = HALF_BITS - significant_bits
    if dropped:   # round the magnitude to nearest (sign-magnitude: carries are exact)
        pattern = ((pattern.astype(np.uint32) + (1 << (dropped - 1))) >> dropped
                   << dropped).astype("<u2")
    kept = 8 - dropped           # bits of the low byte that carry information
    low = (pattern & 0xFF).astype(np.uint8)
    arrays[f"{prefix}_mask"] = np.asarray(bits, dtype=np.uint8)
    arrays[f"{prefix}_f16_hi"] = (pattern >> 8).astype(np.uint8)
    arrays[f"{prefix}_f16_lo"] = low if kept == 8 else np.packbits(
        np.unpackbits(low[:, None], axis=1)[:, :kept])
    arrays[f"{prefix}_f16_scale"] = np.array([exponent, significant_bits], dtype=np.int16)
    return True


def _half_values(arrays: Mapping, prefix: str, size: int) -> np.ndarray:
    """The float32 values of :func:`put_half_weights`' members, checked."""
    _check_vector(arrays, f"{prefix}_f16_hi", size)
    if array_shape(arrays, f"{prefix}_f16_scale") != (2,):
        raise ValueError(f"{prefix}_f16_scale is not two numbers")
    scale = np.asarray(arrays[f"{prefix}_f16_scale"])
    if scale.dtype.kind not in "iu" or not -126 <= int(scale[0]) <= 126 \
            or not 4 <= int(scale[1]) <= HALF_BITS:
        raise ValueError(f"{prefix}_f16_scale must be an exponent in -126..126 and a "
                         f"number of significant bits in 4..{HALF_BITS}")
    exponent, kept = int(scale[0]), int(scale[1]) - 3
    n = array_shape(arrays, f"{prefix}_f16_hi")[0]
    if array_shape(arrays, f"{prefix}_f16_lo") != ((n * kept + 7) // 8,):
        raise ValueError(f"{prefix}_f16_lo does not hold {kept} bits for each of the "
                         f"{n} values")
    from arboreal.io._bitmap import merge_half_planes

    high = np.ascontiguousarray(arrays[f"{prefix}_f16_hi"], dtype=np.uint8)
    low = np.ascontiguousarray(arrays[f"{prefix}_f16_lo"], dtype=np.uint8)
    pattern = np.empty(n, dtype="<u2")
    if n:
        merge_half_planes(high, low, kept, pattern)
    return pattern.view("<f2").astype(np.float32) * np.float32(2.0 ** -exponent)


def put_strings(arrays: dict, name: str, strings) -> None:
    """Add a list of strings (none containing a newline) as one UTF-8 buffer ``name``:
    a fixed-width unicode array would cost 4 bytes times the longest string per entry."""
    arrays[name] = np.frombuffer("\n".join(strings).encode("utf-8"), dtype=np.uint8)
    arrays[name + "_count"] = np.array(len(strings), dtype=np.int64)


def get_strings(arrays: Mapping, name: str, max_count: int = MAX_STRINGS) -> np.ndarray:
    """Inverse of :func:`put_strings` (also reads a plain str array): a str array.

    ValueError if the buffer is larger than :data:`MAX_STRING_BYTES`, holds more than
    ``max_count`` strings or disagrees with its count (checked before decoding).
    """
    strings = get_string_list(arrays, name, max_count)
    return np.array(strings, dtype=str) if strings else np.zeros(0, dtype=str)


def get_string_list(arrays: Mapping, name: str, max_count: int = MAX_STRINGS) -> list[str]:
    """:func:`get_strings` as a list of Python strings, without the fixed-width str
    array between (which costs more than the decoding for a large vocabulary)."""
    shape = array_shape(arrays, name)
    if isinstance(arrays, ModelArrays):
        dtype = arrays.dtype(name)
        nbytes = math.prod(shape) * dtype.itemsize
    else:
        dtype = np.asarray(arrays[name]).dtype
        nbytes = np.asarray(arrays[name]).nbytes
    if len(shape) != 1:
        raise ValueError(f"{name} is not a list of strings (shape {shape})")
    if nbytes > MAX_STRING_BYTES:
        raise ValueError(f"{name} holds {nbytes} bytes of strings, more than {MAX_STRING_BYTES}")
    if dtype.kind == "U":
        if shape[0] > max_count:
            raise ValueError(f"{name} holds {shape[0]} strings, more than {max_count}")
        return np.asarray(arrays[name]).tolist()
    if dtype != np.uint8:
        raise ValueError(f"{name} is not a UTF-8 buffer (type {dtype.str})")
    if array_shape(arrays, name + "_count") != ():
        raise ValueError(f"{name}_count is not one number")
    count_arr = np.asarray(arrays[name + "_count"])
    if count_arr.dtype.kind not in "iu":
        raise ValueError(f"{name}_count is not an integer")
    count = int(count_arr)
    if not 0 <= count <= max_count:
        raise ValueError(f"{name}_count {count} is out of range 0..{max_count}")
    arr = np.asarray(arrays[name]).reshape(-1)
    if count == 0:
        if arr.size:
            raise ValueError(f"{name} holds strings but its count is 0")
        return []
    if int(np.count_nonzero(arr == 10)) != count - 1:
        raise ValueError(f"{name} holds {int(np.count_nonzero(arr == 10)) + 1} strings, "
                         f"expected {count}")
    return arr.tobytes().decode("utf-8").split("\n")


def put_vocabs(arrays: dict, vocabs: dict) -> None:
    """Add a feature set's vocabularies as ``vocab_<name>`` string buffers."""
    for name, vocab in vocabs.items():
        put_strings(arrays, f"vocab_{name}", [str(v) for v in np.asarray(vocab).tolist()])


def get_vocabs(arrays: dict) -> dict[str, np.ndarray]:
    """Inverse of :func:`put_vocabs` (also reads earlier files' str arrays)."""
    return {k[len("vocab_"):]: get_strings(arrays, k) for k in arrays
            if k.startswith("vocab_") and not k.endswith("_count")}
