"""Smoke test: benchmarks/inference.py's arboreal-only path runs and its checks pass.

Runs the script in a subprocess with the tiniest settings (no peers, so no
torch is needed) and reads its JSON output: every arboreal routine must have
been timed without error, the internal consistency checks must hold, every
returned tree must be a single-root tree, and the stability rows must be
present. It does not write docs/benchmarks.md (``--quick``).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "inference.py"


def test_inference_benchmark_quick_no_peers(tmp_path: Path) -> None:
    out = tmp_path / "inference.json"
    doc = ROOT / "docs" / "benchmarks.md"
    before = doc.read_bytes() if doc.exists() else None
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--no-peers", "--sizes", "6", "--dtypes", "float64",
         "--batch", "4", "--out-json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(out.read_text())

    routines = {t["routine"] for t in data["timings"]}
    for expected in ("nonproj logZ+marg single", "nonproj logZ+marg multi", "proj logZ+marg single",
                     "eisner single", "chu_liu_edmonds single", "eisner_kbest k=5 single",
                     "mbr_decode nonproj single", "mbr_decode proj single"):
        assert expected in routines
    for t in data["timings"]:
        assert t["library"] == "arboreal"
        assert t["error"] is None, t
        assert t["ms"] > 0
    assert data["checks"], "the k-best consistency checks did not run"
    for c in data["checks"]:
        assert c["max_rel"] < 1e-9, c
    assert data["tree_problems"] and all(p["bad"] == 0 for p in data["tree_problems"])
    scales = {row["scale"] for row in data["stability"]}
    assert scales == {1.0, 10.0, 100.0, 1000.0}
    for row in data["stability"]:
        assert "error" not in row, row
    assert (doc.read_bytes() if doc.exists() else None) == before, "--quick must not write the docs"
