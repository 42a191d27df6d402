"""Hostile files given to ``arboreal parse``: a model that is a link to ``/dev/zero``, a
FIFO as the model, ``/dev/zero`` as the input. Each whole command timed (wall) with its
peak memory (the child's maximum resident set size), its exit status and its message.

    python benchmarks/hostile_files.py [--model MODEL] [--write] [--note '...']

``--model``: the model for the input case (default: one trained on the sample).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from server_soak import train_model  # noqa: E402


def run(args: list[str], timeout: float = 300) -> dict:
    """Wall seconds, peak RSS (MiB), exit status and stderr of one command (run in a
    fresh child of a fresh Python, so that RUSAGE_CHILDREN's maximum is its own)."""
    probe = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
             "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "w = time.perf_counter() - t; "
             "r = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss; "
             "print(w, r, p.returncode); print(p.stderr.strip(), file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "arboreal", *args],
                         capture_output=True, text=True, timeout=timeout)
    wall, rss, rc = out.stdout.split()
    return {"wall_s": float(wall), "rss_mib": int(rss) / 1024, "rc": int(rc),
            "message": out.stderr.strip()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = args.model or tmp / "sample.model"
        if args.model is None:
            train_model(model)
        text = tmp / "in.txt"
        text.write_text("The cat sat on the mat.\n", encoding="utf-8")
        link = tmp / "zero.model"
        link.symlink_to("/dev/zero")
        fifo = tmp / "fifo.model"
        os.mkfifo(fifo)
        cases = [("model: a link to /dev/zero", ["parse", str(link), str(text), "-o",
                                                 str(tmp / "a.conllu")]),
                 ("model: a FIFO", ["parse", str(fifo), str(text), "-o", str(tmp / "b.conllu")]),
                 ("input: /dev/zero", ["parse", str(model), "/dev/zero", "-o",
                                       str(tmp / "c.conllu")])]
        rows = [(name, run(cmd)) for name, cmd in cases]
    lines = ["| `arboreal parse` given | exit status | wall s | peak MiB | message |",
             "|---|---:|---:|---:|---|"]
    for name, r in rows:
        message = r["message"].replace(str(tmp), "TMP").replace("|", "\\|")
        lines.append(f"| {name} | {r['rc']} | {r['wall_s']:.2f} | {r['rss_mib']:.0f} | "
                     f"`{message}` |")
    body = ("Whole commands, a fresh process each (the input case includes loading the "
            "model).\n\n" + "\n".join(lines) + (f"\n\n{args.note}" if args.note else ""))
    print(body)
    if args.write:
        from _report import command_line, write_section

        write_section("hostile_files", "Devices and FIFOs given as models or inputs",
                      command_line("hostile_files.py", sys.argv[1:], args.note), body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
