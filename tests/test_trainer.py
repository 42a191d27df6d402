"""The one training loop (arboreal.learn.trainer): one epoch loop and one keep-best
mechanism in the code base, keep-best over several runs, patience, convergence, and
checkpoints: every learner's state saved after an epoch (through a file) and resumed
gives bit for bit the uninterrupted run; the L-BFGS learner's iterates are scipy's."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

from arboreal.learn.trainer import KeepBest, Trainer
from arboreal.models.checkpoint import load_state, save_state

SRC = Path(__file__).resolve().parents[1] / "src" / "arboreal"
SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "en_ewt-sample-train.conllu"
TRAINER = SRC / "learn" / "trainer.py"


# ---------------------------------------------------------------------- the code base
def _names(node: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name)] + \
        [n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)]


def epoch_loops(path: Path) -> list[int]:
    """Lines of ``for`` loops over epochs: a loop variable named like an epoch, or a
    ``range`` over a number of epochs."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.For):
            continue
        target = any("epoch" in n for n in _names(node.target))
        over = (isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Name)
                and node.iter.func.id == "range"
                and any("epoch" in n for a in node.iter.args for n in _names(a)))
        if target or over:
            lines.append(node.lineno)
    return lines


#: what a dev score is called where training compares it with the best one
DEV_SCORE = re.compile(r"uas|las|acc|f1|score")


def keep_best_comparisons(path: Path) -> list[int]:
    """Lines comparing a dev score with the best one so far (``uas > best["uas"]``,
    ``acc > best_acc[0]``, ``dev["score"] > best_score``)."""
    source = path.read_text(encoding="utf-8")
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(isinstance(o, (ast.Gt, ast.GtE))
                                                 for o in node.ops):
            text = ast.get_source_segment(source, node) or ""
            if "best" in text and DEV_SCORE.search(text.replace("best", "")):
                lines.append(node.lineno)
    return lines


def test_one_epoch_loop_in_the_code_base():
    loops = {str(p.relative_to(SRC)): epoch_loops(p) for p in sorted(SRC.rglob("*.py"))}
    loops = {k: v for k, v in loops.items() if v}
    assert list(loops) == ["learn/trainer.py"] and len(loops["learn/trainer.py"]) == 1, loops


#: the layers that train (inference kernels compare scores with the best too, per arc)
TRAINING_LAYERS = ("learn", "models", "cli", "scorers", "neural")


def test_one_keep_best_mechanism_in_the_code_base():
    found = {str(p.relative_to(SRC)): keep_best_comparisons(p)
             for layer in TRAINING_LAYERS for p in sorted((SRC / layer).rglob("*.py"))}
    found = {k: v for k, v in found.items() if v}
    assert list(found) == ["learn/trainer.py"], found
    keepers = [p for p in SRC.rglob("*.py")
               if re.search(r"^class KeepBest\b", p.read_text(encoding="utf-8"), re.M)]
    assert keepers == [TRAINER]


def test_the_detectors_find_the_loops_they_are_meant_for(tmp_path):
    """The two checks above would see a second loop or keep-best (they can fail)."""
    other = tmp_path / "other.py"
    other.write_text("for epoch in range(1, epochs + 1):\n    if uas > best['uas']:\n"
                     "        best['uas'] = uas\nfor e in range(n_epochs):\n    pass\n"
                     "if acc > best_acc[0]:\n    pass\n", encoding="utf-8")
    assert sorted(epoch_loops(other)) == [1, 4]
    assert sorted(keep_best_comparisons(other)) == [2, 6]


# ---------------------------------------------------------------------- the loop
class Toy:
    """A learner whose epochs depend on the order, on draws of its own generator and on
    everything before: a resumed run can only match if all of it is restored."""

    def __init__(self, scores=(), seed: int = 0, exhaust_at: int | None = None):
        self.size = 7
        self.w = np.zeros(7)
        self.rng = np.random.default_rng(seed)
        self.scores = list(scores)
        self.exhaust_at = exhaust_at
        self.exhausted = False
        self.epochs = 0

    def run_epoch(self, order, epoch):
        if epoch == self.exhaust_at:
            self.exhausted = True
            return None
        self.epochs += 1
        for k, i in enumerate(order):
            self.w[i] = 0.5 * self.w[i] + k + self.rng.random()
        return {"sum": float(self.w.sum())}

    def snapshot(self):
        return self.w.copy()

    def restore(self, snapshot):
        self.w[:] = snapshot

    def state(self):
        return {"w": self.w, "epochs": self.epochs}

    def load_state(self, state):
        self.w[:] = state["w"]
        self.epochs = state["epochs"]


def _scored(scores):
    return lambda snapshot, epoch: {"score": scores[epoch - 1]}


def test_keep_best_spans_runs_and_patience_counts_per_run():
    keep = KeepBest()
    first = Trainer(3, 0).run(Toy(), _scored([1.0, 5.0, 2.0]), keep, {"C": 0.1})
    assert first.epoch == 2 and first.record.setting == {"C": 0.1}
    best = first.snapshot.copy()
    # a worse second run: the first run's epoch stays kept; patience 1 stops it after
    # its second epoch (its own best was its first)
    second = Trainer(5, 0, patience=1).run(Toy(), _scored([4.0, 3.0, 9.0, 9.0, 9.0]), keep,
                                           {"C": 1.0})
    assert second.stopped == "patience" and len(second.history) == 2
    assert second.epoch == 2 and second.record.setting == {"C": 0.1}
    assert np.array_equal(second.snapshot, best) and keep.score == 5.0
    assert [r.best for r in first.history + second.history] == [True, True, False, False, False]


def test_an_exhausted_learner_ends_the_run_without_that_epoch():
    result = Trainer(6, 0).run(Toy(exhaust_at=3))
    assert [r.epoch for r in result.history] == [1, 2] and result.stopped == "converged"
    assert result.epoch == 2


@pytest.mark.parametrize("with_dev", [False, True])
def test_a_resumed_run_is_the_uninterrupted_run(tmp_path, with_dev):
    scores = [3.0, 1.0, 4.0, 1.0, 5.0]
    evaluate = _scored(scores) if with_dev else None
    states = []
    full = Trainer(5, 7).run(Toy(seed=7), evaluate,
                             save=lambda s: states.append(save_state(tmp_path / f"{len(states)}",
                                                                     s) or len(states)))
    for k in range(len(states)):          # stop after epoch k + 1, go on in a new learner
        state = load_state(tmp_path / f"{k}")
        assert state["epoch"] == k + 1
        again = Trainer(5, 7).run(Toy(seed=7), evaluate, resume=state)
        assert np.array_equal(again.snapshot, full.snapshot)
        assert again.epoch == full.epoch
        assert [r.state() for r in again.history] == \
            [{**r.state(), "seconds": a.seconds, "cpu_seconds": a.cpu_seconds,
              "dev_seconds": a.dev_seconds} for r, a in zip(full.history, again.history)]


def test_a_finished_run_resumes_to_its_result(tmp_path):
    states = []
    full = Trainer(4, 0, patience=1).run(Toy(), _scored([2.0, 1.0, 3.0, 3.0]),
                                         save=states.append)
    assert full.stopped == "patience" and states[-1]["stopped"] == "patience"
    learner = Toy()
    again = Trainer(4, 0, patience=1).run(learner, _scored([2.0, 1.0, 3.0, 3.0]),
                                          resume=states[-1])
    assert learner.epochs == 2 and again.stopped == "patience"
    assert np.array_equal(again.snapshot, full.snapshot)


# ---------------------------------------------------------------------- every learner
@pytest.fixture(scope="module")
def small():
    from arboreal.features import FeatureSet
    from arboreal.io.conllu import read_conllu
    from arboreal.learn import TrainingData

    sents = [s for s in read_conllu(SAMPLE) if 2 <= len(s) <= 20][:40]
    fs = FeatureSet("default", bits=14).fit(sents)
    heads = [np.asarray(s.heads, dtype=np.int64) for s in sents]
    return TrainingData(fs, fs.encode(sents), heads), sents


def _lexicon_data(small):
    import io

    from arboreal.features import FeatureSet
    from arboreal.features.lexicon import build_lexicon, count_cooccurrences
    from arboreal.learn import TrainingData

    _, sents = small
    text = "\n".join(" ".join(s.forms[1:].tolist()) for s in sents).encode()
    lexicon = build_lexicon(count_cooccurrences([io.BytesIO(text)], "tokenized", 5), 1, 1,
                            neighbours=5, similar_words=200)
    fs = FeatureSet("words", bits=14, lexicon=lexicon).fit(sents)
    return TrainingData(fs, fs.encode(sents), [np.asarray(s.heads) for s in sents])


def _learners():
    from arboreal.learn import get_learner
    from arboreal.learn.mixing import ParameterMixing

    def plain(name, **options):
        return lambda small: (get_learner(name, **options), small[0])

    return {
        "perceptron": plain("perceptron"),
        "mira": plain("mira"),
        "kbest-mira": plain("kbest-mira"),
        "factored-mira": plain("factored-mira"),
        "loglinear": plain("loglinear", C=1.0),
        "loglinear-adagrad": plain("loglinear", C=1.0, optimizer="adagrad", batch_size=8),
        "eg": plain("eg", C=0.03),
        "local-margin": plain("local-margin", C=0.1, tol=0.0),
        "local-margin-laplacian": lambda small: (get_learner("local-margin", C=0.1,
                                                             laplacian=1.0, tol=0.0),
                                                 _lexicon_data(small)),
        "mixing": lambda small: (ParameterMixing(get_learner("mira"), None, 3, "error"),
                                 small[0]),
    }


@pytest.mark.parametrize("name", list(_learners()))
def test_every_learner_resumes_from_its_saved_state(small, tmp_path, name):
    """Epoch 1's state through a checkpoint file, then epochs 2-3 in a new learner: the
    weights of the uninterrupted run, bit for bit."""
    make = _learners()[name]
    learner, data = make(small)
    saved = []
    full = Trainer(3, 5).run(learner.start(data, 5), save=lambda s: saved.append(
        save_state(tmp_path / f"{len(saved)}.npz", s) or len(saved)))
    learner, data = make(small)
    again = Trainer(3, 5).run(learner.start(data, 5), resume=load_state(tmp_path / "0.npz"))
    assert full.snapshot.dtype == again.snapshot.dtype
    assert np.array_equal(full.snapshot, again.snapshot)
    assert np.any(full.snapshot != 0)


def test_a_tagging_stage_resumes_from_its_saved_state(tmp_path):
    from arboreal.learn.tagging import StageLearner

    rng = np.random.default_rng(0)
    n = 300
    attrs = rng.integers(0, 1 << 40, size=(n, 12), dtype=np.uint64)
    starts = np.arange(0, n + 1, 10, dtype=np.int64)
    gold = rng.integers(0, 3, size=n).astype(np.int32)
    args = (attrs, starts, np.zeros((n, 0), np.int32), -1,
            np.array([[0, 1, 2]], np.int32), np.array([3], np.int32), gold, 12)
    for order in (0, 1):
        saved = []

        def save(state: dict) -> None:     # written at once: the state holds live arrays
            saved.append(state["epoch"])
            if state["epoch"] == 2:
                save_state(tmp_path / "s.npz", state)

        full = Trainer(3, 1).run(StageLearner(*args, order=order), save=save)
        assert saved == [1, 2, 3]
        again = Trainer(3, 1).run(StageLearner(*args, order=order),
                                  resume=load_state(tmp_path / "s.npz"))
        assert np.array_equal(full.snapshot, again.snapshot)


# ---------------------------------------------------------------------- L-BFGS
def test_lbfgs_learner_iterates_are_scipys():
    """Each epoch of LbfgsLearner is one iteration of scipy's L-BFGS-B, bit for bit as
    ``scipy.optimize.minimize`` computes it (stopped there by ``maxiter``), and a run
    that converges ends (exhausted) where scipy's does, at its point."""
    from scipy.optimize import minimize

    from arboreal.learn import BatchLearner
    from arboreal.learn.loglinear import LBFGS_FTOL, LBFGS_GTOL, LbfgsLearner

    rng = np.random.default_rng(3)
    A = rng.normal(size=(40, 12))
    y = rng.integers(0, 2, size=40) * 2 - 1

    def fun(x):                      # logistic loss + L2: smooth, strictly convex
        z = y * (A @ x)
        value = float(np.logaddexp(0, -z).sum() + 0.5 * x @ x)
        grad = A.T @ (-y / (1 + np.exp(z))) + x
        return value, grad

    owner = BatchLearner()
    owner.memory, owner.history = 5, []
    active = np.arange(12)
    options = {"maxcor": 5, "gtol": LBFGS_GTOL, "ftol": LBFGS_FTOL}
    learner = LbfgsLearner(owner, fun, active, 12, "test")
    for k in range(1, 8):
        learner.run_epoch(np.zeros(1, dtype=np.int64), k)
        res = minimize(fun, np.zeros(12), jac=True, method="L-BFGS-B",
                       options={**options, "maxiter": k})
        assert np.array_equal(learner.snapshot(), res.x), k
    done = Trainer(1000, 0).run(LbfgsLearner(owner, fun, active, 12, "test"))
    res = minimize(fun, np.zeros(12), jac=True, method="L-BFGS-B",
                   options={**options, "maxiter": 1000})
    assert done.stopped == "converged" and len(done.history) == res.nit
    assert np.array_equal(done.snapshot, res.x)
