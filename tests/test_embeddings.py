"""Pretrained word vectors: the text format read and written, 'arboreal embeddings', and
a neural model that carries them."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from arboreal.errors import FormatError
from arboreal.neural.embeddings import read_embeddings, write_embeddings

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample"


def test_read_with_and_without_header_lowercases_and_keeps_the_first(tmp_path):
    f = tmp_path / "v.txt"
    f.write_text("3 2\nThe 1 2\nthe 3 4\ncat 0.5 -1e-3\n", encoding="utf-8")
    words, vectors = read_embeddings(f)
    assert words == ["the", "cat"]
    assert vectors.dtype == np.float32 and np.allclose(vectors, [[1, 2], [0.5, -1e-3]])
    f.write_text("dog 1 2 3\ncat 4 5 6\n", encoding="utf-8")
    words, vectors = read_embeddings(f, max_words=1)
    assert words == ["dog"] and vectors.shape == (1, 3)


@pytest.mark.parametrize("text,where,problem", [
    ("2 3\na 1 2 3\nb 1 2\n", ":3:", "2 numbers, expected 3"),
    ("a 1 x\n", ":1:", "not a number"),
    ("a 1 nan\n", ":1:", "inf or NaN"),
    ("", "", "no word vectors"),
])
def test_bad_files_name_the_file_and_line(tmp_path, text, where, problem):
    f = tmp_path / "bad.txt"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(FormatError) as err:
        read_embeddings(f)
    assert f"bad.txt{where}" in str(err.value) and problem in str(err.value)


def test_write_then_read_round_trips(tmp_path):
    vectors = np.arange(6, dtype=np.float32).reshape(3, 2) / 7
    write_embeddings(tmp_path / "v.txt", ["a", "b", "c"], vectors)
    words, back = read_embeddings(tmp_path / "v.txt")
    assert words == ["a", "b", "c"] and np.allclose(back, vectors, atol=1e-4)


def test_the_embeddings_command_trains_vectors(tmp_path):
    pytest.importorskip("gensim")
    corpus = tmp_path / "corpus.txt"
    lines = [" ".join(s.forms[1:].tolist()) for s in
             __import__("arboreal").read_conllu(SAMPLE / "en_ewt-sample-train.conllu")]
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "v.txt"
    proc = subprocess.run([sys.executable, "-m", "arboreal", "embeddings", str(corpus), "-o",
                           str(out), "--dim", "8", "--min-count", "2", "--threads", "1",
                           "--epochs", "1"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    words, vectors = read_embeddings(out)
    assert vectors.shape[1] == 8 and "the" in words and len(words) > 100
    missing = subprocess.run([sys.executable, "-m", "arboreal", "embeddings",
                              str(tmp_path / "none.txt"), "-o", str(out)],
                             capture_output=True, text=True, timeout=300)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1


def test_a_neural_model_carries_its_pretrained_vectors(tmp_path):
    pytest.importorskip("torch")
    import arboreal
    from arboreal.io.conllu import read_conllu
    from arboreal.models import Parser

    train = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")[:120]
    rng = np.random.default_rng(0)
    words = sorted({f.lower() for s in train for f in s.forms[1:].tolist()})[:300]
    write_embeddings(tmp_path / "v.txt", words + ["unseenword"],
                     rng.normal(size=(len(words) + 1, 6)).astype(np.float32))
    model = Parser.train(train, scorer="neural", embeddings=str(tmp_path / "v.txt"),
                         scorer_options=dict(lstm_dim=16, lstm_layers=1, arc_dim=16,
                                             label_dim=8, char_dim=9, word_dim=10,
                                             tag_hidden=8, epochs=1))
    assert model.scorer.config.pretrained_dim == 6
    assert model.meta["training"]["embeddings"] == {"file": "v.txt", "words": 301}
    model.save(tmp_path / "m.model")
    loaded = arboreal.load(tmp_path / "m.model")
    assert loaded.scorer.pretrained_vocab.items[2:] == words + ["unseenword"]
    # float16 in the file, and in the trained model already: identical scores and parses
    assert np.array_equal(loaded.scorer.pretrained.numpy(), model.scorer.pretrained.numpy())
    test = train[:20]
    assert [h.tolist() for h in loaded.predict_heads(test)] == \
        [h.tolist() for h in model.predict_heads(test)]
