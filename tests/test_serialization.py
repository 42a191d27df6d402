"""Model-file encodings: weight bitmaps, string buffers, stored/deflated members."""
import zipfile

import numpy as np
import pytest

from arboreal.io.model_file import (get_strings, get_vocabs, get_weights,
                                           load_model_file, put_strings, put_vocabs,
                                           put_weights, save_model_file)


@pytest.mark.parametrize("density", [0.0, 0.05, 0.5, 1.0])
def test_weights_round_trip_through_a_file(tmp_path, density):
    rng = np.random.default_rng(1)
    size = 4099   # not a multiple of 8: the bitmap's last byte is partial
    w = np.where(rng.random(size) < density, rng.normal(size=size), 0.0).astype(np.float32)
    arrays = {}
    put_weights(arrays, "w", w)
    save_model_file(tmp_path / "m.npz", {"model_type": "test"}, arrays)
    _, back = load_model_file(tmp_path / "m.npz")
    out = get_weights(back, "w", size)
    assert out.dtype == np.float32 and np.array_equal(out, w)


def test_weight_values_are_stored_uncompressed_and_the_rest_deflated(tmp_path):
    arrays = {}
    put_weights(arrays, "w", np.arange(1000, dtype=np.float32))
    put_strings(arrays, "labels", ["nsubj", "obj"])
    save_model_file(tmp_path / "m.npz", {"model_type": "test"}, arrays)
    with zipfile.ZipFile(tmp_path / "m.npz") as z:
        kinds = {i.filename: i.compress_type for i in z.infolist()}
    assert kinds["w_nz.npy"] == zipfile.ZIP_STORED
    assert kinds["w_mask.npy"] == kinds["labels.npy"] == kinds["__meta__.npy"] == zipfile.ZIP_DEFLATED
    with np.load(tmp_path / "m.npz", allow_pickle=False) as z:   # still a plain .npz
        assert np.array_equal(z["w_nz"], np.arange(1, 1000, dtype=np.float32))


def test_earlier_weight_encodings_still_load():
    w = np.array([0, 1.5, 0, -2, 0, 0], dtype=np.float32)
    sparse = {"w_idx": np.array([1, 3], dtype=np.int32), "w_val": np.array([1.5, -2], np.float32)}
    assert np.array_equal(get_weights(sparse, "w", 6), w)
    assert np.array_equal(get_weights({"w_dense": w}, "w", 6), w)


def test_inconsistent_weights_are_rejected():
    arrays = {}
    put_weights(arrays, "w", np.array([0, 1, 2], dtype=np.float32))
    with pytest.raises(ValueError):
        get_weights(arrays, "w", 100)          # bitmap for another size
    arrays["w_nz"] = arrays["w_nz"][:1]
    with pytest.raises(ValueError):
        get_weights(arrays, "w", 3)            # fewer values than set bits
    long = {}
    put_weights(long, "w", np.arange(1, 1001, dtype=np.float32))
    long["w_nz"] = long["w_nz"][:-1]
    with pytest.raises(ValueError):            # the same in a long, dense vector
        get_weights(long, "w", 1000)
    with pytest.raises(ValueError):            # more values than set bits
        get_weights({"w_mask": np.packbits([0, 1, 0]), "w_nz": np.ones(2, np.float32)}, "w", 3)
    with pytest.raises(ValueError):            # a set bit past the vector's end
        get_weights({"w_mask": np.array([0b01000100], np.uint8),
                     "w_nz": np.ones(2, np.float32)}, "w", 3)
    with pytest.raises(ValueError):
        get_weights({"w_dense": np.zeros(5, np.float32)}, "w", 3)
    with pytest.raises(ValueError):
        get_weights({"w_idx": np.array([7]), "w_val": np.ones(1, np.float32)}, "w", 3)


def test_strings_and_vocabularies_round_trip():
    words = ["the", "Zürich", "", "naïve", "日本"]
    arrays = {}
    put_strings(arrays, "labels", words)
    put_strings(arrays, "empty", [])
    assert get_strings(arrays, "labels").tolist() == words
    assert get_strings(arrays, "empty").size == 0
    assert get_strings({"old": np.array(["a", "b"])}, "old").tolist() == ["a", "b"]
    vocabs = {"word": np.array(["a", "b"]), "pos": np.array(["NOUN"])}
    arrays = {"labels": np.array(["x"])}
    put_vocabs(arrays, vocabs)
    back = get_vocabs(arrays)
    assert set(back) == {"word", "pos"}
    assert back["word"].tolist() == ["a", "b"] and back["pos"].tolist() == ["NOUN"]


def test_arrays_are_read_lazily_after_their_headers_are_checked(tmp_path):
    from arboreal.errors import ModelError
    from arboreal.io.model_file import ModelArrays

    arrays = {}
    put_weights(arrays, "w", np.arange(100, dtype=np.float32))
    save_model_file(tmp_path / "m.npz", {"model_type": "test"}, arrays)
    meta, back = load_model_file(tmp_path / "m.npz")
    assert isinstance(back, ModelArrays) and meta["model_type"] == "test"
    assert back.shape("w_nz") == (99,) and back.dtype("w_nz") == np.float32
    with pytest.raises(ValueError):      # refused on the header, before reading
        get_weights(back, "w", 10)
    assert np.array_equal(get_weights(back, "w", 100), np.arange(100, dtype=np.float32))
    (tmp_path / "x.model").write_text("# sent_id = 1\n1\tA\ta\tX\tX\t_\t0\troot\t_\t_\n\n")
    with pytest.raises(ModelError, match=r"not an arboreal model file \(it is a CoNLL-U file"):
        load_model_file(tmp_path / "x.model")


def test_string_lists_must_agree_with_their_count():
    arrays = {}
    put_strings(arrays, "labels", ["a", "b"])
    arrays["labels_count"] = np.array(3)
    with pytest.raises(ValueError):
        get_strings(arrays, "labels")
    arrays["labels_count"] = np.array(10**12)
    with pytest.raises(ValueError):
        get_strings(arrays, "labels")


def test_a_labeler_with_thousands_of_labels_gets_fewer_rows():
    from arboreal.scorers.labeler import LABEL_TEMPLATES, TRAIN_TABLE_ENTRIES, Labeler

    with pytest.warns(UserWarning, match="5001 distinct labels"):
        lab = Labeler(LABEL_TEMPLATES, np.array([f"l{i}" for i in range(5001)]), bits=18)
    assert lab.W.size <= TRAIN_TABLE_ENTRIES and lab.bits < 18


def test_a_load_parses_the_archive_once_and_closes_it(tiny_pipeline, monkeypatch):
    """The archive opened to check the headers serves every array read of a load (its
    directory parsed once, not once per member), and the load closes it; an array read
    after that opens the file again."""
    import os

    import arboreal

    opened = []

    class Counting(zipfile.ZipFile):
        def __init__(self, *args, **kwargs):
            opened.append(args[0])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(zipfile, "ZipFile", Counting)
    fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    model = arboreal.load(tiny_pipeline)
    assert [getattr(a, "name", a) for a in opened] == [str(tiny_pipeline)]
    assert model.tokenizer is not None
    if fds is not None:
        assert len(os.listdir("/proc/self/fd")) == fds
    meta, arrays = load_model_file(tiny_pipeline)
    arrays.close()
    assert np.asarray(arrays["w_mask"]).size > 0 and len(opened) == 3
