#!/usr/bin/env bash
# Create the benchmark environment /work/main/.benchenv (git-ignored).
#
# It holds the peers that benchmarks/inference.py compares against --
# torch-struct and SuPar -- on the CPU-only torch wheel, UDPipe 1 (ufal.udpipe,
# for benchmarks/udpipe_baseline.py), plus arboreal itself (editable). The peers
# never enter arboreal's own dependencies.
#
# Order matters: torch is installed first and checked to be the CPU build
# (no nvidia-* / triton packages); torch-struct and supar then go in with
# --no-deps, followed by only what `import torch_struct` and
# `import supar.structs` actually need (supar/__init__ imports its parsers,
# which import dill, nltk and tqdm at module level; transformers and stanza
# are imported lazily and are not needed for supar.structs).
#
# Usage: bash benchmarks/setup_env.sh [ENV_DIR]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ENV="${1:-$ROOT/.benchenv}"
PY="${PYTHON:-python3}"
REQ="$ROOT/benchmarks/requirements-bench.txt"

if [ ! -x "$ENV/bin/python" ]; then
    "$PY" -m venv "$ENV"
fi
PIP=("$ENV/bin/python" -m pip)
"${PIP[@]}" install --quiet --upgrade pip

# 1. torch, CPU wheel. Dry-run first and refuse anything CUDA.
TORCH_SPEC="$(grep -E '^torch==' "$REQ")"
report="$(mktemp)"
"${PIP[@]}" install --dry-run --quiet --report "$report" "$TORCH_SPEC"
if "$ENV/bin/python" - "$report" <<'PYEOF'
import json, sys
items = json.load(open(sys.argv[1]))["install"]
names = [i["metadata"]["name"].lower() + "==" + i["metadata"]["version"] for i in items]
print("torch install plan:", " ".join(sorted(names)))
bad = [n for n in names if n.startswith(("nvidia", "triton", "cuda"))]
torch_v = [n for n in names if n.startswith("torch==")]
if bad or (torch_v and "+cpu" not in torch_v[0]):
    print("refusing: this plan pulls a CUDA build:", bad or torch_v, file=sys.stderr)
    sys.exit(1)
PYEOF
then :; else rm -f "$report"; exit 1; fi
rm -f "$report"
"${PIP[@]}" install "$TORCH_SPEC"

# 2. peers without their heavy dependency trees, then what their structs import.
"${PIP[@]}" install --no-deps $(grep -E '^(torch-struct|supar)==' "$REQ")
"${PIP[@]}" install $(grep -vE '^(#|$|torch==|torch-struct==|supar==)' "$REQ")

# 3. arboreal itself, editable.
"${PIP[@]}" install --no-deps -e "$ROOT"

# 4. check: the imports the benchmark uses, and still no CUDA packages.
"$ENV/bin/python" - <<'PYEOF'
import importlib.metadata as md
import torch, torch_struct, supar.structs, supar.structs.fn, numpy, numba, arboreal
import ufal.udpipe
cuda = [d.metadata["Name"] for d in md.distributions()
        if d.metadata["Name"].lower().startswith(("nvidia", "triton"))]
assert not cuda, f"CUDA packages present: {cuda}"
print("bench env ok: torch", torch.__version__, "| torch-struct", md.version("torch-struct"),
      "| supar", md.version("supar"), "| ufal.udpipe", md.version("ufal.udpipe"),
      "| numpy", numpy.__version__, "| numba", numba.__version__)
PYEOF
