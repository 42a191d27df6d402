"""Tokenizer and sentence splitter trained on a treebank's own text.

A treebank with ``# text`` lines says how its text was cut into tokens (the surface
tokens: multiword tokens such as Spanish *del* count once) and sentences. The tokenizer
learns it as a tagging stage over the characters of each paragraph (see
:mod:`arboreal.features.characters`): after each character, *no boundary* (0), *token
end* (1) or *token and sentence end* (2); greedy left to right with the averaged
perceptron of :mod:`arboreal.learn.tagging`. Paragraphs are the treebank's
``# newpar`` / ``# newdoc`` blocks, their sentences' texts joined by a space (none after
a token with ``SpaceAfter=No``). A multiword token is expanded into its words by the
training lexicon when the form was more often a multiword token than not there (the
words' letters are cut from the token itself when they spell it out, else the casing of
the first letter, or of every letter, is carried over); an unknown token is split into words by
the splitter when training spelled out enough multiword tokens (:data:`MIN_SPLIT_TYPES`):
a second character stage, *word ends here* or not after each character of a token,
trained on the distinct token forms of training (the spelled-out multiword tokens with
their word boundaries, the others with none) with character features alone, no lexicon,
as an unseen form has none; else, or where it splits nothing, an unknown token ending in a
final word that training split off most tokens ending in it (English *'s*) is split
there; other tokens are one word each. A paragraph end always ends a sentence, and a sentence is cut
after :data:`MAX_SENTENCE_TOKENS` tokens when no sentence end came earlier. Spans that UD
keeps as one token in any language (URLs, e-mail addresses, domain and file names,
emoticons: :func:`~arboreal.features.characters.one_token_spans`) are a feature of the
characters and, when the training text kept at least :data:`ONE_TOKEN_MIN_SHARE` of
them whole (of at least :data:`ONE_TOKEN_MIN_COUNT`), a rule: no boundary inside such
a span, a token boundary after it, and one before it after an opening bracket or quote.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Callable, Iterable, Iterator

import numpy as np

from arboreal.errors import ArborealError
from arboreal.features.characters import ATTRIBUTES_VERSION, CharacterAttributes, one_token_spans
from arboreal.features.tokens import FEATURES_VERSION, MAX_CANDIDATES, N_ATTRS, greedy_tag
from arboreal.io.sentence import Sentence
from arboreal.io.model_file import (MetaFields, get_string_list, get_weights, put_strings,
                                           put_weights)

NONE, TOKEN_END, SENTENCE_END = 0, 1, 2
DEFAULT_BITS = 22
DEFAULT_EPOCHS = 10
#: a sentence is cut after this many tokens when no sentence end is predicted
MAX_SENTENCE_TOKENS = 1000
#: a final word is split off unknown tokens when training split it this often (and
#: from most tokens ending in it)
MIN_SUFFIX_COUNT = 5
#: a chunk's training segmentation is a feature when the chunk was seen this often
#: (chosen on EWT dev boundary F1 among 2, 4, 8 and 16: a segmentation seen a few
#: times is as perfect in training as it is unreliable on new text)
MIN_SEGMENTATION_COUNT = 8
#: the one-token spans become a rule when training kept this share of them whole ...
ONE_TOKEN_MIN_SHARE = 0.95
#: ... of at least this many
ONE_TOKEN_MIN_COUNT = 10
#: characters split off the start of a one-token span
OPENING = "<([{\"'"
#: folds of the training paragraphs for their lexicon features (see _pack_jackknifed)
LEXICON_FOLDS = 5
#: ... when there are at least this many paragraphs: with fewer, a fold's lexicon would
#: come from a handful of paragraphs, far poorer than the model's (two paragraphs of
#: 40 sentences: each paragraph's lexicon from the other one)
MIN_FOLD_PARAGRAPHS = 10 * LEXICON_FOLDS
#: a splitter of unseen tokens into words (:meth:`Tokenizer._split_unseen`) is trained
#: when training has at least this many distinct multiword tokens that spell out their
#: words (Coptic's bound groups, Hebrew's and Arabic's clitics, English *don't*)
MIN_SPLIT_TYPES = 50
#: hashed weights (2**bits) and epochs of the splitter
SPLIT_BITS = 20
SPLIT_EPOCHS = 5
#: characters tokenized per kernel call (memory: 96 bytes of attributes each)
BATCH_CHARS = 1 << 20

_SPACE = re.compile(r"\s")
_CHUNK = re.compile(r"\S+")
_SPACE_AFTER_NO = re.compile(r"(^|\|)SpaceAfter=No($|\|)")


def _surface_tokens(s: Sentence) -> list[tuple[str, list[int], str]]:
    """(surface form, word indices, MISC of the token) of each surface token of ``s``."""
    ranges: dict[int, tuple[int, str, str]] = {}
    for _, line in s.extra:
        fields = line.split("\t")
        first, sep, last = fields[0].partition("-")
        if sep and first.isdigit() and last.isdigit() and len(fields) > 1:
            ranges[int(first)] = (int(last), fields[1], fields[9] if len(fields) > 9 else "_")
    out = []
    i = 1
    n = len(s)
    while i <= n:
        if i in ranges and ranges[i][0] >= i:
            last, form, misc = ranges[i]
            last = min(last, n)
            out.append((form, list(range(i, last + 1)), misc))
            i = last + 1
        else:
            out.append((str(s.forms[i]), [i], str(s.misc[i])))
            i += 1
    return out


def _text_of(s: Sentence) -> str | None:
    for c in s.comments:
        if c.startswith("# text ="):
            return c[len("# text ="):].strip()
    return None


def _starts_paragraph(s: Sentence) -> bool:
    return any(c.startswith(("# newpar", "# newdoc")) for c in s.comments)


def training_paragraphs(sentences: list) -> tuple[list[tuple[str, np.ndarray]], int]:
    """The paragraphs of a treebank as (text, labels (len(text),) int32) pairs, and how
    many sentences were skipped (no ``# text`` line, or tokens that do not match it).
    O(characters)."""
    paragraphs: list[tuple[str, np.ndarray]] = []
    skipped = 0
    parts: list[str] = []
    ends: list[tuple[int, int]] = []       # (character offset, label)
    length = 0
    glue = ""

    def close() -> None:
        nonlocal parts, ends, length, glue
        if parts:
            text = "".join(parts)
            labels = np.zeros(len(text), dtype=np.int32)
            for at, lab in ends:
                labels[at] = lab
            paragraphs.append((text, labels))
        parts, ends, length, glue = [], [], 0, ""

    for s in sentences:
        text = _text_of(s)
        if _starts_paragraph(s):
            close()
        surface = _surface_tokens(s)
        if text is None or not surface:
            skipped += 1
            close()
            continue
        spans = []
        pos = 0
        ok = True
        for form, _, _ in surface:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if not text.startswith(form, pos):
                ok = False
                break
            spans.append((pos, pos + len(form)))
            pos += len(form)
        if not ok or text[pos:].strip():
            skipped += 1
            close()
            continue
        base = length + len(glue)
        parts.append(glue + text)
        length = base + len(text)
        for k, (a, b) in enumerate(spans):
            ends.append((base + b - 1, SENTENCE_END if k == len(spans) - 1 else TOKEN_END))
        glue = "" if _SPACE_AFTER_NO.search(surface[-1][2]) else " "
    close()
    return paragraphs, skipped


class Tokenizer:
    """Raw text -> sentences of words (see the module docstring).

    Attributes: ``weights`` / ``bits`` of the character stage, ``tokens`` (lower-cased
    token forms of training), ``segmentations`` (chunk -> boundary offsets),
    ``multiword`` (lower-cased surface form -> its words), ``meta``.
    """

    def __init__(self, weights: np.ndarray, bits: int, tokens: set[str],
                 segmentations: dict[str, frozenset[int]], multiword: dict[str, tuple[str, ...]],
                 meta: dict | None = None, spaces_in_tokens: bool = False,
                 suffixes: list[str] | None = None, one_token_rule: bool = False,
                 split_weights: np.ndarray | None = None, split_bits: int = SPLIT_BITS):
        #: whether training had tokens containing whitespace (Vietnamese has); if not,
        #: whitespace always ends a token
        self.spaces_in_tokens = spaces_in_tokens
        #: final words split off unknown tokens (longest first), e.g. English 's
        self.suffixes = list(suffixes or [])
        #: whether one-token spans are always one token (training kept them whole)
        self.one_token_rule = one_token_rule
        self.weights = weights
        self.bits = bits
        self.tokens = tokens
        self.segmentations = segmentations
        self.multiword = multiword
        self.meta = dict(meta or {})
        self.attributes = CharacterAttributes(tokens, segmentations)
        #: the splitter of unseen tokens (None: not trained) and its hash size
        self.split_weights = split_weights
        self.split_bits = int(split_bits)
        self._bare = CharacterAttributes(set(), {})

    # ------------------------------------------------------------------ training
    @classmethod
    def train(cls, sentences: list, dev: list | None = None, epochs: int = DEFAULT_EPOCHS,
              bits: int = DEFAULT_BITS, seed: int = 0,
              log: Callable[[str], None] | None = None) -> "Tokenizer":
        """Train on the ``# text`` lines and tokens of ``sentences`` (best epoch by dev
        boundary F1 with ``dev``). ArborealError when no sentence has a ``# text`` line
        matching its tokens."""
        paragraphs, skipped = training_paragraphs(sentences)
        if not paragraphs:
            raise ArborealError("no training sentence has a '# text' line that matches its "
                                "tokens: the tokenizer cannot be trained (train with "
                                "--no-tokenizer)")
        # lexicons: token forms, chunk segmentations, multiword tokens
        tokens: set[str] = set()
        plain: Counter = Counter()
        expansions: dict[str, Counter] = defaultdict(Counter)
        for s in sentences:
            for form, words, _ in _surface_tokens(s):
                low = form.lower()
                tokens.add(low)
                if len(words) > 1:
                    expansions[low][tuple(str(s.forms[w]).lower() for w in words)] += 1
                else:
                    plain[low] += 1
        multiword = {}
        for low, counts in expansions.items():
            words, k = counts.most_common(1)[0]
            if sum(counts.values()) > plain[low]:
                multiword[low] = words
        # the suffix fallback: a final word that multiword tokens spell out (English
        # possessive 's) is split off unknown tokens when training mostly split it
        split_off: Counter = Counter()
        for low, counts in expansions.items():
            for words, k in counts.items():
                if len(words) == 2 and "".join(words) == low:
                    split_off[words[1]] += k
        ending: Counter = Counter()
        for low in tokens:
            for suffix in split_off:
                if low.endswith(suffix) and len(low) > len(suffix):
                    ending[suffix] += plain[low] + sum(expansions[low].values())
        suffixes = sorted((x for x, k in split_off.items()
                           if k >= MIN_SUFFIX_COUNT and 2 * k > ending[x]),
                          key=lambda x: (-len(x), x))
        segmentations = _segmentations(paragraphs)
        whole, spans = _one_token_spans_kept(paragraphs)
        model = cls(np.zeros(0, np.float32), bits, tokens, segmentations, multiword,
                    spaces_in_tokens=any(any(c.isspace() for c in t) for t in tokens),
                    suffixes=suffixes,
                    one_token_rule=spans >= ONE_TOKEN_MIN_COUNT
                    and whole >= ONE_TOKEN_MIN_SHARE * spans)
        model._train_splitter(sentences, seed)
        attrs, starts, gold = model._pack_jackknifed(paragraphs)
        cand = np.array([[NONE, TOKEN_END, SENTENCE_END]], dtype=np.int32)
        cand_n = np.array([3], dtype=np.int32)
        ctx = np.zeros((len(gold), 0), dtype=np.int32)
        from arboreal.learn.tagging import StageLearner
        from arboreal.learn.trainer import Trainer

        evaluate = None
        if dev:
            dev_pars, _ = training_paragraphs(dev)
            if dev_pars:
                dattrs, dstarts, dgold = model._pack([t for t, _ in dev_pars],
                                                     [lab for _, lab in dev_pars])

                def evaluate(w: np.ndarray, epoch: int) -> dict:
                    model.weights = w
                    pred = model._labels(dattrs, dstarts, [t for t, _ in dev_pars])
                    f1 = _boundary_f1(dgold, pred)
                    if log is not None:
                        log(f"tokenizer epoch {epoch}: dev boundary F1 {f1:.2f}")
                    return {"score": f1}
        result = Trainer(epochs, seed).run(
            StageLearner(attrs, starts, ctx, -1, cand, cand_n, gold, bits), evaluate)
        model.weights = result.snapshot
        f1 = result.record.dev["score"] if evaluate is not None else None
        model.meta = {"epochs": result.epoch if evaluate is not None else epochs, "bits": bits,
                      "seed": seed, "paragraphs": len(paragraphs), "skipped_sentences": skipped,
                      "one_token_spans": spans, "one_token_spans_whole": whole,
                      "dev_boundary_f1": round(f1, 2) if f1 is not None else None}
        return model

    def _train_splitter(self, sentences: list, seed: int) -> None:
        """Train :attr:`split_weights` on the distinct surface forms of ``sentences``
        (each form's most frequent analysis: the word boundaries of a spelled-out
        multiword token, none for a plain token; other multiword tokens and tokens with
        spaces are left out), when at least :data:`MIN_SPLIT_TYPES` of them are spelled
        out. O(characters of the distinct forms x epochs)."""
        analyses: dict[str, Counter] = defaultdict(Counter)
        for s in sentences:
            for form, words, _ in _surface_tokens(s):
                if not form or any(c.isspace() for c in form):
                    continue
                if len(words) == 1:
                    analyses[form][()] += 1
                    continue
                parts = [str(s.forms[w]) for w in words]
                if "".join(parts).lower() == form.lower() and all(parts):
                    analyses[form][tuple(np.cumsum([len(x) for x in parts[:-1]]) - 1)] += 1
        forms = sorted(analyses)
        best = [analyses[f].most_common(1)[0][0] for f in forms]
        if sum(1 for b in best if b) < MIN_SPLIT_TYPES:
            return
        from arboreal.learn.tagging import StageLearner
        from arboreal.learn.trainer import Trainer

        attrs, starts, _ = self._pack(forms, attributes=self._bare)
        gold = np.zeros(len(attrs), dtype=np.int32)
        for k, cuts in enumerate(best):
            gold[starts[k] + np.asarray(cuts, dtype=np.int64)] = 1
        cand = np.array([[0, 1]], dtype=np.int32)
        learner = StageLearner(attrs, starts, np.zeros((len(gold), 0), dtype=np.int32), -1,
                               cand, np.array([2], dtype=np.int32), gold, self.split_bits)
        self.split_weights = Trainer(SPLIT_EPOCHS, seed).run(learner).snapshot

    def _split_unseen(self, forms: list[str]) -> list[tuple[str, ...]]:
        """The words of each of ``forms`` by the splitter (a form it does not split: one
        word). One kernel call for all of them; O(characters)."""
        if self.split_weights is None or not forms:
            return [(f,) for f in forms]
        attrs, starts, _ = self._pack(forms, attributes=self._bare)   # no lexicon
        out = np.zeros(len(attrs), dtype=np.int32)
        greedy_tag(attrs, starts, np.zeros((len(attrs), 0), dtype=np.int32), -1,
                   np.array([[0, 1]], dtype=np.int32), np.array([2], dtype=np.int32),
                   self.split_weights, self.split_bits, out)
        result = []
        for k, form in enumerate(forms):
            cuts = np.flatnonzero(out[starts[k]: starts[k + 1] - 1]).tolist()
            bounds = [0, *(c + 1 for c in cuts), len(form)]
            result.append(tuple(form[a:b] for a, b in zip(bounds, bounds[1:])))
        return result

    def _pack_jackknifed(self, paragraphs: list[tuple[str, np.ndarray]]):
        """``_pack`` of training paragraphs whose attribute rows read the lexicons
        (known tokens, chunk segmentations) of the other :data:`LEXICON_FOLDS` - 1
        folds of the paragraphs: in training, as on new text, a chunk's lexicon
        entries come from other text, so the weights do not learn to trust lexicon
        entries more than they deserve. With fewer than :data:`MIN_FOLD_PARAGRAPHS`
        paragraphs, the model's own lexicons. O(LEXICON_FOLDS x characters)."""
        if len(paragraphs) < MIN_FOLD_PARAGRAPHS:
            return self._pack([t for t, _ in paragraphs], [lab for _, lab in paragraphs])
        folds = [paragraphs[f::LEXICON_FOLDS] for f in range(LEXICON_FOLDS)]
        rows: list[np.ndarray] = [None] * len(paragraphs)   # type: ignore[list-item]
        for f, fold in enumerate(folds):
            rest = [p for g, other in enumerate(folds) if g != f for p in other]
            attributes = CharacterAttributes(_paragraph_tokens(rest), _segmentations(rest))
            for k, (text, _) in enumerate(fold):
                rows[f + k * LEXICON_FOLDS] = attributes.rows(text)
        starts = np.zeros(len(paragraphs) + 1, dtype=np.int64)
        np.cumsum([len(t) for t, _ in paragraphs], out=starts[1:])
        attrs = np.concatenate(rows) if rows else np.zeros((0, N_ATTRS), dtype=np.uint64)
        gold = np.concatenate([lab for _, lab in paragraphs]).astype(np.int32)
        return attrs, starts, gold

    def _pack(self, texts: list[str], labels: list[np.ndarray] | None = None,
              attributes: CharacterAttributes | None = None):
        """Character attribute rows of ``texts`` (by ``attributes``, default the model's,
        with its lexicons), their offsets and the packed ``labels``."""
        attributes = attributes or self.attributes
        starts = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum([len(t) for t in texts], out=starts[1:])
        attrs = (np.concatenate([attributes.rows(t) for t in texts]) if texts
                 else np.zeros((0, N_ATTRS), dtype=np.uint64))
        gold = np.concatenate(labels).astype(np.int32) if labels is not None else None
        return attrs, starts, gold

    def _labels(self, attrs: np.ndarray, starts: np.ndarray,
                texts: list[str] | None = None) -> np.ndarray:
        """Boundary labels of the packed characters; with ``texts`` (the packed texts)
        and :attr:`one_token_rule`, the rule applied to each text's one-token spans."""
        out = np.zeros(len(attrs), dtype=np.int32)
        if len(out):
            cand = np.array([[NONE, TOKEN_END, SENTENCE_END]], dtype=np.int32)
            greedy_tag(attrs, starts, np.zeros((len(attrs), 0), dtype=np.int32), -1, cand,
                       np.array([3], dtype=np.int32), self.weights, self.bits, out)
        if texts is not None and self.one_token_rule:
            for k, text in enumerate(texts):
                lab = out[starts[k]: starts[k + 1]]
                for a, b in _text_spans(text):
                    _one_token_rule(text, lab, a, b)
        return out

    # ------------------------------------------------------------------ tokenizing
    def split(self, paragraphs: Iterable[str], sentences: bool = True
              ) -> Iterator[tuple[str, list[tuple[int, int]], bool]]:
        """(paragraph, token spans (start, end) of one sentence, whether it is the
        paragraph's first sentence) for every sentence; paragraphs are tokenized about
        BATCH_CHARS characters at a time, so memory stays bounded. ``sentences=False``:
        each paragraph is one sentence (text given a sentence per line), cut only past
        MAX_SENTENCE_TOKENS tokens."""
        batch: list[str] = []
        size = 0
        for p in paragraphs:
            if not p.strip():
                continue
            batch.append(p)
            size += len(p)
            if size >= BATCH_CHARS:
                yield from self._split_batch(batch, sentences)
                batch, size = [], 0
        if batch:
            yield from self._split_batch(batch, sentences)

    def _split_batch(self, texts: list[str], sentences: bool = True):
        attrs, starts, _ = self._pack(texts)
        labels = self._labels(attrs, starts, texts)
        for k, text in enumerate(texts):
            lab = labels[starts[k]: starts[k + 1]]
            if not self.spaces_in_tokens:
                before = np.array([m.start() - 1 for m in _SPACE.finditer(text)], dtype=np.int64)
                before = before[before >= 0]
                lab[before] = np.maximum(lab[before], TOKEN_END)
            cuts = np.flatnonzero(lab > 0).tolist()
            if not cuts or cuts[-1] != len(text) - 1:
                cuts.append(len(text) - 1)
            spans: list[tuple[int, int]] = []
            first = True
            begin = 0
            for end in cuts:
                piece = text[begin: end + 1]
                core = piece.strip()
                if core:
                    a = begin + len(piece) - len(piece.lstrip())
                    spans.append((a, a + len(core)))
                begin = end + 1
                if spans and ((sentences and lab[end] == SENTENCE_END)
                              or len(spans) >= MAX_SENTENCE_TOKENS):
                    yield text, spans, first
                    spans, first = [], False
            if spans:
                yield text, spans, first

    def tokenize(self, paragraphs: Iterable[str], first_id: int = 1) -> Iterator[Sentence]:
        """Sentences of words, ready to tag and parse: FORM filled, ``# newpar``,
        ``# sent_id`` and ``# text`` comments, multiword-token lines, ``SpaceAfter=No``
        in MISC where no space follows a token. O(characters)."""
        number = first_id - 1
        for text, spans, first in self.split(paragraphs):
            number += 1
            yield self._sentence(text, spans, first, number)

    def tokenize_lines(self, lines: Iterable[tuple[str, bool]], first_id: int = 1
                       ) -> Iterator[Sentence]:
        """:meth:`tokenize` for text given one sentence per line: ``(line, starts a
        paragraph)`` pairs (:func:`arboreal.io.text.iter_lines`), each line tokenized
        and never split (unless past MAX_SENTENCE_TOKENS tokens); ``# newpar`` where a
        paragraph starts. O(characters)."""
        number = first_id - 1
        batch: list[tuple[str, bool]] = []
        size = 0

        def flush():
            nonlocal number
            starts = iter([par for _, par in batch])
            par = False
            for text, spans, first in self._split_batch([t for t, _ in batch], False):
                if first:
                    par = next(starts)
                number += 1
                yield self._sentence(text, spans, par and first, number)

        for line, par in lines:
            if not line.strip():
                continue
            batch.append((line, par))
            size += len(line)
            if size >= BATCH_CHARS:
                yield from flush()
                batch, size = [], 0
        if batch:
            yield from flush()

    def expand_tokens(self, sentences: Iterable[Sentence]) -> Iterator[Sentence]:
        """Sentences of tokenized text (a token per FORM, as
        :func:`arboreal.io.text.iter_tokenized` reads them) with their multiword tokens
        expanded into words as in raw text (the training lexicon, the splitter of unseen
        tokens, the final words split off): range lines in ``extra``, comments and line
        numbers kept. A sentence with nothing to expand, or with ranges already, is
        yielded as it is. O(characters)."""
        expands = bool(self.multiword) or self.split_weights is not None \
            or bool(self.suffixes)
        for s in sentences:
            if not expands or s.extra:
                yield s
                continue
            tokens = s.forms[1:].tolist()
            lengths = np.array([len(t) for t in tokens])
            ends = np.cumsum(lengths + 1) - 1          # the tokens joined by one space
            spans = list(zip((ends - lengths).tolist(), ends.tolist()))
            out = self._sentence(" ".join(tokens), spans, False, 0)
            if not out.extra:
                yield s
                continue
            out.comments, out.line = list(s.comments), s.line
            yield out

    def _sentence(self, text: str, spans: list[tuple[int, int]], first: bool,
                  number: int) -> Sentence:
        forms: list[str] = []
        misc: list[str] = []
        extra: list[tuple[int, str]] = []
        split = {}
        if self.split_weights is not None:
            unseen = sorted({text[a:b] for a, b in spans if self._unseen(text[a:b])})
            split = {f: w for f, w in zip(unseen, self._split_unseen(unseen)) if len(w) > 1}
        for a, b in spans:
            token = text[a:b]
            no_space = b < len(text) and not text[b].isspace()
            words = split.get(token) or self._expand(token)
            if len(words) > 1:
                start = len(forms) + 1
                extra.append((len(forms), f"{start}-{start + len(words) - 1}\t{token}"
                                          f"\t_\t_\t_\t_\t_\t_\t_\t"
                                          f"{'SpaceAfter=No' if no_space else '_'}"))
                forms.extend(words)
                misc.extend(["_"] * len(words))
            else:
                forms.append(token)
                misc.append("SpaceAfter=No" if no_space else "_")
        comments = (["# newpar"] if first else []) + [
            f"# sent_id = {number}", "# text = " + " ".join(text[spans[0][0]: spans[-1][1]].split())]
        s = Sentence.from_columns(forms, misc=misc, comments=comments)
        s.extra = extra
        return s

    def _unseen(self, token: str) -> bool:
        """Whether ``token`` is neither a training token nor a multiword token of the
        lexicon (and keeps its length lower-cased): the splitter's to cut."""
        low = token.lower()
        return (low not in self.multiword and low not in self.tokens
                and len(low) == len(token) and len(token) > 1)

    def _expand(self, token: str) -> tuple[str, ...]:
        low = token.lower()
        words = self.multiword.get(low)
        if words is None:
            if low in self.tokens or len(low) != len(token):
                return (token,)
            for suffix in self.suffixes:
                if low.endswith(suffix) and len(low) > len(suffix):
                    cut = len(token) - len(suffix)
                    return (token[:cut], token[cut:])
            return (token,)
        if "".join(words) == low and len(low) == len(token):
            # the words spell the token out: cut the token itself, keeping its case
            out, at = [], 0
            for w in words:
                out.append(token[at: at + len(w)])
                at += len(w)
            return tuple(out)
        if token.isupper() and len(token) > 1:
            return tuple(w.upper() for w in words)
        if token[:1].isupper():
            return (words[0][:1].upper() + words[0][1:],) + tuple(words[1:])
        return tuple(words)

    # ------------------------------------------------------------------ persistence
    def put(self, meta: dict, arrays: dict) -> None:
        """Add the tokenizer to a model file's metadata (``tokenizer``) and arrays
        (``tokenizer_*``)."""
        put_weights(arrays, "tokenizer_w", self.weights)
        put_strings(arrays, "tokenizer_tokens", sorted(self.tokens))
        chunks = sorted(self.segmentations)
        put_strings(arrays, "tokenizer_seg_chunks", chunks)
        put_strings(arrays, "tokenizer_seg_offsets",
                    [",".join(map(str, sorted(self.segmentations[c]))) for c in chunks])
        surface = sorted(self.multiword)
        put_strings(arrays, "tokenizer_mwt_forms", surface)
        put_strings(arrays, "tokenizer_mwt_words", ["\t".join(self.multiword[f]) for f in surface])
        put_strings(arrays, "tokenizer_suffixes", self.suffixes)
        meta["tokenizer"] = {"features_version": FEATURES_VERSION,
                             "attributes_version": ATTRIBUTES_VERSION, "bits": self.bits,
                             "spaces_in_tokens": self.spaces_in_tokens,
                             "one_token_rule": self.one_token_rule, "training": self.meta}
        if self.split_weights is not None:
            put_weights(arrays, "tokenizer_split_w", self.split_weights)
            meta["tokenizer"]["split_bits"] = self.split_bits

    @classmethod
    def from_file_contents(cls, fields: MetaFields, arrays) -> "Tokenizer":
        """The tokenizer of a model file; ModelError / ValueError when inconsistent."""
        cfg = fields.section("tokenizer")
        cfg.int("features_version", FEATURES_VERSION, FEATURES_VERSION)
        if cfg.int("attributes_version", 1, 1 << 30, default=1) != ATTRIBUTES_VERSION:
            raise cfg.fail("attributes_version", "is from another version of arboreal's "
                                                 "tokenizer features: retrain the model")
        bits = cfg.int("bits", 8, 26)
        weights = get_weights(arrays, "tokenizer_w", (1 << bits) + MAX_CANDIDATES)
        tokens = set(get_string_list(arrays, "tokenizer_tokens"))
        chunks = get_string_list(arrays, "tokenizer_seg_chunks")
        offsets = get_string_list(arrays, "tokenizer_seg_offsets")
        forms = get_string_list(arrays, "tokenizer_mwt_forms")
        words = get_string_list(arrays, "tokenizer_mwt_words")
        if len(chunks) != len(offsets) or len(forms) != len(words):
            raise ValueError("tokenizer lexicon arrays differ in length")
        segmentations = {}
        for c, o in zip(chunks, offsets):
            try:
                segmentations[c] = frozenset(int(x) for x in o.split(",") if x)
            except ValueError:
                raise ValueError(f"tokenizer segmentation {o[:40]!r} is not a list of "
                                 "offsets") from None
        multiword = {f: tuple(w.split("\t")) for f, w in zip(forms, words)}
        split_weights, split_bits = None, SPLIT_BITS
        if cfg.has("split_bits"):
            split_bits = cfg.int("split_bits", 8, 26)
            split_weights = get_weights(arrays, "tokenizer_split_w",
                                        (1 << split_bits) + MAX_CANDIDATES)
        return cls(weights, bits, tokens, segmentations, multiword,
                   cfg.json("training", dict, {}), cfg.bool("spaces_in_tokens"),
                   get_string_list(arrays, "tokenizer_suffixes", max_count=1 << 16),
                   cfg.bool("one_token_rule"), split_weights, split_bits)


def _segmentations(paragraphs: list[tuple[str, np.ndarray]]) -> dict[str, frozenset[int]]:
    """Lower-cased chunk -> offsets of its most frequent segmentation in training
    paragraphs, for chunks seen at least :data:`MIN_SEGMENTATION_COUNT` times."""
    seg_counts: dict[str, Counter] = defaultdict(Counter)
    for text, labels in paragraphs:
        for m in _CHUNK.finditer(text):
            inside = np.flatnonzero(labels[m.start(): m.end()] > 0)
            seg_counts[m.group().lower()][tuple(inside.tolist())] += 1
    segmentations = {}
    for chunk, counts in seg_counts.items():
        pattern, k = counts.most_common(1)[0]
        if sum(counts.values()) >= MIN_SEGMENTATION_COUNT:
            segmentations[chunk] = frozenset(pattern)
    return segmentations


def _paragraph_tokens(paragraphs: list[tuple[str, np.ndarray]]) -> set[str]:
    """Lower-cased surface tokens of training paragraphs (text between boundaries)."""
    tokens: set[str] = set()
    for text, labels in paragraphs:
        begin = 0
        for end in np.flatnonzero(labels > 0).tolist():
            piece = text[begin: end + 1].strip().lower()
            if piece:
                tokens.add(piece)
            begin = end + 1
    return tokens


def _one_token_rule(text: str, labels: np.ndarray, a: int, b: int) -> None:
    """The rule for the one-token span ``text[a:b]``, on the boundary labels of
    ``text`` in place: no boundary inside it, a token boundary after it, and one before
    it after an opening bracket or quote (a sentence end stays one)."""
    labels[a: b - 1] = NONE
    labels[b - 1] = max(labels[b - 1], TOKEN_END)
    if a > 0 and text[a - 1] in OPENING:
        labels[a - 1] = max(labels[a - 1], TOKEN_END)


def _text_spans(text: str) -> Iterator[tuple[int, int]]:
    """The one-token spans of a text's chunks, as offsets in the text."""
    for chunk in _CHUNK.finditer(text):
        if chunk.group().isalnum():       # the usual word: no span, no pattern search
            continue
        at = chunk.start()
        for a, b in one_token_spans(chunk.group()):
            yield at + a, at + b


def _one_token_spans_kept(paragraphs: list[tuple[str, np.ndarray]]) -> tuple[int, int]:
    """(spans kept whole, spans) of the one-token spans of training paragraphs: whole
    means that :func:`_one_token_rule` leaves the span's boundaries as training has
    them. O(characters)."""
    whole = spans = 0
    for text, labels in paragraphs:
        for a, b in _text_spans(text):
            spans += 1
            lo = max(a - 1, 0)
            seen = labels[lo: b]
            ruled = seen.copy()
            _one_token_rule(text[lo: b], ruled, a - lo, b - lo)
            whole += int(np.array_equal(ruled > 0, seen > 0))
    return whole, spans


def _boundary_f1(gold: np.ndarray, pred: np.ndarray) -> float:
    """F1 (percent) of predicted boundaries (label and position both right)."""
    g = gold > 0
    p = pred > 0
    correct = int(((gold == pred) & g).sum())
    if not g.any() and not p.any():
        return 100.0
    precision = correct / max(int(p.sum()), 1)
    recall = correct / max(int(g.sum()), 1)
    return 0.0 if correct == 0 else 200.0 * precision * recall / (precision + recall)
