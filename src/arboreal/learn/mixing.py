"""Iterative parameter mixing (McDonald, Hall & Mann 2010, NAACL, "Distributed Training
Strategies for the Structured Perceptron", Figure 3) for the online learners.

The training sentences are cut into S shards (round robin: sentence j goes to shard
``j mod S``, so every shard gets a slice of every part of the treebank and about the
same number of words). Each epoch n, every shard i runs one epoch of the online loop
(:func:`arboreal.learn.perceptron.online_epoch`, the very loop of single-machine
training, with the learner's own update: perceptron, MIRA, k-best MIRA, factored MIRA)
over its sentences, starting from the mixed weights ``m_{n-1}`` (``m_0 = 0``), which
gives ``w_i``; the shards' weights are then mixed,

    m_n = sum_i mu_i w_i,   uniform: mu_i = 1 / S;
                            error:   mu_i = k_i / sum_j k_j,

``k_i`` the number of updates (mistakes: sentences whose update changed the weights)
shard i made in epoch n, the paper's error-weighted mixing (uniform when no shard
erred). The next epoch starts every shard from ``m_n``.

**What is averaged.** The averaged perceptron averages the weight vector held after
every step; with parameter mixing we average, as the paper does for its averaged
perceptron, over every step of every shard in every epoch: after epoch n the weights
handed out (to ``on_epoch``, i.e. dev evaluation and best-epoch selection, and at the
end) are

    (0 + sum over epochs n' <= n, shards i, steps t of shard i's weights after step t)
    / (1 + n |T|),

|T| the number of training sentences; the initial zero vector counts once, as in
:class:`~arboreal.learn.perceptron.OnlineLearner`. With ``average=False`` the
mixed weights ``m_n`` themselves. This is kept lazily, as on one machine: the state
is ``(m, U, c)`` with the average ``m - U / c`` (:func:`final_weights`). Every shard
starts its epoch at step counter c (the shards run side by side), accumulates its own
``u_i = sum_t c_t delta_t`` (shard 0 on top of U, the others from zero) and, with
``D_i = w_i - m`` and ``c_i = c + |T_i|`` (its counter at the end),

    U' = u_0 + sum_{i>0} u_i + sum_i ((c + |T|) mu_i - c_i) D_i,   c' = c + |T|

(the sum of shard i's step vectors is ``|T_i| m + c_i D_i - (u_i - U [i = 0])``).
With one shard the correction term is exactly zero and ``U' = u_0``, ``m' = w_0``:
training is bit for bit single-machine training (same shuffled order, from
``np.random.default_rng(seed)``; shard i > 0 shuffles with ``default_rng(seed + i)``).
The result depends only on the seed and the number of shards, never on the number
of workers or which worker ran what (the mixing sums the shards in shard order).

Where it runs: with a Dask ``client`` (:mod:`arboreal.distributed`) the feature
engine is broadcast to every worker once and each shard's encoded sentences are
scattered once (``client.scatter``); per epoch only weight vectors travel: ``m`` to
the shards' workers (``U`` to shard 0's), each shard's ``(w_i, u_i)`` to the mixing
task, which runs on a worker too, and the mixed ``m`` and ``U`` to the client, which
computes the averaged vector for ``on_epoch`` and keeps them: an epoch that loses data
with a worker that dies is run again from them (bit for bit the same result). Without
a client the shards run one after the other in this process (the same arithmetic;
used to check it).

Only the online learners (those with ``make_update``) can be mixed; a log-linear or
EG learner is refused with an error saying so.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from arboreal._arrays import aligned_zeros
from arboreal.errors import ArborealError
from arboreal.inference.structure import TreeStructure
from arboreal.learn import TrainingData, EpochCallback
from arboreal.learn.perceptron import final_weights, online_epoch
from arboreal.learn.trainer import run_epochs

#: mixing weights: uniform (the mean) or error-weighted (McDonald et al. 2010, §4)
MIXING_MODES = ("uniform", "error")
#: the learners parameter mixing applies to (those built on the online loop)
ONLINE_LEARNERS = ("perceptron", "mira", "kbest-mira", "factored-mira")


def is_online(learner) -> bool:
    """Whether ``learner`` (an instance or a class) runs the online loop that
    parameter mixing splits into shards."""
    return callable(getattr(learner, "make_update", None))


def shard_indices(n: int, shards: int) -> list[np.ndarray]:
    """The sentence indices of each shard: round robin, sentence j in shard j mod S."""
    return [np.arange(i, n, shards, dtype=np.int64) for i in range(shards)]


def shard_rng(seed: int, shard: int) -> np.random.Generator:
    """The generator shuffling shard ``shard`` every epoch (shard 0: that of
    single-machine training)."""
    return np.random.default_rng(seed + shard)


def run_shard_epoch(learner, features, encoded: list, heads: list,
                    structure: TreeStructure, order: np.ndarray, m: np.ndarray,
                    u0: np.ndarray | None, c: float, epoch: int
                    ) -> tuple[np.ndarray, np.ndarray, int, int]:
    """One epoch of ``learner``'s online loop over one shard from the mixed weights
    ``m`` (not modified), step counter ``c`` and lazy-averaging sum ``u0`` (None:
    zeros): ``(w, u, steps, updates)``. Runs on a worker."""
    data = TrainingData(features, encoded, heads, structure)
    w = aligned_zeros(m.size)
    w[:] = m
    if u0 is None:
        u = np.zeros(m.size, dtype=np.float32)
    else:
        u = np.array(u0, dtype=np.float32)      # a copy: u0 may be shared on the worker
    _, updates = online_epoch(data, order, learner.make_update(data, count=True), w, u, c,
                              epoch)
    return w, u, len(order), updates


def mixing_weights(updates: list[int], mode: str) -> np.ndarray:
    """mu_i for the shards' update counts: uniform, or proportional to the updates
    (uniform when there were none)."""
    S = len(updates)
    total = sum(updates)
    if mode == "uniform" or total == 0:
        return np.full(S, 1.0 / S)
    if mode != "error":
        raise ValueError(f"unknown mixing {mode!r}; choose from {', '.join(MIXING_MODES)}")
    return np.asarray(updates, dtype=np.float64) / total


def mix(results: list, m: np.ndarray, c: float, mode: str
        ) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """The mixed weights and lazy-averaging sum after an epoch whose shards returned
    ``results`` (:func:`run_shard_epoch`, shard 0's ``u`` including the previous U),
    from mixed weights ``m`` at step counter ``c``: ``(m', U', updates per shard)``
    (see the module docstring). Shards summed in shard order; float64 sums."""
    updates = [int(r[3]) for r in results]
    mu = mixing_weights(updates, mode)
    total_steps = sum(int(r[2]) for r in results)
    c_new = c + total_steps
    acc = np.zeros(m.size)
    tmp = np.empty(m.size)
    for mu_i, (w_i, _, _, _) in zip(mu, results):
        np.multiply(w_i, mu_i, out=tmp, dtype=np.float64)
        acc += tmp
    m_new = aligned_zeros(m.size)
    m_new[:] = acc
    acc[:] = results[0][1]
    for _, u_i, _, _ in results[1:]:
        acc += u_i
    for mu_i, (w_i, _, steps, _) in zip(mu, results):
        k = c_new * mu_i - (c + steps)
        if k != 0.0:           # exactly 0 with one shard: U' is shard 0's u
            np.subtract(w_i, m, out=tmp, dtype=np.float64)
            tmp *= k
            acc += tmp
    return m_new, acc.astype(np.float32), updates


def averaged_weights(m: np.ndarray, U: np.ndarray, c: float, average: bool) -> np.ndarray:
    """The weights a mixed run hands out after step ``c``: :func:`final_weights` of the
    mixed weights ``m`` (as float32) and the averaging sum ``U``; O(dim)."""
    return final_weights(np.asarray(m, dtype=np.float32), U, c, average)


class ParameterMixing:
    """``learner`` (an online learner) trained by iterative parameter mixing over
    ``shards`` shards, shard after shard in this process, or by ``runner`` (the class
    that runs the shards elsewhere: :func:`arboreal.distributed.parameter_mixing` gives
    the Dask one, with its ``client``; this package never touches a cluster);
    ``mode``: "uniform" or "error". A learner as far as ``Parser.train`` is concerned
    (``start``, ``fit``)."""

    def __init__(self, learner, client=None, shards: int = 1, mode: str = "uniform",
                 runner=None):
        if client is not None and runner is None:
            raise ArborealError("parameter mixing on a cluster: use "
                                "arboreal.distributed.parameter_mixing(client, ...)")
        if not is_online(learner):
            raise ArborealError(
                "iterative parameter mixing (--scheduler) is for the online learners "
                f"({', '.join(ONLINE_LEARNERS)}); {getattr(learner, 'name', learner)!s} "
                "is not one: train it without --scheduler")
        if mode not in MIXING_MODES:
            raise ArborealError(f"unknown mixing {mode!r}; choose from {', '.join(MIXING_MODES)}")
        if shards < 1:
            raise ArborealError("parameter mixing needs at least 1 shard")
        self.learner = learner
        self.client = client
        self.runner = runner or _LocalRunner
        self.shards = int(shards)
        self.mode = mode
        self.name = getattr(learner, "name", "online")
        self.labeled = False
        #: updates (mistakes) of each shard in each epoch, filled by fit
        self.history: list[list[int]] = []

    def config(self) -> dict:
        """What a model file records about the mixing."""
        return {"shards": self.shards, "mixing": self.mode}

    def start(self, data: TrainingData, seed: int = 0) -> "MixingLearner":
        """The epoch learner (:class:`MixingLearner`): the data sent to the shards,
        ``m_0 = 0``."""
        return MixingLearner(self, data, seed)

    def fit(self, data: TrainingData, epochs: int, on_epoch: EpochCallback | None = None,
            seed: int = 0) -> np.ndarray:
        return run_epochs(self.start(data, seed), epochs, seed, on_epoch)


class MixingLearner:
    """Iterative parameter mixing as an :class:`~arboreal.learn.trainer.EpochLearner`:
    one epoch runs every shard's epoch and mixes them. The shards' generators are its
    own (:func:`shard_rng`): shard 0's is the trainer's (``rng``, so that one shard is
    single-machine training), the others draw their shard's order in ``run_epoch``. The
    snapshot is the averaged weights (``average``) or the mixed ones. State: the mixed
    weights, the averaging sum, the step counter and the other shards' generators.
    ``close()`` releases what was sent to a cluster."""

    def __init__(self, mixing: ParameterMixing, data: TrainingData, seed: int):
        n = len(data)
        if mixing.shards > n:
            raise ArborealError(f"{mixing.shards} shards for {n} training sentences: give "
                                "--shards at most the number of sentences")
        self.mixing = mixing
        self.parts = shard_indices(n, mixing.shards)
        rngs = [shard_rng(seed, i) for i in range(mixing.shards)]
        self.rng, self.shard_rngs = rngs[0], rngs[1:]
        self.size = len(self.parts[0])
        self.average = bool(getattr(mixing.learner, "average", True))
        self.runner = mixing.runner(mixing, data, self.parts)
        mixing.history = []
        try:
            self.m, self.U, self.c = self.runner.start()
        except BaseException:
            self.runner.close()
            raise

    def run_epoch(self, order: np.ndarray, epoch: int) -> dict:
        orders = [order] + [rng.permutation(len(p))
                            for rng, p in zip(self.shard_rngs, self.parts[1:])]
        self.m, self.U, self.c, updates = self.runner.epoch(orders, self.m, self.U, self.c,
                                                            epoch)
        self.mixing.history.append(updates)
        return {"updates": int(sum(updates))}

    def snapshot(self) -> np.ndarray:
        return self.runner.averaged(self.m, self.U, self.c, self.average)

    def restore(self, snapshot: np.ndarray) -> None:
        """Go on from ``snapshot`` as the mixed weights, the average starting afresh."""
        U = np.zeros(snapshot.size, dtype=np.float32)
        self.m, self.U, self.c = self.runner.load(np.asarray(snapshot, np.float32), U, 1.0)

    def close(self) -> None:
        self.runner.close()

    def state(self) -> dict:
        m, U = self.runner.host(self.m, self.U)
        return {"m": m, "U": U, "c": self.c,
                "rngs": [r.bit_generator.state for r in self.shard_rngs],
                "history": self.mixing.history}

    def load_state(self, state: dict) -> None:
        for r, s in zip(self.shard_rngs, state["rngs"]):
            r.bit_generator.state = s
        self.m, self.U, self.c = self.runner.load(state["m"], state["U"], float(state["c"]))
        self.mixing.history = [list(h) for h in state["history"]]


def advance_bar(bar, k: int) -> None:
    """``k`` steps of the progress iterator ``bar`` (shards report a whole shard at once)."""
    for _ in range(k):
        next(bar, None)


class _LocalRunner:
    """The shards one after the other in this process."""

    def __init__(self, mixing: ParameterMixing, data: TrainingData, parts: list):
        self.mixing = mixing
        self.data = data
        self.shards = [([data.encoded[j] for j in p], [data.heads[j] for j in p])
                       for p in parts]

    def start(self):
        dim = self.data.features.dim
        return aligned_zeros(dim), np.zeros(dim, dtype=np.float32), 1.0

    def epoch(self, orders, m, U, c, epoch):
        bar = iter(self.data.wrap(range(len(self.data)), epoch))
        results = []
        for i, ((enc, heads), order) in enumerate(zip(self.shards, orders)):
            results.append(run_shard_epoch(self.mixing.learner, self.data.features, enc,
                                           heads, self.data.structure, order, m,
                                           U if i == 0 else None, c, epoch))
            advance_bar(bar, len(order))
        advance_bar(bar, len(self.data))
        m, U, updates = mix(results, m, c, self.mixing.mode)
        return m, U, c + len(self.data), updates

    def averaged(self, m, U, c, average):
        return averaged_weights(m, U, c, average)

    def host(self, m, U):
        """The mixed weights and averaging sum as arrays here."""
        return m, U

    def load(self, m, U, c):
        """``(m, U, c)`` of an epoch's start from arrays here."""
        out = aligned_zeros(m.size)
        out[:] = m
        return out, np.array(U, dtype=np.float32), c

    def close(self) -> None:
        pass


def parameter_mixing(client=None, shards: int = 1, mode: str = "uniform", runner=None
                     ) -> Callable[[object], ParameterMixing]:
    """The ``mixing`` argument of :meth:`arboreal.models.Parser.train`: wraps the
    parser's learner in :class:`ParameterMixing` (an error for a learner that is not
    online); the shards run in this process (on a Dask cluster:
    :func:`arboreal.distributed.parameter_mixing`)."""
    def wrap(learner) -> ParameterMixing:
        return ParameterMixing(learner, client, shards, mode, runner)

    return wrap
