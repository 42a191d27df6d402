"""A bag of character n-grams (Bojanowski et al. 2017's fastText subwords): the worked
example of a word encoder in one module.

Each form, lower-cased and marked ``<form>``, is cut into its character n-grams of
``min_n`` to ``max_n`` characters plus the whole marked form; each n-gram is hashed
(CRC-32, the same in every process) into one of ``buckets`` rows of an embedding, and a
word's vector is the mean of its n-grams' rows. Words that share affixes share rows, so
an unseen word gets a vector from the pieces it shares with seen ones, as the character
CNN gives it one from its characters.

``arboreal train TRAIN --scorer neural --scorer-option word_encoders=char_ngrams``
(options ``char_ngrams.dim``, ``.buckets``, ``.min_n``, ``.max_n``, ``.max_chars``).
Costs: the n-grams of each distinct form once per corpus, O(max_chars x (max_n - min_n
+ 1)) each; per batch an embedding bag over them, O(distinct forms x n-grams x dim);
``buckets x dim`` parameters.
"""
from __future__ import annotations

import zlib

import numpy as np
import torch
from torch import nn

from arboreal.neural.encoders import register_word_encoder


@register_word_encoder
class CharNgrams(nn.Module):
    """Mean of hashed character n-gram embeddings per word: (B, N) -> (B, N, dim)."""

    name = "char_ngrams"
    defaults = {"dim": 64, "buckets": 1 << 15, "min_n": 3, "max_n": 5, "max_chars": 30}

    def __init__(self, options: dict):
        super().__init__()
        self.options = dict(options)
        o = self.options
        if o["dim"] < 1 or o["buckets"] < 1 or o["buckets"] > 1 << 24:
            raise ValueError("dim must be at least 1, buckets between 1 and 2^24")
        if not 1 <= o["min_n"] <= o["max_n"] or o["max_chars"] < 1:
            raise ValueError("need 1 <= min_n <= max_n and max_chars >= 1")
        self.dim = o["dim"]
        # row 0: padding (no n-gram), left out of each mean
        self.embed = nn.EmbeddingBag(o["buckets"] + 1, o["dim"], mode="mean", padding_idx=0)
        nn.init.normal_(self.embed.weight, std=0.1)
        with torch.no_grad():
            self.embed.weight[0].zero_()

    def ngrams(self, form: str) -> list[str]:
        """The n-grams of ``form`` that it is embedded by, the marked form last."""
        o = self.options
        w = f"<{form[:o['max_chars']].lower()}>"
        grams = [w[i:i + n] for n in range(o["min_n"], o["max_n"] + 1)
                 for i in range(len(w) - n + 1)]
        return grams + [w]

    def form_features(self, forms: list[str]) -> np.ndarray:
        """(F, K) int64: each form's n-gram rows (1..buckets), 0-padded."""
        buckets = self.options["buckets"]
        rows = [[zlib.crc32(g.encode("utf-8")) % buckets + 1 for g in self.ngrams(f)]
                for f in forms]
        out = np.zeros((len(forms), max((len(r) for r in rows), default=1)), np.int64)
        for i, r in enumerate(rows):
            out[i, :len(r)] = r
        return out

    def forward(self, table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """``table`` (U, K) n-gram rows of the batch's distinct forms, ``index`` (B, N)
        each word's row of ``table`` -> (B, N, dim)."""
        return self.embed(table)[index]
