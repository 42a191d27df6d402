"""The worked example of a word encoder, arboreal.neural.encoders.char_ngrams: its
n-grams and hashed rows written out, its vectors as the means of those rows, its
gradient, and the whole path through the neural scorer: `arboreal train --scorer-option
word_encoders=char_ngrams`, the model file, loading and parsing, and the errors."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from arboreal.errors import ArborealError  # noqa: E402
from arboreal.neural.encoders import (  # noqa: E402
    build_word_encoders, word_encoder_names, word_encoder_specs)
from arboreal.neural.encoders.char_ngrams import CharNgrams  # noqa: E402


def encoder(**options) -> CharNgrams:
    return build_word_encoders(word_encoder_specs(["char_ngrams"], {
        f"char_ngrams.{k}": v for k, v in options.items()}))["char_ngrams"]


def test_registered_by_its_module_alone():
    assert "char_ngrams" in word_encoder_names()


def test_ngrams_written_out():
    e = encoder()
    assert e.ngrams("Cat") == ["<ca", "cat", "at>", "<cat", "cat>", "<cat>", "<cat>"]
    assert encoder(min_n=2, max_n=2).ngrams("ab") == ["<a", "ab", "b>", "<ab>"]
    assert encoder(max_chars=2).ngrams("abcdef")[-1] == "<ab>"


def test_form_features_are_hashed_rows_padded_with_zeros():
    e = encoder(buckets=1000)
    table = e.form_features(["Cat", "cat", "a"])
    expected = [zlib.crc32(g.encode()) % 1000 + 1 for g in e.ngrams("cat")]
    assert table.dtype == np.int64 and table.shape == (3, len(expected))
    assert table[0].tolist() == expected and table[1].tolist() == expected
    short = [zlib.crc32(g.encode()) % 1000 + 1 for g in e.ngrams("a")]
    assert table[2].tolist() == short + [0] * (len(expected) - len(short))
    # the same rows in another process's encoder: no salted hash
    assert np.array_equal(encoder(buckets=1000).form_features(["Cat"]), table[:1])
    assert e.form_features([]).shape == (0, 1)


def test_vectors_are_means_of_the_rows_and_train_only_those():
    e = encoder(dim=5, buckets=50)
    table = torch.from_numpy(e.form_features(["cat", "a"]))
    index = torch.tensor([[0, 1, 0], [1, 1, 0]])
    out = e(table, index)
    assert out.shape == (2, 3, 5)
    weight = e.embed.weight.detach()
    for row in (0, 1):
        mean = weight[[r for r in table[row].tolist() if r]].mean(dim=0)
        assert torch.allclose(out[0, row], mean)
        assert torch.allclose(out[1, 0], out[0, 1]) and torch.allclose(out[1, 2], out[0, 0])
    out.sum().backward()
    used = torch.zeros(51, dtype=torch.bool)
    used[table[table > 0]] = True
    grad = e.embed.weight.grad
    assert grad[used].abs().sum(dim=1).min() > 0
    assert grad[~used].abs().max() == 0        # padding row 0 and unused rows


def test_options_are_checked():
    with pytest.raises(ArborealError, match="unknown word encoder 'nope'"):
        word_encoder_specs("nope", {})
    with pytest.raises(ArborealError, match="no option 'size'"):
        word_encoder_specs("char_ngrams", {"char_ngrams.size": 3})
    with pytest.raises(ArborealError, match="takes int"):
        word_encoder_specs("char_ngrams", {"char_ngrams.dim": "wide"})
    with pytest.raises(ArborealError, match="word_encoders=char_ngrams"):
        word_encoder_specs("", {"char_ngrams.dim": 3})
    with pytest.raises(ArborealError, match="min_n <= max_n"):
        encoder(min_n=6)


def _train(small_trained, model, *options):
    from arboreal.cli import main

    sizes = ["lstm_dim=24", "arc_dim=24", "label_dim=16", "word_dim=16", "char_dim=12",
             "tag_hidden=16", *options]
    argv = ["train", str(small_trained / "train.conllu"), "-o", str(model), "--scorer",
            "neural", "--epochs", "1", "--no-tokenizer", "--quiet"]
    for option in sizes:
        argv += ["--scorer-option", option]
    return main(argv)


def test_trained_saved_loaded_and_parsed_through_the_cli(tmp_path, small_trained, capsys):
    from arboreal.cli import main
    from arboreal.io.conllu import read_conllu
    from arboreal.io.model_file import load_model_file, save_model_file
    from arboreal.models import Parser

    model = tmp_path / "ngrams.npz"
    assert _train(small_trained, model, "word_encoders=char_ngrams", "char_ngrams.dim=8",
                  "char_ngrams.buckets=512") == 0
    parser = Parser.load(model)
    network = parser.scorer.network
    assert parser.scorer.config.word_encoders == {"char_ngrams": {
        "dim": 8, "buckets": 512, "min_n": 3, "max_n": 5, "max_chars": 30}}
    assert network.word_encoders["char_ngrams"].embed.weight.shape == (513, 8)
    # the vectors join the word features: the root vector is 8 units wider than the
    # word embedding and character CNN's (16 + 12)
    assert network.root.shape == (16 + 12 + 8,)
    test = read_conllu(small_trained / "dev.conllu")
    parser.scorer.precision = "float32"
    heads, _ = parser.predict(test)
    again = Parser.load(model)
    again.scorer.precision = "float32"
    assert all(np.array_equal(a, b) for a, b in zip(heads, again.predict(test)[0]))
    # row 0 (padding) stays zero through training
    weight = network.word_encoders["char_ngrams"].embed.weight.detach()
    assert weight[0].abs().max() == 0
    # the arc scores read the encoder's vectors
    rows = np.arange(3)
    before = parser.scorer.arc_scores(parser.scorer.encode(test[:3]), rows)
    with torch.no_grad():
        network.word_encoders["char_ngrams"].embed.weight.zero_()
    parser.scorer.weights_changed()
    assert not np.allclose(before, parser.scorer.arc_scores(parser.scorer.encode(test[:3]), rows))

    # a model file that names an encoder this arboreal lacks: one line, exit status 2
    meta, arrays = load_model_file(model)
    meta["neural"]["config"]["word_encoders"] = {"nope": {}}
    broken = tmp_path / "broken.npz"
    save_model_file(broken, meta, {k: np.asarray(arrays[k]) for k in arrays})
    with pytest.raises(ArborealError, match="unknown word encoder 'nope'"):
        Parser.load(broken)
    capsys.readouterr()
    assert main(["parse", str(broken), str(small_trained / "dev.conllu")]) == 2
    assert "unknown word encoder 'nope'" in capsys.readouterr().err


def test_bad_options_stop_the_cli_before_training(tmp_path, small_trained, capsys):
    model = tmp_path / "bad.npz"
    assert _train(small_trained, model, "word_encoders=char_ngrams",
                  "char_ngrams.width=3") == 2
    assert "no option 'width'" in capsys.readouterr().err
    assert _train(small_trained, model, "word_encoders=fasttext") == 2
    assert "unknown word encoder 'fasttext'" in capsys.readouterr().err
    assert not model.exists()
