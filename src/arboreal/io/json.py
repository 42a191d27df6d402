"""JSON output: parsed sentences as records, and displaCy's manual format.

``json``: one JSON array, one object per sentence (one line each, so a stream of
sentences is written as it comes)::

    {"sent_id": "s1", "comments": [...], "text": "It works.",
     "words": [{"id": 1, "form": "It", "lemma": "it", "upos": "PRON", "xpos": "PRP",
                "feats": "Case=Nom|...", "head": 2, "deprel": "nsubj", "misc": "_",
                "head_prob": 0.98, "label_prob": 0.99}, ...],
     "tokens": [{"id": "3-4", "form": "don't", "misc": "_"}],     # multiword tokens
     "kbest_rank": 2, "tree_score": 31.4}                          # with --kbest

``head_prob`` / ``label_prob`` appear when MISC has ``HeadProb`` / ``LabelProb``
(``arboreal parse --marginals``); ``head`` is null for a word without a head.

``displacy``: one JSON array of displaCy "manual" dicts, ``{"words": [{"text", "tag"}],
"arcs": [{"start", "end", "label", "dir"}], "title"}`` (0-based word indices, the
root's arc left out), for ``spacy.displacy.render(..., manual=True)``.
"""
from __future__ import annotations

import json
from typing import Iterable, Iterator

from arboreal.io.conllu import _WRITE_BATCH, batched, format_conllu, write_text
from arboreal.io.sentence import Sentence

#: output formats of ``parse`` and ``tag``
OUTPUT_FORMATS = ("conllu", "json", "displacy")


def _comment_value(s: Sentence, key: str) -> str | None:
    for c in s.comments:
        k, sep, value = c[1:].partition("=")
        if sep and k.strip() == key:
            return value.strip()
    return None


def _misc_number(misc: str, key: str) -> float | None:
    for item in misc.split("|"):
        k, sep, value = item.partition("=")
        if sep and k == key:
            try:
                return float(value)
            except ValueError:
                return None
    return None


def sentence_record(s: Sentence) -> dict:
    """A sentence as a JSON-ready dict (see the module docstring). O(n)."""
    words = []
    cols = (s.forms, s.lemmas, s.upos, s.xpos, s.feats, s.heads, s.deprels, s.misc)
    for i, (form, lemma, upos, xpos, feats, head, deprel, misc) in enumerate(zip(*cols)):
        if i == 0:
            continue
        word = {"id": i, "form": form, "lemma": lemma, "upos": upos, "xpos": xpos,
                "feats": feats, "head": int(head) if head >= 0 else None, "deprel": deprel,
                "misc": misc}
        for key, field in (("HeadProb", "head_prob"), ("LabelProb", "label_prob")):
            value = _misc_number(misc, key)
            if value is not None:
                word[field] = value
        words.append(word)
    record: dict = {"sent_id": s.sent_id, "comments": list(s.comments),
                    "text": _comment_value(s, "text"), "words": words}
    tokens = []
    for _, line in s.extra:
        f = line.split("\t")
        if "-" in f[0]:
            tokens.append({"id": f[0], "form": f[1] if len(f) > 1 else "_",
                           "misc": f[9] if len(f) > 9 else "_"})
    if tokens:
        record["tokens"] = tokens
    rank = _comment_value(s, "kbest_rank")
    if rank is not None:
        record["kbest_rank"] = int(rank)
        record["tree_score"] = float(_comment_value(s, "tree_score") or "nan")
    return record


def displacy_record(s: Sentence) -> dict:
    """A sentence in displaCy's manual format (see the module docstring). O(n)."""
    words = [{"text": f, "tag": u} for f, u in zip(s.forms[1:].tolist(), s.upos[1:].tolist())]
    arcs = []
    for m in range(1, len(s.forms)):
        h = int(s.heads[m])
        if h <= 0:
            continue
        arcs.append({"start": min(h, m) - 1, "end": max(h, m) - 1, "label": s.deprels[m],
                     "dir": "left" if m < h else "right"})
    record = {"words": words, "arcs": arcs}
    title = s.sent_id or _comment_value(s, "text")
    if title:
        record["title"] = title
    return record


def format_sentences(sentences: list[Sentence], output_format: str = "conllu") -> str:
    """``sentences`` in one of :data:`OUTPUT_FORMATS`: CoNLL-U text, or JSON records one
    per line joined by ``,`` (the items of the array :func:`array_framing` frames)."""
    if output_format == "conllu":
        return format_conllu(sentences)
    if output_format == "json":
        record = sentence_record
    elif output_format == "displacy":
        record = displacy_record
    else:
        raise ValueError(f"output format must be one of {OUTPUT_FORMATS}, got {output_format!r}")
    return ",\n".join(json.dumps(record(s), ensure_ascii=False) for s in sentences)


def array_framing(texts: Iterable[str], output_format: str) -> Iterator[str]:
    """The texts of :func:`format_sentences` for consecutive batches as one document:
    CoNLL-U unchanged, JSON items inside one array."""
    if output_format == "conllu":
        yield from texts
        return
    first = True
    for text in texts:
        if text:
            yield ("[\n" if first else ",\n") + text
            first = False
    yield "[]\n" if first else "\n]\n"


def write_sentences(sentences: Iterable[Sentence], path_or_file, output_format: str = "conllu"
                    ) -> None:
    """Write ``sentences`` (any iterable, streamed a batch at a time) in one of
    :data:`OUTPUT_FORMATS`, to a path (atomically), ``"-"`` or an open file."""
    texts = (format_sentences(b, output_format) for b in batched(sentences, _WRITE_BATCH))
    write_text(array_framing(texts, output_format), path_or_file)
