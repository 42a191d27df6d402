"""Models by name: resolution order (path, installed package, cache), the one-line
error for an unknown name, every place a model is taken accepting a name, the one
model-load path, and ``arboreal models``."""
from __future__ import annotations

import ast
import hashlib
import json
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

import arboreal
from arboreal.cli import main
from arboreal.errors import ModelError
from arboreal.models.names import model_home, resolve_model

SRC = Path(__file__).resolve().parents[1] / "src" / "arboreal"
TEXT = "The cat sat on the mat. It purred.\n"


def cache(home: Path, name: str, model: Path, card: dict | None = None) -> Path:
    """Put ``model`` into the cache ``home`` as ``name`` (as 'arboreal download' does)."""
    folder = home / "models" / name
    folder.mkdir(parents=True)
    shutil.copyfile(model, folder / "model.npz")
    if card is not None:
        (folder / "card.json").write_text(json.dumps(card), encoding="utf-8")
    return folder / "model.npz"


def install_unpacked(wheel: Path, site: Path, monkeypatch) -> None:
    """Install a wheel the simplest way there is: unpack it onto sys.path (what pip does
    for a pure wheel, less the scripts and the bookkeeping)."""
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    monkeypatch.syspath_prepend(str(site))


def one_line_error(capsys, *needles: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("arboreal: error: ")
    for needle in needles:
        assert needle in err, err
    return err


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="the XDG rules of Linux")
def test_model_home_follows_arboreal_home_then_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.delenv("ARBOREAL_HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert model_home() == tmp_path / "user" / ".cache" / "arboreal"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert model_home() == tmp_path / "xdg" / "arboreal"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")    # invalid per the spec: ignored
    assert model_home() == tmp_path / "user" / ".cache" / "arboreal"
    monkeypatch.setenv("ARBOREAL_HOME", str(tmp_path / "mine"))
    assert model_home() == tmp_path / "mine"


def test_a_cached_model_loads_by_name(tiny_pipeline, model_home):
    path = cache(model_home, "tiny", tiny_pipeline)
    assert resolve_model("tiny") == str(path)
    model = arboreal.load("tiny")
    assert len(model.parse_text(TEXT)) == 2


def test_resolution_order_path_then_package_then_cache(tiny_pipeline, model_home, tmp_path,
                                                       monkeypatch):
    from arboreal.models.distribute import package

    cached = cache(model_home, "tiny", tiny_pipeline)
    assert resolve_model("tiny") == str(cached)
    wheel, _ = package(tiny_pipeline, tmp_path / "dist", name="tiny")
    install_unpacked(wheel, tmp_path / "site", monkeypatch)
    installed = tmp_path / "site" / "arboreal_model_tiny" / "model.npz"
    assert resolve_model("tiny") == str(installed)      # the package before the cache
    # the package's own copy is compact: a different file from the cached one
    assert installed.read_bytes() != cached.read_bytes()
    monkeypatch.chdir(tmp_path)
    shutil.copyfile(tiny_pipeline, tmp_path / "tiny")
    assert resolve_model("tiny") == "tiny"               # a path before any name
    # anything with a separator is only ever a path
    with pytest.raises(ModelError, match="no such model file$"):
        arboreal.load("./nothing/tiny")


def test_unknown_name_is_one_line_listing_the_names(tiny_pipeline, model_home, tmp_path,
                                                    capsys):
    (tmp_path / "in.txt").write_text(TEXT)
    assert main(["parse", "en_ewt", str(tmp_path / "in.txt"), "--input", "text"]) == 2
    one_line_error(capsys, "en_ewt: no such model file", "none is", "arboreal download")
    for name in ("en_ewt", "tr_imst", "el_gdt"):
        cache(model_home, name, tiny_pipeline)
    assert main(["parse", "en_ew", str(tmp_path / "in.txt"), "--input", "text"]) == 2
    one_line_error(capsys, "en_ew: no such model file",
                   "there are: el_gdt, en_ewt, tr_imst; closest: en_ewt")
    with pytest.raises(ModelError, match="closest: tr_imst"):
        arboreal.load("tr-imst")


class FakeClient:
    """What ``_ModelOnCluster`` asks of a Dask client, recorded."""

    def __init__(self):
        self.scattered = []

    def run(self, fn):
        return {"worker-1": None}

    def scatter(self, data, broadcast, hash):
        self.scattered.append(data)
        return object()


def test_every_place_a_model_is_taken_accepts_a_name(tiny_pipeline, model_home, tmp_path,
                                                     capsys):
    from arboreal.cli.serve_cmd import model_specs
    from arboreal.server_workers import load_app
    from arboreal.distributed import _ModelOnCluster
    from arboreal.models import Parser, load_model
    from arboreal.models.facts import ModelFacts

    path = cache(model_home, "tiny", tiny_pipeline)
    for loader in (arboreal.load, load_model, Parser.load):
        assert isinstance(loader("tiny"), Parser)
    # the command line: parse and tag
    (tmp_path / "in.txt").write_text(TEXT)
    for command in ("parse", "tag"):
        out = tmp_path / f"{command}.conllu"
        assert main([command, "tiny", str(tmp_path / "in.txt"), "--input", "text", "-o",
                     str(out), "--quiet"]) == 0
        assert out.read_text().count("# text = ") == 2
    # the server: its model-loading function, named after the model
    served = load_app(model_specs(["tiny"]), None, 1 << 20, None).models
    assert list(served) == ["tiny"] and isinstance(served["tiny"].model, Parser)
    # Dask: the client's side reads the named file, the workers load its bytes
    assert ModelFacts("tiny").path == str(path) and ModelFacts("tiny").tokenizer
    client = FakeClient()
    on_cluster = _ModelOnCluster(client, "tiny")
    assert client.scattered == [path.read_bytes()]
    assert on_cluster.digest == hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_spacy_component_accepts_a_name(tiny_pipeline, model_home, tmp_path):
    pytest.importorskip("spacy")
    import spacy

    import arboreal.integrations.spacy  # noqa: F401  (the factory)

    cache(model_home, "tiny", tiny_pipeline)
    nlp = spacy.blank("en")
    nlp.add_pipe("arboreal", config={"model": "tiny"})
    nlp.to_disk(tmp_path / "pipeline")          # copies the named file, not loaded yet
    doc = nlp(TEXT)
    assert len(list(doc.sents)) == 2 and all(t.dep_ for t in doc)
    again = spacy.load(tmp_path / "pipeline")
    assert [t.dep_ for t in again(TEXT)] == [t.dep_ for t in doc]


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id == name)
        or (isinstance(node.func, ast.Attribute) and node.func.attr == name))]


def _function(tree: ast.AST, name: str) -> ast.AST:
    [found] = [node for node in ast.walk(tree)
               if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name]
    return found


def test_one_model_load_path():
    """Model files are read in one place, ``arboreal.models.open_model`` (which
    ``arboreal.load`` calls); every other entry point delegates to ``arboreal.load``
    (or ``open_model`` for metadata) and reads no file itself. (Training checkpoints,
    which are not models, share the file format and have their own reader.)"""
    readers = []
    trees = {}
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        trees[path.relative_to(SRC).as_posix()] = tree
        for call in _calls(tree, "load_model_file"):
            readers.append((path.relative_to(SRC).as_posix(), call.lineno))
    readers = [r for r in readers if r[0] != "models/checkpoint.py"]
    assert len(readers) == 1 and readers[0][0] == "models/__init__.py", readers
    open_model = _function(trees["models/__init__.py"], "open_model")
    assert _calls(open_model, "load_model_file")
    load = _function(trees["models/__init__.py"], "load")
    assert _calls(load, "open_model")
    # the other ways in: each delegates to load (or open_model), without reading a file
    delegates = [("__init__.py", "load", "load_any"),
                 ("models/parser.py", "Parser", "load"),
                 ("features/lexicon.py", "Lexicon", "load"),
                 ("models/facts.py", "ModelFacts", "open_model"),
                 ("distributed.py", "worker_model", "load"),
                 ("integrations/spacy.py", "ArborealParser", "load"),
                 ("server_workers.py", "load_app", "load_model")]
    for file, name, callee in delegates:
        node = _function(trees[file], name)
        if name in ("Parser", "Lexicon"):
            node = _function(node, "load")
        assert _calls(node, callee), (file, name)
        assert not _calls(node, "load_model_file") and not _calls(node, "ZipFile"), (file, name)
    from arboreal.models import load, load_model

    assert load_model is load


def test_models_lists_installed_and_cached_with_cards(tiny_pipeline, model_home, tmp_path,
                                                      monkeypatch, capsys):
    from arboreal.models.distribute import package

    assert main(["models"]) == 0
    assert "no model is installed or in the cache" in capsys.readouterr().err
    wheel, _ = package(tiny_pipeline, tmp_path / "dist", name="tiny_tr",
                       card={"license": "CC BY-NC-SA 4.0", "version": "2.0",
                             "treebank": {"name": "UD_Turkish-IMST", "version": "UD 2.16"},
                             "scores": {"raw_text": {"LAS": 50.0}}})
    install_unpacked(wheel, tmp_path / "site", monkeypatch)
    cache(model_home, "tiny_en", tiny_pipeline,
          card={"name": "tiny_en", "license": "CC BY-SA 4.0", "version": "1.0"})
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "tiny_tr 2.0  (installed package:" in out
    assert "treebank: UD_Turkish-IMST (UD 2.16)" in out
    assert "license: CC BY-NC-SA 4.0 (non-commercial use only)" in out
    assert "test scores (raw text: LAS 50.00)" in out
    assert "tiny_en 1.0  (cache:" in out and "license: CC BY-SA 4.0\n" in out
    assert out.count("contains: tokenizer, tagger (upos, xpos, feats, lemma), parser "
                     "(order 1, eisner") == 2
    assert main(["models", "--json"]) == 0
    cards = {c["name"]: c for c in json.loads(capsys.readouterr().out)}
    assert cards["tiny_tr"]["where"] == "installed" and cards["tiny_en"]["where"] == "cache"
    assert cards["tiny_tr"]["non_commercial"] is True
    assert cards["tiny_en"]["contains"]["parser"]["order"] == 1
