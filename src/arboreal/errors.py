"""Exceptions that the command line turns into one-line messages and exit status 2."""
from __future__ import annotations


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
