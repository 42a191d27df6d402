"""The in-memory sentence: syntactic words as numpy arrays.

Convention used everywhere in arboreal: every per-word array has length ``n + 1``;
position 0 is the artificial root (form ``ROOT_TOKEN``, head ``-1``), positions
1..n are the syntactic words in order. ``heads[m]`` is the head of word ``m``
(0 means the root); ``heads[0] == -1``. A word whose head is unknown (input read
with ``allow_missing_heads``) also has head ``-1``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

ROOT_TOKEN = "<root>"


@dataclass(eq=False)
class Sentence:
    """One sentence of a treebank.

    Attributes (all numpy arrays of shape (n+1,), index 0 the root):
        forms, lemmas, upos, xpos, feats, deprels, deps, misc: object arrays of str
            (CoNLL-U columns 2-5, 6, 8, 9, 10; "_" where the file has "_").
        heads: int32 array, ``heads[0] == -1``.
        Index 0 holds ``ROOT_TOKEN`` in every string column.
    comments: the sentence's comment lines, without the trailing newline.
    extra: CoNLL-U lines that are not syntactic words (multiword-token ranges
        ``3-4`` and empty nodes ``8.1``), each as ``(k, line)``: the line stands
        right after syntactic word ``k`` (k = 0: before the first word).
    line: 1-based line in the source file where the sentence starts (its first
        comment or word line); None for sentences not read from a file.

    The ID column is not stored: word IDs are always 1..n (the reader checks
    this), so the writer regenerates them byte for byte. Arrays read from one
    file are slices (views) of corpus-level arrays; ``with_tree`` copies what
    it replaces.
    """

    forms: np.ndarray
    lemmas: np.ndarray
    upos: np.ndarray
    xpos: np.ndarray
    feats: np.ndarray
    heads: np.ndarray
    deprels: np.ndarray
    deps: np.ndarray
    misc: np.ndarray
    comments: list[str] = field(default_factory=list)
    extra: list[tuple[int, str]] = field(default_factory=list)
    line: int | None = None

    def __len__(self) -> int:
        """Number of syntactic words n (the root is not counted)."""
        return len(self.forms) - 1

    def __iter__(self):
        """The words 1..n as :class:`~arboreal.io.document.Word` objects (the root is
        not one of them)."""
        from arboreal.io.document import sentence_words

        return iter(sentence_words(self))

    @property
    def words(self) -> list:
        """The words 1..n as :class:`~arboreal.io.document.Word` objects."""
        from arboreal.io.document import sentence_words

        return sentence_words(self)

    @property
    def text(self) -> str:
        """The sentence's text: its ``# text`` comment, else its forms joined (a space
        between words unless MISC says ``SpaceAfter=No``)."""
        from arboreal.io.document import sentence_text

        return sentence_text(self)

    @property
    def sent_id(self) -> str | None:
        """The value of the ``# sent_id = ...`` comment, or None."""
        for c in self.comments:
            if c.startswith("# sent_id"):
                key, sep, value = c[1:].partition("=")
                if sep and key.strip() == "sent_id":
                    return value.strip()
        return None

    @classmethod
    def from_columns(
        cls,
        forms,
        heads=None,
        deprels=None,
        *,
        lemmas=None,
        upos=None,
        xpos=None,
        feats=None,
        deps=None,
        misc=None,
        comments: list[str] | None = None,
    ) -> "Sentence":
        """Build a sentence from per-word columns of length n (no root entry).

        Missing string columns become ``"_"``; missing heads become -1
        (unknown). The root entry (index 0) is added: ``ROOT_TOKEN`` in the
        string columns, -1 in ``heads``.
        """
        n = len(forms)

        def col(values):
            arr = np.empty(n + 1, dtype=object)
            arr[0] = ROOT_TOKEN
            arr[1:] = "_" if values is None else [str(v) for v in values]
            return arr

        h = np.full(n + 1, -1, dtype=np.int32)
        if heads is not None:
            h[1:] = np.asarray(heads, dtype=np.int64)
        return cls(
            forms=col(forms), lemmas=col(lemmas), upos=col(upos), xpos=col(xpos),
            feats=col(feats), heads=h, deprels=col(deprels), deps=col(deps), misc=col(misc),
            comments=list(comments or []),
        )

    @property
    def has_heads(self) -> bool:
        """True when every word has a head (False for unparsed input)."""
        return bool(len(self) == 0 or (self.heads[1:] >= 0).all())

    def with_tree(self, heads: np.ndarray, deprels: np.ndarray | None = None) -> "Sentence":
        """A copy with new HEAD (and DEPREL) columns. DEPS (the enhanced graph, whose
        basic part repeats HEAD:DEPREL) becomes ``_`` for every word, since the old
        graph would contradict the new tree; every other column is shared.

        ``heads`` has shape (n+1,) with ``heads[0] == -1``; ``deprels`` (n+1,) of str.
        """
        heads = np.asarray(heads, dtype=np.int32).copy()
        heads[0] = -1
        deps = np.full(len(self.deps), "_", dtype=object)
        deps[0] = self.deps[0]
        new = replace(self, heads=heads, deps=deps)
        if deprels is not None:
            new.deprels = np.asarray(deprels, dtype=object).copy()
            new.deprels[0] = ROOT_TOKEN
        return new
