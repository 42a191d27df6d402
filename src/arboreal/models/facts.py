"""What a model file says about itself from its metadata alone, without loading its
weights or importing the parser (and numba): for commands whose model is loaded
elsewhere, e.g. ``arboreal parse --scheduler`` on Dask workers."""
from __future__ import annotations

from typing import Sequence


def part_order(kinds: Sequence[str]) -> int:
    """The factorization order of these part kinds (1 without any)."""
    return 1 if not kinds else 3 if {"gsib", "trisib"} & set(kinds) else 2


class ModelFacts:
    """A model file's type (checked: ModelError for a bad or retired file), whether it
    has a tagger and a tokenizer, and its order, from its metadata; ``path``: the file
    a model name stands for."""

    def __init__(self, name: str):
        from arboreal.models import open_model

        # the one reader of model files (arboreal.load's), which leaves the arrays unread
        self.path, meta, arrays = open_model(name)
        arrays.close()
        self.tagger = True if "tagger" in meta else None
        self.tokenizer = True if "tokenizer" in meta else None
        neural = meta.get("neural")
        #: the tag columns the model fills: its tagger's, or those its scorer predicts
        self.tag_columns = (("upos", "xpos", "feats", "lemmas") if self.tagger else
                            tuple(neural.get("tag_columns", ())) if isinstance(neural, dict)
                            else ())
        higher = meta.get("higher_order")
        parts = higher.get("parts") if isinstance(higher, dict) else None
        self.order = part_order(parts) if isinstance(parts, list) else 1
