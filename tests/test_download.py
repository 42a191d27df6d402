"""``arboreal download`` from an index served on 127.0.0.1 (no network needed): the
right file arrives; a wrong SHA-256, a connection cut halfway and an interruption
leave nothing in the cache; a cut is resumed (HTTP Range) or restarted; an unknown
name lists the known ones; offline errors are one line."""
from __future__ import annotations

import hashlib
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import arboreal
from arboreal.cli import main
from arboreal.errors import ArborealError
from arboreal.models.download import download


class ModelServer(ThreadingHTTPServer):
    """Serves ``files`` (path -> bytes); ``cuts[path]`` responses to that path stop
    halfway through the body and close the connection; ``ranges``: whether Range
    requests are honoured (206) or ignored (the whole file, 200). Every request's
    (path, Range header) is recorded."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.files: dict[str, bytes] = {}
        self.cuts: dict[str, int] = {}
        self.ranges = True
        self.requests: list[tuple[str, str | None]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        server = self.server
        server.requests.append((self.path, self.headers.get("Range")))
        data = server.files.get(self.path)
        if data is None:
            self.send_error(404)
            return
        start = 0
        wanted = self.headers.get("Range")
        if wanted and server.ranges:
            start = int(wanted.split("=")[1].split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if server.cuts.get(self.path, 0) > 0:
            server.cuts[self.path] -= 1
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = ModelServer()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def publish(server: ModelServer, model: Path, name: str = "tiny", sha256: str | None = None,
            others=("tr_imst", "el_gdt")) -> str:
    """Serve ``model`` as ``name`` (plus entries for ``others``) and return the index URL."""
    data = model.read_bytes()
    server.files["/models/tiny-1.0.npz"] = data
    entries = [{"name": name, "version": "1.0", "url": "models/tiny-1.0.npz",
                "sha256": sha256 or hashlib.sha256(data).hexdigest(), "size": len(data),
                "license": "CC BY-SA 4.0", "scores": {"raw_text": {"LAS": 42.0}}}]
    entries += [{**entries[0], "name": other} for other in others]
    server.files["/index.json"] = json.dumps(
        {"format": "arboreal-model-index", "format_version": 1, "models": entries}).encode()
    return f"{server.url}/index.json"


def cache_contents(home: Path) -> list[str]:
    """Everything in the cache folder, hidden files included, as relative paths."""
    folder = home / "models"
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")) \
        if folder.exists() else []


def one_line_error(capsys, *needles: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("arboreal: error: ")]
    assert len(errors) == 1 and errors[0] == err[-1], err
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


def test_the_right_file_arrives(server, tiny_pipeline, model_home, capsys):
    index = publish(server, tiny_pipeline)
    assert main(["download", "tiny", "--index", index]) == 0
    assert cache_contents(model_home) == ["tiny", "tiny/card.json", "tiny/model.npz"]
    assert (model_home / "models" / "tiny" / "model.npz").read_bytes() == \
        tiny_pipeline.read_bytes()
    card = json.loads((model_home / "models" / "tiny" / "card.json").read_text())
    assert card["sha256"] == hashlib.sha256(tiny_pipeline.read_bytes()).hexdigest()
    assert card["license"] == "CC BY-SA 4.0" and card["scores"]["raw_text"]["LAS"] == 42.0
    assert card["contains"]["tokenizer"] is True
    assert len(arboreal.load("tiny").parse_text("The cat sat. It purred.")) == 2
    # again: the cache holds that very file, nothing is fetched but the index
    before = len(server.requests)
    assert main(["download", "tiny", "--index", index]) == 0
    assert "in the cache already" in capsys.readouterr().err
    assert [p for p, _ in server.requests[before:]] == ["/index.json"]


def test_a_wrong_sha256_is_refused_leaving_nothing(server, tiny_pipeline, model_home, capsys):
    index = publish(server, tiny_pipeline, sha256="0" * 64)
    assert main(["download", "tiny", "--index", index]) == 2
    one_line_error(capsys, "SHA-256", "refused")
    assert cache_contents(model_home) == []


@pytest.mark.parametrize("ranges", [True, False])
def test_a_cut_connection_is_resumed_or_restarted(server, tiny_pipeline, model_home, capsys,
                                                  ranges):
    index = publish(server, tiny_pipeline)
    server.cuts["/models/tiny-1.0.npz"] = 1
    server.ranges = ranges
    assert main(["download", "tiny", "--index", index]) == 0
    assert (model_home / "models" / "tiny" / "model.npz").read_bytes() == \
        tiny_pipeline.read_bytes()
    assert cache_contents(model_home) == ["tiny", "tiny/card.json", "tiny/model.npz"]
    model_requests = [r for p, r in server.requests if p == "/models/tiny-1.0.npz"]
    half = tiny_pipeline.stat().st_size // 2
    assert model_requests == [None, f"bytes={half}-"]       # resumed where it broke
    err = capsys.readouterr().err
    assert f"broke off after {half} of" in err
    assert ("restarting" in err) == (not ranges)


def test_a_connection_cut_every_time_leaves_nothing(server, tiny_pipeline, model_home, capsys):
    index = publish(server, tiny_pipeline)
    server.cuts["/models/tiny-1.0.npz"] = 100
    assert main(["download", "tiny", "--index", index, "--retries", "2"]) == 2
    one_line_error(capsys, "broke off", "2 times resumed", "nothing was kept")
    assert cache_contents(model_home) == []
    assert sum(p == "/models/tiny-1.0.npz" for p, _ in server.requests) == 3


def test_an_interrupted_download_leaves_nothing(server, tiny_pipeline, model_home):
    index = publish(server, tiny_pipeline)

    def interrupt(n):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        download("tiny", index, progress=interrupt)
    assert cache_contents(model_home) == []


def test_an_unknown_name_lists_the_known_ones(server, tiny_pipeline, model_home, capsys):
    index = publish(server, tiny_pipeline)
    assert main(["download", "tr_imsd", "--index", index]) == 2
    one_line_error(capsys, f"tr_imsd: not in the model index {index}",
                   "it has: el_gdt, tiny, tr_imst; closest: tr_imst")
    assert cache_contents(model_home) == []


def test_an_index_file_with_relative_urls(tiny_pipeline, model_home, tmp_path):
    data = tiny_pipeline.read_bytes()
    (tmp_path / "published").mkdir()
    (tmp_path / "published" / "tiny.npz").write_bytes(data)
    (tmp_path / "published" / "index.json").write_text(json.dumps([
        {"name": "tiny", "version": "1.0", "url": "tiny.npz", "size": len(data),
         "sha256": hashlib.sha256(data).hexdigest()}]))
    for index in (str(tmp_path / "published" / "index.json"),
                  (tmp_path / "published" / "index.json").as_uri()):
        assert main(["download", "tiny", "--index", index, "--force", "--quiet"]) == 0
        assert (model_home / "models" / "tiny" / "model.npz").read_bytes() == data
    assert cache_contents(model_home) == ["tiny", "tiny/card.json", "tiny/model.npz"]


def test_a_file_larger_than_the_index_says_is_refused(server, tiny_pipeline, model_home,
                                                      capsys):
    index = publish(server, tiny_pipeline)
    listed = json.loads(server.files["/index.json"])
    listed["models"][0]["size"] -= 10
    server.files["/index.json"] = json.dumps(listed).encode()
    assert main(["download", "tiny", "--index", index]) == 2
    one_line_error(capsys, "more than the")
    assert cache_contents(model_home) == []


def test_offline_is_one_line(model_home, capsys, monkeypatch):
    with socket.socket() as s:          # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["download", "tiny", "--index", f"http://127.0.0.1:{port}/index.json"]) == 2
    one_line_error(capsys, "connection refused")

    def no_dns(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    with pytest.raises(ArborealError, match="unknown host"):
        download("tiny", "https://models.example.invalid/index.json")
    monkeypatch.delenv("ARBOREAL_INDEX", raising=False)
    assert main(["download", "tiny"]) == 2    # no index given, none set
    one_line_error(capsys, "no model index", "ARBOREAL_INDEX")
    assert cache_contents(model_home) == []
