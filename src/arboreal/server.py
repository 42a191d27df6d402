"""An HTTP server with UDPipe's REST API (``arboreal serve``).

Clients written for UDPipe's REST service (UDPipe 1 ``udpipe_server``, UDPipe 2
``udpipe2_server.py``, ``udpipe2_client.py``, ``curl -F data=@file -F tokenizer=
-F tagger= -F parser= http://HOST:PORT/process``) work unchanged. The API
(https://lindat.mff.cuni.cz/services/udpipe/api-reference.php):

``GET|POST /models``
    ``{"models": {NAME: ["tokenizer", "tagger", "parser"]}, "default_model": NAME}``,
    each model listing the components it has (every arboreal model has a parser).

``GET|POST /process``
    Parameters come from the query string and from an
    ``application/x-www-form-urlencoded`` or ``multipart/form-data`` body (a body
    parameter overrides a query one of the same name):

    - ``data`` (required): the text, UTF-8; it is NFC-normalized, as UDPipe does.
    - ``model``: a model name, an alias, or a hyphen-separated prefix of one
      (``en`` selects ``en-ewt``: the first model served wins a shared prefix, a
      full name always wins); absent or empty: the default model.
    - ``tokenizer`` (present = raw text input, cut into paragraphs at blank lines,
      tokenized and split into sentences by the model's tokenizer; of its value, the
      tokenizer options, ``presegmented`` is read: one sentence per line, tokenized
      and never split, as UDPipe's; the others are ignored).
    - ``input`` (when no tokenizer): ``conllu`` (default; HEAD may be ``_``),
      ``horizontal`` (a sentence per line, tokens separated by spaces; U+00A0
      NO-BREAK SPACE inside a token stands for a space), ``vertical`` (a token per
      line, the first tab-separated field; blank lines end sentences) or
      ``tokenizer`` (same as the ``tokenizer`` parameter). Format options
      (``conllu=v2``) are accepted and ignored.
    - ``tagger`` (present = predict UPOS, XPOS, FEATS and LEMMA for every word,
      replacing the input's; value ignored, ``none`` = absent as in UDPipe 1).
    - ``parser`` (present = predict HEAD and DEPREL; value ignored, ``none`` =
      absent). Without ``tagger``, tag columns that are ``_`` throughout a sentence
      are still predicted first, since the parser's features need them (the
      ``arboreal parse`` rule); columns the input has are kept.
    - ``output``: ``conllu`` (default), ``horizontal`` (words of a sentence on one
      line, spaces inside words written as U+00A0), ``vertical`` (a word per line,
      a blank line after each sentence), ``plaintext`` (tokens of a sentence on one
      line, spaced by ``SpaceAfter=No``: UDPipe's ``plaintext=normalized_spaces``; a
      blank line between paragraphs). ``horizontal`` and ``vertical`` take the
      option ``paragraphs`` (``horizontal=paragraphs``: a blank line after each
      paragraph); other options are ignored.

    The answer: ``{"model": NAME, "acknowledgements": [...], "result": TEXT}``
    (``application/json; charset=utf-8``). Steps without a parameter are skipped:
    ``input=horizontal`` alone converts text to CoNLL-U.

Errors, as UDPipe's servers answer them: a ``text/plain`` message with status 400
(missing ``data``, unknown model or format, a step the model lacks, malformed
input, text or parameters that are not UTF-8, an unsupported body type), 404 (an
unknown URL), 405 (a method other than GET, HEAD and POST), 413 (a body over the
size limit, or data over the word budget), 503 with ``Retry-After`` (the queue is
full, the time budget ran out, a worker died: :mod:`arboreal.server_workers`) and 500
(a bug; the traceback is logged, on the server's standard error). Every answer carries
``Access-Control-Allow-Origin: *`` as UDPipe's do.

:func:`make_app` answers in the calling process; each model is guarded by a lock (a
model keeps counters and caches while it parses), so two requests for one model run
one after the other. ``arboreal serve`` runs :func:`make_pool_app` instead: requests
are answered by worker processes (:mod:`arboreal.server_workers`), each holding every
model, so that a long request does not hold up short ones.
"""
from __future__ import annotations

import email.errors
import email.message
import io
import json
import logging
import re
import signal
import threading
import time
import unicodedata
import urllib.parse
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from arboreal.errors import ArborealError

#: the port ``arboreal serve`` listens on by default (UDPipe's servers have no default)
DEFAULT_PORT = 8001
#: the largest request body accepted by default (UDPipe 2's limit is 4 MiB)
DEFAULT_MAX_REQUEST_BYTES = 10 << 20
#: how long a stopping server waits for requests in progress to be answered
SHUTDOWN_GRACE_SECONDS = 30.0

INPUT_FORMATS = ("conllu", "horizontal", "vertical", "tokenizer")
OUTPUT_FORMATS = ("conllu", "horizontal", "vertical", "plaintext")

USAGE = """\
arboreal REST server (UDPipe's REST API)

GET|POST /models   the models served and their components (JSON)
GET|POST /process  process data; parameters (query string, urlencoded or multipart form):
  data=TEXT        the input (UTF-8), required
  model=NAME       a model of /models, or a hyphen-separated prefix of its name
  tokenizer=       the input is raw text: tokenize it and split it into sentences
                   (tokenizer=presegmented: one sentence per line, never split)
  input=FORMAT     without tokenizer: conllu (default), horizontal or vertical
  tagger=          predict UPOS, XPOS, FEATS and LEMMA
  parser=          predict HEAD and DEPREL
  output=FORMAT    conllu (default), horizontal, vertical or plaintext
answer: {"model": NAME, "acknowledgements": [...], "result": TEXT}

example: curl -F data=@input.txt -F tokenizer= -F tagger= -F parser= http://HOST:PORT/process
"""


class HTTPError(Exception):
    """An answer other than 200: status line and a plain-text message."""

    def __init__(self, status: str, message: str, headers: list[tuple[str, str]] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message if message.endswith("\n") else message + "\n"
        self.headers = headers or []


def _bad(message: str) -> HTTPError:
    return HTTPError("400 Bad Request", message)


# ----------------------------------------------------------------------------
# models


@dataclass
class ServedModel:
    """A loaded model as the server holds it: its name, the lock that serializes
    requests for it, and the components it has."""

    name: str
    model: object
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def components(self) -> list[str]:
        """The UDPipe components this model has, in UDPipe's order."""
        out = []
        if getattr(self.model, "tokenizer", None) is not None:
            out.append("tokenizer")
        if getattr(self.model, "tag_columns", ()):
            out.append("tagger")
        out.append("parser")
        return out


def model_aliases(name: str) -> list[str]:
    """``name`` and every hyphen-separated prefix of it (``en-ewt-small``: itself,
    ``en-ewt``, ``en``), longest first: the names UDPipe's servers answer to."""
    parts = name.split("-")
    return ["-".join(parts[:k]) for k in range(len(parts), 0, -1) if "-".join(parts[:k])]


def _model_table(models: dict[str, ServedModel]) -> dict[str, ServedModel]:
    """Every name a model answers to -> the model: full names first, then prefixes in
    the order the models are listed (a prefix shared by two models selects the first)."""
    table: dict[str, ServedModel] = dict(models)
    for name, served in models.items():
        for alias in model_aliases(name):
            table.setdefault(alias, served)
    return table


# ----------------------------------------------------------------------------
# request parameters


def _utf8(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _bad(f"The {what} is not valid UTF-8.") from None


def _parse_query(text: str, what: str) -> dict[str, str]:
    try:
        return dict(urllib.parse.parse_qsl(text, keep_blank_values=True, encoding="utf-8",
                                           errors="strict"))
    except UnicodeDecodeError:
        raise _bad(f"The {what} is not valid UTF-8.") from None
    except ValueError as exc:
        raise _bad(f"Cannot parse the {what}: {exc}") from None


def _header_params(name: str, value: str) -> email.message.Message:
    m = email.message.Message()
    m[name] = value
    return m


#: RFC 2046's boundary characters (1 to 70 of them; we take up to 200, as clients vary)
_BOUNDARY = re.compile(r"[0-9A-Za-z'()+_,\-./:=? ]{1,200}")
#: defects of a multipart body that make its fields unreliable
_BROKEN_MULTIPART = (email.errors.StartBoundaryNotFoundDefect,
                     email.errors.CloseBoundaryNotFoundDefect,
                     email.errors.NoBoundaryInMultipartDefect,
                     email.errors.MultipartInvariantViolationDefect,
                     email.errors.MissingHeaderBodySeparatorDefect)
_TRANSFER_ENCODINGS = ("7bit", "8bit", "binary", "base64", "quoted-printable")


def _raw_header_policy():
    """The standard library's compat32 MIME policy, except that a header is handed
    over as the parser read it (bytes past ASCII as surrogate escapes, which we turn
    back into UTF-8) rather than as a lossy ``Header`` object."""
    import email.policy

    class RawHeaders(email.policy.Compat32):
        def header_fetch_parse(self, name, value):
            return value

    return RawHeaders()


def parse_multipart(body: bytes, boundary: str) -> dict[str, bytes]:
    """The fields of a ``multipart/form-data`` body (RFC 7578): name (UTF-8) -> raw bytes
    (a file field's content, as any other). Parsed by the standard library's MIME
    parser (``email.parser``), which takes CRLF, LF-only and mixed line ends alike
    (RFC 7578 asks for CRLF; hand-made bodies often have LF). Parts in base64 or
    quoted-printable transfer encoding are decoded. HTTPError 400 for a malformed
    body: no opening or closing boundary, a part without a name or a header block,
    a nested multipart, bad base64, an unknown transfer encoding."""
    import email.parser
    import email.utils

    if not _BOUNDARY.fullmatch(boundary or "") or boundary.endswith(" "):
        raise _bad("Cannot parse the multipart/form-data payload: bad boundary.")
    head = f'Content-Type: multipart/form-data; boundary="{boundary}"\r\n\r\n'
    message = email.parser.BytesParser(policy=_raw_header_policy()).parsebytes(
        head.encode("ascii") + body)
    if not message.is_multipart() or any(isinstance(d, _BROKEN_MULTIPART)
                                         for d in message.defects):
        raise _bad("Cannot parse the multipart/form-data payload: no opening or closing "
                   "boundary.")
    fields: dict[str, bytes] = {}
    for part in message.get_payload():
        if part.is_multipart():
            raise _bad("Cannot parse the multipart/form-data payload: a nested multipart "
                       "part.")
        if any(isinstance(d, _BROKEN_MULTIPART) for d in part.defects):
            raise _bad("Cannot parse the multipart/form-data payload: bad part header.")
        name = part.get_param("name", header="content-disposition")
        if isinstance(name, tuple):          # RFC 2231: name*=utf-8''...
            name = email.utils.collapse_rfc2231_value(name)
        if not isinstance(name, str):
            raise _bad("Cannot parse the multipart/form-data payload: a part has no name.")
        try:   # the header's bytes, which the parser kept as surrogate escapes, as UTF-8
            name = name.encode("ascii", "surrogateescape").decode("utf-8")
        except UnicodeEncodeError:       # decoded already (RFC 2231)
            pass
        except UnicodeDecodeError:
            raise _bad("A parameter name is not valid UTF-8.") from None
        encoding = str(part.get("content-transfer-encoding", "binary")).strip().lower()
        if encoding not in _TRANSFER_ENCODINGS:
            raise _bad(f"Unsupported Content-Transfer-Encoding '{encoding}' of a "
                       "multipart/form-data part.")
        content = part.get_payload(decode=True)
        if any(isinstance(d, (email.errors.InvalidBase64CharactersDefect,
                              email.errors.InvalidBase64PaddingDefect,
                              email.errors.InvalidBase64LengthDefect))
               for d in part.defects):
            raise _bad("Cannot parse the multipart/form-data payload: bad base64.")
        fields[name] = content if content is not None else b""
    return fields


def read_body(environ: dict, max_bytes: int) -> bytes:
    """The request body (HTTPError 413 when it is over ``max_bytes``)."""
    too_large = HTTPError("413 Request Entity Too Large",
                          f"Request was too large (the limit is {max_bytes} bytes).")
    raw_length = environ.get("CONTENT_LENGTH") or ""
    try:
        length = int(raw_length) if raw_length.strip() else None
    except ValueError:
        raise _bad("Bad Content-Length.") from None
    stream = environ.get("wsgi.input")
    if stream is None:
        return b""
    if length is None:
        if not environ.get("wsgi.input_terminated"):
            return b""
        body = stream.read(max_bytes + 1)
    else:
        if length < 0:
            raise _bad("Bad Content-Length.")
        if length > max_bytes:
            raise too_large
        body = stream.read(length)
    if len(body) > max_bytes:
        raise too_large
    return body


def request_params(environ: dict, max_bytes: int) -> dict[str, str]:
    """The request's parameters: the query string's, overridden by the body's
    (urlencoded or multipart form). HTTPError 400 for anything malformed or not UTF-8."""
    query = environ.get("QUERY_STRING", "")
    # WSGI hands the query string over as latin-1: get its bytes back
    params = _parse_query(_utf8(query.encode("latin-1", "replace"), "query string"),
                          "query string")
    if environ.get("REQUEST_METHOD", "GET") != "POST":
        return params
    body = read_body(environ, max_bytes)
    ctype = environ.get("CONTENT_TYPE", "")
    kind = ctype.split(";", 1)[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        params.update(_parse_query(_utf8(body, "request body"), "request body"))
    elif kind == "multipart/form-data":
        boundary = _header_params("Content-Type", ctype).get_param("boundary")
        if not isinstance(boundary, str):
            raise _bad("Cannot parse the multipart/form-data payload: no boundary.")
        for name, value in parse_multipart(body, boundary).items():
            params[name] = _utf8(value, f"parameter '{name}'")
    elif body:
        raise _bad(f"Unsupported payload Content-Type '{ctype or '<none>'}': use "
                   "application/x-www-form-urlencoded or multipart/form-data.")
    return params


# ----------------------------------------------------------------------------
# input and output formats


def _format_and_options(value: str) -> tuple[str, set[str]]:
    """UDPipe's ``format=option;option`` syntax."""
    name, _, options = value.partition("=")
    return name.strip(), {o.strip() for o in options.split(";") if o.strip()}


_BLANK_BUT_NBSP = re.compile("[^\\S\u00a0]+")


def _check_line(text: str, number: int) -> None:
    from arboreal.io.text import _check_controls

    _check_controls(text, "data", number)


def read_horizontal(text: str) -> list:
    """Sentences of horizontal text: one per non-blank line, tokens separated by
    whitespace; U+00A0 inside a token is a space (UDPipe's convention)."""
    from arboreal.io.sentence import Sentence

    out = []
    for number, line in enumerate(text.split("\n"), 1):
        _check_line(line, number)
        tokens = [t.replace("\u00a0", " ") for t in _BLANK_BUT_NBSP.split(line)
                  if t.strip("\u00a0")]
        if not tokens:
            continue
        s = Sentence.from_columns(tokens, comments=[f"# sent_id = {len(out) + 1}",
                                                    "# text = " + " ".join(tokens)])
        s.line = number
        out.append(s)
    return out


def read_vertical(text: str) -> list:
    """Sentences of vertical text: a token per line (its first tab-separated field),
    blank lines between sentences."""
    from arboreal.io.sentence import Sentence

    out = []
    tokens: list[str] = []
    first = 0

    def close() -> None:
        if tokens:
            s = Sentence.from_columns(tokens, comments=[f"# sent_id = {len(out) + 1}",
                                                        "# text = " + " ".join(tokens)])
            s.line = first
            out.append(s)

    for number, line in enumerate(text.split("\n"), 1):
        _check_line(line, number)
        token = line.split("\t", 1)[0].strip()
        if not line.strip():
            close()
            tokens = []
            continue
        if token:
            if not tokens:
                first = number
            tokens.append(token)
    close()
    return out


def read_conllu_text(text: str) -> list:
    """Sentences of CoNLL-U text (HEAD may be ``_``; trees are not checked)."""
    from arboreal.io.conllu import iter_conllu

    stream = io.BytesIO(text.encode("utf-8"))
    stream.name = "data"
    return list(iter_conllu(stream, allow_missing_heads=True, check_trees=False))


def tokenize_text(tokenizer, text: str, presegmented: bool = False) -> list:
    """Sentences of raw text (paragraphs at blank lines) cut by ``tokenizer``;
    ``presegmented`` (UDPipe's tokenizer option): one sentence per line, never split."""
    from arboreal.io.text import iter_lines, iter_paragraphs

    stream = io.BytesIO(text.encode("utf-8"))
    stream.name = "data"
    if presegmented:
        return list(tokenizer.tokenize_lines(iter_lines(stream)))
    return list(tokenizer.tokenize(iter_paragraphs(stream)))


def _starts_paragraph(s) -> bool:
    return any(c.startswith(("# newpar", "# newdoc")) for c in s.comments)


def _with_paragraphs(sentences: list, lines: Callable[[object], str], paragraphs: bool) -> str:
    out: list[str] = []
    for i, s in enumerate(sentences):
        if paragraphs and i and _starts_paragraph(s):
            out.append("\n")
        out.append(lines(s))
    if paragraphs and sentences:
        out.append("\n")
    return "".join(out)


def _space_after(misc: str) -> bool:
    return "SpaceAfter=No" not in misc.split("|")


def _tokens(s) -> Iterator[tuple[str, bool]]:
    """(surface token, whether a space follows it) of a sentence: multiword tokens as
    their range lines give them, empty nodes left out."""
    ranges: dict[int, tuple[int, str, str]] = {}
    for _, line in s.extra:
        cols = line.split("\t")
        first, dash, last = cols[0].partition("-")
        if dash and first.isdigit() and last.isdigit() and len(cols) >= 10:
            ranges[int(first)] = (int(last), cols[1], cols[9])
    n = len(s)
    i = 1
    while i <= n:
        if i in ranges and ranges[i][0] >= i:
            last, form, misc = ranges[i]
            yield form, _space_after(misc)
            i = last + 1
        else:
            yield str(s.forms[i]), _space_after(str(s.misc[i]))
            i += 1


def format_output(sentences: list, output: str) -> str:
    """The text of ``sentences`` in an output format (``format=options`` syntax)."""
    name, options = _format_and_options(output)
    paragraphs = "paragraphs" in options
    if name == "conllu":
        from arboreal.io.conllu import format_conllu

        return format_conllu(sentences)
    if name == "horizontal":
        return _with_paragraphs(
            sentences, lambda s: " ".join(str(f).replace(" ", "\u00a0")
                                          for f in s.forms[1:].tolist()) + "\n", paragraphs)
    if name == "vertical":
        return _with_paragraphs(
            sentences, lambda s: "".join(f"{f}\n" for f in s.forms[1:].tolist()) + "\n",
            paragraphs)
    if name == "plaintext":
        out: list[str] = []
        for i, s in enumerate(sentences):
            if i and _starts_paragraph(s):
                out.append("\n")
            out.append("".join(form + (" " if space else "") for form, space in _tokens(s))
                       .rstrip(" ") + "\n")
        return "".join(out)
    raise _bad(f"Unknown output format '{output}'.")


# ----------------------------------------------------------------------------
# the application


def too_many_words(words: int, max_words: int) -> HTTPError:
    """The 413 answer to a request of ``words`` words, over ``max_words``."""
    return HTTPError("413 Request Entity Too Large",
                     f"The data has {words} words; this server takes at most {max_words} "
                     "words per request (--max-words): send the text in parts.")


def process(served: ServedModel, params: dict[str, str], max_words: int | None = None) -> str:
    """The ``result`` of a ``/process`` request for ``served`` (HTTPError 400 for a
    request the model cannot serve or malformed input; 413 when the input has more
    than ``max_words`` words, counted once read or tokenized, before tagging and
    parsing)."""
    from arboreal.models.pipeline import complete_tags

    model = served.model
    if "data" not in params:
        raise _bad("Required argument 'data' is missing.")
    data = unicodedata.normalize("NFC", params["data"])
    input_name, _ = _format_and_options(params.get("input", "conllu") or "conllu")
    tokenize = "tokenizer" in params or input_name == "tokenizer"
    if not tokenize and input_name not in INPUT_FORMATS:
        raise _bad(f"Unknown input format '{params['input']}'.")
    tag = "tagger" in params and params["tagger"] != "none"
    parse = "parser" in params and params["parser"] != "none"
    output = params.get("output", "conllu") or "conllu"
    if _format_and_options(output)[0] not in OUTPUT_FORMATS:
        raise _bad(f"Unknown output format '{output}'.")
    if tokenize and getattr(model, "tokenizer", None) is None:
        raise _bad("The required model does not contain a tokenizer!")
    if tag and not getattr(model, "tag_columns", ()):
        raise _bad("The required model does not contain a tagger!")
    if not data.strip():
        return format_output([], output)
    try:
        with served.lock:
            if tokenize:
                options = _format_and_options(params.get("tokenizer", ""))[1] | \
                    {params.get("tokenizer", "").strip()}
                sentences = tokenize_text(model.tokenizer, data, "presegmented" in options)
            elif input_name == "horizontal":
                sentences = read_horizontal(data)
            elif input_name == "vertical":
                sentences = read_vertical(data)
            else:
                sentences = read_conllu_text(data)
            words = sum(len(s) for s in sentences)
            if max_words is not None and words > max_words:
                raise too_many_words(words, max_words)
            if tag:
                sentences = complete_tags(model, sentences, retag=True)
            if parse and sentences:
                sentences = model.parse(sentences, retag=False)
    except ArborealError as exc:
        raise _bad(f"Cannot process the input data: {exc}") from None
    return format_output(sentences, output)


def _plain(start_response, status: str, message: str,
           headers: list[tuple[str, str]] | None = None) -> list[bytes]:
    body = message.encode("utf-8")
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"),
                            ("Content-Length", str(len(body))),
                            ("Access-Control-Allow-Origin", "*")] + (headers or []))
    return [body]


def _json(start_response, value: object) -> list[bytes]:
    body = json.dumps(value, ensure_ascii=False, indent=1).encode("utf-8") + b"\n"
    start_response("200 OK", [("Content-Type", "application/json; charset=utf-8"),
                              ("Content-Length", str(len(body))),
                              ("Access-Control-Allow-Origin", "*")])
    return [body]


def _application(listing: dict, process_request: Callable) -> Callable:
    """The WSGI application: ``/`` and ``/models`` (``listing``) answered here,
    ``/process`` by ``process_request(environ, start_response)``; HTTPError and
    unexpected errors turned into plain-text answers."""

    def handle(environ: dict, start_response) -> list[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "") or "/"
        if method not in ("GET", "HEAD", "POST"):
            raise HTTPError("405 Method Not Allowed", "Requested method is not allowed.",
                            [("Allow", "GET, HEAD, POST")])
        if path == "/":
            return _plain(start_response, "200 OK", USAGE)
        if path == "/models":
            return _json(start_response, listing)
        if path != "/process":
            raise HTTPError("404 Not Found", f"No handler for the URL '{path}': use "
                            "/models or /process.")
        return process_request(environ, start_response)

    def app(environ: dict, start_response) -> list[bytes]:
        try:
            return handle(environ, start_response)
        except HTTPError as exc:
            return _plain(start_response, exc.status, exc.message, exc.headers)
        except MemoryError:
            return _plain(start_response, "500 Internal Server Error",
                          "Out of memory while processing the request.\n")
        except Exception:
            logging.getLogger(__name__).error(
                "internal error while serving %s %s:", environ.get("REQUEST_METHOD"),
                environ.get("PATH_INFO"), exc_info=True)
            return _plain(start_response, "500 Internal Server Error",
                          "An internal error occurred during processing.\n")

    app.listing = listing          # type: ignore[attr-defined]
    return app


def make_app(models: dict[str, object], default_model: str | None = None,
             max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
             acknowledgements: Iterable[str] = (), max_words: int | None = None) -> Callable:
    """The WSGI application serving ``models`` (name -> loaded model, in the order
    ``/models`` lists them) with UDPipe's REST API (see the module docstring), in this
    process (requests for one model take turns).

    ``default_model``: the name used when a request names none (default: the first).
    ``max_request_bytes``: larger request bodies are answered 413.
    ``acknowledgements``: the list every ``/process`` answer carries.
    ``max_words``: requests whose data has more words are answered 413 (None: no limit).
    ``app.listing`` is the ``/models`` answer; ``app.models`` the served models.
    """
    if not models:
        raise ValueError("no models to serve")
    served = {name: m if isinstance(m, ServedModel) else ServedModel(name, m)
              for name, m in models.items()}
    table = _model_table(served)
    default = default_model if default_model is not None else next(iter(served))
    if default not in table:
        raise ArborealError(f"--default-model {default!r} is none of the models served "
                            f"({', '.join(served)})")
    default_served = table[default]
    acks = list(acknowledgements)
    listing = {"models": {name: s.components for name, s in served.items()},
               "default_model": default_served.name}

    def process_request(environ: dict, start_response) -> list[bytes]:
        params = request_params(environ, max_request_bytes)
        name = params.get("model", "")
        chosen = table.get(name) if name else default_served
        if chosen is None:
            raise _bad(f"Requested model '{name}' does not exist.")
        result = process(chosen, params, max_words)
        return _json(start_response, {"model": chosen.name, "acknowledgements": acks,
                                      "result": result})

    app = _application(listing, process_request)
    app.models = served            # type: ignore[attr-defined]
    #: the highest order of the parsers served (the large lane's sentence limit)
    app.order = max(int(getattr(s.model, "order", 1) or 1) for s in served.values())  # type: ignore[attr-defined]
    return app


#: a request whose data has more words than this is large (a lane of its own, see
#: :mod:`arboreal.server_workers`): about the words of the byte threshold's 16 KiB
LARGE_REQUEST_WORDS = 2500
#: ... and so is one with a sentence longer than this, by the parser's order (decoding
#: costs n^3 at order 1 and more above: one 5,000-word sentence of one-letter words in
#: a 10 KB body held a worker for about 30 s)
LONG_SENTENCE_WORDS = {1: 400, 2: 150, 3: 100}
_CONLLU_WORD = re.compile(r"^(\d+)\t", re.M)
_TEXT_SENTENCE_END = re.compile(r"(?<=[.!?\u3002\u0964])\s+|\n[^\S\n]*\n")


def request_work(request: tuple, max_bytes: int = DEFAULT_MAX_REQUEST_BYTES
                 ) -> tuple[int, int]:
    """``(words, longest sentence)`` of a ``/process`` request ``(method, query string,
    content type, body)``, estimated from its data without a model: whitespace-separated
    tokens; sentences the lines of ``horizontal``, the blank-line blocks of ``vertical``
    and CoNLL-U (the largest word ID), and for text to tokenize the stretches between
    sentence-final punctuation or blank lines. (0, 0) for a request that cannot be read
    (its worker answers 400 at once). O(bytes)."""
    method, query, ctype, body = request
    environ = {"REQUEST_METHOD": method, "QUERY_STRING": query, "CONTENT_TYPE": ctype,
               "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body)}
    try:
        params = request_params(environ, max_bytes)
    except HTTPError:
        return 0, 0
    data = params.get("data", "")
    name, _ = _format_and_options(params.get("input", "conllu") or "conllu")
    if "tokenizer" in params or name == "tokenizer":
        pieces = _TEXT_SENTENCE_END.split(data)
    elif name == "horizontal":
        pieces = data.split("\n")
    elif name == "vertical":
        return len(data.split("\n")), max((len(b.split("\n")) for b in
                                          re.split(r"\n[^\S\n]*\n", data)), default=0)
    else:
        ids = [int(m) for m in _CONLLU_WORD.findall(data)]
        return len(ids), max(ids, default=0)
    lengths = [len(p.split()) for p in pieces]
    return sum(lengths), max(lengths, default=0)


def is_large_request(request: tuple, order: int = 1,
                     max_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> bool:
    """Whether a ``/process`` request goes to the large lane by its work: more than
    :data:`LARGE_REQUEST_WORDS` words, or a sentence longer than
    :data:`LONG_SENTENCE_WORDS` of the parser's ``order``."""
    words, longest = request_work(request, max_bytes)
    limit = LONG_SENTENCE_WORDS.get(order, min(LONG_SENTENCE_WORDS.values()))
    return words > LARGE_REQUEST_WORDS or longest > limit


def make_pool_app(pool, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> Callable:
    """The WSGI application of ``arboreal serve``: ``/process`` requests handed to the
    worker processes of ``pool`` (:class:`arboreal.server_workers.WorkerPool`, started),
    which answer them as :func:`make_app` does; ``/`` and ``/models`` answered here.
    The body is read here (413 over ``max_request_bytes``) and parsed in the worker."""

    def process_request(environ: dict, start_response) -> list[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        body = read_body(environ, max_request_bytes) if method == "POST" else b""
        request = (method, environ.get("QUERY_STRING", ""), environ.get("CONTENT_TYPE", ""),
                   body)
        size = len(body) + len(request[1])
        large = size > pool.large_bytes or is_large_request(
            request, getattr(pool, "order", 1), max_request_bytes)
        status, headers, answer = pool.run(request, size, large)
        start_response(status, headers)
        return [answer]

    return _application(pool.listing, process_request)


# ----------------------------------------------------------------------------
# the server


def _in_flight_counter(app: Callable) -> tuple[Callable, Callable[[], int]]:
    """``app`` wrapped to count the requests it is answering, and the count."""
    lock = threading.Lock()
    count = [0]

    def counted(environ, start_response):
        with lock:
            count[0] += 1
        try:
            return app(environ, start_response)
        finally:
            with lock:
                count[0] -= 1

    return counted, lambda: count[0]


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


@dataclass
class ConnectionLimits:
    """What one connection, and one client, may hold of the server (``arboreal serve``
    options of the same names): at most ``connections`` open at once (fewer where the
    process's open-file limit is lower), ``per_client`` of them from one address; a
    keep-alive connection idle for ``idle_timeout`` seconds is closed, and so is one
    whose request's headers have not all come ``header_timeout`` seconds after its
    first byte, or whose whole request has not come after ``request_timeout``. Once
    the open connections reach nine tenths of ``connections``, the longest idle ones
    are closed first, down to eight tenths; a client at ``per_client`` that opens
    another loses its longest idle one, or the new one if none is idle."""

    connections: int = 1000
    per_client: int = 64
    idle_timeout: float = 10.0
    header_timeout: float = 10.0
    request_timeout: float = 60.0

    def effective_connections(self) -> int:
        """``connections``, or fewer to stay under the open-file limit (raised to the
        hard limit where it is lower than needed)."""
        try:
            import resource

            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            want = self.connections + FILE_HEADROOM
            if soft != resource.RLIM_INFINITY and soft < want:
                new = want if hard == resource.RLIM_INFINITY else min(want, hard)
                resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
                soft = new
            if soft != resource.RLIM_INFINITY:
                return max(1, min(self.connections, soft - FILE_HEADROOM))
        except (ImportError, ValueError, OSError):
            pass
        return self.connections


#: files a server keeps open besides its connections (models, workers' pipes, logs)
FILE_HEADROOM = 64
#: how often the connection guard looks at every connection (seconds)
GUARD_INTERVAL = 0.25


def _guarded_channel(base, limits: ConnectionLimits, clients: dict):
    """waitress's channel class, counting connections per client address and refusing
    (or making room for) one past ``limits.per_client``."""

    class GuardedChannel(base):
        def __init__(self, server, sock, addr, adj, map=None):
            super().__init__(server, sock, addr, adj, map)
            self.client = addr[0] if isinstance(addr, tuple) and addr else str(addr)
            self.request_started = None
            mine = clients.setdefault(self.client, set())
            if len(mine) >= limits.per_client:
                idle = [ch for ch in mine if _idle(ch) and not ch.will_close]
                if idle:
                    min(idle, key=lambda ch: ch.last_activity).will_close = True
                else:
                    self.will_close = True          # closed before anything is read
                    self.close_when_flushed = True
            mine.add(self)

        def received(self, data):
            if self.request is None and data:
                self.request_started = time.monotonic()
            return super().received(data)

        def del_channel(self, map=None):
            clients.get(self.client, set()).discard(self)
            if not clients.get(self.client, True):
                clients.pop(self.client, None)
            return super().del_channel(map)

    return GuardedChannel


def _idle(ch) -> bool:
    """A connection with no request being read, queued, answered or written back."""
    return ch.request is None and not ch.requests and not ch.total_outbufs_len


def guard_connections(channels: list, limits: ConnectionLimits, limit: int,
                      now: float | None = None) -> int:
    """Mark for closing the connections past their timeouts and, near ``limit`` open
    connections, the longest idle ones (see :class:`ConnectionLimits`); returns how
    many. Only connections without a request being answered are closed (a closing
    connection is closed by waitress's loop, the next time it may write)."""
    now = time.monotonic() if now is None else now
    wall = time.time()
    closed = 0
    idle = []
    for ch in channels:
        if ch.will_close or ch.requests or ch.total_outbufs_len:
            continue
        started = getattr(ch, "request_started", None)
        if ch.request is None:
            if wall - ch.last_activity > limits.idle_timeout:
                ch.will_close = True
                closed += 1
            else:
                idle.append(ch)
        elif started is not None and (
                now - started > limits.request_timeout
                or (not ch.request.headers_finished and now - started > limits.header_timeout)):
            ch.will_close = True
            closed += 1
    open_now = sum(1 for ch in channels if not ch.will_close)
    if open_now >= 0.9 * limit:
        idle.sort(key=lambda ch: ch.last_activity)
        for ch in idle[:max(0, open_now - int(0.8 * limit))]:
            ch.will_close = True
            closed += 1
    return closed


def serve(app: Callable, host: str = "127.0.0.1", port: int = DEFAULT_PORT, threads: int = 4,
          max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
          on_ready: Callable[[list[str]], None] | None = None,
          log: Callable[[str], None] | None = None,
          grace: float = SHUTDOWN_GRACE_SECONDS,
          limits: ConnectionLimits | None = None) -> int:
    """Serve the WSGI ``app`` with waitress until SIGINT or SIGTERM (main thread only).

    ``on_ready(urls)`` is called once the server listens (``port=0``: a free port is
    chosen). On the first signal the server stops accepting connections, lets the
    requests in progress be answered (at most ``grace`` seconds; a second signal cuts
    this short), closes every connection and returns 0. ``limits``: what connections
    and clients may hold (:class:`ConnectionLimits`, enforced every
    :data:`GUARD_INTERVAL` seconds), so that idle keep-alive connections, slow headers
    and one client's flood cannot lock other clients out. ArborealError when the
    address cannot be listened on; ImportError without waitress.
    """
    from waitress import wasyncore
    from waitress.channel import HTTPChannel
    from waitress.server import BaseWSGIServer, create_server

    limits = limits or ConnectionLimits()
    limit = limits.effective_connections()
    counted, in_flight = _in_flight_counter(app)
    socket_map: dict = {}
    try:
        # waitress refuses bodies of max_request_body_size bytes or more (413); its own
        # inactivity timeout is the longest of ours (the guard closes sooner)
        server = create_server(counted, map=socket_map, host=host, port=port, threads=threads,
                               max_request_body_size=max_request_bytes + 1,
                               ident="arboreal", connection_limit=limit,
                               channel_timeout=int(max(limits.idle_timeout,
                                                       limits.request_timeout)) + 1,
                               cleanup_interval=max(1, int(limits.idle_timeout / 2)),
                               expose_tracebacks=False)
    except OSError as exc:
        raise ArborealError(f"cannot listen on {host}:{port}: "
                            f"{exc.strerror or exc}") from None
    listeners = [d for d in socket_map.values() if isinstance(d, BaseWSGIServer)]
    clients: dict = {}
    for d in listeners:
        d.channel_class = _guarded_channel(d.channel_class, limits, clients)
    urls = [_url(str(d.effective_host), int(d.effective_port)) for d in listeners]
    next_guard = [time.monotonic() + GUARD_INTERVAL]

    def guard() -> None:
        now = time.monotonic()
        if now >= next_guard[0]:
            next_guard[0] = now + GUARD_INTERVAL
            guard_connections([ch for ch in list(socket_map.values())
                               if isinstance(ch, HTTPChannel)], limits, limit, now)

    signals = [0]

    def on_signal(signum, frame) -> None:
        signals[0] += 1

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if on_ready is not None:
            on_ready(urls)
        while not signals[0]:
            wasyncore.loop(timeout=GUARD_INTERVAL, map=socket_map, use_poll=True, count=1)
            guard()
        # stop accepting, then let the requests in progress be answered
        for d in listeners:
            wasyncore.dispatcher.close(d)
        deadline = time.monotonic() + grace

        def busy() -> bool:
            return bool(in_flight()) or any(
                isinstance(ch, HTTPChannel)
                and bool(ch.requests or ch.request is not None or ch.total_outbufs_len)
                for ch in list(socket_map.values()))

        while signals[0] < 2 and time.monotonic() < deadline and busy():
            wasyncore.loop(timeout=0.05, map=socket_map, use_poll=True, count=1)
        abandoned = in_flight()
        server.task_dispatcher.shutdown(cancel_pending=True, timeout=1 if abandoned else 5)
        wasyncore.close_all(socket_map)
        if log is not None:
            log("arboreal: stopped" + (f" ({abandoned} request(s) abandoned)" if abandoned
                                       else ""))
    except BaseException:
        server.task_dispatcher.shutdown(cancel_pending=True, timeout=1)
        wasyncore.close_all(socket_map)
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
