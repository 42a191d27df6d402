"""The one training loop: epochs, shuffling, dev evaluation, keeping the best epoch,
patience, a time limit, progress, interruption and checkpoints.

What is trained is an :class:`EpochLearner`: anything that runs one epoch over its items
(sentences or batches) in a given order and can hand out and take back a snapshot of
its parameters. The loop never looks inside: it is the same for the online linear
learners, the batch learners (EG, local-margin, L-BFGS, AdaGrad), parameter mixing, the
neural scorer, the label classifier, the tagger and the tokenizer.

Per epoch ``e`` (1-based): ``order = rng.permutation(learner.size)`` from
``np.random.default_rng(seed)`` (one generator for the whole run, so a run is repeatable;
a learner that draws more random numbers of its own within an epoch hands the trainer
its generator as ``learner.rng``), ``learner.run_epoch(order, e)``,
``snapshot = learner.snapshot()``, then ``evaluate(snapshot, e)`` (dev data; None
without it) gives a dict with a ``score`` to maximise and anything else to report.
:class:`KeepBest` keeps the best epoch's snapshot (one object may be shared by several
runs, e.g. one per value of a meta-parameter: it then keeps the best over all of
them); with ``patience`` a run stops once its score has not improved for that many
epochs; with ``max_seconds`` it stops after the first epoch that ends past the limit; a
learner that has converged (``learner.converged`` true after an epoch) stops it too, and
one that had nothing left to do (``learner.exhausted`` true after ``run_epoch``: no
epoch happened, e.g. L-BFGS that met its tolerance) ends it without that epoch.
Without dev data the run's result is the last epoch's snapshot (or the learner's
``final_snapshot()`` when it has one: a batch learner that returns its best iterate).
``KeyboardInterrupt`` during an epoch (or its dev evaluation, log line or checkpoint
save) ends the run as :class:`TrainingInterrupted`,
which carries the result so far (the best finished epoch), so that a command can save
it before it exits.

Checkpoints: with ``save``, after every epoch (its evaluation and keep-best done) the
trainer hands ``save`` its whole state as a tree of dicts, lists, JSON scalars and
numpy arrays (:meth:`Trainer.run`): the epoch, the generator's state, the history, the
run's best score and patience count, the kept best epoch and its snapshot, whether and
why the run stops there, and the learner's own ``state()`` (weights, averaging sums,
dual variables, optimizer memory). ``resume`` takes such a state back (the learner
built as before, ``load_state`` giving it its state): the run goes on exactly as the
uninterrupted one would, bit for bit. Writing the state to a file is the caller's job
(learners never touch files).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np


def held_out_split(n: int, seed: int) -> tuple[list[int], list[int]]:
    """(held-out, rest): a seeded random tenth of n items (at least one, all but one at
    most) and the others, each in their original order: data to tune on when there is
    no dev set."""
    perm = np.random.default_rng(seed).permutation(n)
    k = min(max(1, n // 10), n - 1)
    return sorted(perm[:k].tolist()), sorted(perm[k:].tolist())


class EpochLearner(Protocol):
    """What :class:`Trainer` trains. Optional members, read with ``getattr``: ``rng``
    (the learner's own generator, which the trainer then draws the orders from),
    ``converged`` and ``exhausted`` (see the module docstring), ``final_snapshot()``,
    ``state()`` / ``load_state(state)`` (checkpoints: everything the learner needs to
    go on, as dicts, lists, JSON scalars and numpy arrays), ``snapshot_state(snapshot)``
    / ``snapshot_from_state(state)`` (for snapshots that are not numpy arrays or dicts
    of them) and ``close()`` (called when the run ends, however it ends)."""

    #: the number of items an epoch visits (sentences, or batches)
    size: int

    def run_epoch(self, order: np.ndarray, epoch: int) -> dict | None:
        """Visit the items in ``order``; may return statistics of the epoch (e.g. its
        mean loss) for the report."""

    def snapshot(self) -> Any:
        """The parameters a model would use now (a copy the learner will not modify)."""

    def restore(self, snapshot: Any) -> None:
        """Make ``snapshot`` the learner's parameters."""


@dataclass
class EpochRecord:
    """One epoch of a run: what the log callback receives and the history keeps."""

    epoch: int
    #: wall and CPU seconds of the epoch's training (not its evaluation)
    seconds: float
    cpu_seconds: float
    stats: dict = field(default_factory=dict)
    #: the evaluation's dict (None without dev data)
    dev: dict | None = None
    #: whether this epoch became the kept best one
    best: bool = False
    #: the meta-parameter values of the run (e.g. {"C": 0.1}; empty when none)
    setting: dict = field(default_factory=dict)
    #: wall seconds of the evaluation
    dev_seconds: float = 0.0

    def as_dict(self) -> dict:
        return {"epoch": self.epoch, "seconds": round(self.seconds, 3),
                "cpu_seconds": round(self.cpu_seconds, 3), **self.setting, **self.stats,
                **({f"dev_{k}": v for k, v in self.dev.items()} if self.dev else {})}

    def state(self) -> dict:
        """Every field, JSON-able (for checkpoints)."""
        return {"epoch": self.epoch, "seconds": self.seconds, "cpu_seconds": self.cpu_seconds,
                "stats": self.stats, "dev": self.dev, "best": self.best,
                "setting": self.setting, "dev_seconds": self.dev_seconds}

    @classmethod
    def from_state(cls, state: dict) -> "EpochRecord":
        return cls(**state)


class KeepBest:
    """The best evaluated epoch so far: its score, snapshot and record. One object may be
    handed to several :meth:`Trainer.run` calls (one per value of a meta-parameter): it
    then keeps the best epoch over all of them. Ties keep the earlier epoch."""

    def __init__(self) -> None:
        self.score = -np.inf
        self.snapshot: Any = None
        self.record: EpochRecord | None = None

    def offer(self, record: EpochRecord, snapshot: Any) -> bool:
        """Keep ``snapshot`` if ``record``'s dev score beats the best so far; whether it
        did."""
        if record.dev is None or not record.dev["score"] > self.score:
            return False
        self.score, self.snapshot, self.record = record.dev["score"], snapshot, record
        return True

    @property
    def epoch(self) -> int:
        """The kept epoch (0 when none)."""
        return 0 if self.record is None else self.record.epoch


@dataclass
class TrainingResult:
    """The outcome of :meth:`Trainer.run`."""

    #: the snapshot to use: the best dev epoch's (over every run sharing the KeepBest),
    #: or the run's last one without dev data
    snapshot: Any
    #: the epoch of ``snapshot`` (0 when no epoch finished)
    epoch: int
    #: this run's epochs
    history: list[EpochRecord]
    #: why the run ended before its last epoch: "patience", "time", "converged" or
    #: "interrupt" ("" if not)
    stopped: str = ""
    #: the record of ``snapshot``'s epoch (it may come from an earlier run sharing the
    #: KeepBest; None when no epoch finished)
    record: EpochRecord | None = None


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during training; ``result`` is the run so far (its best finished epoch),
    and ``model`` the model built from it when a caller has built one (None else), so
    that a command can save it before it exits as Ctrl-C makes it exit."""

    def __init__(self, result: TrainingResult, model=None):
        super().__init__("training interrupted")
        self.result = result
        self.model = model


class Trainer:
    """Runs an :class:`EpochLearner` for ``epochs`` epochs (see the module docstring).

    ``log(record)`` is called after each epoch with its :class:`EpochRecord`.
    """

    def __init__(self, epochs: int, seed: int = 0, patience: int | None = None,
                 max_seconds: float | None = None,
                 log: Callable[[EpochRecord], None] | None = None):
        if epochs < 1:
            raise ValueError("epochs must be at least 1")
        if patience is not None and patience < 1:
            raise ValueError("patience must be at least 1 epoch")
        if max_seconds is not None and not max_seconds > 0:
            raise ValueError("the time limit must be positive")
        self.epochs = epochs
        self.seed = seed
        self.patience = patience
        self.max_seconds = max_seconds
        self.log = log

    def run(self, learner: EpochLearner,
            evaluate: Callable[[Any, int], dict | None] | None = None,
            keep: KeepBest | None = None, setting: dict | None = None,
            resume: dict | None = None,
            save: Callable[[dict], None] | None = None) -> TrainingResult:
        """Train; return the best (or last) snapshot with the history.

        ``keep``: the :class:`KeepBest` to offer the epochs to (a new one when None);
        ``setting``: the meta-parameter values of this run, recorded in its epochs;
        ``save(state)``: called after every epoch with the trainer's state (module
        docstring); ``resume``: such a state, to go on from (the learner freshly built
        as for the first run). Closes the learner (``close()``) however the run ends.
        """
        try:
            return self._run(learner, evaluate, KeepBest() if keep is None else keep,
                             dict(setting or {}), resume, save)
        finally:
            close = getattr(learner, "close", None)
            if close is not None:
                close()

    def _run(self, learner, evaluate, keep: KeepBest, setting: dict, resume, save):
        rng = getattr(learner, "rng", None) or np.random.default_rng(self.seed)
        history: list[EpochRecord] = []
        last_snapshot, evaluated = None, False
        # this run's own best score (patience counts from it) and the epoch it came
        run_best, last_gain, elapsed, first, stopped = -np.inf, 0, 0.0, 1, ""
        if resume is not None:
            rng.bit_generator.state = resume["rng"]
            history = [EpochRecord.from_state(r) for r in resume["history"]]
            run_best, last_gain = resume["run_best"], resume["last_gain"]
            elapsed, stopped = resume["elapsed"], resume["stopped"]
            evaluated = any(r.dev is not None for r in history)
            load_keep(keep, resume["keep"], learner)
            load_state = getattr(learner, "load_state", None)
            if load_state is None:
                raise ValueError(f"{type(learner).__name__} cannot resume from a checkpoint")
            load_state(resume["learner"])
            first = resume["epoch"] + 1
            if history:
                last_snapshot = learner.snapshot()
            if stopped or resume["epoch"] >= self.epochs:
                return self._result(learner, keep, history, last_snapshot, evaluated, stopped)
        start = time.perf_counter() - elapsed
        try:
            for epoch in range(first, self.epochs + 1):
                t0, c0 = time.perf_counter(), time.process_time()
                order = rng.permutation(learner.size)
                stats = learner.run_epoch(order, epoch) or {}
                if getattr(learner, "exhausted", False):
                    stopped = "converged"
                    break
                snapshot = last_snapshot = learner.snapshot()
                seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
                t1 = time.perf_counter()
                dev = evaluate(snapshot, epoch) if evaluate is not None else None
                record = EpochRecord(epoch, seconds, cpu_seconds, dict(stats), dev,
                                     setting=dict(setting), dev_seconds=time.perf_counter() - t1)
                if dev is not None:
                    evaluated = True
                    record.best = keep.offer(record, snapshot)
                    if dev["score"] > run_best:
                        run_best, last_gain = dev["score"], epoch
                history.append(record)
                if self.log is not None:
                    self.log(record)
                if epoch < self.epochs:
                    if getattr(learner, "converged", False):
                        stopped = "converged"
                    elif self.patience is not None and dev is not None \
                            and epoch - last_gain >= self.patience:
                        stopped = "patience"
                    elif self.max_seconds is not None \
                            and time.perf_counter() - start > self.max_seconds:
                        stopped = "time"
                if save is not None:
                    save(self._state(learner, rng, keep, history, epoch, run_best, last_gain,
                                     time.perf_counter() - start, stopped))
                if stopped:
                    break
        except KeyboardInterrupt:
            # wherever it came (the epoch, the dev evaluation, the log, a checkpoint save):
            # the epochs finished so far, and the best of them, are the result
            result = self._result(learner, keep, history, last_snapshot, evaluated,
                                  "interrupt")
            raise TrainingInterrupted(result) from None
        return self._result(learner, keep, history, last_snapshot, evaluated, stopped)

    @staticmethod
    def _result(learner, keep: KeepBest, history: list, last_snapshot, evaluated: bool,
                stopped: str) -> TrainingResult:
        if evaluated:
            return TrainingResult(keep.snapshot, keep.epoch, history, stopped, keep.record)
        final = getattr(learner, "final_snapshot", None)
        # an interrupted run keeps its last finished epoch
        snapshot = final() if final is not None and stopped != "interrupt" else last_snapshot
        last = history[-1] if history else None
        return TrainingResult(snapshot, 0 if last is None else last.epoch, history, stopped,
                              last)

    @staticmethod
    def _state(learner, rng, keep: KeepBest, history: list, epoch: int, run_best: float,
               last_gain: int, elapsed: float, stopped: str) -> dict:
        state_of = getattr(learner, "state", None)
        if state_of is None:
            raise ValueError(f"{type(learner).__name__} cannot save a checkpoint")
        encode = getattr(learner, "snapshot_state", None) or (lambda s: s)
        return {"epoch": epoch, "rng": rng.bit_generator.state,
                "history": [r.state() for r in history], "run_best": float(run_best),
                "last_gain": last_gain, "elapsed": elapsed, "stopped": stopped,
                "keep": None if keep.record is None else
                {"score": float(keep.score), "record": keep.record.state(),
                 "snapshot": encode(keep.snapshot)},
                "learner": state_of()}


def load_keep(keep: KeepBest, state: dict | None, learner) -> None:
    """Set ``keep`` from its checkpointed state (None: nothing kept yet)."""
    if state is None:
        return
    decode = getattr(learner, "snapshot_from_state", None) or (lambda s: s)
    keep.score = state["score"]
    keep.record = EpochRecord.from_state(state["record"])
    keep.snapshot = decode(state["snapshot"])


def run_epochs(learner: EpochLearner, epochs: int, seed: int = 0,
               on_epoch: Callable[[int, Any], None] | None = None) -> Any:
    """Run ``learner`` for ``epochs`` epochs under :class:`Trainer` with no dev data,
    calling ``on_epoch(epoch, snapshot)`` after each; return the final snapshot. What the
    learners' ``fit`` methods are."""
    def evaluate(snapshot, epoch):
        on_epoch(epoch, snapshot)
        return None

    return Trainer(epochs, seed).run(learner, evaluate if on_epoch else None).snapshot
