"""The worker processes of ``arboreal serve`` (arboreal.server_workers): a long request
leaves a worker to short ones, small requests go first, a full queue is answered 503
with Retry-After, the time budget stops a request and replaces its worker, a worker
that dies is replaced, large requests run at a lower CPU priority.

The workers run a stand-in application (tests/_serve_fakes.py) that blocks until the
test releases it: every ordering here comes from a handshake (a file the worker
creates, a FIFO the test opens, the pool's own counters), never from sleeping;
timeouts only bound a hang."""
from __future__ import annotations

import io
import os
import sys
import threading
import time
from functools import partial
from pathlib import Path

import pytest

from arboreal.server import make_pool_app
from arboreal.server_workers import RETRY_AFTER_SECONDS, WorkerPool

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _serve_fakes  # noqa: E402

HANG = 120   # seconds: only a bound on a hang, never reached when the code works
pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + HANG
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


class Scenario:
    """A pool of workers running the stand-in application on folder ``folder``."""

    def __init__(self, folder: Path, workers: int, **options):
        self.folder = folder
        self.pool = WorkerPool(partial(_serve_fakes.make_app, str(folder)), workers,
                               large_bytes=100, **options)
        self.pool.start(timeout=HANG)
        self.answers: dict[str, tuple] = {}
        self.threads: dict[str, threading.Thread] = {}

    def request(self, ident: str, do: str = "echo", large: bool = False) -> tuple:
        """Answer of one request, in this thread: (status, headers, body) or the
        HTTPError raised."""
        if do == "block":
            os.mkfifo(self.folder / f"release-{ident}")
        body = b"x" * (200 if large else 10)
        try:
            return self.pool.run(("POST", f"do={do}&id={ident}", "text/plain", body),
                                 len(body))
        except Exception as exc:   # HTTPError: looked at by the test
            return exc

    def send(self, ident: str, do: str = "echo", large: bool = False) -> None:
        """The same request in a thread of its own."""
        thread = threading.Thread(
            target=lambda: self.answers.__setitem__(ident, self.request(ident, do, large)))
        self.threads[ident] = thread
        thread.start()

    def started(self, ident: str) -> None:
        wait_until(lambda: (self.folder / f"started-{ident}").exists(), f"{ident} to start")

    def waiting(self, count: int) -> None:
        wait_until(lambda: self.pool.stats()["waiting"] == count, f"{count} waiting")

    def release(self, ident: str) -> None:
        with open(self.folder / f"release-{ident}", "wb"):
            pass

    def answer(self, ident: str):
        self.threads[ident].join(HANG)
        assert not self.threads[ident].is_alive(), f"{ident} was not answered"
        return self.answers[ident]

    def order(self) -> list[str]:
        path = self.folder / "order"
        return path.read_text().split() if path.exists() else []

    def close(self) -> None:
        self.pool.close()


@pytest.fixture
def scenario(tmp_path):
    made: list[Scenario] = []

    def make(workers: int, **options) -> Scenario:
        made.append(Scenario(tmp_path, workers, **options))
        return made[-1]

    yield make
    for s in made:
        s.close()


def status(answer) -> int:
    if isinstance(answer, Exception):
        return int(answer.status.split()[0])
    return int(answer[0].split()[0])


def test_a_long_request_leaves_a_worker_to_short_ones(scenario):
    s = scenario(2)
    s.send("long1", "block", large=True)
    s.started("long1")
    s.send("long2", "echo", large=True)
    s.waiting(1)            # the second long request may not take the last worker
    answer = s.request("short")          # answered while long1 still runs
    assert status(answer) == 200 and answer[2].startswith(b"short ")
    assert s.threads["long1"].is_alive() and "long2" not in s.answers
    s.release("long1")
    assert status(s.answer("long1")) == 200 and status(s.answer("long2")) == 200
    assert s.order() == ["short", "long1", "long2"]


def test_small_requests_go_first(scenario):
    s = scenario(1)
    s.send("first", "block")
    s.started("first")
    s.send("large", "echo", large=True)
    s.waiting(1)
    s.send("small", "echo")
    s.waiting(2)
    s.release("first")
    assert all(status(s.answer(i)) == 200 for i in ("first", "large", "small"))
    assert s.order() == ["first", "small", "large"]


def test_a_full_queue_is_503_with_retry_after(scenario):
    s = scenario(1, max_queue=1)
    s.send("running", "block")
    s.started("running")
    s.send("queued")
    s.waiting(1)
    # the third request, through the WSGI application: 503 at once, with Retry-After
    app = make_pool_app(s.pool)
    seen: dict = {}
    body = b"".join(app({"REQUEST_METHOD": "GET", "PATH_INFO": "/process",
                         "QUERY_STRING": "do=echo&id=third", "wsgi.input": io.BytesIO()},
                        lambda st, headers, exc_info=None: seen.update(st=st, h=dict(headers))))
    assert seen["st"] == "503 Service Unavailable"
    assert seen["h"]["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert b"busy" in body and b"1 requests are waiting" in body
    s.release("running")
    assert status(s.answer("running")) == 200 and status(s.answer("queued")) == 200
    assert s.order() == ["running", "queued"]


def test_the_time_budget_stops_a_request_and_replaces_its_worker(scenario):
    s = scenario(1, max_seconds=1)
    answer = s.request("stuck", "block")    # never released: stopped by the budget
    assert status(answer) == 503 and "took longer" in answer.message
    assert ("Retry-After", str(RETRY_AFTER_SECONDS)) in answer.headers
    wait_until(lambda: s.pool.stats()["idle"] == 1, "the new worker")
    assert s.pool.stats()["replaced"] == 1
    s.pool.max_seconds = HANG               # the next request is not about the budget
    assert status(s.request("after")) == 200
    assert s.order() == ["after"]


def test_the_time_budget_counts_the_wait(scenario):
    s = scenario(1, max_seconds=HANG)
    s.send("running", "block")
    s.started("running")
    s.pool.max_seconds = 1     # for the next request: the only worker stays busy past it
    answer = s.request("waiting")
    assert status(answer) == 503 and "waited 1 s" in answer.message
    s.release("running")
    assert status(s.answer("running")) == 200
    assert s.order() == ["running"]


def test_a_dead_worker_is_503_and_replaced(scenario):
    s = scenario(2)
    answer = s.request("boom", "die")
    assert status(answer) == 503 and "stopped unexpectedly" in answer.message
    wait_until(lambda: s.pool.stats()["idle"] == 2, "the new worker")
    assert [status(s.request(f"ok{i}")) for i in range(3)] == [200] * 3


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread priorities: Linux")
def test_large_requests_run_at_a_lower_priority(scenario):
    s = scenario(2)
    small = int(s.request("small")[2].split()[1])
    large = int(s.request("large", large=True)[2].split()[1])
    assert large == min(19, small + 10)
    assert int(s.request("small-again")[2].split()[1]) == small


@pytest.mark.skipif(not hasattr(os, "setsid"), reason="sessions: POSIX")
def test_each_worker_is_a_session_of_its_own(scenario):
    s = scenario(2)
    s.send("held", "block")
    s.started("held")                   # the other worker answers the next ones
    _, _, pid, sid = s.request("free")[2].split()
    assert int(sid) == int(pid) != os.getsid(0)
    s.release("held")
    _, _, pid2, sid2 = s.answer("held")[2].split()
    assert int(sid2) == int(pid2) != int(pid)


def test_a_worker_that_cannot_start_is_an_error(tmp_path):
    from arboreal.errors import ArborealError
    from arboreal.server_workers import load_app

    bad = tmp_path / "bad.model"
    bad.write_bytes(b"not a model")
    pool = WorkerPool(partial(load_app, [("bad", str(bad))], None, 1000, None), 1)
    with pytest.raises(ArborealError, match="bad.model"):
        pool.start(timeout=HANG)
    pool.close()
