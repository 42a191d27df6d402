"""arboreal's folder for downloaded and unpacked things (models, encoders)."""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path


def arboreal_home() -> Path:
    """``$ARBOREAL_HOME`` when set, else the platform's user cache folder:
    ``$XDG_CACHE_HOME/arboreal`` (default ``~/.cache/arboreal``) on Linux and other Unix
    systems, ``~/Library/Caches/arboreal`` on macOS, ``%LOCALAPPDATA%\\arboreal\\Cache`` on
    Windows (the folders platformdirs gives)."""
    home = os.environ.get("ARBOREAL_HOME")
    if home:
        return Path(home).expanduser()
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "arboreal" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "arboreal"
    xdg = os.environ.get("XDG_CACHE_HOME")
    # the XDG spec: a relative path is invalid and ignored
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "arboreal"


def package_folder(module: str) -> Path | None:
    """The folder of the installed package ``module``, found without importing it (a
    model or encoder package's code never runs), or None."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])
