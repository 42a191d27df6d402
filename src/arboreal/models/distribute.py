"""A trained model made ready to hand out: compact, carded, packaged.

:func:`distribution_model` writes the model file that is distributed (compact by
default, :mod:`arboreal.models.compact`; its card in the metadata) and returns its
card; :func:`package` wraps that file in a wheel (:mod:`arboreal.models.wheel`).
``arboreal shrink``, ``arboreal package`` and ``benchmarks/catalogue.py`` use them.
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

from arboreal.models.names import NAME_PATTERN, check_name, looks_like_path

#: card fields a user (or the catalogue) gives; ``contains`` is always derived
CARD_FIELDS = ("version", "description", "treebank", "license", "scores", "speed",
               "full_model", "training", "sample_scores", "built_at_commit", "built_on",
               "attribution")
DEFAULT_VERSION = "1.0"


def default_name(model: str, meta: dict) -> str:
    """The name a model is packaged under when none is given: the model's own name
    when it was given by name, else its card's, else its file name without extension
    (characters a name cannot have replaced by '_')."""
    text = os.fspath(model)
    if not os.path.exists(text) and not looks_like_path(text) and NAME_PATTERN.fullmatch(text):
        return text
    card = meta.get("card")
    if isinstance(card, dict) and isinstance(card.get("name"), str) \
            and NAME_PATTERN.fullmatch(card["name"]):
        return card["name"]
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(text).stem).strip("._-") or "model"
    return stem[:64]


def distribution_model(model: str, out: str | os.PathLike, name: str | None = None,
                       card: Mapping | None = None, compact: bool = True,
                       thresholds: Mapping[str, float] | None = None,
                       float16: bool = True, significant_bits: int | None = None) -> dict:
    """Write the model ``model`` (a path or a name) to ``out`` (atomically), compacted
    unless ``compact`` is False or it is compact already (``thresholds``, ``float16`` and
    ``significant_bits`` as :func:`~arboreal.models.compact.compact_arrays` takes them;
    None: the defaults), with its card (``card``'s
    fields of :data:`CARD_FIELDS` over the model's own card) in the metadata. Returns
    the card, completed with ``size_bytes`` and ``sha256`` of the written file."""
    from arboreal.models import open_model
    from arboreal.models.cards import card_of, complete_card
    from arboreal.models.compact import DEFAULT_BITS, compact_arrays
    from arboreal.io.model_file import save_model_file

    path, meta, arrays = open_model(model)
    name = check_name(name or default_name(model, meta))
    full = card_of(meta, name)
    for key in CARD_FIELDS:
        if card is not None and key in card:
            full[key] = card[key]
    full.setdefault("version", DEFAULT_VERSION)
    if compact and "compact" not in meta:
        new_meta, new_arrays = compact_arrays(meta, arrays, thresholds, float16,
                                              significant_bits or DEFAULT_BITS)
        full["compact"] = {k: new_meta["compact"][k] for k in
                           ("thresholds", "float16", "significant_bits", "weights_kept",
                            "weights_dropped", "neural_parameters")
                           if k in new_meta["compact"]}
        full.setdefault("full_model", {"size_bytes": os.path.getsize(path)})
    else:
        new_meta = {k: v for k, v in meta.items() if k not in ("format", "format_version")}
        new_arrays = {k: arrays[k] for k in arrays}
    full = complete_card(full)
    # the card in the file: what the model is, not facts about the file it is in
    new_meta["card"] = {k: v for k, v in full.items() if k not in ("contains", "size_bytes",
                                                                    "sha256")}
    save_model_file(out, new_meta, new_arrays)
    arrays.close()
    data = Path(out).read_bytes()
    return {**full, "size_bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def model_requirements(meta: Mapping, version: str) -> list[str]:
    """The distributions a model file needs (Requires-Dist): arboreal, with the
    ``neural`` extra for a neural scorer and ``transformer`` for a pretrained encoder,
    and the package that bundles a frozen encoder's weights, where one is known."""
    sections, todo = [], [meta]
    while todo:
        node = todo.pop()
        if isinstance(node, Mapping):
            if isinstance(node.get("neural"), Mapping):
                sections.append(node["neural"])
            todo.extend(v for k, v in node.items() if k != "neural")
        elif isinstance(node, list):
            todo.extend(node)
    extras, others = [], []
    for section in sections:
        extras.append("neural")
        record = section.get("encoder")
        if isinstance(record, Mapping):
            extras.append("transformer")
            need = record.get("requires")
            if isinstance(need, str) and not record.get("fine_tuned") and need not in others:
                others.append(need)
    extras = sorted(set(extras))
    return [f"arboreal{'[' + ','.join(extras) + ']' if extras else ''}>={version}", *others]


def package(model: str, out_dir: str | os.PathLike, name: str | None = None,
            card: Mapping | None = None, compact: bool = True,
            thresholds: Mapping[str, float] | None = None,
            float16: bool = True, significant_bits: int | None = None) -> tuple[Path, dict]:
    """Write the wheel of ``model`` into ``out_dir``: ``(wheel path, card)``."""
    from arboreal import __version__
    from arboreal.models.cards import card_json
    from arboreal.models.wheel import check_version, write_wheel

    if card is not None and "version" in card:
        check_version(str(card["version"]))
    from arboreal.models import open_model

    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "model.npz"
        full = distribution_model(model, file, name, card, compact, thresholds, float16,
                                  significant_bits)
        data = file.read_bytes()
        _, meta, arrays = open_model(file)
        arrays.close()
    wheel = write_wheel(out_dir, full["name"], str(full["version"]), data, card_json(full),
                        full, requires=model_requirements(meta, __version__))
    return wheel, full
