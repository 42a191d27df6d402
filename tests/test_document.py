"""The document API: ``nlp = arboreal.load(...)``, ``doc = nlp(text)``,
``nlp.pipe(texts)``, sentences of words with their columns and head words."""
from __future__ import annotations

import numpy as np
import pytest

import arboreal
from arboreal.io.conllu import read_conllu

TEXT = "The cat sat on the mat. It slept."


@pytest.fixture(scope="module")
def nlp(tiny_pipeline):
    return arboreal.load(tiny_pipeline)


def test_a_document_of_sentences_of_words(nlp):
    doc = nlp(TEXT)
    assert doc.text == TEXT
    arrays = nlp.parse_text(TEXT)
    assert len(doc.sentences) == len(arrays)
    assert len(doc) == sum(len(s) for s in arrays) == len(doc.words)
    for sentence, expected in zip(doc.sentences, arrays):
        words = list(sentence)
        assert len(words) == len(sentence) == len(expected.forms) - 1
        assert [w.id for w in words] == list(range(1, len(sentence) + 1))
        assert [w.form for w in words] == expected.forms[1:].tolist()
        assert [w.text for w in words] == expected.forms[1:].tolist()
        assert [w.head for w in words] == expected.heads[1:].tolist()
        assert [w.deprel for w in words] == expected.deprels[1:].tolist()
        for w in words:
            assert (w.head_word is None) == (w.head == 0)
            if w.head_word is not None:
                assert w.head_word.id == w.head
                assert w.head_word.form == expected.forms[w.head]
            assert set(w.to_dict()) == {"id", "text", "lemma", "upos", "xpos", "feats",
                                        "head", "deprel", "deps", "misc"}
    assert doc.sentences[0].text.startswith("The cat sat")


def test_to_conllu_reads_back_to_the_same_sentences(nlp, tmp_path):
    doc = nlp(TEXT)
    path = tmp_path / "doc.conllu"
    path.write_text(doc.to_conllu(), encoding="utf-8")
    back = read_conllu(path)
    assert [s.forms.tolist() for s in back] == [s.forms.tolist() for s in doc.sentences]
    assert all(np.array_equal(a.heads, b.heads) for a, b in zip(back, doc.sentences))


def test_pipe_gives_a_document_per_text_as_the_texts_one_by_one(nlp):
    texts = ["One cat sat.", "", "Two dogs ran. They stopped.", "A bird."]
    docs = list(nlp.pipe(texts, batch_size=2))
    assert [d.text for d in docs] == texts
    for doc, text in zip(docs, texts):
        alone = nlp(text)
        assert [s.forms.tolist() for s in doc.sentences] == \
            [s.forms.tolist() for s in alone.sentences]
        assert [s.heads.tolist() for s in doc.sentences] == \
            [s.heads.tolist() for s in alone.sentences]
    assert len(docs[1]) == 0


def test_lines_tokens_and_wrong_arguments(nlp):
    assert len(nlp("First line here\nSecond line here", lines=True).sentences) == 2
    doc = nlp([["The", "cat", "sat"], ["It", "slept"]])
    assert [len(s) for s in doc.sentences] == [3, 2]
    assert len(nlp.parse_text(["A cat.", "A dog."])) == 2      # texts: paragraphs
    with pytest.raises(TypeError, match="nlp.pipe"):
        nlp(42)
    with pytest.raises(TypeError, match="str"):
        list(nlp.pipe([b"bytes"]))
