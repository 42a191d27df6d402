"""Registries whose entries are the modules of a package: each module registers what it
defines when imported, so a new entry is one module with nothing edited elsewhere."""
from __future__ import annotations

import importlib
import pkgutil

_IMPORTED: set[str] = set()


def import_package_modules(package: str) -> None:
    """Import every module of ``package`` (a dotted name), once per process."""
    if package in _IMPORTED:
        return
    _IMPORTED.add(package)
    module = importlib.import_module(package)
    for info in pkgutil.iter_modules(module.__path__):
        importlib.import_module(f"{package}.{info.name}")
