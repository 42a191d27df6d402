"""Sentences over the word limit are parsed in pieces and joined into one tree
(arboreal.models.pieces): bounded memory for any input (issue 17)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import arboreal.models.pieces as pieces
from arboreal.cli import main
from arboreal.io.conllu import read_conllu, write_conllu
from arboreal.io.sentence import Sentence
from arboreal.models import Parser
from arboreal.models.pieces import JOIN_RELATION, parse_in_pieces
from arboreal.trees import is_projective, is_tree, root_count

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"


@pytest.fixture(scope="module")
def data():
    train = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")[:60]
    test = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")[:40]
    return train, test


def long_sentence(sents) -> Sentence:
    """The sentences' words as one sentence (a document without sentence breaks)."""
    cols = {c: np.concatenate([getattr(sents[0], c)[:1]] + [getattr(s, c)[1:] for s in sents])
            for c in ("forms", "lemmas", "upos", "xpos", "feats", "deprels", "deps", "misc")}
    n = len(cols["forms"]) - 1
    return Sentence(heads=np.r_[-1, np.zeros(n, dtype=np.int32)].astype(np.int32), comments=[],
                    extra=[], line=1, **cols)


@pytest.mark.parametrize("single_root", [True, False])
def test_pieces_join_into_one_projective_tree(data, single_root):
    train, test = data
    model = Parser.train(train, epochs=2, hash_bits=16, single_root=single_root)
    big = long_sentence(test)
    n = len(big)
    for limit in (5, 37, n - 1):
        (joined,), split = parse_in_pieces(model._parse_whole, [big], single_root, max_words=limit)
        assert split == 1
        assert is_tree(joined.heads, single_root) and is_projective(joined.heads)
        starts = range(0, n, limit)
        if single_root:
            assert root_count(joined.heads) == 1
            top = int(np.flatnonzero(joined.heads == 0)[0])
            assert top <= limit                          # the first piece's root
        else:
            assert root_count(joined.heads) >= len(starts)
        # inside a piece, the tree is the piece's own parse
        for a in starts:
            b = min(a + limit, n)
            (alone,) = model._parse_whole([pieces._piece(big, a, b)])
            inner = joined.heads[a + 1:b + 1]
            own = alone.heads[1:]
            moved = own == 0
            assert (inner[~moved] == own[~moved] + a).all()
            if single_root and a > 0:       # a later piece's root joins the first one's
                assert (inner[moved] == top).all()
                assert (joined.deprels[a + 1:b + 1][moved] == JOIN_RELATION).all()
            else:
                assert (inner[moved] == 0).all()
    # under the limit nothing changes
    whole, split = parse_in_pieces(model._parse_whole, [big] + test, single_root, max_words=n)
    assert split == 0
    assert all((w.heads == p.heads).all() for w, p in zip(whole, model._parse_whole([big] + test)))


def test_parse_command_warns_about_split_sentences(data, tmp_path, monkeypatch, capsys):
    train, test = data
    write_conllu(train, tmp_path / "train.conllu")
    write_conllu([long_sentence(test)] + test[:3], tmp_path / "in.conllu")
    model = tmp_path / "m.npz"
    assert main(["train", str(tmp_path / "train.conllu"), "-o", str(model), "--epochs", "1",
                 "--hash-bits", "14", "--quiet"]) == 0
    monkeypatch.setattr(pieces, "MAX_WORDS", 50)
    out = tmp_path / "out.conllu"
    assert main(["parse", str(model), str(tmp_path / "in.conllu"), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "arboreal: warning: 1 sentence(s) longer than 50 words were parsed in pieces" in err
    parsed = read_conllu(out)
    assert [len(s) for s in parsed] == [len(long_sentence(test))] + [len(s) for s in test[:3]]
