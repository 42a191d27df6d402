"""The README's examples run as written (issue 41).

The quick start (the README's first command, without its ``pip install .``: the package
under test is already importable) runs in an empty folder holding only a link to
``data/``; its evaluation must print the figures the README quotes. Then every fenced
``sh`` and ``python`` block of README.md, then of docs/commands.md,
docs/models-by-name.md and docs/python.md (:data:`PAGES`), runs verbatim, in order, in
that folder, on the files the blocks before made: each ``sh`` block through ``bash -e -o
pipefail`` (``arboreal`` is this interpreter's ``python -m arboreal``), the ``python``
blocks one after the other in one namespace, as a reader pasting them into one Python
session would. Two ``sh`` blocks do not run, named in :data:`NOT_RUN` with the reason;
any other block added to the README runs.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
#: the pages whose examples run after the README's, in this order
PAGES = [README, REPO / "docs" / "commands.md", REPO / "docs" / "models-by-name.md",
         REPO / "docs" / "python.md"]
INSTALL = "pip install . && "

#: sh blocks that do not run here: (a string the block holds, why)
NOT_RUN = (
    ("python -m pytest", "the test suite itself"),
    ("arboreal serve", "starts a server (tests/test_serve.py runs it)"),
)

#: runs the blocks given as JSON [(language, first line, text), ...] in order
DRIVER = r'''
import json, subprocess, sys
blocks = json.load(open(sys.argv[1], encoding="utf-8"))
namespace = {"__name__": "__main__"}
for language, line, text in blocks:
    kind, _, page = language.partition(" ")
    page = page or "README.md"
    print(f"--- {page} line {line} ({kind})", flush=True)
    if kind == "python":
        # padded so that a traceback names the page's own line numbers
        exec(compile("\n" * line + text, page, "exec"), namespace)
    else:
        r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", text])
        if r.returncode:
            sys.exit(f"{page} line {line}: the sh block exited with status {r.returncode}")
'''


def fenced_blocks() -> list[tuple[str, int, str]]:
    """(language, line of the opening fence, text) of every fenced block of README.md,
    then of the other :data:`PAGES`, the page named in the language when it is not the
    README (``"python docs/python.md"``)."""
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.M | re.S):
            language = m.group(1) if page == README else \
                f"{m.group(1)} {page.relative_to(REPO)}"
            out.append((language, text.count("\n", 0, m.start()) + 1, m.group(2)))
    return out


def quoted_quick_start_figures() -> dict[str, float]:
    """The figures the README's quick start paragraph quotes ("on the sample: Tokens
    98.79, UPOS 92.30, ... F1")."""
    text = " ".join(README.read_text(encoding="utf-8").split())
    m = re.search(r"on the sample: ((?:\w+ [0-9.]+, )*\w+ [0-9.]+) F1", text)
    assert m, "the README no longer quotes the quick start's figures as expected here"
    return {name: float(value) for name, value in
            (item.split() for item in m.group(1).split(", "))}


@pytest.fixture
def workdir(tmp_path):
    # a checkout's data/ and examples/, as a user in the repository has them
    (tmp_path / "data").symlink_to(REPO / "data")
    (tmp_path / "examples").symlink_to(REPO / "examples")
    bin_dir = tmp_path.parent / f"{tmp_path.name}-bin"
    bin_dir.mkdir()
    shim = bin_dir / "arboreal"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m arboreal "$@"\n')
    shim.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTHONSTARTUP", None)
    return tmp_path, env


def test_readme_examples_run_as_written(workdir):
    folder, env = workdir
    blocks = [b for b in fenced_blocks() if b[0].split()[0] in ("sh", "python")]
    shell = [b for b in blocks if b[0].split()[0] == "sh"]
    assert blocks[0] == shell[0] and shell[0][2].startswith(INSTALL), \
        "the README's first block is no longer the quick start"
    quick_start = shell[0][2][len(INSTALL):]
    skipped = [b for b in shell[1:] if any(key in b[2] for key, _ in NOT_RUN)]
    assert len(skipped) == len(NOT_RUN), [b[1] for b in skipped]

    # the quick start: parse raw text with the shipped model, evaluate; the figures the
    # README quotes
    r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", quick_start], cwd=folder, env=env,
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    printed = {line.split("|")[0].strip(): line.split("|")[3].strip()
               for line in r.stdout.splitlines() if line.count("|") == 4}
    for name, value in quoted_quick_start_figures().items():
        assert printed.get(name) == f"{value:.2f}", \
            f"README quotes {name} {value:.2f}, the quick start printed {printed.get(name)}"
    assert (folder / "sample.parsed.conllu").stat().st_size > 0

    # then every other block, in order, verbatim; what a user's machine would have is
    # stood in for inside the test's folder: a model index (the shipped model under the
    # name en_ewt), the model cache, and a pip target for the model package (no
    # network, nothing installed into the suite's environment)
    from arboreal.models.names import shipped_models

    model = shipped_models()["en_ewt"]
    (folder / "index.json").write_text(json.dumps({
        "format": "arboreal-model-index", "format_version": 1,
        "models": [{"name": "en_ewt", "version": "1.0", "url": model.as_uri(),
                    "sha256": hashlib.sha256(model.read_bytes()).hexdigest(),
                    "size": model.stat().st_size, "license": "CC BY-SA 4.0"}]}),
        encoding="utf-8")
    site = folder.parent / f"{folder.name}-site"
    env = {**env, "ARBOREAL_INDEX": str(folder / "index.json"),
           "ARBOREAL_HOME": str(folder.parent / f"{folder.name}-home"),
           "PIP_TARGET": str(site), "PIP_NO_INDEX": "1", "PIP_NO_DEPS": "1",
           "PYTHONPATH": f"{site}{os.pathsep}{env['PYTHONPATH']}"}
    rest = [b for b in blocks[1:] if b not in skipped]
    script = folder.parent / f"{folder.name}-blocks.json"
    script.write_text(json.dumps(rest), encoding="utf-8")
    r = subprocess.run([sys.executable, "-c", DRIVER, str(script)], cwd=folder, env=env,
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-5000:])
    ran = [line for line in r.stdout.splitlines() if line.startswith("--- ") and " line " in line]
    assert len(ran) == len(rest)

    # what the blocks say they write
    train = REPO / "data" / "sample" / "en_ewt-sample-train.conllu"
    assert (folder / "copy.conllu").read_bytes() == train.read_bytes()
    assert (folder.parent / f"{folder.name}-home" / "models" / "en_ewt").is_dir()
    assert any(site.glob("arboreal_model_sample*"))
    for name in ("sample.model", "by-name.conllu", "parsed.conllu", "trees.html",
                 "marginals.html", "parser.model", "test.parsed.conllu"):
        assert (folder / name).stat().st_size > 0, name
    assert len(json.loads((folder / "sample.json").read_text(encoding="utf-8"))) > 100
