"""arboreal: discriminative dependency parsing with spanning-tree methods.

Score convention, used by every module: ``scores[h, m]`` is the score of the
arc from head ``h`` (0..n, 0 the artificial root) to modifier ``m`` (1..n);
column 0 and the diagonal are ignored. A tree is an int array ``heads`` of
length n+1 with ``heads[0] = -1``.
"""
from __future__ import annotations

__version__ = "0.1.0"

from arboreal.errors import ArborealError, FormatError, ModelError
from arboreal.io.sentence import Sentence

__all__ = [
    "ArborealError",
    "FormatError",
    "ModelError",
    "Sentence",
    "__version__",
    "load",
]

# The public names below are added by their modules as they land; importing them
# lazily keeps ``import arboreal`` cheap (numba compiles on first use only).
_LAZY = {
    "read_conllu": "arboreal.io.conllu",
    "write_conllu": "arboreal.io.conllu",
    "evaluate": "arboreal.evaluation",
    "Parser": "arboreal.models",
}


def load(name, model_type: str | None = None) -> "object":
    """Load a model: a model file written by ``arboreal train``, or the name of an
    installed model package (``arboreal package``) or of a model in the local cache
    (``arboreal download``); see :func:`arboreal.models.load`, which this is."""
    from arboreal.models import load as load_any

    return load_any(name, model_type)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'arboreal' has no attribute {name!r}")
