"""A parser that tags by itself (the neural scorer) gets the linear tagger beside it,
and the tags that score higher on dev are the ones it parses with
(arboreal.models.pipeline.choose_tagger)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from arboreal.io.conllu import read_conllu
from arboreal.models.pipeline import choose_tagger, tagging_accuracy
from arboreal.models.tagger import Tagger


class _Tags:
    """A stand-in model whose scorer's tags are given: ``tags(sentence index, column)``
    -> values (n,)."""

    def __init__(self, dev, tags, columns=("upos", "xpos", "feats", "lemmas")):
        self.dev, self.tags, self.meta = dev, tags, {}
        self.scorer = type("S", (), {"tag_columns": list(columns)})()

    def filled_tags(self, sentences, retag):
        assert retag and all(v == "_" for s in sentences for v in s.upos[1:].tolist())
        out = []
        for k, s in enumerate(sentences):
            changes = {}
            for c in self.scorer.tag_columns:
                col = np.array(getattr(s, c), dtype=object)
                col[1:] = self.tags(k, c)
                changes[c] = col
            out.append(replace(s, **changes))
        return out


@pytest.fixture(scope="module")
def linear_and_dev(small_trained):
    train = read_conllu(small_trained / "train.conllu")
    dev = read_conllu(small_trained / "dev.conllu")
    return Tagger.train(train, epochs=2), dev


def test_tagging_accuracy_counts_words():
    dev = read_conllu("data/sample/en_ewt-sample-test.conllu")[:3]
    wrong = [replace(s, upos=np.array(["<root>"] + ["X"] * len(s), dtype=object)) for s in dev]
    assert tagging_accuracy(dev, dev, ["upos"]) == {"upos": 100.0}
    share = sum(int((s.upos[1:] == "X").sum()) for s in dev) / sum(len(s) for s in dev)
    assert tagging_accuracy(wrong, dev, ["upos"])["upos"] == pytest.approx(100 * share)


def test_the_better_tags_on_dev_are_kept(linear_and_dev):
    linear, dev = linear_and_dev
    # a scorer whose tags are dev's own beats the linear tagger trained on 40 sentences
    perfect = _Tags(dev, lambda k, c: getattr(dev[k], c)[1:])
    assert choose_tagger(perfect, linear, dev) is None
    choice = perfect.meta["tagger_choice"]
    assert choice["chosen"] == "scorer" and choice["scorer"]["upos"] == 100.0
    assert choice["columns"] == ["upos", "xpos", "feats", "lemmas"]
    # one that tags every word "X" loses to it
    lines = []
    bad = _Tags(dev, lambda k, c: np.array(["X"] * len(dev[k]), dtype=object))
    assert choose_tagger(bad, linear, dev, lines.append) is linear
    assert bad.meta["tagger_choice"]["chosen"] == "linear"
    assert bad.meta["tagger_choice"]["linear"]["upos"] > 50
    assert lines and lines[0].startswith("tagger: the linear tags, dev accuracy scorer ")
    # a column the scorer does not predict counts 0 for it (the linear tagger wins it)
    upos_only = _Tags(dev, lambda k, c: getattr(dev[k], c)[1:], columns=("upos",))
    choose_tagger(upos_only, linear, dev)
    assert upos_only.meta["tagger_choice"]["scorer"]["xpos"] < 10


def test_neural_training_keeps_the_better_tagger(small_trained, tmp_path):
    """`arboreal train --scorer neural --dev`: after one epoch the network's tags lose to
    the linear tagger's, which the model then parses raw text with."""
    pytest.importorskip("torch")
    from arboreal.cli import main
    from arboreal.models import Parser

    model = tmp_path / "n.npz"
    argv = ["train", str(small_trained / "train.conllu"), "--dev",
            str(small_trained / "dev.conllu"), "-o", str(model), "--scorer", "neural",
            "--epochs", "1", "--tagger-epochs", "2", "--no-tokenizer", "--quiet"]
    for option in ("lstm_dim=16", "arc_dim=16", "label_dim=8", "word_dim=8", "char_dim=8",
                   "tag_hidden=8"):
        argv += ["--scorer-option", option]
    assert main(argv) == 0
    parser = Parser.load(model)
    choice = parser.meta["tagger_choice"]
    assert choice["chosen"] == "linear" and parser.tagger is not None
    assert choice["linear"]["upos"] > choice["scorer"]["upos"]
    dev = read_conllu(small_trained / "dev.conllu")
    parsed = parser.parse([replace(s, upos=np.array(["<root>"] + ["_"] * len(s), dtype=object))
                           for s in dev[:5]])
    assert [p.upos.tolist() for p in parsed] == \
        [t.upos.tolist() for t in parser.tagger.tag(dev[:5], ("upos",))]
    # --no-tagger: the network's own tags, no linear tagger
    assert main(argv + ["--no-tagger"]) == 0
    parser = Parser.load(model)
    assert parser.tagger is None and "tagger_choice" not in parser.meta


def test_scorer_auto_keeps_the_pipeline_with_the_higher_dev_las(small_trained, tmp_path,
                                                                  capsys):
    """`arboreal train --scorer auto --dev`: both pipelines trained, each dev LAS measured
    by parsing dev from its words, the better model saved with the figures."""
    pytest.importorskip("torch")
    from arboreal.cli import main
    from arboreal.models import Parser
    from arboreal.models.parser import attachment_scores

    model = tmp_path / "auto.npz"
    argv = ["train", str(small_trained / "train.conllu"), "--dev",
            str(small_trained / "dev.conllu"), "-o", str(model), "--scorer", "auto",
            "--epochs", "2", "--tagger-epochs", "2", "--no-tokenizer"]
    assert main(argv) == 0
    parser = Parser.load(model)
    choice = parser.meta["scorer_choice"]
    assert set(choice) == {"chosen", "on", "hashed", "neural"}
    other = "neural" if choice["chosen"] == "hashed" else "hashed"
    assert choice[choice["chosen"]]["dev_las"] >= choice[other]["dev_las"]
    assert parser.scorer.kind == choice["chosen"]
    assert f"saved {model} with the {choice['chosen']} scorer" in capsys.readouterr().err
    # the recorded figure is the saved model's own dev LAS from its words alone
    dev = read_conllu(small_trained / "dev.conllu")
    blank = [replace(s, **{c: np.array(["<root>"] + ["_"] * len(s), dtype=object)
                           for c in ("upos", "xpos", "feats", "lemmas")}) for s in dev]
    parsed = parser.parse(blank)
    las = attachment_scores(dev, [p.heads for p in parsed], [p.deprels for p in parsed])[1]
    assert round(las, 2) == choice[choice["chosen"]]["dev_las"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".arboreal-auto")]
    # options of one scorer, and no dev: refused before any training
    for extra, message in ((["--learner", "mira"], "--learner: options of one scorer"),
                           (["--scorer-option", "lstm_dim=8"], "--scorer-option: options")):
        assert main(argv + extra) == 2
        assert message in capsys.readouterr().err
    # without dev: a held-out tenth of the training sentences
    assert main(argv[:2] + argv[4:] + ["--quiet"]) == 0
    choice = Parser.load(model).meta["scorer_choice"]
    assert choice["on"].startswith("a held-out tenth of the training sentences")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".arboreal-auto")]
