"""Killed trainings resumed on a real treebank (issue 42, "Resume").

One uninterrupted ``arboreal train TRAIN --dev DEV --no-tagger --no-tokenizer`` (the
default learner and epochs, gold UPOS), then, for each point, the same command with
``--checkpoint DIR`` killed with SIGKILL the N-th time it reaches the point (the
handshake of tests/_train_kill.py: no timer), followed by ``--resume DIR``. The resumed
model must equal the uninterrupted one array by array, bit for bit (same dtype, same
values), with the same best epoch and dev history. Points:

* ``epoch``: half-way through an epoch of the learner (the weights changed, the epoch
  not finished);
* ``evaluate``: during a dev evaluation, after the dev sentences are parsed;
* ``save``: during a checkpoint save, after the new state is written to its temporary
  file and before it replaces the previous one.

    python benchmarks/resume.py [--treebank UD_English-EWT] [--at 4] [--work-dir DIR]
        [--no-write] [--note TEXT]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from udpipe_baseline import UD, split_path  # noqa: E402

KILL = ROOT / "tests" / "_train_kill.py"
POINTS = ("epoch", "evaluate", "save")


def arrays(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def compare(a: Path, b: Path) -> dict:
    """How model files ``a`` and ``b`` differ: arrays compared bit for bit (dtype and
    values), best epoch and dev history."""
    xa, xb = arrays(a), arrays(b)
    ma, mb = json.loads(str(xa.pop("__meta__"))), json.loads(str(xb.pop("__meta__")))
    differing = sorted(k for k in set(xa) | set(xb)
                       if k not in xa or k not in xb or xa[k].dtype != xb[k].dtype
                       or not np.array_equal(xa[k], xb[k]))
    history = [[h.get(k) for k in ("dev_uas", "dev_las")] for h in ma.get("history", [])]
    same_history = history == [[h.get(k) for k in ("dev_uas", "dev_las")]
                               for h in mb.get("history", [])]
    return {"arrays": len(xa), "differing": differing,
            "same_best_epoch": ma.get("best_epoch") == mb.get("best_epoch"),
            "same_history": same_history, "best_epoch": ma.get("best_epoch"),
            "epochs": len(history)}


def run(argv: list[str], kill: tuple[str, int] | None = None) -> tuple[int, float]:
    """(return code, wall seconds) of ``arboreal *argv`` (killing itself at ``kill``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, str(KILL), kill[0], str(kill[1]), *argv] if kill else \
        [sys.executable, "-m", "arboreal", *argv]
    t = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if done.returncode not in (0, -signal.SIGKILL):
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.returncode, wall


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--treebank", default="UD_English-EWT")
    ap.add_argument("--at", type=int, default=4,
                    help="kill the N-th time the point is reached (default 4)")
    ap.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "resume")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--note", default="")
    args = ap.parse_args(argv)
    if not UD.exists():
        raise SystemExit(f"{UD} not found")
    train, dev = split_path(args.treebank, "train"), split_path(args.treebank, "dev")
    work = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    base = ["train", str(train), "--dev", str(dev), "--no-tagger", "--no-tokenizer", "--quiet"]
    reference = work / "uninterrupted.model"
    _, ref_wall = run([*base, "-o", str(reference)])
    rows = []
    for point in POINTS:
        out, folder = work / f"{point}.model", work / f"{point}.ckpt"
        shutil.rmtree(folder, ignore_errors=True)
        out.unlink(missing_ok=True)
        code, killed_wall = run([*base, "-o", str(out), "--checkpoint", str(folder)],
                                kill=(point, args.at))
        if code != -signal.SIGKILL or out.exists():
            raise SystemExit(f"{point}: the training was not killed before its model")
        strays = len(list(folder.glob(".*.tmp")))
        code, resumed_wall = run([*base, "-o", str(out), "--resume", str(folder)])
        row = {"point": point, "killed_wall": killed_wall, "resumed_wall": resumed_wall,
               "strays_before": strays, "strays_after": len(list(folder.glob(".*.tmp"))),
               **compare(out, reference)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    (work / "results.json").write_text(json.dumps({"reference_wall": ref_wall, "rows": rows},
                                                  indent=1) + "\n")
    if not args.no_write:
        from _report import command_line, write_section

        lines = ["| killed at | killed after | resumed in | temporary files left by the kill "
                 "/ after resuming | arrays bitwise equal | best epoch and dev history |",
                 "|---|---:|---:|---:|---:|---|"]
        for r in rows:
            equal = r["arrays"] - len(r["differing"])
            lines.append(
                f"| {r['point']} (its {args.at}th time) | {r['killed_wall']:.0f} s | "
                f"{r['resumed_wall']:.0f} s | {r['strays_before']} / {r['strays_after']} | "
                f"{equal} of {r['arrays']}"
                + (f" (differ: {', '.join(r['differing'])})" if r["differing"] else "")
                + " | " + ("the same" if r["same_best_epoch"] and r["same_history"]
                           else "different") + " |")
        body = (f"{args.treebank}: `arboreal train TRAIN --dev DEV --no-tagger --no-tokenizer` "
                f"(the default learner and epochs, gold UPOS) uninterrupted in "
                f"{ref_wall:.0f} s (best epoch {rows[0]['best_epoch']} of "
                f"{rows[0]['epochs']}); then, per point, the same command with "
                f"`--checkpoint DIR` killed with SIGKILL by tests/_train_kill.py (a "
                f"handshake, no timer), then with `--resume DIR`; the resumed model "
                f"compared with the uninterrupted one array by array (dtype and values) "
                f"and by its best epoch and dev history.\n\n" + "\n".join(lines) + "\n"
                + (f"\n{args.note}\n" if args.note else ""))
        write_section("resume_killed", "Killed trainings resumed",
                      command_line("resume.py", argv if argv is not None else sys.argv[1:],
                                   args.note), body)
    failed = [r["point"] for r in rows
              if r["differing"] or not (r["same_best_epoch"] and r["same_history"])]
    if failed:
        print(f"resume: not the uninterrupted model after a kill at: {', '.join(failed)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
