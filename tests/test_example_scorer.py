"""The worked example of docs/design.md: a scorer defined in one module outside arboreal
(examples/tag_bilinear_scorer.py) trains with the CRF objective under the one training
loop, parses with Eisner and Chu-Liu-Edmonds, and round-trips through a model file."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from arboreal.inference.structure import pad_heads, projective_or_not
from arboreal.io.conllu import read_conllu
from arboreal.learn.objectives import crf

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
import tag_bilinear_scorer as example  # noqa: E402

SAMPLE = ROOT / "data" / "sample"


@pytest.fixture(scope="module")
def data():
    train = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")
    test = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")
    return train[:300], test[:100]


def _uas(parser, sentences) -> float:
    heads = parser.predict_heads(sentences)
    right = sum(int((h[1:] == s.heads[1:]).sum()) for h, s in zip(heads, sentences))
    return 100.0 * right / sum(len(s) for s in sentences)


def test_backward_is_the_gradient_of_the_crf_loss(data):
    """The example's hand-written backward against finite differences of the loss."""
    train, _ = data
    scorer = example.TagBilinearScorer(sorted({t for s in train for t in s.upos[1:]}),
                                       ["dep"], dim=3, seed=1)
    sents = [s for s in train if 2 <= len(s) <= 6][:3]
    enc = scorer.encode(sents)
    rows = np.arange(len(sents))
    st = projective_or_not(False, True)
    lengths = scorer.lengths(enc)

    def loss() -> float:
        S = scorer.arc_scores(enc, rows)
        return float(crf(S, pad_heads([s.heads for s in sents], S.shape[1]), lengths, st)[0].sum())

    S = scorer.arc_scores(enc, rows)
    _, d = crf(S, pad_heads([s.heads for s in sents], S.shape[1]), lengths, st)
    grads = scorer.backward(enc, rows, d)
    eps = 1e-6
    for name, index in (("W", (0, 1)), ("b", (example.MAX_DISTANCE + 1,)),
                        ("E", (scorer.index[sents[0].upos[1]], 2))):
        param = getattr(scorer, name)
        param[index] += eps
        hi = loss()
        param[index] -= 2 * eps
        lo = loss()
        param[index] += eps
        assert (hi - lo) / (2 * eps) == pytest.approx(grads[name][index], abs=1e-5)


@pytest.mark.parametrize("decoder", ["eisner", "cle"])
def test_the_example_scorer_trains_and_parses(data, decoder, tmp_path):
    import arboreal

    train, test = data
    untrained = example.train(train, epochs=1, decoder=decoder)
    parser = example.train(train, dev=test, epochs=8, decoder=decoder)
    assert parser.scorer.kind == "tag-bilinear"
    uas = _uas(parser, test)
    # better than attaching every word to its right neighbour, and than one epoch
    right = 100.0 * np.mean(np.concatenate([np.r_[np.arange(2, len(s) + 1), 0] == s.heads[1:]
                                            for s in test]))
    assert uas > right + 10.0
    assert uas >= _uas(untrained, test)
    trees = parser.parse(test[:5])
    assert all(t.deprels[1:].tolist() and t.has_heads for t in trees)
    # a model file of its own kind, loaded by the one loader
    parser.save(tmp_path / "tb.model")
    loaded = arboreal.load(tmp_path / "tb.model")
    assert [t.heads.tolist() for t in loaded.parse(test[:20])] == \
        [t.heads.tolist() for t in parser.parse(test[:20])]
    # probabilities and k-best trees come with any first-order scorer
    kb = loaded.parse_kbest(test[:2], 2)
    assert len(kb[0]) == 2


def test_trained_and_parsed_through_the_cli_as_a_plugin(data, tmp_path, monkeypatch, capsys):
    """Registered with its recipe, the example trains with `arboreal train --scorer
    tag-bilinear` (the linear tagger in front of it: its scores read UPOS) and parses raw
    CoNLL-U with `arboreal parse`, found through $ARBOREAL_PLUGINS."""
    from arboreal import scorers
    from arboreal.cli import main
    from arboreal.io.conllu import write_conllu
    from arboreal.models import Parser

    monkeypatch.setenv("ARBOREAL_PLUGINS", str(ROOT / "examples" / "tag_bilinear_scorer.py"))
    monkeypatch.setattr(scorers, "_PLUGINS_LOADED", False)
    train, test = data
    write_conllu(train[:200], tmp_path / "train.conllu")
    write_conllu(test, tmp_path / "test.conllu")
    model = tmp_path / "tb.npz"
    base = ["train", str(tmp_path / "train.conllu"), "-o", str(model), "--scorer",
            "tag-bilinear", "--no-tokenizer", "--quiet"]
    assert main(base + ["--scorer-option", "dim=4", "--epochs", "6", "--jackknife", "2",
                        "--tagger-epochs", "3"]) == 0
    parser = Parser.load(model)
    assert parser.scorer.kind == "tag-bilinear" and parser.scorer.E.shape[1] == 4
    assert parser.tagger is not None
    out = tmp_path / "out.conllu"
    assert main(["parse", str(model), str(tmp_path / "test.conllu"), "-o", str(out),
                 "--quiet"]) == 0
    parsed = read_conllu(out)
    right = sum(int((p.heads[1:] == s.heads[1:]).sum()) for p, s in zip(parsed, test))
    chain = sum(int((np.r_[np.arange(2, len(s) + 1), 0] == s.heads[1:]).sum()) for s in test)
    assert right > chain + 0.1 * sum(len(s) for s in test)
    capsys.readouterr()
    for extra, message in ((["--order", "2"], "--order: for --scorer hashed only"),
                           (["--features", "words"], "--features: for --scorer hashed only"),
                           (["--scorer-option", "width=3"], "width unknown"),
                           (["--embeddings", "v.txt"], "for --scorer neural only")):
        assert main(base + extra) == 2
        assert message in capsys.readouterr().err
    assert main(base[:-4] + ["--scorer", "nope", "--quiet"]) == 2
    assert "unknown scorer 'nope'; choose from hashed, neural, tag-bilinear" in \
        capsys.readouterr().err
