"""Evaluation: figures worked out by hand, an independent evaluator, mismatch errors."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from arboreal import evaluate
from arboreal.errors import ArborealError
from arboreal.evaluation import KEYS, attachment_scores, format_table
from arboreal.io import format_conllu, read_conllu

SAMPLE_TEST = Path(__file__).resolve().parents[1] / "data" / "sample" / "en_ewt-sample-test.conllu"


def conllu(*sentences):
    """sentences: (sent_id, [(form, upos, head, deprel), ...])."""
    out = []
    for sid, words in sentences:
        out.append(f"# sent_id = {sid}")
        for i, (form, upos, head, rel) in enumerate(words, 1):
            out.append(f"{i}\t{form}\t_\t{upos}\t_\t_\t{head}\t{rel}\t_\t_")
        out.append("")
    return "\n".join(out) + "\n"


GOLD = conllu(
    ("a", [("The", "DET", 2, "det"), ("dog", "NOUN", 3, "nsubj"), ("barks", "VERB", 0, "root"),
           ("loudly", "ADV", 3, "advmod"), (".", "PUNCT", 3, "punct")]),
    ("b", [("Cats", "NOUN", 2, "nsubj"), ("purr", "VERB", 0, "root"), (".", "PUNCT", 2, "punct")]),
    ("c", [("She", "PRON", 2, "nsubj"), ("left", "VERB", 0, "root"), ("home", "NOUN", 2, "obl:npmod"),
           ("!", "PUNCT", 2, "punct")]),
    ("d", [("Hi", "INTJ", 0, "root"), ("there", "ADV", 1, "advmod")]),
)
SYSTEM = conllu(
    # head right / label wrong (dog), head wrong (loudly)
    ("a", [("The", "DET", 2, "det"), ("dog", "NOUN", 3, "obj"), ("barks", "VERB", 0, "root"),
           ("loudly", "ADV", 2, "advmod"), (".", "PUNCT", 3, "punct")]),
    # a second root: root set {1, 2} != {2}
    ("b", [("Cats", "NOUN", 0, "root"), ("purr", "VERB", 0, "root"), (".", "PUNCT", 2, "punct")]),
    # universal relation right, subtype wrong (home); punctuation head wrong
    ("c", [("She", "PRON", 2, "nsubj"), ("left", "VERB", 0, "root"), ("home", "NOUN", 2, "obl"),
           ("!", "PUNCT", 3, "punct")]),
    # every head right, one label wrong
    ("d", [("Hi", "INTJ", 0, "root"), ("there", "ADV", 1, "dep")]),
)


def read(text):
    return read_conllu(io.StringIO(text))


def test_figures_worked_out_by_hand():
    r = evaluate(read(GOLD), read(SYSTEM))
    assert set(r) == set(KEYS)
    assert r["words"] == 14 and r["sentences"] == 4
    assert r["uas"] == pytest.approx(100 * 11 / 14)  # wrong heads: loudly, Cats, !
    assert r["las"] == pytest.approx(100 * 9 / 14)  # also wrong: dog (label), there (label)
    assert r["las_full"] == pytest.approx(100 * 8 / 14)  # also wrong: home (obl vs obl:npmod)
    assert r["root"] == pytest.approx(100 * 3 / 4)  # b has two roots
    assert r["complete"] == pytest.approx(100 * 1 / 4)  # only d
    assert r["complete_labeled"] == pytest.approx(0.0)


def test_figures_without_punctuation_worked_out_by_hand():
    r = evaluate(read(GOLD), read(SYSTEM), exclude_punct=True)
    assert r["words"] == 11 and r["sentences"] == 4
    assert r["uas"] == pytest.approx(100 * 9 / 11)
    assert r["las"] == pytest.approx(100 * 7 / 11)
    assert r["las_full"] == pytest.approx(100 * 6 / 11)
    assert r["root"] == pytest.approx(75.0)
    assert r["complete"] == pytest.approx(50.0)  # c (its only error is punctuation) and d
    assert r["complete_labeled"] == pytest.approx(25.0)  # c


def test_gold_against_itself_is_perfect_and_paths_work(tmp_path):
    g = tmp_path / "gold.conllu"
    g.write_text(GOLD)
    r = evaluate(g, str(g))
    assert all(r[k] == 100.0 for k in KEYS[:6])
    table = format_table(r)
    assert table.count("100.00") == 6 and "14" in table


def independent_evaluate(gold, system, exclude_punct=False):
    """Plain loops over words; shares no code with arboreal.evaluation."""
    words = uas = las = full = 0
    root = comp = comp_l = 0
    for g, s in zip(gold, system):
        ok_u = ok_l = True
        groots, sroots = set(), set()
        for m in range(1, len(g) + 1):
            if exclude_punct and g.upos[m] == "PUNCT":
                continue
            words += 1
            head = g.heads[m] == s.heads[m]
            lab = g.deprels[m].split(":")[0] == s.deprels[m].split(":")[0]
            uas += head
            las += head and lab
            full += head and g.deprels[m] == s.deprels[m]
            ok_u &= bool(head)
            ok_l &= bool(head and lab)
            if g.heads[m] == 0:
                groots.add(m)
            if s.heads[m] == 0:
                sroots.add(m)
        root += groots == sroots
        comp += ok_u
        comp_l += ok_l
    n = len(gold)
    return {"uas": 100 * uas / words, "las": 100 * las / words, "las_full": 100 * full / words,
            "root": 100 * root / n, "complete": 100 * comp / n, "complete_labeled": 100 * comp_l / n,
            "words": words, "sentences": n}


def descends(heads, k, h):
    while k > 0 and k != h:
        k = heads[k]
    return k == h


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("exclude_punct", [False, True])
def test_matches_independent_evaluator_on_perturbed_sample(seed, exclude_punct):
    gold = read_conllu(SAMPLE_TEST)
    rng = np.random.default_rng(seed)
    labels = np.array(["nsubj", "obj", "obl", "obl:tmod", "nmod:poss", "punct", "root", "dep"], dtype=object)
    system = []
    for s in gold:
        n = len(s)
        heads = s.heads.copy()
        rels = s.deprels.copy()
        for m in np.flatnonzero(rng.random(n + 1) < 0.15):
            if m == 0:
                continue
            # reattach m to a random word outside its subtree: the result stays a tree
            outside = [h for h in range(n + 1) if h != m and not descends(heads, h, m)]
            heads[m] = rng.choice(outside)
        relabel = rng.random(n + 1) < 0.15
        relabel[0] = False
        rels[relabel] = rng.choice(labels, relabel.sum())
        system.append(s.with_tree(heads, rels))
    got = evaluate(gold, system, exclude_punct=exclude_punct)
    want = independent_evaluate(gold, system, exclude_punct)
    assert got["words"] == want["words"] and got["sentences"] == want["sentences"]
    for k in KEYS[:6]:
        assert got[k] == pytest.approx(want[k], abs=1e-9), k
    assert got["uas"] < 100 and got["complete"] < got["uas"]
    # and through files, as the CLI does
    again = evaluate(read(format_conllu(gold)), read(format_conllu(system)), exclude_punct=exclude_punct)
    assert again == got


def test_missing_system_heads_count_as_wrong():
    sys_text = GOLD.replace("4\tloudly\t_\tADV\t_\t_\t3\t", "4\tloudly\t_\tADV\t_\t_\t_\t")
    system = read_conllu(io.StringIO(sys_text), allow_missing_heads=True)
    r = evaluate(read(GOLD), system)
    assert r["uas"] == pytest.approx(100 * 13 / 14)


def test_word_mismatches_name_the_first_differing_sentence():
    # attachment_scores needs the same words; evaluate() scores other tokenizations the
    # CoNLL 2018 way (tests/test_evaluation_ud.py) but names a differing word the same way
    gold = read(GOLD)
    other = read(GOLD.replace("\tpurr\t", "\tpurrs\t"))
    with pytest.raises(ArborealError, match=r"sentence 2 \(sent_id b\), line 8: word 2 is 'purr' in gold, "
                                            r"'purrs' in the system output"):
        attachment_scores(gold, other)
    shorter = read(GOLD.replace("4\t!\t_\tPUNCT\t_\t_\t2\tpunct\t_\t_\n", ""))
    with pytest.raises(ArborealError, match=r"sentence 3 \(sent_id c\).*4 words in gold, 3 in the system"):
        attachment_scores(gold, shorter)
    with pytest.raises(ArborealError, match=r"gold has 4 sentences, the system output 3: sentence 4 "
                                            r"\(sent_id d\).* is missing"):
        attachment_scores(gold, gold[:3])
    # a form difference in an earlier sentence is reported before a later length difference
    both = read(GOLD.replace("\tThe\t", "\tA\t").replace("4\t!\t_\tPUNCT\t_\t_\t2\tpunct\t_\t_\n", ""))
    with pytest.raises(ArborealError, match=r"sentence 1 \(sent_id a\)"):
        attachment_scores(gold, both)
    with pytest.raises(ArborealError, match="nothing to evaluate"):
        attachment_scores([], [])
    with pytest.raises(ArborealError, match="nothing to evaluate"):
        evaluate([], [])
    with pytest.raises(ArborealError, match=r"sentence 2 \(sent_id b\), line 8: word 2 is 'purr'"):
        evaluate(gold, read(GOLD.replace("\tpurr\t", "\tpurrs\t")))
