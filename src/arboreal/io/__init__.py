"""File formats: CoNLL-U / CoNLL-X reading and writing, integer-coded columns."""
from arboreal.io.conllu import (
    encode_column,
    format_conllu,
    iter_conllu,
    read_conllu,
    write_conllu,
)
from arboreal.io.sentence import ROOT_TOKEN, Sentence

__all__ = [
    "ROOT_TOKEN",
    "Sentence",
    "encode_column",
    "format_conllu",
    "iter_conllu",
    "read_conllu",
    "write_conllu",
]
