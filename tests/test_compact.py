"""Compact model files: float16 weights where safe, small weights dropped, the rest of
the model untouched; ``arboreal shrink``."""
from __future__ import annotations

import numpy as np
import pytest

import arboreal
from arboreal.cli import main
from arboreal.errors import ModelError
from arboreal.models.compact import (DEFAULT_BITS, DEFAULT_THRESHOLDS, compact_arrays,
                                     compact_vector, parse_thresholds)
from arboreal.io.model_file import (get_weights, load_model_file, put_half_weights,
                                           put_weights, save_model_file)


def half_rounded(values: np.ndarray, bits: int = 11) -> np.ndarray:
    """``values`` as a compact file returns them: float16 after the power-of-two scaling
    :func:`put_half_weights` chooses, then rounded (to nearest, ties away from zero) to
    ``bits`` significant bits."""
    exponent = 14 - int(np.floor(np.log2(np.abs(values).max())))
    half = (values.astype(np.float64) * 2.0 ** exponent).astype(np.float16).astype(np.float64)
    mantissa, power = np.frexp(np.abs(half))              # mantissa in [0.5, 1)
    rounded = np.floor(mantissa * 2.0 ** bits + 0.5) / 2.0 ** bits
    return (np.sign(half) * np.ldexp(rounded, power) * 2.0 ** -exponent).astype(np.float32)


@pytest.mark.parametrize("bits", [11, 8, 4])
def test_half_weights_round_trip_to_their_bits(bits):
    rng = np.random.default_rng(0)
    w = np.zeros(1000, dtype=np.float32)
    w[rng.choice(1000, 300, replace=False)] = rng.normal(0, 1e-3, 300) * 10 ** rng.uniform(
        -3, 3, 300)
    arrays: dict = {}
    put_weights(arrays, "w", w)
    assert put_half_weights(arrays, "h", arrays["w_mask"], arrays["w_nz"], bits)
    assert arrays["h_f16_hi"].dtype == np.uint8
    assert arrays["h_f16_lo"].size == (300 * (bits - 3) + 7) // 8     # bit-packed
    back = get_weights(arrays, "h", 1000)
    assert ((back != 0) == (w != 0)).all()
    nz = w != 0
    # float16's own rounding, then the rounding to fewer bits
    assert np.all(np.abs(back[nz] - w[nz]) <= np.abs(w[nz]) * (2.0 ** -11 + 2.0 ** -bits))
    assert np.array_equal(back[nz], half_rounded(w[nz], bits))


def test_half_weights_refuse_what_float16_cannot_hold():
    bits = np.packbits(np.ones(8, dtype=np.uint8))
    wide = np.array([1e-12, 1, 1, 1, 1, 1, 1, 2], dtype=np.float32)   # 2**41 apart
    arrays: dict = {}
    assert not put_half_weights(arrays, "w", bits, wide) and arrays == {}
    assert not put_half_weights(arrays, "w", bits, np.array([np.inf] + [1.0] * 7,
                                                            dtype=np.float32))


def test_compact_vector_drops_below_threshold_times_mean():
    values = np.array([0.1, 1.0, 2.0, -3.0, 0.05], dtype=np.float32)   # mean |w| 1.23
    mask = np.zeros(16, dtype=np.uint8)
    where = [1, 4, 7, 9, 15]
    mask[where] = 1
    members, report = compact_vector(np.packbits(mask), values, 0.5)
    assert report == {"threshold": 0.5, "kept": 3, "dropped": 2, "float16": True,
                      "significant_bits": DEFAULT_BITS}
    kept_bits = np.flatnonzero(np.unpackbits(members["mask"]))
    assert kept_bits.tolist() == [4, 7, 9]
    arrays = {f"v_{k}": v for k, v in members.items()}
    out = get_weights(arrays, "v", 16)
    assert out[[4, 7, 9]].tolist() == [1.0, 2.0, -3.0] and np.count_nonzero(out) == 3
    members, report = compact_vector(np.packbits(mask), values, 0.0, float16=False)
    assert report["kept"] == 5 and np.array_equal(members["nz"], values)


def test_parse_thresholds():
    assert parse_thresholds("0.5") == {"*": 0.5}
    assert parse_thresholds("w=2,*=0.1") == {**DEFAULT_THRESHOLDS, "w": 2.0, "*": 0.1}
    assert parse_thresholds("l=3") == {**DEFAULT_THRESHOLDS, "l": 3.0}
    for bad in ("x", "w=", "-1", "w=nan"):
        with pytest.raises(ValueError):
            parse_thresholds(bad)


def test_shrink_keeps_the_rounded_survivors(tiny_pipeline, tmp_path, capsys):
    small = tmp_path / "small.model"
    assert main(["shrink", str(tiny_pipeline), "-o", str(small)]) == 0
    assert "x smaller" in capsys.readouterr().err
    assert small.stat().st_size < tiny_pipeline.stat().st_size
    full, compact = arboreal.load(tiny_pipeline), arboreal.load(small)
    for name, before, after in (("w", full.weights, compact.weights),
                                ("l", full.labeler.W.ravel(), compact.labeler.W.ravel()),
                                ("tagger_upos_w", full.tagger.stages["upos"].weights,
                                 compact.tagger.stages["upos"].weights)):
        nz = before[before != 0]
        cut = DEFAULT_THRESHOLDS.get(name, DEFAULT_THRESHOLDS["*"]) * np.abs(nz).mean()
        keep = np.abs(before) >= cut
        assert np.count_nonzero(after) == np.count_nonzero(keep), name
        assert np.array_equal(after[keep], half_rounded(before[keep], DEFAULT_BITS)), name
        assert not after[~keep].any(), name
    # everything but the weights is the model's own
    meta, _ = load_model_file(small)
    assert meta["compact"]["weights_dropped"] > 0 and meta["features"] == \
        load_model_file(tiny_pipeline)[0]["features"]
    assert len(compact.parse_text("The cat sat on the mat.")) == 1
    # a compact model is not compacted twice
    assert main(["shrink", str(small), "-o", str(tmp_path / "again.model")]) == 0
    assert "compact already" in capsys.readouterr().err


def test_shrink_without_dropping_or_rounding_changes_nothing(tiny_pipeline, tmp_path):
    same = tmp_path / "same.model"
    assert main(["shrink", str(tiny_pipeline), "-o", str(same), "--threshold", "0",
                 "--float32"]) == 0
    assert "weights_dropped" in load_model_file(same)[0]["compact"]
    full, copy = arboreal.load(tiny_pipeline), arboreal.load(same)
    assert np.array_equal(full.weights, copy.weights)
    assert np.array_equal(full.labeler.W, copy.labeler.W)
    text = "The cat sat on the mat. It purred.\n\nA new paragraph."
    assert [s.heads.tolist() for s in full.parse_text(text)] == \
        [s.heads.tolist() for s in copy.parse_text(text)]


def test_shrink_bad_threshold_is_one_line(tiny_pipeline, tmp_path, capsys):
    assert main(["shrink", str(tiny_pipeline), "-o", str(tmp_path / "x"), "--threshold",
                 "w=big"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--threshold" in err
    assert not (tmp_path / "x").exists()


def test_a_damaged_compact_file_is_a_model_error(tiny_pipeline, tmp_path):
    meta, arrays = load_model_file(tiny_pipeline)
    meta, arrays = compact_arrays(meta, arrays)
    for member, value in (("w_f16_lo", np.zeros(3, dtype=np.uint8)),
                          ("w_f16_scale", np.array([500, 8], dtype=np.int16)),
                          ("w_f16_scale", np.array([3, 12], dtype=np.int16)),
                          ("w_f16_scale", np.array(3, dtype=np.int16)),
                          ("w_f16_scale", np.array([1.5, 8], dtype=np.float32))):
        bad = tmp_path / f"bad-{member}.model"
        save_model_file(bad, meta, {**arrays, member: value})
        with pytest.raises(ModelError, match=str(bad)):
            arboreal.load(bad)
