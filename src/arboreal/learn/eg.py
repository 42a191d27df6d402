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

Labels: the arc model only; the parser's second-stage labeler assigns labels.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np
from numba import njit

from arboreal.features.hashing import aligned_zeros
from arboreal.inference.partition import sentence_marginals_kernel
from arboreal.learn import BatchLearner, TrainingData, require_arc_factored
from arboreal.learn.loglinear import ScoredBuckets, accumulate_dense, batch_marginals

__all__ = ["ExponentiatedGradient", "primal_objective"]

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


def _decode_batch(S: np.ndarray, lengths: np.ndarray, projective: bool,
                  single_root: bool) -> np.ndarray:
    if projective:
        from arboreal.inference.eisner import eisner
        return np.asarray(eisner(S, single_root=single_root, lengths=lengths))
    from arboreal.inference.mst import chu_liu_edmonds
    return np.asarray(chu_liu_edmonds(S, single_root=single_root, lengths=lengths))


def primal_objective(sb: ScoredBuckets, w: np.ndarray, C: float, projective: bool,
                     single_root: bool) -> tuple[float, float]:
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
        best = _decode_batch(aug, lengths, projective, single_root)
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

    def fit(self, data: TrainingData, epochs: int,
            on_epoch: Callable[[int, np.ndarray], None] | None = None,
            seed: int = 0) -> np.ndarray:
        require_arc_factored(data, "eg")
        C = self.C
        fs = data.features
        proj, sroot = data.projective, data.single_root
        sb = ScoredBuckets(data)
        L = sb.lengths
        size = (L + 1) ** 2
        offsets = np.concatenate([[0], np.cumsum(size)]).astype(np.int64)
        theta = np.zeros(int(offsets[-1]), dtype=np.float32)
        mu = np.zeros(int(offsets[-1]), dtype=np.float64)
        gold_idx = []
        for i, h in enumerate(sb.heads):
            n = L[i]
            idx = offsets[i] + h[1:] * (n + 1) + np.arange(1, n + 1)
            gold_idx.append(idx)
        all_gold = np.concatenate(gold_idx) if gold_idx else np.zeros(0, dtype=np.int64)
        theta[all_gold] = self.beta
        valid = {}  # n -> bool (n+1, n+1) of scoreable arcs

        def valid_mask(n):
            m = valid.get(n)
            if m is None:
                m = np.ones((n + 1, n + 1), dtype=bool)
                m[:, 0] = False
                np.fill_diagonal(m, False)
                valid[n] = m
            return m

        # initial marginals (batched per bucket) and w = C sum_i (I - mu_i) f
        t_init, c_init = time.perf_counter(), time.process_time()
        w = aligned_zeros(fs.dim, np.float64)   # cache-line aligned weight blocks
        for bucket in sb.buckets:
            N = int(L[bucket].max())
            T = np.zeros((len(bucket), N + 1, N + 1))
            for b, i in enumerate(bucket):
                n = L[i]
                T[b, : n + 1, : n + 1] = theta[offsets[i]: offsets[i + 1]].reshape(n + 1, n + 1)
            M = batch_marginals(T, L[bucket], proj, sroot)
            coef = np.empty_like(M)
            for b, i in enumerate(bucket):
                n = L[i]
                mb = np.where(valid_mask(n), M[b, : n + 1, : n + 1], 0.0)
                mu[offsets[i]: offsets[i + 1]] = mb.ravel()
                coef[b, : n + 1, : n + 1] = -mb
                coef[b, sb.heads[i][1:], np.arange(1, n + 1)] += 1.0
            sb.accumulate(bucket, coef, w, C)

        n_words = float(L.sum())
        self.init_seconds = time.perf_counter() - t_init
        self.init_cpu_seconds = time.process_time() - c_init

        rng = np.random.default_rng(seed)
        eta0 = self.eta if self.eta is not None else 30.0 / (C * C * max(1, len(L)))
        rates = np.full(len(L), eta0)
        self.history = []
        t0, c0 = time.perf_counter(), time.process_time()
        nonempty = np.flatnonzero(L > 0)
        gold_mass = float(mu[all_gold].sum())
        ww = float(w @ w)

        def dual() -> float:
            return C * (n_words - gold_mass) - 0.5 * ww

        def update(i: int) -> tuple[float, float, float, int]:
            """Figure 2's step on sentence i at its own rate, halved until the dual
            rises; returns (gold-mass change, w.d, d.d, halvings), halvings =
            MAX_HALVINGS when no step was taken."""
            n, lo, hi = int(L[i]), offsets[i], offsets[i + 1]
            enc = data.encoded[i]
            s = fs.arc_scores(enc, w)
            coef = np.empty((n + 1, n + 1))
            for halvings in range(MAX_HALVINGS):
                saved = theta[lo:hi].copy(), mu[lo:hi].copy()
                delta = _eg_sentence_step(s, theta, mu, lo, sb.heads[i], rates[i] * C,
                                          proj, sroot, coef)
                if np.isnan(delta):
                    raise ValueError("EG: arc scores are not finite (diverged weights?)")
                # d = C sum coef f: w.d from the scores at w, (w + d).d from those at
                # w + d, so the dual's change is exact without a pass over w
                wd = C * float((coef * s).sum())
                accumulate_dense(fs, enc, coef, w, C)
                dd = C * float((coef * fs.arc_scores(enc, w)).sum()) - wd
                if -C * delta - wd - 0.5 * dd >= 0.0:
                    rates[i] *= self.growth
                    return delta, wd, dd, halvings
                accumulate_dense(fs, enc, coef, w, -C)
                theta[lo:hi], mu[lo:hi] = saved
                rates[i] /= 2.0
            return 0.0, 0.0, 0.0, MAX_HALVINGS

        q = dual()
        self._log(f"eg init: dual {q:.6g} (C={C}, eta={eta0:g}, beta={self.beta:g})")
        for e in range(1, epochs + 1):
            order = rng.permutation(nonempty) if self.shuffle else nonempty
            if hasattr(data, "wrap"):
                order = data.wrap(order, e)  # progress bar, when the caller gives one
            refused = halved = 0
            for i in order:
                delta, wd, dd, halvings = update(int(i))
                gold_mass += delta
                ww += 2.0 * wd + dd
                halved += halvings
                refused += halvings == MAX_HALVINGS
            ww = float(w @ w)  # the running sum drifts by rounding; exact once a pass
            q_new = dual()
            rec = {"epoch": e, "dual": q_new, "primal": float("nan"),
                   "eta": float(np.median(rates[nonempty])) if nonempty.size else eta0,
                   "halvings": int(halved), "refused": int(refused),
                   "seconds": time.perf_counter() - t0,
                   "cpu_seconds": time.process_time() - c0}
            q = q_new
            if self.primal:
                p, _ = primal_objective(sb, w, C, proj, sroot)
                rec["primal"] = p
                self._log(f"eg pass {e}: dual {q:.6g}  primal {p:.6g}  gap {p - q:.4g}  "
                          f"median eta {rec['eta']:g}  ({rec['seconds']:.1f} s)")
            else:
                self._log(f"eg pass {e}: dual {q:.6g}  median eta {rec['eta']:g}  "
                          f"({rec['seconds']:.1f} s)")
            self.history.append(rec)
            if on_epoch is not None:
                on_epoch(e, w)
        self.theta, self.offsets, self.rates = theta, offsets, rates
        return w
