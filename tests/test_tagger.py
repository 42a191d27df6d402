"""The tagger (UPOS, XPOS, FEATS, lemmas), its place in model files, jackknifing, and
tagged / tokenized input through ``arboreal parse`` and ``arboreal tag``."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arboreal.cli import main
from arboreal.errors import ArborealError
from arboreal.io.conllu import read_conllu, write_conllu
from arboreal.features.lemmas import apply_rule, lemma_rule
from arboreal.models.tagger import Tagger

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
TAGS = ("upos", "xpos", "feats", "lemmas")


def blank(sentences, columns=TAGS):
    """Copies with the given columns '_' (and no trees)."""
    out = []
    for s in sentences:
        b = np.full(len(s.forms), "_", dtype=object)
        b[0] = s.forms[0]
        out.append(replace(s, **{c: b.copy() for c in columns}))
    return out


def accuracy(gold, pred, column):
    g = np.concatenate([getattr(s, column)[1:] for s in gold])
    p = np.concatenate([getattr(s, column)[1:] for s in pred])
    return 100.0 * float((g == p).mean())


@pytest.fixture(scope="module")
def sample():
    train = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")
    test = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")
    return train, test


@pytest.fixture(scope="module")
def tagger(sample):
    train, _ = sample
    return Tagger.train(train[:500], train[500:], epochs=5)


# ---------------------------------------------------------------- lemma rules
@given(st.text(min_size=1, max_size=12), st.text(min_size=1, max_size=12))
@settings(max_examples=400, deadline=None)
def test_lemma_rule_takes_the_form_to_its_lemma(form, lemma):
    assert apply_rule(form, lemma_rule(form, lemma)) == lemma


@pytest.mark.parametrize("form,lemma,other,expected", [
    ("walked", "walk", "talked", "talk"),       # suffix rule generalises
    ("studies", "study", "flies", "fly"),
    ("The", "the", "A", "a"),                  # lower-casing
    ("SOUTER", "Souter", "BREYER", "Breyer"),  # title case
    ("went", "go", "x", "x"),                  # does not fit a short word: the form
])
def test_lemma_rule_applies_to_other_words(form, lemma, other, expected):
    assert apply_rule(other, lemma_rule(form, lemma)) == expected


# ---------------------------------------------------------------- the tagger
def test_tagger_learns_the_sample(sample, tagger):
    _, test = sample
    pred = tagger.tag(blank(test))
    # measured on this sample (500 training sentences): UPOS ~89, lemmas ~94
    assert accuracy(test, pred, "upos") > 85.0
    assert accuracy(test, pred, "xpos") > 83.0
    assert accuracy(test, pred, "feats") > 83.0
    assert accuracy(test, pred, "lemmas") > 90.0
    for s, p in zip(test, pred):       # only the tag columns change
        assert (s.forms == p.forms).all() and (s.heads == p.heads).all()
        assert s.comments == p.comments


def test_tagger_keeps_the_best_dev_epoch(tagger):
    for name, stage in tagger.stages.items():
        assert 1 <= stage.epochs <= 5 and stage.dev_accuracy is not None, name


def test_tagger_skips_columns_that_are_blank_in_training(sample):
    train, test = sample
    t = Tagger.train(blank(train[:200], ("xpos", "lemmas")), epochs=2)
    assert t.columns == ("upos", "feats")
    pred = t.tag(blank(test[:20]))
    assert all((p.xpos[1:] == "_").all() and (p.lemmas[1:] == "_").all() for p in pred)


def test_tagger_without_upos_in_training_is_an_error(sample):
    train, _ = sample
    with pytest.raises(ArborealError, match="no UPOS"):
        Tagger.train(blank(train[:50]))


def test_tagger_handles_empty_and_unknown_input(tagger):
    from arboreal.io.sentence import Sentence

    odd = [Sentence.from_columns([]), Sentence.from_columns(["Zzyzx", "\u0416\u0436", "٣٤",
                                                             "a" * 5000, "🙂"])]
    out = tagger.tag(odd)
    assert len(out[0]) == 0 and len(out[1]) == 5
    assert all(v != "_" for v in out[1].upos[1:])


# ---------------------------------------------------------------- jackknifing
def test_jackknife_tags_each_fold_with_a_tagger_that_did_not_see_it(sample):
    from arboreal.models.pipeline import jackknife

    train, _ = sample
    data = train[:100]
    seen_by: list[set] = []

    def train_tagger(part):
        seen_by.append({id(s) for s in part})
        return Tagger.train(part, epochs=1)

    out = jackknife(data, 4, train_tagger)
    assert len(seen_by) == 4 and len(out) == len(data)
    for k in range(4):
        fold = data[25 * k: 25 * (k + 1)]
        assert not seen_by[k] & {id(s) for s in fold}
        assert len(seen_by[k]) == 75
    assert [s.forms.tolist() for s in out] == [s.forms.tolist() for s in data]
    assert (np.concatenate([s.heads for s in out]) == np.concatenate([s.heads for s in data])).all()


@pytest.mark.parametrize("parser_tags", ["predicted", "both"])
def test_the_pipeline_parser_trains_on_the_tags_asked_for(sample, parser_tags, monkeypatch):
    from arboreal.models import Parser
    from arboreal.models.pipeline import train_pipeline

    train = sample[0][:120]
    seen = []
    parser_train = Parser.train

    def recording_train(sentences, dev, **options):
        seen.extend(sentences)
        return parser_train(sentences, dev, **options)

    monkeypatch.setattr(Parser, "train", recording_train)
    model = train_pipeline(train, None, {"epochs": 1, "hash_bits": 16}, tokenizer=False,
                           folds=3, tagger_epochs=2, parser_tags=parser_tags)
    jackknifed = seen[:len(train)]
    # the first copy: tags of fold taggers (some differ from the treebank's), same trees
    assert any((a.upos != b.upos).any() for a, b in zip(jackknifed, train))
    assert all((a.heads == b.heads).all() for a, b in zip(jackknifed, train))
    if parser_tags == "both":   # then every sentence again with the treebank's own tags
        assert len(seen) == 2 * len(train)
        assert all(a is b for a, b in zip(seen[len(train):], train))
    else:
        assert len(seen) == len(train)
    assert model.tagger.meta["parser_tags"] == parser_tags


def test_the_pipeline_refuses_unknown_parser_tags(sample):
    from arboreal.models.pipeline import train_pipeline

    with pytest.raises(ArborealError, match="parser tags must be one of predicted, both"):
        train_pipeline(sample[0][:60], None, {}, tokenizer=False,
                       parser_tags="gold")


# ---------------------------------------------------------------- models and the CLI
@pytest.fixture(scope="module")
def files(tmp_path_factory, sample):
    train, test = sample
    d = tmp_path_factory.mktemp("pipeline")
    write_conllu(train, d / "train.conllu")
    write_conllu(test[:60], d / "test.conllu")
    write_conllu(blank(test[:60]), d / "blank.conllu")
    (d / "tokens.txt").write_text("\n".join(" ".join(s.forms[1:]) for s in test[:60]) + "\n",
                                  encoding="utf-8")
    model = d / "m.model"
    assert main(["train", str(d / "train.conllu"), "-o", str(model), "--epochs", "3",
                 "--tagger-epochs", "3", "--jackknife", "3", "--hash-bits", "18",
                 "--quiet"]) == 0
    bare = d / "bare.model"
    assert main(["train", str(d / "train.conllu"), "-o", str(bare), "--epochs", "3",
                 "--hash-bits", "18", "--no-tagger", "--quiet"]) == 0
    return d


def test_model_file_holds_the_tagger(files, sample):
    from arboreal.models import load_model

    _, test = sample
    model = load_model(files / "m.model")
    assert model.tagger is not None and model.tagger.columns == TAGS
    again = Tagger.train(sample[0], epochs={"upos": 3, "xpos": 3, "feats": 3, "lemma": 3})
    assert again.columns == model.tagger.columns
    # saved and loaded tagger predicts what the trained one did (same data, same seed)
    a = model.tagger.tag(blank(test[:30]))
    b = again.tag(blank(test[:30]))
    for x, y in zip(a, b):
        for c in TAGS:
            assert (getattr(x, c) == getattr(y, c)).all()
    assert load_model(files / "bare.model").tagger is None


def test_parse_untagged_input_is_tagged_first(files, sample):
    from arboreal.models import load_model

    _, test = sample
    model = load_model(files / "m.model")
    blanked = model.parse(blank(test[:60]))
    assert accuracy(test[:60], blanked, "upos") > 85.0
    uas_blank = np.mean(np.concatenate([p.heads[1:] == g.heads[1:]
                                        for p, g in zip(blanked, test[:60])]))
    assert uas_blank > 0.6
    # given tags are kept; retag replaces them
    xs = [replace(s, upos=np.where(np.arange(len(s.forms)) > 0, "X", s.upos))
          for s in test[:10]]
    kept = model.parse(xs)
    assert all((p.upos[1:] == "X").all() for p in kept)
    retagged = model.parse(xs, retag=True)
    assert accuracy(test[:10], retagged, "upos") > 80.0


def test_model_without_tagger_refuses_untagged_input(files, capsys):
    rc = main(["parse", str(files / "bare.model"), str(files / "blank.conllu"), "-o",
               str(files / "never.conllu")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "blank.conllu: sentence 1 (line 1) has no UPOS tags" in err and "tagger" in err
    assert not (files / "never.conllu").exists()
    assert main(["tag", str(files / "bare.model"), str(files / "tokens.txt"),
                 "--input", "tokenized"]) == 2
    assert "has no tagger" in capsys.readouterr().err
    # tagged input parses; asking to retag it is an error
    assert main(["parse", str(files / "bare.model"), str(files / "test.conllu"), "-o",
                 str(files / "bare.conllu")]) == 0
    assert main(["parse", str(files / "bare.model"), str(files / "test.conllu"),
                 "--retag"]) == 2
    assert "cannot retag" in capsys.readouterr().err


def test_cli_parse_tokenized_input(files, sample, capsys):
    _, test = sample
    out = files / "tok.conllu"
    # the test split's words, one sentence per line: --input words keeps them as given
    # (--input tokenized would expand the tokens it knows as multiword ones)
    assert main(["parse", str(files / "m.model"), str(files / "tokens.txt"), "--input",
                 "words", "-o", str(out)]) == 0
    parsed = read_conllu(out)
    assert len(parsed) == 60
    for p, g in zip(parsed, test[:60]):
        assert p.forms.tolist() == g.forms.tolist() and p.has_heads
        assert p.sent_id is not None and any(c.startswith("# text = ") for c in p.comments)
    assert accuracy(test[:60], parsed, "upos") > 85.0


def test_cli_tag_fills_tags_and_leaves_heads(files, sample):
    out = files / "tagged.conllu"
    assert main(["tag", str(files / "m.model"), str(files / "blank.conllu"), "-o",
                 str(out)]) == 0
    tagged = read_conllu(out)
    gold = sample[1][:60]
    assert [len(s) for s in tagged] == [len(s) for s in gold]
    assert accuracy(gold, tagged, "lemmas") > 88.0
    # the input's trees are kept as they were
    assert all((t.heads == g.heads).all() for t, g in zip(tagged, gold))


@pytest.mark.parametrize("content,message", [
    (b"", "empty input"),
    (b"\n \n\t\n", "empty input"),
    (b"good line\nbad \x00 line\n", ":2: control character U+0000"),
    (b"caf\xe9\n", ":1: invalid UTF-8"),
    (b"a\x07b\n", "control character U+0007"),
])
def test_bad_tokenized_input_is_one_line_error(files, tmp_path, capsys, content, message):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    out = tmp_path / "out.conllu"
    assert main(["parse", str(files / "m.model"), str(bad), "--input", "tokenized",
                 "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert not out.exists()


def test_tokenized_input_with_odd_text(files, tmp_path, monkeypatch):
    import arboreal.models.pieces

    # a line of 20,000 tokens is one sentence, parsed in pieces (smaller ones here,
    # to keep the test quick)
    monkeypatch.setattr(arboreal.models.pieces, "MAX_WORDS", 1000)
    text = ("no sentence end at all and a very long line " * 2000 + "\n"
            "Ж ж mixed Ελληνικά 中文 ٣٤ 🙂\n")
    src = tmp_path / "odd.txt"
    src.write_text(text, encoding="utf-8")
    out = tmp_path / "odd.conllu"
    assert main(["parse", str(files / "m.model"), str(src), "--input", "tokenized",
                 "-o", str(out)]) == 0
    parsed = read_conllu(out)
    assert [len(s) for s in parsed] == [20000, 7]


def test_higher_order_model_carries_the_pipeline(tmp_path, sample):
    import arboreal

    write_conllu(sample[0][:120], tmp_path / "train.conllu")
    path = tmp_path / "o2.model"
    assert main(["train", str(tmp_path / "train.conllu"), "-o", str(path), "--order", "2",
                 "--epochs", "1", "--tagger-epochs", "1", "--hash-bits", "16",
                 "--quiet"]) == 0
    model = arboreal.load(str(path))
    assert model.order == 2 and model.tagger is not None and model.tokenizer is not None
    parsed = model.parse_text("The cat sat on the mat. It slept.")
    assert parsed and all(s.has_heads and s.upos[1] != "_" for s in parsed)


# ---------------------------------------------------------------- Viterbi decoding
def _condition_of(ctx, i, cond_col, n_cond):
    u = 0 if cond_col < 0 else max(int(ctx[i, cond_col]), 0)
    return u if u < n_cond else 0


def _sequence_score(attrs, ctx, cond_col, cand, cand_n, w, bits, order, slots):
    """The score Viterbi maximises and training uses, from token_features directly: each
    token's features with the sequence's own previous classes as history (without the
    (prev1, prev2) feature at order 1), summed at the token's slot."""
    from arboreal.features.tokens import feature_count, feature_offset, token_features

    mask = np.uint64((1 << bits) - 1)
    feats = np.empty(feature_count(attrs, ctx), dtype=np.uint64)
    total, p1, p2 = 0.0, -1, -1
    for i, j in enumerate(slots):
        u = _condition_of(ctx, i, cond_col, cand.shape[0])
        cls = int(cand[u, j]) if cand_n[u] > 0 else -1
        if cand_n[u] > 0:
            nf = token_features(attrs, 0, len(slots), i, ctx, p1, p2, feats)
            total += sum(float(w[feature_offset(feats[t], u, mask) + j]) for t in range(nf)
                         if not (order == 1 and t == 25))
        p2, p1 = p1, cls
    return total


def _random_stage(rng, n, bits, clusters=None):
    """A random stage; its attribute rows have the cluster columns when ``clusters``
    (None: at random)."""
    from arboreal.features.tokens import MAX_CANDIDATES, N_ATTRS, N_CLUSTER_ATTRS

    if clusters is None:
        clusters = bool(rng.integers(0, 2))
    width = N_ATTRS + (N_CLUSTER_ATTRS if clusters else 0)
    attrs = rng.integers(0, 4, size=(n, width)).astype(np.uint64)   # repeated values
    n_ctx = int(rng.integers(0, 2))
    n_cond = int(rng.integers(1, 4))
    width = int(rng.integers(1, 4))
    cand_n = rng.integers(0, width + 1, size=n_cond).astype(np.int32)
    cand = np.full((n_cond, width), -1, dtype=np.int32)
    for u in range(n_cond):
        cand[u, : cand_n[u]] = rng.choice(6, cand_n[u], replace=False)
    ctx = rng.integers(-1, n_cond + 1, size=(n, n_ctx)).astype(np.int32)
    w = rng.normal(size=(1 << bits) + MAX_CANDIDATES).astype(np.float32)
    return attrs, ctx, (0 if n_ctx else -1), cand, cand_n, w


@pytest.mark.parametrize("order", [1, 2])
def test_viterbi_is_the_exact_maximiser(order):
    """On short random sentences with random weights, Viterbi's sequence scores the
    maximum over every sequence of the candidate sets (brute force)."""
    import itertools

    from arboreal.features.tokens import (feature_count, viterbi_buffers, viterbi_sentence,
                                          viterbi_tag)

    rng = np.random.default_rng(order)
    bits = 10
    for _ in range(40):
        n = int(rng.integers(1, 5))
        attrs, ctx, cond_col, cand, cand_n, w = _random_stage(rng, n, bits)
        out = np.empty(n, dtype=np.int32)
        viterbi_tag(attrs, np.array([0, n], dtype=np.int64), ctx, cond_col, cand, cand_n, w,
                    bits, order, out)
        conds = [_condition_of(ctx, i, cond_col, cand.shape[0]) for i in range(n)]
        sizes = [max(int(cand_n[u]), 1) for u in conds]
        best = max(_sequence_score(attrs, ctx, cond_col, cand, cand_n, w, bits, order, seq)
                   for seq in itertools.product(*map(range, sizes)))
        slots = [cand[u, : cand_n[u]].tolist().index(c) if cand_n[u] else 0
                 for u, c in zip(conds, out.tolist())]
        assert all(c == -1 for u, c in zip(conds, out.tolist()) if cand_n[u] == 0)
        found = _sequence_score(attrs, ctx, cond_col, cand, cand_n, w, bits, order, slots)
        assert found == pytest.approx(best, abs=1e-9)
        # the kernel's own score of its best sequence is that maximum too
        buffers = viterbi_buffers(n, cand.shape[1], feature_count(attrs, ctx), order)
        top = viterbi_sentence(attrs, 0, n, ctx, cond_col, cand, cand_n, w,
                               np.uint64((1 << bits) - 1), order, *buffers,
                               np.empty(n, dtype=np.int64))
        assert top == pytest.approx(best, abs=1e-9)


@pytest.mark.parametrize("clusters", [False, True])
def test_static_and_history_features_partition_token_features(clusters):
    from arboreal.features.tokens import (N_HISTORY_FEATURES, feature_count, history_feature,
                                          static_features, token_features)

    rng = np.random.default_rng(0)
    attrs, ctx, *_ = _random_stage(rng, 5, 10, clusters)
    ctx = np.zeros((5, 1), dtype=np.int32)
    full, static = (np.empty(feature_count(attrs, ctx), np.uint64) for _ in range(2))
    for i in range(5):
        nf = token_features(attrs, 0, 5, i, ctx, 3, 7, full)
        ns = static_features(attrs, 0, 5, i, ctx, static)
        history = [history_feature(h, attrs, 0, 5, i, 3, 7) for h in range(N_HISTORY_FEATURES)]
        assert ns + N_HISTORY_FEATURES == nf
        assert sorted(full[:nf].tolist()) == sorted(static[:ns].tolist() + history)


@pytest.mark.parametrize("order", [1, 2])
def test_structured_update_adds_gold_minus_predicted_features(order):
    """The update is Phi(gold) - Phi(predicted) (and c times it in the averaging sums),
    the tokens whose gold class is not a candidate skipped."""
    from arboreal.features.tokens import (MAX_CANDIDATES, N_BASE_FEATURES, feature_offset,
                                          token_features)
    from arboreal.learn.tagging import structured_update

    bits = 8
    mask = np.uint64((1 << bits) - 1)
    rng = np.random.default_rng(5)
    n = 5
    attrs = rng.integers(0, 2 ** 63, size=(n, 12)).astype(np.uint64)
    ctx = np.zeros((n, 0), dtype=np.int32)
    cand = np.array([[4, 2, 9]], dtype=np.int32)
    cand_n = np.array([3], dtype=np.int32)
    feats = np.empty(N_BASE_FEATURES, dtype=np.uint64)

    def phi(classes, skip=()):
        out = np.zeros((1 << bits) + MAX_CANDIDATES)
        p1 = p2 = -1
        for i, c in enumerate(classes):
            if i not in skip:
                nf = token_features(attrs, 0, n, i, ctx, p1, p2, feats)
                for t in range(nf):
                    if not (order == 1 and t == 25):
                        out[feature_offset(feats[t], 0, mask) + [4, 2, 9].index(c)] += 1
            p2, p1 = p1, c
        return out

    cases = [([4, 2, 9, 9, 4], [4, 2, 9, 9, 4], ()),     # right: nothing moves
             ([4, 2, 9, 9, 4], [4, 9, 9, 9, 4], ()),     # one class wrong: it and the
             ([2, 2, 4, 9, 9], [4, 9, 2, 9, 4], ()),     # histories after it differ
             ([4, 7, 9, 2, 4], [4, 2, 2, 2, 4], (1,))]   # gold 7 is no candidate
    for gold, pred, skip in cases:
        gold = np.array(gold, dtype=np.int32)
        gold_slot = np.array([[4, 2, 9].index(g) if g in (4, 2, 9) else -1 for g in gold],
                             dtype=np.int32)
        slots = np.array([[4, 2, 9].index(p) for p in pred], dtype=np.int64)
        w = np.zeros((1 << bits) + MAX_CANDIDATES, dtype=np.float32)
        u = np.zeros_like(w, dtype=np.float64)
        errors = structured_update(attrs, 0, n, ctx, -1, cand, cand_n, gold, gold_slot, slots,
                                   w, u, 3.0, mask, order, feats)
        expected = phi(gold.tolist(), skip) - phi(pred, skip)
        assert errors == int((gold != np.array(pred)).sum())
        assert np.array_equal(w, expected.astype(np.float32))
        assert np.array_equal(u, 3.0 * expected)


def test_structured_training_learns_what_greedy_cannot():
    """Every word's class is set by the sentence's last word, beyond the features' window
    for the first words: greedy guesses them, Viterbi carries the last word's evidence
    back through the class transitions."""
    from arboreal.features.tokens import N_ATTRS, greedy_tag, viterbi_tag
    from arboreal.learn.tagging import train_stage

    rng = np.random.default_rng(0)
    rows = rng.integers(0, 2 ** 63, size=(3, N_ATTRS)).astype(np.uint64)   # a, X, Y

    def corpus(k):
        last = rng.integers(1, 3, size=k)
        words = np.concatenate([[0] * 5 + [x] for x in last])
        return (rows[words], np.arange(0, 6 * k + 1, 6, dtype=np.int64),
                np.repeat(last - 1, 6).astype(np.int32))

    attrs, starts, gold = corpus(200)
    test_attrs, test_starts, test_gold = corpus(100)
    ctx = np.zeros((len(gold), 0), dtype=np.int32)
    cand, cand_n = np.array([[0, 1]], dtype=np.int32), np.array([2], dtype=np.int32)
    acc = {}
    for order, tag in ((0, greedy_tag), (1, viterbi_tag)):
        w = train_stage(attrs, starts, ctx, -1, cand, cand_n, gold, 12, 5, order=order)
        out = np.empty(len(test_gold), dtype=np.int32)
        args = (order,) if order else ()
        tag(test_attrs, test_starts, np.zeros((len(test_gold), 0), dtype=np.int32), -1, cand,
            cand_n, w, 12, *args, out)
        acc[order] = float((out == test_gold).mean())
    assert acc[1] == 1.0 and acc[0] < 0.9


def test_train_stage_rejects_an_unknown_order():
    from arboreal.learn.tagging import train_stage

    with pytest.raises(ValueError, match="order"):
        train_stage(np.zeros((1, 12), np.uint64), np.array([0, 1]), np.zeros((1, 0), np.int32),
                    -1, np.array([[0]], np.int32), np.array([1], np.int32),
                    np.array([0], np.int32), 8, 1, order=3)


# ---------------------------------------------------------------- the decoding choice
def _save_and_load(tagger, path):
    from arboreal.io.model_file import MetaFields, load_model_file, save_model_file

    meta, arrays = {}, {}
    tagger.put(meta, arrays)
    save_model_file(path, meta, arrays)
    meta, arrays = load_model_file(path)
    return meta, Tagger.from_file_contents(MetaFields(str(path), meta), arrays)


@pytest.mark.parametrize("decoding", ["greedy", "viterbi", "viterbi2"])
def test_model_file_keeps_each_decoding(sample, tmp_path, decoding):
    train, test = sample
    t = Tagger.train(train[:150], epochs=2, bits=16, decoding=decoding)
    assert {stage.decoding for stage in t.stages.values()} == {decoding}
    meta, again = _save_and_load(t, tmp_path / "t.model")
    assert [s["decoding"] for s in meta["tagger"]["stages"]] == [decoding] * 4
    assert {stage.decoding for stage in again.stages.values()} == {decoding}
    a, b = t.tag(blank(test[:30])), again.tag(blank(test[:30]))
    for x, y in zip(a, b):
        for c in TAGS:
            assert (getattr(x, c) == getattr(y, c)).all()


def test_model_file_decoding_is_validated(sample, tmp_path):
    from arboreal.errors import ModelError
    from arboreal.io.model_file import MetaFields, load_model_file, save_model_file

    t = Tagger.train(sample[0][:60], epochs=1, bits=12, decoding="viterbi")
    meta, arrays = {}, {}
    t.put(meta, arrays)
    meta["tagger"]["stages"][0]["decoding"] = "beam"
    save_model_file(tmp_path / "bad.model", meta, arrays)
    meta2, arrays2 = load_model_file(tmp_path / "bad.model")
    with pytest.raises(ModelError, match=r"stages\[0\]\.decoding"):
        Tagger.from_file_contents(MetaFields("bad.model", meta2), arrays2)
    # files written before the field existed were greedy
    for spec in meta["tagger"]["stages"]:
        del spec["decoding"]
    save_model_file(tmp_path / "old.model", meta, arrays)
    meta3, arrays3 = load_model_file(tmp_path / "old.model")
    old = Tagger.from_file_contents(MetaFields("old.model", meta3), arrays3)
    assert {stage.decoding for stage in old.stages.values()} == {"greedy"}


@pytest.mark.parametrize("min_z,expected", [(float("-inf"), "viterbi"), (float("inf"), "greedy")])
def test_choice_on_dev_is_recorded(sample, tmp_path, monkeypatch, min_z, expected):
    """With dev, each stage is trained with each of its AUTO_DECODINGS and the choice
    (here forced by the threshold) is the stage's decoding, in the model file too."""
    import arboreal.models.tagger as tagger_module

    monkeypatch.setattr(tagger_module, "DECODING_MIN_Z", min_z)
    train, dev = sample[0][:150], sample[0][150:230]
    t = Tagger.train(train, dev, epochs=2, bits=16)
    for name, stage in t.stages.items():
        tried = t.meta["stages"][name]["decodings_tried"]
        assert list(tried) == list(tagger_module.AUTO_DECODINGS[name])
        assert tried[stage.decoding]["dev_accuracy"] == stage.dev_accuracy
        assert stage.decoding == (expected if "viterbi" in tried else "greedy")
    assert t.stages["lemma"].decoding == "greedy"        # Viterbi is not tried for lemmas
    meta, again = _save_and_load(t, tmp_path / "t.model")
    assert ({s["name"]: s["decoding"] for s in meta["tagger"]["stages"]}
            == {n: stage.decoding for n, stage in t.stages.items()})
    assert meta["tagger"]["training"]["stages"]["upos"]["decoding"] == t.stages["upos"].decoding
    assert again.stages["upos"].decoding == t.stages["upos"].decoding


def test_choice_without_dev_and_forced(sample):
    import arboreal.models.tagger as tagger_module

    t = Tagger.train(sample[0][:60], epochs=1, bits=12)
    assert {n: stage.decoding for n, stage in t.stages.items()} == tagger_module.DEFAULT_DECODING
    t = Tagger.train(sample[0][:60], epochs=1, bits=12, decoding={"upos": "viterbi"})
    assert t.stages["upos"].decoding == "viterbi" and t.stages["xpos"].decoding == "greedy"
    with pytest.raises(ValueError, match="beam"):
        Tagger.train(sample[0][:60], epochs=1, decoding={"upos": "beam"})


def test_gain_statistic():
    from arboreal.models.tagger import _gain_z

    gold = np.zeros(100, dtype=np.int32)
    ref = np.zeros(100, dtype=np.int32)
    ref[:10] = 1                                  # ref wrong on 10
    pred = np.zeros(100, dtype=np.int32)
    pred[8:10] = 1                                # pred wrong on 2 of those
    assert _gain_z(pred, ref, gold) == pytest.approx(8 / np.sqrt(8))
    assert _gain_z(ref, pred, gold) == pytest.approx(-8 / np.sqrt(8))
    assert _gain_z(ref, ref, gold) == 0.0


def _random_words(rng, k: int) -> list[str]:
    """k distinct lower-case strings without shared suffixes or shapes to learn from."""
    letters = np.array(list("bcdfghjklmnpqrstvwxz"))
    words: set[str] = set()
    while len(words) < k:
        words.add("".join(rng.choice(letters, 6)))
    return sorted(words)


def test_clusters_tag_words_unseen_in_training(tmp_path):
    """Words absent from the training data but in the clustering are tagged by their
    cluster: random nouns and verbs in random order, the test words all new. Without
    clusters the tagger can only guess; with them it tags the new words right, and the
    model file keeps the clusters (once, shared with the parser's)."""
    from arboreal.features.clusters import Clusters
    from arboreal.io.sentence import Sentence
    from arboreal.models import load_model
    from arboreal.models.parser import Parser

    rng = np.random.default_rng(0)
    nouns, verbs = _random_words(rng, 80), _random_words(rng, 80)
    seen_n, new_n, seen_v, new_v = nouns[:40], nouns[40:], verbs[:40], verbs[40:]
    clusters = Clusters(nouns + verbs, ["0110" + format(i % 4, "02b") for i in range(80)]
                        + ["1001" + format(i % 4, "02b") for i in range(80)])

    def sentences(nn, vv, count):
        out = []
        for _ in range(count):
            words = [(str(rng.choice(nn)), "NOUN") if rng.random() < 0.5
                     else (str(rng.choice(vv)), "VERB") for _ in range(5)]
            s = Sentence.from_columns([w for w, _ in words], upos=[t for _, t in words],
                                      heads=[0] + [1] * 4, deprels=["root"] + ["dep"] * 4)
            out.append(s)
        return out

    train, test = sentences(seen_n, seen_v, 300), sentences(new_n, new_v, 60)
    plain = Tagger.train(train, epochs=3)
    with_clusters = Tagger.train(train, epochs=3, clusters=clusters)
    assert accuracy(test, plain.tag(blank(test, ("upos",))), "upos") < 75.0
    assert accuracy(test, with_clusters.tag(blank(test, ("upos",))), "upos") == 100.0

    parser = Parser.train(train, epochs=1, clusters=clusters)
    parser.tagger = with_clusters
    path = tmp_path / "m.model"
    parser.save(path)
    loaded = load_model(path)
    assert loaded.tagger.clusters.words == clusters.words
    # stored once, read once: the tagger uses the parser's clustering object
    assert loaded.tagger.clusters is loaded.features.clusters
    again = loaded.tagger.tag(blank(test, ("upos",)))
    assert accuracy(test, again, "upos") == 100.0
    with np.load(path) as f:
        assert not any(k.startswith("tagger_clusters") for k in f.files)


def test_tagger_options_without_the_tagger_are_refused(files, capsys):
    for option in (["--parser-tags", "predicted"], ["--jackknife", "3"]):
        assert main(["train", str(files / "train.conllu"), "-o", str(files / "never.model"),
                     "--no-tagger", *option]) == 2
        assert "need the tagger (no --no-tagger)" in capsys.readouterr().err
        assert not (files / "never.model").exists()
