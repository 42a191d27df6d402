"""CoNLL-U / CoNLL-X reading and writing: content, round trips, every malformed case."""
from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arboreal.errors import FormatError
from arboreal.io import (
    ROOT_TOKEN,
    Sentence,
    encode_column,
    format_conllu,
    iter_conllu,
    read_conllu,
    write_conllu,
)

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample"
UD = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "ud"


def W(i, form, head, rel, upos="NOUN", lemma=None, xpos="NN", feats="_", deps="_", misc="_"):
    """One word line."""
    return "\t".join([str(i), form, lemma or form.lower(), upos, xpos, feats, str(head), rel, deps, misc])


GOOD = "\n".join([
    "# newdoc id = d1",
    "# sent_id = s1",
    "# text = Don't go.",
    "1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\t_",
    W(1, "Do", 3, "aux", "AUX", "do", "VBP"),
    W(2, "n't", 3, "advmod", "PART", "not", "RB"),
    W(3, "go", 0, "root", "VERB", "go", "VB", "VerbForm=Inf", "0:root", "SpaceAfter=No"),
    "3.1\tgo\tgo\tVERB\tVB\t_\t_\t_\t3:conj\t_",
    W(4, ".", 3, "punct", "PUNCT", ".", "."),
    "",
    "# sent_id = s2",
    W(1, "Birds", 2, "nsubj"),
    W(2, "sing", 0, "root", "VERB"),
    W(3, "loudly", 2, "advmod:emph", "ADV"),
    "",
    "",
])


def read_text(text: str | bytes, **kw) -> list[Sentence]:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return read_conllu(io.BytesIO(data), **kw)


def bad(text: str | bytes, **kw) -> FormatError:
    with pytest.raises(FormatError) as info:
        read_text(text, **kw)
    return info.value


# ----------------------------------------------------------------------------
# content


def test_reads_columns_comments_and_extra_lines():
    s1, s2 = read_text(GOOD)
    assert len(s1) == 4 and len(s2) == 3
    assert s1.forms.tolist() == [ROOT_TOKEN, "Do", "n't", "go", "."]
    assert s1.lemmas[1:].tolist() == ["do", "not", "go", "."]
    assert s1.upos[1:].tolist() == ["AUX", "PART", "VERB", "PUNCT"]
    assert s1.xpos[1:].tolist() == ["VBP", "RB", "VB", "."]
    assert s1.feats[3] == "VerbForm=Inf" and s1.deps[3] == "0:root" and s1.misc[3] == "SpaceAfter=No"
    assert s1.heads.dtype == np.int32
    assert s1.heads.tolist() == [-1, 3, 3, 0, 3]
    assert s1.deprels[1:].tolist() == ["aux", "advmod", "root", "punct"]
    assert s1.comments == ["# newdoc id = d1", "# sent_id = s1", "# text = Don't go."]
    assert [k for k, _ in s1.extra] == [0, 3]
    assert s1.extra[0][1].startswith("1-2\tDon't") and s1.extra[1][1].startswith("3.1\t")
    assert s1.sent_id == "s1" and s2.sent_id == "s2"
    assert s1.line == 1 and s2.line == 11
    assert s1.has_heads and s2.deprels[3] == "advmod:emph"
    for name in ("forms", "lemmas", "upos", "xpos", "feats", "deprels", "deps", "misc"):
        arr = getattr(s2, name)
        assert arr.dtype == object and arr.shape == (4,) and arr[0] == ROOT_TOKEN


def test_round_trip_small_text_and_modified_tree():
    sents = read_text(GOOD)
    assert format_conllu(sents) == GOOD
    changed = sents[1].with_tree(np.array([-1, 0, 1, 1]), np.array(["_", "root", "dep", "dep"], dtype=object))
    text = format_conllu([sents[0], changed])
    assert W(2, "sing", 1, "dep", "VERB") in text and W(1, "Birds", 0, "root") in text
    assert format_conllu([sents[1]]) == GOOD.split("\n\n", 1)[1]  # the original is untouched


def test_from_columns_builds_a_writable_sentence():
    s = Sentence.from_columns(["a", "b"], heads=[2, 0], deprels=["det", "root"], upos=["DET", "NOUN"])
    assert len(s) == 2 and s.forms[0] == ROOT_TOKEN and s.heads.tolist() == [-1, 2, 0]
    text = format_conllu([s])
    assert text == "1\ta\t_\tDET\t_\t_\t2\tdet\t_\t_\n2\tb\t_\tNOUN\t_\t_\t0\troot\t_\t_\n\n"
    assert format_conllu(read_text(text)) == text


def sample_files():
    return sorted(SAMPLE.glob("*.conllu"))


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.name)
def test_sample_round_trip_byte_exact(path, tmp_path):
    sents = read_conllu(path)
    out = tmp_path / "out.conllu"
    write_conllu(sents, out)
    assert out.read_bytes() == path.read_bytes()


def ud_files():
    return sorted(UD.glob("*/*.conllu")) if UD.is_dir() else []


@pytest.mark.skipif(not UD.is_dir(), reason="../shared/data/ud not present")
def test_every_shared_treebank_round_trips_byte_exact():
    files = ud_files()
    assert files
    for path in files:
        data = path.read_bytes()
        assert format_conllu(read_conllu(io.BytesIO(data))).encode("utf-8") == data, path


def test_stdin_stdout_text_and_binary_files(monkeypatch, capsysbinary, tmp_path):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(GOOD.encode("utf-8"))))
    sents = read_conllu("-")
    assert len(sents) == 2
    write_conllu(sents, "-")
    assert capsysbinary.readouterr().out == GOOD.encode("utf-8")
    assert len(read_conllu(io.StringIO(GOOD))) == 2
    buf = io.StringIO()
    write_conllu(sents, buf)
    assert buf.getvalue() == GOOD
    p = tmp_path / "x.conllu"
    p.write_text(GOOD, encoding="utf-8")
    assert [len(s) for s in read_conllu(str(p))] == [4, 3]
    with open(p, "rb") as f:
        assert [len(s) for s in read_conllu(f)] == [4, 3]


def test_write_to_path_is_atomic(tmp_path, monkeypatch):
    target = tmp_path / "out.conllu"
    target.write_text("old contents\n")
    sents = read_text(GOOD)
    write_conllu(sents, target)
    assert target.read_text() == GOOD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.conllu"]

    class Boom(Exception):
        pass

    def fail(*a, **k):
        raise Boom()

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(Boom):
        write_conllu(sents[:1], target)
    assert target.read_text() == GOOD  # untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.conllu"]  # temp file removed


def test_allow_missing_heads_reads_and_writes_underscores():
    text = W(1, "Birds", "_", "_") + "\n" + W(2, "sing", "_", "_", "VERB") + "\n\n"
    e = bad(text)
    assert e.line == 1 and "unparsed input" in e.problem
    (s,) = read_text(text, allow_missing_heads=True)
    assert s.heads.tolist() == [-1, -1, -1] and not s.has_heads
    assert format_conllu([s]) == text
    parsed = s.with_tree(np.array([-1, 2, 0]), np.array(["", "nsubj", "root"], dtype=object))
    assert parsed.has_heads and "\t2\tnsubj\t" in format_conllu([parsed])


def test_crlf_bom_and_missing_final_blank_line_are_normalised():
    canonical = read_text(GOOD)
    crlf = GOOD.replace("\n", "\r\n").encode("utf-8")
    assert format_conllu(read_text(crlf)) == GOOD
    assert format_conllu(iter_conllu(io.BytesIO(crlf * 3), chunk_bytes=50)) == GOOD * 3
    assert format_conllu(read_text(b"\xef\xbb\xbf" + GOOD.encode())) == GOOD
    assert format_conllu(read_text(GOOD[:-1])) == GOOD
    assert format_conllu(read_text(GOOD.replace("\n\n#", "\n\n\n\n#"))) == GOOD
    assert [len(s) for s in canonical] == [4, 3]


def test_conllx_columns_and_strict_mode():
    conllx = "\n".join([
        "1\tThe\tthe\tDT\tDT\t_\t2\tNMOD\t2\tNMOD",
        "2\tdog\tdog\tNN\tNN\t_\t3\tSBJ\t_\t_",
        "3\tbarks\tbark\tVB\tVBZ\t_\t0\tROOT\t_\t_",
        "", "",
    ])
    for fmt in ("conllu", "conllx"):
        (s,) = read_text(conllx, format=fmt)
        assert s.upos[1:].tolist() == ["DT", "NN", "VB"]  # CPOSTAG
        assert s.xpos[1:].tolist() == ["DT", "NN", "VBZ"]  # POSTAG
        assert s.deps[1] == "2" and s.misc[1] == "NMOD"  # PHEAD, PDEPREL kept
        assert format_conllu([s]) == conllx
    e = bad(GOOD, format="conllx")
    assert e.line == 1 and "CoNLL-X" in e.problem
    with pytest.raises(ValueError):
        read_text(GOOD, format="xml")


def test_iter_conllu_streams_in_chunks_with_correct_line_numbers(tmp_path):
    p = tmp_path / "many.conllu"
    p.write_text(GOOD * 20, encoding="utf-8")
    streamed = list(iter_conllu(p, chunk_bytes=100))
    whole = read_conllu(p)
    assert len(streamed) == len(whole) == 40
    assert format_conllu(streamed) == format_conllu(whole) == GOOD * 20
    assert [s.line for s in streamed] == [s.line for s in whole]
    broken = GOOD * 5 + W(1, "x", 0, "root") + "\n" + W(3, "y", 1, "dep") + "\n\n"
    p.write_text(broken, encoding="utf-8")
    with pytest.raises(FormatError) as info:
        list(iter_conllu(p, chunk_bytes=64))
    assert info.value.line == 5 * 15 + 2
    with pytest.raises(FormatError) as info:
        list(iter_conllu(io.BytesIO(b"")))
    assert "empty file" in info.value.problem


# ----------------------------------------------------------------------------
# malformed input: one error, naming the line


def lines_of(*ls: str) -> str:
    return "\n".join(ls) + "\n\n"


OK1 = W(1, "a", 2, "det")
OK2 = W(2, "b", 0, "root")


@pytest.mark.parametrize(
    "text, line, words",
    [
        # wrong column count
        (lines_of(OK1, "2\tb\tb\tNOUN\tNN\t_\t0\troot\t_"), 2, ["column", "9"]),
        (lines_of(OK1, OK2 + "\textra"), 2, ["column", "11"]),
        (lines_of("# c", OK1, "   ", OK2), 3, ["whitespace"]),
        # HEAD not an integer / out of range
        (lines_of(OK1, W(2, "b", "x", "root")), 2, ["HEAD", "'x'", "integer"]),
        (lines_of(OK1, W(2, "b", "-1", "root")), 2, ["HEAD", "'-1'"]),
        (lines_of(OK1, W(2, "b", "1.5", "root")), 2, ["HEAD", "'1.5'"]),
        (lines_of(OK1, OK2, W(3, "c", 7, "dep")), 3, ["HEAD 7", "out of range", "3 words"]),
        # IDs not 1..n in order
        (lines_of(OK1, W(3, "b", 0, "root")), 2, ["ID '3'", "expected 2"]),
        (lines_of(W(2, "a", 0, "root")), 1, ["ID '2'", "expected 1"]),
        (lines_of(OK1, OK2, W(2, "c", 2, "dep")), 3, ["ID '2'", "expected 3"]),
        (lines_of(OK1, W(0, "b", 0, "root")), 2, ["invalid ID '0'"]),
        (lines_of(OK1, "x" + OK2), 2, ["invalid ID 'x2'"]),
        (lines_of(W("01", "a", 2, "det"), OK2), 1, ["invalid ID '01'"]),
        # self head
        (lines_of(OK1, OK2, W(3, "c", 3, "dep")), 3, ["word 3 is its own head"]),
        # no word attached to the root
        (lines_of(OK1, W(2, "b", 1, "dep")), 1, ["no word is attached to the root"]),
        # multiword range not covering existing words / misplaced
        (lines_of("1-3\tab\t_\t_\t_\t_\t_\t_\t_\t_", OK1, OK2), 1, ["1-3", "beyond the end", "2 words"]),
        (lines_of(OK1, "1-2\tab\t_\t_\t_\t_\t_\t_\t_\t_", OK2), 2, ["1-2", "before word 1"]),
        (lines_of("2-1\tab\t_\t_\t_\t_\t_\t_\t_\t_", OK1, OK2), 1, ["2-1"]),
        (lines_of(OK1, "2.1\tx\t_\t_\t_\t_\t_\t_\t_\t_", OK2), 2, ["empty node 2.1"]),
        # comments
        (lines_of(OK1, "# late", OK2), 2, ["comment line inside a sentence"]),
        ("# lonely comment\n", 1, ["comment lines not followed by a sentence"]),
        (lines_of("1-2\tab\t_\t_\t_\t_\t_\t_\t_\t_"), 1, ["without words"]),
        # empty file
        ("", 1, ["empty file"]),
        ("\n\n\n", 1, ["empty file"]),
    ],
)
def test_malformed_input_names_line_and_problem(text, line, words):
    e = bad(text)
    assert e.line == line, str(e)
    for w in words:
        assert w in e.problem, str(e)
    assert "\n" not in str(e)
    assert str(e) == f"<stream>:{line}: {e.problem}"


def test_errors_after_good_sentences_count_lines_of_the_whole_file():
    text = GOOD + lines_of(OK1, W(2, "b", 9, "root"))
    e = bad(text)
    assert e.line == GOOD.count("\n") + 2


def test_head_cycle_names_the_words_of_the_cycle():
    text = lines_of(W(1, "I", 2, "nsubj"), W(2, "saw", 0, "root"), W(3, "big", 5, "amod"),
                    W(4, "red", 3, "amod"), W(5, "dogs", 4, "obj"))
    e = bad(text)
    assert e.line == 3
    assert "head cycle" in e.problem
    assert "3 'big' -> 5 'dogs' -> 4 'red' -> 3" in e.problem


def test_invalid_utf8_names_the_line(tmp_path):
    data = (GOOD + lines_of(OK1, W(2, "caf\u00e9", 0, "root"))).encode("utf-8")
    data = data.replace("caf\u00e9".encode(), b"caf\xe9")
    p = tmp_path / "latin1.conllu"
    p.write_bytes(data)
    with pytest.raises(FormatError) as info:
        read_conllu(p)
    e = info.value
    assert e.path == str(p) and e.line == GOOD.count("\n") + 2
    assert "invalid UTF-8" in e.problem and "0xe9" in e.problem
    assert str(e).startswith(f"{p}:{e.line}: ")


def test_error_message_names_the_file(tmp_path):
    p = tmp_path / "bad.conllu"
    p.write_text(lines_of(OK1, W(2, "b", 2, "root")))
    with pytest.raises(FormatError) as info:
        read_conllu(p)
    assert str(info.value) == f"{p}:2: word 2 is its own head"


def test_missing_heads_mixed_with_given_heads_still_checks_cycles():
    text = lines_of(W(1, "a", 2, "x"), W(2, "b", 1, "x"), W(3, "c", "_", "_"))
    e = bad(text, allow_missing_heads=True)
    assert "head cycle" in e.problem
    (s,) = read_text(lines_of(W(1, "a", 2, "x"), W(2, "b", "_", "_")), allow_missing_heads=True)
    assert s.heads.tolist() == [-1, 2, -1]


# ----------------------------------------------------------------------------
# integer-coded columns


def test_encode_column_codes_and_vocab():
    sents = read_text(GOOD)
    codes, vocab = encode_column(sents, "upos")
    inverse = {v: k for k, v in vocab.items()}
    for s, c in zip(sents, codes):
        assert c.dtype == np.int32 and c.shape == (len(s) + 1,)
        assert [inverse[x] for x in c] == s.upos.tolist()
    assert list(vocab) == sorted(vocab)
    codes2, vocab2 = encode_column(sents[1:], "upos", vocab={"NOUN": 0, "VERB": 1})
    assert codes2[0].tolist() == [-1, 0, 1, -1]
    codes3, vocab3 = encode_column(sents, "deprels", universal=True)
    assert "advmod" in vocab3 and "advmod:emph" not in vocab3
    assert codes3[1][3] == vocab3["advmod"]


# ----------------------------------------------------------------------------
# property test: random sentences survive format -> read -> format


FIELD = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"),
                                       blacklist_characters="\t\n\r\x85\u2028\u2029"),
                min_size=1, max_size=6).filter(lambda s: s.strip() == s and s != "")


@st.composite
def random_sentence(draw):
    n = draw(st.integers(1, 8))
    # a random tree: attach words in a random order to already attached ones
    order = draw(st.permutations(range(1, n + 1)))
    heads = [-1] + [0] * n
    placed = [0]
    for i, m in enumerate(order):
        heads[m] = 0 if i == 0 else draw(st.sampled_from(placed))
        placed.append(m)
    forms = draw(st.lists(FIELD, min_size=n, max_size=n))
    rels = draw(st.lists(st.sampled_from(["nsubj", "obj", "nmod:poss", "dep"]), min_size=n, max_size=n))
    comments = draw(st.lists(FIELD.map(lambda t: "# " + t), max_size=2))
    s = Sentence.from_columns(forms, heads=heads[1:], deprels=rels, comments=comments)
    if draw(st.booleans()):
        k = draw(st.integers(1, n))
        if k < n:
            s.extra = [(k - 1, f"{k}-{k + 1}\tmwt\t_\t_\t_\t_\t_\t_\t_\t_")]
    return s


@settings(max_examples=60, deadline=None)
@given(st.lists(random_sentence(), min_size=1, max_size=4))
def test_random_sentences_round_trip(sents):
    text = format_conllu(sents)
    back = read_text(text)
    assert format_conllu(back) == text
    for a, b in zip(sents, back):
        assert a.forms.tolist() == b.forms.tolist()
        assert a.heads.tolist() == b.heads.tolist()
        assert a.deprels[1:].tolist() == b.deprels[1:].tolist()
        assert a.comments == b.comments and a.extra == b.extra


# ----------------------------------------------------------------------------
# fuzzing: any corruption is either read or rejected with a FormatError


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(GOOD.encode())), st.integers(0, 3),
                          st.sampled_from([b"\t", b"\n", b"", b"0", b"7", b"_", b"-", b".", b"#", b"\xff", b" ",
                                           b"1-2", b"\xc3"])),
                min_size=1, max_size=4))
def test_corrupted_input_never_crashes(edits):
    data = bytearray(GOOD.encode("utf-8"))
    for pos, cut, ins in edits:
        pos = min(pos, len(data))
        data[pos : pos + cut] = ins
    try:
        sents = read_text(bytes(data))
    except FormatError as e:
        assert e.line is not None and 1 <= e.line <= data.count(b"\n") + 1
        assert "\n" not in str(e)
    else:
        text = format_conllu(sents)
        assert format_conllu(read_text(text)) == text  # what was accepted is valid


@pytest.mark.parametrize("line, column", [
    ("1\ta\t\tNOUN\t_\t_\t0\troot\t_\t_", 3),
    ("1\ta\ta\tNOUN\t_\t_\t0\troot\t_\t", 10),
    ("1\ta\ta\tNOUN\t\t_\t0\troot\t_\t", 5),
])
def test_empty_fields_are_rejected(line, column):
    e = bad(line + "\n\n")
    assert e.line == 1 and f"empty field in column {column}" in e.problem
