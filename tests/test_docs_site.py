"""The documentation site builds from docs/ with MkDocs, warnings as errors (broken
links, missing pages, docstrings the API reference cannot read), and its API reference
holds the functions it names."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs")
pytest.importorskip("mkdocstrings")

REPO = Path(__file__).resolve().parents[1]


def test_the_site_builds_strictly(tmp_path):
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d",
                          str(tmp_path / "site")], cwd=REPO, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    reference = (tmp_path / "site" / "reference" / "index.html").read_text(encoding="utf-8")
    for name in ("log_partition", "read_conllu", "Document", "locate_encoder",
                 "ConnectionLimits"):
        assert f'id="arboreal.' in reference and name in reference, name
    for page in ("commands", "python", "models-by-name", "benchmarks", "reliability"):
        assert (tmp_path / "site" / page / "index.html").is_file(), page
