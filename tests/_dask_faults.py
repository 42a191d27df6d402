"""Helpers of tests/test_distributed_faults.py: a Dask cluster of separate processes
(scheduler and workers started with Dask's own command line), and a worker plugin that
stops a task in flight so that the test can kill its worker at a known moment."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from distributed.diagnostics.plugin import WorkerPlugin

ROOT = Path(__file__).resolve().parents[1]
HANG = 180   # seconds: a bound on a hang only


class HoldFirstTask(WorkerPlugin):
    """On the first worker that starts a task whose key begins with ``prefix`` (once
    over the whole cluster: the file ``folder/armed`` is renamed by the one that takes
    it): write that worker's process id to ``folder/started``, then block the worker's
    event loop, so that the task's result can never leave the worker. The test kills
    the worker then: the task was running, and had not been answered, at the kill."""

    name = "arboreal-hold-first-task"

    def __init__(self, folder: str, prefix: str):
        self.folder = folder
        self.prefix = prefix

    def transition(self, key, start, finish, **kwargs):
        if finish != "executing":
            return
        name = key[0] if isinstance(key, tuple) else key
        if not str(name).startswith(self.prefix):
            return
        folder = Path(self.folder)
        try:
            os.rename(folder / "armed", folder / "taken")
        except FileNotFoundError:   # another worker, or an earlier task, took it
            return
        tmp = folder / f"started.{os.getpid()}"
        tmp.write_text(json.dumps({"pid": os.getpid(), "key": str(key)}))
        os.rename(tmp, folder / "started")
        threading.Event().wait()    # until the test kills this process


def environment(**dask_config: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests"),
                                         env.get("PYTHONPATH", "")])
    env["DASK_LOGGING__DISTRIBUTED"] = "critical"
    for key, value in dask_config.items():
        env[f"DASK_{key}"] = value
    return env


def wait_for(condition, what: str, timeout: float = HANG):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class ProcessCluster:
    """A scheduler and ``workers`` single-threaded workers, each its own process
    (``python -m dask scheduler|worker``), on ``host`` (workers on ``worker_host``);
    ``scheduler_prefix`` and ``worker_prefix`` run the commands inside something (``ip
    netns exec NS``). ``config``: Dask settings as environment variables
    (``DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="0"``). Each process's standard error
    goes to ``folder/log-K``."""

    def __init__(self, folder: Path, workers: int = 2, host: str = "127.0.0.1",
                 worker_host: str | None = None, scheduler_prefix: tuple = (),
                 worker_prefix: tuple = (), port: int = 0, **config: str):
        self.folder = folder
        self.env = environment(**config)
        self.procs: list[subprocess.Popen] = []
        self.logs: list = []
        try:
            self._start_all(workers, host, worker_host, scheduler_prefix, worker_prefix, port)
        except BaseException:
            self.close()
            raise

    def _start_all(self, workers, host, worker_host, scheduler_prefix, worker_prefix, port):
        folder = self.folder
        scheduler_file = folder / "scheduler.json"
        self.scheduler = self._start([*scheduler_prefix, sys.executable, "-m", "dask",
                                      "scheduler", "--host", host, "--port", str(port),
                                      "--no-dashboard", "--scheduler-file",
                                      str(scheduler_file)])
        info = wait_for(lambda: (scheduler_file.exists() and _read_json(scheduler_file))
                        or self.scheduler.poll() is not None, "the scheduler")
        if self.scheduler.poll() is not None:
            raise AssertionError("the scheduler stopped: "
                                 + (folder / "log-0").read_text(errors="replace")[-2000:])
        self.address = info["address"]
        self.worker_argv = (worker_prefix, worker_host or host)
        self.workers: list[subprocess.Popen] = []
        for _ in range(workers):
            self.add_worker()

    def add_worker(self) -> subprocess.Popen:
        """Start one more worker (``client()`` then waits for it too)."""
        prefix, host = self.worker_argv
        k = len(self.workers)
        self.workers.append(self._start([*prefix, sys.executable, "-m", "dask", "worker",
                                         self.address, "--nthreads", "1", "--no-nanny",
                                         "--no-dashboard", "--name", f"w{k}", "--host", host,
                                         "--local-directory", str(self.folder / f"w{k}")]))
        return self.workers[-1]

    def _start(self, argv: list[str]) -> subprocess.Popen:
        log = open(self.folder / f"log-{len(self.procs)}", "wb")
        self.logs.append(log)
        proc = subprocess.Popen(argv, env=self.env, stdout=subprocess.DEVNULL, stderr=log)
        self.procs.append(proc)
        return proc

    def client(self):
        from distributed import Client

        client = Client(self.address, timeout=HANG)
        client.wait_for_workers(len(self.workers), timeout=HANG)
        return client

    def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait(60)
        for log in self.logs:
            log.close()


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
