"""Smoke test of benchmarks/catalogue.py on a tiny treebank in a temporary data folder:
it trains, shrinks, evaluates and cards one model per treebank with a train split,
writes the index that ``arboreal download`` reads and the table of docs/models.md
(here to a temporary file; the repository's is left alone)."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import arboreal
from arboreal.cli import main
from arboreal.io.conllu import read_conllu, write_conllu

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"


def test_catalogue_on_a_tiny_treebank(tmp_path, model_home):
    data = tmp_path / "ud"
    tiny, devonly = data / "UD_Tiny-Sample", data / "UD_Other-DevOnly"
    tiny.mkdir(parents=True)
    devonly.mkdir()
    sentences = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")
    write_conllu(sentences[:60], tiny / "xx_tiny-ud-train.conllu")
    write_conllu(sentences[60:80], tiny / "xx_tiny-ud-dev.conllu")
    write_conllu(read_conllu(SAMPLE / "en_ewt-sample-test.conllu")[:20],
                 tiny / "xx_tiny-ud-test.conllu")
    (tiny / "README.md").write_text("# Summary\n\nA tiny sample.\n\n# Metadata\n\n"
                                    "License: CC BY-NC-SA 4.0\n")
    write_conllu(sentences[:10], devonly / "yy_other-ud-dev.conllu")
    docs = tmp_path / "models.md"
    before = (ROOT / "docs" / "models.md").read_bytes() \
        if (ROOT / "docs" / "models.md").exists() else None
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "catalogue.py"), "--data-dir", str(data),
         "--out-dir", str(tmp_path / "out"), "--docs", str(docs), "--scorer", "hashed",
         "--train-args", "--epochs 1 --tagger-epochs 1 --hash-bits 16 --jackknife 2"],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the table: one row, for the treebank with a train split
    rows = [line for line in docs.read_text().splitlines() if line.startswith("| UD_")]
    assert len(rows) == 1 and rows[0].startswith("| UD_Tiny-Sample | xx_tiny | CC BY-NC-SA 4.0 "
                                                 "(non-commercial use only) |")
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert all(c.replace(".", "", 1).isdigit() for c in cells[3:10])   # the scores
    # the index and the card beside the model
    models = tmp_path / "out" / "models"
    index = json.loads((models / "index.json").read_text())
    [entry] = index["models"]
    data_bytes = (models / entry["url"]).read_bytes()
    assert entry["name"] == "xx_tiny" and entry["size"] == len(data_bytes)
    assert entry["sha256"] == hashlib.sha256(data_bytes).hexdigest()
    assert set(entry["scores"]) == {"raw_text", "gold_tokens", "test_set"}
    card = json.loads((models / "xx_tiny.card.json").read_text())
    assert card["usage"] == "non-commercial use only" and card["treebank"]["name"] == \
        "UD_Tiny-Sample"
    assert card["speed"]["words_per_second"] > 0 and "compact" in card
    # what 'arboreal download' makes of it
    assert main(["download", "xx_tiny", "--index", str(models / "index.json"), "--quiet"]) == 0
    model = arboreal.load("xx_tiny")
    assert len(model.parse_text("The cat sat on the mat.")) == 1
    after = (ROOT / "docs" / "models.md").read_bytes() \
        if (ROOT / "docs" / "models.md").exists() else None
    assert after == before
