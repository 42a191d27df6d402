"""Log-linear (CRF) training of first-order parsers (Koo et al. 2007, §4.1).

Objective (the paper's form, minimised):

    L(w) = C * sum_i [log Z(x_i; w) - w . F(x_i, y_i)] + 0.5 * ||w||^2

i.e. C times the negative conditional log-likelihood of the gold trees plus an L2
regulariser; C is the inverse regularisation strength (larger C = weaker
regularisation; the Gaussian-prior form sum_i -log P + ||w||^2 / (2 sigma^2) is the
same objective divided by C with sigma^2 = C). The gradient is

    dL/dw = w + C * sum_i (E_{P(y|x_i)}[F(x_i, y)] - F(x_i, y_i)),

expected minus observed feature counts, the expectations from the arc marginals of
:mod:`arboreal.inference.partition` (inside-outside for projective trees, the
Matrix-Tree Theorem for non-projective ones; single- or multi-root as the data says).

Speed: sentences are grouped into length buckets once; per objective evaluation
each bucket's arc scores are padded into one (B, N+1, N+1) array and log Z and the
marginals are computed by one batched call; expected counts are then scattered with
``FeatureSet.accumulate_dense``. Observed counts are computed once. The optimisation runs
over the *active* coordinates only (the hash buckets that some arc of the training
data fires): the other coordinates have zero data gradient, so their optimum is 0
exactly and leaving them out changes nothing but memory.

Optimisers: ``"lbfgs"`` (scipy L-BFGS-B, batch, one iteration = one epoch for the
``on_epoch`` callback; the paper used conjugate gradient, a batch method of the same
family) and ``"adagrad"`` (mini-batch stochastic, for large data).

Higher-order parts (``arboreal train --order 2 --learner loglinear``): the same
objective over the trees the model's decoder searches (projective trees over the
pruned arcs), with log Z and the expected arc and part features from the model's
inside-outside (:func:`arboreal.inference.higher_order.grand_sibling_marginals`
through :func:`arboreal.learn.part_expectation`), one sentence at a time, L-BFGS
only.

Labels: this learner trains the unlabeled arc model; labels come from the parser's
second-stage labeler, exactly as for the perceptron and MIRA (see docs/koo2007.md).
Its subclass :class:`arboreal.learn.labeled_loglinear.LabeledLogLinear`
(``--learner loglinear-labeled`` / ``--labeled-partition``) trains arcs and labels
jointly through the labeled partition function (Koo et al. 2007 §3.4).
"""
from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np

from arboreal._arrays import aligned_zeros, as_aligned
from arboreal.inference.structure import TreeStructure, length_buckets
from arboreal.learn import BatchLearner, TrainingData, part_expectation, require_marginals
from arboreal.learn.trainer import run_epochs

__all__ = ["LogLinear", "LbfgsLearner", "AdagradLearner", "loglinear_objective",
           "length_buckets", "ScoredBuckets"]


def accumulate_dense(features, enc, coef: np.ndarray, out: np.ndarray, scale: float) -> None:
    """``features.accumulate`` for dense coefficients (marginals), fast path when possible.

    Feature sets that provide ``accumulate_dense`` (arboreal's hashed first-order
    :class:`~arboreal.features.FeatureSet`: the adjoint of its scoring kernel) use it;
    any other feature set uses its own ``accumulate``.
    """
    dense = getattr(features, "accumulate_dense", None)
    if dense is not None:
        dense(enc, coef, out, scale)
    else:
        features.accumulate(enc, coef, out, scale)


def logz_and_marginals(scores: np.ndarray, lengths: np.ndarray, structure: TreeStructure
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Batched log Z (B,) and arc marginals (B, N+1, N+1) of padded arc scores, float64."""
    logz, mu = structure.log_partition_and_marginals(scores, lengths)
    return np.asarray(logz, dtype=np.float64), np.asarray(mu, dtype=np.float64)


def batch_marginals(scores: np.ndarray, lengths: np.ndarray, structure: TreeStructure
                    ) -> np.ndarray:
    """Batched arc marginals (B, N+1, N+1) of padded arc scores, float64."""
    return np.asarray(structure.marginals(scores, lengths), dtype=np.float64)


class ScoredBuckets:
    """The training sentences of an :class:`TrainingData`, grouped in length buckets.

    Gives padded (B, N+1, N+1) arc scores of a bucket for a weight vector and
    scatters padded per-arc coefficients back into feature space.
    """

    def __init__(self, data: TrainingData, growth: float = 1.15):
        self.data = data
        self.features = data.features
        self.encoded = data.encoded
        self.heads = [np.asarray(h, dtype=np.int64) for h in data.heads]
        self.lengths = np.array([len(h) - 1 for h in self.heads], dtype=np.int64)
        self.buckets = [b for b in length_buckets(self.lengths, growth) if self.lengths[b].max() > 0]
        # feature sets with batch kernels (arboreal's FeatureSet) score and accumulate a
        # bucket in one call; its sentences are packed once, on first use
        self._batched = hasattr(self.features, "arc_scores_batch")
        self._packed: dict[bytes, object] = {}

    def _pack(self, bucket: np.ndarray):
        key = np.asarray(bucket, dtype=np.int64).tobytes()
        packed = self._packed.get(key)
        if packed is None:
            packed = self.features.pack([self.encoded[i] for i in bucket])
            self._packed[key] = packed
        return packed

    def scores(self, bucket: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Padded arc scores (B, N+1, N+1) float64 and lengths (B,) of one bucket."""
        lengths = self.lengths[bucket]
        if self._batched:
            return self.features.arc_scores_batch(self._pack(bucket), w), lengths
        N = int(lengths.max())
        S = np.zeros((len(bucket), N + 1, N + 1))
        for b, i in enumerate(bucket):
            n = lengths[b]
            S[b, : n + 1, : n + 1] = self.features.arc_scores(self.encoded[i], w)
        return S, lengths

    def gold_scores(self, bucket: np.ndarray, S: np.ndarray) -> np.ndarray:
        """Score of each gold tree (B,) under padded scores S."""
        out = np.empty(len(bucket))
        for b, i in enumerate(bucket):
            h = self.heads[i]
            out[b] = S[b, h[1:], np.arange(1, len(h))].sum()
        return out

    def accumulate(self, bucket: np.ndarray, coef: np.ndarray, out: np.ndarray,
                   scale: float) -> None:
        """``out += scale * sum_b sum_{h,m} coef[b, h, m] f(x_b, h, m)``."""
        if self._batched:
            self.features.accumulate_dense_batch(self._pack(bucket), coef, out, scale)
            return
        for b, i in enumerate(bucket):
            n = self.lengths[i]
            accumulate_dense(self.features, self.encoded[i], coef[b, : n + 1, : n + 1], out, scale)

    def observed(self, dim: int, indices: Sequence[int] | None = None) -> np.ndarray:
        """Gold feature counts sum_i F(x_i, y_i) (dim,) float64."""
        out = np.zeros(dim)
        idx = range(len(self.heads)) if indices is None else indices
        for i in idx:
            self.features.accumulate_tree(self.encoded[i], self.heads[i], out, 1.0)
        return out

    def active(self, dim: int) -> np.ndarray:
        """Indices (sorted int64) of the feature buckets fired by some arc of the data."""
        touched = np.zeros(dim)
        for i, enc in enumerate(self.encoded):
            n = self.lengths[i]
            if n == 0:
                continue
            ones = np.ones((n + 1, n + 1))
            np.fill_diagonal(ones, 0.0)
            ones[:, 0] = 0.0
            accumulate_dense(self.features, enc, ones, touched, 1.0)
        return np.flatnonzero(touched)


def loglinear_objective(sb: ScoredBuckets, w: np.ndarray, C: float,
                        structure: TreeStructure, observed: np.ndarray | None = None,
                        buckets: Sequence[np.ndarray] | None = None,
                        regularize: float = 1.0) -> tuple[float, np.ndarray]:
    """Value and gradient of C * sum_i -log P(y_i | x_i; w) + regularize * 0.5 ||w||^2.

    The sum runs over ``buckets`` (default: every sentence). ``observed``: the gold
    feature counts of exactly those sentences (computed when None). Returns
    ``(value, grad)`` with grad (dim,) float64. Cost: one scoring pass, one batched
    inside-outside / Matrix-Tree pass and one dense accumulate pass, O(sum_i n_i^3).
    """
    buckets = sb.buckets if buckets is None else buckets
    if observed is None:
        observed = sb.observed(w.shape[0], np.concatenate(list(buckets)) if buckets else [])
    # 64-byte aligned copies: a feature's weight block then spans whole cache lines
    w = as_aligned(w, np.float64)
    grad = aligned_zeros(w.shape[0], np.float64)
    np.multiply(w, regularize, out=grad)
    grad -= C * observed
    value = 0.5 * regularize * float(w @ w)
    for bucket in buckets:
        S, lengths = sb.scores(bucket, w)
        logz, mu = logz_and_marginals(S, lengths, structure)
        value += C * float((logz - sb.gold_scores(bucket, S)).sum())
        sb.accumulate(bucket, mu, grad, C)
    return value, grad


class LogLinear(BatchLearner):
    """Conditional log-likelihood training (Koo et al. 2007 §4.1): the ``loglinear`` learner.

    Args:
        C: weight of the data term (inverse regularisation strength), see the module
            docstring.
        optimizer: ``"lbfgs"`` (batch L-BFGS, one iteration per epoch) or
            ``"adagrad"`` (mini-batch AdaGrad, one pass over the data per epoch).
        batch_size, learning_rate: AdaGrad's mini-batch size (sentences) and step.
        memory: number of L-BFGS correction pairs.
        verbose: print the objective per epoch to stderr.
        laplacian: lambda of the Laplacian penalty ``lambda/2 w' L w`` over the
            word-pair features of a lexicon (:mod:`arboreal.learn.laplacian`; the
            features need a lexicon), added to the objective; 0: none. L-BFGS only.

    ``fit(data, epochs)`` returns the weights (dim,) after ``epochs`` iterations
    (L-BFGS may stop earlier when converged; ``on_epoch`` is then not called again).
    """

    name = "loglinear"
    #: trains second-order models too (siblings and grandparents: their marginals by
    #: inside-outside over the model's pruned arcs, ``TrainingData.expectation``)
    trains_parts = True
    #: a distribution over trees: gold trees must be among the trees it covers
    marginal_based = True
    #: C values ``arboreal train`` chooses among on held-out data when none is given
    #: (the grid of Koo et al. 2007's rerun, docs/koo2007.md)
    C_GRID = (0.1, 1.0, 10.0)
    #: L-BFGS iterations when the user gives no --epochs (the best one is kept on dev)
    default_epochs = 25

    def __init__(self, C: float = 1.0, optimizer: str = "lbfgs", batch_size: int = 256,
                 learning_rate: float = 0.1, memory: int = 10, verbose: bool = False,
                 laplacian: float = 0.0):
        if C <= 0:
            raise ValueError("C must be positive")
        if laplacian < 0:
            raise ValueError("laplacian must be >= 0")
        if laplacian and optimizer != "lbfgs":
            raise ValueError("the Laplacian penalty is for the lbfgs optimizer")
        self.laplacian = float(laplacian)
        if optimizer not in ("lbfgs", "adagrad"):
            raise ValueError(f"unknown optimizer {optimizer!r}; choose lbfgs or adagrad")
        self.C = float(C)
        self.optimizer = optimizer
        self.batch_size = int(batch_size)
        self.learning_rate = float(learning_rate)
        self.memory = int(memory)
        self.verbose = bool(verbose)
        self.history: list[dict] = []

    def start(self, data: TrainingData, seed: int = 0):
        """The epoch learner on ``data``: :class:`LbfgsLearner` (one L-BFGS iteration
        per epoch) or :class:`AdagradLearner` (one pass of mini-batches per epoch, in
        the trainer's order)."""
        require_marginals(data, self.name)
        self.history = []
        if not data.arc_factored:
            if self.optimizer != "lbfgs" or self.laplacian:
                raise ValueError("log-linear training with higher-order parts uses L-BFGS "
                                 "without the Laplacian penalty")
            return self._parts_learner(data)
        dim = data.features.dim
        sb = ScoredBuckets(data)
        active = sb.active(dim)
        if self.optimizer == "lbfgs":
            graph = None
            if self.laplacian:
                from arboreal.learn.laplacian import lexical_graph

                graph = lexical_graph(data)
                # similar pairs unseen in training get weights through the penalty
                active = np.union1d(active, graph.ids)
            return self._lbfgs_learner(data, sb, active, graph)
        return self._adagrad_learner(data, sb, active)

    def fit(self, data: TrainingData, epochs: int,
            on_epoch: Callable[[int, np.ndarray], None] | None = None,
            seed: int = 0) -> np.ndarray:
        return run_epochs(self.start(data, seed), epochs, seed, on_epoch)

    def _lbfgs_learner(self, data, sb, active, graph=None) -> "LbfgsLearner":
        dim = data.features.dim
        observed = sb.observed(dim)
        w = np.zeros(dim)

        def fun(x):
            w[:] = 0.0
            w[active] = x
            value, grad = loglinear_objective(sb, w, self.C, data.structure, observed)
            if graph is not None:
                extra, g = graph.penalty(w, self.laplacian)
                value += extra
                grad[graph.ids] += g
            return value, grad[active]

        return LbfgsLearner(self, fun, active, dim, self.name)

    def _parts_learner(self, data) -> "LbfgsLearner":
        """L-BFGS over arc and part weights, the expectations from the part marginals
        of each sentence's pruned arcs (:func:`part_expectation`), one at a time."""
        dim = data.features.dim
        observed = np.zeros(dim)
        data.observed(observed)
        # the features some kept part fires: exactly where the expectation under w = 0
        # (every tree the decoder searches equally likely) is positive
        touched = np.zeros(dim)
        zero = np.zeros(dim)
        for i in range(len(data)):
            part_expectation(data, i, zero, touched, 1.0)
        active = np.flatnonzero((touched != 0.0) | (observed != 0.0))
        w = np.zeros(dim)

        def fun(x):
            w[:] = 0.0
            w[active] = x
            grad = w - self.C * observed
            value = 0.5 * float(x @ x) - self.C * float(w @ observed)
            for i in range(len(data)):
                value += self.C * part_expectation(data, i, w, grad, self.C)
            return value, grad[active]

        return LbfgsLearner(self, fun, active, dim, self.name)

    def _adagrad_learner(self, data, sb, active) -> "AdagradLearner":
        dim = data.features.dim
        N = len(sb.heads)

        def batch_objective(w, idx):
            buckets = [idx[b] for b in length_buckets(sb.lengths[idx])]
            return loglinear_objective(sb, w, self.C, data.structure,
                                       sb.observed(dim, idx), buckets, regularize=len(idx) / N)

        return AdagradLearner(self, batch_objective, np.flatnonzero(sb.lengths > 0), active,
                              dim, self.name)


#: scipy's L-BFGS-B tolerances as ``LogLinear`` has always passed them to
#: ``scipy.optimize.minimize`` (``gtol``, ``ftol``)
LBFGS_GTOL, LBFGS_FTOL = 1e-9, 1e-12


class LbfgsLearner:
    """L-BFGS over the ``active`` coordinates of a ``dim`` vector as an
    :class:`~arboreal.learn.trainer.EpochLearner`: one epoch is one L-BFGS iteration.

    It drives scipy's L-BFGS-B routine (``scipy.optimize._lbfgsb.setulb``, the one
    ``scipy.optimize.minimize(method="L-BFGS-B")`` calls) through its reverse
    communication exactly as ``minimize`` does: ``fun`` evaluated where the routine asks
    (never twice in a row at the same point, as scipy's memoization), an epoch ending
    where it reports a new iterate. So the iterates are bit for bit those of
    ``minimize`` with the same options (a test checks it), and the routine's whole state
    is a handful of numpy arrays that a checkpoint saves and restores exactly, which a
    call of ``minimize`` would hide. When the routine stops on its own (converged, or
    the line search failed) the learner is ``exhausted`` and ``final_snapshot`` is its
    last point. The order the trainer draws is not used (a batch method).

    ``fun(x) -> (value, grad on the active coordinates)``; ``owner`` (the
    :class:`LogLinear`) gets one ``history`` record per iteration.
    """

    def __init__(self, owner: "LogLinear", fun, active: np.ndarray, dim: int, label: str):
        from scipy.optimize import _lbfgsb

        self._setulb = _lbfgsb.setulb
        self.owner, self.fun, self.active, self.dim, self.label = owner, fun, active, dim, label
        n, m = len(active), owner.memory
        self.m = m
        self.size = 1
        self.converged = False
        self.exhausted = n == 0
        self.factr = LBFGS_FTOL / np.finfo(float).eps
        self.bounds = (np.zeros(n), np.zeros(n), np.zeros(n, np.int32))   # unbounded
        self.x = np.zeros(n)
        self.f = 0.0
        self.g = np.zeros(n)
        self.work = {"wa": np.zeros(2 * m * n + 5 * n + 11 * m * m + 8 * m),
                     "iwa": np.zeros(3 * n, np.int32), "task": np.zeros(2, np.int32),
                     "ln_task": np.zeros(2, np.int32), "lsave": np.zeros(4, np.int32),
                     "isave": np.zeros(44, np.int32), "dsave": np.zeros(29)}
        self.iterations = 0
        self.t0 = time.perf_counter()
        self.memo_x = self.memo_f = self.memo_g = None
        self.last = float("nan")
        if n:
            self._evaluate(self.x)      # as minimize does when it starts

    def _evaluate(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        if self.memo_x is None or not np.array_equal(x, self.memo_x):
            self.memo_x = np.array(x, dtype=np.float64)
            value, grad = self.fun(np.copy(x))
            if not np.isscalar(value):
                value = np.asarray(value).item()
            self.memo_f, self.memo_g = value, np.atleast_1d(grad)
            self.last = value
        return self.memo_f, self.memo_g

    def run_epoch(self, order: np.ndarray, epoch: int) -> dict | None:
        if self.exhausted:
            return None
        low, up, nbd = self.bounds
        k = self.work
        while True:
            self.g = self.g.astype(np.float64)
            try:
                self._setulb(self.m, self.x, low, up, nbd, self.f, self.g, self.factr,
                             LBFGS_GTOL, k["wa"], k["iwa"], k["task"], k["lsave"], k["isave"],
                             k["dsave"], 20, k["ln_task"])
            except TypeError as exc:       # another scipy's routine
                import scipy

                raise ValueError(f"the L-BFGS learner drives scipy's L-BFGS-B routine as "
                                 f"scipy 1.15 to 1.17 have it; scipy {scipy.__version__} "
                                 f"calls it otherwise ({exc})") from None
            task = k["task"][0]
            if task == 3:                     # evaluate f and g at x
                self.f, self.g = self._evaluate(self.x)
            elif task == 1:                   # a new iterate: the epoch's end
                self.iterations += 1
                break
            else:                             # converged, or stopped: no more iterates
                self.exhausted = True
                return None
        owner = self.owner
        rec = {"epoch": epoch, "objective": self.last,
               "seconds": time.perf_counter() - self.t0}
        owner.history.append(rec)
        owner._log(f"{self.label} iter {epoch}: objective {rec['objective']:.6g} "
                   f"({rec['seconds']:.1f} s)")
        return {"objective": self.last}

    def _full(self, x: np.ndarray) -> np.ndarray:
        full = np.zeros(self.dim)
        full[self.active] = x
        return full

    def snapshot(self) -> np.ndarray:
        return self._full(self.x)

    def final_snapshot(self) -> np.ndarray:
        return self._full(self.x)

    def restore(self, snapshot: np.ndarray) -> None:
        """Start afresh from ``snapshot`` (the L-BFGS memory is dropped)."""
        self.__init__(self.owner, self.fun, self.active, self.dim, self.label)
        self.x[:] = snapshot[self.active]

    def state(self) -> dict:
        return {"x": self.x, "f": float(self.f), "g": self.g, "work": self.work,
                "iterations": self.iterations, "exhausted": self.exhausted,
                "memo": None if self.memo_x is None else
                {"x": self.memo_x, "f": float(self.memo_f), "g": self.memo_g},
                "last": self.last, "history": self.owner.history}

    def load_state(self, state: dict) -> None:
        self.x = np.array(state["x"], dtype=np.float64)
        self.f = state["f"]
        self.g = np.array(state["g"], dtype=np.float64)
        self.work = {k: np.array(v, dtype=self.work[k].dtype) for k, v in state["work"].items()}
        self.iterations, self.exhausted = int(state["iterations"]), bool(state["exhausted"])
        memo = state["memo"]
        self.memo_x = None if memo is None else np.array(memo["x"], dtype=np.float64)
        self.memo_f = None if memo is None else memo["f"]
        self.memo_g = None if memo is None else np.array(memo["g"], dtype=np.float64)
        self.last = state["last"]
        self.owner.history = list(state["history"])


class AdagradLearner:
    """Mini-batch AdaGrad over the ``active`` coordinates of a ``dim`` vector as an
    :class:`~arboreal.learn.trainer.EpochLearner`: the items are the non-empty
    sentences; an epoch takes batches of ``batch_size`` of them in the trainer's order.

    ``batch_objective(x, idx) -> (value, grad)`` for the sentences ``idx`` (grad of
    length ``dim``). State: the weights and the sums of squared gradients.
    """

    def __init__(self, owner: "LogLinear", batch_objective, nonempty: np.ndarray,
                 active: np.ndarray, dim: int, label: str):
        self.owner, self.batch_objective, self.nonempty = owner, batch_objective, nonempty
        self.active, self.label = active, label
        self.size = len(nonempty)
        self.x = np.zeros(dim)
        self.G = np.zeros(dim)
        self.t0 = time.perf_counter()

    def run_epoch(self, order: np.ndarray, epoch: int) -> dict:
        owner, active, x, G = self.owner, self.active, self.x, self.G
        items = self.nonempty[order]
        total = 0.0
        for s in range(0, len(items), owner.batch_size):
            value, grad = self.batch_objective(x, items[s: s + owner.batch_size])
            total += value
            g = grad[active]
            G[active] += g * g
            x[active] -= owner.learning_rate * g / (np.sqrt(G[active]) + 1e-8)
        rec = {"epoch": epoch, "objective": total, "seconds": time.perf_counter() - self.t0}
        owner.history.append(rec)
        owner._log(f"{self.label} adagrad epoch {epoch}: running objective {total:.6g} "
                   f"({rec['seconds']:.1f} s)")
        return {"objective": total}

    def snapshot(self) -> np.ndarray:
        return self.x.copy()

    def restore(self, snapshot: np.ndarray) -> None:
        self.x[:] = snapshot

    def state(self) -> dict:
        return {"x": self.x, "G": self.G, "history": self.owner.history}

    def load_state(self, state: dict) -> None:
        self.x[:] = state["x"]
        self.G[:] = state["G"]
        self.owner.history = list(state["history"])
