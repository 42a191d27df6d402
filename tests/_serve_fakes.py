"""A stand-in application for the server's worker processes (tests/test_serve_workers.py):
it answers at once, blocks until the test lets it go, or dies, as the request asks, so
that the tests order events by handshakes (files and FIFOs in a folder they share with
the workers), never by sleeping."""
from __future__ import annotations

import os
import threading
import urllib.parse
from pathlib import Path

LISTING = {"models": {"fake": ["parser"]}, "default_model": "fake"}


def make_app(folder: str):
    """A WSGI application for ``/process?do=ACTION&id=ID``:

    - ``echo``: 200 with ``ID NICE PID SID`` (the nice value of the answering thread,
      the worker's process and session ids), ID also appended to ``folder/order`` (the
      order the worker ran requests in);
    - ``block``: creates ``folder/started-ID``, then waits until the test opens the FIFO
      ``folder/release-ID`` for writing and closes it; then as ``echo``;
    - ``die``: the worker process exits at once.
    """
    base = Path(folder)

    def app(environ, start_response):
        query = dict(urllib.parse.parse_qsl(environ.get("QUERY_STRING", "")))
        action, ident = query.get("do", "echo"), query.get("id", "")
        if action == "die":
            os._exit(3)
        if action == "block":
            (base / f"started-{ident}").touch()
            with open(base / f"release-{ident}", "rb") as fifo:
                fifo.read()
        with open(base / "order", "a", encoding="utf-8") as f:
            f.write(ident + "\n")
        nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        body = f"{ident} {nice} {os.getpid()} {os.getsid(0)}".encode()
        start_response("200 OK", [("Content-Type", "text/plain"),
                                  ("Content-Length", str(len(body)))])
        return [body]

    app.listing = LISTING
    return app
