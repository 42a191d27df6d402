"""Hostile and unusual input through the command line: output targets that are not
regular files, interruption, malformed CoNLL-U that used to pass or to give a
misleading message, and suspicious training data (issue 17)."""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from arboreal._atomic import Terminated, atomic_write
from arboreal.cli import main
from arboreal.io.conllu import read_conllu, write_conllu

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
ARBOREAL = [sys.executable, "-m", "arboreal"]


def W(i, form, head, rel="dep"):
    return f"{i}\t{form}\t{form.lower()}\tNOUN\tNN\t_\t{head}\t{rel}\t_\t_"


SENTENCE = "\n".join([W(1, "Birds", 2, "nsubj"), W(2, "sing", 0, "root"), W(3, "loudly", 2, "advmod")]) + "\n\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("reliability")
    sents = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")
    write_conllu(sents[:30], d / "train.conllu")
    write_conllu(sents[30:40], d / "in.conllu")
    model = d / "m.npz"
    assert main(["train", str(d / "train.conllu"), "-o", str(model), "--epochs", "1",
                 "--hash-bits", "16", "--quiet"]) == 0
    return d


def parse(files, out, capsys=None):
    return main(["parse", str(files / "m.npz"), str(files / "in.conllu"), "-o", str(out)])


def expected_output(files, tmp_path):
    ref = tmp_path / "reference.conllu"
    assert parse(files, ref) == 0
    return ref.read_bytes()


# ---------------------------------------------------------------- output targets


def test_output_to_a_character_device_writes_in_place(files):
    before = os.stat("/dev/null")
    assert parse(files, "/dev/null") == 0
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_full_device_is_a_one_line_error_and_stays_a_device(files, capsys):
    assert parse(files, "/dev/full") == 2
    err = capsys.readouterr().err
    assert err.startswith("arboreal: error: /dev/full: ") and err.count("\n") == 1
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_output_to_a_fifo_streams_into_it(files, tmp_path):
    expected = expected_output(files, tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    assert parse(files, fifo) == 0
    got, _ = reader.communicate(timeout=30)
    assert got == expected
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_output_to_a_process_substitution_path(files, tmp_path):
    # what bash hands over for >(cmd): a /dev/fd path of a pipe
    expected = expected_output(files, tmp_path)
    read_end, write_end = os.pipe()
    code = ("import sys; sys.exit(__import__('arboreal.cli', fromlist=['main'])"
            f".main(['parse', {str(files / 'm.npz')!r}, {str(files / 'in.conllu')!r}, '-o', "
            f"'/dev/fd/{write_end}']))")
    proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=(write_end,))
    os.close(write_end)
    with os.fdopen(read_end, "rb") as r:
        got = r.read()
    assert proc.wait(timeout=120) == 0
    assert got == expected


def test_symlink_is_followed_and_target_replaced(files, tmp_path):
    expected = expected_output(files, tmp_path)
    target = tmp_path / "real.conllu"
    target.write_text("old\n")
    target.chmod(0o640)
    link = tmp_path / "link.conllu"
    link.symlink_to(target)
    assert parse(files, link) == 0
    assert link.is_symlink() and target.read_bytes() == expected
    assert stat.S_IMODE(target.stat().st_mode) == 0o640   # permissions kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.conllu", "real.conllu", "reference.conllu"]


def test_dangling_symlink_creates_its_target(files, tmp_path):
    link = tmp_path / "link.conllu"
    link.symlink_to(tmp_path / "new.conllu")
    assert parse(files, link) == 0
    assert link.is_symlink() and (tmp_path / "new.conllu").stat().st_size > 0


def test_output_errors_name_the_users_path(files, tmp_path, capsys):
    missing = tmp_path / "no" / "such" / "dir" / "out.conllu"
    assert parse(files, missing) == 2
    assert capsys.readouterr().err == f"arboreal: error: {missing}: No such file or directory\n"
    assert parse(files, tmp_path) == 2
    assert capsys.readouterr().err == f"arboreal: error: {tmp_path}: is a directory\n"


def test_sigterm_during_parse_leaves_no_temporary_file(files, tmp_path):
    # No race with the machine's load: the parse reads standard input from a pipe this
    # test keeps open, so it cannot finish before the signal, and the signal is sent
    # once the temporary output file exists (the parse has provably begun writing).
    # The timeouts only bound a hang.
    data = (files / "in.conllu").read_bytes() * 3000
    out = tmp_path / "out.conllu"
    proc = subprocess.Popen(ARBOREAL + ["parse", str(files / "m.npz"), "-", "-o", str(out)],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE)

    def feed():
        try:
            proc.stdin.write(data)
            proc.stdin.flush()
        except (BrokenPipeError, ValueError):   # the parse was stopped before reading it all
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        deadline = time.monotonic() + 600
        while not any(p.name.endswith(".tmp") for p in tmp_path.iterdir()):
            assert proc.poll() is None, proc.stderr.read().decode(errors="replace")
            assert time.monotonic() < deadline, "no temporary output file after 600 s"
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=300) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
    err = proc.stderr.read()
    assert b"terminated" in err and b"Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("interruption", [KeyboardInterrupt, Terminated])
def test_an_interruption_just_after_the_temporary_file_is_made_removes_it(
        tmp_path, monkeypatch, interruption):
    # a signal whose handler runs at the first line after the temporary file exists
    # (the moment tempfile.mkstemp had not yet handed its name over)
    real_open = os.open

    def open_then_interrupted(path, flags, *args, **kwargs):
        fd = real_open(path, flags, *args, **kwargs)
        if os.fspath(path).endswith(".tmp"):
            os.close(fd)
            raise interruption()
        return fd

    target = tmp_path / "out.conllu"
    monkeypatch.setattr(os, "open", open_then_interrupted)
    with pytest.raises(interruption):
        atomic_write(target, lambda f: f.write(b"data"))
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []
    atomic_write(target, lambda f: f.write(b"data"))   # and without the interruption
    assert [p.name for p in tmp_path.iterdir()] == ["out.conllu"]


# ---------------------------------------------------------------- CoNLL-U input


@pytest.mark.parametrize("data, line, problem", [
    (SENTENCE.replace("\n", "\r").encode(), 1, "CR-only line endings"),
    (SENTENCE.replace("Birds", "Bi\x00rds").encode(), 1, "control character U+0000"),
    ((SENTENCE + SENTENCE.replace("loudly", "lou\x1bdly")).encode(), 7, "control character U+001B"),
    (SENTENCE.replace("\n2\t", "\r\n2\t").replace("Birds", "Bi\rrds").encode(), 1, "carriage return"),
    (("1-2\tab\t_\t_\t_\t_\t_\t_\t_\t_\n" + W(1, "a", 0, "root") + "\n2-3\tbc\t_\t_\t_\t_\t_\t_\t_\t_\n"
      + W(2, "b", 1) + "\n" + W(3, "c", 1) + "\n\n").encode(), 3, "overlaps the previous multiword token"),
])
def test_malformed_input_is_one_clear_error(tmp_path, capsys, data, line, problem):
    path = tmp_path / "bad.conllu"
    path.write_bytes(data)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"arboreal: error: {path}:{line}: ") and problem in err and err.count("\n") == 1


def test_streaming_reader_refuses_an_unbounded_sentence(tmp_path, monkeypatch):
    import arboreal.io.conllu as conllu

    monkeypatch.setattr(conllu, "MAX_SENTENCE_BYTES", 1000)
    path = tmp_path / "noblank.conllu"
    path.write_text("\n".join(W(i, "w", i - 1 if i > 1 else 0) for i in range(1, 200)) + "\n")
    with pytest.raises(conllu.FormatError, match="no blank line"):
        list(conllu.iter_conllu(path, chunk_bytes=100))


def test_parse_accepts_input_whose_old_heads_are_not_a_tree(files, tmp_path):
    cyclic = SENTENCE.replace("\t2\tnsubj", "\t3\tnsubj").replace("\t0\troot", "\t1\troot") \
        .replace("\t2\tadvmod", "\t9\tadvmod")
    path = tmp_path / "cyclic.conllu"
    path.write_text(cyclic)
    out = tmp_path / "out.conllu"
    assert main(["parse", str(files / "m.npz"), str(path), "-o", str(out)]) == 0
    (s,) = read_conllu(out)      # a valid tree now
    assert (s.heads[1:] >= 0).all()


def test_parse_clears_deps_that_would_contradict_the_new_tree(files, tmp_path):
    path = tmp_path / "deps.conllu"
    path.write_text(SENTENCE.replace("\tnsubj\t_", "\tnsubj\t2:nsubj"))
    out = tmp_path / "out.conllu"
    assert main(["parse", str(files / "m.npz"), str(path), "-o", str(out)]) == 0
    assert "2:nsubj" not in out.read_text()


def test_train_on_unparsed_input_suggests_nothing_it_does_not_accept(tmp_path, capsys):
    path = tmp_path / "unparsed.conllu"
    path.write_text(SENTENCE.replace("\t2\tnsubj", "\t_\tnsubj"))
    assert main(["train", str(path), "-o", str(tmp_path / "m.npz"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "HEAD is '_'" in err and "--allow-missing-heads" not in err and "allow_missing" not in err


def test_training_data_warnings(tmp_path, capsys):
    flat = "".join(SENTENCE.replace("\t2\tnsubj", "\t0\tnsubj").replace("\t2\tadvmod", "\t0\tadvmod")
                   for _ in range(5))
    path = tmp_path / "flat.conllu"
    path.write_text(flat)
    assert main(["train", str(path), "-o", str(tmp_path / "m.npz"), "--quiet", "--epochs", "1",
                 "--hash-bits", "12"]) == 0
    err = capsys.readouterr().err
    assert "arboreal: warning:" in err and "attached to the root" in err

    from arboreal.trees.diagnostics import training_data_warnings

    sents = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")
    assert training_data_warnings(sents) == []
    many = [s.with_tree(s.heads, [s.deprels[0]] + [f"rel{i}_{k}" for k in range(len(s))])
            for i, s in enumerate(sents)]
    assert any("distinct DEPREL" in w for w in training_data_warnings(many))
