"""Warnings about training data that parses but is probably not what the user meant.

A treebank whose trees are placeholders (every word on the root, as a converter that
fills HEAD with 0 writes), whose DEPREL column holds something else (thousands of
distinct values), or whose trees have several roots while the model allows one,
trains without error and gives a useless or surprising model. These checks are
cheap (one pass over the HEAD and DEPREL columns) and only warn.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

#: more distinct DEPRELs than this is unusual (UD: 37 relations plus a few hundred subtypes)
MANY_LABELS = 500
#: share of words attached to the root above which trees look like placeholders
FLAT_SHARE = 0.9


def training_data_warnings(sentences: Sequence, single_root: bool = True) -> list[str]:
    """One line per suspicious property of a training treebank (empty list if none).

    ``sentences``: :class:`~arboreal.io.Sentence` objects with trees. O(words).
    """
    if not sentences:
        return []
    warnings = []
    heads = np.concatenate([np.asarray(s.heads[1:]) for s in sentences])
    lengths = np.fromiter((len(s.heads) - 1 for s in sentences), np.int64, len(sentences))
    roots = np.add.reduceat(heads == 0, np.r_[0, np.cumsum(lengths)[:-1]]) if heads.size else lengths
    long_enough = lengths > 1
    if long_enough.any():
        words = int(lengths[long_enough].sum())
        on_root = int(roots[long_enough].sum())
        if on_root > FLAT_SHARE * words:
            warnings.append(f"{100 * on_root / words:.0f}% of the words of sentences longer than one "
                            "word are attached to the root: the trees look like placeholders "
                            "(HEAD 0 everywhere), and a parser learns little from them")
        several = int((roots[long_enough] > 1).sum())
        if single_root and several and not warnings:
            warnings.append(f"{several} sentence(s) have several words attached to the root; the model "
                            "allows exactly one (--multi-root allows several)")
    labels = {d for s in sentences for d in set(np.asarray(s.deprels[1:]).tolist())}
    if len(labels) > MANY_LABELS:
        warnings.append(f"{len(labels)} distinct DEPREL values (Universal Dependencies has 37 relations "
                        "and a few hundred subtypes): is the DEPREL column what it should be?")
    return warnings
