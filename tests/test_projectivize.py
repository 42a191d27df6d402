"""Projectivization (Koo et al. 2007, footnote 4) against brute-force enumeration."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from brute_force import _is_projective, all_trees

from arboreal.io.sentence import Sentence
from arboreal.inference.projective import min_loss_projective, projectivize, projectivize_heads
from arboreal.trees.properties import is_projective


def _min_loss(gold, candidates):
    return int((candidates[:, 1:] != gold[1:]).sum(axis=1).min())


@settings(max_examples=40, deadline=None)
@given(n=st.integers(3, 6), single_root=st.booleans(), seed=st.integers(0, 10**6))
def test_min_loss_projective_is_projective_and_optimal(n, single_root, seed):
    rng = np.random.default_rng(seed)
    trees = all_trees(n, projective=False, single_root=single_root)
    nonproj = [t for t in trees[rng.permutation(len(trees))[:200]] if not _is_projective(t)]
    if not nonproj:
        return
    golds = nonproj[:5]
    outs = min_loss_projective(golds, [single_root] * len(golds))
    cands = all_trees(n, projective=True, single_root=single_root)
    for gold, out in zip(golds, outs):
        assert out[0] == -1
        assert _is_projective(out)
        if single_root:
            assert int((out[1:] == 0).sum()) == 1
        # a valid tree of the right class
        assert any((c == out).all() for c in cands)
        assert int((out[1:] != gold[1:]).sum()) == _min_loss(gold, cands)


def test_default_root_constraint_follows_gold():
    # 0->1, 0->4 (two roots); 1->3, 4->2 cross (1-3 and 2-4)
    gold = np.array([-1, 0, 4, 1, 0])
    assert not is_projective(gold)
    out = projectivize_heads(gold)
    assert is_projective(out)
    cands = all_trees(4, projective=True, single_root=False)
    assert int((out[1:] != gold[1:]).sum()) == _min_loss(gold, cands)
    # forcing single root gives a single-root tree
    out1 = projectivize_heads(gold, single_root=True)
    assert int((out1[1:] == 0).sum()) == 1 and is_projective(out1)


def _sentence(heads, deprels):
    n = len(heads) - 1
    words = np.array(["<root>"] + [f"w{i}" for i in range(1, n + 1)], dtype=object)
    return Sentence(forms=words, lemmas=words.copy(), upos=words.copy(), xpos=words.copy(),
                    feats=words.copy(), heads=np.asarray(heads, dtype=np.int32),
                    deprels=np.array(["<root>"] + deprels, dtype=object), deps=words.copy(),
                    misc=words.copy(), comments=["# sent_id = x"])


def test_projectivize_sentences_keeps_other_columns_and_labels():
    proj = _sentence([-1, 2, 0, 2], ["a", "root", "b"])
    nonproj = _sentence([-1, 3, 4, 0, 3, 3], ["x", "y", "root", "z", "u"])
    assert not is_projective(nonproj.heads)
    out, n_sent, n_words = projectivize([proj, nonproj])
    assert out[0] is proj
    assert n_sent == 1 and n_words >= 1
    new = out[1]
    assert is_projective(new.heads)
    assert n_words == int((new.heads != nonproj.heads).sum())
    assert list(new.deprels) == list(nonproj.deprels)
    assert list(new.forms) == list(nonproj.forms) and new.comments == nonproj.comments
    cands = all_trees(5, projective=True, single_root=True)
    assert n_words == _min_loss(nonproj.heads, cands)


SAMPLE = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "sample" / "en_ewt-sample-train.conllu"


def _sample_with_nonprojective(k=30):
    from arboreal.io.conllu import read_conllu
    from arboreal.trees.properties import tree_properties

    sents = read_conllu(SAMPLE)
    props = tree_properties([s.heads for s in sents])
    nonproj = [s for s, c in zip(sents, props["nonprojective"]) if c > 0]
    proj = [s for s, c in zip(sents, props["nonprojective"]) if c == 0]
    assert nonproj, "the sample has no non-projective tree"
    return nonproj[:3] + proj[:k]


def test_cli_projectivize_rewrites_only_heads(tmp_path):
    from arboreal.cli import main
    from arboreal.io.conllu import read_conllu, write_conllu

    sents = _sample_with_nonprojective(5)
    src = tmp_path / "in.conllu"
    dst = tmp_path / "out.conllu"
    write_conllu(sents, src)
    assert main(["projectivize", str(src), str(dst)]) == 0
    out = read_conllu(dst)
    assert len(out) == len(sents)
    in_lines = src.read_text(encoding="utf-8").splitlines()
    out_lines = dst.read_text(encoding="utf-8").splitlines()
    assert len(in_lines) == len(out_lines)
    changed = 0
    for a, b in zip(in_lines, out_lines):
        fa, fb = a.split("\t"), b.split("\t")
        if len(fa) == 10 and fa[0].isdigit():
            # all but HEAD identical (DEPREL kept); DEPS, whose basic part would
            # contradict the new tree, is '_' in the sentences that changed
            assert fa[:6] + fa[7:8] + fa[9:] == fb[:6] + fb[7:8] + fb[9:]
            assert fb[8] in (fa[8], "_")
            changed += fa[6] != fb[6]
        else:
            assert a == b
    assert changed >= 3
    for s, o in zip(sents, out):
        assert is_projective(o.heads)
        if is_projective(s.heads):
            assert (o.heads == s.heads).all()


def test_cli_projectivize_missing_file_exits_2(tmp_path, capsys):
    from arboreal.cli import main

    assert main(["projectivize", str(tmp_path / "nope.conllu"), str(tmp_path / "o.conllu")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("arboreal: error:")
    assert not (tmp_path / "o.conllu").exists()


def test_parser_training_projectivizes_for_projective_models_only():
    from arboreal.models import Parser

    sents = _sample_with_nonprojective(10)
    p = Parser.train(sents, learner="perceptron", decoder="eisner", epochs=1, hash_bits=16)
    assert p.meta["training"]["projectivized_trees"] == 3
    p = Parser.train(sents, learner="perceptron", decoder="eisner", epochs=1, hash_bits=16,
                     projectivize=False)
    assert p.meta["training"]["projectivized_trees"] == 0
    p = Parser.train(sents, learner="perceptron", decoder="cle", epochs=1, hash_bits=16)
    assert p.meta["training"]["projectivized_trees"] == 0
