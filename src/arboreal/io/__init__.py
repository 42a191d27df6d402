"""File formats: CoNLL-U / CoNLL-X reading and writing."""
from arboreal.io.sentence import ROOT_TOKEN, Sentence

__all__ = ["ROOT_TOKEN", "Sentence"]
