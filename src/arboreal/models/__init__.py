"""Parser models and model files.

``load_model(path)`` reads any arboreal model file and dispatches on its metadata's
``model_type``: "parser" -> :class:`Parser` (every order). Other model classes
register with :func:`register_model_type`. Files of the model types of arboreal
before the one parser class ("first-order", "higher-order") get a ModelError asking
to retrain them.
"""
from __future__ import annotations

import importlib
from typing import Iterable, Iterator

from arboreal.errors import ModelError
from arboreal.io.conllu import batched
from arboreal.models.serialization import load_model_file

__all__ = ["Parser", "load_model", "register_model_type", "MODEL_TYPES", "attachment_scores",
           "parse_iter"]

#: model_type -> class with ``from_file_contents(path, meta, arrays)``, or the
#: ``"module:Class"`` it is imported from on first use (importing this package, to read a
#: model file's metadata, does not import the parser and numba)
MODEL_TYPES: dict[str, type | str] = {"parser": "arboreal.models.parser:Parser"}
#: model types of older arboreal versions, whose files this version cannot read
RETIRED_TYPES = ("first-order", "higher-order")


def register_model_type(name: str, cls: type) -> None:
    """Make ``load_model`` dispatch files with ``model_type == name`` to ``cls``."""
    MODEL_TYPES[name] = cls


def load_model(path):
    """Load a model file of any registered type (ModelError on a bad file)."""
    meta, arrays = load_model_file(path)
    return model_class(path, meta).from_file_contents(str(path), meta, arrays)


def model_class(path, meta: dict, resolve: bool = True) -> type | str:
    """The registered class of a model file's metadata (ModelError when unknown); with
    ``resolve=False`` the type is only checked, and the class not imported."""
    kind = meta.get("model_type")
    if not isinstance(kind, str):
        raise ModelError(f"{path}: model metadata field 'model_type' must be a string")
    if kind in RETIRED_TYPES:
        raise ModelError(f"{path}: a {kind} model of an older arboreal, whose model format "
                         f"this version no longer reads; retrain it")
    if kind not in MODEL_TYPES:
        raise ModelError(f"{path}: unknown model type {kind!r}")
    cls = MODEL_TYPES[kind]
    if isinstance(cls, str) and resolve:
        module, name = cls.split(":")
        cls = MODEL_TYPES[kind] = getattr(importlib.import_module(module), name)
    return cls


def parse_iter(model, sentences: Iterable, batch_size: int = 4096,
               retag: bool = False) -> Iterator:
    """Parse a stream of sentences ``batch_size`` at a time, yielding parsed copies in
    order (``model.parse(batch, retag)`` of each batch): with
    :func:`arboreal.io.iter_conllu` and :func:`arboreal.io.write_conllu`, memory stays
    bounded by one batch however large the corpus."""
    for batch in batched(sentences, batch_size):
        yield from model.parse(batch, retag=retag)


def __getattr__(name: str):
    if name in ("Parser", "attachment_scores"):
        from arboreal.models import parser

        return getattr(parser, name)
    raise AttributeError(f"module 'arboreal.models' has no attribute {name!r}")
