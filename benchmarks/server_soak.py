"""Soak test of ``arboreal serve`` (issue 42): thousands of requests of mixed sizes at
concurrency 32 on 127.0.0.1, bounded in time.

What it does:

* trains a small pipeline model on data/sample (unless ``--model``) and starts
  ``arboreal serve MODEL --port 0 --workers W --max-words 4000 --max-seconds S`` on
  127.0.0.1 (a subprocess; the ready line gives the port);
* 30 *mixed* clients (threads with a keep-alive connection each) send raw text to be
  tokenized, tagged and parsed: 80% one sentence (a sentence of the EWT sample's test
  text), 10% a paragraph of 5 sentences, 7% about 300 words of running text, 3% 5,000
  words of horizontal text, over the word budget (answered 413 by design); half of the
  requests urlencoded, half multipart;
* 2 *long* clients send one 3,000-word sentence at a time (horizontal input, tagged
  and parsed), only during the *loaded* phases. The phases alternate by completed
  requests, idle / loaded / idle / loaded (15% / 35% of the total each), so that a
  drift in the machine's load touches both alike; during idle phases 30 clients are
  connected, during loaded ones 32;
* a one-sentence request is *idle* if no 3,000-word request was in flight at any time
  while it ran, *loaded* if one was in flight during the whole of it (others, at the
  edges of the phases, count in neither);
* the server's resident memory (the server process and its workers, VmRSS summed from
  /proc) is read after every 500 completed requests; growth is from the reading at
  1,000 requests to the one after the last request;
* errors: any answer other than 200, 413 for an over-budget request, or 503 with
  Retry-After (the designed answers), and any connection error;
* then, with the server idle, one client sends one-sentence requests one at a time
  (``--probe-requests``, 100), and again while 2 other clients keep one 3,000-word
  sentence each in flight, in ``--probe-rounds`` (4) alternating rounds: the same p99
  comparison, without the 30 clients' load.

Prints a table; ``--write`` puts it in docs/benchmarks.md and docs/reliability.md.
The run stops issuing requests at ``--time-limit`` seconds (then the figures say it
did not complete).
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import select
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "src"))

from _report import command_line, write_section  # noqa: E402

SAMPLE = REPO / "data" / "sample"
RELIABILITY = REPO / "docs" / "reliability.md"
MAX_WORDS = 4000


# ------------------------------------------------------------------------ the server

def train_model(path: Path) -> None:
    subprocess.run([sys.executable, "-m", "arboreal", "train",
                    str(SAMPLE / "en_ewt-sample-train.conllu"), "-o", str(path), "--epochs",
                    "3", "--hash-bits", "18", "--quiet"], check=True)


def start_server(model: Path, workers: int, max_seconds: float) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-m", "arboreal", "serve", str(model),
                             "--host", "127.0.0.1", "--port", "0", "--workers", str(workers),
                             "--max-words", str(MAX_WORDS), "--max-seconds", str(max_seconds)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 5)
        if not ready:
            continue
        line = proc.stderr.readline().decode("utf-8", "replace")
        if not line:
            break
        m = re.search(r" on http://127\.0\.0\.1:(\d+)/ ", line)
        if m:
            return proc, int(m.group(1))
    proc.kill()
    raise SystemExit("the server did not start")


def _children(pid: int) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def server_rss_kib(pid: int) -> int:
    """VmRSS of the server process and all its descendants, KiB."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            continue
        todo += _children(p)
    return total


# ------------------------------------------------------------------------ requests

def texts() -> list[str]:
    """The sentences of the EWT sample's test file (their ``# text``)."""
    out = []
    for line in (SAMPLE / "en_ewt-sample-test.conllu").read_text(encoding="utf-8").splitlines():
        if line.startswith("# text = "):
            out.append(line[len("# text = "):])
    return out


class Requests:
    """Request bodies by kind."""

    def __init__(self, rng: random.Random):
        self.sentences = texts()
        words = " ".join(self.sentences).split()
        self.rng = rng
        self.long = " ".join((words * (3000 // len(words) + 1))[:3000])
        self.over = " ".join((words * (5000 // len(words) + 1))[:5000])
        self.words = words

    def params(self, kind: str) -> dict[str, str]:
        s = self.sentences
        if kind == "sentence":
            data = self.rng.choice(s)
        elif kind == "paragraph":
            i = self.rng.randrange(len(s) - 5)
            data = " ".join(s[i:i + 5])
        elif kind == "300 words":
            i = self.rng.randrange(len(s) - 40)
            out: list[str] = []
            while sum(len(x.split()) for x in out) < 300:
                out.append(s[i % len(s)])
                i += 1
            data = " ".join(out)
        elif kind == "3,000-word sentence":
            return {"data": self.long, "input": "horizontal", "tagger": "", "parser": ""}
        else:   # over the word budget
            return {"data": self.over, "input": "horizontal", "tagger": "", "parser": ""}
        return {"data": data, "tokenizer": "", "tagger": "", "parser": ""}


def encode(params: dict[str, str], multipart: bool) -> tuple[bytes, str]:
    if not multipart:
        return urllib.parse.urlencode(params).encode("ascii"), \
            "application/x-www-form-urlencoded"
    boundary = uuid.uuid4().hex
    out = []
    for name, value in params.items():
        out.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                   .encode() + value.encode("utf-8") + b"\r\n")
    out.append(f"--{boundary}--\r\n".encode())
    return b"".join(out), f"multipart/form-data; boundary={boundary}"


MIXED = [("sentence", 80), ("paragraph", 10), ("300 words", 7), ("over budget", 3)]


class Soak:
    def __init__(self, port: int, total: int, seed: int, time_limit: float, server_pid: int):
        self.port = port
        self.total = total
        self.time_limit = time_limit
        self.server_pid = server_pid
        self.lock = threading.Lock()
        self.records: list[tuple] = []   # (kind, start, end, status, error)
        self.issued = 0
        self.done = 0
        self.rss: list[tuple[int, int]] = []
        #: memory read every this many completed requests; growth is from ``first_at``
        self.every = min(500, max(10, total // 20))
        self.first_at = min(1000, total // 10)
        self.seed = seed
        self.start = time.monotonic()
        # phase boundaries (completed requests): idle, loaded, idle, loaded
        self.phases = [("idle", 0.15), ("loaded", 0.35), ("idle", 0.15), ("loaded", 0.35)]
        self.bounds = []
        acc = 0.0
        for name, share in self.phases:
            acc += share
            self.bounds.append((name, int(round(acc * total))))

    def phase(self) -> str:
        with self.lock:
            done = self.done
        for name, bound in self.bounds:
            if done < bound:
                return name
        return "end"

    def take(self) -> bool:
        with self.lock:
            if self.issued >= self.total or time.monotonic() - self.start > self.time_limit:
                return False
            self.issued += 1
            return True

    def give_back(self) -> None:
        with self.lock:
            self.issued -= 1

    def finish(self, record: tuple) -> None:
        with self.lock:
            self.records.append(record)
            self.done += 1
            done = self.done
        if done % self.every == 0:
            self.rss.append((done, server_rss_kib(self.server_pid)))

    def one(self, conn, kind: str, params: dict, multipart: bool):
        body, ctype = encode(params, multipart)
        t0 = time.monotonic()
        status, error, retry = 0, "", None
        try:
            conn.request("POST", "/process", body, {"Content-Type": ctype})
            response = conn.getresponse()
            answer = response.read()
            status, retry = response.status, response.getheader("Retry-After")
            if status == 200:
                json.loads(answer)["result"]
            elif not (status == 413 and kind == "over budget"
                      or status == 503 and retry is not None):
                error = f"{status}: {answer[:200]!r}"
        except Exception as exc:   # counted as an error of the soak
            error = f"{exc.__class__.__name__}: {exc}"
            conn.close()
        self.finish((kind, t0, time.monotonic(), status, error))

    def mixed_client(self, k: int) -> None:
        rng = random.Random(self.seed * 1000 + k)
        requests = Requests(rng)
        kinds, weights = zip(*MIXED)
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600)
        n = 0
        while self.take():
            kind = rng.choices(kinds, weights)[0]
            self.one(conn, kind, requests.params(kind), multipart=bool(n % 2))
            n += 1
        conn.close()

    def long_client(self, k: int) -> None:
        requests = Requests(random.Random(k))
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600)
        while True:
            phase = self.phase()
            if phase == "end":
                break
            if phase != "loaded":
                time.sleep(0.05)   # not measured: waits for its phase
                continue
            if not self.take():
                break
            if self.phase() != "loaded":
                self.give_back()
                continue
            self.one(conn, "3,000-word sentence", requests.params("3,000-word sentence"),
                     multipart=False)
        conn.close()

    def run(self, mixed: int = 30, long: int = 2) -> float:
        threads = [threading.Thread(target=self.mixed_client, args=(k,)) for k in range(mixed)]
        threads += [threading.Thread(target=self.long_client, args=(k,)) for k in range(long)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.rss.append((self.done, server_rss_kib(self.server_pid)))
        return time.monotonic() - self.start


def probe(port: int, requests: int, with_long: bool, seed: int) -> list[tuple]:
    """One client sending one-sentence requests one after the other (``requests`` of
    them), alone on the server, or (``with_long``) while 2 clients send 3,000-word
    sentences, which are in flight before the first probe request is sent. Records as
    :class:`Soak`'s (the long requests' too)."""
    records: list[tuple] = []
    lock = threading.Lock()
    stop = threading.Event()
    sent = [threading.Event() for _ in range(2 if with_long else 0)]

    def record(kind, conn, params, on_sent=None):
        body, ctype = encode(params, False)
        t0 = time.monotonic()
        conn.request("POST", "/process", body, {"Content-Type": ctype})
        if on_sent is not None:
            on_sent.set()
        response = conn.getresponse()
        answer = response.read()
        error = "" if response.status == 200 else f"{response.status}: {answer[:200]!r}"
        with lock:
            records.append((kind, t0, time.monotonic(), response.status, error))

    def long_client(k: int) -> None:
        requests_ = Requests(random.Random(k))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
        while not stop.is_set():
            record("3,000-word sentence", conn, requests_.params("3,000-word sentence"),
                   sent[k])
        conn.close()

    longs = [threading.Thread(target=long_client, args=(k,)) for k in range(len(sent))]
    for t in longs:
        t.start()
    for event in sent:
        event.wait()
    rng = random.Random(seed)
    short = Requests(rng)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    for _ in range(requests):
        record("sentence", conn, short.params("sentence"))
    conn.close()
    stop.set()
    for t in longs:
        t.join()
    return records


# ------------------------------------------------------------------------ analysis

def p99(values: list[float]) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(0.99 * len(v)))] if v else float("nan")


def median(values: list[float]) -> float:
    v = sorted(values)
    return v[len(v) // 2]


def classify(records: list[tuple]) -> tuple[list[float], list[float]]:
    """Latencies (s) of the one-sentence requests: idle ones, loaded ones."""
    longs = sorted((s, e) for kind, s, e, _, _ in records if kind == "3,000-word sentence")
    merged: list[list[float]] = []
    for s, e in longs:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    idle, loaded = [], []
    for kind, s, e, status, error in records:
        if kind != "sentence" or status != 200:
            continue
        if any(ms <= s and e <= me for ms, me in merged):
            loaded.append(e - s)
        elif not any(ms < e and s < me for ms, me in merged):
            idle.append(e - s)
    return idle, loaded


def lscpu_head() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return "(lscpu not available)"
    return "\n".join(out.splitlines()[:10])


def report(soak: Soak, wall: float, workers: int, max_seconds: float, load_before, load_after,
           note: str, probes: tuple[list, list]) -> str:
    records = soak.records
    kinds: dict[str, list] = {}
    for r in records:
        kinds.setdefault(r[0], []).append(r)
    errors = [r for r in records if r[4]]
    designed_413 = sum(1 for r in records if r[3] == 413 and not r[4])
    designed_503 = sum(1 for r in records if r[3] == 503 and not r[4])
    idle, loaded = classify(records)
    first_at, first = next(((d, v) for d, v in soak.rss if d >= soak.first_at), soak.rss[0])
    last = soak.rss[-1][1]
    growth = (last - first) / first * 100 if first else float("nan")
    ratio = p99(loaded) / p99(idle)
    long_latencies = [r[2] - r[1] for r in kinds.get("3,000-word sentence", [])]
    complete = len(records) >= soak.total
    rows = [
        ("requests answered", f"{len(records):,} of {soak.total:,} "
                              f"({'complete' if complete else 'STOPPED at the time limit'}) "
                              f"in {wall:.0f} s", "at least 10,000"),
        ("by kind", ", ".join(f"{k}: {len(v):,}" for k, v in sorted(kinds.items())), ""),
        ("errors (other than the designed 413 and 503)", f"{len(errors)}", "0"),
        ("designed answers", f"413 (over {MAX_WORDS:,} words): {designed_413}; "
                             f"503 with Retry-After: {designed_503}", ""),
        (f"server memory (VmRSS, server + workers) after {first_at:,} requests",
         f"{first / 1024:.1f} MiB", ""),
        ("server memory after the last request", f"{last / 1024:.1f} MiB", ""),
        (f"memory growth, {first_at:,} requests to the last", f"{growth:+.1f}%",
         "under 10%"),
        ("p99 of one-sentence requests, idle server",
         f"{p99(idle) * 1000:.0f} ms ({len(idle):,} requests)", ""),
        ("p99 of one-sentence requests while 3,000-word requests run",
         f"{p99(loaded) * 1000:.0f} ms ({len(loaded):,} requests)", ""),
        ("ratio loaded / idle", f"{ratio:.2f}x", "at most 3x"),
        ("3,000-word requests: median latency", f"{median(long_latencies):.1f} s"
         if long_latencies else "none ran", ""),
    ]
    alone, _ = classify(probes[0])
    _, beside = classify(probes[1])
    errors += [r for r in probes[0] + probes[1] if r[4]]
    rows += [
        ("one client, one sentence at a time: p99 on the idle server",
         f"{p99(alone) * 1000:.0f} ms ({len(alone):,} requests)", ""),
        ("one client, one sentence at a time: p99 while 2 clients' 3,000-word requests run",
         f"{p99(beside) * 1000:.0f} ms ({len(beside):,} requests)", ""),
        ("ratio, one client", f"{p99(beside) / p99(alone):.2f}x", "at most 3x"),
    ]
    rows[2] = ("errors (other than the designed 413 and 503)", f"{len(errors)}", "0")
    table = "| measure | value | bar |\n|---|---|---|\n" + "\n".join(
        f"| {a} | {b} | {c} |" for a, b, c in rows)
    memory = ", ".join(f"{d:,}: {v / 1024:.1f}" for d, v in soak.rss)
    sample_errors = "\n".join(f"- {r[0]}: {r[4]}" for r in errors[:5])
    body = (
        f"Server: `arboreal serve MODEL --workers {workers} --max-words {MAX_WORDS} "
        f"--max-seconds {max_seconds:g}` on 127.0.0.1 (queue: the default), MODEL a "
        "pipeline (tokenizer, tagger, first-order parser) trained on "
        "data/sample/en_ewt-sample-train.conllu (3 epochs, 2^18 weights). Clients: 30 "
        "mixed (80% one sentence, 10% five sentences, 7% 300 words of raw text, "
        f"3% 5,000 words, over the budget) and, in the loaded phases, 2 sending one "
        "3,000-word sentence at a time: concurrency 32 (30 in the idle phases). Phases "
        "by completed requests: idle 15%, loaded 35%, idle 15%, loaded 35%. The "
        "3,000-word requests run at nice +10 (the server's design), so under the 30 "
        "clients' load few of them complete. After the soak, a single client's "
        "one-sentence requests, one at a time, on the idle server and beside 2 clients' "
        "3,000-word requests, in alternating rounds. See the docstring of "
        "benchmarks/server_soak.py for the definitions.\n\n"
        f"{table}\n\n"
        f"Memory (MiB) by requests completed: {memory}.\n\n"
        f"Load average (1, 5, 15 min) before: {load_before}, after: {load_after}. "
        f"{note}\n\n"
        f"`lscpu | head`:\n\n```\n{lscpu_head()}\n```\n"
        + (f"\nFirst errors:\n{sample_errors}\n" if errors else ""))
    return body


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=None,
                    help="model to serve (default: train one on data/sample)")
    ap.add_argument("--work-dir", type=Path, default=Path("runs/server_soak"))
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--max-seconds", type=float, default=600.0,
                    help="the server's per-request time budget")
    ap.add_argument("--time-limit", type=float, default=3600.0,
                    help="stop issuing requests after this many seconds")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--probe-requests", type=int, default=100,
                    help="one-sentence requests of the single client in each round, idle "
                         "and beside the 3,000-word requests, after the soak")
    ap.add_argument("--probe-rounds", type=int, default=4,
                    help="rounds of the single client's requests, idle then loaded")
    ap.add_argument("--note", default="The machine is shared: other engineers' jobs ran "
                                      "during the soak (see the load average).")
    ap.add_argument("--write", action="store_true",
                    help="write the table to docs/benchmarks.md and docs/reliability.md")
    args = ap.parse_args()

    args.work_dir.mkdir(parents=True, exist_ok=True)
    model = args.model
    if model is None:
        model = args.work_dir / "soak.model"
        if not model.exists():
            train_model(model)
    load_before = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    proc, port = start_server(model, args.workers, args.max_seconds)
    try:
        soak = Soak(port, args.requests, args.seed, args.time_limit, proc.pid)
        wall = soak.run()
        probes: tuple[list, list] = ([], [])
        for r in range(args.probe_rounds):    # alternated: a drift of the load hits both
            probes[0].extend(probe(port, args.probe_requests, False, args.seed + 2 * r + 1))
            probes[1].extend(probe(port, args.probe_requests, True, args.seed + 2 * r + 2))
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    load_after = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    (args.work_dir / "records.json").write_text(json.dumps(
        {"records": soak.records, "rss": soak.rss, "wall": wall, "probes": probes}),
        encoding="utf-8")
    body = report(soak, wall, args.workers, args.max_seconds, load_before, load_after,
                  args.note, probes)
    print(body)
    if args.write:
        argv = sys.argv[1:]
        command = command_line("server_soak.py", argv, args.note)
        title = "Server soak: 10,000 requests of mixed sizes at concurrency 32"
        write_section("server_soak", title, command, body)
        write_section("server_soak", title, command, body, doc=RELIABILITY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
