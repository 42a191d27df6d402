"""arboreal on a Dask cluster: ``parse --scheduler`` gives the one-process output byte for
byte, ``train --scheduler`` trains by iterative parameter mixing (one shard: exactly
single-machine training). Killed workers, a vanished scheduler and workers at another
address: tests/test_distributed_faults.py."""
from __future__ import annotations

import logging
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("distributed")

from arboreal.cli import main  # noqa: E402
from arboreal.errors import ArborealError  # noqa: E402
from arboreal.io.conllu import read_conllu, write_conllu  # noqa: E402
from arboreal.models import Parser, load_model  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client, LocalCluster

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Port \d+ is already in use")
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               dashboard_address=None, memory_limit="1GiB",
                               silence_logs=logging.CRITICAL)
    client = Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("dask")
    train = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")
    test = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")
    write_conllu(train[:300], d / "train.conllu")
    write_conllu(train[300:400], d / "dev.conllu")
    write_conllu(test, d / "test.conllu")
    (d / "test.tokens").write_text("\n".join(" ".join(s.forms[1:]) for s in test) + "\n",
                                   encoding="utf-8")
    (d / "test.txt").write_bytes((SAMPLE / "en_ewt-sample-test.txt").read_bytes())
    # a pipeline model (tokenizer and tagger: raw and tokenized text parse too)
    assert main(["train", str(d / "train.conllu"), "-o", str(d / "m.model"), "--epochs", "2",
                 "--hash-bits", "18", "--jackknife", "2", "--tagger-epochs", "2",
                 "--quiet"]) == 0
    return d


@pytest.fixture
def small_shards(monkeypatch):
    # small blocks and shards: the 200-sentence sample makes dozens of shards
    monkeypatch.setattr("arboreal.models.stream.BLOCK_BYTES", 2048)
    monkeypatch.setattr("arboreal.distributed.SHARD_BYTES", 4096)


def _one_process(files, src, out, *options):
    assert main(["parse", str(files / "m.model"), str(src), "-o", str(out), "--quiet",
                 *options]) == 0
    return out.read_bytes()


@pytest.mark.parametrize("name,options", [
    ("test.conllu", ()), ("test.tokens", ("--input", "tokenized")),
    ("test.txt", ("--input", "text")),
    ("test.txt", ("--input", "text", "--output-format", "json"))])
def test_parse_equals_one_process(cluster, files, small_shards, tmp_path, name, options):
    expected = _one_process(files, files / name, tmp_path / "one", *options)
    out = tmp_path / "dask"
    assert main(["parse", str(files / "m.model"), str(files / name), "-o", str(out),
                 "--scheduler", cluster.scheduler.address, "--quiet", *options]) == 0
    assert out.read_bytes() == expected


def test_local_cluster_started_by_the_command(files, tmp_path):
    expected = _one_process(files, files / "test.conllu", tmp_path / "one")
    out = tmp_path / "dask"
    assert main(["parse", str(files / "m.model"), str(files / "test.conllu"), "-o", str(out),
                 "--scheduler", "local", "--workers", "1", "--quiet"]) == 0
    assert out.read_bytes() == expected


def test_several_files_to_an_output_dir(cluster, files, small_shards, tmp_path):
    text = (files / "test.conllu").read_text(encoding="utf-8")
    inputs = []
    for k, part in enumerate((text, text[: text.index("\n\n", 5000) + 2], text * 2)):
        (tmp_path / "in").mkdir(exist_ok=True)
        path = tmp_path / "in" / f"f{k}.conllu"
        path.write_text(part, encoding="utf-8")
        inputs.append(path)
    outdir = tmp_path / "out"
    assert main(["parse", str(files / "m.model"), *map(str, inputs), "--output-dir",
                 str(outdir), "--scheduler", cluster.scheduler.address, "--quiet"]) == 0
    assert sorted(p.name for p in outdir.iterdir()) == ["f0.conllu", "f1.conllu", "f2.conllu"]
    for path in inputs:
        assert (outdir / path.name).read_bytes() == \
            _one_process(files, path, tmp_path / "one", )


def test_model_sent_only_to_workers_without_it(cluster, files, small_shards, monkeypatch,
                                               tmp_path):
    """A second command with the same model sends the workers nothing; when the client
    is told every worker holds the model but they do not (a worker restarted since),
    each shard that finds no model comes back and is redone with the model sent once."""
    import hashlib

    from distributed import Client

    import arboreal.distributed as dist

    expected = _one_process(files, files / "test.conllu", tmp_path / "one")
    scatters: list[int] = []
    real_scatter = Client.scatter

    def counting_scatter(self, *args, **kwargs):
        scatters.append(1)
        return real_scatter(self, *args, **kwargs)

    monkeypatch.setattr(Client, "scatter", counting_scatter)
    argv = ["parse", str(files / "m.model"), str(files / "test.conllu"), "-o",
            str(tmp_path / "dask"), "--scheduler", cluster.scheduler.address, "--quiet"]
    assert main(argv) == 0 and (tmp_path / "dask").read_bytes() == expected
    first = len(scatters)     # 0 when an earlier test left this model on the workers
    assert main(argv) == 0 and (tmp_path / "dask").read_bytes() == expected
    assert len(scatters) == first
    scatters.clear()

    def forget():
        import arboreal.distributed as d

        d._MODELS.clear()

    cluster.run(forget)
    digest = hashlib.sha256((files / "m.model").read_bytes()).hexdigest()
    monkeypatch.setattr(dist, "cached_digest", lambda: digest)   # a stale answer
    assert main(argv) == 0 and (tmp_path / "dask").read_bytes() == expected
    assert scatters == [1]


def test_bad_input_is_a_one_line_error(cluster, files, small_shards, tmp_path, capsys):
    lines = (files / "test.conllu").read_text(encoding="utf-8").splitlines()
    bad_line = len(lines) - 5
    lines[bad_line - 1] = "x\tbroken"
    bad = tmp_path / "bad.conllu"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.conllu"
    assert main(["parse", str(files / "m.model"), str(bad), "-o", str(out), "--scheduler",
                 cluster.scheduler.address, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"arboreal: error: {bad}:{bad_line}:"), err
    assert not out.exists()
    # several files: the bad one (and those after it) get no output, no temporary file
    good = files / "test.conllu"
    outdir = tmp_path / "outdir"
    assert main(["parse", str(files / "m.model"), str(good), str(bad), "--output-dir",
                 str(outdir), "--scheduler", cluster.scheduler.address, "--quiet"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert [p.name for p in outdir.iterdir()] == ["test.conllu"]
    empty = tmp_path / "empty.conllu"
    empty.write_text("", encoding="utf-8")
    assert main(["parse", str(files / "m.model"), str(empty), "-o", str(out), "--scheduler",
                 cluster.scheduler.address, "--quiet"]) == 2
    assert "empty file" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("argv,message", [
    (["--workers", "2"], "--workers needs --scheduler"),
    (["--output-dir", "D"], "need --scheduler"),
    (["EXTRA"], "need --scheduler"),
    (["--scheduler", "local", "--jobs", "2"], "--jobs is for one machine"),
    (["--scheduler", "local", "EXTRA"], "need --output-dir"),
    (["--scheduler", "local", "--output-dir", "D", "-o", "X"], "not both"),
    (["--scheduler", " "], "needs an ADDRESS"),
])
def test_parse_options_are_checked(files, capsys, argv, message):
    inputs = [str(files / "test.conllu")] * (1 + argv.count("EXTRA"))
    argv = [a for a in argv if a != "EXTRA"]
    assert main(["parse", str(files / "m.model"), *inputs, *argv, "--quiet"]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv,message", [
    (["--shards", "2"], "--shards needs --scheduler"),
    (["--mixing", "error"], "--mixing needs --scheduler"),
    (["--scheduler", "local", "--learner", "loglinear"], "online learners"),
    (["--scheduler", "local", "--order", "2"], "first-order"),
])
def test_train_options_are_checked(files, tmp_path, capsys, argv, message):
    assert main(["train", str(files / "train.conllu"), "-o", str(tmp_path / "m"), *argv,
                 "--quiet"]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_without_dask_the_commands_say_how_to_install_it(files, tmp_path, capsys,
                                                           monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)   # import fails
    assert main(["parse", str(files / "m.model"), str(files / "test.conllu"), "--scheduler",
                 "local", "--quiet"]) == 2
    assert "pip install 'arboreal[dask]'" in capsys.readouterr().err
    assert main(["train", str(files / "train.conllu"), "-o", str(tmp_path / "m"),
                 "--scheduler", "local", "--quiet"]) == 2
    assert "pip install 'arboreal[dask]'" in capsys.readouterr().err


def test_unreachable_scheduler_is_a_one_line_error(files, capsys, monkeypatch):
    monkeypatch.setattr("arboreal.distributed.CONNECT_TIMEOUT", 1)
    assert main(["parse", str(files / "m.model"), str(files / "test.conllu"), "--scheduler",
                 "tcp://127.0.0.1:9", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot use the Dask scheduler at tcp://127.0.0.1:9" in err


# -------------------------------------------------------------- parameter mixing
@pytest.fixture(scope="module")
def treebank(files):
    return read_conllu(files / "train.conllu"), read_conllu(files / "dev.conllu")


@pytest.mark.parametrize("learner", ["perceptron", "mira"])
def test_one_shard_is_single_machine_training(cluster, treebank, learner):
    from arboreal.distributed import parameter_mixing

    train, dev = treebank
    options = dict(learner=learner, epochs=3, hash_bits=16, seed=3)
    single = Parser.train(train, dev, **options)
    mixed = Parser.train(train, dev, mixing=parameter_mixing(cluster, 1), **options)
    assert np.array_equal(single.weights, mixed.weights)
    assert [h["dev_uas"] for h in single.meta["history"]] == \
        [h["dev_uas"] for h in mixed.meta["history"]]
    assert mixed.meta["best_epoch"] == single.meta["best_epoch"]
    assert mixed.meta["training"]["parameter_mixing"] == {"shards": 1, "mixing": "uniform"}


def test_cli_one_worker_one_shard_is_single_machine_training(cluster, files, tmp_path):
    argv = ["train", str(files / "train.conllu"), "--dev", str(files / "dev.conllu"),
            "--epochs", "2", "--hash-bits", "16", "--no-tagger", "--no-tokenizer", "--quiet"]
    assert main([*argv, "-o", str(tmp_path / "single")]) == 0
    assert main([*argv, "-o", str(tmp_path / "mixed"), "--scheduler",
                 cluster.scheduler.address, "--shards", "1"]) == 0
    single, mixed = load_model(tmp_path / "single"), load_model(tmp_path / "mixed")
    assert np.array_equal(single.weights, mixed.weights)


def test_two_shards_deterministic_wherever_they_run(cluster, treebank):
    from arboreal.distributed import parameter_mixing
    from arboreal.learn.mixing import parameter_mixing as mixing_here

    train = treebank[0][:150]
    options = dict(learner="perceptron", epochs=2, hash_bits=16, seed=5, label_epochs=1)
    a = Parser.train(train, mixing=parameter_mixing(cluster, 2, "error"), **options)
    b = Parser.train(train, mixing=parameter_mixing(cluster, 2, "error"), **options)
    here = Parser.train(train, mixing=mixing_here(None, 2, "error"), **options)
    assert np.array_equal(a.weights, b.weights) and np.array_equal(a.weights, here.weights)
    single = Parser.train(train, **options)
    assert not np.array_equal(a.weights, single.weights)


@pytest.mark.parametrize("mixing", ["uniform", "error"])
def test_mixed_models_parse(cluster, files, tmp_path, mixing):
    model = tmp_path / "m.model"
    assert main(["train", str(files / "train.conllu"), "--dev", str(files / "dev.conllu"),
                 "-o", str(model), "--epochs", "3", "--hash-bits", "18", "--no-tagger",
                 "--no-tokenizer", "--scheduler", cluster.scheduler.address, "--shards", "3",
                 "--mixing", mixing, "--learner", "mira", "--quiet"]) == 0
    out = tmp_path / "out.conllu"
    assert main(["parse", str(model), str(files / "test.conllu"), "-o", str(out),
                 "--quiet"]) == 0
    from arboreal.evaluation import evaluate

    assert evaluate(str(files / "test.conllu"), str(out))["uas"] > 60


def test_the_average_is_over_every_step_of_every_shard(treebank):
    """The lazily kept average equals the explicit mean of the initial zero vector
    and every vector a shard held after each of its steps, in every epoch."""
    from arboreal.features import FeatureSet
    from arboreal.learn import TrainingData, get_learner
    from arboreal.learn.mixing import ParameterMixing

    train = [s for s in treebank[0] if len(s) <= 15][:40]
    fs = FeatureSet("mcdonald", bits=12).fit(train)
    data = TrainingData(fs, fs.encode(train), [s.heads.astype(np.int64) for s in train])
    inner = get_learner("perceptron")
    seen: list[np.ndarray] = []

    class Recording:
        name, average = "perceptron", True

        def make_update(self, shard, count=False):
            update = inner.make_update(shard, count)

            def step(i, w, u, c):
                changed = update(i, w, u, c)
                seen.append(w.astype(np.float64))
                return changed
            return step

    got = []
    mixing = ParameterMixing(Recording(), None, shards=3, mode="error")
    final = mixing.fit(data, 3, on_epoch=lambda e, w: got.append(w.copy()), seed=1)
    per_epoch = len(train)
    for epoch, w in enumerate(got, 1):
        steps = seen[: epoch * per_epoch]
        explicit = (np.zeros(fs.dim) + sum(steps)) / (1 + len(steps))
        np.testing.assert_allclose(w, explicit, atol=1e-4)
    assert np.array_equal(final, got[-1])
    assert len(mixing.history) == 3 and all(len(h) == 3 for h in mixing.history)


def test_only_online_learners_are_mixed(treebank):
    from arboreal.learn.mixing import parameter_mixing

    train, _ = treebank
    with pytest.raises(ArborealError, match="online learners"):
        Parser.train(train[:50], learner="loglinear", epochs=1, hash_bits=16,
                     mixing=parameter_mixing(None, 2))
