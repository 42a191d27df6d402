"""Probabilities, k-best trees, minimum-risk decoding, JSON output and --jobs: what a
user of ``arboreal parse`` gets beyond the best tree."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from arboreal.cli import main
from arboreal.inference.partition import marginals as tree_marginals
from arboreal.io.conllu import read_conllu, write_conllu
from arboreal.models import Parser, load_model
from arboreal.models.analysis import score_matrices

from brute_force import all_trees, tree_scores

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"


@pytest.fixture(scope="module")
def sample():
    return (read_conllu(SAMPLE / "en_ewt-sample-train.conllu"),
            read_conllu(SAMPLE / "en_ewt-sample-test.conllu"))


@pytest.fixture(scope="module", params=["eisner", "cle"])
def parser(request, sample):
    train, _ = sample
    return Parser.train(train[:400], train[400:], decoder=request.param, epochs=3,
                        hash_bits=18, learner="perceptron")


def _misc_value(misc: str, key: str) -> float:
    return float(dict(x.split("=", 1) for x in misc.split("|") if "=" in x)[key])


def test_calibration_fitted_on_dev_and_saved(parser, tmp_path):
    cal = parser.meta["calibration"]
    assert cal["data"] == "dev" and cal["sentences"] == 200
    # a perceptron's scores are far from log-probabilities: the fitted temperature is
    # not 1, and it is what the fit says it is (a better likelihood than T = 1)
    assert cal["arc_temperature"] > 2
    path = tmp_path / "m.npz"
    parser.save(path)
    assert load_model(path).meta["calibration"] == cal


def test_uncalibrated_without_dev(sample):
    train, _ = sample
    p = Parser.train(train[:100], epochs=1, hash_bits=16)
    assert p.meta["calibration"] == {"data": None}


def test_head_probabilities_are_the_tree_marginals(parser, sample):
    _, test = sample
    sentences = test[:20]
    M = parser.arc_marginals(sentences)
    mats = score_matrices(parser, parser.features.encode(sentences))
    T = parser.meta["calibration"]["arc_temperature"]
    parsed = parser.parse(sentences, probabilities=True)
    for s, m, (_, summed), p in zip(sentences, M, mats, parsed):
        n = len(s)
        assert m.shape == (n + 1, n + 1)
        np.testing.assert_allclose(m[:, 1:].sum(axis=0), 1.0, atol=1e-9)
        assert not m[:, 0].any()
        np.testing.assert_allclose(m, tree_marginals(summed / T, parser.decoder == "eisner"),
                                   atol=1e-12)
        for k in range(1, n + 1):
            assert _misc_value(p.misc[k], "HeadProb") == pytest.approx(m[p.heads[k], k],
                                                                      abs=6e-5)
            assert 0 < _misc_value(p.misc[k], "LabelProb") <= 1
        # probabilities do not change the tree
    plain = parser.parse(sentences)
    assert all((a.heads == b.heads).all() and (a.deprels == b.deprels).all()
               for a, b in zip(plain, parsed))


def test_probabilities_keep_other_misc_items(parser, sample):
    _, test = sample
    s = next(s for s in test if any("SpaceAfter=No" in m for m in s.misc[1:].tolist()))
    p = parser.parse([s], probabilities=True)[0]
    for before, after in zip(s.misc[1:].tolist(), p.misc[1:].tolist()):
        kept = [x for x in after.split("|") if not x.startswith(("HeadProb", "LabelProb"))]
        assert kept == ([] if before == "_" else before.split("|"))


def test_kbest_trees_are_exact_distinct_and_ordered(parser, sample):
    _, test = sample
    short = [s for s in test if 3 <= len(s) <= 6][:6]
    results = parser.parse_kbest(short, 5)
    mats = score_matrices(parser, parser.features.encode(short))
    projective = parser.decoder == "eisner"
    for s, trees, (dec, _) in zip(short, results, mats):
        scores = np.array([float(next(c for c in t.comments if c.startswith("# tree_score"))
                                 .split("=")[1]) for t in trees])
        everything = np.sort(tree_scores(dec, all_trees(len(s), projective, True)))[::-1]
        np.testing.assert_allclose(scores, everything[:len(trees)], rtol=1e-5)
        assert len({tuple(t.heads) for t in trees}) == len(trees) == min(5, len(everything))
        assert (trees[0].heads == parser.parse([s])[0].heads).all()
        assert [c for c in trees[0].comments if c.startswith("# sent_id")] == \
            [c for c in s.comments if c.startswith("# sent_id")]
        assert trees[1].sent_id == f"{s.sent_id}-kbest2"


def test_mbr_tree_maximises_the_sum_of_marginals(parser, sample):
    _, test = sample
    short = [s for s in test if 3 <= len(s) <= 6][:6]
    projective = parser.decoder == "eisner"
    for s, m, p in zip(short, parser.arc_marginals(short), parser.parse(short, decode="mbr")):
        best = tree_scores(m, all_trees(len(s), projective, True)).max()
        assert m[p.heads[1:], np.arange(1, len(s) + 1)].sum() == pytest.approx(best)


# ---------------------------------------------------------------- the command line
@pytest.fixture(scope="module")
def model_file(tmp_path_factory, sample):
    train, test = sample
    d = tmp_path_factory.mktemp("analysis")
    write_conllu(train[:300], d / "train.conllu")
    write_conllu(train[300:400], d / "dev.conllu")
    write_conllu(test, d / "test.conllu")
    (d / "tokens.txt").write_text("\n".join(" ".join(s.forms[1:]) for s in test) + "\n",
                                  encoding="utf-8")
    rc = main(["train", str(d / "train.conllu"), "--dev", str(d / "dev.conllu"), "-o",
               str(d / "m.model"), "--epochs", "2", "--hash-bits", "18", "--quiet"])
    assert rc == 0
    return d


@pytest.mark.parametrize("input_format", ["conllu", "tokenized", "text"])
@pytest.mark.parametrize("output_format", ["conllu", "json"])
def test_jobs_give_the_same_output(model_file, input_format, output_format, monkeypatch):
    # small blocks, so that a 200-sentence file makes many blocks over two workers
    monkeypatch.setattr("arboreal.models.stream.BLOCK_BYTES", 2048)
    d = model_file
    source = {"conllu": d / "test.conllu", "tokenized": d / "tokens.txt",
              "text": SAMPLE / "en_ewt-sample-test.txt"}[input_format]
    outs = []
    for jobs in ("1", "2"):
        out = d / f"out{jobs}.{input_format}.{output_format}"
        assert main(["parse", str(d / "m.model"), str(source), "--input", input_format,
                     "--output-format", output_format, "--jobs", jobs, "-o", str(out),
                     "--quiet"]) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    if output_format == "json":
        records = json.loads(outs[0])
        assert [r["sent_id"] for r in records] == [str(i) for i in range(1, len(records) + 1)] \
            or input_format == "conllu"
        assert all(w["head"] is not None for r in records for w in r["words"])
    else:
        parsed = read_conllu(d / f"out1.{input_format}.conllu")
        if input_format != "conllu":   # sentences numbered through the blocks
            assert [s.sent_id for s in parsed] == [str(i) for i in range(1, len(parsed) + 1)]


def test_json_and_displacy_records(model_file):
    d = model_file
    out = d / "m.json"
    assert main(["parse", str(d / "m.model"), str(d / "test.conllu"), "--marginals",
                 "--output-format", "json", "-o", str(out), "--quiet"]) == 0
    records = json.loads(out.read_text(encoding="utf-8"))
    gold = read_conllu(d / "test.conllu")
    assert len(records) == len(gold)
    for r, g in zip(records, gold):
        assert r["sent_id"] == g.sent_id
        assert [w["form"] for w in r["words"]] == g.forms[1:].tolist()
        assert all(0 < w["head_prob"] <= 1 and 0 < w["label_prob"] <= 1 for w in r["words"])
    out = d / "m.displacy"
    assert main(["parse", str(d / "m.model"), str(d / "test.conllu"),
                 "--output-format", "displacy", "-o", str(out), "--quiet"]) == 0
    for r, g in zip(json.loads(out.read_text(encoding="utf-8")), gold):
        n = len(g)
        assert len(r["words"]) == n and len(r["arcs"]) == n - 1   # the root arc left out
        for a in r["arcs"]:
            assert 0 <= a["start"] < a["end"] < n and a["dir"] in ("left", "right")


def test_kbest_command(model_file):
    d = model_file
    out = d / "k.conllu"
    assert main(["parse", str(d / "m.model"), str(d / "test.conllu"), "--kbest", "3",
                 "-o", str(out), "--quiet"]) == 0
    trees = read_conllu(out)
    gold = read_conllu(d / "test.conllu")
    assert 2 * len(gold) < len(trees) <= 3 * len(gold)
    ranks = [int(next(c for c in t.comments if c.startswith("# kbest_rank")).split("=")[1])
             for t in trees]
    assert ranks[:3] == [1, 2, 3]
    # the first tree of each sentence is the plain parse
    plain = d / "plain.conllu"
    assert main(["parse", str(d / "m.model"), str(d / "test.conllu"), "-o", str(plain),
                 "--quiet"]) == 0
    firsts = [t for t, r in zip(trees, ranks) if r == 1]
    assert all((a.heads == b.heads).all() for a, b in zip(firsts, read_conllu(plain)))


def test_blocks_of_conllu_and_of_text_hold_about_as_many_words(monkeypatch):
    """A CoNLL-U block takes CONLLU_BLOCK_FACTOR times the bytes of a text block, so that
    blocks of either format hold about as many words: a neural scorer batches sentences
    by length within a block, and CoNLL-U blocks of the text's size made small, padded
    batches."""
    from arboreal.models.stream import StreamOptions, _tasks

    monkeypatch.setattr("arboreal.models.stream.BLOCK_BYTES", 4096)

    def words_per_block(path, input_format, count):
        blocks = [data for data, _, _ in _tasks(path, StreamOptions(input_format=input_format))]
        assert len(blocks) > 3
        return sum(count(b) for b in blocks[:-1]) / (len(blocks) - 1)

    conllu = words_per_block(
        SAMPLE / "en_ewt-sample-test.conllu", "conllu",
        lambda b: sum(1 for r in b.split(b"\n") if r[:1].isdigit() and b"\t" in r
                      and b"-" not in r.split(b"\t")[0]))
    text = words_per_block(SAMPLE / "en_ewt-sample-test.txt", "text",
                           lambda b: len(b.split()))
    assert 0.4 < conllu / text < 2.5


def test_bad_options_and_bad_blocks_are_one_line_errors(model_file, tmp_path, capsys,
                                                          monkeypatch):
    monkeypatch.setattr("arboreal.models.stream.BLOCK_BYTES", 2048)
    d = model_file
    assert main(["parse", str(d / "m.model"), str(d / "test.conllu"), "--kbest", "2",
                 "--decode", "mbr", "--quiet"]) == 2
    assert "cannot be combined" in capsys.readouterr().err
    # a broken line deep in the file: its real line number, from a worker
    lines = (d / "test.conllu").read_text(encoding="utf-8").splitlines()
    bad_line = len(lines) - 5
    lines[bad_line - 1] = "x\tbroken"
    bad = tmp_path / "bad.conllu"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.conllu"
    for jobs in ("1", "2"):
        assert main(["parse", str(d / "m.model"), str(bad), "--jobs", jobs, "-o", str(out),
                     "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"bad.conllu:{bad_line}:" in err
        assert not out.exists()


def test_interrupted_parallel_parse_leaves_nothing(model_file, tmp_path):
    d = model_file
    big = tmp_path / "big.conllu"
    big.write_text((d / "test.conllu").read_text(encoding="utf-8") * 100, encoding="utf-8")
    out = tmp_path / "out.conllu"
    proc = subprocess.Popen([sys.executable, "-m", "arboreal", "parse", str(d / "m.model"),
                             str(big), "--jobs", "2", "-o", str(out), "--quiet"],
                            stderr=subprocess.PIPE, text=True)
    with pytest.raises(subprocess.TimeoutExpired):   # still parsing after 2 s
        proc.wait(timeout=2)
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=30)
    err = proc.stderr.read()
    assert rc == 143 and "Traceback" not in err, err
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [big]


def test_warmup_runs_a_model(model_file, capsys):
    assert main(["warmup", str(model_file / "m.model")]) == 0
    assert "warmup: done" in capsys.readouterr().err


def test_kbest_memory_is_budgeted(parser, monkeypatch):
    from arboreal.errors import ArborealError
    from arboreal.io.sentence import Sentence

    monkeypatch.setattr("arboreal.models.analysis.KBEST_BUDGET_BYTES", 1 << 20)
    s = Sentence.from_columns(["word"] * 60, upos=["NOUN"] * 60)
    assert len(parser.parse_kbest([s], 1)[0]) == 1           # one tree: no k-best search
    with pytest.raises(ArborealError, match="over the 1 MiB budget"):
        parser.parse_kbest([s], 50)


def test_ud_root_label_exactly_on_the_root(parser, sample):
    # UD: the word on the root is labelled root, and no other word is
    _, test = sample
    for parsed in (parser.parse(test), parser.parse(test, probabilities=True),
                   [t for trees in parser.parse_kbest(test[:30], 3) for t in trees]):
        for s in parsed:
            on_root = s.heads[1:] == 0
            assert (s.deprels[1:][on_root] == "root").all()
            assert (s.deprels[1:][~on_root] != "root").all()
