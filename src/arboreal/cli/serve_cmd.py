"""``arboreal serve``: serve models over HTTP with UDPipe's REST API (arboreal.server)."""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
from pathlib import Path

from arboreal.cli._args import int_in
from arboreal.errors import ArborealError

_SIZE = re.compile(r"(\d+)\s*([kmg]?)(i?b)?", re.IGNORECASE)


def _size(value: str) -> int:
    """A byte count: ``1048576``, ``512K``, ``10M``, ``1GiB``."""
    m = _SIZE.fullmatch(value.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"not a size in bytes (like 10M): {value!r}")
    v = int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 byte: {value!r}")
    return v


_port = int_in(0, 65535, "a port number")
_threads = int_in(1)


def add_parser(subparsers) -> None:
    from arboreal.server import DEFAULT_MAX_REQUEST_BYTES, DEFAULT_PORT

    p = subparsers.add_parser(
        "serve", help="serve models over HTTP with UDPipe's REST API",
        description="Load the models once, then answer HTTP requests with UDPipe's REST "
                    "API (GET/POST /models and /process with data, model, tokenizer, "
                    "tagger, parser, input and output: see "
                    "https://lindat.mff.cuni.cz/services/udpipe/api-reference.php), so "
                    "that UDPipe's clients work unchanged, e.g. curl -F data=@in.txt "
                    "-F tokenizer= -F tagger= -F parser= http://127.0.0.1:8001/process. "
                    "A line 'arboreal: serving ... on URL' on standard error says the "
                    "server is ready; SIGINT (Ctrl+C) or SIGTERM stops it once the "
                    "requests in progress are answered. Needs waitress: "
                    "pip install 'arboreal[serve]'.")
    p.add_argument("models", metavar="MODEL", nargs="+",
                   help="model file written by 'arboreal train', the name of an installed or "
                        "cached model, or NAME=MODEL; the name (default: the file name "
                        "without its extension, or the model's name) is what requests give "
                        "as 'model', and any hyphen-separated prefix of it works too")
    p.add_argument("--default-model", metavar="NAME", default=None,
                   help="the model for requests that name none (default: the first)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: 127.0.0.1, this machine only; "
                        "0.0.0.0 for every interface)")
    p.add_argument("--port", type=_port, default=DEFAULT_PORT,
                   help=f"port to listen on (default: {DEFAULT_PORT}; 0: a free port, "
                        "named in the ready line)")
    p.add_argument("--threads", type=_threads, default=4,
                   help="requests handled at once (default: 4; requests for one model "
                        "take turns)")
    p.add_argument("--max-request-bytes", type=_size, default=DEFAULT_MAX_REQUEST_BYTES,
                   metavar="SIZE",
                   help="largest request body accepted, like 10M (default: "
                        f"{DEFAULT_MAX_REQUEST_BYTES >> 20}M); larger ones are answered "
                        "413")
    p.set_defaults(func=run)


def model_specs(specs: list[str]) -> list[tuple[str, str]]:
    """(name, model) of each MODEL argument: ``NAME=MODEL``, a path (named by its file
    name without the extension) or a model's name (named so). ArborealError for an
    empty or repeated name."""
    from arboreal.models.names import NAME_PATTERN, looks_like_path

    out: list[tuple[str, str]] = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or "/" in name or os.sep in name or os.path.exists(spec):
            name, path = Path(spec).stem, spec
            if not os.path.exists(spec) and not looks_like_path(spec) \
                    and NAME_PATTERN.fullmatch(spec):
                name = spec      # an installed or cached model's name
        if not name or not path:
            raise ArborealError(f"{spec!r}: expected a model file or NAME=PATH")
        if any(name == n for n, _ in out):
            raise ArborealError(f"two models are named {name!r}: name them with NAME=PATH")
        out.append((name, path))
    return out


def load_models(specs: list[tuple[str, str]]) -> dict:
    """name -> loaded model of each ``(name, model)`` of :func:`model_specs`, each model a
    path or a model name (:func:`arboreal.load`)."""
    import arboreal

    return {name: arboreal.load(model) for name, model in specs}


def run(args) -> int:
    if importlib.util.find_spec("waitress") is None:
        raise ArborealError("'arboreal serve' needs waitress: pip install 'arboreal[serve]'")
    from arboreal.server import make_app, serve

    models = load_models(model_specs(args.models))
    app = make_app(models, default_model=args.default_model,
                   max_request_bytes=args.max_request_bytes)

    def ready(urls: list[str]) -> None:
        print(f"arboreal: serving {len(models)} model(s) ({', '.join(models)}) on "
              f"{' '.join(urls)} (Ctrl+C to stop)", file=sys.stderr, flush=True)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    return serve(app, host=args.host, port=args.port, threads=args.threads,
                 max_request_bytes=args.max_request_bytes, on_ready=ready, log=log)
