"""Worker processes of ``arboreal serve``: a bounded queue, a time budget per request,
and a lane for small requests that long ones cannot take.

Why processes and not threads with model replicas: parsing is CPU-bound, and most of
its time is spent in numba kernels compiled without ``nogil`` (Eisner, the arc
scorers) or in Python (reading, the tokenizer, formatting), so threads would take
turns on the GIL; a thread cannot be stopped when a request runs past its time budget,
while a process can be killed and replaced; a process that dies (out of memory, a
crash in a kernel) takes no other request with it; and its priority can be lowered.

**The pool** (:class:`WorkerPool`): ``workers`` processes, each built by calling
``factory()`` once (:func:`load_app`: load the models, make the WSGI application of
:func:`arboreal.server.make_app`, parse a word to load the compiled kernels), then
answering ``(method, query string, content type, body)`` requests with that
application: ``(status, headers, body)``. They are started with the ``spawn`` method
(a fresh interpreter: nothing inherited from the server's threads), each in a session
of its own (see below), ignore SIGINT and SIGTERM (the server stops them once its
requests are answered) and end when the server closes their pipe, including when it
is killed (a worker busy then ends once its request is done).

**Scheduling.** A request of more than ``large_bytes`` bytes (body and query string;
:data:`LARGE_REQUEST_BYTES`, 16 KiB: about 2,500 words of text, or 500 of CoNLL-U), or
whose work is large by its words and its longest sentence for the parser's order
(:func:`arboreal.server.is_large_request`), is *large*. Large requests run on at most ``workers - 1`` workers at once, so that one
worker is always left to small ones (with one worker, it is shared), and in a thread
whose CPU priority is lowered by :data:`LARGE_NICE` (Linux), so that on a machine
with fewer free cores than busy workers the small requests get the CPU first. Where
Linux groups processes by session for CPU time (autogroup scheduling, the default of
desktop distributions), nice values count only within a session: each worker has a
session of its own, so that long requests take CPU time from their own workers'
shares and not from the share of the worker answering a short request. A free
worker takes the oldest waiting small request, then the oldest large one.

**Admission.** At most ``max_queue`` requests wait for a worker; one more is answered
at once ``503 Service Unavailable`` with ``Retry-After`` (:data:`RETRY_AFTER_SECONDS`).

**Time budget.** A request not answered within ``max_seconds`` of its arrival
(waiting included) is answered 503 with the reason; if it was running, its worker is
killed (SIGKILL) and replaced. A worker that dies while it holds a request is
replaced too and the request answered 503. The word budget (413) is the
application's (:func:`arboreal.server.process`).
"""
from __future__ import annotations

import io
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from typing import Callable

from arboreal.errors import ArborealError
from arboreal.server import HTTPError

#: requests with more bytes (body and query string) than this are large
LARGE_REQUEST_BYTES = 16 << 10
#: how much lower the CPU priority of a large request's thread is (nice increment)
LARGE_NICE = 10
#: the Retry-After of a 503 answer, seconds
RETRY_AFTER_SECONDS = 2
#: requests that may wait for a worker by default
DEFAULT_MAX_QUEUE = 64
#: the time budget of a request by default, seconds from its arrival
DEFAULT_MAX_SECONDS = 120.0
#: the word budget of a request by default
DEFAULT_MAX_WORDS = 100_000
#: how long a worker may take to start (imports, models, kernels loaded from the cache)
START_TIMEOUT = 600.0


def default_workers() -> int:
    """2 to 4 workers, one per core: with 2 or more a long request leaves one free."""
    return max(2, min(4, os.cpu_count() or 1))


# ----------------------------------------------------------------------------- a worker


def call_app(app: Callable, request: tuple) -> tuple[str, list, bytes]:
    """``(status, headers, body)`` of WSGI ``app`` for ``request`` = ``(method, query
    string, content type, body)`` of ``/process``."""
    method, query, ctype, body = request
    environ = {"REQUEST_METHOD": method, "SCRIPT_NAME": "", "PATH_INFO": "/process",
               "QUERY_STRING": query, "CONTENT_TYPE": ctype,
               "CONTENT_LENGTH": str(len(body)), "SERVER_NAME": "arboreal",
               "SERVER_PORT": "0", "SERVER_PROTOCOL": "HTTP/1.1",
               "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr,
               "wsgi.version": (1, 0), "wsgi.url_scheme": "http",
               "wsgi.multithread": False, "wsgi.multiprocess": True,
               "wsgi.run_once": False}
    seen: dict = {}

    def start_response(status, headers, exc_info=None):
        seen["status"], seen["headers"] = status, list(headers)

    chunks = app(environ, start_response)
    try:
        out = b"".join(chunks)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    return seen["status"], seen["headers"], out


def _lower_thread_priority(increment: int) -> None:
    """Lower this thread's CPU priority (Linux: a thread's nice value is its own)."""
    if sys.platform.startswith("linux") and hasattr(os, "setpriority"):
        try:
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid,
                           min(19, os.getpriority(os.PRIO_PROCESS, tid) + increment))
        except OSError:
            pass


def _call_lowered(app: Callable, request: tuple) -> tuple:
    """:func:`call_app` in a new thread of lowered priority (the worker's main thread
    keeps its own, for the small requests after this one)."""
    out: list = []

    def target() -> None:
        _lower_thread_priority(LARGE_NICE)
        try:
            out.append(("ok", call_app(app, request)))
        except BaseException as exc:   # handed to the caller below
            out.append(("raise", exc))

    thread = threading.Thread(target=target, name="arboreal-large-request")
    thread.start()
    thread.join()
    kind, value = out[0]
    if kind == "raise":
        raise value
    return value


def _trim_heap() -> None:
    """Give the C heap's free memory back to the system (glibc's ``malloc_trim``),
    after a large request: its arrays are freed, but without this the heap would keep
    the pages, and a worker would stay at the size of the largest request it saw."""
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        _MALLOC_TRIM = False
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                _MALLOC_TRIM = ctypes.CDLL("libc.so.6").malloc_trim
            except (OSError, AttributeError):
                pass
    if _MALLOC_TRIM:
        _MALLOC_TRIM(0)


_MALLOC_TRIM = None


def worker_main(conn, factory: Callable) -> None:
    """A worker process: ``factory()`` once, then answer requests from ``conn`` until
    it sends None or is closed."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    if hasattr(os, "setsid"):
        # a session of its own: where the kernel shares the CPU between sessions first
        # (Linux's autogroup scheduling), a worker busy with a long request then takes
        # its time from its own share, not from that of the worker answering a short one
        try:
            os.setsid()
        except OSError:
            pass
    try:
        app = factory()
    except ArborealError as exc:
        conn.send(("failed", str(exc)))
        return
    except BaseException as exc:   # a bug: say what, the server reports it
        conn.send(("failed", f"{exc.__class__.__name__}: {exc}"))
        return
    conn.send(("ready", getattr(app, "listing", None), getattr(app, "order", 1)))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        request, large = job
        try:
            answer = _call_lowered(app, request) if large else call_app(app, request)
        except BaseException as exc:   # the application answers its own errors: a bug
            answer = ("500 Internal Server Error",
                      [("Content-Type", "text/plain; charset=utf-8")],
                      f"An internal error occurred during processing: "
                      f"{exc.__class__.__name__}\n".encode())
        if large:
            _trim_heap()
        try:
            conn.send(answer)
        except (BrokenPipeError, OSError):
            return


def load_app(specs: list[tuple[str, str]], default_model: str | None, max_request_bytes: int,
             max_words: int | None) -> Callable:
    """A worker's application: the models of ``specs`` ((name, path) pairs) loaded and
    served by :func:`arboreal.server.make_app`, each run once on a short and a long
    sentence, so that no request waits for compiled kernels to load (and the worker's
    memory is at its working size from the start)."""
    from arboreal.models import load_model
    from arboreal.server import make_app, process

    app = make_app({name: load_model(path) for name, path in specs},
                   default_model=default_model, max_request_bytes=max_request_bytes,
                   max_words=max_words)
    # a short sentence and one past the long-sentence decoder's threshold (400 words)
    long_sentence = " ".join(["word", "and", "the", "word", "."] * 100)
    for served in app.models.values():
        for data in ("Hello .", long_sentence):
            params = {"data": data, "input": "horizontal", "parser": ""}
            if "tagger" in served.components:
                params["tagger"] = ""
            try:
                process(served, params)
            except HTTPError:   # a parser that needs tags it cannot predict: no warm-up
                break
    return app


# -------------------------------------------------------------------------------- pool


class _Worker:
    """A worker process and the server's end of its pipe."""

    def __init__(self, context, factory: Callable, number: int):
        self.number = number
        parent, child = context.Pipe()
        self.process = context.Process(target=worker_main, args=(child, factory),
                                       name=f"arboreal-serve-worker-{number}", daemon=True)
        self.process.start()
        child.close()
        self.conn = parent

    def ready(self, timeout: float):
        """The worker's listing once started; ArborealError if it failed."""
        try:
            if not self.conn.poll(timeout):
                raise ArborealError(f"a server worker did not start within {timeout:.0f} s")
            message = self.conn.recv()
            kind, value = message[0], message[1]
            #: the highest parser order of the worker's models
            self.order = message[2] if len(message) > 2 else 1
        except (EOFError, OSError, ValueError):   # ValueError: closed by close()
            raise ArborealError(f"a server worker stopped while starting (exit status "
                                f"{self.process.exitcode})") from None
        if kind != "ready":
            raise ArborealError(value)
        return value

    def kill(self) -> None:
        try:
            self.process.kill()
        except (OSError, ValueError):
            pass
        self.process.join(30)
        self.conn.close()


def _busy(message: str) -> HTTPError:
    return HTTPError("503 Service Unavailable", message,
                     [("Retry-After", str(RETRY_AFTER_SECONDS))])


class WorkerPool:
    """``workers`` worker processes built by ``factory`` (see the module docstring);
    :meth:`start`, then :meth:`run` from any thread, then :meth:`close`."""

    def __init__(self, factory: Callable, workers: int, max_queue: int = DEFAULT_MAX_QUEUE,
                 max_seconds: float = DEFAULT_MAX_SECONDS,
                 large_bytes: int = LARGE_REQUEST_BYTES,
                 log: Callable[[str], None] | None = None):
        if workers < 1:
            raise ValueError("a pool needs at least one worker")
        self.factory = factory
        self.workers = int(workers)
        self.max_queue = int(max_queue)
        self.max_seconds = float(max_seconds)
        self.large_bytes = int(large_bytes)
        self.large_cap = max(1, self.workers - 1)
        self.log = log
        self.context = multiprocessing.get_context("spawn")
        self.listing = None
        #: the highest parser order served (set by :meth:`start`)
        self.order = 1
        self.cond = threading.Condition()
        self.idle: list[_Worker] = []
        self.small: deque = deque()
        self.large: deque = deque()
        self.running = 0
        self.large_running = 0
        self.closed = False
        self.replaced = 0
        self._numbers = iter(range(1 << 62))
        self._starting: list[threading.Thread] = []
        #: every worker started and not killed (busy ones included)
        self.alive: set[_Worker] = set()

    # ------------------------------------------------------------------ life cycle
    def start(self, timeout: float = START_TIMEOUT) -> dict:
        """Start every worker and wait for them; the ``/models`` listing. ArborealError
        (the workers stopped) when one cannot start, e.g. a bad model file."""
        started = [_Worker(self.context, self.factory, next(self._numbers))
                   for _ in range(self.workers)]
        try:
            for worker in started:
                self.listing = worker.ready(timeout)
                self.order = worker.order
        except BaseException:
            for worker in started:
                worker.kill()
            raise
        with self.cond:
            self.idle.extend(started)
            self.alive.update(started)
        return self.listing

    def close(self, timeout: float = 10.0) -> None:
        """Stop the workers: idle ones are asked to end, busy ones are killed."""
        with self.cond:
            self.closed = True
            idle, self.idle = self.idle, []
            busy = self.alive.difference(idle)
            self.cond.notify_all()
        for worker in busy:
            worker.kill()
        for worker in idle:
            try:
                worker.conn.send(None)
            except OSError:
                pass
        deadline = time.monotonic() + timeout
        for worker in idle:
            worker.process.join(max(0.0, deadline - time.monotonic()))
            worker.kill()
        for thread in list(self._starting):
            thread.join(timeout)

    def _replace(self, worker: _Worker) -> None:
        """Kill ``worker`` and start another in its place (in the background)."""
        worker.kill()
        with self.cond:
            self.alive.discard(worker)
            self.replaced += 1

        def start() -> None:
            fresh = _Worker(self.context, self.factory, next(self._numbers))
            with self.cond:
                stop = self.closed
                if not stop:
                    self.alive.add(fresh)     # killed by close() while it starts
            if stop:
                fresh.kill()
                return
            try:
                fresh.ready(START_TIMEOUT)
            except ArborealError as exc:
                with self.cond:
                    self.alive.discard(fresh)
                    stop = self.closed
                fresh.kill()
                if self.log is not None and not stop:
                    self.log(f"arboreal: a server worker could not be restarted: {exc}")
                return
            with self.cond:
                if not self.closed:
                    self.idle.append(fresh)
                    self.cond.notify_all()
                    return
                self.alive.discard(fresh)
            fresh.kill()

        thread = threading.Thread(target=start, name="arboreal-serve-restart", daemon=True)
        self._starting = [t for t in self._starting if t.is_alive()] + [thread]
        thread.start()

    # ------------------------------------------------------------------- requests
    def stats(self) -> dict:
        """Requests waiting and running now, and workers replaced so far."""
        with self.cond:
            return {"waiting": len(self.small) + len(self.large), "running": self.running,
                    "large_running": self.large_running, "idle": len(self.idle),
                    "replaced": self.replaced}

    def _may_start(self, ticket: object, large: bool) -> bool:
        free = len(self.idle)
        if not large:
            return self.small.index(ticket) < free
        ahead = self.large.index(ticket)
        return len(self.small) + ahead < free and self.large_running + ahead < self.large_cap

    def _acquire(self, large: bool, deadline: float) -> _Worker:
        ticket = object()
        queue = self.large if large else self.small
        with self.cond:
            if self.closed:
                raise _busy("The server is stopping.")
            queue.append(ticket)
            try:
                if not self._may_start(ticket, large) and \
                        len(self.small) + len(self.large) > self.max_queue:
                    raise _busy(f"The server is busy: {self.max_queue} requests are waiting "
                                f"already. Try again in {RETRY_AFTER_SECONDS} s.")
                while not self._may_start(ticket, large):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or self.closed:
                        raise _busy(f"The server is busy: the request waited "
                                    f"{self.max_seconds:g} s (--max-seconds) for a worker. "
                                    f"Try again in {RETRY_AFTER_SECONDS} s.")
                    self.cond.wait(remaining)
                worker = self.idle.pop()
                self.running += 1
                self.large_running += large
                return worker
            finally:
                queue.remove(ticket)
                self.cond.notify_all()

    def _release(self, worker: _Worker | None, large: bool) -> None:
        with self.cond:
            self.running -= 1
            self.large_running -= large
            if worker is not None:
                if self.closed:
                    try:
                        worker.conn.send(None)
                    except OSError:
                        pass
                else:
                    self.idle.append(worker)
            self.cond.notify_all()

    def run(self, request: tuple, size: int, large: bool | None = None
            ) -> tuple[str, list, bytes]:
        """Answer ``request`` (``(method, query string, content type, body)``, ``size``
        bytes) on a worker: ``(status, headers, body)``. ``large``: whether it goes to
        the large lane (None: by its size, over ``large_bytes``; the server decides by
        its words, :func:`arboreal.server.is_large_request`). HTTPError 503 (with
        Retry-After) when the queue is full, the time budget runs out, or the worker
        dies."""
        deadline = time.monotonic() + self.max_seconds
        large = size > self.large_bytes if large is None else bool(large)
        worker = self._acquire(large, deadline)
        keep: _Worker | None = worker
        try:
            try:
                worker.conn.send((request, large))
                if not worker.conn.poll(max(0.0, deadline - time.monotonic())):
                    keep = None
                    self._replace(worker)
                    raise _busy(f"The request took longer than this server allows "
                                f"({self.max_seconds:g} s, --max-seconds); it was stopped. "
                                "Send less text at a time.")
                return worker.conn.recv()
            except (EOFError, OSError):
                keep = None
                self._replace(worker)
                raise _busy("The worker processing the request stopped unexpectedly (out "
                            "of memory?); it is being restarted.") from None
        finally:
            self._release(keep, large)
