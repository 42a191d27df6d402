"""Atomic file writes: a temporary file in the target's directory, renamed into place."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], object]) -> None:
    """Create or replace ``path`` atomically with what ``write(f)`` writes to binary ``f``.

    The data goes to a temporary file next to ``path`` which is then ``os.replace``-d
    over it, so readers see the old file or the complete new one, never a partial
    one; on any error the temporary file is removed and the error re-raised. The new
    file gets the permissions a plain ``open(path, "w")`` would give (0o666 minus
    the umask; ``mkstemp`` alone would leave 0o600).
    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
