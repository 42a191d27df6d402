"""``arboreal package``: the wheel's format, and the whole way from a trained model to
a model used by name in a fresh virtual environment."""
from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import arboreal
from arboreal.cli import main


def wheel_files(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def test_the_wheel_is_a_valid_wheel(tiny_pipeline, tmp_path, capsys):
    assert main(["package", str(tiny_pipeline), "-o", str(tmp_path / "a"), "--name", "en_tiny",
                 "--version", "2.1", "--license", "CC BY-SA 4.0",
                 "--description", "a tiny English model"]) == 0
    wheel = tmp_path / "a" / "arboreal_model_en_tiny-2.1-py3-none-any.whl"
    assert f"pip install {wheel}" in capsys.readouterr().err
    files = wheel_files(wheel)
    info = "arboreal_model_en_tiny-2.1.dist-info"
    assert sorted(files) == sorted([
        "arboreal_model_en_tiny/__init__.py", "arboreal_model_en_tiny/model.npz",
        "arboreal_model_en_tiny/card.json", f"{info}/METADATA", f"{info}/WHEEL",
        f"{info}/entry_points.txt", f"{info}/RECORD"])
    # RECORD: every other file with its urlsafe-base64 SHA-256 and size
    record = files[f"{info}/RECORD"].decode().splitlines()
    assert record[-1] == f"{info}/RECORD,,"
    for line in record[:-1]:
        path, digest, size = line.split(",")
        expected = base64.urlsafe_b64encode(hashlib.sha256(files[path]).digest()).rstrip(b"=")
        assert digest == f"sha256={expected.decode()}" and int(size) == len(files[path])
    assert len(record) == len(files)
    metadata = files[f"{info}/METADATA"].decode()
    for line in ("Metadata-Version: 2.1", "Name: arboreal-model-en-tiny", "Version: 2.1",
                 "Summary: a tiny English model", "License: CC BY-SA 4.0",
                 f"Requires-Dist: arboreal>={arboreal.__version__}"):
        assert line + "\n" in metadata
    assert "Root-Is-Purelib: true\nTag: py3-none-any\n" in files[f"{info}/WHEEL"].decode()
    assert files[f"{info}/entry_points.txt"].decode() == \
        "[arboreal_models]\nen_tiny = arboreal_model_en_tiny\n"
    card = json.loads(files["arboreal_model_en_tiny/card.json"])
    assert card["name"] == "en_tiny" and card["version"] == "2.1"
    assert card["sha256"] == hashlib.sha256(files["arboreal_model_en_tiny/model.npz"]).hexdigest()
    assert card["contains"]["tokenizer"] and card["non_commercial"] is False
    # the model inside is compact and carries its card
    model = tmp_path / "inside.npz"
    model.write_bytes(files["arboreal_model_en_tiny/model.npz"])
    from arboreal.models import open_model

    _, meta, _ = open_model(model)
    assert "compact" in meta and meta["card"]["license"] == "CC BY-SA 4.0"
    # the same model and card make the same wheel, byte for byte
    assert main(["package", str(tiny_pipeline), "-o", str(tmp_path / "b"), "--name", "en_tiny",
                 "--version", "2.1", "--license", "CC BY-SA 4.0",
                 "--description", "a tiny English model"]) == 0
    assert (tmp_path / "b" / wheel.name).read_bytes() == wheel.read_bytes()


def test_a_non_commercial_license_is_said_so(tiny_pipeline, tmp_path):
    from arboreal.models.distribute import package

    _, card = package(tiny_pipeline, tmp_path, name="tr_tiny",
                      card={"license": "CC BY-NC-SA 4.0"})
    assert card["non_commercial"] is True and card["usage"] == "non-commercial use only"


@pytest.mark.parametrize("option, value, needle", [("--version", "v1", "PEP 440"),
                                                   ("--name", "a/b", "not a model name")])
def test_bad_name_or_version_is_one_line(tiny_pipeline, tmp_path, capsys, option, value,
                                         needle):
    assert main(["package", str(tiny_pipeline), "-o", str(tmp_path), option, value]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err
    assert not list(tmp_path.iterdir())


def test_a_fresh_venv_installs_the_wheel_and_uses_the_model_by_name(tiny_pipeline, tmp_path):
    """The wheel installs with pip offline into a new virtual environment, where the
    command line, arboreal.load, the server's model loading and the spaCy component all
    take the model's name (the cache is empty: the name can only come from the
    package)."""
    pytest.importorskip("spacy")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, capture_output=True)
    python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    purelib = Path(subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    # the packages this test runs with (numpy, numba, spaCy, ... and this arboreal),
    # seen by the new environment as --system-site-packages would show them if the
    # interpreter running the tests were not a virtual environment itself
    here = [str(Path(arboreal.__file__).resolve().parents[1])]
    here += [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
    (purelib / "_outer_packages.pth").write_text("\n".join(here) + "\n")
    assert main(["package", str(tiny_pipeline), "-o", str(tmp_path / "dist"),
                 "--name", "tiny_en", "--license", "CC BY-SA 4.0"]) == 0
    [wheel] = (tmp_path / "dist").glob("*.whl")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["ARBOREAL_HOME"] = str(tmp_path / "empty-cache")
    subprocess.run([python, "-m", "pip", "install", "--no-index", "--quiet",
                    "--disable-pip-version-check", str(wheel)],
                   check=True, capture_output=True, env=env, cwd=tmp_path)
    (tmp_path / "text.txt").write_text("The cat sat on the mat. It purred.\n")
    parsed = subprocess.run([python, "-m", "arboreal", "parse", "tiny_en", "text.txt",
                             "--input", "text", "--quiet"],
                            capture_output=True, text=True, env=env, cwd=tmp_path)
    assert parsed.returncode == 0, parsed.stderr
    assert parsed.stdout.count("# text = ") == 2
    script = """
import json, arboreal, spacy
import arboreal.integrations.spacy
from arboreal.cli.serve_cmd import model_specs
from arboreal.server_workers import load_app
from arboreal.models.names import resolve_model
model = arboreal.load("tiny_en")
served = load_app(model_specs(["tiny_en"]), None, 1 << 20, None).models
nlp = spacy.blank("en")
nlp.add_pipe("arboreal", config={"model": "tiny_en"})
doc = nlp("The cat sat on the mat. It purred.")
print(json.dumps({"where": resolve_model("tiny_en"), "arboreal": arboreal.__file__,
                  "sentences": len(model.parse_text("The cat sat. It purred.")),
                  "served": sorted(served), "spacy": len(list(doc.sents))}))
"""
    used = subprocess.run([python, "-c", script], capture_output=True, text=True, env=env,
                          cwd=tmp_path)
    assert used.returncode == 0, used.stderr
    result = json.loads(used.stdout)
    assert Path(result["where"]).is_relative_to(venv)       # the installed package's file
    assert Path(result["arboreal"]).resolve() == Path(arboreal.__file__).resolve()
    assert result["sentences"] == 2 and result["served"] == ["tiny_en"]
    assert result["spacy"] == 2
