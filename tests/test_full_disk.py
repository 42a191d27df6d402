"""A full disk: every writer (model, parse output, clusters file, lexicon) gives one line
and exit 2, leaves the previous file intact and no temporary file.

The disk is a small tmpfs that the test mounts (root only: the test is skipped with the
reason elsewhere) and fills to the last block before the command runs, so the command's
first write fails with ENOSPC; a late ENOSPC (at fsync, as NFS or FUSE report it) is
checked in process by making fsync fail."""
from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from arboreal.cli import main
from arboreal.io.conllu import read_conllu, write_conllu

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
OLD = b"the previous version of the file\n"


def _mount_tmpfs(where: Path, size: str) -> str | None:
    """Mount a tmpfs of ``size`` on ``where``; None, or why it cannot be done."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return f"mounting a tmpfs needs root (this test runs as uid {os.getuid()})"
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755",
                               "tmpfs", str(where)], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run mount: {exc}"
    if done.returncode != 0:
        return f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}"
    return None


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs of the test's own, unmounted afterwards whatever happens."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    why = _mount_tmpfs(mount_point, "1m")
    if why:
        pytest.skip(why)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, timeout=60)


def fill(disk: Path) -> None:
    """Fill ``disk`` to its last block (a file grown until ENOSPC)."""
    with open(disk / "filler", "wb", buffering=0) as f:
        block = b"\0" * 4096
        try:
            while True:
                f.write(block)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    assert os.statvfs(disk).f_bavail == 0


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    train = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")[:60]
    write_conllu(train, d / "train.conllu")
    (d / "corpus.txt").write_text(
        "\n".join(" ".join(s.forms[1:].tolist()) for s in train) + "\n", encoding="utf-8")
    assert main(["train", str(d / "train.conllu"), "-o", str(d / "m.model"), "--epochs", "1",
                 "--hash-bits", "14", "--no-tagger", "--no-tokenizer", "--quiet"]) == 0
    return d


def _commands(inputs: Path, out: Path) -> dict[str, list[str]]:
    return {
        "model": ["train", str(inputs / "train.conllu"), "-o", str(out), "--epochs", "1",
                  "--hash-bits", "14", "--no-tagger", "--no-tokenizer", "--quiet"],
        "parse output": ["parse", str(inputs / "m.model"), str(inputs / "train.conllu"),
                         "-o", str(out), "--quiet"],
        "parse output, 2 jobs": ["parse", str(inputs / "m.model"),
                                 str(inputs / "train.conllu"), "-o", str(out), "--jobs", "2",
                                 "--quiet"],
        "clusters file": ["clusters", str(inputs / "corpus.txt"), "-o", str(out),
                          "--clusters", "4", "--quiet"],
        "lexicon": ["lexicon", str(inputs / "corpus.txt"), "-o", str(out), "--quiet",
                    "--min-count", "1"],
    }


WRITERS = ["model", "parse output", "parse output, 2 jobs", "clusters file", "lexicon"]


def _run(argv: list[str], monkeypatch) -> int:
    import arboreal.cli as cli

    for name in ("clusters", "lexicon"):   # subcommands the command line may not list yet
        if name not in cli.SUBCOMMANDS:
            monkeypatch.setattr(cli, "SUBCOMMANDS", cli.SUBCOMMANDS + (name,))
    return cli.main(argv)


@pytest.mark.parametrize("writer", WRITERS)
def test_full_disk_is_one_line_and_keeps_the_old_file(small_disk, inputs, writer, capsys,
                                                      monkeypatch):
    out = small_disk / "out"
    argv = _commands(inputs, out)[writer]
    # the command works on this disk while it has room (so the failure below is the disk's)
    assert _run(argv, monkeypatch) == 0 and out.stat().st_size > 0
    capsys.readouterr()
    out.write_bytes(OLD)
    fill(small_disk)
    assert _run(argv, monkeypatch) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"arboreal: error: {out}: No space left on device"), err
    assert "nothing was written; the file is unchanged" in err and "Traceback" not in err
    assert out.read_bytes() == OLD
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler", "out"]


def test_full_disk_for_a_new_file(small_disk, inputs, capsys, monkeypatch):
    fill(small_disk)
    out = small_disk / "new.conllu"
    assert _run(_commands(inputs, out)["parse output"], monkeypatch) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]


@pytest.mark.parametrize("code", sorted({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}))
def test_late_no_space_at_fsync_keeps_the_old_file(tmp_path, inputs, capsys, monkeypatch,
                                                   code):
    """A filesystem that reports the full disk or the quota only when the data is
    flushed: the old file is still there, no temporary file, one line."""
    out = tmp_path / "out.conllu"
    out.write_bytes(OLD)
    real_fsync = os.fsync

    def failing_fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path)):
            raise OSError(code, os.strerror(code))
        return real_fsync(fd)

    if not os.path.exists("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd to tell the output's descriptor")
    monkeypatch.setattr(os, "fsync", failing_fsync)
    assert _run(_commands(inputs, out)["parse output"], monkeypatch) == 2
    err = capsys.readouterr().err
    assert err == (f"arboreal: error: {out}: {os.strerror(code)} (nothing was written; "
                   "the file is unchanged)\n")
    assert out.read_bytes() == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.conllu"]
