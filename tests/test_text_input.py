"""Text as people have it: one sentence per line (``--input lines``, the API's
``lines=True``, the server's ``tokenizer=presegmented``), a byte order mark, a reader
that closes the pipe after two lines; and outputs checked before the work."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from arboreal.cli import main
from arboreal.io.conllu import read_conllu

LINES = "The cat sat on the mat. It slept\nDr. Smith arrived. He left.\n\nA new paragraph\n"


def _run(*args, stdin: str | bytes | None = None, timeout: float = 300):
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return subprocess.run([sys.executable, "-m", "arboreal", *args], input=data,
                          capture_output=True, timeout=timeout,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


def _sentences(conllu: bytes) -> list:
    import io

    return read_conllu(io.StringIO(conllu.decode("utf-8")))


def test_lines_input_keeps_one_sentence_per_line(tiny_pipeline):
    out = _run("parse", str(tiny_pipeline), "-", "--input", "lines", stdin=LINES)
    assert out.returncode == 0, out.stderr
    sentences = _sentences(out.stdout)
    # each line one sentence, whatever the tokenizer makes of its words
    assert ["".join(s.forms[1:].tolist()) for s in sentences] == [
        line.replace(" ", "") for line in LINES.splitlines() if line]
    newpar = [any(c == "# newpar" for c in s.comments) for s in sentences]
    assert newpar == [True, False, True]
    # the same text as paragraphs: split into sentences by the model
    out = _run("parse", str(tiny_pipeline), "-", "--input", "text", stdin=LINES)
    assert len(_sentences(out.stdout)) > 3


def test_lines_in_the_python_api_and_the_server(tiny_pipeline):
    import arboreal
    from arboreal.server import make_app, process

    model = arboreal.load(tiny_pipeline)
    parsed = model.parse_text(LINES, lines=True)
    assert ["".join(s.forms[1:].tolist()) for s in parsed] == [
        line.replace(" ", "") for line in LINES.splitlines() if line]
    served = make_app({"m": model}).models["m"]
    result = process(served, {"data": LINES, "tokenizer": "presegmented", "parser": ""})
    assert result.count("# sent_id") == 3
    assert process(served, {"data": LINES, "tokenizer": "", "parser": ""}).count(
        "# sent_id") > 3


@pytest.mark.parametrize("mode", ["text", "tokenized", "lines", "auto"])
def test_a_byte_order_mark_is_no_part_of_the_first_word(tiny_pipeline, tmp_path, mode):
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbfThe cat sat .\n")
    out = _run("parse", str(tiny_pipeline), str(path), "--input", mode)
    assert out.returncode == 0, out.stderr
    assert _sentences(out.stdout)[0].forms[1] == "The"


def test_a_closed_pipe_is_141_whatever_the_size_of_the_output(tiny_pipeline, tmp_path):
    from pathlib import Path

    sample = Path(__file__).resolve().parents[1] / "data" / "sample"
    for source in (sample / "en_ewt-sample-test.conllu",):     # one block of output
        proc = subprocess.Popen([sys.executable, "-m", "arboreal", "parse", str(tiny_pipeline),
                                 str(source)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, "OMP_NUM_THREADS": "1"})
        proc.stdout.readline()
        proc.stdout.readline()
        proc.stdout.close()                      # as `| head -2` does
        assert proc.wait(timeout=300) == 141
        assert proc.stderr.read() == b""


def test_training_fails_before_the_work_when_the_model_cannot_be_written(tmp_path):
    """The outputs are checked before anything is read: with a treebank that does not
    exist, the error is still the output's."""
    absent = tmp_path / "absent.conllu"
    for output in (tmp_path / "missing" / "x.model", tmp_path):
        out = _run("train", str(absent), "-o", str(output))
        assert out.returncode == 2
        lines = out.stderr.decode().strip().splitlines()
        assert len(lines) == 1 and str(output) in lines[0], lines
    out = _run("train", str(absent), "-o", str(tmp_path / "x.model"), "--checkpoint",
               str(tmp_path / "no" / "ck"))
    assert out.returncode == 2 and b"no such directory" in out.stderr
    assert main(["train", str(absent), "-o", "-"]) == 2
