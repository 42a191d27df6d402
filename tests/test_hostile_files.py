"""Hostile files and indexes: devices and FIFOs given as models or inputs, a model index
that nests without end, redirects in a loop or names local files from the network, and
temporary files left by killed runs. Loopback only, each case bounded in time."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arboreal.cli import main
from _index_server import one_line_error, publish

DEVICE_TIMEOUT = 120       # a guard for a test that would otherwise read forever


def _arboreal(*args, stdin=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "arboreal", *args], capture_output=True,
                          text=True, timeout=DEVICE_TIMEOUT, stdin=stdin,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


@pytest.mark.parametrize("kind", ["device", "fifo", "device-link"])
def test_a_model_that_is_not_a_regular_file_is_refused_at_once(kind, tmp_path):
    if kind == "fifo":
        model = tmp_path / "fifo.model"
        os.mkfifo(model)               # read, it would block for ever
    elif kind == "device-link":
        model = tmp_path / "zero.model"
        model.symlink_to("/dev/zero")  # read, it would grow without bound
    else:
        model = Path("/dev/zero")
    out = _arboreal("parse", str(model), "-", stdin=subprocess.DEVNULL)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "not a model file" in lines[0], lines
    assert ("FIFO" if kind == "fifo" else "character device") in lines[0]


@pytest.mark.parametrize("mode", ["auto", "text", "tokenized", "conllu"])
def test_a_character_device_as_input_gets_the_nul_check_first(mode, tiny_pipeline):
    out = _arboreal("parse", str(tiny_pipeline), "/dev/zero", "--input", mode)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert lines == ["arboreal: error: /dev/zero:1: control character U+0000 in the line "
                     "(binary input?)"]


def test_a_nul_deep_in_a_long_line_is_found_before_the_line_ends(tmp_path, tiny_pipeline):
    from arboreal.errors import FormatError
    from arboreal.io.text import iter_paragraphs

    class Endless:
        """A stream of 'a' with a NUL after 3 MiB, and no line end ever."""

        def __init__(self):
            self.sent = 0

        def readline(self, limit=-1):
            n = limit if limit > 0 else 1 << 16
            self.sent += n
            assert self.sent < 8 << 20, "read on past the NUL"
            return b"a" * (n - 1) + (b"\0" if self.sent > 3 << 20 else b"a")

        def read(self, n=-1):
            return self.readline(n)

    with pytest.raises(FormatError, match="U\\+0000"):
        list(iter_paragraphs(Endless()))


def test_an_index_nested_without_end_is_one_line(tmp_path, model_home, capsys):
    index = tmp_path / "index.json"
    index.write_text("[" * 100_000 + "]" * 100_000)
    assert main(["download", "x", "--index", str(index)]) == 2
    one_line_error(capsys, "nested deeper than")
    index.write_text(json.dumps({"format": "arboreal-model-index", "models": [
        {"name": "x", "scores": {"a": [[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}}]}))
    assert main(["download", "x", "--index", str(index)]) == 2
    one_line_error(capsys, "nested deeper than")


def test_a_redirect_loop_is_one_line(server, model_home, capsys):
    server.redirects["/index.json"] = "/index.json"
    assert main(["download", "x", "--index", f"{server.url}/index.json"]) == 2
    one_line_error(capsys, "redirect loop")


def test_an_index_over_http_may_not_name_local_files(server, tiny_pipeline, model_home,
                                                     capsys, tmp_path):
    index = publish(server, tiny_pipeline)
    served = json.loads(server.files["/index.json"])
    served["models"][0]["url"] = tiny_pipeline.as_uri()
    server.files["/index.json"] = json.dumps(served).encode()
    assert main(["download", "tiny", "--index", index]) == 2
    one_line_error(capsys, "not http(s)")
    assert not (model_home / "models" / "tiny").exists()
    # a local index may name local files
    local = tmp_path / "index.json"
    local.write_text(json.dumps(served))
    assert main(["download", "tiny", "--index", str(local), "--quiet"]) == 0


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _old(path: Path, data: bytes | None = b"") -> Path:
    """``path`` made (a file of ``data``; a folder for None) an hour old."""
    if data is None:
        path.mkdir(parents=True)
    else:
        path.write_bytes(data)
    past = time.time() - 3600
    os.utime(path, (past, past))
    return path


def test_temporary_files_of_dead_runs_are_removed_by_the_next_write(tmp_path, tiny_pipeline):
    from arboreal._atomic import atomic_write

    out = tmp_path / "out.conllu"
    dead = _old(tmp_path / f".out.conllu.{_dead_pid()}-0123456789ab.tmp", b"half")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = _old(tmp_path / f".out.conllu.{sleeper.pid}-0123456789ab.tmp", b"writing")
        other = _old(tmp_path / f".other.conllu.{_dead_pid()}-0123456789ab.tmp")
        atomic_write(out, lambda f: f.write(b"new"))
        assert out.read_bytes() == b"new"
        assert not dead.exists()                  # its process is gone
        assert live.exists()                      # its process still runs
        assert other.exists()                     # another output's: not this write's
    finally:
        sleeper.kill()
        sleeper.wait()


def test_partial_downloads_of_dead_runs_are_removed_and_reported(model_home, capsys):
    folder = model_home / "models"
    part = folder / f".tiny.{_dead_pid()}-0123456789ab.part"
    part.mkdir(parents=True)
    _old(part / "model.npz", b"half")
    os.utime(part, (time.time() - 3600,) * 2)
    fresh = folder / f".tiny.{os.getpid()}-0123456789ab.part"
    fresh.mkdir()
    assert main(["models"]) == 0
    err = capsys.readouterr().err
    assert not part.exists() and fresh.exists()
    assert "removed 1 partial download" in err
