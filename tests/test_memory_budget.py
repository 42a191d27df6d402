"""Memory budget of higher-order parsing: estimate, harder pruning, first-order fallback."""
from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from arboreal.features.higher_order import HigherOrderFeatures
from arboreal.inference.higher_order import (MemoryBudgetError, MemoryBudgetWarning, PartIndex,
                                             estimate_bytes, grand_sibling_decode, part_counts,
                                             prune_arcs)
from arboreal.inference.higher_order.memory import chart_bytes, decoder_kind
from arboreal.inference.higher_order.third_order import _charts
from arboreal.io.conllu import read_conllu, write_conllu
from arboreal.models import Parser
from arboreal.trees import is_tree

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
ALL = ("sib", "grand", "gsib", "trisib")


def random_mask(rng, n, k):
    mu = rng.random((n + 1, n + 1))
    return prune_arcs(mu, 0.0, k, True)


def sample_head(path: Path, sentences: int) -> Path:
    """The first ``sentences`` sentences of the sample's train file, written to ``path``."""
    write_conllu(read_conllu(SAMPLE / "en_ewt-sample-train.conllu")[:sentences], path)
    return path


def long_sentence_file(path: Path, words: int) -> Path:
    """One sentence of ``words`` words made of the sample test sentences, repeated as
    often as needed (flat tree: word 1 under the root, every other word under word 1)."""
    rows = []
    sents = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")
    while len(rows) < words:
        for s in sents:
            for i in range(1, len(s) + 1):
                if len(rows) == words:
                    break
                j = len(rows) + 1
                rows.append("\t".join([str(j), s.forms[i], s.lemmas[i], s.upos[i], s.xpos[i],
                                       s.feats[i], "0" if j == 1 else "1",
                                       "root" if j == 1 else "dep", "_", "_"]))
    path.write_text("\n".join(rows) + "\n\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def models():
    train = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")[:100]
    return {o: Parser.train(train, order=o, epochs=1, pruner_epochs=2, hash_bits=18,
                            label_bits=12) for o in (2, 3)}


def test_part_counts_equal_compact_index_sizes():
    rng = np.random.default_rng(0)
    for n, k in [(1, 1), (5, 2), (30, 4), (80, 10)]:
        a = random_mask(rng, n, k)
        c = part_counts(a)
        idx = PartIndex.compact(a)
        assert (c.n, c.arcs, c.w0) == (idx.n, idx.grand_off.shape[0], idx.width[0])
        assert (c.sib, c.grand, c.gsib, c.tri) == (idx.n_sib, idx.n_grand, idx.n_gsib, idx.n_tri)


@pytest.mark.parametrize("parts,outer", [(("sib",), False), (("grand",), False),
                                         (("sib", "grand"), False), (ALL, False), (ALL, True)])
def test_estimate_is_monotone(parts, outer):
    rng = np.random.default_rng(1)
    prev = 0
    for n in (10, 40, 160, 320):
        est = estimate_bytes(part_counts(random_mask(rng, n, 5)), parts, outer_only=outer)
        assert est > prev
        prev = est
    # more kept heads, more memory (same sentence length)
    mu = rng.random((101, 101))
    ests = [estimate_bytes(part_counts(prune_arcs(mu, 0.0, k, True)), parts, outer_only=outer)
            for k in (1, 3, 10, 30)]
    assert ests == sorted(ests) and ests[0] < ests[-1]


@pytest.mark.parametrize("kind,nf", [("grandparent", 2), ("model1", 3), ("model2", 4),
                                     ("model2_all", 3)])
def test_chart_estimate_is_the_allocated_size(kind, nf):
    rng = np.random.default_rng(2)
    a = random_mask(rng, 60, 6)
    idx = PartIndex.compact(a)
    R = idx.grand_off.shape[0]
    F, B = _charts(idx.arcid, R, idx.n + 1, nf, nf)
    real = F.nbytes + B.nbytes
    if kind == "model2_all":   # plus the G spans, allocated as in _model2_all
        real += 12 * (idx.n_gsib + int(idx.width[0]) ** 2)
    assert chart_bytes(kind, idx.n, R + 1, idx.n_gsib, int(idx.width[0])) == real


def test_estimate_covers_part_scores_and_charts():
    rng = np.random.default_rng(3)
    n = 50
    a = random_mask(rng, n, 5)
    idx = PartIndex.compact(a)
    codes = rng.integers(0, 50, size=(12, n + 3)).astype(np.int32)
    hof = HigherOrderFeatures(ALL, 16)
    ps = hof.part_scores(codes, idx, rng.random(1 << 16))
    scores = sum(v.nbytes for v in ps.values())
    c = part_counts(a)
    kind = decoder_kind(ALL)
    est = estimate_bytes(c, ALL)
    charts = chart_bytes(kind, n, c.arcs + 1, c.gsib, c.w0)
    tables = sum(t.nbytes for t in idx.tables()) + idx.allowed.nbytes
    assert scores + charts + tables <= est <= 2 * (scores + charts + tables) + 64 * (n + 1) ** 2


def test_decoder_refuses_charts_over_its_budget():
    n = 30
    arc = np.random.default_rng(4).normal(size=(n + 1, n + 1))
    with pytest.raises(MemoryBudgetError):
        grand_sibling_decode(arc, memory_budget=1000)
    assert is_tree(grand_sibling_decode(arc, memory_budget=None))


@pytest.mark.parametrize("order", [2, 3])
def test_sentences_over_a_tiny_budget_fall_back_to_first_order(models, order):
    model = models[order]
    ho = model.higher_order
    test = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")[:20]
    budget = ho.memory_budget
    try:
        ho.memory_budget = 1.0
        with pytest.warns(MemoryBudgetWarning, match="parsed at first order"):
            heads = model.predict_heads(test)
        longer = sum(len(s) > 1 for s in test)
        assert ho.last_fallbacks == longer and model.fallbacks_total >= longer
        first = [ho.first_order_heads(e) for e in model.features.encode(test)]
        for h, f in zip(heads, first):
            assert is_tree(h)
            np.testing.assert_array_equal(h, f)
    finally:
        ho.memory_budget = budget
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemoryBudgetWarning)
        model.predict_heads(test)
    assert ho.last_fallbacks == 0


def test_a_sentence_parsed_in_pieces_counts_once_as_a_fallback(models, monkeypatch):
    """A sentence over MAX_WORDS is parsed in pieces; when its pieces fall back to first
    order, the count (and the warning of 'arboreal parse') says one sentence, not one
    per piece."""
    import arboreal.models.pieces as pieces

    model = models[2]
    ho = model.higher_order
    test = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")
    long = max(test, key=len)
    monkeypatch.setattr(pieces, "MAX_WORDS", max(2, len(long) // 3))
    budget = ho.memory_budget
    try:
        ho.memory_budget = 1.0
        before = model.fallbacks_total
        with pytest.warns(MemoryBudgetWarning):
            parsed = model.parse([long, test[0]])
        assert len(ho.last_fallback_rows) >= 3          # its pieces and the other one
        assert model.fallbacks_total - before == 1 + (len(test[0]) > 1)
        assert model.split_total >= 1 and is_tree(parsed[0].heads)
    finally:
        ho.memory_budget = budget


def test_budget_between_full_and_one_head_prunes_harder(models, tmp_path):
    model = models[3]
    ho = model.higher_order
    s = read_conllu(long_sentence_file(tmp_path / "long.conllu", 300), allow_missing_heads=True)
    enc = model.features.encode(s)[0]
    full = ho.estimate_bytes(part_counts(ho.masks([enc])[0]))
    budget = ho.memory_budget
    try:
        ho.memory_budget = full - 1
        with warnings.catch_warnings():
            warnings.simplefilter("error", MemoryBudgetWarning)
            heads = model.predict_heads(s)[0]
        assert ho.last_tightened == 1 and ho.last_fallbacks == 0
        assert is_tree(heads)
    finally:
        ho.memory_budget = budget


def test_training_leaves_out_sentences_over_the_budget(tmp_path):
    train = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")[:60]
    long = read_conllu(long_sentence_file(tmp_path / "long.conllu", 300))
    # every sample sentence fits, the 300-word one does not even with one head per word
    with pytest.warns(MemoryBudgetWarning, match="1 training sentence"):
        model = Parser.train(train + long, order=2, epochs=1, pruner_epochs=1, hash_bits=16,
                             label_bits=10, memory_budget=5e6)
    assert model.train_skipped == 1
    assert is_tree(model.predict_heads(train[:1])[0])


def _rss_kb(cmd: list[str]) -> tuple[int, str]:
    """(peak RSS in KB of the command run in a child, its stderr)."""
    code = ("import resource, subprocess, sys\n"
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "sys.stderr.write(p.stderr)\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "sys.exit(p.returncode)\n")
    p = subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return int(p.stdout.split()[-1]), p.stderr


@pytest.fixture(scope="module")
def models_by_order(tmp_path_factory):
    """A default model of each order, trained once (1 epoch on the sample's first 150
    sentences)."""
    d = tmp_path_factory.mktemp("orders")
    train = sample_head(d / "train.conllu", 150)
    models = {}
    for order in (1, 2, 3):
        models[order] = d / f"order{order}.model"
        subprocess.run([sys.executable, "-m", "arboreal", "train",
                        str(train), "-o", str(models[order]),
                        "--order", str(order), "--epochs", "1", "--quiet"], check=True)
    return models


@pytest.mark.slow
@pytest.mark.parametrize("words", [1000, 5000])
@pytest.mark.parametrize("order", [1, 2, 3])
def test_parsing_a_long_sentence_stays_under_2_gb(tmp_path, models_by_order, order, words):
    """1,000 and 5,000 words at every order: a tree, under 2 GB of peak RSS; at orders 2
    and 3 a 5,000-word sentence is over the default memory budget whatever the pruning
    and is parsed at first order, with the warning."""
    long = long_sentence_file(tmp_path / "long.conllu", words)
    out = tmp_path / "out.conllu"
    rss, err = _rss_kb([sys.executable, "-m", "arboreal", "parse", str(models_by_order[order]),
                        str(long), "-o", str(out)])
    assert rss < 2 * 1024 * 1024, f"peak RSS {rss} KB"
    heads = read_conllu(out)[0].heads
    assert len(heads) == words + 1 and is_tree(heads)
    assert ("parsed at first order" in err) == (order > 1 and words == 5000), err


@pytest.mark.slow
def test_training_with_a_long_sentence_exits_0_with_a_warning(tmp_path):
    train = tmp_path / "train.conllu"
    sample = sample_head(tmp_path / "head.conllu", 150).read_text(encoding="utf-8")
    long = long_sentence_file(tmp_path / "long.conllu", 500).read_text(encoding="utf-8")
    train.write_text(sample.rstrip("\n") + "\n\n" + long, encoding="utf-8")
    # the default budget takes the 500-word sentence at order 2; a smaller one
    # (every sample sentence still fits) leaves it out with a warning
    for extra, warned in (([], False), (["--memory-budget", "20000000"], True)):
        rss, err = _rss_kb([sys.executable, "-m", "arboreal", "train", str(train),
                            "-o", str(tmp_path / "m.model"), "--order", "2",
                            "--epochs", "1", "--quiet", *extra])
        assert rss < 2 * 1024 * 1024, f"peak RSS {rss} KB"
        assert ("memory budget" in err) == warned, err
        assert "Traceback" not in err
