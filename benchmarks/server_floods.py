"""``arboreal serve`` under hostile clients, on 127.0.0.0/8 only, bounded in count and
time: one-sentence probes (a new connection each, from 127.0.0.1) timed while

* **floods**: ``--idle`` keep-alive connections (one ``GET /models`` each, then
  silence) and ``--slow`` slowloris connections (request headers that never end, a
  header line every 2 s) are held open, spread over ``--addresses`` source addresses
  127.0.1.x (so that no address passes the per-client cap), with the server's
  default limits;
* **long requests**: two requests of one 5,000-word sentence of one-letter words in a
  10 KB body each (under the 16 KiB byte threshold; ``input=horizontal``, tagged and
  parsed) are in flight on a server of 2 workers.

Prints the probes' median, p99 and errors; ``--write`` puts them in
docs/benchmarks.md (section ``server_floods``) and docs/reliability.md.

    python benchmarks/server_floods.py [--model MODEL] [--idle 200] [--slow 150]
        [--addresses 10] [--probes 200] [--write] [--note '...']
"""
from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests"))

from server_soak import train_model  # noqa: E402
from _serve_process import connect_from as _connect, start_server, stop_server  # noqa: E402

PROBE = urllib.parse.urlencode({"data": "The cat sat on the mat .", "input": "horizontal",
                                "tagger": "", "parser": ""}).encode()
LONG = urllib.parse.urlencode({"data": " ".join(["a"] * 5000), "input": "horizontal",
                               "tagger": "", "parser": ""}).encode()


def probe(url: str, timeout: float = 60) -> tuple[float, bool]:
    t = time.perf_counter()
    try:
        with urllib.request.urlopen(urllib.request.Request(url + "process", data=PROBE),
                                    timeout=timeout) as r:
            r.read()
            ok = r.status == 200
    except OSError:
        ok = False
    return time.perf_counter() - t, ok


def probes(url: str, count: int) -> dict:
    times, errors = [], 0
    for _ in range(count):
        seconds, ok = probe(url)
        times.append(seconds)
        errors += not ok
    times.sort()
    return {"count": count, "median_ms": 1000 * statistics.median(times),
            "p99_ms": 1000 * times[min(len(times) - 1, int(0.99 * len(times)))],
            "max_ms": 1000 * times[-1], "errors": errors}




def flood(url: str, idle: int, slow: int, addresses: int, count: int) -> dict:
    port = urllib.parse.urlsplit(url).port
    held_idle, held_slow, stop = [], [], threading.Event()
    for k in range(idle):
        s = _connect(port, f"127.0.1.{k % addresses + 1}")
        s.sendall(b"GET /models HTTP/1.1\r\nHost: x\r\n\r\n")
        s.recv(65536)
        held_idle.append(s)
    for k in range(slow):
        s = _connect(port, f"127.0.1.{k % addresses + 1}")
        s.sendall(b"POST /process HTTP/1.1\r\nHost: x\r\n")
        held_slow.append(s)

    def trickle():
        while not stop.wait(2.0):
            for s in held_slow:
                try:
                    s.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    pass

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        result = probes(url, count)
    finally:
        stop.set()
        thread.join()
        closed = sum(_is_closed(s) for s in held_idle + held_slow)
        for s in held_idle + held_slow:
            s.close()
    return {**result, "idle": idle, "slow": slow, "addresses": addresses,
            "flood_closed_by_server": closed}


def _is_closed(s: socket.socket) -> bool:
    s.settimeout(0.01)
    try:
        return s.recv(65536) == b""
    except (TimeoutError, socket.timeout, BlockingIOError):
        return False
    except OSError:
        return True


def long_requests(url: str, count: int) -> dict:
    answers = []

    def send():
        t = time.perf_counter()
        try:
            with urllib.request.urlopen(urllib.request.Request(url + "process", data=LONG),
                                        timeout=600) as r:
                r.read()
                answers.append((r.status, time.perf_counter() - t))
        except OSError as exc:
            answers.append((str(exc), time.perf_counter() - t))

    threads = [threading.Thread(target=send) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(1.0)              # both sent and taken by a worker
    result = probes(url, count)
    for t in threads:
        t.join()
    return {**result, "long": [{"status": a, "seconds": round(s, 1)} for a, s in answers]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path)
    ap.add_argument("--idle", type=int, default=200)
    ap.add_argument("--slow", type=int, default=150)
    ap.add_argument("--addresses", type=int, default=10)
    ap.add_argument("--probes", type=int, default=200)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or Path(tmp) / "sample.model"
        if args.model is None:
            train_model(model)
        proc, url = start_server(str(model), "--workers", "2")
        try:
            quiet = probes(url, args.probes)
            flooded = flood(url, args.idle, args.slow, args.addresses, args.probes)
            longs = long_requests(url, args.probes)
        finally:
            rc, err = stop_server(proc)
    rows = [("no other client", quiet),
            (f"{args.idle} idle keep-alive + {args.slow} slowloris connections "
             f"({args.addresses} addresses)", flooded),
            ("two 5,000-word sentences in 10 KB bodies in flight", longs)]
    lines = ["| probes (one sentence, new connection each) beside | probes | median ms | "
             "p99 ms | max ms | errors |", "|---|---:|---:|---:|---:|---:|"]
    for name, r in rows:
        lines.append(f"| {name} | {r['count']} | {r['median_ms']:.1f} | {r['p99_ms']:.1f} | "
                     f"{r['max_ms']:.1f} | {r['errors']} |")
    lines += ["", f"- flood connections closed by the server by the end of the probes: "
                  f"{flooded['flood_closed_by_server']} of {args.idle + args.slow} (idle "
                  "timeout 10 s, header timeout 10 s)",
              "- the long requests: " + ", ".join(f"{x['status']} after {x['seconds']} s"
                                                  for x in longs["long"]),
              f"- server exit status {rc}" + (" (a traceback on stderr)" if "Traceback" in err
                                              else "")]
    body = ("`arboreal serve` with its default connection limits and 2 workers, the "
            "sample pipeline model; probes and floods on loopback (module docstring of "
            "the command).\n\n" + "\n".join(lines) + (f"\n\n{args.note}" if args.note else ""))
    print(body)
    if args.write:
        from _report import command_line, write_section

        command = command_line("server_floods.py", sys.argv[1:], args.note)
        write_section("server_floods", "Server under connection floods and long requests",
                      command, body)
        write_section("server_floods", "Server under connection floods and long requests",
                      command, body, doc=REPO / "docs" / "reliability.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
