"""``arboreal serve`` under hostile clients, on loopback only (the flood from other
addresses of 127.0.0.0/8 than the probes'): idle keep-alive connections and slow
headers cannot lock other clients out, one client's connections are capped, and
requests are classed by their words, not their bytes. Each test bounded in count and
time; no assertion on latency (the benchmarks measure it:
benchmarks/server_floods.py)."""
from __future__ import annotations

import socket
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("waitress")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _serve_process import connect_from as _connect, start_server, stop_server  # noqa: E402

PROBE_TIMEOUT = 30      # a probe locked out waits waitress's 120 s: failing, not slow


def _port(url: str) -> int:
    return urllib.parse.urlsplit(url).port




def _idle(port: int, source: str) -> socket.socket:
    """A keep-alive connection that made one request and then says nothing."""
    s = _connect(port, source)
    s.sendall(b"GET /models HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))
    while len(body) < length:                  # the whole answer read: nothing left
        body += s.recv(65536)
    return s


def _slow(port: int, source: str) -> socket.socket:
    """A connection whose request headers never end (slowloris)."""
    s = _connect(port, source)
    s.sendall(b"POST /process HTTP/1.1\r\nHost: x\r\n")
    return s


def _probe(url: str) -> int:
    body = urllib.parse.urlencode({"data": "The cat sat .", "input": "horizontal",
                                   "tagger": "", "parser": ""}).encode()
    with urllib.request.urlopen(urllib.request.Request(url + "process", data=body),
                                timeout=PROBE_TIMEOUT) as r:
        r.read()
        return r.status


def _closed(s: socket.socket, within: float) -> bool:
    """Whether the server closes ``s`` within ``within`` seconds."""
    s.settimeout(within)
    try:
        return s.recv(1) == b""
    except (TimeoutError, socket.timeout):
        return False
    except OSError:           # reset
        return True


@pytest.fixture
def flood_server(tiny_pipeline):
    proc, url = start_server(str(tiny_pipeline), "--workers", "1",
                             "--connection-limit", "120", "--connections-per-client", "40",
                             "--idle-timeout", "4", "--header-timeout", "3")
    yield url
    rc, err = stop_server(proc)
    assert rc == 0 and "Traceback" not in err, err


def test_idle_and_slow_connections_past_the_limit_leave_room_for_probes(flood_server):
    port = _port(flood_server)
    held = []
    try:
        # 30 addresses x 3 idle + 30 x 2 slow = 150 connections, over the limit of 120
        for k in range(30):
            source = f"127.0.1.{k + 1}"
            held += [_idle(port, source) for _ in range(3)]
            held += [_slow(port, source) for _ in range(2)]
        statuses = [_probe(flood_server) for _ in range(10)]
        assert statuses == [200] * 10
    finally:
        for s in held:
            s.close()


def test_slow_headers_and_idle_keep_alives_are_closed_after_their_timeouts(flood_server):
    port = _port(flood_server)
    slow, idle = _slow(port, "127.0.2.1"), _idle(port, "127.0.2.2")
    try:
        slow.sendall(b"X-Slow: 1\r\n")      # activity, yet the headers never end
        assert _closed(slow, 20)
        assert _closed(idle, 20)
    finally:
        slow.close()
        idle.close()


def test_one_client_is_capped_and_others_are_not(flood_server):
    port = _port(flood_server)
    mine = [_slow(port, "127.0.3.1") for _ in range(40)]
    try:
        extra = _slow(port, "127.0.3.1")     # its 41st: none of its others is idle
        assert _closed(extra, 10)
        assert _probe(flood_server) == 200   # from 127.0.0.1: not capped
        extra.close()
    finally:
        for s in mine:
            s.close()


def test_requests_are_classed_by_their_words_not_their_bytes():
    from urllib.parse import urlencode

    from arboreal.server import is_large_request, request_work

    def post(**fields):
        return ("POST", "", "application/x-www-form-urlencoded", urlencode(fields).encode())

    long_sentence = " ".join(["a"] * 5000)            # 10 KB: under the byte threshold
    assert len(long_sentence.encode()) < 16 << 10
    assert request_work(post(data=long_sentence, input="horizontal")) == (5000, 5000)
    assert is_large_request(post(data=long_sentence, input="horizontal"))
    assert is_large_request(post(data=long_sentence, tokenizer=""))
    short = "The cat sat on the mat .\nIt slept ."
    assert request_work(post(data=short, input="horizontal")) == (10, 7)
    assert not is_large_request(post(data=short, input="horizontal"))
    text = "The cat sat. It slept! Did it? " * 3
    words, longest = request_work(post(data=text, tokenizer=""))
    assert words == 21 and longest == 3
    conllu = "".join(f"{i}\tw\t_\t_\t_\t_\t0\t_\t_\t_\n" for i in range(1, 301)) + "\n"
    assert request_work(post(data=conllu)) == (300, 300)
    assert not is_large_request(post(data=conllu), order=1)
    assert is_large_request(post(data=conllu), order=2)
    assert request_work(("POST", "", "text/plain", b"\xff")) == (0, 0)   # the worker says 400
