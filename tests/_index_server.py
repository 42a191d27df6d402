"""A model index and its models served on 127.0.0.1 (the ``server`` fixture of
conftest.py), and helpers of the download tests."""
from __future__ import annotations

import hashlib
import json
import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


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
        #: path -> the location a request for it is redirected to (302)
        self.redirects: dict[str, str] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        server = self.server
        server.requests.append((self.path, self.headers.get("Range")))
        if self.path in server.redirects:
            self.send_response(302)
            self.send_header("Location", server.redirects[self.path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
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
