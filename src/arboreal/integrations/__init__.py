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

from arboreal.errors import MissingExtraError, require

__all__ = ["MissingExtraError", "require"]
