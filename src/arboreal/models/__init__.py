"""Parser models and model files.

:func:`load` (``arboreal.load``) is the one way a model is loaded, by every command,
the server, Dask's workers and the spaCy component: it resolves a model name
(:mod:`arboreal.models.names`: a path, an installed model package, the local cache),
reads the file (:func:`open_model`, the only reader of model files) and dispatches on
its metadata's ``model_type``: "parser" -> :class:`Parser` (every order). A lexicon
file (:class:`~arboreal.features.lexicon.Lexicon`) loads the same way when asked for
by type (``load(path, "lexicon")``). Other model classes register with
:func:`register_model_type`. Files of the model types of arboreal before the one
parser class ("first-order", "higher-order") get a ModelError asking to retrain them.
``load_model`` and ``Parser.load`` are the same function under older names.
"""
from __future__ import annotations

import importlib
from typing import Iterable, Iterator

from arboreal.errors import ModelError
from arboreal.io.conllu import batched
from arboreal.io.model_file import load_model_file

__all__ = ["Parser", "load", "load_model", "open_model", "register_model_type", "MODEL_TYPES",
           "attachment_scores", "parse_iter"]

#: model_type -> class with ``from_file_contents(path, meta, arrays)``, or the
#: ``"module:Class"`` it is imported from on first use (importing this package, to read a
#: model file's metadata, does not import the parser and numba)
MODEL_TYPES: dict[str, type | str] = {"parser": "arboreal.models.parser:Parser"}
#: files in the model format that are not models (no ``parse``): loaded only when asked
#: for by type (``load(path, "lexicon")``), never where a model is taken
FILE_TYPES: dict[str, type | str] = {"lexicon": "arboreal.features.lexicon:Lexicon"}
#: model types of older arboreal versions, whose files this version cannot read
RETIRED_TYPES = ("first-order", "higher-order")


def register_model_type(name: str, cls: type) -> None:
    """Make ``load_model`` dispatch files with ``model_type == name`` to ``cls``."""
    MODEL_TYPES[name] = cls


def open_model(name, model_type: str | None = None) -> tuple[str, dict, object]:
    """``(path, meta, arrays)`` of the model ``name`` (a path, or the name of an installed
    or cached model): the metadata read and the model type checked (a registered model
    type, or ``model_type`` when given), the arrays read lazily
    (:class:`~arboreal.io.model_file.ModelArrays`, nothing inflated yet; the
    file stays open for them until ``arrays.close()``).
    ModelError naming the file (or listing the known names) on any problem."""
    from arboreal.models.names import resolve_model

    path = resolve_model(name)
    meta, arrays = load_model_file(path)
    try:
        if model_type is not None and meta.get("model_type") != model_type:
            raise ModelError(f"{path}: model type {meta.get('model_type')!r:.40} is not "
                             f"{model_type!r}")
        model_class(path, meta, resolve=False, file_types=model_type is not None)
    except BaseException:
        arrays.close()
        raise
    return path, meta, arrays


def load(name, model_type: str | None = None):
    """Load the model ``name``: a model file written by ``arboreal train`` (any model
    type), or the name of an installed model package or a cached model (see
    :mod:`arboreal.models.names`). A parser parses sentences (``parse``), raw text
    (``parse_text``) and token lists (``parse_tokens``). ``model_type``: ModelError
    unless the file holds a model of that type (also one of :data:`FILE_TYPES`, which
    only load so). ModelError for a file that is not a valid model, and one line
    listing the known names for an unknown name."""
    path, meta, arrays = open_model(name, model_type)
    try:
        cls = model_class(path, meta, file_types=model_type is not None)
        return cls.from_file_contents(path, meta, arrays)
    finally:
        arrays.close()    # an array read later opens the file again


#: the name arboreal's modules used before :func:`load` took names
load_model = load


def model_class(path, meta: dict, resolve: bool = True, file_types: bool = False) -> type | str:
    """The registered class of a model file's metadata (ModelError when unknown); with
    ``resolve=False`` the type is only checked, and the class not imported;
    ``file_types``: :data:`FILE_TYPES` count too."""
    kind = meta.get("model_type")
    if not isinstance(kind, str):
        raise ModelError(f"{path}: model metadata field 'model_type' must be a string")
    if kind in RETIRED_TYPES:
        raise ModelError(f"{path}: a {kind} model of an older arboreal, whose model format "
                         f"this version no longer reads; retrain it")
    table = FILE_TYPES if file_types and kind in FILE_TYPES else MODEL_TYPES
    if kind not in table:
        raise ModelError(f"{path}: unknown model type {kind!r}")
    cls = table[kind]
    if isinstance(cls, str) and resolve:
        module, name = cls.split(":")
        cls = table[kind] = getattr(importlib.import_module(module), name)
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
