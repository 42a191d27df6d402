"""Checkpoints of a training run (``arboreal train --checkpoint DIR``, ``--resume DIR``).

A checkpoint folder holds:

* ``command.json``: what was trained (the options of the command and a SHA-256 of each
  treebank file); ``--resume`` refuses a folder made by another command;
* one file per finished stage of the pipeline: ``tokenizer.npz``, ``tagger.npz`` (the
  final tagger), ``jackknife.npz`` (the jackknifed tags the parser trains on), written
  as model files are;
* ``parser.npz``: the parser's trainer state after its last finished epoch (which run
  of the C grid, the finished runs' histories, and :class:`~arboreal.learn.trainer.Trainer`'s
  state: the epoch, the generator, the kept best epoch and its weights, the patience
  count and the learner's state), replaced after every epoch.

Every file is written atomically (:func:`arboreal._atomic.atomic_write`): a process
killed at any point leaves the previous checkpoint or the new one, never a mix, and
resuming gives the model an uninterrupted run gives. The state files are ``.npz``
archives of numpy arrays and one JSON document (``__state__``), never pickle: a state
is a tree of dicts (string keys), lists, JSON scalars and arrays
(:func:`save_state` / :func:`load_state`).
"""
from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

import numpy as np

from arboreal._atomic import atomic_write
from arboreal.errors import ArborealError

#: the member of a state file holding its JSON document
STATE_MEMBER = "__state__"
COMMAND_FILE = "command.json"
PARSER_STATE = "parser.npz"


def _flatten(value, arrays: dict):
    """``value`` with every array replaced by ``{"__array__": name}`` (the array put in
    ``arrays``); numpy scalars as Python ones."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise TypeError("a checkpoint holds no object arrays")
        name = f"a{len(arrays)}"
        arrays[name] = value
        return {"__array__": name}
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise TypeError(f"a checkpoint's keys are strings, not {key!r}")
        return {k: _flatten(v, arrays) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_flatten(v, arrays) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    raise TypeError(f"a checkpoint cannot hold a {type(value).__name__}")


def _unflatten(value, arrays):
    if isinstance(value, dict):
        if set(value) == {"__array__"}:
            return arrays[value["__array__"]]
        return {k: _unflatten(v, arrays) for k, v in value.items()}
    if isinstance(value, list):
        return [_unflatten(v, arrays) for v in value]
    return value


def _write_members(f, members: dict) -> None:
    """The archive of ``members`` (name -> array), uncompressed, into the open file ``f``."""
    with zipfile.ZipFile(f, "w", allowZip64=True) as zf:
        for name, arr in members.items():
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            with zf.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.ascontiguousarray(arr),
                                          allow_pickle=False)


def save_state(path: str | os.PathLike, state: dict) -> None:
    """Write ``state`` (dicts, lists, JSON scalars, numpy arrays) to ``path``, atomically."""
    arrays: dict = {}
    doc = json.dumps(_flatten(state, arrays))
    members = {STATE_MEMBER: np.frombuffer(doc.encode(), dtype=np.uint8), **arrays}
    atomic_write(path, lambda f: _write_members(f, members))


def load_state(path: str | os.PathLike) -> dict:
    """The state :func:`save_state` wrote to ``path``; ArborealError if it is not one."""
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise ArborealError(f"{path}: not a readable checkpoint ({exc})") from None
    doc = arrays.pop(STATE_MEMBER, None)
    if doc is None:
        raise ArborealError(f"{path}: not a checkpoint (no {STATE_MEMBER})")
    return _unflatten(json.loads(doc.tobytes().decode()), arrays)


class ParserCheckpoint:
    """The trainer state of a parser's training in one file (``Parser.train(...,
    checkpoint=...)``): :meth:`save` after every epoch, :meth:`load` (None when there is
    none yet) to resume."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def load(self) -> dict | None:
        return load_state(self.path) if self.path.exists() else None

    def save(self, state: dict) -> None:
        save_state(self.path, state)


def file_digest(path: str | os.PathLike) -> str:
    """SHA-256 of a file's bytes (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class TrainingCheckpoint:
    """A checkpoint folder (module docstring). ``command``: what is trained (JSON-able;
    compared on resume). ``resume`` False: a new folder (it must be empty or not exist);
    True: an existing checkpoint of the same command."""

    def __init__(self, folder: str | os.PathLike, command: dict, resume: bool):
        self.folder = Path(folder)
        command = json.loads(json.dumps(command))
        marker = self.folder / COMMAND_FILE
        if resume:
            if not marker.is_file():
                raise ArborealError(f"{self.folder}: no checkpoint to resume here (start one "
                                    "with --checkpoint)")
            try:
                saved = json.loads(marker.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ArborealError(f"{marker}: unreadable ({exc})") from None
            differ = sorted(k for k in set(saved) | set(command)
                            if saved.get(k) != command.get(k))
            if differ:
                raise ArborealError(f"{self.folder}: this checkpoint is of another training "
                                    f"({', '.join(differ)} differ): resume it with the "
                                    "command that started it")
            # what a process killed while writing left behind (atomic_write's temporary
            # files; this folder is the checkpoint's own)
            for stray in self.folder.glob(".*.tmp"):
                stray.unlink(missing_ok=True)
            return
        # (temporary files of a process killed while it made the folder do not count)
        if self.folder.exists() and (not self.folder.is_dir() or any(
                not p.name.endswith(".tmp") for p in self.folder.iterdir())):
            raise ArborealError(f"{self.folder}: not an empty folder; continue its "
                                f"checkpoint with --resume {self.folder}, or choose a new "
                                "folder")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ArborealError(f"{self.folder}: cannot make the checkpoint folder "
                                f"({exc.strerror or exc})") from None
        text = json.dumps(command, indent=1, sort_keys=True).encode()
        atomic_write(marker, lambda f: f.write(text))

    def has(self, stage: str) -> bool:
        """Whether stage ``stage`` (tokenizer, tagger, jackknife) is finished."""
        return (self.folder / f"{stage}.npz").is_file()

    def save_stage(self, stage: str, meta: dict, arrays: dict) -> None:
        from arboreal.io.model_file import save_model_file

        save_model_file(self.folder / f"{stage}.npz", {"model_type": "stage", "stage": stage,
                                                      **meta}, arrays)

    def load_stage(self, stage: str):
        """(path, metadata, arrays) of a finished stage."""
        from arboreal.io.model_file import load_model_file

        path = self.folder / f"{stage}.npz"
        meta, arrays = load_model_file(path)
        return str(path), meta, arrays

    def parser(self) -> ParserCheckpoint:
        return ParserCheckpoint(self.folder / PARSER_STATE)
