"""``arboreal download`` from an index served on 127.0.0.1 (no network needed): the
right file arrives; a wrong SHA-256, a connection cut halfway and an interruption
leave nothing in the cache; a cut is resumed (HTTP Range) or restarted; an unknown
name lists the known ones; offline errors are one line."""
from __future__ import annotations

import hashlib
import json
import socket

import pytest

import arboreal
from arboreal.cli import main
from arboreal.errors import ArborealError
from arboreal.models.download import download
from _index_server import cache_contents, one_line_error, publish


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
