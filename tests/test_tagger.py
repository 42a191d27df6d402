"""The tagger (UPOS, XPOS, FEATS, lemmas), its place in model files, jackknifing, and
tagged / tokenized input through ``arboreal parse`` and ``arboreal tag``."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arboreal.cli import main
from arboreal.errors import ArborealError
from arboreal.io.conllu import read_conllu, write_conllu
from arboreal.models.tagger import Tagger, apply_rule, lemma_rule

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
TAGS = ("upos", "xpos", "feats", "lemmas")


def blank(sentences, columns=TAGS):
    """Copies with the given columns '_' (and no trees)."""
    out = []
    for s in sentences:
        b = np.full(len(s.forms), "_", dtype=object)
        b[0] = s.forms[0]
        out.append(replace(s, **{c: b.copy() for c in columns}))
    return out


def accuracy(gold, pred, column):
    g = np.concatenate([getattr(s, column)[1:] for s in gold])
    p = np.concatenate([getattr(s, column)[1:] for s in pred])
    return 100.0 * float((g == p).mean())


@pytest.fixture(scope="module")
def sample():
    train = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")
    test = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")
    return train, test


@pytest.fixture(scope="module")
def tagger(sample):
    train, _ = sample
    return Tagger.train(train[:500], train[500:], epochs=5)


# ---------------------------------------------------------------- lemma rules
@given(st.text(min_size=1, max_size=12), st.text(min_size=1, max_size=12))
@settings(max_examples=400, deadline=None)
def test_lemma_rule_takes_the_form_to_its_lemma(form, lemma):
    assert apply_rule(form, lemma_rule(form, lemma)) == lemma


@pytest.mark.parametrize("form,lemma,other,expected", [
    ("walked", "walk", "talked", "talk"),       # suffix rule generalises
    ("studies", "study", "flies", "fly"),
    ("The", "the", "A", "a"),                  # lower-casing
    ("SOUTER", "Souter", "BREYER", "Breyer"),  # title case
    ("went", "go", "x", "x"),                  # does not fit a short word: the form
])
def test_lemma_rule_applies_to_other_words(form, lemma, other, expected):
    assert apply_rule(other, lemma_rule(form, lemma)) == expected


# ---------------------------------------------------------------- the tagger
def test_tagger_learns_the_sample(sample, tagger):
    _, test = sample
    pred = tagger.tag(blank(test))
    # measured on this sample (500 training sentences): UPOS ~89, lemmas ~94
    assert accuracy(test, pred, "upos") > 85.0
    assert accuracy(test, pred, "xpos") > 83.0
    assert accuracy(test, pred, "feats") > 83.0
    assert accuracy(test, pred, "lemmas") > 90.0
    for s, p in zip(test, pred):       # only the tag columns change
        assert (s.forms == p.forms).all() and (s.heads == p.heads).all()
        assert s.comments == p.comments


def test_tagger_keeps_the_best_dev_epoch(tagger):
    for name, stage in tagger.stages.items():
        assert 1 <= stage.epochs <= 5 and stage.dev_accuracy is not None, name


def test_tagger_skips_columns_that_are_blank_in_training(sample):
    train, test = sample
    t = Tagger.train(blank(train[:200], ("xpos", "lemmas")), epochs=2)
    assert t.columns == ("upos", "feats")
    pred = t.tag(blank(test[:20]))
    assert all((p.xpos[1:] == "_").all() and (p.lemmas[1:] == "_").all() for p in pred)


def test_tagger_without_upos_in_training_is_an_error(sample):
    train, _ = sample
    with pytest.raises(ArborealError, match="no UPOS"):
        Tagger.train(blank(train[:50]))


def test_tagger_handles_empty_and_unknown_input(tagger):
    from arboreal.io.sentence import Sentence

    odd = [Sentence.from_columns([]), Sentence.from_columns(["Zzyzx", "\u0416\u0436", "٣٤",
                                                             "a" * 5000, "🙂"])]
    out = tagger.tag(odd)
    assert len(out[0]) == 0 and len(out[1]) == 5
    assert all(v != "_" for v in out[1].upos[1:])


# ---------------------------------------------------------------- jackknifing
def test_jackknife_tags_each_fold_with_a_tagger_that_did_not_see_it(sample):
    from arboreal.models.pipeline import jackknife

    train, _ = sample
    data = train[:100]
    seen_by: list[set] = []

    def train_tagger(part):
        seen_by.append({id(s) for s in part})
        return Tagger.train(part, epochs=1)

    out = jackknife(data, 4, train_tagger)
    assert len(seen_by) == 4 and len(out) == len(data)
    for k in range(4):
        fold = data[25 * k: 25 * (k + 1)]
        assert not seen_by[k] & {id(s) for s in fold}
        assert len(seen_by[k]) == 75
    assert [s.forms.tolist() for s in out] == [s.forms.tolist() for s in data]
    assert (np.concatenate([s.heads for s in out]) == np.concatenate([s.heads for s in data])).all()


# ---------------------------------------------------------------- models and the CLI
@pytest.fixture(scope="module")
def files(tmp_path_factory, sample):
    train, test = sample
    d = tmp_path_factory.mktemp("pipeline")
    write_conllu(train, d / "train.conllu")
    write_conllu(test[:60], d / "test.conllu")
    write_conllu(blank(test[:60]), d / "blank.conllu")
    (d / "tokens.txt").write_text("\n".join(" ".join(s.forms[1:]) for s in test[:60]) + "\n",
                                  encoding="utf-8")
    model = d / "m.model"
    assert main(["train", str(d / "train.conllu"), "-o", str(model), "--epochs", "3",
                 "--tagger-epochs", "3", "--jackknife", "3", "--hash-bits", "18",
                 "--quiet"]) == 0
    bare = d / "bare.model"
    assert main(["train", str(d / "train.conllu"), "-o", str(bare), "--epochs", "3",
                 "--hash-bits", "18", "--no-tagger", "--quiet"]) == 0
    return d


def test_model_file_holds_the_tagger(files, sample):
    from arboreal.models import load_model

    _, test = sample
    model = load_model(files / "m.model")
    assert model.tagger is not None and model.tagger.columns == TAGS
    again = Tagger.train(sample[0], epochs={"upos": 3, "xpos": 3, "feats": 3, "lemma": 3})
    assert again.columns == model.tagger.columns
    # saved and loaded tagger predicts what the trained one did (same data, same seed)
    a = model.tagger.tag(blank(test[:30]))
    b = again.tag(blank(test[:30]))
    for x, y in zip(a, b):
        for c in TAGS:
            assert (getattr(x, c) == getattr(y, c)).all()
    assert load_model(files / "bare.model").tagger is None


def test_parse_untagged_input_is_tagged_first(files, sample):
    from arboreal.models import load_model

    _, test = sample
    model = load_model(files / "m.model")
    blanked = model.parse(blank(test[:60]))
    assert accuracy(test[:60], blanked, "upos") > 85.0
    uas_blank = np.mean(np.concatenate([p.heads[1:] == g.heads[1:]
                                        for p, g in zip(blanked, test[:60])]))
    assert uas_blank > 0.6
    # given tags are kept; retag replaces them
    xs = [replace(s, upos=np.where(np.arange(len(s.forms)) > 0, "X", s.upos))
          for s in test[:10]]
    kept = model.parse(xs)
    assert all((p.upos[1:] == "X").all() for p in kept)
    retagged = model.parse(xs, retag=True)
    assert accuracy(test[:10], retagged, "upos") > 80.0


def test_model_without_tagger_refuses_untagged_input(files, capsys):
    rc = main(["parse", str(files / "bare.model"), str(files / "blank.conllu"), "-o",
               str(files / "never.conllu")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "blank.conllu: sentence 1 (line 1) has no UPOS tags" in err and "tagger" in err
    assert not (files / "never.conllu").exists()
    assert main(["tag", str(files / "bare.model"), str(files / "tokens.txt"),
                 "--input", "tokenized"]) == 2
    assert "has no tagger" in capsys.readouterr().err
    # tagged input parses; asking to retag it is an error
    assert main(["parse", str(files / "bare.model"), str(files / "test.conllu"), "-o",
                 str(files / "bare.conllu")]) == 0
    assert main(["parse", str(files / "bare.model"), str(files / "test.conllu"),
                 "--retag"]) == 2
    assert "cannot retag" in capsys.readouterr().err


def test_cli_parse_tokenized_input(files, sample, capsys):
    _, test = sample
    out = files / "tok.conllu"
    assert main(["parse", str(files / "m.model"), str(files / "tokens.txt"), "--input",
                 "tokenized", "-o", str(out)]) == 0
    parsed = read_conllu(out)
    assert len(parsed) == 60
    for p, g in zip(parsed, test[:60]):
        assert p.forms.tolist() == g.forms.tolist() and p.has_heads
        assert p.sent_id is not None and any(c.startswith("# text = ") for c in p.comments)
    assert accuracy(test[:60], parsed, "upos") > 85.0


def test_cli_tag_fills_tags_and_leaves_heads(files, sample):
    out = files / "tagged.conllu"
    assert main(["tag", str(files / "m.model"), str(files / "blank.conllu"), "-o",
                 str(out)]) == 0
    tagged = read_conllu(out)
    gold = sample[1][:60]
    assert [len(s) for s in tagged] == [len(s) for s in gold]
    assert accuracy(gold, tagged, "lemmas") > 88.0
    # the input's trees are kept as they were
    assert all((t.heads == g.heads).all() for t, g in zip(tagged, gold))


@pytest.mark.parametrize("content,message", [
    (b"", "empty input"),
    (b"\n \n\t\n", "empty input"),
    (b"good line\nbad \x00 line\n", ":2: control character U+0000"),
    (b"caf\xe9\n", ":1: invalid UTF-8"),
    (b"a\x07b\n", "control character U+0007"),
])
def test_bad_tokenized_input_is_one_line_error(files, tmp_path, capsys, content, message):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    out = tmp_path / "out.conllu"
    assert main(["parse", str(files / "m.model"), str(bad), "--input", "tokenized",
                 "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert not out.exists()


def test_tokenized_input_with_odd_text(files, tmp_path, monkeypatch):
    import arboreal.models.pieces

    # a line of 20,000 tokens is one sentence, parsed in pieces (smaller ones here,
    # to keep the test quick)
    monkeypatch.setattr(arboreal.models.pieces, "MAX_WORDS", 1000)
    text = ("no sentence end at all and a very long line " * 2000 + "\n"
            "Ж ж mixed Ελληνικά 中文 ٣٤ 🙂\n")
    src = tmp_path / "odd.txt"
    src.write_text(text, encoding="utf-8")
    out = tmp_path / "odd.conllu"
    assert main(["parse", str(files / "m.model"), str(src), "--input", "tokenized",
                 "-o", str(out)]) == 0
    parsed = read_conllu(out)
    assert [len(s) for s in parsed] == [20000, 7]


def test_higher_order_model_carries_the_pipeline(tmp_path, sample):
    import arboreal

    write_conllu(sample[0][:120], tmp_path / "train.conllu")
    path = tmp_path / "o2.model"
    assert main(["train", str(tmp_path / "train.conllu"), "-o", str(path), "--order", "2",
                 "--epochs", "1", "--tagger-epochs", "1", "--hash-bits", "16",
                 "--quiet"]) == 0
    model = arboreal.load(str(path))
    assert model.order == 2 and model.tagger is not None and model.tokenizer is not None
    parsed = model.parse_text("The cat sat on the mat. It slept.")
    assert parsed and all(s.has_heads and s.upos[1] != "_" for s in parsed)
