"""Ahead-of-use compilation: whether numba's on-disk cache already holds arboreal's
kernels, and the one-line notice a command prints when it does not.

Every kernel is ``@njit(cache=True)``: the first run on a machine compiles them (a
cold first ``parse`` is silent for a long while otherwise) and later runs load them
from ``__pycache__`` (or ``NUMBA_CACHE_DIR``). ``arboreal warmup`` compiles them ahead,
for containers and shared installations.
"""
from __future__ import annotations

import importlib
import logging
import os

_log = logging.getLogger(__name__)

#: kernels every parse runs (module, function), a decoder among alternatives (a model
#: decodes with one of them only): if one has no cache index, the run is a first run
#: on this machine
_PROBES = ((("arboreal.inference.eisner", "_eisner_kernel"),
            ("arboreal.inference.mst", "_cle_kernel")),
           ("arboreal.features.tokens", "greedy_tag"),
           ("arboreal.scorers.labeler", "_label_scores"))


def model_probes(model) -> tuple:
    """The probe kernels (see :data:`_PROBES`) that parsing with the loaded ``model`` (a
    pipeline or a parser) runs: its decoder's, the tokenizer's and tagger's stage when it
    has either, the second-stage labeler's when its scorer has one. A neural model uses
    no labeler, so a probe of it would announce a compilation that never comes."""
    parser = getattr(model, "parser", None) or model
    from arboreal.inference.structure import tree_structure

    projective = tree_structure(getattr(parser, "decoder", "eisner")).projective
    decoder = _PROBES[0][0] if projective else _PROBES[0][1]
    probes = [decoder]
    if any(getattr(x, name, None) is not None for x in (model, parser)
           for name in ("tokenizer", "tagger")):
        probes.append(_PROBES[1])
    if getattr(getattr(parser, "scorer", None), "labeler", None) is not None:
        probes.append(_PROBES[2])
    return tuple(probes)


def _has_index(probe) -> bool:
    dispatcher = (getattr(importlib.import_module(probe[0]), probe[1])
                  if isinstance(probe, tuple) else probe)
    return os.path.exists(dispatcher._cache._cache_file._index_path)


def kernels_cached(probes=_PROBES) -> bool:
    """True when numba's cache has an index for every probe kernel: ``(module, name)``
    pairs or the dispatchers themselves, or a tuple of such alternatives of which one
    suffices (False also when the cache cannot be inspected)."""
    try:
        for probe in probes:
            if isinstance(probe, tuple) and probe and not isinstance(probe[0], str):
                if not any(_has_index(p) for p in probe):
                    return False
            elif not _has_index(probe):
                return False
    except (AttributeError, ImportError, OSError):
        return False
    return True


def notice_if_compiling(quiet: bool = False, probes=None, what: str = "") -> bool:
    """Log one line (INFO, logger ``arboreal._compile``) when the kernels are about to
    be compiled: the parsing kernels (``what``: the ones a command compiles, e.g.
    "training and parsing"), or with ``probes`` (see :func:`kernels_cached`) those
    ``what`` names. Whether the notice was given (never with ``quiet``)."""
    if quiet or not _log.isEnabledFor(logging.INFO):
        return False
    if probes is None:
        if kernels_cached():
            return False
        _log.info("arboreal: compiling the %s kernels for this machine (first use only, "
                  "a few minutes; 'arboreal warmup' does it ahead of time)", what or "parsing")
    else:
        if kernels_cached(probes):
            return False
        _log.info("arboreal: compiling the %s kernels for this machine (first use only)", what)
    return True


_NOUNS = ("dog", "cat", "bird", "child", "teacher", "farmer")
_VERBS = ("sees", "likes", "follows", "helps")


def _synthetic_treebank() -> str:
    """A tiny CoNLL-U treebank (with ``# text`` lines) that exercises every parsing
    kernel: "The dog sees a cat." and its variations."""
    blocks = []
    k = 0
    for i, subj in enumerate(_NOUNS):
        for j, verb in enumerate(_VERBS):
            obj = _NOUNS[(i + j + 1) % len(_NOUNS)]
            k += 1
            rows = [("The", "the", "DET", "DT", "Definite=Def|PronType=Art", 2, "det", "_"),
                    (subj, subj, "NOUN", "NN", "Number=Sing", 3, "nsubj", "_"),
                    (verb, verb[:-1], "VERB", "VBZ", "Number=Sing|Person=3", 0, "root", "_"),
                    ("a", "a", "DET", "DT", "Definite=Ind|PronType=Art", 5, "det", "_"),
                    (obj, obj, "NOUN", "NN", "Number=Sing", 3, "obj", "SpaceAfter=No"),
                    (".", ".", "PUNCT", ".", "_", 3, "punct", "_")]
            lines = [f"# sent_id = w{k}", f"# text = The {subj} {verb} a {obj}."]
            lines += ["\t".join([str(n), *map(str, r[:5]), str(r[5]), r[6], "_", r[7]])
                      for n, r in enumerate(rows, start=1)]
            blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks) + "\n"


def _warm_file_kernels() -> None:
    """Compile the kernels that read weight vectors from model files (full and compact)
    on the smallest inputs they take."""
    import numpy as np

    from arboreal.io._bitmap import merge_half_planes, scatter_bitmap

    scatter_bitmap(np.zeros(1, dtype=np.uint8), np.zeros(0, dtype=np.float32),
                   np.zeros(8, dtype=np.float32))
    merge_half_planes(np.zeros(1, dtype=np.uint8), np.zeros(1, dtype=np.uint8), 5,
                      np.zeros(1, dtype=np.uint16))


def warmup(model_paths=(), log=None) -> None:
    """Compile (or load from the cache) the kernels that training and parsing use: with
    no model, a tiny pipeline is trained on synthetic sentences and run on raw text with
    both decoders, probabilities, k-best and minimum-risk decoding; each model given is
    run the same way on its own inputs. Writes nothing but numba's cache."""
    import io

    from arboreal.io.conllu import read_conllu
    import arboreal
    from arboreal.models.pipeline import train_pipeline

    say = log or (lambda line: None)
    _warm_file_kernels()
    text = "The dog sees a cat. A bird likes the child.\n\nThe farmer helps a teacher.\n"
    models = [arboreal.load(path) for path in model_paths]
    if not models:
        bank = read_conllu(io.StringIO(_synthetic_treebank()))
        for decoder in ("eisner", "cle"):
            say(f"warmup: training a tiny {decoder} pipeline")
            models.append(train_pipeline(
                bank, bank[:4], {"decoder": decoder, "epochs": 1, "hash_bits": 16},
                folds=2, tagger_epochs=1))
    for model in models:
        say("warmup: parsing")
        words = ["The", "dog", "sees", "a", "cat", "."]
        if model.tokenizer is not None:
            sentences = model.parse_text(text)
        elif model.tag_columns:
            sentences = model.parse_tokens([words])
        else:   # a parser alone needs tagged input
            from arboreal.io.sentence import Sentence

            sentences = model.parse([Sentence.from_columns(
                words, upos=["DET", "NOUN", "VERB", "DET", "NOUN", "PUNCT"])])
        if model.order == 1:   # marginals and k-best trees exist at first order
            model.parse(sentences, decode="mbr", probabilities=True)
            model.parse_kbest(sentences, 2, probabilities=True)
