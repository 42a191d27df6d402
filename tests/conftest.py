"""Fixtures shared by several test modules."""
from __future__ import annotations

import os
import signal

import pytest

# pytest-xdist runs a worker per core: each uses one thread for torch (and the commands
# the tests start inherit it), or the workers' threads fight over the cores
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture
def ctrl_c():
    """SIGINT raises KeyboardInterrupt during the test, as in an interactive Python,
    even when the test process was started with SIGINT ignored or blocked (a command run in the
    background of a non-interactive shell inherits that)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    yield
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="session")
def tiny_pipeline(tmp_path_factory):
    """A whole pipeline (tokenizer, tagger, first-order parser) trained in a few seconds
    on 60 sentences of the sample treebank: for tests of model files as such."""
    from pathlib import Path

    from arboreal.cli import main
    from arboreal.io.conllu import read_conllu, write_conllu

    sample = Path(__file__).resolve().parents[1] / "data" / "sample"
    d = tmp_path_factory.mktemp("tiny-pipeline")
    write_conllu(read_conllu(sample / "en_ewt-sample-train.conllu")[:60], d / "train.conllu")
    model = d / "tiny.model"
    assert main(["train", str(d / "train.conllu"), "-o", str(model), "--epochs", "2",
                 "--tagger-epochs", "1", "--hash-bits", "16", "--jackknife", "2",
                 "--quiet"]) == 0
    return model


@pytest.fixture(scope="session")
def small_trained(tmp_path_factory):
    """A folder with the sample treebank's first 40 sentences (``train.conllu``), the
    next 20 (``dev.conllu``) and the model ``arboreal train`` makes of them (``m.npz``:
    2 epochs, 2^18 hashed weights, tokenizer and tagger), trained once per test session
    for the tests of the command line, the server and the adapters. Read it; a module
    that writes files beside it works in a copy (:func:`small_trained_copy`)."""
    from pathlib import Path

    from arboreal.cli import main
    from arboreal.io.conllu import read_conllu, write_conllu

    sample = Path(__file__).resolve().parents[1] / "data" / "sample"
    d = tmp_path_factory.mktemp("small-trained")
    sents = read_conllu(sample / "en_ewt-sample-train.conllu")
    write_conllu(sents[:40], d / "train.conllu")
    write_conllu(sents[40:60], d / "dev.conllu")
    model = d / "m.npz"
    assert main(["train", str(d / "train.conllu"), "--dev", str(d / "dev.conllu"), "-o",
                 str(model), "--epochs", "2", "--hash-bits", "18", "--quiet"]) == 0
    assert model.exists()
    return d


@pytest.fixture(scope="module")
def small_trained_copy(small_trained, tmp_path_factory):
    """A folder of the module's own with a copy of :func:`small_trained`'s files."""
    import shutil

    d = tmp_path_factory.mktemp("small-trained-copy")
    shutil.copytree(small_trained, d, dirs_exist_ok=True)
    return d


@pytest.fixture
def model_home(tmp_path, monkeypatch):
    """An empty model cache (ARBOREAL_HOME) for the test, and no installed model
    package but those the test installs (any installed where the tests run are hidden,
    and so are the models shipped inside arboreal)."""
    import arboreal.models.names as names

    home = tmp_path / "arboreal-home"
    monkeypatch.setenv("ARBOREAL_HOME", str(home))
    everywhere = names.installed_models
    already = set(everywhere())
    monkeypatch.setattr(names, "installed_models",
                        lambda: {k: v for k, v in everywhere().items() if k not in already})
    monkeypatch.setattr(names, "shipped_models", lambda: {})      # nor the shipped ones
    return home


@pytest.fixture
def server():
    """A model index server on 127.0.0.1 (tests/_index_server.py)."""
    import threading

    from _index_server import ModelServer

    srv = ModelServer()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
