"""``arboreal models``: the installed and cached models, with their cards."""
from __future__ import annotations

import json
import sys


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "models", help="list the installed and cached models with their cards",
        description="List the models that every command (and arboreal.load) takes by name: "
                    "installed model packages (pip install of a wheel written by 'arboreal "
                    "package'; entry-point group arboreal_models), then the models in the "
                    "local cache ('arboreal download'; $ARBOREAL_HOME/models, default the "
                    "user cache folder, e.g. ~/.cache/arboreal). Each with its card: "
                    "treebank and version, license, what the model contains, its test "
                    "scores, speed and size. A name both installed and cached is resolved "
                    "to the installed package.")
    p.add_argument("--json", action="store_true",
                   help="print one JSON array of cards (each with 'where' and 'path')")
    p.set_defaults(func=run)


def model_cards() -> list[dict]:
    """The card of every installed and cached model, each with ``where``
    ("installed" or "cache") and ``path``; the card in the model file wins over the
    ``card.json`` beside it, and ``contains`` always comes from the model file. A
    model that cannot be read is listed with ``error``."""
    from arboreal.errors import ArborealError
    from arboreal.models import open_model
    from arboreal.models.cards import card_of, read_card_file
    from arboreal.models.names import card_path, cached_models, installed_models, shipped_models

    out = []
    for where, table in (("installed", installed_models()), ("cache", cached_models()),
                         ("shipped", shipped_models())):
        for name, path in table.items():
            try:
                _, meta, arrays = open_model(path)
                arrays.close()
                card = card_of(meta, name)
                beside = card_path(path)
                if not isinstance(meta.get("card"), dict) and beside.is_file():
                    card = {**read_card_file(beside), "name": name,
                            "contains": card["contains"]}
                if "size_bytes" not in card:
                    card["size_bytes"] = path.stat().st_size
            except (ArborealError, OSError) as exc:
                card = {"name": name, "error": str(exc)}
            out.append({**card, "where": where, "path": str(path)})
    return out


def run(args) -> int:
    import logging

    from arboreal._atomic import remove_stale
    from arboreal.models.cards import describe
    from arboreal.models.names import cache_folder

    stale = remove_stale(cache_folder())
    if stale:
        logging.getLogger("arboreal").info(
            "removed %d partial download(s) left in %s by runs that died: %s", len(stale),
            cache_folder(), ", ".join(stale))
    cards = model_cards()
    if args.json:
        print(json.dumps(cards, indent=2, sort_keys=True, ensure_ascii=False))
        return 0
    if not cards:
        print(f"no model is installed or in the cache ({cache_folder()}): 'arboreal download "
              "NAME --index URL' fetches one, 'arboreal package MODEL -o DIR' makes a "
              "model file installable", file=sys.stderr)
        return 0
    for k, card in enumerate(cards):
        if k:
            print()
        kind = {"installed": "installed package", "cache": "cache",
                "shipped": "shipped with arboreal"}[card["where"]]
        where = f"{kind}: {card['path']}"
        if "error" in card:
            print(f"{card['name']}  ({where})\n  cannot be read: {card['error']}")
            continue
        print("\n".join(describe(card, where)))
    return 0
