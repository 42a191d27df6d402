"""Smaller model files for distribution (``arboreal shrink``, ``arboreal package``).

A trained model's weight vectors (the parser's arc and label weights, the tagger's and
the tokenizer's; :func:`~arboreal.io.model_file.put_weights`) are hashed and
mostly tiny: an averaged perceptron or MIRA leaves a small weight on every rare feature
it ever saw. :func:`compact_arrays` rewrites each of them at the file level:

1. weights never used (zero) stay out, as in every model file (a bitmap of the
   non-zero ones: the sparse index);
2. weights too small to matter are dropped: ``|w| < threshold * mean |w|``, the mean
   over the vector's non-zero weights, with the threshold of the vector's role
   (:data:`DEFAULT_THRESHOLDS`);
3. the rest are stored as float16 scaled by a power of two, where that is safe
   (:func:`~arboreal.io.model_file.put_half_weights`: every value a normal
   float16), rounded to :data:`DEFAULT_BITS` significant bits, else as float32.

A neural scorer's parameters (``nn_*``, float32 tensors) are stored as float16 where
every value is finite and within float16's range, none dropped (:func:`half_tensors`):
the scorer loads them as float32 and parses in bfloat16 on CPUs that compute it (a
coarser rounding than float16's) or float32 elsewhere.

Everything else in the file (vocabularies, labels, templates, metadata) is copied as
it is, and the metadata records what was done (``compact``). Loading needs nothing
new: the file holds an ordinary model whose weights are the rounded survivors.

The defaults were chosen on EWT's dev split (``benchmarks/compact.py --sweep``,
docs/benchmarks.md "Compact models"): of the settings that make the EWT pipeline at
least 5.3x smaller, the one whose parses differ from the full model's in the fewest
words. Per role, because the roles differ: the parser's arc weights (MIRA, continuous
updates) and its label weights can lose the weights below their mean, while the
tagger's and the tokenizer's (perceptrons whose rare-word features sit near one
update) lose tag accuracy from a threshold of 0.2 or so, and keep all but the
negligible ones (below 2% of the mean: averaging residue float16 could not hold
anyway). A model of another kind (higher order, joint labels) gets the same table,
measured only on the default first-order pipeline.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from arboreal.io.model_file import put_half_weights

#: weight-vector prefix -> threshold (in units of the vector's mean |w|); "*": every
#: other vector. "w": the parser's arc (and part) weights; "l": its label classifier.
DEFAULT_THRESHOLDS: dict[str, float] = {"w": 1.0, "l": 1.0, "*": 0.02}
#: significant bits kept of each float16 weight (11: all that float16 has)
DEFAULT_BITS = 8


def weight_prefixes(arrays: Mapping) -> list[str]:
    """The float32 weight vectors of a model file: the prefixes with ``_mask`` and
    ``_nz`` (the vectors of an already compact file are float16 and not listed)."""
    return sorted(k[:-5] for k in arrays if k.endswith("_mask") and f"{k[:-5]}_nz" in arrays)


#: the prefix of a neural scorer's parameters in a model file
NEURAL_PREFIX = "nn_"
#: float16's largest finite value
FLOAT16_MAX = 65504.0


def half_tensors(arrays: Mapping, prefix: str = NEURAL_PREFIX) -> tuple[dict, dict]:
    """The float32 tensors under ``prefix`` as float16, each where all its values are
    finite and fit (else kept as they are): ``(arrays to replace, report)``. O(size)."""
    out, halved, kept = {}, 0, 0
    for key in arrays:
        if not key.startswith(prefix):
            continue
        value = np.asarray(arrays[key])
        if value.dtype != np.float32:
            continue
        if np.isfinite(value).all() and (value.size == 0
                                         or float(np.abs(value).max()) < FLOAT16_MAX):
            out[key] = value.astype(np.float16)
            halved += value.size
        else:
            kept += value.size
    return out, {"float16": halved, "float32": kept}


def parse_thresholds(text: str) -> dict[str, float]:
    """``--threshold``: one number for every vector, or ``PREFIX=NUMBER,...`` (``*``:
    the others, default :data:`DEFAULT_THRESHOLDS`'s). ValueError when malformed."""
    table = dict(DEFAULT_THRESHOLDS)
    try:
        if "=" not in text:
            value = float(text)
            table = {"*": value}
        else:
            for item in text.split(","):
                prefix, _, number = item.partition("=")
                table[prefix.strip()] = float(number)
    except ValueError:
        raise ValueError(f"{text!r}: give a number, or PREFIX=NUMBER,... "
                         "(e.g. w=1.5,l=1.5,*=0.02)") from None
    if not all(np.isfinite(v) and v >= 0 for v in table.values()):
        raise ValueError(f"{text!r}: thresholds must be finite and at least 0")
    return table


def threshold_of(table: Mapping[str, float], prefix: str) -> float:
    """The threshold of vector ``prefix`` in ``table`` (its own, else ``*``, else 0)."""
    return float(table.get(prefix, table.get("*", 0.0)))


def compact_vector(bits: np.ndarray, values: np.ndarray, threshold: float,
                   float16: bool = True, significant_bits: int = DEFAULT_BITS
                   ) -> tuple[dict, dict]:
    """One weight vector (bitmap ``bits`` over its weights, ``values`` its non-zero
    weights in order) compacted: ``(members, report)``, the members to store under the
    vector's prefix (``mask`` with ``f16_hi``, ``f16_lo`` and ``f16_scale``, or ``mask``
    with ``nz``) and what was done (kept, dropped, float16). ``significant_bits``: of
    each float16 weight (4..11). O(size), vectorized."""
    values = np.asarray(values, dtype=np.float32)
    magnitude = np.abs(values)
    cut = threshold * float(magnitude.mean()) if values.size else 0.0
    keep = (magnitude >= cut) & (values != 0)
    set_bits = np.flatnonzero(np.unpackbits(np.asarray(bits, dtype=np.uint8)))
    if set_bits.size != values.size:
        raise ValueError(f"a bitmap of {set_bits.size} weights for {values.size} values")
    mask = np.zeros(8 * np.asarray(bits).size, dtype=np.uint8)
    mask[set_bits[keep]] = 1
    new_bits = np.packbits(mask)
    kept = values[keep]
    members: dict = {}
    half = float16 and put_half_weights(members, "", new_bits, kept, significant_bits)
    if not half:
        members = {"_mask": new_bits, "_nz": kept}
    return ({k[1:]: v for k, v in members.items()},
            {"threshold": threshold, "kept": int(kept.size),
             "dropped": int(values.size - kept.size), "float16": bool(half),
             "significant_bits": significant_bits if half else 24})


def compact_arrays(meta: dict, arrays: Mapping,
                   thresholds: Mapping[str, float] | None = None,
                   float16: bool = True, significant_bits: int = DEFAULT_BITS
                   ) -> tuple[dict, dict]:
    """``(meta, arrays)`` of the compact model (module docstring), to be written by
    :func:`~arboreal.io.model_file.save_model_file`; ``arrays`` may be a
    :class:`~arboreal.io.model_file.ModelArrays`. ``thresholds``: prefix ->
    threshold (default :data:`DEFAULT_THRESHOLDS`)."""
    table = DEFAULT_THRESHOLDS if thresholds is None else thresholds
    prefixes = weight_prefixes(arrays)
    replaced = {f"{p}_{suffix}" for p in prefixes for suffix in ("mask", "nz")}
    out = {k: np.asarray(arrays[k]) for k in arrays if k not in replaced}
    report = {}
    for prefix in prefixes:
        vector, report[prefix] = compact_vector(np.asarray(arrays[f"{prefix}_mask"]),
                                                np.asarray(arrays[f"{prefix}_nz"]),
                                                threshold_of(table, prefix), float16,
                                                significant_bits)
        out.update({f"{prefix}_{k}": v for k, v in vector.items()})
    halves, neural = half_tensors(out) if float16 else ({}, {})
    out.update(halves)
    new_meta = {k: v for k, v in meta.items() if k not in ("format", "format_version")}
    new_meta["compact"] = {
        "thresholds": dict(table), "float16": float16, "significant_bits": significant_bits,
        "weights_kept": sum(r["kept"] for r in report.values()),
        "weights_dropped": sum(r["dropped"] for r in report.values()),
        "vectors": report}
    if neural.get("float16") or neural.get("float32"):
        new_meta["compact"]["neural_parameters"] = neural
    return new_meta, out
