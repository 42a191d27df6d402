"""Max-margin training by exponentiated gradient (Koo et al. 2007 §4.2, Figure 2).

Primal (minimised):

    L(w) = C * sum_i max_y (E_{i,y} - w . F(x_i, y_i) + w . F(x_i, y)) + 0.5 * ||w||^2,

E_{i,y} = number of words whose head in y differs from the gold tree y_i. Its dual
over distributions alpha_i(y) on the trees of sentence i, parametrised by arc
weights theta[i,h,m] (alpha_i(y) ∝ exp(sum_{(h,m) in y} theta[i,h,m])), is

    Q(theta) = C * sum_i sum_{h,m} mu[i,h,m] (1 - I[i,h,m]) - 0.5 * ||w||^2,
    w = C * sum_i sum_{h,m} (I[i,h,m] - mu[i,h,m]) f(x_i, h, m),

with mu the arc marginals of theta (inside-outside for projective trees, the
Matrix-Tree Theorem otherwise) and I the gold-arc indicator. The online EG update
of Figure 2 (restated in shared/papers/README.md) visits the sentences one at a
time:

    theta'[i] = theta[i] + eta * C * (1 - I[i] + w . f(x_i, ., .)),
    w += C * sum_{h,m} (mu[i] - mu'[i]) f(x_i, h, m).

Implementation notes:

* theta lives in one float32 array over all sentences' (n+1)^2 arcs (offsets per
  sentence); the marginals mu of the current theta are kept beside it (float64), so
  each update costs one scoring pass, one marginal computation and one accumulate of
  ``mu - mu'`` for that sentence. Each column theta[i, :, m] is shifted by its
  maximum after an update: every tree has exactly one arc into m, so the
  distribution is unchanged and the numbers stay small.
* One learning rate per sentence (as in the online EG of Collins et al. 2008, JMLR): a
  sentence's step is kept only if it raises Q; otherwise it is undone (theta, mu and
  w of that sentence restored), the sentence's rate halved and the step retried. So
  Q never decreases, one hard sentence does not slow every other, and each accepted
  step multiplies that sentence's rate by ``growth`` (default 1.5; 1 is the paper's
  halving-only rule), so each rate tracks the largest step that still raises the
  dual. The change of Q is exact and costs one more scoring of the sentence:
  with d = C sum_{h,m} coef f the change of w, w.d comes from the scores at w and
  (w + d).d from the scores at w + d. ``history`` holds one record per pass.
* The primal weights are ``w`` at every moment (``on_epoch`` receives them after
  each pass). With ``primal=True`` the primal objective is evaluated after each
  pass by loss-augmented decoding (Eisner or Chu-Liu-Edmonds on w . f + 1 - I), and
  the duality gap L(w) - Q >= 0 is reported.

Higher-order parts (``arboreal train --order 2 --learner eg``): the same dual over
the projective trees of each sentence's pruned arcs, theta over its arcs and parts
(siblings, grandparents, grand-siblings), the loss on arcs only, marginals by
inside-outside (:func:`arboreal.learn.part_marginals`); the per-sentence rates and
the exact change of the dual as above. The primal (loss-augmented decoding) is not
evaluated there.

Labels: the arc model only; the parser's second-stage labeler assigns labels.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np
from numba import njit

from arboreal._arrays import aligned_zeros
from arboreal.inference.partition import sentence_marginals_kernel
from arboreal.inference.structure import NonProjectiveTrees, ProjectiveTrees, TreeStructure
from arboreal.learn import (BatchLearner, TrainingData, accumulate_marginals, part_marginals,
                            part_scores, require_marginals)
from arboreal.learn.loglinear import ScoredBuckets, accumulate_dense, batch_marginals
from arboreal.learn.trainer import run_epochs

__all__ = ["ExponentiatedGradient", "EGLearner", "primal_objective"]

#: a sentence whose step still lowers the dual after this many halvings of its rate
#: is left as it is for the pass (its step is then below rounding)
MAX_HALVINGS = 30


@njit(cache=True)
def _eg_sentence_step(s, theta, mu, lo, heads, step, projective, single_root, coef):
    """Figure 2's dual update of one sentence, in place; returns the change of gold-arc mass.

    s (n+1, n+1) arc scores w . f; theta / mu: the flat float32 / float64 arrays of all
    sentences, this one's (n+1)^2 entries at ``lo``; heads (n+1,) gold tree.
    theta[h, m] += step * (s[h, m] + 1 - I[h, m]), each column shifted by its maximum
    (the distribution over trees is unchanged) and stored in float32; mu gets the new
    marginals and coef = mu_old - mu_new (what w must be moved along). Entries of
    column 0 and the diagonal stay 0. NaN if the scores are not finite. O(n^3).
    """
    N1 = s.shape[0]
    th = np.zeros((1, N1, N1))
    for m in range(1, N1):
        best = -np.inf
        for h in range(N1):
            if h != m:
                v = np.float64(theta[lo + h * N1 + m]) + step * (s[h, m] + (0.0 if heads[m] == h else 1.0))
                th[0, h, m] = v
                if v > best:
                    best = v
        for h in range(N1):
            if h != m:
                v = np.float32(th[0, h, m] - best)
                theta[lo + h * N1 + m] = v
                th[0, h, m] = v
    new = np.zeros((1, N1, N1))
    if np.isnan(sentence_marginals_kernel(th, projective, single_root, new)):
        return np.nan
    delta = 0.0
    for h in range(N1):
        for m in range(N1):
            k = lo + h * N1 + m
            if m == 0 or h == m:
                coef[h, m] = 0.0
                continue
            old = mu[k]
            coef[h, m] = old - new[0, h, m]
            if heads[m] == h:
                delta += new[0, h, m] - old
            mu[k] = new[0, h, m]
    return delta


def primal_objective(sb: ScoredBuckets, w: np.ndarray, C: float, structure: TreeStructure
                     ) -> tuple[float, float]:
    """Primal max-margin objective and the total hinge loss at ``w``.

    hinge_i = max_y (E_{i,y} + w.F(y)) - w.F(y_i), found exactly by decoding the
    loss-augmented scores w . f(h, m) + 1 - I[h, m]. Returns
    ``(C * sum_i hinge_i + 0.5 ||w||^2, sum_i hinge_i)``. O(sum_i n_i^3).
    """
    hinge = 0.0
    for bucket in sb.buckets:
        S, lengths = sb.scores(bucket, w)
        gold = sb.gold_scores(bucket, S)
        aug = S + 1.0
        for b, i in enumerate(bucket):
            h = sb.heads[i]
            aug[b, h[1:], np.arange(1, len(h))] -= 1.0
        best = structure.decode(aug, lengths)
        for b in range(len(bucket)):
            n = lengths[b]
            hinge += aug[b, best[b, 1: n + 1], np.arange(1, n + 1)].sum() - gold[b]
    return C * hinge + 0.5 * float(w @ w), hinge


class ExponentiatedGradient(BatchLearner):
    """EG max-margin learner (``eg``): Koo et al. 2007 Figure 2.

    Args:
        C: weight of the hinge-loss term (inverse regularisation strength).
        eta: initial learning rate of every sentence (each halved whenever its step
            fails to raise the dual). Default ``30 / (C**2 * N)`` for N training
            sentences: w, and with it the scores w.f, grow like C * N, so the theta
            step eta * C * (w.f) is ~ eta * C^2 * N; the default starts a little
            above the step that EWT samples accepted after one halving (halving is
            cheap, a too-small eta is never corrected).
        beta: initial dual weight of gold arcs (the paper's 9).
        primal: also evaluate the primal objective after each pass (costs one
            scoring + decoding pass).
        shuffle: visit sentences in a fresh random order each pass.
        growth: a sentence's rate is multiplied by this after each of its accepted
            steps (1 = the paper's rule, halving only). Halving alone never corrects
            a too-small eta, and from the beta = 9 initialisation the dual parameters
            of non-gold arcs must move by several units, so a small eta makes the
            first passes nearly idle; growth 1.5 with halving keeps each rate near the
            largest step that still raises the dual.
        verbose: print dual and primal objective per pass to stderr.

    After ``fit``, ``history`` holds one record per pass: epoch, dual, primal
    (NaN when not computed), eta (the median sentence rate), halvings (rate halvings
    in the pass), refused (sentences left unchanged after all halvings), seconds and
    cpu_seconds (since the end of the initialisation, wall and process CPU time).
    """

    name = "eg"
    #: trains second-order models too (siblings, grandparents, grand-siblings: their
    #: marginals by inside-outside over the model's pruned arcs)
    trains_parts = True
    #: a distribution over trees: gold trees must be among the trees it covers
    marginal_based = True
    #: C values ``arboreal train`` chooses among on held-out data when none is given
    #: (EG's usable step shrinks like 1 / C^2, so its grid sits below log-linear's;
    #: docs/koo2007.md)
    C_GRID = (0.003, 0.03, 0.3)
    #: passes when the user gives no --epochs (the best one is kept on dev)
    default_epochs = 25

    def __init__(self, C: float = 1.0, eta: float | None = None, beta: float = 9.0,
                 primal: bool = True, shuffle: bool = True,
                 growth: float = 1.5, verbose: bool = False):
        if C <= 0:
            raise ValueError("C must be positive")
        self.C = float(C)
        self.eta = None if eta is None else float(eta)
        if growth < 1.0:
            raise ValueError("growth must be >= 1")
        self.growth = float(growth)
        if self.eta is not None and self.eta <= 0:
            raise ValueError("eta must be positive")
        self.beta = float(beta)
        self.primal = bool(primal)
        self.shuffle = bool(shuffle)
        self.verbose = bool(verbose)
        self.history: list[dict] = []

    def start(self, data: TrainingData, seed: int = 0) -> "EGLearner":
        """The epoch learner on ``data`` (:class:`EGLearner`): the dual variables are
        initialised here; each epoch is one pass. Its per-sentence step runs the
        built-in families' marginal kernel, so other tree families are refused."""
        if type(data.structure) not in (ProjectiveTrees, NonProjectiveTrees):
            raise ValueError(f"the eg learner runs over projective or non-projective trees "
                             f"(decoder eisner or cle), not {data.structure.name!r}")
        return EGLearner(self, data)

    def fit(self, data: TrainingData, epochs: int,
            on_epoch: Callable[[int, np.ndarray], None] | None = None,
            seed: int = 0) -> np.ndarray:
        learner = self.start(data, seed)
        w = run_epochs(learner, epochs, seed, on_epoch)
        learner.finish()
        return w


class EGLearner:
    """:class:`ExponentiatedGradient`'s passes as an
    :class:`~arboreal.learn.trainer.EpochLearner`: the items are the non-empty sentences,
    one epoch is one pass of Figure 2's updates in the trainer's order (in their own
    order without ``shuffle``), the snapshot the primal weights ``w``. State: ``w``,
    the dual variables, the sentences' rates, the gold mass and ``w . w``."""

    def __init__(self, owner: ExponentiatedGradient, data: TrainingData):
        require_marginals(data, owner.name)
        self.owner = owner
        self.data = data
        C = owner.C
        t_init, c_init = time.perf_counter(), time.process_time()
        self.w = aligned_zeros(data.features.dim, np.float64)  # cache-line aligned blocks
        # the dual variables; initial marginals and w = C sum_i (I - mu_i) f
        self.dual_state = (_ArcDual(data, owner.beta) if data.arc_factored
                           else _PartDual(data, owner.beta))
        self.gold_mass = self.dual_state.init(self.w, C)
        L = np.array([len(h) - 1 for h in data.heads], dtype=np.int64)
        self.n_words = float(L.sum())
        owner.init_seconds = time.perf_counter() - t_init
        owner.init_cpu_seconds = time.process_time() - c_init
        self.eta0 = owner.eta if owner.eta is not None else 30.0 / (C * C * max(1, len(L)))
        self.rates = np.full(len(L), self.eta0)
        owner.history = []
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        self.nonempty = np.flatnonzero(L > 0)
        self.size = len(self.nonempty)
        self.ww = float(self.w @ self.w)
        # the primal needs loss-augmented decoding: arc-factored models only
        self.primal = owner.primal and data.arc_factored
        self.q = self.dual()
        owner._log(f"eg init: dual {self.q:.6g} (C={C}, eta={self.eta0:g}, "
                   f"beta={owner.beta:g})")

    def dual(self) -> float:
        return self.owner.C * (self.n_words - self.gold_mass) - 0.5 * self.ww

    def update(self, i: int) -> tuple[float, float, float, int]:
        """Figure 2's step on sentence i at its own rate, halved until the dual rises;
        returns (gold-mass change, w.d, d.d, halvings), halvings = MAX_HALVINGS when no
        step was taken."""
        C, w, state, rates = self.owner.C, self.w, self.dual_state, self.rates
        scores = state.scores(i, w)
        for halvings in range(MAX_HALVINGS):
            saved = state.save(i)
            delta, coef = state.step(i, scores, rates[i] * C)
            # d = C sum coef f: w.d from the scores at w, (w + d).d from those at w + d,
            # so the dual's change is exact without a pass over w
            wd = C * state.dot(coef, scores)
            state.accumulate(i, coef, w, C)
            dd = C * state.dot(coef, state.scores(i, w)) - wd
            if -C * delta - wd - 0.5 * dd >= 0.0:
                rates[i] *= self.owner.growth
                return delta, wd, dd, halvings
            state.accumulate(i, coef, w, -C)
            state.restore(i, saved)
            rates[i] /= 2.0
        return 0.0, 0.0, 0.0, MAX_HALVINGS

    def run_epoch(self, order: np.ndarray, epoch: int) -> dict:
        owner, data = self.owner, self.data
        items = self.nonempty[order] if owner.shuffle else self.nonempty
        if hasattr(data, "wrap"):
            items = data.wrap(items, epoch)  # progress bar, when the caller gives one
        refused = halved = 0
        for i in items:
            delta, wd, dd, halvings = self.update(int(i))
            self.gold_mass += delta
            self.ww += 2.0 * wd + dd
            halved += halvings
            refused += halvings == MAX_HALVINGS
        self.ww = float(self.w @ self.w)  # the running sum drifts by rounding; exact once a pass
        q_new = self.dual()
        rec = {"epoch": epoch, "dual": q_new, "primal": float("nan"),
               "eta": (float(np.median(self.rates[self.nonempty])) if self.nonempty.size
                       else self.eta0),
               "halvings": int(halved), "refused": int(refused),
               "seconds": time.perf_counter() - self.t0,
               "cpu_seconds": time.process_time() - self.c0}
        self.q = q = q_new
        if self.primal:
            p, _ = primal_objective(self.dual_state.buckets, self.w, owner.C, data.structure)
            rec["primal"] = p
            owner._log(f"eg pass {epoch}: dual {q:.6g}  primal {p:.6g}  gap {p - q:.4g}  "
                       f"median eta {rec['eta']:g}  ({rec['seconds']:.1f} s)")
        else:
            owner._log(f"eg pass {epoch}: dual {q:.6g}  median eta {rec['eta']:g}  "
                       f"({rec['seconds']:.1f} s)")
        owner.history.append(rec)
        return {"dual": q, **({"primal": rec["primal"]} if self.primal else {})}

    def snapshot(self) -> np.ndarray:
        return self.w.copy()

    def restore(self, snapshot: np.ndarray) -> None:
        """The primal weights only (the dual variables are not derived from them)."""
        self.w[:] = snapshot

    def finish(self) -> None:
        """Hand the dual variables to the owner (``theta``, ``rates``, ``offsets``)."""
        self.owner.theta, self.owner.rates = self.dual_state.theta, self.rates
        self.owner.offsets = getattr(self.dual_state, "offsets", None)

    def state(self) -> dict:
        return {"w": self.w, "dual": self.dual_state.state(), "rates": self.rates,
                "gold_mass": self.gold_mass, "ww": self.ww, "q": self.q,
                "history": self.owner.history}

    def load_state(self, state: dict) -> None:
        self.w[:] = state["w"]
        self.dual_state.load_state(state["dual"])
        self.rates[:] = state["rates"]
        self.gold_mass, self.ww, self.q = state["gold_mass"], state["ww"], state["q"]
        self.owner.history = list(state["history"])


class _ArcDual:
    """EG's dual variables of an arc-factored model: theta and its marginals mu of
    every sentence's (n+1)^2 arcs in two flat arrays (float32 / float64)."""

    def __init__(self, data: TrainingData, beta: float):
        self.data = data
        self.buckets = sb = ScoredBuckets(data)
        L = sb.lengths
        self.offsets = np.concatenate([[0], np.cumsum((L + 1) ** 2)]).astype(np.int64)
        self.theta = np.zeros(int(self.offsets[-1]), dtype=np.float32)
        self.mu = np.zeros(int(self.offsets[-1]), dtype=np.float64)
        self.gold = np.concatenate([self.offsets[i] + h[1:] * (L[i] + 1) + np.arange(1, L[i] + 1)
                                    for i, h in enumerate(sb.heads)] or [np.zeros(0, np.int64)])
        self.theta[self.gold] = beta

    def init(self, w: np.ndarray, C: float) -> float:
        """Marginals of the initial theta (batched per length bucket), ``w += C sum_i
        (I - mu_i) f``; returns the gold arcs' mass."""
        sb, L, off = self.buckets, self.buckets.lengths, self.offsets
        for bucket in sb.buckets:
            N = int(L[bucket].max())
            T = np.zeros((len(bucket), N + 1, N + 1))
            for b, i in enumerate(bucket):
                n = L[i]
                T[b, : n + 1, : n + 1] = self.theta[off[i]: off[i + 1]].reshape(n + 1, n + 1)
            M = batch_marginals(T, L[bucket], self.data.structure)
            coef = np.empty_like(M)
            for b, i in enumerate(bucket):
                n = L[i]
                mb = M[b, : n + 1, : n + 1].copy()
                mb[:, 0] = 0.0
                np.fill_diagonal(mb, 0.0)
                self.mu[off[i]: off[i + 1]] = mb.ravel()
                coef[b, : n + 1, : n + 1] = -mb
                coef[b, sb.heads[i][1:], np.arange(1, n + 1)] += 1.0
            sb.accumulate(bucket, coef, w, C)
        return float(self.mu[self.gold].sum())

    def scores(self, i: int, w: np.ndarray) -> np.ndarray:
        return self.data.features.arc_scores(self.data.encoded[i], w)

    def state(self) -> dict:
        return {"theta": self.theta, "mu": self.mu}

    def load_state(self, state: dict) -> None:
        self.theta[:] = state["theta"]
        self.mu[:] = state["mu"]

    def save(self, i: int) -> tuple:
        lo, hi = self.offsets[i], self.offsets[i + 1]
        return self.theta[lo:hi].copy(), self.mu[lo:hi].copy()

    def restore(self, i: int, saved: tuple) -> None:
        lo, hi = self.offsets[i], self.offsets[i + 1]
        self.theta[lo:hi], self.mu[lo:hi] = saved

    def step(self, i: int, s: np.ndarray, step: float) -> tuple[float, np.ndarray]:
        n = s.shape[0] - 1
        coef = np.empty((n + 1, n + 1))
        delta = _eg_sentence_step(s, self.theta, self.mu, self.offsets[i],
                                  self.buckets.heads[i], step, self.data.projective,
                                  self.data.single_root, coef)
        if np.isnan(delta):
            raise ValueError("EG: arc scores are not finite (diverged weights?)")
        return delta, coef

    @staticmethod
    def dot(coef: np.ndarray, s: np.ndarray) -> float:
        return float((coef * s).sum())

    def accumulate(self, i: int, coef: np.ndarray, w: np.ndarray, scale: float) -> None:
        accumulate_dense(self.data.features, self.data.encoded[i], coef, w, scale)


class _PartDual:
    """EG's dual variables of a model with parts (siblings, grandparents,
    grand-siblings): per sentence, theta and its marginals over the arcs and parts of
    its pruned PartIndex (``{"arc": (n+1, n+1), kind: flat}``, float64). The loss is on
    arcs only (a part's theta moves by its score, an arc's by its score + 1 - I);
    marginals by inside-outside (:func:`arboreal.learn.part_marginals`). Memory: two
    float64 values per kept arc and part of every sentence."""

    def __init__(self, data: TrainingData, beta: float):
        self.data = data
        self.beta = beta
        self.theta: list[dict] = []
        self.mu: list[dict] = []
        self.loss: list[np.ndarray] = []   # 1 - I on each arc

    def init(self, w: np.ndarray, C: float) -> float:
        data, gold_mass = self.data, 0.0
        for i, heads in enumerate(data.heads):
            n = len(heads) - 1
            enc = data.encoded[i]
            index = data.part_index(i)
            loss = np.ones((n + 1, n + 1))
            loss[heads[1:], np.arange(1, n + 1)] = 0.0
            theta = {"arc": self.beta * (1.0 - loss)}
            for k, size in (("sib", index.n_sib), ("grand", index.n_grand),
                            ("gsib", index.n_gsib)):
                if k in data.parts.parts:
                    theta[k] = np.zeros(size)
            mu = part_marginals(data, i, theta["arc"], theta)[1] if n else \
                {k: np.zeros_like(v) for k, v in theta.items()}
            self.theta.append(theta)
            self.mu.append(mu)
            self.loss.append(loss)
            gold_mass += float(mu["arc"][heads[1:], np.arange(1, n + 1)].sum())
            data.features.accumulate_tree(enc, heads, w, C)
            data.parts.accumulate_tree(enc.codes, heads, w, C)
            if n:
                accumulate_marginals(data, i, mu, w, -C)
        return gold_mass

    def state(self) -> dict:
        """theta and mu of every sentence, each kind's arrays concatenated (a
        checkpoint of few large arrays rather than many small ones)."""
        out: dict = {"sizes": {}, "theta": {}, "mu": {}}
        for k in (self.theta[0] if self.theta else {}):
            out["sizes"][k] = np.array([t[k].size for t in self.theta], dtype=np.int64)
            out["theta"][k] = np.concatenate([t[k].ravel() for t in self.theta])
            out["mu"][k] = np.concatenate([m[k].ravel() for m in self.mu])
        return out

    def load_state(self, state: dict) -> None:
        for k, sizes in state["sizes"].items():
            cuts = np.cumsum(sizes)[:-1]
            for which, parts in (("theta", self.theta), ("mu", self.mu)):
                for part, flat in zip(parts, np.split(state[which][k], cuts)):
                    part[k] = flat.reshape(part[k].shape).copy()

    def scores(self, i: int, w: np.ndarray) -> dict:
        arc, parts = part_scores(self.data, i, w)
        return {"arc": arc, **{k: v for k, v in parts.items() if v is not None}}

    def save(self, i: int) -> tuple:
        return self.theta[i], self.mu[i]

    def restore(self, i: int, saved: tuple) -> None:
        self.theta[i], self.mu[i] = saved

    def step(self, i: int, scores: dict, step: float) -> tuple[float, dict]:
        old_theta, old_mu = self.theta[i], self.mu[i]
        theta = {k: v + step * scores[k] for k, v in old_theta.items()}
        theta["arc"] += step * self.loss[i]
        # every word has exactly one head: shifting a column leaves the distribution
        arc = theta["arc"]
        arc -= np.where(self.data.part_index(i).allowed, arc, -np.inf).max(axis=0,
                                                                            initial=-np.inf)
        arc[:, 0] = 0.0
        _, mu = part_marginals(self.data, i, arc, theta)
        self.theta[i], self.mu[i] = theta, mu
        heads = self.data.heads[i]
        gold = (heads[1:], np.arange(1, len(heads)))
        delta = float(mu["arc"][gold].sum() - old_mu["arc"][gold].sum())
        return delta, {k: old_mu[k] - mu[k] for k in mu}

    @staticmethod
    def dot(coef: dict, scores: dict) -> float:
        return float(sum((coef[k] * scores[k]).sum() for k in coef))

    def accumulate(self, i: int, coef: dict, w: np.ndarray, scale: float) -> None:
        accumulate_marginals(self.data, i, coef, w, scale)
