"""The neural scorer: its tree loss inside torch, a tiny pipeline on the sample, model
files, and the one-line error where torch is missing."""
from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from arboreal.inference.structure import (pad_batch, pad_heads, projective_or_not,  # noqa: E402
                                          tree_structure)
from arboreal.io.conllu import read_conllu  # noqa: E402
from arboreal.learn.tree_loss import tree_loss  # noqa: E402
from brute_force import all_trees  # noqa: E402

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample"
MODES = list(itertools.product([True, False], [True, False]))   # (projective, single_root)
#: a network small enough for the test suite
TINY = dict(lstm_dim=64, lstm_layers=1, arc_dim=64, label_dim=32, char_dim=32,
            char_embedding_dim=16, word_dim=50, tag_hidden=32, batch_words=250, epochs=8)


def _batch(rng, projective, single_root, sizes=(3, 5, 4)):
    mats, golds = [], []
    for n in sizes:
        mats.append(rng.normal(scale=2.0, size=(n + 1, n + 1)))
        trees = all_trees(n, projective, single_root)
        golds.append(trees[rng.integers(len(trees))])
    batch, lengths = pad_batch(mats)
    return batch, pad_heads(golds), lengths


@pytest.mark.parametrize("projective,single_root", MODES)
def test_tree_loss_gradient_is_marginals_minus_gold(projective, single_root):
    rng = np.random.default_rng(0)
    st = projective_or_not(projective, single_root)
    batch, heads, lengths = _batch(rng, projective, single_root)
    scores = torch.tensor(batch, requires_grad=True)
    loss = tree_loss(scores, heads, lengths, st, "crf")
    loss.backward()
    expected = st.marginals(batch, lengths) - st.indicators(heads, batch.shape[1])
    assert np.allclose(scores.grad.numpy(), expected, atol=1e-9)
    assert loss.item() == pytest.approx(float(np.sum(st.log_partition(batch, lengths)
                                                     - st.tree_scores(batch, heads))))


@pytest.mark.parametrize("projective,single_root", MODES)
@pytest.mark.parametrize("objective", ["crf", "head-selection"])
def test_tree_loss_matches_finite_differences(projective, single_root, objective):
    rng = np.random.default_rng(1)
    st = projective_or_not(projective, single_root)
    batch, heads, lengths = _batch(rng, projective, single_root, sizes=(3, 4))
    scores = torch.tensor(batch, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda s: tree_loss(s, heads, lengths, st, objective), (scores,), eps=1e-6, atol=1e-5)


def test_tree_loss_backpropagates_into_a_network():
    """The loss's gradient reaches parameters that produce the scores (chain rule)."""
    torch.manual_seed(0)
    st = projective_or_not(False, True)
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    w = torch.randn(8, 8, dtype=torch.float64, requires_grad=True)
    heads = np.array([[-1, 2, 0, 2, 3], [-1, 0, 1, -1, -1]])
    lengths = np.array([4, 2])

    def loss_of(w):
        return tree_loss(torch.einsum("bhi,ij,bmj->bhm", x, w, x), heads, lengths, st)

    assert torch.autograd.gradcheck(loss_of, (w,), eps=1e-6, atol=1e-5)


def _adjacent_baseline(sentences) -> float:
    """UAS of the better of 'every word headed by its left neighbour' and 'by its right
    neighbour' (the last word by the root)."""
    left = np.concatenate([np.arange(0, len(s)) == s.heads[1:] for s in sentences])
    right = np.concatenate([np.r_[np.arange(2, len(s) + 1), 0] == s.heads[1:]
                            for s in sentences])
    return 100.0 * max(left.mean(), right.mean())


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from arboreal.models import Parser

    train = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")
    model = Parser.train(train, None, scorer="neural", scorer_options=TINY, seed=0)
    path = tmp_path_factory.mktemp("neural") / "tiny.model"
    model.save(path)
    return model, path


def test_tiny_pipeline_beats_a_trivial_baseline(tiny_model):
    model, _ = tiny_model
    test = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")
    heads = model.predict_heads(test)
    uas = 100.0 * np.mean(np.concatenate([h[1:] == s.heads[1:] for h, s in zip(heads, test)]))
    assert uas > _adjacent_baseline(test) + 5.0
    assert model.scorer.kind == "neural"
    assert set(model.scorer.tag_columns) == {"upos", "xpos", "feats", "lemmas"}


def blanked(sentences, column: str) -> list:
    """Copies of ``sentences`` with ``column`` (an attribute: feats, lemmas) all ``_``."""
    copies = [s.with_tree(s.heads) for s in sentences]
    for s in copies:
        values = getattr(s, column).copy()
        values[1:] = "_"
        setattr(s, column, values)
    return copies


def test_feats_underscore_is_a_class_the_tagger_predicts(tiny_model):
    """FEATS ``_`` (a word without features: punctuation, most adpositions) is a class of
    an annotated column, not "unannotated": the tagger learns and predicts it."""
    from arboreal.neural.vocab import Vocabularies

    model, _ = tiny_model
    train = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")
    vocabs = Vocabularies.build(train)
    assert "_" in vocabs.tags["feats"].index
    assert "_" not in vocabs.tags["lemmas"].index
    test = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")
    blank = blanked(test, "feats")
    out = model.parse(blank)
    gold = np.concatenate([s.feats[1:] for s in test])
    pred = np.concatenate([s.feats[1:] for s in out])
    bare = gold == "_"
    assert bare.mean() > 0.2
    # before the fix no word got "_"; the tiny tagger now gets most bare words right
    assert (pred[bare] == "_").mean() > 0.5
    assert (pred[~bare] != "_").mean() > 0.5


def test_lemmas_of_training_words_are_looked_up_before_the_rule(tiny_model):
    """A word seen in training takes its training lemma (by form, UPOS and FEATS), as
    the linear tagger's do; the network's lemma rule serves the other words. The lookup
    travels in the model file."""
    import arboreal
    from arboreal.features.lemmas import apply_rule

    model, path = tiny_model
    loaded = arboreal.load(path)
    assert loaded.scorer.lemma_lookup == model.scorer.lemma_lookup
    assert len(model.scorer.lemma_lookup) > 1000
    train = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")[:300]
    blank = blanked(train, "lemmas")
    out = loaded.parse(blank)
    gold = np.concatenate([s.lemmas[1:] for s in train])
    looked_up = np.concatenate([s.lemmas[1:] for s in out])
    encoded = loaded.scorer.encode(blank)
    rules = loaded.scorer.predict_tags(encoded, np.arange(len(blank)))["lemmas"]
    by_rule = np.array([apply_rule(f, r) for s, rs in zip(blank, rules)
                        for f, r in zip(s.forms[1:].tolist(), rs.tolist())], dtype=object)
    assert (looked_up == gold).mean() > 0.99
    assert (by_rule == gold).mean() < (looked_up == gold).mean()


def test_save_and_load_give_identical_parses_and_tags(tiny_model):
    import arboreal

    model, path = tiny_model
    loaded = arboreal.load(path)
    test = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")[:60]
    untagged = [s.with_tree(s.heads) for s in test]
    for s in untagged:
        for col in ("upos", "xpos", "feats", "lemmas"):
            v = getattr(s, col).copy()
            v[1:] = "_"
            setattr(s, col, v)
    a, b = model.parse(untagged), loaded.parse(untagged)
    for x, y in zip(a, b):
        assert np.array_equal(x.heads, y.heads)
        for col in ("deprels", "upos", "xpos", "feats", "lemmas"):
            assert getattr(x, col).tolist() == getattr(y, col).tolist()
    # the tags were predicted, not left empty
    assert all(v != "_" for s in a for v in s.upos[1:].tolist())
    # marginals, k-best and MBR work on a neural model as on any first-order model
    P = loaded.arc_marginals(test[:3])
    assert np.allclose(P[0][:, 1:].sum(axis=0), 1.0)
    kb = loaded.parse_kbest(test[:2], 3)
    assert len(kb[0]) == 3
    mbr = loaded.parse(test[:2], decode="mbr", probabilities=True)
    assert "HeadProb=" in mbr[0].misc[1]


def test_bfloat16_parsing_stays_close_to_float32(tiny_model):
    """The bfloat16 encoder (low_precision_copy) scores as the float32 network up to
    bfloat16 rounding, and parses, labels and tags almost every word the same; the
    network itself stays float32 (it is what a saved model holds)."""
    import arboreal

    _, path = tiny_model
    loaded = arboreal.load(path)
    scorer = loaded.scorer
    test = blanked(blanked(read_conllu(SAMPLE / "en_ewt-sample-test.conllu")[:80], "upos"),
                   "lemmas")
    corpus = scorer.encode(test)
    rows = np.arange(len(test))
    results = {}
    for precision in ("float32", "bfloat16"):
        scorer.precision = precision
        parsed = loaded.parse(test)
        results[precision] = (scorer.arc_scores(corpus, rows),
                              np.concatenate([s.heads[1:] for s in parsed]),
                              np.concatenate([s.deprels[1:] for s in parsed]),
                              np.concatenate([s.upos[1:] for s in parsed]))
    (s32, h32, d32, u32), (s16, h16, d16, u16) = results["float32"], results["bfloat16"]
    finite = np.isfinite(s32)
    assert np.array_equal(finite, np.isfinite(s16)) and s16.dtype == np.float64
    spread = s32[finite].std()
    assert np.abs(s16[finite] - s32[finite]).max() < 0.1 * spread
    assert not np.array_equal(s16, s32)             # the copy did run in bfloat16
    for a, b in ((h32, h16), (d32, d16), (u32, u16)):
        assert np.mean(a == b) > 0.97
    assert all(p.dtype == torch.float32 for p in scorer.network.parameters())
    with pytest.raises(ValueError, match="precision"):
        scorer.precision = "float16"


def test_parsing_precision_follows_the_cpu_unless_arboreal_precision_says(monkeypatch,
                                                                          tiny_model):
    import arboreal
    import arboreal.neural.scorer as neural_scorer
    from arboreal.errors import ArborealError

    monkeypatch.delenv("ARBOREAL_PRECISION", raising=False)
    for native, expected in ((True, "bfloat16"), (False, "float32")):
        monkeypatch.setattr(neural_scorer, "native_bfloat16", lambda: native)
        assert neural_scorer.default_precision() == expected
        assert arboreal.load(tiny_model[1]).scorer.precision == expected
    for value, expected in (("float32", "float32"), (" BFloat16 ", "bfloat16")):
        monkeypatch.setenv("ARBOREAL_PRECISION", value)
        assert neural_scorer.default_precision() == expected
    monkeypatch.setenv("ARBOREAL_PRECISION", "half")
    with pytest.raises(ArborealError, match="ARBOREAL_PRECISION='half'"):
        neural_scorer.default_precision()


def test_network_parameters_are_stored_uncompressed(tiny_model):
    """Deflating float32 parameters saves little and slows every load."""
    import zipfile

    with zipfile.ZipFile(tiny_model[1]) as archive:
        kinds = {i.filename: i.compress_type for i in archive.infolist()}
    parameters = [name for name in kinds if name.startswith("nn_")]
    assert parameters and all(kinds[n] == zipfile.ZIP_STORED for n in parameters)
    assert kinds["__meta__.npy"] == zipfile.ZIP_DEFLATED


def test_a_neural_model_without_torch_is_a_one_line_error(tiny_model, tmp_path):
    _, path = tiny_model
    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text("import sys\nsys.modules['torch'] = None\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(block), os.environ.get(
        "PYTHONPATH", "")])}
    text = tmp_path / "in.txt"
    text.write_text("The dog barks.\n")
    proc = subprocess.run([sys.executable, "-m", "arboreal", "parse", str(path), str(text),
                           "--input", "text"], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "arboreal[neural]" in lines[0], proc.stderr
    code = textwrap.dedent(f"""
        import arboreal
        try:
            arboreal.load({str(path)!r})
        except arboreal.ArborealError as exc:
            print("ERR", exc)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.stdout.startswith("ERR") and "arboreal[neural]" in proc.stdout


def test_import_arboreal_and_linear_parsing_never_import_torch(tmp_path):
    code = textwrap.dedent("""
        import sys
        import arboreal, arboreal.models.parser, arboreal.cli, arboreal.scorers
        import arboreal.learn.trainer, arboreal.learn.objectives
        print("torch" in sys.modules)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.stdout.strip() == "False", proc.stderr


def test_neural_options_are_checked():
    from arboreal.errors import ArborealError
    from arboreal.models.neural import neural_options

    assert neural_options({"lstm_dim": 10, "epochs": 3})[0] == {"lstm_dim": 10}
    with pytest.raises(ArborealError, match="unknown neural scorer option 'lstm_size'"):
        neural_options({"lstm_size": 10})
    with pytest.raises(ArborealError, match="dropout"):
        neural_options({"dropout": 1.5})
    with pytest.raises(ArborealError, match="whole number"):
        neural_options({"lstm_layers": 1.5})
    with pytest.raises(ArborealError, match="average must lie in"):
        neural_options({"average": 1.0})


def test_a_small_treebank_trains_in_smaller_batches():
    """batch_words 0 (the default) picks 800 words a batch, or fewer for a small treebank
    so that an epoch makes at least 250 updates, never fewer than 200 words."""
    from arboreal.learn.neural import train_token_budget
    from arboreal.models.neural import neural_options

    assert neural_options({})[1]["batch_words"] == 0
    assert train_token_budget(204_577) == 800        # English-EWT: unchanged
    assert train_token_budget(100_000) == 400
    assert train_token_budget(37_522) == 200         # Turkish-IMST
    assert train_token_budget(500) == 200


def test_threads_follow_omp_num_threads_when_it_is_set(monkeypatch):
    """A user who sets OMP_NUM_THREADS (sharing the machine) gets that many threads;
    unset or not a positive number, the cores the process may use."""
    import os

    import torch

    from arboreal.neural.scorer import configure_threads, default_threads

    cores = len(os.sched_getaffinity(0))
    for value in ("", "0", "two"):
        monkeypatch.setenv("OMP_NUM_THREADS", value)
        assert default_threads() == cores
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert default_threads() == cores
    before = torch.get_num_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    try:
        configure_threads()
        assert torch.get_num_threads() == 3
        configure_threads(2)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_bilstm_states_do_not_depend_on_padding():
    """Each sentence's states in a padded batch equal those of the sentence alone."""
    from arboreal.neural.network import BiLSTM

    torch.manual_seed(0)
    lstm = BiLSTM(6, 5, 2, dropout=0.0).eval()
    lengths = torch.tensor([4, 7, 1])
    x = torch.randn(3, 7, 6)
    with torch.no_grad():
        batched = lstm(x, lengths)
        for b, n in enumerate(lengths.tolist()):
            alone = lstm(x[b:b + 1, :n], lengths[b:b + 1])
            assert torch.allclose(batched[b, :n], alone[0], atol=1e-6)


def test_a_small_treebank_gets_a_smaller_bilstm_unless_its_sizes_are_given():
    from arboreal.models import Parser
    from arboreal.models.neural import (SMALL_TREEBANK_SIZES, SMALL_TREEBANK_WORDS,
                                        network_sizes_for)
    from arboreal.neural.network import NetworkConfig

    assert network_sizes_for(204_577) == {}                       # English-EWT
    assert network_sizes_for(SMALL_TREEBANK_WORDS) == {}
    assert network_sizes_for(SMALL_TREEBANK_WORDS - 1) == SMALL_TREEBANK_SIZES
    default = NetworkConfig()
    assert (SMALL_TREEBANK_SIZES["lstm_dim"], SMALL_TREEBANK_SIZES["lstm_layers"]) < \
        (default.lstm_dim, default.lstm_layers)
    train = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")[:30]
    sizes = {k: v for k, v in TINY.items() if k not in ("lstm_dim", "lstm_layers")}
    small = Parser.train(train, None, scorer="neural", scorer_options=dict(sizes, epochs=1))
    assert small.scorer.config.lstm_dim == SMALL_TREEBANK_SIZES["lstm_dim"]
    assert small.scorer.config.lstm_layers == SMALL_TREEBANK_SIZES["lstm_layers"]
    given = Parser.train(train, None, scorer="neural",
                         scorer_options=dict(sizes, epochs=1, lstm_dim=24, lstm_layers=1))
    assert (given.scorer.config.lstm_dim, given.scorer.config.lstm_layers) == (24, 1)


def test_a_seed_makes_training_repeatable():
    from arboreal.models import Parser

    train = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")[:80]
    opts = dict(TINY, epochs=2)
    a = Parser.train(train, None, scorer="neural", scorer_options=opts, seed=3)
    b = Parser.train(train, None, scorer="neural", scorer_options=opts, seed=3)
    c = Parser.train(train, None, scorer="neural", scorer_options=opts, seed=4)
    sa, sb, sc = (m.scorer.network.state_dict() for m in (a, b, c))
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)


def _tiny_learner(average: float):
    from arboreal.learn.neural import GradientLearner
    from arboreal.models.neural import neural_options
    from arboreal.neural.network import NetworkConfig
    from arboreal.neural.scorer import NeuralScorer
    from arboreal.neural.vocab import Vocabularies

    train = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")[:40]
    net, _ = neural_options(TINY)
    torch.manual_seed(0)
    scorer = NeuralScorer(NetworkConfig(**net), Vocabularies.build(train), None, None)
    corpus = scorer.encode(train, with_gold=True)
    return GradientLearner(scorer, corpus, tree_structure("cle", True),
                           token_budget=250, epochs=2, average=average)


def test_the_kept_parameters_are_the_moving_average_of_the_steps():
    """After step t the average is a = k a + (1 - k) p with k = min(average, t / (t + 9)):
    checked over two steps of known parameters; the snapshot is the average, and scoring
    a snapshot leaves the live parameters as they were."""
    learner = _tiny_learner(0.9)
    network = learner.scorer.network
    start = {k: v.detach().clone() for k, v in network.named_parameters()}
    expected = dict(start)
    for step, shift in ((1, 1.0), (2, 3.0)):
        with torch.no_grad():
            for k, p in network.named_parameters():
                p.copy_(start[k] + shift)
        learner.optimizer.step()      # no gradients: a step that moves nothing
        learner.schedule.step()       # counts the step, as run_epoch does
        learner._update_average()
        keep = min(0.9, step / (step + 9))
        expected = {k: keep * expected[k] + (1 - keep) * (start[k] + shift) for k in start}
    snapshot = learner.snapshot()
    for k in start:
        assert torch.allclose(snapshot[k], expected[k], atol=1e-6)
        assert not torch.allclose(snapshot[k], start[k] + 3.0)
    live = {k: v.detach().clone() for k, v in network.state_dict().items()}
    with learner.parameters_of(snapshot):
        assert all(torch.equal(network.state_dict()[k], snapshot[k]) for k in snapshot)
    assert all(torch.equal(network.state_dict()[k], live[k]) for k in live)


def test_without_averaging_the_snapshot_is_the_live_network():
    learner = _tiny_learner(0.0)
    learner.run_epoch(np.arange(learner.size), 1)
    snapshot = learner.snapshot()
    live = learner.scorer.network.state_dict()
    assert learner.averaged is None
    assert all(torch.equal(snapshot[k], live[k]) for k in live)


@pytest.mark.parametrize("average", [0.0, 0.9])
def test_the_kept_epoch_parses_as_it_scored_on_dev(average):
    """The dev score recorded for the kept epoch is that of the returned parser (with
    averaging, the averaged parameters are what is scored and kept, not the live ones).
    The dev set is one parsing batch, so encoder states cached from an earlier epoch or
    from the live parameters would be reused if a step or a restore left them."""
    from arboreal.models import Parser
    from arboreal.models.neural import dev_scores

    sentences = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")
    train, dev = sentences[:120], sentences[120:160]
    model = Parser.train(train, dev, scorer="neural",
                         scorer_options=dict(TINY, epochs=3, average=average), seed=0)
    model.scorer.precision = "float32"
    best = [r for r in model.meta["history"] if r["epoch"] == model.meta["best_epoch"]][0]
    assert dev_scores(model, dev)["las"] == pytest.approx(best["dev_las"])
    assert dev_scores(model, dev)["upos"] == pytest.approx(best["dev_upos"])


def test_ctrl_c_during_neural_training_saves_the_best_epoch(tmp_path):
    """SIGINT once the first epoch has been reported: the model of the best epoch so far
    is written and the command exits 130, as an interrupted command does."""
    import signal

    out = tmp_path / "m.model"
    opts = [a for k, v in dict(TINY, epochs=500).items() for a in ("--scorer-option",
                                                                    f"{k}={v}")]
    proc = subprocess.Popen([sys.executable, "-m", "arboreal", "train",
                             str(SAMPLE / "en_ewt-sample-train.conllu"), "--dev",
                             str(SAMPLE / "en_ewt-sample-test.conllu"), "-o", str(out),
                             "--scorer", "neural", "--no-tokenizer", *opts],
                            stderr=subprocess.PIPE, text=True,
                            # as from a terminal: a suite started in the background of a
                            # non-interactive shell has SIGINT ignored, which children inherit
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines = []
    try:
        for line in proc.stderr:            # no race: the signal follows the epoch line
            lines.append(line)
            if line.startswith("epoch 1:"):
                proc.send_signal(signal.SIGINT)
                break
        rest = proc.stderr.read()
        assert proc.wait(timeout=300) == 130, "".join(lines) + rest
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "interrupted: saved" in rest
    import arboreal

    model = arboreal.load(out)
    assert model.meta["best_epoch"] >= 1 and model.meta["training"]["stopped"] == "interrupt"


def test_the_server_the_tag_command_and_spacy_serve_a_neural_model(tiny_model, tmp_path):
    """A neural model tags as it parses: the server lists it as a tagger, `arboreal tag`
    fills the tag columns, and the spaCy component sets tags and trees."""
    from arboreal.server import make_app, process

    model, path = tiny_model
    served = make_app({"tiny": model}).models["tiny"]
    assert served.components == ["tagger", "parser"]
    out = process(served, {"data": "The dog barks .", "input": "horizontal", "tagger": "",
                           "parser": ""})
    rows = [line.split("\t") for line in out.splitlines() if line and line[0].isdigit()]
    assert len(rows) == 4 and all(r[3] != "_" and r[6] != "_" for r in rows)
    tagged_only = process(served, {"data": "The dog barks .", "input": "horizontal",
                                   "tagger": ""})
    rows = [line.split("\t") for line in tagged_only.splitlines() if line and line[0].isdigit()]
    assert all(r[3] != "_" and r[6] == "_" for r in rows)
    src = tmp_path / "in.txt"
    src.write_text("The dog barks .\nA cat sleeps .\n")
    proc = subprocess.run([sys.executable, "-m", "arboreal", "tag", str(path), str(src),
                           "--input", "tokenized"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split("\t") for line in proc.stdout.splitlines() if line and line[0].isdigit()]
    assert len(rows) == 8 and all(r[3] != "_" and r[2] != "_" for r in rows)
    spacy = pytest.importorskip("spacy")
    import arboreal.integrations.spacy  # noqa: F401

    nlp = spacy.blank("en")
    nlp.add_pipe("arboreal", config={"model": str(path)})
    doc = nlp("The dog barks loudly.")
    assert all(t.pos_ for t in doc) and sum(t.dep_ == "root" for t in doc) == 1


def test_a_compact_neural_model_stores_float16_parameters_and_parses_alike(tiny_model,
                                                                            tmp_path):
    """``arboreal shrink`` / ``package`` store a neural scorer's parameters as float16
    (half the file; nothing dropped): loaded back as float32 they are the rounded
    originals, and the model parses as the full one but where the rounding decides."""
    import arboreal
    from arboreal.io.model_file import load_model_file
    from arboreal.models.distribute import distribution_model

    model, path = tiny_model
    out = tmp_path / "compact.model"
    card = distribution_model(str(path), out)
    assert card["compact"]["neural_parameters"]["float16"] > 0
    assert card["compact"]["neural_parameters"]["float32"] == 0
    _, full = load_model_file(path)
    _, small = load_model_file(out)
    names = [k for k in full if k.startswith("nn_")]
    for k in names:
        assert small[k].dtype == np.float16
        assert np.array_equal(small[k], full[k].astype(np.float16))
    full.close()
    small.close()
    assert out.stat().st_size < 0.7 * path.stat().st_size
    test = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")[:60]
    a, b = model.parse(test), arboreal.load(out).parse(test)
    same = sum(int((x.heads == y.heads).sum()) for x, y in zip(a, b))
    words = sum(len(x) for x in a)
    assert same >= 0.98 * words


def test_label_scores_of_a_batchs_sentence_come_from_its_states(tiny_model):
    """A sentence of the last scored batch gets its label scores from that batch's
    states (calibration scores dev that way), the same as computed alone."""
    parser, _ = tiny_model
    test = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")[:40]
    scorer = parser.scorer
    scorer.precision = "float32"
    encoded = scorer.encode(test)
    rows = scorer.batches(scorer.lengths(encoded))[0]
    i = int(rows[-1])
    heads = np.asarray(test[i].heads)
    scorer.weights_changed()
    alone = scorer.label_scores(encoded, i, heads)
    scorer.arc_scores(encoded, rows)
    batch_key = scorer._cache[1]
    from_batch = scorer.label_scores(encoded, i, heads)
    assert scorer._cache[1] == batch_key       # no pass of its own
    np.testing.assert_allclose(from_batch, alone, rtol=1e-5, atol=1e-5)
