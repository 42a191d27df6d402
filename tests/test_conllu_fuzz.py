"""Fuzzing CoNLL-U input (issue 17): generated treebanks, valid and broken, through
read_conllu, iter_conllu, `arboreal validate` and `arboreal parse`.

Valid treebanks (random trees, comments, multiword tokens, empty nodes, any script)
must round-trip byte for byte, read the same streamed in small chunks and with CRLF
line ends. Broken ones (bytes inserted, deleted or overwritten, lines dropped or
repeated, fields replaced, other encodings, truncation) must give sentences or a
FormatError naming the file and a line, and the command line one line
``arboreal: error: FILE:LINE: ...`` with exit status 2: never a traceback.
"""
from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arboreal.cli import main
from arboreal.errors import FormatError
from arboreal.io.conllu import format_conllu, iter_conllu, read_conllu, write_conllu

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"


def fuzz(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# field text: letters, digits, punctuation and symbols of any script, combining marks;
# no control characters, separators or surrogates (CoNLL-U fields hold none of those)
field = st.text(st.characters(whitelist_categories=("L", "M", "N", "P", "S")), min_size=1, max_size=6)
label = st.sampled_from(["nsubj", "obj", "root", "det", "nmod:poss", "punct", "x"])


@st.composite
def sentence_text(draw) -> str:
    n = draw(st.integers(1, 8))
    # a random tree: words in a random order, each attached to the root or an earlier one
    order = draw(st.permutations(range(1, n + 1)))
    heads = [0] * (n + 1)
    for k, m in enumerate(order):
        heads[m] = 0 if k == 0 else draw(st.sampled_from(order[:k]))
    lines = [f"# sent_id = {draw(st.integers(0, 10**6))}"]
    if draw(st.booleans()):
        lines.append(f"# text = {draw(field)} {draw(field)}")
    # non-overlapping multiword ranges, each standing right before its first word
    ranges = {}
    m = 1
    while m < n:
        if draw(st.integers(0, 3)) == 0:
            end = draw(st.integers(m + 1, min(n, m + 2)))
            ranges[m] = end
            m = end + 1
        else:
            m += 1
    empties = set(draw(st.lists(st.integers(1, n), max_size=2, unique=True)))
    for m in range(1, n + 1):
        if m in ranges:
            lines.append(f"{m}-{ranges[m]}\t{draw(field)}\t_\t_\t_\t_\t_\t_\t_\t_")
        feats = draw(st.sampled_from(["_", "Number=Sing", "Case=Nom|Number=Plur"]))
        misc = draw(st.sampled_from(["_", "SpaceAfter=No"]))
        lines.append(f"{m}\t{draw(field)}\t{draw(field)}\t{draw(st.sampled_from(['NOUN', 'VERB', 'X']))}"
                     f"\t{draw(field)}\t{feats}\t{heads[m]}\t{'root' if heads[m] == 0 else draw(label)}"
                     f"\t_\t{misc}")
        if m in empties:
            lines.append(f"{m}.1\t{draw(field)}\t_\t_\t_\t_\t_\t_\t{m}:dep\t_")
    return "\n".join(lines) + "\n\n"


treebank = st.lists(sentence_text(), min_size=1, max_size=4).map("".join)


@st.composite
def broken(draw) -> bytes:
    """A valid treebank, then one to three mutations of its bytes or lines."""
    data = draw(treebank).encode("utf-8")
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["insert", "delete", "overwrite", "drop_line", "repeat_line",
                                     "field", "encoding", "truncate", "line_end"]))
        if kind in ("insert", "overwrite", "delete") and data:
            at = draw(st.integers(0, len(data) - 1))
            byte = draw(st.sampled_from([b"\t", b"\n", b"\r", b"\x00", b"\xff", b"\xc3", b" ", b"_",
                                         b"-", b".", b"#", b"0", b"9", b"\x1b"]))
            if kind == "insert":
                data = data[:at] + byte + data[at:]
            elif kind == "overwrite":
                data = data[:at] + byte + data[at + 1:]
            else:
                data = data[:at] + data[at + 1:]
        elif kind in ("drop_line", "repeat_line", "field"):
            lines = data.split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            if kind == "drop_line":
                del lines[i]
            elif kind == "repeat_line":
                lines.insert(i, lines[i])
            else:
                cols = lines[i].split(b"\t")
                c = draw(st.integers(0, len(cols) - 1))
                cols[c] = draw(st.sampled_from([b"", b"_", b"-1", b"0", b"1-1", b"2.0", b"99999999999",
                                                b"1.1", b"3-2", b"x", "ü".encode()]))
                lines[i] = b"\t".join(cols)
            data = b"\n".join(lines)
        elif kind == "encoding":
            text = data.decode("utf-8", errors="replace")
            data = text.encode(draw(st.sampled_from(["utf-16", "latin-1", "utf-8-sig"])), errors="replace")
        elif kind == "truncate":
            data = data[:draw(st.integers(0, len(data)))]
        else:
            data = data.replace(b"\n", draw(st.sampled_from([b"\r\n", b"\r", b"\n\n"])))
    return data


def outcome(fn):
    """("ok", value) or ("error", FormatError); anything else propagates and fails."""
    try:
        return "ok", fn()
    except FormatError as exc:
        assert exc.path and (exc.line is None or exc.line >= 1), exc
        assert "\n" not in str(exc)
        return "error", exc


@fuzz(400)
@given(treebank)
def test_valid_treebanks_round_trip(text):
    sents = read_conllu(io.StringIO(text))
    assert format_conllu(sents) == text
    streamed = list(iter_conllu(io.BytesIO(text.encode()), chunk_bytes=64))
    assert format_conllu(streamed) == text
    crlf = text.replace("\n", "\r\n").encode()
    assert format_conllu(read_conllu(io.BytesIO(crlf))) == text


@fuzz(1000)
@given(broken())
def test_broken_input_gives_sentences_or_a_format_error(data):
    whole = outcome(lambda: read_conllu(io.BytesIO(data)))
    streamed = outcome(lambda: list(iter_conllu(io.BytesIO(data), chunk_bytes=64)))
    assert whole[0] == streamed[0]
    if whole[0] == "ok":
        assert format_conllu(whole[1]) == format_conllu(streamed[1])
        # what was read is valid: it reads back the same
        assert format_conllu(read_conllu(io.StringIO(format_conllu(whole[1])))) == format_conllu(whole[1])


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzzmodel")
    write_conllu(read_conllu(SAMPLE / "en_ewt-sample-train.conllu")[:30], d / "train.conllu")
    path = d / "m.npz"
    assert main(["train", str(d / "train.conllu"), "-o", str(path), "--epochs", "1",
                 "--hash-bits", "14", "--quiet"]) == 0
    return path


@fuzz(300)
@given(data=broken())
def test_command_line_on_broken_input(data, model, tmp_path, capsys):
    path = tmp_path / "in.conllu"
    path.write_bytes(data)
    out = tmp_path / "out.conllu"
    out.unlink(missing_ok=True)
    for argv in (["validate", str(path)], ["parse", str(model), str(path), "-o", str(out)]):
        status = main(argv)
        cap = capsys.readouterr()
        assert status in (0, 2), cap.err
        if status == 2:
            assert cap.err.startswith(f"arboreal: error: {path}") and cap.err.count("\n") == 1
        else:
            assert cap.err == ""
    if out.exists():   # a parse that succeeded wrote trees that validate
        assert main(["validate", str(out)]) == 0
        capsys.readouterr()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []
