"""``arboreal serve``: serve models over HTTP with UDPipe's REST API (arboreal.server)."""
from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import re
from pathlib import Path

from arboreal.cli._args import int_in
from arboreal.cli._logging import configure_waitress
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
_workers = int_in(1, 256)
_queue = int_in(0, 100_000)
_words = int_in(1)


def _seconds(value: str) -> float:
    try:
        v = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not 0 < v < 1e6:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds: {value!r}")
    return v


_connections = int_in(1, 1_000_000)


def add_parser(subparsers) -> None:
    from arboreal.server import DEFAULT_MAX_REQUEST_BYTES, DEFAULT_PORT, ConnectionLimits
    from arboreal.server_workers import (DEFAULT_MAX_QUEUE, DEFAULT_MAX_SECONDS,
                                         DEFAULT_MAX_WORDS, LARGE_REQUEST_BYTES)

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
                    "requests in progress are answered. Requests are answered by "
                    "--workers processes, each holding the models; a request over "
                    f"{LARGE_REQUEST_BYTES >> 10} KiB or of many words (or one long sentence) never "
                    "takes the last free worker and runs at a lower CPU priority, so long texts do not hold up "
                    "short ones. Needs waitress: pip install 'arboreal[serve]'.")
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
    p.add_argument("--workers", type=_workers, default=None, metavar="N",
                   help="worker processes answering requests, each with its own copy of "
                        "the models (default: one per core, 2 to 4)")
    p.add_argument("--queue", type=_queue, default=DEFAULT_MAX_QUEUE, metavar="K",
                   help="requests that may wait for a worker; more are answered 503 with "
                        f"Retry-After (default: {DEFAULT_MAX_QUEUE})")
    p.add_argument("--max-words", type=_words, default=DEFAULT_MAX_WORDS, metavar="W",
                   help="largest request in words (tokens of the input once read or "
                        f"tokenized); larger ones are answered 413 (default: "
                        f"{DEFAULT_MAX_WORDS:,})")
    p.add_argument("--max-seconds", type=_seconds, default=DEFAULT_MAX_SECONDS, metavar="S",
                   help="time budget of a request from its arrival, waiting included; "
                        "one not answered by then is answered 503 and its worker "
                        f"restarted (default: {DEFAULT_MAX_SECONDS:g})")
    p.add_argument("--threads", type=_threads, default=None,
                   help="HTTP threads (default: workers + queue + 2, so that a full queue "
                        "is answered 503 at once)")
    p.add_argument("--max-request-bytes", type=_size, default=DEFAULT_MAX_REQUEST_BYTES,
                   metavar="SIZE",
                   help="largest request body accepted, like 10M (default: "
                        f"{DEFAULT_MAX_REQUEST_BYTES >> 20}M); larger ones are answered "
                        "413")
    limits = ConnectionLimits()
    p.add_argument("--connection-limit", type=_connections, default=limits.connections,
                   metavar="N",
                   help=f"connections open at once (default {limits.connections}, fewer "
                        "where the open-file limit is lower); near it, the longest idle "
                        "keep-alive connections are closed first")
    p.add_argument("--connections-per-client", type=_connections, default=limits.per_client,
                   metavar="N",
                   help="connections one client address may hold (default "
                        f"{limits.per_client}); one more closes its longest idle one, or "
                        "is refused")
    p.add_argument("--idle-timeout", type=_seconds, default=limits.idle_timeout, metavar="S",
                   help="close a keep-alive connection idle this long (default "
                        f"{limits.idle_timeout:g} s)")
    p.add_argument("--header-timeout", type=_seconds, default=limits.header_timeout,
                   metavar="S",
                   help="close a connection whose request headers have not all come this "
                        f"long after its first byte (default {limits.header_timeout:g} s: "
                        "slow-header clients)")
    p.add_argument("--request-timeout", type=_seconds, default=limits.request_timeout,
                   metavar="S",
                   help="close a connection whose whole request has not come this long "
                        f"after its first byte (default {limits.request_timeout:g} s)")
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
    from functools import partial

    from arboreal.models.names import resolve_model
    from arboreal.server import ConnectionLimits, make_pool_app, serve
    from arboreal.server_workers import WorkerPool, default_workers, load_app

    # names resolved to files here: a missing one is said before the workers start
    specs = [(name, resolve_model(model)) for name, model in model_specs(args.models)]
    workers = args.workers or default_workers()
    log = logging.getLogger(__name__).info
    configure_waitress(verbose=args.verbose)

    pool = WorkerPool(partial(load_app, specs, args.default_model, args.max_request_bytes,
                              args.max_words),
                      workers, max_queue=args.queue, max_seconds=args.max_seconds, log=log)
    try:
        pool.start()
        app = make_pool_app(pool, max_request_bytes=args.max_request_bytes)
        names = list(pool.listing["models"])

        def ready(urls: list[str]) -> None:
            log(f"arboreal: serving {len(names)} model(s) ({', '.join(names)}) on "
                f"{' '.join(urls)} with {workers} worker process"
                f"{'es' if workers > 1 else ''} (Ctrl+C to stop)")

        limits = ConnectionLimits(args.connection_limit, args.connections_per_client,
                                  args.idle_timeout, args.header_timeout, args.request_timeout)
        return serve(app, host=args.host, port=args.port,
                     threads=args.threads or workers + args.queue + 2,
                     max_request_bytes=args.max_request_bytes, on_ready=ready, log=log,
                     limits=limits)
    finally:
        pool.close()
