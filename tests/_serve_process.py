"""An ``arboreal serve`` subprocess for the tests: started on a free port, stopped by
SIGTERM."""
from __future__ import annotations

import re
import select
import signal
import socket
import subprocess
import sys
import time


def start_server(*args: str) -> tuple[subprocess.Popen, str]:
    """A server subprocess on a free port and its URL, once its ready line is out."""
    proc = subprocess.Popen([sys.executable, "-m", "arboreal", "serve", *args, "--port", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    seen = []
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], max(deadline - time.monotonic(), 0))
        if not ready:
            break
        line = proc.stderr.readline().decode("utf-8", "replace")
        if not line:
            break
        seen.append(line)
        m = re.search(r" on (http://\S+/) ", line)
        if m:
            return proc, m.group(1)
    proc.kill()
    proc.wait()
    raise AssertionError("the server did not start: " + "".join(seen))


def stop_server(proc: subprocess.Popen, send: bool = True) -> tuple[int, str]:
    """(exit status, standard error) of a server stopped by SIGTERM (sent here unless
    ``send`` is false)."""
    if send:
        proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return rc, proc.stderr.read().decode("utf-8", "replace")


def connect_from(port: int, source: str) -> socket.socket:
    """A TCP connection to 127.0.0.1:``port`` from the loopback address ``source`` (an
    address of 127.0.0.0/8: floods come from other clients than the probes)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(10)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s
