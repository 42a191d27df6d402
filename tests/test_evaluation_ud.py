"""CoNLL 2018 evaluation (arboreal.evaluation_ud) against the official conll18_ud_eval.py.

Every comparison runs the official script (tests/third_party, MPL-2.0, used only here) on
the same two files and checks each metric's counts exactly and its precision, recall,
F1 and aligned accuracy to 1e-9: hand-written file pairs (multiword tokens, other
tokenizations, other sentence splits, wrong trees and tags), random gold files with random
re-tokenizations and noise (hypothesis), a perturbed EWT test set when it is available,
and the ``arboreal eval`` command line.
"""
from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arboreal.cli import main
from arboreal.errors import ArborealError
from arboreal.evaluation_ud import METRICS, TextMismatchError, evaluate_ud, format_ud_table
from arboreal.io import read_conllu

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "conll18_ud_eval", Path(__file__).resolve().parent / "third_party" / "conll18_ud_eval.py")
OFFICIAL = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(OFFICIAL)

EWT_TEST = next((p for p in (Path("/work/shared/data/ud/UD_English-EWT/en_ewt-ud-test.conllu"),
                             REPO.parent / "shared" / "data" / "ud" / "UD_English-EWT" / "en_ewt-ud-test.conllu")
                 if p.exists()), None)


# ---------------------------------------------------------------------------- helpers

def official(gold: Path, system: Path) -> dict:
    return OFFICIAL.evaluate(OFFICIAL.load_conllu_file(str(gold)), OFFICIAL.load_conllu_file(str(system)))


def assert_same(ours: dict, theirs: dict) -> None:
    assert set(ours) == set(METRICS) == set(theirs)
    for m in METRICS:
        a, b = ours[m], theirs[m]
        assert (a["correct"], a["gold"], a["system"]) == (b.correct, b.gold_total, b.system_total), m
        assert a["aligned"] == b.aligned_total, m
        for key in ("precision", "recall", "f1"):
            assert abs(a[key] - getattr(b, key)) <= 1e-9, (m, key)
        if b.aligned_accuracy is None:
            assert a["aligned_accuracy"] is None, m
        else:
            assert abs(a["aligned_accuracy"] - b.aligned_accuracy) <= 1e-9, m


def compare(tmp_path: Path, gold_text: str, system_text: str, name: str = "case") -> dict:
    """Write both files, score them with both implementations, check they agree."""
    gold, system = tmp_path / f"{name}-gold.conllu", tmp_path / f"{name}-system.conllu"
    gold.write_text(gold_text, encoding="utf-8")
    system.write_text(system_text, encoding="utf-8")
    ours = evaluate_ud(gold, system)
    assert_same(ours, official(gold, system))
    # the same from Sentence lists
    from_lists = evaluate_ud(read_conllu(gold, allow_missing_heads=True),
                             read_conllu(system, allow_missing_heads=True))
    assert from_lists == ours
    return ours


def cu(text: str) -> str:
    """CoNLL-U from a readable layout: columns separated by two or more spaces (single
    spaces stay inside a field), missing trailing columns are '_', blank line between
    sentences."""
    out = []
    for line in text.strip("\n").split("\n"):
        line = line.strip()
        if not line:
            out.append("")
        elif line.startswith("#"):
            out.append(line)
        else:
            cols = re.split(r" {2,}", line)
            out.append("\t".join(cols + ["_"] * (10 - len(cols))))
    return "\n".join(out) + "\n\n"


# A Spanish sentence with two multiword tokens ("al" = a + el, "del" = de + el) and an
# English pair of sentences with a space inside a form.
ES_GOLD = cu("""
# text = Vino al mercado del pueblo.
1    Vino     venir    VERB   v  Mood=Ind|Number=Sing|Person=3|Tense=Past|VerbForm=Fin  0  root
2-3  al
2    a        a        ADP    s  AdpType=Prep                                           4  case
3    el       el       DET    d  Definite=Def|Gender=Masc|Number=Sing|PronType=Art      4  det
4    mercado  mercado  NOUN   n  Gender=Masc|Number=Sing                                1  obl
5-6  del
5    de       de       ADP    s  AdpType=Prep                                           7  case
6    el       el       DET    d  Definite=Def|Gender=Masc|Number=Sing|PronType=Art      7  det
7    pueblo   pueblo   NOUN   n  Gender=Masc|Number=Sing                                4  nmod
8    .        .        PUNCT  f  PunctType=Peri                                         1  punct
""")

EN_GOLD = cu("""
# sent_id = 1
1  New York  New York  PROPN  NNP  Number=Sing                            3  nsubj
2  is        be        AUX    VBZ  Mood=Ind|Number=Sing|Person=3|Tense=Pres  3  cop
3  big       big       ADJ    JJ   Degree=Pos                              0  root
4  .         .         PUNCT  .    _                                       3  punct

# sent_id = 2
1  It        it        PRON   PRP  Case=Nom|Gender=Neut|Number=Sing|Person=3  2  expl
2  rains     rain      VERB   VBZ  Mood=Ind|Number=Sing|Person=3|Tense=Pres   0  root
3  hard      hard      ADV    RB   Degree=Pos                                 2  advmod
4  .         .         PUNCT  .    _                                          2  punct
""")

CASES = {
    "es-identical": (ES_GOLD, ES_GOLD),
    "es-no-multiword": (ES_GOLD, cu("""
1  Vino     venir    VERB   v  Mood=Ind|Number=Sing|VerbForm=Fin  0  root
2  al       al       ADP    s  _                                  3  case
3  mercado  mercado  NOUN   n  Gender=Masc|Number=Sing            1  obl
4  del      del      ADP    s  _                                  5  case
5  pueblo   pueblo   NOUN   n  Gender=Masc|Number=Sing            3  nmod
6  .        .        PUNCT  f  _                                  1  punct
""")),
    "es-wrong-splits": (ES_GOLD, cu("""
1    Vino     venir    VERB   v  Mood=Ind|Number=Sing|Person=3|Tense=Past|VerbForm=Fin  0  root
2-3  al
2    a        a        ADP    s  AdpType=Prep                                           4  case
3    l        el       DET    d  Definite=Def|Gender=Masc|Number=Sing|PronType=Art      4  det
4    mercado  mercado  NOUN   n  Gender=Masc|Number=Sing                                1  obl
5-7  del
5    d        de       ADP    s  AdpType=Prep                                           8  case
6    E        el       DET    d  Definite=Def|Gender=Masc|Number=Sing|PronType=Art      8  det
7    l        el       DET    d  _                                                      8  det
8    pueblo   pueblo   NOUN   n  Gender=Masc|Number=Sing                                4  nmod
9    .        .        PUNCT  f  PunctType=Peri                                         1  punct
""")),
    "es-other-tokens-and-multiwords": (ES_GOLD, cu("""
1-2  Vino
1    Vi       ver      VERB   v  _                       0  root
2    no       no       ADV    r  Polarity=Neg            1  advmod
3    a        a        ADP    s  _                       6  case
4    l        el       DET    d  _                       6  det
5-6  mercado
5    merca    merca    NOUN   n  _                       6  compound
6    do       do       NOUN   n  Gender=Masc|Number=Sing  1  obl
7-8  del
7    de       de       ADP    s  AdpType=Prep            9  case
8    el       el       DET    d  Definite=Def|Gender=Masc|Number=Sing|PronType=Art  9  det
9    pueblo.  pueblo   NOUN   n  Gender=Masc|Number=Sing  6  nmod
""")),
    "es-wrong-trees-and-tags": (ES_GOLD, cu("""
1    Vino     venir    VERB   v  Mood=Ind|Number=Sing|Person=3|Tense=Past|VerbForm=Fin|Foo=Bar  0  root
2-3  al
2    a        _        ADP    s  AdpType=Other                                          4  case
3    el       ella     DET    d  Definite=Ind|Gender=Masc|Number=Sing|PronType=Art      4  det
4    mercado  mercado  NOUN   n  Gender=Masc|Number=Sing                                1  obl:arg
5-6  del
5    de       de       ADP    x  AdpType=Prep                                           7  mark
6    el       el       DET    d  Definite=Def|Gender=Masc|Number=Sing|PronType=Art      4  det
7    pueblo   pueblo   PROPN  n  Gender=Masc|Number=Sing                                1  nmod
8    .        .        PUNCT  f  PunctType=Comm                                         7  punct
""")),
    "en-identical": (EN_GOLD, EN_GOLD),
    "en-retokenized-and-one-sentence": (EN_GOLD, cu("""
1  New    New    PROPN  NNP  Number=Sing                              2  compound
2  York   York   PROPN  NNP  Number=Sing                              4  nsubj
3  is     be     AUX    VBZ  Mood=Ind|Number=Sing|Person=3|Tense=Pres  4  cop
4  big.   big    ADJ    JJ   Degree=Pos                                0  root
5  It     it     PRON   PRP  Case=Nom|Number=Sing|Person=3             6  nsubj
6  rains  rain   VERB   VBZ  Mood=Ind|Number=Sing|Person=3|Tense=Pres   4  parataxis
7  hard   hard   ADV    RB   Degree=Pos                                6  advmod
8  .      .      PUNCT  .    _                                         4  punct
""")),
    "en-three-sentences-and-multiwords": (EN_GOLD, cu("""
1    New York  New York  PROPN  NNP  Number=Sing  2  nsubj
2    is        be        AUX    VBZ  _            0  root

1    big       big       ADJ    JJ   Degree=Pos   0  root
2    .         .         PUNCT  .    _            1  punct
3-4  Itrains
3    It        it        PRON   PRP  _            4  nsubj
4    rains     rain      VERB   VBZ  _            1  conj

1-2  hard.
1    hard      hard      ADV    RB   Degree=Pos   0  root
2    .         .         PUNCT  .    _            1  punct
""")),
    # a gold word that starts inside a system token and ends inside a system multiword token
    # is left out of the multiword span (so "bcd" is not aligned)
    "quirk-gold-word-across-system-multiword": (cu("""
1  a    a    X  _  _  0  root
2  bcd  bcd  X  _  _  1  dep
3  ef   ef   X  _  _  1  dep
"""), cu("""
1    abc  abc  X  _  _  0  root
2-3  def
2    bcd  bcd  X  _  _  1  dep
3    ef   ef   X  _  _  1  dep
""")),
    # a system token that starts with a gold multiword token but ends after it stays out
    # of the multiword span (so "abc" is not aligned)
    "quirk-equal-starts": (cu("""
1-2  ab
1    abc  abc  X  _  _  0  root
2    x    x    X  _  _  1  dep
3    c    c    X  _  _  1  dep
"""), cu("""
1  abc  abc  X  _  _  0  root
""")),
    # forms of words inside multiword tokens keep their spaces in the comparison
    "quirk-space-in-multiword-word": (cu("""
1-2  de
1    d e  d  X  _  _  0  root
2    f    f  X  _  _  1  dep
"""), cu("""
1-2  de
1    de   d  X  _  _  0  root
2    f    f  X  _  _  1  dep
""")),
    "en-empty-node-comments-nbsp": (cu("""
# sent_id = a
# text = 10 000 birds sing
1    10\u00a0000  10000   NUM    CD   NumType=Card      2  nummod
2    birds        bird    NOUN   NNS  Number=Plur       3  nsubj
2.1  flew         fly     VERB   VBD  _                 _  _
3    sing         sing    VERB   VBP  Mood=Ind|Tense=Pres  0  root
"""), cu("""
# sent_id = x
1    10       10      NUM    CD   NumType=Card      3  nummod
2    000      000     NUM    CD   NumType=Card      1  compound
3    birds    bird    NOUN   NNS  Number=Plur       4  nsubj
4    sing     sing    VERB   VBP  Mood=Ind|Tense=Pres  0  root
""")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hand_written_pairs_match_the_official_script(case, tmp_path):
    gold, system = CASES[case]
    ours = compare(tmp_path, gold, system, case)
    if case.endswith("identical"):
        assert all(ours[m]["f1"] == 1.0 for m in METRICS)
    if case == "es-no-multiword":
        # "al" and "del" are words the gold multiword tokens do not contain
        assert ours["Tokens"]["f1"] == 1.0 and ours["Words"]["correct"] == 4
    if case == "es-wrong-trees-and-tags":
        assert ours["Words"]["f1"] == 1.0 and ours["MLAS"]["f1"] < ours["CLAS"]["f1"] < 1.0


def _official_unit_case(words: list[str]) -> str:
    """The notation of the official script's own unit tests: "abc a b c" is a multiword
    token abc of words a, b, c; word 1 is the root, every other word hangs on it."""
    lines, n = [], 0
    for w in words:
        parts = w.split(" ")
        if len(parts) > 1:
            lines.append(f"{n + 1}-{n + len(parts) - 1}\t{parts[0]}" + "\t_" * 8)
            parts = parts[1:]
        for p in parts:
            n += 1
            lines.append(f"{n}\t{p}\t_\t_\t_\t_\t{int(n > 1)}\t{'root' if n == 1 else 'dep'}\t_\t_")
    return "\n".join(lines) + "\n\n"


@pytest.mark.parametrize("gold, system", [
    (["abc a b c"], ["a", "b", "c"]),
    (["a", "bc b c", "d"], ["a", "b", "c", "d"]),
    (["abcd a b c d"], ["ab a b", "cd c d"]),
    (["abc a b c", "de d e"], ["a", "bcd b c d", "e"]),
    (["abcd"], ["a", "b", "c", "d"]),
    (["abc", "d"], ["a", "b", "c", "d"]),
    (["a", "bc", "d"], ["a", "b", "c", "d"]),
    (["a", "bc b c", "d"], ["a", "b", "cd"]),
    (["abc a BX c", "def d EX f"], ["ab a b", "cd c d", "ef e f"]),
    (["ab a b", "cd bc d"], ["a", "bc", "d"]),
    (["a", "bc b c", "d"], ["ab AX BX", "cd CX a"]),
])
def test_the_official_alignment_unit_cases(gold, system, tmp_path):
    compare(tmp_path, _official_unit_case(gold), _official_unit_case(system))


def test_different_texts_are_an_error_naming_both_files(tmp_path):
    gold, system = tmp_path / "g.conllu", tmp_path / "s.conllu"
    gold.write_text(EN_GOLD)
    system.write_text(EN_GOLD.replace("rains", "pours").replace("\t3\tnsubj", "\t3\tobj"))
    with pytest.raises(OFFICIAL.UDError):
        official(gold, system)
    with pytest.raises(TextMismatchError) as info:
        evaluate_ud(gold, system)
    msg = str(info.value)
    assert str(gold) in msg and str(system) in msg and "\n" not in msg
    # "NewYorkisbig.Itrains": the 'r' of rains is character 16
    assert "character 16" in msg and "'NewYorkisbig.It'" in msg and "sent_id 2" in msg
    assert "'rainshard.'" in msg and "'pourshard.'" in msg
    # one text a prefix of the other
    system.write_text(EN_GOLD.split("\n\n")[0] + "\n\n")
    with pytest.raises(TextMismatchError, match="end of file"):
        evaluate_ud(gold, system)


def test_missing_system_heads_count_as_wrong_and_gold_needs_heads(tmp_path):
    gold, system = tmp_path / "g.conllu", tmp_path / "s.conllu"
    gold.write_text(EN_GOLD)
    system.write_text(re.sub(r"\t\d+\t(\w+)\t_\t_\n", r"\t_\t\1\t_\t_\n", EN_GOLD))
    r = evaluate_ud(gold, system)
    assert r["Words"]["f1"] == 1.0 and r["UPOS"]["f1"] == 1.0 and r["UAS"]["correct"] == 0
    with pytest.raises(ArborealError, match="no head"):
        evaluate_ud(system, gold)


# ---------------------------------------------------------------------------- random files

class Word:
    def __init__(self, form, lemma="_", upos="X", xpos="_", feats="_", deprel="dep"):
        self.form, self.lemma, self.upos, self.xpos, self.feats = form, lemma, upos, xpos, feats
        self.deprel = deprel
        self.head: Word | None = None   # None: the root
        self.source: Word | None = None  # the gold word a system word was made from


def to_conllu(sentences) -> str:
    """sentences: lists of tokens (surface or None, [Word, ...]); a surface makes a
    multiword-token line."""
    lines = []
    for k, sent in enumerate(sentences):
        lines.append(f"# sent_id = s{k + 1}")
        ids = {id(w): i for i, w in enumerate((w for _, ws in sent for w in ws), 1)}
        i = 0
        for surface, words in sent:
            if surface is not None:
                lines.append(f"{i + 1}-{i + len(words)}\t{surface}" + "\t_" * 8)
            for w in words:
                i += 1
                head = 0 if w.head is None else ids[id(w.head)]
                lines.append("\t".join([str(i), w.form, w.lemma, w.upos, w.xpos, w.feats, str(head),
                                        w.deprel, "_", "_"]))
        lines.append("")
    return "\n".join(lines) + "\n"


RELS = ["nsubj", "obj", "obl", "obl:tmod", "nmod", "nmod:poss", "amod", "advmod", "conj", "det",
        "case", "cc", "aux", "aux:pass", "cop", "mark", "punct", "compound:prt", "dep"]
UPOS = ["NOUN", "VERB", "DET", "ADP", "AUX"]
FEATS = ["_", "Number=Sing", "Number=Plur", "Foo=Bar", "Foo=Baz|Number=Sing", "Case=Nom|Number=Sing",
         "Number=Sing|Typo=Yes"]
LEMMAS = ["_", "x", "y", "z"]


def random_tree(rng: random.Random, words: list[Word], proposed: dict[int, Word | None] | None = None):
    """Give ``words`` (one sentence) the heads of a tree with one root. ``proposed`` (by
    id(word)): a head to use where it keeps a tree (most of the time), None for a root."""
    proposed = proposed or {}
    roots = [w for w in words if id(w) in proposed and proposed[id(w)] is None]
    root = rng.choice(roots) if roots else rng.choice(words)
    root.head = None
    placed, attached = [root], {id(root)}
    todo = [w for w in words if w is not root]
    rng.shuffle(todo)
    while todo:
        for w in todo:
            h = proposed.get(id(w))
            if h is not None and id(h) in attached:
                w.head = h if rng.random() > 0.1 else rng.choice(placed)
                break
        else:
            w = todo[0]
            w.head = rng.choice(placed)
        todo.remove(w)
        placed.append(w)
        attached.add(id(w))


def random_form(rng: random.Random, lo=1, hi=3) -> str:
    return "".join(rng.choice("aAb\u00e9" if rng.random() < 0.2 else "aAb") for _ in range(rng.randint(lo, hi)))


def random_gold(rng: random.Random):
    sentences = []
    for _ in range(rng.randint(1, 4)):
        sent = []
        for _ in range(rng.randint(1, 6)):
            if rng.random() < 0.25:  # a multiword token
                surface = random_form(rng, 2, 4)
                k = rng.randint(2, 3)
                if rng.random() < 0.5 and len(surface) >= k:   # words that spell the surface
                    cuts = sorted(rng.sample(range(1, len(surface)), k - 1))
                    forms = [surface[a:b] for a, b in zip([0] + cuts, cuts + [len(surface)])]
                else:                                           # "al" = a + el
                    forms = [random_form(rng) for _ in range(k)]
                    if rng.random() < 0.2:
                        forms[0] = forms[0] + " " + random_form(rng, 1, 1)
                sent.append((surface, [Word(f) for f in forms]))
            else:
                form = random_form(rng)
                if rng.random() < 0.1:
                    form += rng.choice([" ", "\u00a0"]) + random_form(rng)
                sent.append((None, [Word(form)]))
        words = [w for _, ws in sent for w in ws]
        for w in words:
            w.deprel, w.upos, w.xpos = rng.choice(RELS), rng.choice(UPOS), rng.choice("ab")
            w.feats, w.lemma = rng.choice(FEATS), rng.choice(LEMMAS)
        random_tree(rng, words)
        for w in words:
            if w.head is None:
                w.deprel = "root" if rng.random() < 0.9 else "dep"
        sentences.append(sent)
    return sentences


def _copy(rng: random.Random, w: Word, form: str | None = None, noise: float = 0.15) -> Word:
    c = Word(w.form if form is None else form, w.lemma, w.upos, w.xpos, w.feats, w.deprel)
    c.source = w
    if rng.random() < noise:
        c.upos = rng.choice(UPOS)
    if rng.random() < noise:
        c.xpos = rng.choice("ab")
    if rng.random() < noise:
        c.feats = rng.choice(FEATS)
    if rng.random() < noise:
        c.lemma = rng.choice(LEMMAS)
    if rng.random() < noise:
        c.deprel = rng.choice(RELS)
    return c


def _strip(form: str) -> str:
    return form.replace(" ", "").replace("\u00a0", "")


def random_system(rng: random.Random, gold):
    """Another tokenization, sentence splitting and annotation of the same text."""
    tokens = []   # (surface or None, [Word], ends a gold sentence)
    for sent in gold:
        flat = list(sent)
        t = 0
        while t < len(flat):
            surface, words = flat[t]
            text = _strip(surface if surface is not None else words[0].form)
            last = t == len(flat) - 1
            r = rng.random()
            if r < 0.45:      # the same token (a multiword token may lose or change words)
                if surface is not None and rng.random() < 0.3:
                    ws = [_copy(rng, w, random_form(rng) if rng.random() < 0.5 else None) for w in words]
                    if rng.random() < 0.3:
                        ws.append(_copy(rng, words[-1], random_form(rng)))
                    tokens.append((surface, ws, last))
                else:
                    tokens.append((surface, [_copy(rng, w) for w in words], last))
            elif r < 0.6 and not last:   # merged with the next token
                nsurface, nwords = flat[t + 1]
                ntext = _strip(nsurface if nsurface is not None else nwords[0].form)
                if rng.random() < 0.5:
                    tokens.append((None, [_copy(rng, words[0], text + ntext)], t + 1 == len(flat) - 1))
                else:
                    ws = [_copy(rng, w) for w in words + nwords]
                    tokens.append((text + ntext, ws, t + 1 == len(flat) - 1))
                t += 2
                continue
            elif r < 0.75 and len(text) >= 2:   # split in two tokens
                cut = rng.randrange(1, len(text))
                tokens.append((None, [_copy(rng, words[0], text[:cut])], False))
                tokens.append((None, [_copy(rng, words[-1], text[cut:])], last))
            elif r < 0.85:   # one word (a multiword token without its words)
                tokens.append((None, [_copy(rng, words[0], text)], last))
            else:            # a multiword token of the system
                if len(text) >= 2 and rng.random() < 0.6:
                    cut = rng.randrange(1, len(text))
                    forms = [text[:cut], text[cut:]]
                else:
                    forms = [text, random_form(rng)]
                tokens.append((text, [_copy(rng, words[0], forms[0]), _copy(rng, words[-1], forms[1])], last))
            t += 1
    system, current = [], []
    for i, (surface, words, ends) in enumerate(tokens):
        current.append((surface, words))
        if i == len(tokens) - 1 or (ends and rng.random() < 0.8) or rng.random() < 0.1:
            system.append(current)
            current = []
    # heads: the gold head's system word where it is in the same sentence
    for sent in system:
        words = [w for _, ws in sent for w in ws]
        of_source = {}
        for w in words:
            of_source.setdefault(id(w.source), w)
        proposed = {}
        for w in words:
            gh = w.source.head
            if gh is None:
                proposed[id(w)] = None
            elif id(gh) in of_source and of_source[id(gh)] is not w:
                proposed[id(w)] = of_source[id(gh)]
        random_tree(rng, words, proposed)
    return system


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False))
def test_random_retokenizations_match_the_official_script(tmp_path, rng):
    gold = random_gold(rng)
    system = random_system(rng, gold)
    compare(tmp_path, to_conllu(gold), to_conllu(system), "random")


# ---------------------------------------------------------------------------- a real treebank

def from_sentence(s) -> list:
    """A read Sentence as tokens of Words (multiword tokens from Sentence.extra)."""
    words = [Word(s.forms[m], s.lemmas[m], s.upos[m], s.xpos[m], s.feats[m], s.deprels[m])
             for m in range(1, len(s) + 1)]
    for m, w in enumerate(words, 1):
        h = int(s.heads[m])
        w.head = words[h - 1] if h > 0 else None
    ranges = {}
    for _, line in s.extra:
        cols = line.split("\t")
        if "-" in cols[0]:
            a, b = map(int, cols[0].split("-"))
            ranges[a] = (b, cols[1])
    tokens, m = [], 1
    while m <= len(words):
        b, surface = ranges.get(m, (m, None))
        tokens.append((surface, words[m - 1:b]))
        m = b + 1
    return tokens


def descends(w: Word, ancestor: Word) -> bool:
    while w is not None:
        if w is ancestor:
            return True
        w = w.head
    return False


def perturb(rng: random.Random, sentences: list) -> list:
    out = []
    for sent in sentences:
        sent = list(sent)
        words = [w for _, ws in sent for w in ws]
        # merge adjacent single-word tokens that are attached to each other
        t = 0
        while t < len(sent) - 1:
            (s1, w1), (s2, w2) = sent[t], sent[t + 1]
            if s1 is None and s2 is None and rng.random() < 0.05 and \
                    (w1[0].head is w2[0] or w2[0].head is w1[0]):
                a, b = w1[0], w2[0]
                keep, gone = (b, a) if a.head is b else (a, b)
                keep.form = _strip(a.form) + _strip(b.form)
                for w in words:
                    if w.head is gone:
                        w.head = keep
                words.remove(gone)
                sent[t:t + 2] = [(None, [keep])]
            t += 1
        # split some longer single-word tokens, in two tokens or in a multiword token;
        # change the words of some multiword tokens
        t = 0
        while t < len(sent):
            s1, ws = sent[t]
            text = _strip(ws[0].form)
            if s1 is None and len(text) >= 4 and rng.random() < 0.04:
                first = ws[0]
                second = Word(text[2:], "_", first.upos, first.xpos, first.feats, "flat")
                second.head = first
                first.form = text[:2]
                words.append(second)
                if rng.random() < 0.5:
                    sent[t:t + 1] = [(None, [first]), (None, [second])]
                    t += 1
                else:
                    sent[t] = (text, [first, second])
            elif s1 is not None and rng.random() < 0.3:
                ws[0].form = ws[0].form.upper()     # still aligned (forms compared lowercased)
                if rng.random() < 0.5:
                    ws[-1].form = "X"               # not aligned
            t += 1
        # new heads, relations and tags
        for w in words:
            if rng.random() < 0.1:
                choices = [h for h in words if not descends(h, w)]
                if choices and w.head is not None:
                    w.head = rng.choice(choices)
            if rng.random() < 0.05:
                w.deprel = rng.choice(RELS)
            if rng.random() < 0.05:
                w.upos = rng.choice(UPOS)
            if rng.random() < 0.03:
                w.feats = rng.choice(FEATS)
            if rng.random() < 0.03:
                w.lemma = rng.choice(LEMMAS)
            if rng.random() < 0.03:
                w.xpos = "XX"
        # glue some sentences to the previous one
        if out and rng.random() < 0.05:
            prev_root = next(w for _, ws in out[-1] for w in ws if w.head is None)
            for w in words:
                if w.head is None:
                    w.head = prev_root
                    w.deprel = "parataxis"
            out[-1] = out[-1] + sent
        else:
            out.append(sent)
    return out


@pytest.mark.skipif(EWT_TEST is None, reason="UD_English-EWT test set not available")
def test_perturbed_ewt_matches_the_official_script(tmp_path):
    rng = random.Random(2018)
    system = perturb(rng, [from_sentence(s) for s in read_conllu(EWT_TEST)])
    path = tmp_path / "ewt-system.conllu"
    path.write_text(to_conllu(system), encoding="utf-8")
    ours = evaluate_ud(EWT_TEST, path)
    assert_same(ours, official(EWT_TEST, path))
    assert 0.9 < ours["Tokens"]["f1"] < 1.0 and 0.7 < ours["LAS"]["f1"] < 0.9
    assert ours["Sentences"]["f1"] < 1.0


# ---------------------------------------------------------------------------- command line

def _write_pair(tmp_path, case):
    gold, system = tmp_path / "gold.conllu", tmp_path / "system.conllu"
    gold.write_text(CASES[case][0])
    system.write_text(CASES[case][1])
    return gold, system


def test_cli_prints_the_conll18_table_when_tokenization_differs(tmp_path, capsys):
    gold, system = _write_pair(tmp_path, "es-other-tokens-and-multiwords")
    assert main(["eval", str(gold), str(system)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"{system} against {gold}"
    assert lines[1].startswith("Tokenization differs from gold")
    table = OFFICIAL.build_evaluation_table(official(gold, system), True, False)
    assert "\n".join(lines[2:]) == table
    assert format_ud_table(evaluate_ud(gold, system)) == table


def test_cli_json_in_conll18_mode(tmp_path, capsys):
    gold, system = _write_pair(tmp_path, "en-retokenized-and-one-sentence")
    assert main(["eval", "--json", str(gold), str(system)]) == 0
    got = json.loads(capsys.readouterr().out)
    want = official(gold, system)
    assert list(got) == list(METRICS)
    for m in METRICS:
        assert set(got[m]) == {"precision", "recall", "f1", "aligned_accuracy"}
        for key in ("precision", "recall", "f1", "aligned_accuracy"):
            w = getattr(want[m], key)
            assert got[m][key] is None if w is None else got[m][key] == pytest.approx(100 * w, abs=1e-9)


def test_cli_conll18_flag_on_identical_words(tmp_path, capsys):
    gold, system = _write_pair(tmp_path, "es-wrong-trees-and-tags")
    assert main(["eval", str(gold), str(system)]) == 0   # the attachment scores, as before
    out = capsys.readouterr().out
    assert "Complete match (labeled)" in out and "AligndAcc" not in out
    assert main(["eval", "--conll18", str(gold), str(system)]) == 0
    out = capsys.readouterr().out
    assert "Tokenization differs" not in out
    assert out.endswith(OFFICIAL.build_evaluation_table(official(gold, system), True, False) + "\n")
    assert main(["eval", "--conll18", "--json", str(gold), str(gold)]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["MLAS"] == {"precision": 100.0, "recall": 100.0, "f1": 100.0, "aligned_accuracy": 100.0}
    assert got["Words"]["aligned_accuracy"] is None
    assert main(["eval", "--conll18", "--exclude-punct", str(gold), str(system)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("arboreal: error: --exclude-punct") and err.count("\n") == 1


def test_cli_different_texts_exit_2_with_one_line(tmp_path):
    gold, system = tmp_path / "gold.conllu", tmp_path / "system.conllu"
    gold.write_text(ES_GOLD)
    system.write_text(CASES["es-no-multiword"][1].replace("pueblo", "puebla"))
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-m", "arboreal", "eval", str(gold), str(system)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("arboreal: error: ") and r.stderr.count("\n") == 1
    assert str(gold) in r.stderr and str(system) in r.stderr and "character" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("case", ["en-retokenized-and-one-sentence", "es-other-tokens-and-multiwords",
                                  "es-wrong-trees-and-tags"])
def test_python_evaluate_returns_what_eval_json_prints(case, tmp_path, capsys):
    # arboreal.evaluate and `arboreal eval --json` are one function path: on a system
    # that tokenized differently both give the CoNLL 2018 scores, on identical words
    # both give the attachment scores, from paths or from lists of sentences
    import arboreal

    gold, system = _write_pair(tmp_path, case)
    assert main(["eval", "--json", str(gold), str(system)]) == 0
    printed = json.loads(capsys.readouterr().out)
    got = arboreal.evaluate(str(gold), system)
    assert got == printed
    lists = arboreal.evaluate(read_conllu(gold), read_conllu(system, allow_missing_heads=True))
    assert lists == printed
    if case.startswith("es-wrong"):
        assert "uas" in got
        assert main(["eval", "--json", "--conll18", str(gold), str(system)]) == 0
        assert arboreal.evaluate(gold, system, conll18=True) == json.loads(capsys.readouterr().out)
    else:
        want = official(gold, system)
        assert list(got) == list(METRICS)
        assert got["LAS"]["f1"] == pytest.approx(100 * want["LAS"].f1, abs=1e-9)


def test_python_evaluate_on_a_system_that_read_raw_text(tmp_path):
    # the README's case: a system that tokenized the raw text has a sentence of 8 words
    # where gold has 9; the attachment scores cannot be computed, the CoNLL 2018 ones can
    import arboreal

    gold = tmp_path / "gold.conllu"
    system = tmp_path / "system.conllu"
    gold.write_text(CASES["en-retokenized-and-one-sentence"][0])
    system.write_text(CASES["en-retokenized-and-one-sentence"][1])
    with pytest.raises(ArborealError, match="in gold"):
        from arboreal.evaluation import attachment_scores
        attachment_scores(gold, system)
    scores = arboreal.evaluate(gold, system)
    assert scores["Tokens"]["f1"] < 100 and 0 <= scores["UAS"]["f1"] <= 100
    with pytest.raises(ArborealError, match="exclude-punct"):
        arboreal.evaluate(gold, system, exclude_punct=True)
