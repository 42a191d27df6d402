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
#: the base install's size limit of a shipped model
MAX_BYTES = 12 << 20


def test_an_english_model_is_shipped_within_the_size_limit():
    assert "en_ewt" in SHIPPED
    for name in SHIPPED:
        assert (SHIPPED_FOLDER / name / "model.npz").stat().st_size <= MAX_BYTES


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

    card = json.loads((SHIPPED_FOLDER / name / "card.json").read_text(encoding="utf-8"))
    test = SAMPLE / "en_ewt-sample-test.conllu"
    out = tmp_path / "raw.conllu"
    run = subprocess.run([sys.executable, "-m", "arboreal", "parse", name,
                          str(SAMPLE / "en_ewt-sample-test.txt"), "--input", "text", "-o",
                          str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    result = evaluate_ud(str(test), str(out))
    for metric, value in card["sample_scores"]["raw_text"].items():
        assert round(100.0 * result[metric]["f1"], 2) == value, metric


def test_a_shipped_model_is_taken_by_name_and_listed():
    import arboreal

    assert Path(resolve_model("en_ewt")) == SHIPPED_FOLDER / "en_ewt" / "model.npz"
    doc = arboreal.load("en_ewt")("The cat sat on the mat. It slept.")
    assert len(doc.sentences) == 2 and all(w.head >= 0 for w in doc.words)
    out = subprocess.run([sys.executable, "-m", "arboreal", "models"], capture_output=True,
                         text=True)
    assert out.returncode == 0 and "en_ewt" in out.stdout and "shipped" in out.stdout
