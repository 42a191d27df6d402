"""The neural scorer's vocabularies: strings to ids, without torch.

Ids 0 and 1 of every vocabulary are reserved: 0 pads, 1 stands for a value not seen in
training (``<unk>``). Words are looked up lower-cased; characters as they are.
The tag vocabularies (UPOS, XPOS, FEATS, lemma rules, DEPREL) are the classes of the
network's classifiers; a column that is ``_`` throughout the training data gets no
classifier (its vocabulary holds the reserved ids only). In an annotated UPOS, XPOS or
FEATS column ``_`` is a class (FEATS ``_``: a word without features); a lemma ``_`` is
unannotated and has no loss.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

PAD, UNK = 0, 1
RESERVED = ("<pad>", "<unk>")
#: the columns the network can predict, as Sentence attributes, in model-file order
TAG_COLUMNS = ("upos", "xpos", "feats", "lemmas")
#: the columns whose "_" is a value of an annotated column (FEATS: no features; UPOS and
#: XPOS: a tag as written) rather than "not annotated" (a lemma of "_" is no lemma)
CLASS_UNDERSCORE = ("upos", "xpos", "feats")


def lemma_class(form: str, lemma: str) -> str:
    """The lemma column's class of a word: its edit rule (see
    :func:`arboreal.features.lemmas.lemma_rule`)."""
    from arboreal.features.lemmas import lemma_rule

    return lemma_rule(form, lemma)


class Vocab:
    """A list of strings with the reserved ids first; ``index`` maps back."""

    def __init__(self, items):
        self.items = list(RESERVED) + [s for s in items if s not in RESERVED]
        self.index = {s: i for i, s in enumerate(self.items)}

    def __len__(self) -> int:
        return len(self.items)

    def ids(self, values) -> np.ndarray:
        """int64 ids of ``values`` (UNK for unseen ones). O(len(values))."""
        get = self.index.get
        return np.fromiter((get(v, UNK) for v in values), dtype=np.int64, count=len(values))

    @property
    def used(self) -> bool:
        """Whether any value beyond the reserved ones was seen (a classifier exists)."""
        return len(self.items) > len(RESERVED)


@dataclass
class Vocabularies:
    """Every vocabulary of one neural model."""

    words: Vocab
    chars: Vocab
    deprels: Vocab
    #: column -> Vocab of its classes (TAG_COLUMNS; lemmas hold lemma rules)
    tags: dict
    #: the UPOS values fed as input when the encoder reads tags (else empty)
    input_tags: Vocab

    @classmethod
    def build(cls, sentences, min_word_count: int = 2, extra_words=(),
              tag_input: bool = False) -> "Vocabularies":
        """Vocabularies of training ``sentences``: lower-cased words seen at least
        ``min_word_count`` times (plus ``extra_words``, e.g. those of pretrained
        embeddings), every character, every DEPREL and tag class. O(words)."""
        words: Counter = Counter()
        chars: Counter = Counter()
        deprels: Counter = Counter()
        tags = {c: Counter() for c in TAG_COLUMNS}
        for s in sentences:
            forms = s.forms[1:].tolist()
            words.update(f.lower() for f in forms)
            for f in forms:
                chars.update(f)
            deprels.update(s.deprels[1:].tolist())
            for c in ("upos", "xpos", "feats"):
                tags[c].update(getattr(s, c)[1:].tolist())
            lemmas = s.lemmas[1:].tolist()
            if any(v != "_" for v in lemmas):
                tags["lemmas"].update(lemma_class(f, l) for f, l in zip(forms, lemmas))
        kept = [w for w, k in sorted(words.items(), key=lambda x: (-x[1], x[0]))
                if k >= min_word_count]
        kept += [w for w in extra_words if w not in set(kept)]
        tag_vocabs = {}
        for c, counts in tags.items():
            values = [v for v in counts if v != "_"]
            # a column that is "_" throughout (or nearly: fewer than 1% of the words
            # annotated) is not predicted
            annotated = sum(counts[v] for v in values)
            total = sum(counts.values())
            if not (total and annotated >= 0.01 * total):
                values = []
            elif c in CLASS_UNDERSCORE and "_" in counts:
                values.append("_")
            tag_vocabs[c] = Vocab(sorted(values))
        deprel_values = sorted(v for v in deprels if v != "_")
        return cls(Vocab(kept), Vocab(sorted(chars)), Vocab(deprel_values), tag_vocabs,
                   Vocab(sorted(tag_vocabs["upos"].items[len(RESERVED):]) if tag_input
                         else []))

    def names_and_lists(self) -> dict[str, list[str]]:
        """Every vocabulary as a list without the reserved entries (model files)."""
        out = {"words": self.words.items, "chars": self.chars.items,
               "deprels": self.deprels.items, "input_tags": self.input_tags.items}
        out.update({f"tag_{c}": v.items for c, v in self.tags.items()})
        return {k: v[len(RESERVED):] for k, v in out.items()}

    @classmethod
    def from_lists(cls, lists: dict[str, list[str]]) -> "Vocabularies":
        """Inverse of :meth:`names_and_lists`."""
        return cls(Vocab(lists["words"]), Vocab(lists["chars"]), Vocab(lists["deprels"]),
                   {c: Vocab(lists[f"tag_{c}"]) for c in TAG_COLUMNS},
                   Vocab(lists["input_tags"]))
