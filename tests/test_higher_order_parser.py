"""Higher-order features and parsers of order 2 and 3 (small data, quick)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from arboreal.errors import ArborealError, ModelError
from arboreal.features.first_order import FeatureSet
from arboreal.features.higher_order import HigherOrderFeatures
from arboreal.inference.higher_order import PartIndex, prune_arcs, score_tree
from arboreal.io.conllu import read_conllu
from arboreal.models import Parser, load_model
from arboreal.models.higher_order import HigherOrder, parse_parts

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"


@pytest.fixture(scope="module")
def sample():
    train = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")
    test = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")
    return train, test


def random_projective_tree(rng, n):
    """A random projective single-root tree (random split recursion)."""
    heads = np.full(n + 1, -1, dtype=np.int64)

    def build(h, lo, hi):   # attach words lo..hi (a contiguous block) under h
        if lo > hi:
            return
        m = int(rng.integers(lo, hi + 1))
        heads[m] = h
        build(m, lo, m - 1)
        build(m, m + 1, hi)

    root = int(rng.integers(1, n + 1))
    heads[root] = 0
    build(root, 1, root - 1)
    build(root, root + 1, n)
    return heads


@pytest.mark.parametrize("parts,outer", [(("sib",), False), (("sib", "grand"), False),
                                         (("sib", "grand", "gsib"), False),
                                         (("sib", "grand", "gsib", "trisib"), True),
                                         (("sib", "grand", "gsib", "trisib"), False)])
def test_part_scores_equal_weights_dot_tree_features(sample, parts, outer):
    """Decoder-side scores (part_scores + score_tree) == w . f(tree) from accumulate_tree."""
    train, _ = sample
    sents = [s for s in train if 6 <= len(s) <= 14][:6]
    fs = FeatureSet("mcdonald", bits=16).fit(train)
    hof = HigherOrderFeatures(parts, 16, outer_only=outer)
    rng = np.random.default_rng(0)
    w = rng.normal(size=1 << 16)
    for s, enc in zip(sents, fs.encode(sents)):
        n = len(s)
        trees = [s.heads.astype(np.int64)] + [random_projective_tree(rng, n) for _ in range(3)]
        allowed = rng.random((n + 1, n + 1)) < 0.3
        for heads in trees[:3]:
            allowed[heads[1:], np.arange(1, n + 1)] = True
        index = PartIndex.compact(allowed)
        ps = hof.part_scores(enc.codes, index, w)
        arc = rng.normal(size=(n + 1, n + 1))
        for i, heads in enumerate(trees):
            f = np.zeros(1 << 16)
            hof.accumulate_tree(enc.codes, heads, f)
            got = score_tree(heads, index, arc, ps["sib"], ps["grand"], ps["gsib"],
                             ps["trisib"], outer_only=outer)
            if i == 3 and not allowed[heads[1:], np.arange(1, n + 1)].all():
                assert got == -np.inf   # a pruned arc
                continue
            want = float(f @ w) + arc[heads[1:], np.arange(1, n + 1)].sum()
            assert got == pytest.approx(want, rel=1e-9, abs=1e-6)


def random_tree(rng, n):
    """A random single-root tree (projective or not): random attachment order."""
    heads = np.full(n + 1, -1, dtype=np.int64)
    order = rng.permutation(np.arange(1, n + 1))
    heads[order[0]] = 0
    for i, m in enumerate(order[1:], start=1):
        heads[m] = order[rng.integers(i)]
    return heads


def test_non_projective_part_scores_equal_weights_dot_tree_features(sample):
    """part_scores(projective=False) scores every part of non-projective trees too."""
    train, _ = sample
    sents = [s for s in train if 6 <= len(s) <= 14][:6]
    fs = FeatureSet("mcdonald", bits=16).fit(train)
    hof = HigherOrderFeatures(("sib", "grand"), 16)
    rng = np.random.default_rng(5)
    w = rng.normal(size=1 << 16)
    crossing = 0
    for s, enc in zip(sents, fs.encode(sents)):
        n = len(s)
        trees = [random_tree(rng, n) for _ in range(4)]
        allowed = rng.random((n + 1, n + 1)) < 0.3
        for heads in trees:
            allowed[heads[1:], np.arange(1, n + 1)] = True
        index = PartIndex.compact(allowed)
        ps = hof.part_scores(enc.codes, index, w, projective=False)
        arc = rng.normal(size=(n + 1, n + 1))
        for heads in trees:
            f = np.zeros(1 << 16)
            hof.accumulate_tree(enc.codes, heads, f)
            got = score_tree(heads, index, arc, ps["sib"], ps["grand"])
            want = float(f @ w) + arc[heads[1:], np.arange(1, n + 1)].sum()
            assert got == pytest.approx(want, rel=1e-9, abs=1e-6)
            g = heads[heads[1:]]
            m = np.arange(1, n + 1)
            crossing += int(((g > 0) & (np.minimum(heads[1:], m) < g)
                             & (g < np.maximum(heads[1:], m))).sum())
    assert crossing > 0   # grandparents inside the span of h -> m were exercised


def test_parse_parts():
    assert parse_parts(2, None) == ("sib", "grand")
    assert parse_parts(3, None) == ("sib", "grand", "gsib", "trisib")
    assert parse_parts(2, "grandparent,sibling") == ("sib", "grand")
    with pytest.raises(ValueError, match="unknown part"):
        parse_parts(2, "cousin")


def test_prune_arcs_keeps_gold_mostly_with_true_marginals():
    rng = np.random.default_rng(4)
    n = 12
    mu = rng.dirichlet(np.ones(n + 1) * 0.3, size=n + 1).T   # column m: a head distribution
    allowed = prune_arcs(mu, threshold=1e-3, max_heads=3)
    assert allowed.sum(axis=0)[1:].max() <= 4


SMALL = dict(hash_bits=18, label_bits=12)


@pytest.fixture(scope="module")
def trained(sample):
    train, _ = sample
    train = train[:100]
    first = Parser.train(train, epochs=3, **SMALL)
    models = {order: Parser.train(train, order=order, epochs=2, pruner_epochs=3, **SMALL)
              for order in (2, 3)}
    return first, models


@pytest.mark.parametrize("order", [2, 3])
def test_train_parse_save_load(sample, trained, tmp_path, order):
    _, test = sample
    test = test[:60]
    first, models = trained
    model = models[order]
    gold = np.concatenate([s.heads[1:] for s in test])

    def uas(p):
        return float((np.concatenate([h[1:] for h in p.predict_heads(test)]) == gold).mean())

    u1, u2 = uas(first), uas(model)
    assert u2 > 0.6
    assert u2 > u1 - 0.05   # small data: the higher-order model must not collapse
    path = tmp_path / "m.npz"
    model.save(path)
    again = load_model(path)
    assert isinstance(again, Parser) and again.order == order
    assert again.higher_order.kinds == model.higher_order.kinds
    for a, b in zip(model.predict_heads(test), again.predict_heads(test)):
        assert np.array_equal(a, b)
    parsed = again.parse(test[:20])
    las = np.mean(np.concatenate([(p.heads[1:] == s.heads[1:]) & (p.deprels[1:] == s.deprels[1:])
                                  for p, s in zip(parsed, test[:20])]))
    assert las > 0.4


def test_grand_scope_both_decoders_train_save_and_load(sample, trained, tmp_path):
    """Order 3 with grand / grand-sibling parts of every child (the default,
    grand_tri_sibling_decode) or of the outermost child per side (Model 2)."""
    train, test = sample
    test = test[:60]
    first, models = trained
    assert not models[3].higher_order.outer_only
    model = Parser.train(train[:100], order=3, epochs=2, pruner_epochs=3, grand_scope="outer",
                         **SMALL)
    assert model.higher_order.outer_only
    gold = np.concatenate([s.heads[1:] for s in test])
    heads = model.predict_heads(test)
    assert float((np.concatenate([h[1:] for h in heads]) == gold).mean()) > 0.6
    path = tmp_path / "outer.npz"
    model.save(path)
    again = load_model(path)
    assert again.higher_order.outer_only
    for a, b in zip(heads, again.predict_heads(test)):
        assert np.array_equal(a, b)
    with pytest.raises(ArborealError, match="grand_scope"):
        Parser.train(train[:10], order=3, grand_scope="inner", **SMALL)


@pytest.mark.parametrize("kind", ["first-order", "higher-order"])
def test_files_of_the_retired_model_types_ask_for_retraining(tmp_path, kind):
    """Before the one parser class, orders had their own model types and formats: such
    files get a clear 'retrain' error, never a traceback or a wrong parse."""
    from arboreal.io.model_file import save_model_file
    other = tmp_path / "x.npz"
    save_model_file(other, {"model_type": kind}, {})
    with pytest.raises(ModelError, match="retrain"):
        load_model(other)


def test_cli_train_order_2_and_parse(tmp_path, capsys):
    """`arboreal train --order 2 --parts ...` reaches this module; the file parses back."""
    from arboreal.cli import main
    from arboreal.io.conllu import write_conllu

    train = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")[:60]
    small = tmp_path / "train.conllu"
    write_conllu(train, small)
    model = tmp_path / "m.npz"
    assert main(["train", str(small), "--order", "2", "--parts", "sibling,grandparent",
                 "--epochs", "1", "--hash-bits", "16", "--features", "mcdonald",
                 "-o", str(model), "--quiet"]) == 0
    out = tmp_path / "out.conllu"
    assert main(["parse", str(model), str(small), "-o", str(out)]) == 0
    parsed = read_conllu(out)
    assert len(parsed) == len(train) and all(p.has_heads for p in parsed)
    assert main(["train", str(small), "--order", "2", "--parts", "cousin", "-o", str(model),
                 "--quiet"]) == 2
    assert "unknown part" in capsys.readouterr().err


def test_mira_order_2_fits_its_training_data(sample):
    """1-best MIRA at order 2 (no pruning) separates a tiny treebank: 100% train UAS."""
    train = sample[0][:15]
    model = Parser.train(train, order=2, epochs=8, pruner_epochs=2, learner="mira",
                         max_heads=1000, threshold=0.0, **SMALL)
    gold = np.concatenate([s.heads[1:] for s in train])
    pred = np.concatenate([h[1:] for h in model.predict_heads(train)])
    assert np.array_equal(pred, gold)
    assert model.meta["training"]["learner"] == "mira"


def test_unsupported_higher_order_learner_is_a_clear_error(tmp_path, capsys):
    from arboreal.cli import main

    train = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")[:5]
    with pytest.raises(ArborealError, match="learner 'local-margin' is not supported"):
        Parser.train(train, order=2, learner="local-margin")
    assert main(["train", str(SAMPLE / "en_ewt-sample-train.conllu"), "--order", "2",
                 "--learner", "local-margin", "-o", str(tmp_path / "m.npz"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "learner 'local-margin' is not supported with --order 2/3" in err
    assert "Traceback" not in err
    # log-linear training has marginals at order 2, not with tri-siblings
    assert main(["train", str(SAMPLE / "en_ewt-sample-train.conllu"), "--order", "3",
                 "--learner", "loglinear", "-o", str(tmp_path / "m.npz"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "needs part marginals" in err and "Traceback" not in err


def _dense_reference_fit(ho, encs, golds, allowed, epochs, C=0.5, mira=True, seed=0,
                         cost=0.0):
    """The slow way: phi(gold) - phi(pred) built in a dense 2**bits vector per update
    (step 1 for the perceptron, MIRA's closed form with ``mira``; pred decoded with
    ``cost`` added to every non-gold arc's score)."""
    from arboreal.learn.perceptron import final_weights

    dim = ho.features.dim
    # float32 weights and running sums, as the learners keep them
    w, u, c = np.zeros(dim, dtype=np.float32), np.zeros(dim, dtype=np.float32), 1.0
    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        for i in rng.permutation(len(encs)):
            enc, gold = encs[i], golds[i]
            arc = ho.features.arc_scores(enc, w)
            wrong = np.ones_like(arc, dtype=bool)
            wrong[gold[1:], np.arange(1, gold.shape[0])] = False
            pred = ho.decode(enc, allowed[i], w, np.where(wrong, arc + cost, arc))
            errors = int((pred[1:] != gold[1:]).sum())
            if errors:
                diff = np.zeros(dim)
                ho.features.accumulate_tree(enc, gold, diff, 1.0)
                ho.features.accumulate_tree(enc, pred, diff, -1.0)
                ho.parts.accumulate_tree(enc.codes, gold, diff, 1.0)
                ho.parts.accumulate_tree(enc.codes, pred, diff, -1.0)
                norm = float(diff @ diff)
                margin = float(w.astype(np.float64) @ diff)
                tau = min(C, max(0.0, (errors - margin) / norm)) if norm else 0.0
                if not mira:
                    tau = 1.0
                w += (tau * diff).astype(np.float32)
                u += (c * tau * diff).astype(np.float32)
            c += 1.0
    return final_weights(w, u, c, True)


@pytest.mark.parametrize("order,learner,cost", [(2, "mira", 1.0), (3, "mira", 1.0),
                                               (3, "mira", 0.0), (2, "perceptron", 0.0)])
def test_sparse_update_matches_dense_reference(sample, order, learner, cost):
    """MIRA's (cost-augmented by default, or not) and the perceptron's explicit-id updates
    over arcs and parts (arboreal.learn, the learners of every order) give the weights of
    the dense O(2**bits) update."""
    from arboreal.learn import TrainingData, get_learner
    from arboreal.learn.perceptron import signed_ids

    train = [s for s in sample[0] if len(s) <= 20][:25]
    fs = FeatureSet("mcdonald", bits=14).fit(train)
    ho = HigherOrder(fs, HigherOrderFeatures(parse_parts(order, None), 14),
                     np.zeros(fs.dim, dtype=np.float32))
    encs = fs.encode(train)
    golds = [s.heads.astype(np.int64) for s in train]
    rng = np.random.default_rng(1)
    allowed = []
    for s in train:   # a random pruning mask that keeps the gold arcs
        n = len(s)
        a = rng.random((n + 1, n + 1)) < 0.5
        a[s.heads[1:], np.arange(1, n + 1)] = True
        allowed.append(a)
    want = _dense_reference_fit(ho, encs, golds, allowed, 2, mira=learner == "mira",
                                cost=cost)

    def decoder(i, w, bias=None):
        arc = None if bias is None else fs.arc_scores(encs[i], w) + bias
        return ho.decode(encs[i], allowed[i], w, arc)

    data = TrainingData(fs, encs, golds, parts=ho.parts, decoder=decoder)
    options = {"C": 0.5} if cost else {"C": 0.5, "cost": 0.0}
    got = get_learner(learner, **(options if learner == "mira" else {})).fit(data, 2)
    assert np.count_nonzero(want) > 1000
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # the sparse difference itself, on trees that differ
    enc, gold = encs[0], golds[0]
    pred = ho.decode(enc, allowed[0], rng.normal(size=1 << 14))
    assert not np.array_equal(pred, gold)
    dense = np.zeros(1 << 14)
    fs.accumulate_tree(enc, gold, dense, 1.0)
    fs.accumulate_tree(enc, pred, dense, -1.0)
    ho.parts.accumulate_tree(enc.codes, gold, dense, 1.0)
    ho.parts.accumulate_tree(enc.codes, pred, dense, -1.0)
    ids, d = signed_ids(*data.tree_items(0, gold, [pred]))
    assert np.array_equal(ids, np.flatnonzero(dense)) and np.array_equal(d, dense[ids])


def test_non_projective_order_2_fits_non_projective_trees(sample, tmp_path):
    """--decoder cle (projective DP + hill-climbing) reaches 100% train UAS on a tiny
    treebank with non-projective trees, which the projective model cannot; the
    option survives save/load."""
    from arboreal.trees import is_projective

    train = [s for s in sample[0] if len(s) <= 25]
    nonproj = [s for s in train if not is_projective(s.heads)][:4]
    tiny = nonproj + [s for s in train if is_projective(s.heads)][:8]
    assert len(nonproj) == 4
    gold = np.concatenate([s.heads[1:] for s in tiny])
    opts = dict(order=2, epochs=10, pruner_epochs=2, learner="mira", max_heads=1000,
                threshold=0.0, **SMALL)
    model = Parser.train(tiny, decoder="cle", **opts)
    pred = model.predict_heads(tiny)
    assert np.array_equal(np.concatenate([h[1:] for h in pred]), gold)
    assert not all(is_projective(h) for h in pred)
    proj = Parser.train(tiny, **opts)
    assert all(is_projective(h) for h in proj.predict_heads(tiny))
    model.save(tmp_path / "np.npz")
    again = load_model(tmp_path / "np.npz")
    assert again.higher_order.projective is False and again.decoder == "cle"
    for a, b in zip(pred, again.predict_heads(tiny)):
        assert np.array_equal(a, b)
    with pytest.raises(ArborealError, match="sibling and grandparent parts only"):
        Parser.train(tiny, order=3, decoder="cle", epochs=1, **SMALL)


def test_cli_decoder_cle_selects_hill_climbing(tmp_path):
    from arboreal.cli import main
    from arboreal.io.conllu import write_conllu

    small = tmp_path / "train.conllu"
    write_conllu(read_conllu(SAMPLE / "en_ewt-sample-train.conllu")[:40], small)
    model = tmp_path / "m.npz"
    assert main(["train", str(small), "--order", "2", "--decoder", "cle", "--epochs", "1",
                 "--hash-bits", "16", "-o", str(model), "--quiet"]) == 0
    assert load_model(model).higher_order.projective is False
    assert main(["train", str(small), "--order", "2", "--decoder", "auto", "--epochs", "1",
                 "-o", str(model), "--quiet"]) == 2


def test_cli_and_api_default_learner_is_mira_at_every_order(tmp_path):
    from arboreal.cli import main
    from arboreal.io.conllu import write_conllu

    small = tmp_path / "train.conllu"
    write_conllu(read_conllu(SAMPLE / "en_ewt-sample-train.conllu")[:30], small)
    m2, m1 = tmp_path / "o2.npz", tmp_path / "o1.npz"
    assert main(["train", str(small), "--order", "2", "--epochs", "1", "--hash-bits", "16",
                 "-o", str(m2), "--quiet"]) == 0
    assert load_model(m2).meta["training"]["learner"] == "mira"
    assert main(["train", str(small), "--epochs", "1", "--hash-bits", "16", "-o", str(m1),
                 "--quiet"]) == 0
    assert load_model(m1).meta["training"]["learner"] == "mira"
    assert Parser.train(read_conllu(small), epochs=1).meta["training"]["learner"] == "mira"


def _conllu(path, words, heads):
    lines = [f"{i}\t{w}\t_\t{p}\t_\t_\t{h}\tdep\t_\t_"
             for i, ((w, p), h) in enumerate(zip(words, heads[1:]), start=1)]
    path.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    return read_conllu(path)


def test_part_templates_read_what_they_name(tmp_path):
    """A part template's feature depends on exactly the attributes its slots read, the
    missing sibling ("none") is a value of its own, and part direction and distance
    bucket are conjoined: the template language means the same for parts as for arcs."""
    heads = np.array([-1, 0, 1, 1, 1])
    words = [("a", "X"), ("b", "X"), ("c", "X"), ("d", "X")]
    [s] = _conllu(tmp_path / "a.conllu", words, heads)
    fs = FeatureSet("default", bits=16).fit([s])
    hof = HigherOrderFeatures(("sib",), 16, templates={"sib": ["s.pos"]})
    rows = hof.tree_ids(fs.encode([s])[0].codes, heads).reshape(-1, 2)
    # parts in order: (0, none, 1), (1, none, 2), (1, 2, 3), (1, 3, 4); all rightward,
    # distance 1: the two first-child parts share ids, so do the two others
    assert rows.shape == (4, 2)
    assert np.array_equal(rows[0], rows[1]) and np.array_equal(rows[2], rows[3])
    assert not np.intersect1d(rows[1], rows[2]).size
    # changing a form no template reads changes nothing; changing a read POS does
    [other] = _conllu(tmp_path / "b.conllu", [("z", "X")] + words[1:], heads)
    [retag] = _conllu(tmp_path / "c.conllu", words[:2] + [("c", "Y")] + words[3:], heads)
    same, changed = (hof.tree_ids(e.codes, heads) for e in fs.encode([other, retag]))
    assert np.array_equal(same.reshape(-1, 2), rows)
    assert np.array_equal(changed.reshape(-1, 2)[:3], rows[:3])    # s = c only in (1, 3, 4)
    assert not np.array_equal(changed.reshape(-1, 2)[3], rows[3])
    with pytest.raises(ValueError, match="bad slot 'g.pos'"):
        HigherOrderFeatures(("sib",), 16, templates={"sib": ["g.pos m.pos"]})


def test_part_templates_are_saved_with_the_model(sample, tmp_path):
    """Custom part templates go into the model file and come back; a file whose
    templates read an anchor the part does not have is refused with a clear error."""
    from arboreal.io.model_file import load_model_file, save_model_file

    train, test = sample
    templates = {"sib": ["h.pos s.pos m.pos", "s.word m.word"],
                 "grand": ["g.pos h.pos m.pos", "g.lemma m.lemma"]}
    model = Parser.train(train[:40], order=2, epochs=1, pruner_epochs=1, hash_bits=16,
                         label_bits=10, part_templates=templates)
    model.save(tmp_path / "m.npz")
    again = load_model(tmp_path / "m.npz")
    assert again.higher_order.parts.templates == templates
    for a, b in zip(model.predict_heads(test[:20]), again.predict_heads(test[:20])):
        assert np.array_equal(a, b)
    meta, arrays = load_model_file(tmp_path / "m.npz")
    meta["higher_order"]["templates"]["sib"] = ["g.pos m.pos"]
    save_model_file(tmp_path / "bad.npz", meta, arrays)
    with pytest.raises(ModelError, match="templates.*sib.*bad template"):
        load_model(tmp_path / "bad.npz")


@pytest.mark.parametrize("learner", ["loglinear", "eg", "factored-mira"])
def test_arc_factored_learners_refuse_higher_order_parts(sample, learner):
    """A learner that needs arc-factored marginals or constraints says so instead of
    silently training the arc weights alone."""
    from arboreal.learn import TrainingData, get_learner

    train = sample[0][:5]
    fs = FeatureSet("mcdonald", bits=12).fit(train)
    encs = fs.encode(train)
    data = TrainingData(fs, encs, [s.heads.astype(np.int64) for s in train],
                        parts=HigherOrderFeatures(("sib",), 12),
                        decoder=lambda i, w: train[i].heads.astype(np.int64))
    with pytest.raises(ValueError, match="arc-factored|part marginals"):
        get_learner(learner).fit(data, 1)


def test_pruning_is_chosen_to_keep_the_target_share_of_dev_heads(sample):
    """Without a fixed temperature and K the pruner's are the pair that keeps the target
    share of the dev gold heads with the fewest candidate heads (the most-keeping pair if
    none reaches it); what training reports is what the model's pruning keeps on dev."""
    from arboreal.models.higher_order import HEAD_LIMITS, TEMPERATURES

    train, test = sample
    dev = test[:60]
    chosen = {}
    for target in (0.5, 0.99, 1.0):
        model = Parser.train(train[:150], dev=dev, order=2, epochs=1, pruner_epochs=2,
                             prune_recall=target, **SMALL)
        choice = model.meta["training"]["higher_order"]["temperature_choice"]
        ho = model.higher_order
        assert choice["on"] == "dev" and choice["target"] == target
        assert (ho.prune_temperature, ho.max_heads) == (choice["temperature"],
                                                        choice["max_heads"])
        kept, per_word = model.pruning_recall(dev)
        assert kept == pytest.approx(choice["gold_heads_kept"])
        assert per_word == pytest.approx(choice["kept_heads_per_word"])
        # every other pair keeps fewer gold heads than the target, or more candidates
        for T in TEMPERATURES:
            for K in HEAD_LIMITS:
                ho.prune_temperature, ho.max_heads = T, K
                k, pw = model.pruning_recall(dev)
                assert k < min(target, choice["gold_heads_kept"]) or pw >= per_word - 1e-12
        chosen[target] = choice
    assert (chosen[0.5]["temperature"], chosen[0.5]["max_heads"]) == (TEMPERATURES[0],
                                                                      HEAD_LIMITS[0])
    assert chosen[1.0]["gold_heads_kept"] >= chosen[0.5]["gold_heads_kept"]
    assert chosen[1.0]["kept_heads_per_word"] > chosen[0.5]["kept_heads_per_word"]
    # a fixed temperature: only K is chosen; both fixed: nothing is
    fixed_t = Parser.train(train[:50], order=2, epochs=1, pruner_epochs=1,
                           prune_temperature=42.0, **SMALL)
    assert fixed_t.higher_order.prune_temperature == 42.0
    assert fixed_t.meta["training"]["higher_order"]["temperature_choice"]["temperature"] == 42.0
    fixed = Parser.train(train[:50], order=2, epochs=1, pruner_epochs=1,
                         prune_temperature=42.0, max_heads=3, **SMALL)
    assert (fixed.higher_order.prune_temperature, fixed.higher_order.max_heads) == (42.0, 3)
    assert fixed.meta["training"]["higher_order"]["temperature_choice"] is None
    # impossible values are refused, not replaced by defaults
    for bad in ({"max_heads": 0}, {"prune_temperature": 0.0}):
        with pytest.raises(ArborealError, match="pruning needs"):
            Parser.train(train[:20], order=2, epochs=1, pruner_epochs=1, **bad, **SMALL)


def test_without_dev_the_pruning_is_chosen_on_held_out_training_sentences(sample):
    """No dev data: the pruner is trained on nine tenths of the training sentences and its
    pruning chosen on the other tenth, which it never saw (a pruner judged on its own
    training sentences claims nearly every gold head at any pruning); the choice says so,
    and what it claims is what the model's pruning keeps on those sentences."""
    from arboreal.learn.trainer import held_out_split
    from arboreal.models.higher_order import HELD_OUT

    train, _ = sample
    part = train[:150]
    model = Parser.train(part, order=2, epochs=1, pruner_epochs=2, **SMALL)
    choice = model.meta["training"]["higher_order"]["temperature_choice"]
    assert choice["on"] == HELD_OUT
    held, rest = held_out_split(len(part), 0)
    # (the choice's figures leave out one-word sentences, which have nothing to prune)
    kept, per_word = model.pruning_recall([part[i] for i in held if len(part[i]) > 1])
    assert kept == pytest.approx(choice["gold_heads_kept"])
    assert per_word == pytest.approx(choice["kept_heads_per_word"])
    # the pruner did not train on the held-out sentences: it is the pruner of the rest
    encs = model.features.encode(part)
    heads = [np.asarray(s.heads, dtype=np.int64) for s in part]
    alone = HigherOrder.train(model.features, [encs[i] for i in rest], [heads[i] for i in rest],
                              parse_parts(2, None), 2, 0, True, True,
                              prune_temperature=choice["temperature"],
                              max_heads=choice["max_heads"])
    assert np.array_equal(model.higher_order.prune_weights, alone.prune_weights)


def test_parse_pruning_is_chosen_apart_after_the_training_masks(sample):
    """``parse_prune_recall``: the training masks keep what ``prune_recall`` chooses; the
    model then prunes for parsing (and for the dev scores of its epochs) with the pair
    chosen for the other target, which is stored and reported."""
    train, test = sample
    dev = test[:60]
    opts = dict(order=2, epochs=1, pruner_epochs=2, prune_recall=1.0, **SMALL)
    loose = Parser.train(train[:150], dev=dev, **opts)
    apart = Parser.train(train[:150], dev=dev, parse_prune_recall=0.5, **opts)
    train_choice = loose.meta["training"]["higher_order"]["temperature_choice"]
    pruning = apart.meta["training"]["higher_order"]
    assert pruning["temperature_choice"] == train_choice
    assert "parse_choice" not in loose.meta["training"]["higher_order"]
    parse = pruning["parse_choice"]
    assert parse["target"] == 0.5 and parse["on"] == "dev"
    ho = apart.higher_order
    assert (ho.prune_temperature, ho.max_heads) == (parse["temperature"], parse["max_heads"])
    kept, per_word = apart.pruning_recall(dev)
    assert kept == pytest.approx(parse["gold_heads_kept"])
    assert per_word < train_choice["kept_heads_per_word"]
    with pytest.raises(ArborealError, match="parse_prune_recall"):
        Parser.train(train[:50], dev=dev, parse_prune_recall=1.5, **opts)


def test_first_order_analyses_are_refused_clearly_for_higher_orders(trained, tmp_path, capsys):
    """k-best trees, marginals and MBR need the exact first-order sums: a model of order
    2 refuses them with a one-line error (exit 2); warmup still runs it."""
    from arboreal.cli import main

    _, models = trained
    path = tmp_path / "o2.npz"
    models[2].save(path)
    test = SAMPLE / "en_ewt-sample-test.conllu"
    for extra in (["--kbest", "2"], ["--marginals"], ["--decode", "mbr"]):
        assert main(["parse", str(path), str(test), "-o", str(tmp_path / "x"), *extra]) == 2
        err = capsys.readouterr().err
        assert "need a first-order model" in err and "Traceback" not in err
    with pytest.raises(ArborealError, match="first-order model"):
        models[2].arc_marginals(read_conllu(test)[:2])
    assert main(["warmup", str(path)]) == 0


def test_pruner_passes_follow_the_training_words(sample):
    """Without ``pruner_epochs`` the pruner reads about PRUNER_WORDS training words:
    round(PRUNER_WORDS / words) passes, at least one, at most the parser's epochs (a
    small training set gets the parser's epochs, a large one fewer); a given number is
    used as given."""
    from arboreal.models.higher_order import PRUNER_WORDS, default_pruner_epochs

    assert default_pruner_epochs(PRUNER_WORDS // 4, 10) == 4
    assert default_pruner_epochs(PRUNER_WORDS // 4, 3) == 3
    assert default_pruner_epochs(PRUNER_WORDS // 40, 10) == 10
    assert default_pruner_epochs(PRUNER_WORDS * 3, 10) == 1
    train = sample[0][:30]
    words = sum(len(s) for s in train)
    for epochs, given, want in ((12, None, min(12, round(PRUNER_WORDS / words))),
                                (1, None, 1), (1, 3, 3)):
        opts = {} if given is None else {"pruner_epochs": given}
        model = Parser.train(train, order=2, epochs=epochs, max_heads=5,
                             prune_temperature=10.0, **opts, **SMALL)
        assert model.meta["training"]["higher_order"]["pruner_epochs"] == want
