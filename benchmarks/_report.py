"""Write one benchmark's section of docs/benchmarks.md, leaving the others alone.

Each script in benchmarks/ owns a section between ``<!-- BEGIN name -->`` and
``<!-- END name -->`` (with an anchor ``<a id="name">`` that links use); rerunning a
script replaces only its own section, in docs/benchmarks-archive.md when the section
was moved there (superseded runs, variants not kept), else in docs/benchmarks.md (a
new section is appended there). The file is written to a temporary file and renamed,
so it is never half-written.
"""
from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import shlex
import subprocess
import tempfile
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
ARCHIVE = DOC.parent / "benchmarks-archive.md"
HEADER = (
    "# Benchmarks\n\n"
    "Every figure here was printed by the command named in its section, on the machine\n"
    "and date given there. Rerun the command to replace the section.\n"
)


def cpu_model() -> str:
    """This machine's CPU model as lscpu names it (else the platform's word for it)."""
    cpu = platform.processor() or platform.machine()
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                cpu = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return cpu


def machine_description() -> str:
    """CPU model, core count and Python version of this machine, in one line."""
    return f"{cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def command_line(script: str, argv: list[str], note: str = "") -> str:
    """The command that wrote a section, for its header: ``python benchmarks/SCRIPT``
    with ``argv`` quoted for the shell and the ``--note`` text shortened to ``...``."""
    return f"python benchmarks/{script} " + shlex.join(
        "..." if note and a == note else a for a in argv)


def write_section(name: str, title: str, command: str, body: str,
                  doc: Path | None = None) -> None:
    """Replace section ``name`` where it is (docs/benchmarks-archive.md or
    docs/benchmarks.md), or append it to docs/benchmarks.md; with ``doc``, replace or
    append it in that page instead (a figure an issue asks for in another page too)."""
    today = _dt.date.today().isoformat()
    section = (
        f"<!-- BEGIN {name} -->\n<a id=\"{name}\"></a>\n## {title}\n\n"
        f"Command: `{command}`  \nMachine: {machine_description()}  \nDate: {today}\n\n"
        f"{body.rstrip()}\n<!-- END {name} -->\n"
    )
    pattern = re.compile(rf"<!-- BEGIN {re.escape(name)} -->.*?<!-- END {re.escape(name)} -->\n?", re.S)
    target = DOC if doc is None else doc
    if doc is None and ARCHIVE.exists() and pattern.search(ARCHIVE.read_text(encoding="utf-8")):
        target = ARCHIVE
    text = target.read_text(encoding="utf-8") if target.exists() else HEADER
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text)
    else:
        text = text.rstrip() + "\n\n" + section
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".benchmarks.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, target)


def utc_now() -> str:
    """The time now, as the sections' run lines give it (``2026-12-03 07:40 UTC``)."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def report_tables(preamble: str, tables: list[str], section: str, title: str, script: str,
                  argv: list[str], note: str = "", write: bool = True) -> None:
    """Print ``preamble`` (with ``note`` appended) and ``tables``, and with ``write`` put
    them in section ``section`` of docs/benchmarks.md under the command line of
    ``script``."""
    text = "\n".join([preamble + (f" {note}" if note else ""), "", *tables])
    print(text)
    if write:
        write_section(section, title, command_line(script, argv, note), text)


def memory_probe(repeats: int = 3) -> float:
    """Seconds (fastest of ``repeats``) for a fixed memory-bound workload: 2**24 random
    float32 gathers from a 2**23-entry (32 MB) table, the access pattern of feature
    scoring, printed beside timings for reference. (The VM's speed drifts by up to 2x
    within an hour; on 2026-11-22 this probe did not track that drift.)"""
    import time

    import numpy as np

    rng = np.random.default_rng(0)
    table = rng.random(1 << 23, dtype=np.float32)
    idx = rng.integers(0, 1 << 23, size=1 << 24)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        float(table[idx].sum())
        best = min(best, time.perf_counter() - t)
    return best
