"""Model cards: what a distributed model is, in JSON.

A card is a JSON object stored in the model file's metadata (field ``card``) and, for
a packaged or cached model, beside it as ``card.json`` (read without opening the
model). Its fields, all optional but ``name``:

``name``, ``version``
    the model's name (what ``arboreal.load`` and every command take) and version;
``description``
    one line;
``treebank``
    ``{"name": "UD_English-EWT", "version": "UD 2.16", "source": URL}``;
``license``, ``non_commercial``
    the treebank's license (a model is a work derived from its training data) and
    whether it forbids commercial use (CC BY-NC-SA): such a card's ``usage`` says
    "non-commercial use only";
``contains``
    what the model does: ``tokenizer`` (bool), ``tagger`` (the columns it predicts),
    ``parser`` (``order``, ``decoder``, ``scorer``, ``learner``); always derived from
    the model's own metadata (:func:`model_contents`), never trusted from a card;
``scores``
    CoNLL 2018 F1 on the treebank's test set: ``{"raw_text": {"Tokens": .., "UPOS":
    .., "UAS": .., "LAS": ..}, "gold_tokens": {...}}``;
``speed``
    ``{"words_per_second": .., "machine": ..}``, parsing raw text;
``size_bytes``, ``compact``
    the model file's size, and how it was shrunk (:mod:`arboreal.models.compact`).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from arboreal.errors import ModelError

#: the most a card (JSON) may weigh, beside a model or in one
MAX_CARD_BYTES = 1 << 20
NON_COMMERCIAL_USE = "non-commercial use only"


def is_non_commercial(license_name: str | None) -> bool:
    """Whether a license forbids commercial use (Creative Commons "NC" licenses)."""
    if not license_name:
        return False
    words = license_name.upper().replace("_", "-").replace(" ", "-").split("-")
    return "NC" in words or "NONCOMMERCIAL" in license_name.upper().replace("-", "")


def model_contents(meta: dict) -> dict:
    """What a model file holds, from its metadata: ``{"tokenizer": bool, "tagger": [columns]
    or None, "parser": {...} or None}``."""
    from arboreal.models.facts import part_order

    tagger = meta.get("tagger")
    stages = tagger.get("stages") if isinstance(tagger, dict) else None
    columns = [st.get("name") for st in stages if isinstance(st, dict)] \
        if isinstance(stages, list) else None
    out: dict = {"model_type": meta.get("model_type"), "tokenizer": "tokenizer" in meta,
                 "tagger": columns if tagger is not None else None, "parser": None}
    if meta.get("model_type") == "parser":
        training = meta.get("training") if isinstance(meta.get("training"), dict) else {}
        higher = meta.get("higher_order")
        parts = higher.get("parts") if isinstance(higher, dict) else None
        scorer = meta.get("scorer")
        if not isinstance(scorer, str):
            scorer = "hashed linear features" + (f" ({training['features']})"
                                                  if isinstance(training.get("features"), str)
                                                  else "")
        out["parser"] = {"order": part_order(parts) if isinstance(parts, list) else 1,
                         "decoder": meta.get("decoder"), "scorer": scorer,
                         "learner": training.get("learner"),
                         "labels": "joint" if "label_features" in meta else "classifier"}
        neural = meta.get("neural")
        if isinstance(neural, dict):
            # one network tags and parses: its tag columns are the model's tagger
            columns = neural.get("tag_columns")
            if isinstance(columns, list) and columns and out["tagger"] is None:
                out["tagger"] = [str(c) for c in columns]
            options = training.get("options")
            objective = options.get("objective") if isinstance(options, dict) else None
            out["parser"].update(learner=f"gradient descent ({objective} loss)"
                                 if isinstance(objective, str) else None, labels="biaffine")
            encoder = neural.get("encoder")
            if isinstance(encoder, dict) and isinstance(encoder.get("name"), str):
                out["encoder"] = {k: encoder[k] for k in ("name", "fine_tuned", "requires")
                                  if k in encoder}
    return out


def card_of(meta: dict, name: str | None = None) -> dict:
    """The card of a model file's metadata: its ``card`` field (if any) with
    ``contains`` derived from the metadata and ``name`` set when given."""
    card = dict(meta.get("card")) if isinstance(meta.get("card"), dict) else {}
    if name is not None:
        card["name"] = name
    card["contains"] = model_contents(meta)
    return card


def complete_card(card: dict) -> dict:
    """``card`` with ``non_commercial`` and ``usage`` set from its license."""
    card = dict(card)
    if card.get("license"):
        nc = is_non_commercial(card["license"])
        card["non_commercial"] = nc
        if nc:
            card["usage"] = NON_COMMERCIAL_USE
        elif card.get("usage") == NON_COMMERCIAL_USE:
            del card["usage"]
    return card


def read_card_file(path: str | os.PathLike) -> dict:
    """A ``card.json`` (ModelError naming it when it is not a JSON object)."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_CARD_BYTES:
            raise ModelError(f"{path}: a model card of more than {MAX_CARD_BYTES} bytes")
        card = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ModelError(f"{path}: not a readable model card ({exc.__class__.__name__})") \
            from None
    if not isinstance(card, dict):
        raise ModelError(f"{path}: a model card must be a JSON object")
    return card


def card_json(card: dict) -> str:
    """A card as the JSON text written beside a model (sorted keys, one field a line)."""
    return json.dumps(card, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _number(value, digits: int = 2) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) \
        and not isinstance(value, bool) else "?"


def _scores(scores) -> str:
    if not isinstance(scores, dict):
        return ""
    return " ".join(f"{k} {_number(scores[k])}" for k in ("Tokens", "UPOS", "UAS", "LAS")
                    if k in scores)


def describe(card: dict, where: str) -> list[str]:
    """The lines ``arboreal models`` prints for one model."""
    name = card.get("name", "?")
    lines = [f"{name} {card.get('version', '')}".rstrip() + f"  ({where})"]
    if card.get("description"):
        lines.append(f"  {card['description']}")
    tb = card.get("treebank")
    if isinstance(tb, dict) and tb.get("name"):
        lines.append(f"  treebank: {tb['name']}" + (f" ({tb['version']})" if tb.get("version")
                                                    else ""))
    lines.append(f"  license: {card.get('license', 'not stated')}"
                 + (f" ({card['usage']})" if card.get("usage") else ""))
    contains = card.get("contains") or {}
    parts = []
    if contains.get("tokenizer"):
        parts.append("tokenizer")
    if contains.get("tagger") is not None:
        parts.append(f"tagger ({', '.join(map(str, contains['tagger']))})")
    parser = contains.get("parser")
    if isinstance(parser, dict):
        parts.append(f"parser (order {parser.get('order')}, {parser.get('decoder')}, "
                     f"{parser.get('scorer')}, learner {parser.get('learner')})")
    encoder = contains.get("encoder")
    if isinstance(encoder, dict):
        parts.append(f"{'fine-tuned' if encoder.get('fine_tuned') else 'frozen'} encoder "
                     f"{encoder.get('name')}")
    if parts:
        lines.append(f"  contains: {', '.join(parts)}")
    if isinstance(encoder, dict):
        needs = "pip install 'arboreal[neural,transformer]'" + (
            f" {encoder['requires']}" if isinstance(encoder.get("requires"), str) else "")
        lines.append(f"  needs: {needs}")
    scores = card.get("scores")
    if isinstance(scores, dict):
        text = [f"{what}: {_scores(scores.get(key))}" for key, what in
                (("raw_text", "raw text"), ("gold_tokens", "gold tokens")) if scores.get(key)]
        if text:
            lines.append(f"  test scores ({'; '.join(text)})")
    speed = card.get("speed")
    if isinstance(speed, dict) and speed.get("words_per_second"):
        lines.append(f"  speed: {_number(speed['words_per_second'], 0)} words/s"
                     + (f" ({speed['machine']})" if speed.get("machine") else ""))
    if isinstance(card.get("size_bytes"), int):
        lines.append(f"  size: {card['size_bytes'] / 1e6:.1f} MB")
    return lines
