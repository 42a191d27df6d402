"""arboreal serve: UDPipe's REST API over real HTTP (a server subprocess) and in-process."""
from __future__ import annotations

import io
import json
import signal
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from wsgiref.util import setup_testing_defaults
from wsgiref.validate import validator

import pytest

pytest.importorskip("waitress")

from arboreal.cli import main  # noqa: E402
from arboreal.io.conllu import format_conllu, read_conllu  # noqa: E402
from _serve_process import start_server, stop_server  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
TEXT = ("The cleric will speak today. He arrived in Baghdad yesterday.\n\n"
        "A new paragraph starts here.")
LIMIT = 64 * 1024
MAX_WORDS = 3000


@pytest.fixture(scope="module")
def files(small_trained_copy):
    """conftest's small treebank and its model, copied: the tests write beside them."""
    return small_trained_copy


@pytest.fixture(scope="module")
def url(files):
    proc, base = start_server(f"en-ewt={files / 'm.npz'}", "--max-request-bytes", "64K",
                              "--workers", "2", "--max-words", str(MAX_WORDS))
    yield base
    rc, err = stop_server(proc)
    assert rc == 0, err
    assert "Traceback" not in err, err


def request(url: str, data: bytes | None = None, headers: dict | None = None,
            method: str | None = None) -> tuple[int, str, bytes]:
    """(status, Content-Type, body) of one HTTP request."""
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def multipart(fields: dict[str, str | bytes]) -> tuple[bytes, dict]:
    """A multipart/form-data body as curl -F and udpipe2_client.py send it."""
    boundary = "arboreal-test-7f3a"
    out = []
    for name, value in fields.items():
        if isinstance(value, str):
            value = value.encode("utf-8")
        out += [f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"".encode()
                + (b"; filename=\"in.txt\"" if name == "data" else b"")
                + b"\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + value + b"\r\n"]
    out.append(f"--{boundary}--\r\n".encode())
    return b"".join(out), {"Content-Type": f"multipart/form-data; boundary=\"{boundary}\""}


def process(url: str, fields: dict[str, str | bytes], how: str = "multipart"):
    if how == "multipart":
        body, headers = multipart(fields)
        return request(url + "process", body, headers)
    encoded = urllib.parse.urlencode(fields)
    if how == "form":
        return request(url + "process", encoded.encode("ascii"),
                       {"Content-Type": "application/x-www-form-urlencoded"})
    return request(url + "process?" + encoded)


def result_of(status: int, ctype: str, body: bytes) -> str:
    assert status == 200, body
    assert ctype == "application/json; charset=utf-8"
    answer = json.loads(body)
    assert answer["model"] == "en-ewt" and isinstance(answer["acknowledgements"], list)
    return answer["result"]


def sentences_of(conllu: str, parsed: bool = True) -> list:
    return read_conllu(io.StringIO(conllu), allow_missing_heads=not parsed,
                       check_trees=parsed)


def unparsed_conllu(sents, keep_tags: bool = True) -> str:
    lines = []
    for line in format_conllu(sents).split("\n"):
        cols = line.split("\t")
        if len(cols) == 10 and cols[0].isdigit():
            cols[6:9] = ["_", "_", "_"]
            if not keep_tags:
                cols[2:6] = ["_"] * 4
        lines.append("\t".join(cols))
    return "\n".join(lines)


# ---------------------------------------------------------------------------- over HTTP


def test_models_get_and_post(url):
    for data in (None, b""):
        status, ctype, body = request(url + "models", data,
                                      {"Content-Type": "application/x-www-form-urlencoded"})
        assert status == 200 and ctype == "application/json; charset=utf-8"
        assert json.loads(body) == {"models": {"en-ewt": ["tokenizer", "tagger", "parser"]},
                                    "default_model": "en-ewt"}
    status, ctype, body = request(url)
    assert status == 200 and b"/process" in body


def test_raw_text_tokenize_tag_parse(url):
    result = result_of(*process(url, {"data": TEXT, "tokenizer": "", "tagger": "",
                                      "parser": ""}))
    sents = sentences_of(result)
    assert len(sents) >= 2
    assert all(s.has_heads and "_" not in s.upos[1:].tolist() for s in sents)
    assert "".join(f for s in sents for f in s.forms[1:].tolist()) == \
        "".join(TEXT.split())
    assert sum(c == "# newpar" for s in sents for c in s.comments) == 2
    # the same request urlencoded, as a GET query and with a model prefix
    assert result_of(*process(url, {"data": TEXT, "tokenizer": "", "tagger": "",
                                    "parser": "", "model": "en"}, "form")) == result
    assert result_of(*process(url, {"data": TEXT, "tokenizer": "", "tagger": "",
                                    "parser": ""}, "get")) == result


def test_conllu_input_parser_only(url, files):
    gold = read_conllu(files / "dev.conllu")[:5]
    out = sentences_of(result_of(*process(url, {"data": unparsed_conllu(gold),
                                                "parser": ""})))
    assert len(out) == len(gold)
    for g, p in zip(gold, out):
        assert g.forms.tolist() == p.forms.tolist() and g.comments == p.comments
        assert g.upos.tolist() == p.upos.tolist() and g.lemmas.tolist() == p.lemmas.tolist()
        assert p.has_heads and "_" not in p.deprels[1:].tolist()
    # no tags and no 'tagger': the parser predicts the tags it needs
    out = sentences_of(result_of(*process(url, {"data": unparsed_conllu(gold, False),
                                                "parser": ""}, "form")))
    assert all(p.has_heads and "_" not in p.upos[1:].tolist() for p in out)
    # no step at all: the input comes back
    same = result_of(*process(url, {"data": unparsed_conllu(gold)}))
    assert [s.forms.tolist() for s in sentences_of(same, False)] == [g.forms.tolist() for g in gold]


def test_horizontal_and_vertical_input_and_outputs(url):
    data = "I like New\u00a0York .\nIt rains ."
    out = sentences_of(result_of(*process(url, {"data": data, "input": "horizontal",
                                                "tagger": "", "parser": ""})))
    assert [s.forms[1:].tolist() for s in out] == [["I", "like", "New York", "."],
                                                  ["It", "rains", "."]]
    assert all(s.has_heads for s in out)
    assert result_of(*process(url, {"data": data, "input": "horizontal", "output": "horizontal"},
                              "get")) == data + "\n"
    vertical = "I\nlike\tx\nit\n\nGo\n"
    out = sentences_of(result_of(*process(url, {"data": vertical, "input": "vertical",
                                                "parser": ""})))
    assert [s.forms[1:].tolist() for s in out] == [["I", "like", "it"], ["Go"]]
    assert result_of(*process(url, {"data": vertical, "input": "vertical",
                                    "output": "vertical"})) == "I\nlike\nit\n\nGo\n\n"
    text = result_of(*process(url, {"data": "Hello, world!", "tokenizer": "",
                                    "output": "plaintext"}))
    assert text == "Hello, world!\n"


@pytest.mark.parametrize("fields, status, message", [
    ({"data": "x", "model": "xx"}, 400, "Requested model 'xx' does not exist"),
    ({"tokenizer": ""}, 400, "'data' is missing"),
    ({"data": "x", "input": "matxin"}, 400, "Unknown input format 'matxin'"),
    ({"data": "x", "output": "matxin"}, 400, "Unknown output format 'matxin'"),
    ({"data": "1\tA\n2\tB\n", "parser": ""}, 400, "Cannot process the input data"),
    ({"data": b"\xff\xfe caf\xe9", "tokenizer": ""}, 400, "not valid UTF-8"),
])
def test_bad_requests(url, fields, status, message):
    code, ctype, body = process(url, fields)
    assert code == status and ctype.startswith("text/plain")
    assert message in body.decode("utf-8")


def test_bad_requests_other_shapes(url):
    code, _, body = request(url + "process", b"tokenizer=&data=caf%E9",
                            {"Content-Type": "application/x-www-form-urlencoded"})
    assert code == 400 and b"UTF-8" in body
    code, _, body = request(url + "process", b"tokenizer=&data=caf\xe9",
                            {"Content-Type": "application/x-www-form-urlencoded"})
    assert code == 400 and b"UTF-8" in body
    code, _, body = request(url + "process?data=%FF")
    assert code == 400 and b"UTF-8" in body
    code, _, body = request(url + "process", b"{}", {"Content-Type": "application/json"})
    assert code == 400 and b"Content-Type" in body
    assert request(url + "nothing")[0] == 404
    assert request(url + "process", b"", method="PUT")[0] == 405


def test_body_over_the_limit(url):
    word = "w" * 29 + " "              # long words: under the word budget
    ok = "tokenizer=&output=horizontal&data=" + word * ((LIMIT - 40) // len(word))
    assert len(ok) <= LIMIT and len(ok.split()) < MAX_WORDS
    assert process(url, {}, "form")[0] == 400                       # sanity: 'data' missing
    code, _, _ = request(url + "process", ok.encode(), {"Content-Type":
                                                        "application/x-www-form-urlencoded"})
    assert code == 200
    big, headers = multipart({"data": "word " * (LIMIT // 4), "tokenizer": ""})
    code, ctype, body = request(url + "process", big, headers)
    assert code == 413 and ctype.startswith("text/plain")


def test_word_budget_is_413_with_the_reason(url):
    words = " ".join(["word"] * MAX_WORDS)
    assert process(url, {"data": words, "input": "horizontal"}, "form")[0] == 200
    code, ctype, body = process(url, {"data": words + " more", "input": "horizontal"}, "form")
    assert code == 413 and ctype.startswith("text/plain")
    assert f"The data has {MAX_WORDS + 1} words; this server takes at most {MAX_WORDS}" \
        in body.decode("utf-8")
    # counted once tokenized: 1,600 words of text in 3,200 tokens
    code, _, body = process(url, {"data": "word. " * 1600, "tokenizer": ""}, "form")
    assert code == 413 and b"The data has 3200 words" in body


def test_lf_only_multipart_is_accepted(url):
    fields = {"data": TEXT, "tokenizer": "", "tagger": "", "parser": ""}
    body, headers = multipart(fields)
    assert b"\r" not in TEXT.encode() and body.count(b"\r\n") > 4
    lf_only = body.replace(b"\r\n", b"\n")
    assert result_of(*request(url + "process", lf_only, headers)) == \
        result_of(*request(url + "process", body, headers))


def test_concurrent_requests(url, files):
    texts = ["The cleric will speak today. He arrived yesterday.",
             "A new paragraph starts here. It is short."]
    alone = [result_of(*process(url, {"data": t, "tokenizer": "", "tagger": "", "parser": ""}))
             for t in texts]
    results: dict[int, str] = {}
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            for _ in range(3):
                r = result_of(*process(url, {"data": texts[i], "tokenizer": "", "tagger": "",
                                             "parser": ""}, ("multipart", "form")[i]))
                assert r == alone[i]
            results[i] = r
        except BaseException as exc:   # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert results == {0: alone[0], 1: alone[1]}


def test_sigterm_finishes_requests_in_progress(files):
    import http.client

    proc, base = start_server(str(files / "m.npz"), "--threads", "2")
    host, port = urllib.parse.urlsplit(base).netloc.split(":")
    gold = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")[:100]
    body = urllib.parse.urlencode({"data": unparsed_conllu(gold, keep_tags=False),
                                   "tagger": "", "parser": ""}).encode()
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    try:
        # a slow client: half the body before the signal, the rest after it
        conn.putrequest("POST", "/process")
        conn.putheader("Content-Type", "application/x-www-form-urlencoded")
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        conn.send(body[:len(body) // 2])
        # handshake instead of a sleep: a request on a second connection, made after
        # the first, is answered only after the server accepted the first connection
        # and read what had arrived on it (one loop polls every socket)
        with urllib.request.urlopen(base + "models", timeout=120) as r:
            assert r.status == 200
        proc.send_signal(signal.SIGTERM)
        # no new connections once stopping: tried until refused (the deadline bounds a hang)
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(base + "models", timeout=10).close()
            except OSError:
                break
            assert time.monotonic() < deadline, "the server still accepts connections"
        conn.send(body[len(body) // 2:])
        response = conn.getresponse()
        status, answer = response.status, response.read()
    finally:
        conn.close()
    rc, err = stop_server(proc, send=False)
    assert rc == 0, err
    assert "arboreal: stopped" in err and "abandoned" not in err and "Traceback" not in err
    assert status == 200, answer
    out = sentences_of(json.loads(answer)["result"])
    assert len(out) == len(gold) and all(s.has_heads for s in out)


# ---------------------------------------------------------------------------- in process


def call(app, method: str = "GET", path: str = "/process", query: str = "", body: bytes = b"",
         ctype: str | None = None) -> tuple[int, dict, bytes]:
    environ: dict = {"REQUEST_METHOD": method, "SCRIPT_NAME": "", "PATH_INFO": path,
                     "QUERY_STRING": query,
                     "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body)}
    if ctype:
        environ["CONTENT_TYPE"] = ctype
    setup_testing_defaults(environ)
    seen: dict = {}

    def start_response(status, headers, exc_info=None):
        seen["status"], seen["headers"] = status, dict(headers)

    it = validator(app)(environ, start_response)
    try:
        data = b"".join(it)
    finally:
        it.close()
    return int(seen["status"].split()[0]), seen["headers"], data


def test_in_process_steps_the_model_lacks(files):
    from arboreal.models import load_model
    from arboreal.server import make_app

    full = load_model(files / "m.npz")
    from arboreal.models.pipeline import complete_tags

    # a parser without tokenizer and tagger: refuses input without UPOS, as such models do
    bare = SimpleNamespace(tokenizer=None, tagger=None)
    bare.parse = lambda sents, retag=False: full.parse(complete_tags(bare, sents, retag))
    app = make_app({"en-ewt-full": full, "en-ewt-bare": bare}, max_request_bytes=1000)
    status, _, body = call(app, path="/models")
    assert json.loads(body) == {"models": {"en-ewt-full": ["tokenizer", "tagger", "parser"],
                                           "en-ewt-bare": ["parser"]},
                                "default_model": "en-ewt-full"}
    q = urllib.parse.urlencode
    code, _, body = call(app, query=q({"model": "en-ewt-bare", "tokenizer": "", "data": "Hi."}))
    assert code == 400 and b"does not contain a tokenizer" in body
    code, _, body = call(app, query=q({"model": "en-ewt-bare", "tagger": "", "data": "Hi ."}))
    assert code == 400 and b"does not contain a tagger" in body
    code, _, body = call(app, query=q({"model": "en-ewt-bare", "input": "horizontal",
                                       "parser": "", "data": "Hi ."}))
    assert code == 400 and b"no UPOS" in body
    code, _, body = call(app, query=q({"model": "en-ewt", "input": "horizontal",
                                       "parser": "", "data": "Hi ."}))
    assert code == 200 and json.loads(body)["model"] == "en-ewt-full"   # prefix: first model
    code, _, body = call(app, method="POST", body=b"data=" + b"a" * 1000,
                         ctype="application/x-www-form-urlencoded")
    assert code == 413
    code, _, body = call(app, query=q({"data": "  \n", "tokenizer": ""}))
    assert code == 200 and json.loads(body)["result"] == ""
    # tagger=none, as UDPipe 1 reads it: no tagging
    gold = read_conllu(files / "dev.conllu")[:2]
    code, _, body = call(app, query=q({"data": unparsed_conllu(gold), "tagger": "none",
                                       "parser": "none"}))
    assert code == 200
    assert [s.upos.tolist() for s in sentences_of(json.loads(body)["result"], False)] == \
        [g.upos.tolist() for g in gold]


def test_multipart_parser_edge_cases():
    from arboreal.server import HTTPError, parse_multipart

    body = (b"preamble\r\n--b\r\nContent-Disposition: form-data; name=\"data\"\r\n"
            b"Content-Transfer-Encoding: base64\r\n\r\nSGVsbG8=\r\n--b\r\n"
            b"Content-Disposition: form-data; name=tagger\r\n\r\n\r\n--b--\r\n")
    assert parse_multipart(body, "b") == {"data": b"Hello", "tagger": b""}
    for bad in (b"--b\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\nno end",
                b"--b\r\nno header end\r\n--b--\r\n",
                b"--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--\r\n"):
        with pytest.raises(HTTPError):
            parse_multipart(bad, "b")


# ---------------------------------------------------------------------------- the command


def test_cli_errors_before_listening(files, tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a model")
    assert main(["serve", str(bad), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("arboreal: error:") and "Traceback" not in err
    assert main(["serve", str(tmp_path / "missing.npz"), "--port", "0"]) == 2
    assert "arboreal: error:" in capsys.readouterr().err
    model = str(files / "m.npz")
    assert main(["serve", model, model, "--port", "0"]) == 2
    assert "two models are named 'm'" in capsys.readouterr().err
    assert main(["serve", model, "--default-model", "zz", "--port", "0"]) == 2
    assert "zz" in capsys.readouterr().err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        assert main(["serve", model, "--port", str(port)]) == 2
        assert "cannot listen on 127.0.0.1" in capsys.readouterr().err

    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "waitress" else real(name, *a))
    assert main(["serve", model]) == 2
    assert "pip install 'arboreal[serve]'" in capsys.readouterr().err
