"""Parser model: fits a tiny treebank, save/load round trip, bad model files."""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from arboreal.errors import ModelError
from arboreal.models import Parser, attachment_scores, load_model, register_model_type

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"


@pytest.fixture(scope="module")
def tiny():
    from arboreal.io.conllu import read_conllu

    from arboreal.trees.properties import is_projective as _is_projective

    # projective trees only: the default decoder (Eisner) cannot output the others
    sents = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")
    return [s for s in sents if 3 <= len(s) <= 20 and _is_projective(s.heads)][:30]


@pytest.fixture(scope="module")
def model(tiny):
    # no dev set: the final (not the best-on-dev) weights; unaveraged, so the training
    # data must be fitted exactly
    return Parser.train(tiny, learner="perceptron", epochs=8, seed=0, features="default",
                        hash_bits=18, label_bits=14, average=False)


def test_parser_fits_its_training_data(tiny, model):
    parsed = model.parse(tiny)
    uas, las = attachment_scores(tiny, [s.heads for s in parsed], [s.deprels for s in parsed])
    assert uas == 100.0 and las == 100.0
    assert model.meta["best_epoch"] == 8 and len(model.meta["history"]) == 8


def test_parse_fills_only_heads_and_deprels(tiny, model):
    blank = [s.with_tree(np.full(len(s) + 1, -1), np.array(["_"] * (len(s) + 1), dtype=object))
             for s in tiny[:5]]
    out = model.parse(blank)
    for s, o in zip(tiny[:5], out):
        for col in ("forms", "lemmas", "upos", "xpos", "feats", "misc"):
            assert (getattr(s, col) == getattr(o, col)).all()
        # the enhanced graph would contradict the new tree: DEPS is cleared
        assert (o.deps[1:] == "_").all()
        assert o.comments == s.comments and o.extra == s.extra
        assert o.has_heads and (o.heads == s.heads).all()


def test_save_load_round_trip(tmp_path, tiny, model):
    path = tmp_path / "m.npz"
    model.save(path)
    for loaded in (Parser.load(path), load_model(path)):
        assert isinstance(loaded, Parser)
        assert loaded.decoder == model.decoder and loaded.single_root == model.single_root
        a, b = model.parse(tiny), loaded.parse(tiny)
        for x, y in zip(a, b):
            assert (x.heads == y.heads).all() and (x.deprels == y.deprels).all()
        assert loaded.meta["training"]["learner"] == "perceptron"
    assert not list(tmp_path.glob(".*tmp"))  # atomic write leaves no temporary file


def test_bad_model_files(tmp_path, model):
    good = tmp_path / "m.npz"
    model.save(good)
    with pytest.raises(ModelError, match="no such model file"):
        load_model(tmp_path / "missing.npz")
    trunc = tmp_path / "trunc.npz"
    trunc.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(ModelError):
        load_model(trunc)
    text = tmp_path / "text.npz"
    text.write_text("hello\n")
    with pytest.raises(ModelError):
        load_model(text)
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, a=np.arange(3))
    with pytest.raises(ModelError, match="not an arboreal model"):
        load_model(foreign)
    with zipfile.ZipFile(good) as z:
        names = z.namelist()
    assert "__meta__.npy" in names


def test_unknown_model_type_and_registry(tmp_path, model):
    from arboreal.io.model_file import load_model_file, save_model_file

    meta, arrays = load_model_file(_saved(tmp_path, model))
    meta["model_type"] = "martian"
    other = tmp_path / "other.npz"
    save_model_file(other, {k: v for k, v in meta.items() if not k.startswith("format")}, arrays)
    with pytest.raises(ModelError, match="unknown model type"):
        load_model(other)

    class Fake:
        @classmethod
        def from_file_contents(cls, path, meta, arrays):
            return cls()

    register_model_type("martian", Fake)
    assert isinstance(load_model(other), Fake)


def _saved(tmp_path, model):
    path = tmp_path / "s.npz"
    model.save(path)
    return path


def test_auto_decoder_is_chosen_and_stored(tmp_path, tiny):
    p = Parser.train(tiny[:15], dev=tiny[:15], decoder="auto", epochs=2, hash_bits=16,
                     label_bits=12, features="mcdonald")
    assert p.decoder in ("eisner", "cle")
    assert p.meta["training"]["train_decoder"] == "cle"
    history = p.meta["history"]
    assert [h["epoch"] for h in history] == [1, 2] and all(h["dev_uas"] is not None for h in history)
    best = max(history, key=lambda h: h["dev_uas"])
    assert p.meta["best_epoch"] == best["epoch"]
    # epoch and decoder are chosen together: the pair with the best dev UAS
    pairs = [(h["dev_uas_by_decoder"][d], -h["epoch"], -i, d) for h in history
             for i, d in enumerate(("eisner", "cle"))]
    assert all(set(h["dev_uas_by_decoder"]) == {"eisner", "cle"} for h in history)
    assert all(h["dev_uas"] == max(h["dev_uas_by_decoder"].values()) for h in history)
    assert p.decoder == max(pairs)[3]
    p.save(tmp_path / "a.npz")
    assert Parser.load(tmp_path / "a.npz").decoder == p.decoder


def test_patience_stops_once_dev_stops_improving(tiny):
    """With ``patience`` P, training ends after the first epoch that is P epochs past
    the best dev UAS so far; the epochs run are those of the full run, and the best of
    them is kept."""
    opts = dict(learner="perceptron", epochs=12, seed=0, hash_bits=16, label_bits=12,
                features="mcdonald")
    full = Parser.train(tiny[:20], dev=tiny[20:], **opts)
    early = Parser.train(tiny[:20], dev=tiny[20:], patience=2, **opts)
    uas = [h["dev_uas"] for h in early.meta["history"]]
    assert uas == [h["dev_uas"] for h in full.meta["history"]][:len(uas)]
    best_so_far = [int(np.argmax(uas[:e])) + 1 for e in range(1, len(uas) + 1)]
    waited = [e - b for e, b in zip(range(1, len(uas) + 1), best_so_far)]
    assert len(uas) < 12, "the test data should make the run stop early"
    assert waited[-1] == 2 and all(w < 2 for w in waited[:-1])
    assert early.meta["training"]["stopped_after_epochs"] == [len(uas)]
    assert early.meta["best_epoch"] == best_so_far[-1]
    assert "stopped_after_epochs" not in full.meta["training"]
    with pytest.raises(Exception, match="patience"):
        Parser.train(tiny[:20], dev=tiny[20:], patience=0, **opts)


@pytest.mark.parametrize("learner", ["loglinear", "eg"])
def test_marginal_learners_choose_C_and_iterations_on_held_out_data(tiny, learner):
    """loglinear and eg without a C: every C of the learner's grid is trained and each
    iteration scored on dev; the model keeps the (C, iteration) with the best dev UAS.
    Without dev the choice is made on a held-out tenth of train and the choice is then
    trained on all of it; a C given by the user is used as is."""
    from arboreal.learn import LEARNERS

    opts = dict(learner=learner, epochs=2, hash_bits=14, label_bits=10, features="mcdonald")
    p = Parser.train(tiny[:20], dev=tiny[20:], **opts)
    sel = p.meta["selection"]
    assert sel["on"] == "dev" and sel["C_grid"] == list(LEARNERS[learner].C_GRID)
    history = p.meta["history"]
    best = max(history, key=lambda h: h["dev_uas"])
    assert sel["C"] == best["C"] and p.meta["best_epoch"] == best["epoch"]
    assert sel["dev_uas_by_C"][sel["C"]] == best["dev_uas"]
    assert p.meta["training"]["learner_options"]["C"] == sel["C"]
    alone = Parser.train(tiny[:20], **opts)
    assert alone.meta["selection"]["on"].startswith("a held-out tenth")
    # the final model trains on everything for the chosen number of iterations
    assert [h["epoch"] for h in alone.meta["history"] if "C" not in h] == \
        list(range(1, alone.meta["selection"]["epochs"] + 1))
    given = Parser.train(tiny[:20], dev=tiny[20:], C=0.5, **opts)
    assert "selection" not in given.meta
    assert all("C" not in h for h in given.meta["history"])


@pytest.mark.parametrize("learner", ["perceptron", "mira"])
def test_label_classifier_trains_through_the_shared_learners(tiny, learner):
    """The label classifier is trained by arboreal.learn's online learners: its signed
    feature items score what its label scores say, and it fits its training labels."""
    from arboreal.features.first_order import ATTRS, FeatureSet
    from arboreal.learn.perceptron import signed_ids
    from arboreal.models.training import train_labeler
    from arboreal.scorers.labeler import Labeler, LabelingData, label_templates

    fs = FeatureSet("default", bits=14).fit(tiny)
    encs = fs.encode(tiny)
    labels = np.unique(np.concatenate([s.deprels[1:] for s in tiny]).astype(str))
    lab = Labeler(label_templates(set(ATTRS)), labels, bits=12)
    heads = [s.heads.astype(np.int64) for s in tiny]
    train_labeler(lab, encs, heads, [s.deprels for s in tiny], epochs=10, learner=learner)
    gold = [lab.labels[lab.predict(e, h)[1:]] for e, h in zip(encs, heads)]
    right = np.concatenate([g == s.deprels[1:] for g, s in zip(gold, tiny)])
    assert right.mean() > 0.95
    # w . (phi(gold) - phi(pred)) from the items equals the label scores' difference
    index = {x: i for i, x in enumerate(lab.labels.tolist())}
    ys = [np.array([-1] + [index[d] for d in s.deprels[1:]]) for s in tiny]
    data = LabelingData(lab, encs, heads, ys)
    rng = np.random.default_rng(0)
    w = rng.normal(size=lab.W.size).astype(np.float32)
    for i in range(5):
        pred = data.decode(i, w)
        # cost-augmented (MIRA's constraint): the best of score + cost * wrong labels
        scores = _with_weights(lab, w).label_scores(encs[i], heads[i])
        aug = data.decode(i, w, cost=2.5)
        words = np.arange(1, len(aug))
        value = scores[words, aug[1:]] + 2.5 * (aug[1:] != ys[i][1:])
        labels = np.arange(scores.shape[1])
        best = (scores[words] + 2.5 * (labels[None, :] != ys[i][1:, None])).max(axis=1)
        np.testing.assert_allclose(value, best, rtol=1e-6)
        pred[1::2] = (pred[1::2] + 1) % len(lab.labels)   # some words wrong for sure
        ids, d = signed_ids(*data.tree_items(i, ys[i], [pred]))
        m = np.flatnonzero(ys[i][1:] != pred[1:]) + 1
        want = (scores[m, ys[i][m]] - scores[m, pred[m]]).sum()
        assert float(w[ids].astype(np.float64) @ d) == pytest.approx(want, rel=1e-6, abs=1e-6)


def _with_weights(labeler, w):
    from copy import copy

    other = copy(labeler)
    other.W = w.reshape(labeler.W.shape)
    return other
