"""Very long sentences, parsed in pieces so that memory stays bounded.

First-order parsing needs O(n^2) memory for a sentence of n words (the arc scores
and the decoder's chart), so one "sentence" of 50,000 words (a document without
sentence breaks, say) would need tens of gigabytes. Sentences longer than
:data:`MAX_WORDS` are therefore cut into consecutive pieces of at most that many
words; each piece is parsed as a sentence of its own, and the pieces' trees are
joined into one tree:

- single-root models: the root word of the first piece stays the root; the root
  word of every later piece is attached to it with the relation ``dep`` (UD's
  unspecified dependency), which keeps the tree projective when the pieces are;
- multi-root models: every piece's root words stay on the root.

Memory is then O(MAX_WORDS^2) whatever the input; the arcs between pieces are the
price. :func:`parse_in_pieces` counts such sentences so that the command line can
warn about them.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from arboreal.io.sentence import Sentence

#: the longest sentence parsed whole (its memory at first order: docs/benchmarks.md)
MAX_WORDS = 6000
#: relation of a later piece's root word attached to the first piece's root
JOIN_RELATION = "dep"


def _piece(s: Sentence, a: int, b: int) -> Sentence:
    """Words a+1..b of ``s`` as a sentence of their own (comments and extras dropped)."""
    keep = np.r_[0, a + 1:b + 1]
    heads = np.full(b - a + 1, -1, dtype=np.int32)
    return Sentence(forms=s.forms[keep], lemmas=s.lemmas[keep], upos=s.upos[keep],
                    xpos=s.xpos[keep], feats=s.feats[keep], heads=heads,
                    deprels=s.deprels[keep], deps=s.deps[keep], misc=s.misc[keep],
                    comments=[], extra=[], line=s.line)


def parse_in_pieces(parse: Callable[[list], list], sentences: Sequence[Sentence],
                    single_root: bool = True, max_words: int | None = None,
                    owners: list | None = None) -> tuple[list, int]:
    """``parse(sentences)`` with every sentence over ``max_words`` (default
    :data:`MAX_WORDS`) parsed as consecutive pieces and joined (see the module
    docstring). Returns (parsed sentences in input order, number of sentences split).

    ``parse`` maps a list of sentences to parsed copies (a model's whole-sentence
    parse), called once; ``owners``, when given, is filled with the index in
    ``sentences`` of each sentence or piece that call got, in its order (a piece's
    count as its sentence's). O(words) besides the parsing itself.
    """
    limit = MAX_WORDS if max_words is None else max_words
    sentences = list(sentences)
    long = [i for i, s in enumerate(sentences) if len(s) > limit]
    if owners is not None:
        owners[:] = [i for i, s in enumerate(sentences) if len(s) <= limit] + [
            i for i in long for _ in range(0, len(sentences[i]), limit)]
    if not long:
        return parse(sentences), 0
    plan = []                      # (sentence index, piece starts) of the split ones
    batch = [s for s in sentences if len(s) <= limit]
    for i in long:
        n = len(sentences[i])
        starts = list(range(0, n, limit))
        plan.append((i, starts))
        batch.extend(_piece(sentences[i], a, min(a + limit, n)) for a in starts)
    parsed = parse(batch)
    out: list = [None] * len(sentences)
    short = iter(parsed[: len(sentences) - len(long)])
    for i, s in enumerate(sentences):
        if len(s) <= limit:
            out[i] = next(short)
    k = len(sentences) - len(long)
    for i, starts in plan:
        s = sentences[i]
        heads = np.full(len(s) + 1, -1, dtype=np.int32)
        deprels = np.empty(len(s) + 1, dtype=object)
        deprels[0] = s.deprels[0]
        top = -1
        for a in starts:
            p = parsed[k]
            k += 1
            m = len(p)
            h = p.heads[1:].astype(np.int32)
            heads[a + 1:a + m + 1] = np.where(h > 0, h + a, 0)
            deprels[a + 1:a + m + 1] = p.deprels[1:]
            if single_root:
                root = a + 1 + int(np.flatnonzero(h == 0)[0])
                if top < 0:
                    top = root
                else:
                    heads[root] = top
                    deprels[root] = JOIN_RELATION
        out[i] = s.with_tree(heads, deprels)
    return out, len(long)
