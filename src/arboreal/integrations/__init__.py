"""Glue to optional third-party packages (installed with arboreal's extras).

* :mod:`arboreal.integrations.spacy`: a spaCy v3 pipeline component (``pip install
  'arboreal[spacy]'``), factory name ``"arboreal"``.
* :mod:`arboreal.io.adapters`: conversion between :class:`~arboreal.io.Sentence` and
  the ``conllu`` package's ``TokenList`` (``pip install 'arboreal[conllu]'``).

Nothing here is imported by ``import arboreal``; the third-party package is imported
when the module that needs it is (or, for the adapters, on first use), and its absence
is reported as :class:`MissingExtraError`, naming the ``pip install`` command.
"""
from __future__ import annotations

import importlib
from types import ModuleType

from arboreal.errors import ArborealError

__all__ = ["MissingExtraError", "require"]


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
