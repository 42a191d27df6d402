"""The test suite under load (issue 41): ``bash .ci/run`` (a fresh virtual environment,
the install, the README's test command) run ``--runs`` times in a row from a clean clone
of a commit, while another clone runs ``bash .ci/run`` and a third runs a second copy of
the suite, each of those two over and over until the runs in a row are done. Every clone
has the shared data beside it, as CI has. Reported per run: the exit status, pytest's
counts and the wall time; for the two beside, every run they finished or were stopped in.
SIGTERM or Ctrl-C stops the run in progress and reports what finished.

    python benchmarks/suite_under_load.py [--commit HEAD] [--runs 3] [--work-dir DIR]
        [--no-write] [--note TEXT]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
COUNTS = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")


def clone(commit: str, dest: Path) -> None:
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True)
    subprocess.run(["git", "-C", str(dest), "checkout", "-q", commit], check=True)


def ci_run(checkout: Path, venv: Path, log: Path, stop: threading.Event | None = None) -> dict:
    """One ``bash .ci/run`` in ``checkout`` with its environment at ``venv``: status,
    pytest's counts, wall seconds (``stopped``: ended early because ``stop`` was set)."""
    env = {**os.environ, "ARBOREAL_CI_VENV": str(venv)}
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    t0 = time.perf_counter()
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(["bash", ".ci/run"], cwd=checkout, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        stopped = False
        while proc.poll() is None:
            if stop is not None and stop.is_set():
                os.killpg(proc.pid, signal.SIGTERM)
                stopped = True
                proc.wait()
                break
            time.sleep(2)
    wall = time.perf_counter() - t0
    tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-40:]
    summary = next((line for line in reversed(tail) if COUNTS.search(line)), "")
    counts = {kind.rstrip("s") if kind.startswith("error") else kind: int(n)
              for n, kind in COUNTS.findall(summary)}
    return {"status": proc.returncode, "counts": counts, "wall": wall, "stopped": stopped,
            "log": str(log)}


def loop(name: str, checkout: Path, work: Path, fresh_venv: bool, stop: threading.Event,
         results: list) -> None:
    """``bash .ci/run`` again and again until ``stop``; a fresh environment each time or
    one kept (then only the first run installs from nothing)."""
    k = 0
    while not stop.is_set():
        k += 1
        venv = work / f"{name}-venv{k if fresh_venv else ''}"
        results.append(ci_run(checkout, venv, work / f"{name}-{k}.log", stop))
        if fresh_venv:
            shutil.rmtree(venv, ignore_errors=True)


def describe(r: dict, beside: bool = True) -> str:
    counts = ", ".join(f"{n} {k}" for k, n in r["counts"].items()) or "no pytest summary"
    if r["stopped"]:
        why = "when the runs in a row ended" if beside else "by SIGTERM or Ctrl-C"
        return f"stopped {why} ({r['wall'] / 60:.1f} min in)"
    return f"exit {r['status']}: {counts}, {r['wall'] / 60:.1f} min"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commit", default="HEAD")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp/suite_under_load"))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--note", default="")
    args = ap.parse_args(argv)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.commit],
                            check=True, capture_output=True, text=True).stdout.strip()
    work = args.work_dir.resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    # CI's layout: the checkout with ../shared beside it
    (work / "shared").symlink_to(SHARED.resolve())
    clones = {n: work / n for n in ("suite", "ci", "copy")}
    for dest in clones.values():
        clone(commit, dest)
    stop = threading.Event()
    beside = {"ci": [], "copy": []}
    threads = [threading.Thread(target=loop, args=("ci", clones["ci"], work, True, stop,
                                                   beside["ci"])),
               threading.Thread(target=loop, args=("copy", clones["copy"], work, False, stop,
                                                   beside["copy"]))]
    for t in threads:
        t.start()
    in_a_row = []
    loads = []
    # SIGTERM or Ctrl-C stops the run in progress; what finished is still reported
    stop_now = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop_now.set())
    try:
        for k in range(1, args.runs + 1):
            print(f"run {k} of {args.runs} ...", file=sys.stderr, flush=True)
            r = ci_run(clones["suite"], work / f"suite-venv{k}", work / f"suite-{k}.log",
                       stop_now)
            shutil.rmtree(work / f"suite-venv{k}", ignore_errors=True)
            loads.append(os.getloadavg()[2])
            in_a_row.append(r)
            print(f"run {k}: {describe(r, beside=False)}", file=sys.stderr, flush=True)
            if r["stopped"]:
                break
    finally:
        stop.set()
        for t in threads:
            t.join()
    passed = len(in_a_row) == args.runs and all(
        r["status"] == 0 and not r["stopped"] and not r["counts"].get("failed")
        and not r["counts"].get("error") for r in in_a_row)
    lines = ["| run | result | 15-min load average at its end |", "|---|---|---|"]
    lines += [f"| {k} | {describe(r, beside=False)} | {load:.1f} |"
              for k, (r, load) in enumerate(zip(in_a_row, loads), 1)]
    lines.append("")
    for name, title in (("ci", "`bash .ci/run` beside it (a fresh environment each run)"),
                        ("copy", "a second copy of the suite beside it (one environment)")):
        runs = "; ".join(f"run {k}: {describe(r)}" for k, r in enumerate(beside[name], 1))
        lines.append(f"- {title}: {runs}.")
    lines.append("")
    lines.append(f"Commit {commit}. The {args.runs} runs in a row "
                 f"{'all passed' if passed else 'did not all pass, or did not all run'}.")
    if args.note:
        lines.append("")
        lines.append(args.note)
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from _report import command_line, write_section

        write_section("suite_under_load", "The test suite under load",
                      command_line("suite_under_load.py", sys.argv[1:] if argv is None
                                   else argv), body)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
