"""Checkpoints (``arboreal train --checkpoint DIR`` / ``--resume DIR``): a training
killed with SIGKILL during an epoch, during a dev evaluation or during a checkpoint
save goes on with --resume and gives the uninterrupted run's model, bit for bit; the
C grid resumes at its run, the pipeline at its stages, the neural scorer at its epoch.
The kill is a handshake (tests/_train_kill.py kills the process the N-th time it
reaches the point), never a timer."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from arboreal.cli import main
from arboreal.io.conllu import read_conllu, write_conllu
from arboreal.models.checkpoint import load_state

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
KILL = ROOT / "tests" / "_train_kill.py"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    train = [s for s in read_conllu(SAMPLE / "en_ewt-sample-train.conllu") if len(s) <= 25]
    write_conllu(train[:150], folder / "train.conllu")
    write_conllu(train[:80], folder / "small.conllu")
    write_conllu(read_conllu(SAMPLE / "en_ewt-sample-test.conllu")[:60], folder / "dev.conllu")
    return folder


def arrays(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def assert_same_model(a: Path, b: Path) -> None:
    """Every array equal bit for bit; the same best epoch and dev scores."""
    xa, xb = arrays(a), arrays(b)
    ma, mb = json.loads(str(xa.pop("__meta__"))), json.loads(str(xb.pop("__meta__")))
    assert sorted(xa) == sorted(xb)
    for k in xa:
        assert xa[k].dtype == xb[k].dtype and np.array_equal(xa[k], xb[k]), k
    assert ma.get("best_epoch") == mb.get("best_epoch")
    assert [h.get("dev_uas", h.get("dev_las")) for h in ma["history"]] == \
        [h.get("dev_uas", h.get("dev_las")) for h in mb["history"]]


def killed(point: str, n: int, argv: list[str]) -> None:
    """Run ``arboreal *argv`` until it kills itself at its n-th ``point``."""
    done = subprocess.run([sys.executable, str(KILL), point, str(n), *argv],
                          capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stderr[-2000:])


def saved_epoch(folder: Path) -> tuple[int, int]:
    """(run, epoch) of the parser's checkpoint."""
    state = load_state(folder / "parser.npz")
    return state["run"], state["trainer"]["epoch"]


def mira(files: Path) -> list[str]:
    return ["train", str(files / "train.conllu"), "--dev", str(files / "dev.conllu"),
            "--learner", "mira", "--epochs", "3", "--hash-bits", "14", "--no-tagger",
            "--no-tokenizer", "--quiet"]


@pytest.fixture(scope="module")
def reference(files, tmp_path_factory):
    """The uninterrupted model of :func:`mira` (no checkpoint)."""
    out = tmp_path_factory.mktemp("ref") / "m.model"
    assert main([*mira(files), "-o", str(out)]) == 0
    return out


@pytest.mark.parametrize("point", ["epoch", "evaluate", "save"])
def test_killed_training_resumes_to_the_uninterrupted_model(files, reference, tmp_path, point):
    out, folder = tmp_path / "m.model", tmp_path / "ckpt"
    killed(point, 2, [*mira(files), "-o", str(out), "--checkpoint", str(folder)])
    assert not out.exists()
    # the kill came after epoch 1 was saved and before epoch 2 was
    assert saved_epoch(folder) == (0, 1)
    strays = list(folder.glob(".parser.npz.*.tmp"))
    assert len(strays) == (1 if point == "save" else 0)   # killed before the rename
    assert main([*mira(files), "-o", str(out), "--resume", str(folder)]) == 0
    assert_same_model(out, reference)
    assert not list(folder.glob(".*.tmp"))
    assert saved_epoch(folder) == (0, 3)


def test_a_resumed_finished_training_only_writes_the_model(files, reference, tmp_path,
                                                           capsys):
    """Killed after its last epoch was saved, as the model was to be written:
    resuming trains nothing more."""
    out, folder = tmp_path / "m.model", tmp_path / "ckpt"
    killed("model", 1, [*mira(files), "-o", str(out), "--checkpoint", str(folder)])
    assert saved_epoch(folder) == (0, 3)
    capsys.readouterr()
    loud = [a for a in mira(files) if a != "--quiet"]
    assert main([*loud, "-o", str(out), "--resume", str(folder)]) == 0
    log = capsys.readouterr().err
    assert "resuming the checkpoint" in log and "epoch" not in log.replace("best dev epoch", "")
    assert_same_model(out, reference)


def test_the_c_grid_resumes_at_its_run(files, tmp_path):
    """log-linear without C and without dev: one run per C value on nine tenths of
    train, then the chosen C again on all of it. Killed while saving the second run's
    second epoch, it goes on from that run's first."""
    argv = ["train", str(files / "small.conllu"), "--learner", "loglinear", "--epochs", "2",
            "--hash-bits", "12", "--no-tagger", "--no-tokenizer", "--quiet"]
    ref = tmp_path / "ref.model"
    assert main([*argv, "-o", str(ref)]) == 0
    out, folder = tmp_path / "m.model", tmp_path / "ckpt"
    killed("save", 4, [*argv, "-o", str(out), "--checkpoint", str(folder)])
    assert saved_epoch(folder) == (1, 1)
    assert main([*argv, "-o", str(out), "--resume", str(folder)]) == 0
    assert_same_model(out, ref)
    assert json.loads(str(arrays(out)["__meta__"]))["selection"] == \
        json.loads(str(arrays(ref)["__meta__"]))["selection"]


def test_the_pipeline_resumes_at_its_stages(files, tmp_path, capsys):
    """Tokenizer, tagger and jackknifed tags are finished stages in the folder: a
    training killed in the parser's first epoch does not train them again."""
    argv = ["train", str(files / "train.conllu"), "--dev", str(files / "dev.conllu"),
            "--learner", "perceptron", "--epochs", "2", "--tagger-epochs", "2",
            "--jackknife", "2", "--hash-bits", "12"]
    ref = tmp_path / "ref.model"
    assert main([*argv, "--quiet", "-o", str(ref)]) == 0
    out, folder = tmp_path / "m.model", tmp_path / "ckpt"
    killed("epoch", 1, [*argv, "--quiet", "-o", str(out), "--checkpoint", str(folder)])
    assert sorted(p.name for p in folder.iterdir()) == \
        ["command.json", "jackknife.npz", "tagger.npz", "tokenizer.npz"]
    capsys.readouterr()
    assert main([*argv, "-o", str(out), "--resume", str(folder)]) == 0
    log = capsys.readouterr().err
    assert "tagger: jackknife fold" not in log and "tokenizer epoch" not in log
    assert "epoch 2" in log
    assert_same_model(out, ref)


def test_resume_refuses_another_training_and_checkpoint_a_used_folder(files, tmp_path,
                                                                       capsys):
    out, folder = tmp_path / "m.model", tmp_path / "ckpt"
    killed("epoch", 2, [*mira(files), "-o", str(out), "--checkpoint", str(folder)])
    capsys.readouterr()
    other = [*mira(files)]
    other[other.index("3")] = "4"                     # --epochs 4
    assert main([*other, "-o", str(out), "--resume", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "another training (options differ)" in err
    assert main([*mira(files), "-o", str(out), "--checkpoint", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--resume {folder}" in err
    assert main([*mira(files), "-o", str(out), "--resume", str(tmp_path / "none")]) == 2
    assert "no checkpoint to resume" in capsys.readouterr().err
    assert not out.exists()
    # a command refused for its options makes no checkpoint folder
    fresh = tmp_path / "fresh"
    assert main([*mira(files), "-o", str(out), "--learner-option", "nope=1", "--checkpoint",
                 str(fresh)]) == 2
    assert "nope" in capsys.readouterr().err and not fresh.exists()


def test_the_neural_scorer_resumes_to_the_uninterrupted_model(files, tmp_path):
    """On the CPU, where torch computes the same numbers in every run: the network, the
    moving average of its parameters, Adam's state, the schedule and torch's generator
    come back from the checkpoint."""
    pytest.importorskip("torch")
    argv = ["train", str(files / "small.conllu"), "--dev", str(files / "dev.conllu"),
            "--scorer", "neural", "--epochs", "3", "--no-tokenizer", "--quiet",
            *[a for o in ("lstm_dim=16", "lstm_layers=1", "arc_dim=16", "label_dim=8",
                          "char_dim=8", "char_embedding_dim=8", "word_dim=16",
                          "tag_hidden=8", "batch_words=200", "average=0.9")
              for a in ("--scorer-option", o)]]
    ref = tmp_path / "ref.model"
    assert main([*argv, "-o", str(ref)]) == 0
    out, folder = tmp_path / "m.model", tmp_path / "ckpt"
    killed("save", 2, [*argv, "-o", str(out), "--checkpoint", str(folder)])
    assert saved_epoch(folder) == (0, 1)
    assert main([*argv, "-o", str(out), "--resume", str(folder)]) == 0
    assert_same_model(out, ref)
