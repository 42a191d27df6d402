"""Models by name: where a model argument that is not a file is looked up.

A model is taken (``arboreal.load``, every command's MODEL, the server, Dask, the
spaCy component) as, in this order:

1. **a path**: an existing file (anything with a path separator is only ever a path);
2. **an installed model package**: a Python distribution (``arboreal-model-NAME``,
   written by ``arboreal package``) that declares the entry point ``NAME`` in the group
   :data:`ENTRY_POINT_GROUP`, pointing at its package; the model is the package's
   ``model.npz`` (its card ``card.json`` beside it). The package is located, not
   imported: finding a model runs none of its code;
3. **the local model cache**: ``$ARBOREAL_HOME/models/NAME/model.npz`` (and
   ``card.json``), where ``arboreal download`` puts models. ``ARBOREAL_HOME`` defaults
   to the platform's user cache folder (:func:`model_home`);
4. **a model shipped inside arboreal** (:func:`shipped_models`: ``en_ewt``, in
   ``arboreal/data/models/NAME/``): what ``pip install arboreal`` brings, so that a
   name works on a fresh machine; an installed or downloaded model of the same name
   comes first.

An unknown name is a :class:`~arboreal.errors.ModelError` of one line that lists the
names there are and the closest one. Nothing here imports numpy or numba.
"""
from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

from arboreal._home import arboreal_home, package_folder
from arboreal.errors import ModelError

#: the entry-point group of installed model packages (as spaCy's ``spacy_models``)
ENTRY_POINT_GROUP = "arboreal_models"
#: a model's file and card, in a model package and in a cache folder
MODEL_FILE = "model.npz"
CARD_FILE = "card.json"
#: a model name: letters, digits, '_', '.', '-'; no path separator, at most 64 characters
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def check_name(name: str) -> str:
    """``name`` if it is a valid model name (:data:`NAME_PATTERN`), else ModelError."""
    if not NAME_PATTERN.fullmatch(name) or name.endswith((".", "-")):
        raise ModelError(f"{name!r} is not a model name (letters, digits, '_', '.' and '-', "
                         "at most 64 characters, starting with a letter or digit)")
    return name


def model_home() -> Path:
    """The local model cache: :func:`arboreal._home.arboreal_home` (``$ARBOREAL_HOME``
    when set, else the platform's user cache folder)."""
    return arboreal_home()


def cache_folder() -> Path:
    """The folder holding one sub-folder per cached model."""
    return model_home() / "models"


def _model_folders(folder: Path) -> dict[str, Path]:
    """name -> ``NAME/model.npz`` of every sub-folder of ``folder`` named as a model that
    holds its model file (a folder without it, or one being written, is skipped)."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return {}
    out = {}
    for entry in entries:
        if NAME_PATTERN.fullmatch(entry.name) and entry.is_dir():
            path = Path(entry.path) / MODEL_FILE
            if path.is_file():
                out[entry.name] = path
    return out


def cached_models() -> dict[str, Path]:
    """name -> model file of every model in the cache (complete ones only)."""
    return _model_folders(cache_folder())


#: where the models shipped inside the package lie
SHIPPED_FOLDER = Path(__file__).resolve().parents[1] / "data" / "models"


def shipped_models() -> dict[str, Path]:
    """name -> model file of every model shipped inside arboreal (``NAME/model.npz``
    under :data:`SHIPPED_FOLDER`)."""
    return _model_folders(SHIPPED_FOLDER)


def installed_models() -> dict[str, Path]:
    """name -> model file of every installed model package (entry points of
    :data:`ENTRY_POINT_GROUP`; the first of two with the same name wins, as Python's
    import does). The packages are located without being imported."""
    from importlib.metadata import entry_points

    out: dict[str, Path] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in out or not NAME_PATTERN.fullmatch(ep.name):
            continue
        folder = package_folder(ep.module)
        if folder is not None and (folder / MODEL_FILE).is_file():
            out[ep.name] = folder / MODEL_FILE
    return out


def card_path(model_file: str | os.PathLike) -> Path:
    """Where the card of a packaged or cached model file lies (beside it)."""
    return Path(model_file).with_name(CARD_FILE)


def looks_like_path(name: str) -> bool:
    """Whether ``name`` can only be a path (it has a path separator)."""
    return "/" in name or os.sep in name or (os.altsep is not None and os.altsep in name)


def resolve_model(name: str | os.PathLike) -> str:
    """The model file ``name`` stands for: the path itself when a file exists there,
    else an installed model package's, else a cached model's (module docstring).
    ModelError of one line for a name that is none of these, listing the known names
    and the closest one."""
    text = os.fspath(name)
    if os.path.exists(text) or looks_like_path(text) or not NAME_PATTERN.fullmatch(text):
        return text          # a path: load_model_file reports what is wrong with it
    for table in (installed_models, cached_models, shipped_models):
        found = table().get(text)
        if found is not None:
            return str(found)
    raise unknown_model(text)


def known_models() -> list[str]:
    """The names of the installed and cached models, sorted, each once."""
    return sorted(set(installed_models()) | set(cached_models()) | set(shipped_models()))


def closest(name: str, names) -> str | None:
    """The name of ``names`` closest to ``name`` (difflib), or None."""
    names = list(names)
    found = difflib.get_close_matches(name, names, n=1, cutoff=0.0) if names else []
    return found[0] if found else None


def unknown_model(name: str) -> ModelError:
    """The one-line error for a model argument that is neither a file nor a known name."""
    names = known_models()
    if not names:
        return ModelError(f"{name}: no such model file, and no model of that name is installed "
                          f"or in the cache {cache_folder()} (none is: 'arboreal download "
                          "NAME' fetches one, 'arboreal package' makes one installable)")
    return ModelError(f"{name}: no such model file, and no installed or cached model of that "
                      f"name (there are: {', '.join(names)}; closest: {closest(name, names)})")
