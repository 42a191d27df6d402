"""Writing an output file without damage: atomic replacement of regular files only.

:func:`atomic_write` is the one way arboreal writes a named output (parsed CoNLL-U,
model files). What it does depends on what the name points to:

- a new path, or an existing regular file (through any chain of symbolic links):
  the data goes to a temporary file in the final target's folder, which is then
  renamed over it, so a reader sees the old file or the complete new one, never a
  partial one; the data is flushed to the disk (``fsync``) before the rename, so a
  full disk or an exceeded quota that a filesystem reports late (at ``fsync`` or
  ``close`` rather than ``write``: NFS, FUSE, some delayed-allocation filesystems)
  is still caught before the old file is replaced; on any error or interruption
  (KeyboardInterrupt, the SIGTERM that the command line turns into
  :class:`Terminated`) the temporary file is removed;
- anything else (a character device such as ``/dev/null`` or ``/dev/full``, a FIFO,
  ``/dev/stdout``, a bash process substitution ``>(cmd)``, a socket): written in
  place, streaming, like ``open(path, "wb")``; a rename would replace the device
  or pipe by a regular file.

Every error names the path the user gave, never the hidden temporary file. A full
disk or an exceeded quota (``ENOSPC``, ``EDQUOT``) while replacing a file is said
in one place, :func:`_user_error`, with what became of the file.
"""
from __future__ import annotations

import errno
import os
import re
import secrets
import stat
import time
from pathlib import Path
from typing import BinaryIO, Callable

#: how a temporary file is opened: a new file only (never an existing one or a link),
#: not inherited by child processes
_TEMPORARY_FLAGS = (os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                    | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
#: random names tried before giving up (each of 48 random bits)
_NAME_TRIES = 100


class Terminated(BaseException):
    """Raised in the main thread when the process receives SIGTERM (the command line
    installs the handler), so that ``finally`` blocks and :func:`atomic_write`'s
    clean-up run as they do for Ctrl-C."""


#: the errors of a full disk or an exceeded disk quota
NO_SPACE = frozenset(e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None)) if e is not None)


def _user_error(exc: OSError, path: str | os.PathLike, replacing: bool = False) -> OSError:
    """The same OS error, naming the user's ``path`` instead of a temporary file. With
    ``replacing`` (the error came while the temporary file was written, before the
    rename), a full disk or quota says that ``path`` was left as it was."""
    message = exc.strerror or str(exc)
    if replacing and exc.errno in NO_SPACE:
        message += " (nothing was written; the file is unchanged)"
    return OSError(exc.errno, message, os.fspath(path))


#: a temporary file or folder: ``.NAME.PID-RANDOM.tmp`` (or ``.part``), the pid of the
#: process that made it telling whether it can still be in use
_TEMPORARY_NAME = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)-[0-9a-f]{12}\.(?:tmp|part)")
#: when this process started (its own temporary files are never stale to it)
_STARTED = time.time()


def temporary_name(name: str, suffix: str) -> str:
    """A fresh hidden name for a temporary file or folder beside ``name``: it holds this
    process's id, so that a later run can tell one left by a dead process
    (:func:`remove_stale`) from one still being written."""
    return f".{name}.{os.getpid()}-{secrets.token_hex(6)}{suffix}"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True                    # another user's process: alive
    return True


def remove_stale(folder: str | os.PathLike, name: str | None = None) -> list[str]:
    """Remove the temporary files and folders in ``folder`` (those of ``name`` only,
    when given) that a process which has died left behind (killed with SIGKILL, say):
    their pid is not running and they are older than this command's start. Returns the
    names removed. Errors are ignored: another run may remove the same ones."""
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        match = _TEMPORARY_NAME.fullmatch(entry.name)
        if match is None or (name is not None and match.group("name") != name):
            continue
        try:
            if entry.stat(follow_symlinks=False).st_mtime >= _STARTED \
                    or _alive(int(match.group("pid"))):
                continue
            if entry.is_dir(follow_symlinks=False):
                import shutil

                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed.append(entry.name)
        except OSError:
            continue
    return removed


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], object]) -> None:
    """Create or replace ``path`` with what ``write(f)`` writes to the binary file ``f``.

    A new path or a regular file (symbolic links followed to their final target) is
    replaced atomically: temporary file in the target's folder, then ``os.replace``.
    A replaced file keeps its permission bits; a new one gets those a plain
    ``open(path, "w")`` would give (0o666 minus the umask; ``mkstemp`` alone would
    leave 0o600). The data is fsync'ed before the rename. Devices, FIFOs and other
    special files are written in place. An interruption at any point after the
    temporary file is made removes it. OSError (naming ``path``) on failure; nothing
    is left behind, and a replaced file is intact.
    """
    try:
        info = os.stat(path)                       # follows symbolic links
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise _user_error(exc, path) from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        if stat.S_ISDIR(info.st_mode):
            raise OSError(21, "is a directory", os.fspath(path))
        try:
            with open(path, "wb") as f:
                write(f)
        except OSError as exc:
            if exc.filename is None:
                raise _user_error(exc, path) from None
            raise
        return

    target = Path(os.path.realpath(path))            # write next to the link's target
    if info is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    else:
        mode = stat.S_IMODE(info.st_mode)
    # The temporary file's name is held before the file exists (tempfile.mkstemp would
    # hand it over only after making it): a KeyboardInterrupt or Terminated that comes
    # just after the file is made, before any other line runs, still removes it.
    tmp = ""
    try:
        for _ in range(_NAME_TRIES):
            tmp = os.path.join(target.parent, temporary_name(target.name, ".tmp"))
            try:
                fd = os.open(tmp, _TEMPORARY_FLAGS, 0o600)
                break
            except FileExistsError:
                tmp = ""            # another writer's file: never removed here
        else:
            raise FileExistsError(errno.EEXIST, "no free temporary file name", str(target.parent))
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
        remove_stale(target.parent, target.name)
    except BaseException as exc:
        if tmp:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        if isinstance(exc, OSError) and exc.filename in (None, tmp, str(target)):
            raise _user_error(exc, path, replacing=True) from None
        raise
