"""Exceptions that the command line turns into one-line messages and exit status 2."""
from __future__ import annotations

import importlib
from types import ModuleType


class ArborealError(Exception):
    """Base class of every error arboreal reports to a user (never a bug)."""


class FormatError(ArborealError):
    """Malformed input file: names the file, the 1-based line and the problem."""

    def __init__(self, path: str, line: int | None, problem: str):
        self.path = path
        self.line = line
        self.problem = problem
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {problem}")


class ModelError(ArborealError):
    """A model file that is missing, truncated, foreign or of an unknown version."""


class MissingExtraError(ArborealError, ImportError):
    """An optional dependency is not installed (an :class:`ArborealError` the command
    line reports in one line, and an ImportError, so ``pytest.importorskip`` and
    ``except ImportError`` work too)."""


def require(module: str, extra: str) -> ModuleType:
    """Import and return ``module``; MissingExtraError naming ``pip install
    'arboreal[extra]'`` when it is not installed."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name != module and not module.startswith(exc.name + "."):
            raise  # the package is there but one of its own dependencies is missing
        raise MissingExtraError(
            f"this feature needs the optional package {module.split('.')[0]!r}: "
            f"pip install 'arboreal[{extra}]'", name=module) from None
