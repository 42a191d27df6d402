"""The one training loop: epochs, shuffling, dev evaluation, keeping the best epoch,
patience, a time limit, progress and interruption.

What is trained is an :class:`EpochLearner`: anything that runs one epoch over its items
(sentences or batches) in a given order and can hand out and take back a snapshot of
its parameters. The loop never looks inside: it is the same for the online linear
learners, the neural scorer and the taggers.

Per epoch ``e`` (1-based): ``order = rng.permutation(learner.size)`` from
``np.random.default_rng(seed)`` (one generator for the whole run, so a run is repeatable;
a learner that draws more random numbers of its own within an epoch hands the trainer
its generator as ``learner.rng``), ``learner.run_epoch(order, e)``,
``snapshot = learner.snapshot()``, then ``evaluate(snapshot, e)`` (dev data; None
without it) gives a dict with a ``score`` to maximise and anything else to report. The
best epoch's snapshot is kept; with ``patience`` training stops once the score has not
improved for that many epochs; with ``max_seconds`` it stops after the first epoch that
ends past the limit; a learner that has converged (``learner.converged`` true after an
epoch) stops it too.
``KeyboardInterrupt`` during an epoch ends the run as :class:`TrainingInterrupted`,
which carries the result so far (the best finished epoch), so that a command can save
it before it exits.
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
    """What :class:`Trainer` trains."""

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
    seconds: float
    cpu_seconds: float
    stats: dict = field(default_factory=dict)
    #: the evaluation's dict (None without dev data)
    dev: dict | None = None
    best: bool = False

    def as_dict(self) -> dict:
        return {"epoch": self.epoch, "seconds": round(self.seconds, 3),
                "cpu_seconds": round(self.cpu_seconds, 3), **self.stats,
                **({f"dev_{k}": v for k, v in self.dev.items()} if self.dev else {})}


@dataclass
class TrainingResult:
    """The outcome of :meth:`Trainer.run`."""

    #: the snapshot to use: the best dev epoch's, or the last epoch's without dev data
    snapshot: Any
    #: the epoch of ``snapshot`` (0 when no epoch finished)
    epoch: int
    history: list[EpochRecord]
    #: why the run ended before its last epoch: "patience", "time", "converged" or
    #: "interrupt" ("" if not)
    stopped: str = ""

    @property
    def record(self) -> EpochRecord | None:
        """The :class:`EpochRecord` of the kept epoch (None when no epoch finished)."""
        return next((r for r in self.history if r.epoch == self.epoch), None)


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
            evaluate: Callable[[Any, int], dict | None] | None = None) -> TrainingResult:
        """Train; return the best (or last) snapshot with the history."""
        rng = getattr(learner, "rng", None) or np.random.default_rng(self.seed)
        history: list[EpochRecord] = []
        best_score, best_snapshot, best_epoch, last_gain = -np.inf, None, 0, 0
        start = time.perf_counter()
        stopped = ""
        for epoch in range(1, self.epochs + 1):
            t0, c0 = time.perf_counter(), time.process_time()
            order = rng.permutation(learner.size)
            try:
                stats = learner.run_epoch(order, epoch) or {}
            except KeyboardInterrupt:
                if best_snapshot is None and history:
                    best_snapshot, best_epoch = learner.snapshot(), history[-1].epoch
                raise TrainingInterrupted(TrainingResult(best_snapshot, best_epoch, history,
                                                         "interrupt")) from None
            snapshot = learner.snapshot()
            dev = evaluate(snapshot, epoch) if evaluate is not None else None
            record = EpochRecord(epoch, time.perf_counter() - t0, time.process_time() - c0,
                                 dict(stats), dev)
            if dev is None:
                best_snapshot, best_epoch = snapshot, epoch
            elif dev["score"] > best_score:
                best_score, best_snapshot, best_epoch, last_gain = dev["score"], snapshot, \
                    epoch, epoch
                record.best = True
            history.append(record)
            if self.log is not None:
                self.log(record)
            if epoch == self.epochs:
                break
            if getattr(learner, "converged", False):
                stopped = "converged"
                break
            if self.patience is not None and dev is not None \
                    and epoch - last_gain >= self.patience:
                stopped = "patience"
                break
            if self.max_seconds is not None and time.perf_counter() - start > self.max_seconds:
                stopped = "time"
                break
        return TrainingResult(best_snapshot, best_epoch, history, stopped)


def run_epochs(learner: EpochLearner, epochs: int, seed: int = 0,
               on_epoch: Callable[[int, Any], None] | None = None) -> Any:
    """Run ``learner`` for ``epochs`` epochs under :class:`Trainer` with no dev data,
    calling ``on_epoch(epoch, snapshot)`` after each; return the last snapshot. What the
    learners' ``fit`` methods are."""
    def evaluate(snapshot, epoch):
        on_epoch(epoch, snapshot)
        return None

    return Trainer(epochs, seed).run(learner, evaluate if on_epoch else None).snapshot
