"""Beyond the best tree: arc and label probabilities, k-best trees and minimum-risk
decoding for first-order models.

Probabilities. A first-order model scores a tree by the sum of its arc scores s(h, m);
its head probabilities are the arc marginals of the Gibbs distribution
P(tree) ∝ exp(score(tree) / T) over the decoder's tree family (Matrix-Tree Theorem for
CLE models, inside-outside for Eisner models), and its label probabilities the softmax of
the label scores / T_label of the word's label given the tree. For a log-linear model
(T = 1) these are the model's own probabilities; a perceptron's or MIRA's scores have no
probabilistic meaning, and their scale is arbitrary. Training with a dev set therefore
fits both temperatures on dev by maximum likelihood of the gold heads and labels
(temperature scaling, Guo et al. 2017), for every learner: the probabilities then mean
"how often arcs given this probability were right on held-out data". Without dev, T = 1
and the model's metadata says the probabilities are uncalibrated.

``HeadProb`` and ``LabelProb`` (MISC) of a word are the marginal of its chosen arc and
the probability of its chosen label given that arc.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from arboreal.features.labels import constrain_root_label
from arboreal.io.sentence import ROOT_TOKEN

#: the decoders ``parse`` offers: the best tree, or the minimum-Bayes-risk tree
DECODES = ("map", "mbr")
#: the most memory one sentence's k-best search may take
KBEST_BUDGET_BYTES = 1 << 30
#: probabilities below this count as this in a likelihood (a projective model gives a
#: gold non-projective tree's arcs tiny marginals)
_FLOOR = 1e-12


def score_matrices(parser, encoded, after_batch=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per sentence ``(decode_scores, sum_scores)``, both (n+1, n+1) float64: the arc
    scores the decoder maximises and the ones whose exponentials are summed over trees
    (they differ only for a jointly labeled model: max vs log-sum-exp over the labels),
    from the model's scorer, batch by batch; ``after_batch(rows)`` is called after each
    batch's scores."""
    scorer = parser.scorer
    lengths = scorer.lengths(encoded)
    joint = getattr(scorer, "joint", False)
    out: list = [None] * len(lengths)
    for part in scorer.batches(lengths):
        S = scorer.arc_scores(encoded, part)
        summed = scorer.arc_scores(encoded, part, summed=True) if joint else S
        for b, i in enumerate(part):
            n1 = lengths[i] + 1
            out[i] = (np.array(S[b, :n1, :n1], dtype=np.float64),
                      np.array(summed[b, :n1, :n1], dtype=np.float64))
        if after_batch is not None:
            after_batch(part)
    return out


def arc_marginals(parser, scores: np.ndarray, temperature: float | None = None) -> np.ndarray:
    """P(h -> m) (n+1, n+1) for one sentence's ``sum_scores`` (see :func:`score_matrices`),
    at the model's fitted temperature unless one is given. O(n^3)."""
    T = parser_temperatures(parser)[0] if temperature is None else temperature
    if scores.shape[0] <= 1:
        return np.zeros_like(scores)
    return parser.structure.marginals(scores / T)


def parser_temperatures(parser) -> tuple[float, float]:
    """(arc temperature, label temperature) of a model: fitted on dev at training, else 1."""
    cal = parser.meta.get("calibration") or {}
    return float(cal.get("arc_temperature", 1.0)), float(cal.get("label_temperature", 1.0))


def label_score_rows(parser, encoded, i: int, heads: np.ndarray) -> np.ndarray:
    """Every label's score (n+1, L) for every word of sentence i given the tree
    ``heads`` (-inf for the labels UD's root rule excludes, see
    :func:`~arboreal.features.labels.constrain_root_label`)."""
    rows = parser.scorer.label_scores(encoded, i, heads)
    return constrain_root_label(rows, heads, _labels_of(parser))


def _softmax(rows: np.ndarray) -> np.ndarray:
    z = rows - rows.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _labels_of(parser) -> np.ndarray:
    return parser.scorer.labels


# ---------------------------------------------------------------- calibration
def fit_temperatures(parser, encoded: Sequence, sentences: Sequence) -> dict:
    """Temperatures maximising the likelihood of the gold heads (arc marginals) and of
    the gold labels given the gold tree, on ``sentences`` (dev); O(iterations x n^3) per
    sentence. Returns the ``calibration`` metadata entry."""
    from scipy.optimize import minimize_scalar

    gold = [np.asarray(s.heads, dtype=np.int64) for s in sentences]
    labels = {lab: k for k, lab in enumerate(_labels_of(parser).tolist())}
    #: sentence -> (its words' label score rows, their gold label ids)
    per_sentence: dict = {}

    def gold_label_rows(rows) -> None:
        # right after its batch's arc scores: a scorer that keeps the batch's states
        # (the neural one) computes the labels from them
        for i in rows:
            if len(gold[i]) > 1:
                scores = label_score_rows(parser, encoded, i, gold[i])
                pairs = [(scores[m], labels[d]) for m, d in
                         enumerate(sentences[i].deprels[1:].tolist(), start=1) if d in labels]
                per_sentence[int(i)] = pairs

    mats = score_matrices(parser, encoded, after_batch=gold_label_rows)
    all_lengths = parser.scorer.lengths(encoded)
    keep = [i for i, n in enumerate(all_lengths) if n > 0]
    structure = parser.structure
    lengths = np.array([all_lengths[i] for i in keep], dtype=np.int64)
    N1 = int(lengths.max()) + 1 if keep else 1
    batch = np.zeros((len(keep), N1, N1))
    for b, i in enumerate(keep):
        n1 = lengths[b] + 1
        batch[b, :n1, :n1] = mats[i][1]
    rows_b = np.concatenate([np.full(lengths[b], b) for b in range(len(keep))]) if keep else []
    cols_m = np.concatenate([np.arange(1, n + 1) for n in lengths]) if keep else []
    rows_h = np.concatenate([gold[i][1:] for i in keep]) if keep else []

    def arc_nll(log_t: float) -> float:
        P = structure.marginals(batch / np.exp(log_t), lengths)
        return float(-np.log(np.maximum(P[rows_b, rows_h, cols_m], _FLOOR)).mean())

    pairs = [p for i in keep for p in per_sentence.get(i, [])]   # in sentence order
    R = np.array([r for r, _ in pairs]) if pairs else np.zeros((0, 1))
    y = np.array([g for _, g in pairs], dtype=np.int64)

    def label_nll(log_t: float) -> float:
        P = _softmax(R / np.exp(log_t))
        return float(-np.log(np.maximum(P[np.arange(len(y)), y], _FLOOR)).mean())

    out = {"data": "dev", "sentences": len(keep)}
    for key, nll, n in (("arc", arc_nll, len(keep)), ("label", label_nll, len(y))):
        if n == 0:
            out[f"{key}_temperature"] = 1.0
            continue
        res = minimize_scalar(nll, bounds=(-6.0, 6.0), method="bounded",
                              options={"xatol": 1e-3})
        out[f"{key}_temperature"] = round(float(np.exp(res.x)), 6)
        out[f"{key}_nll"] = round(float(res.fun), 6)
    return out


# ---------------------------------------------------------------- parsing
def analyze(parser, sentences: Sequence, k: int = 1, decode: str = "map",
            probabilities: bool = False) -> list[list]:
    """For every sentence, its ``k`` best trees (``decode="map"``; exact, best first) or
    its minimum-Bayes-risk tree (``decode="mbr"``, k = 1) as parsed Sentence copies. With
    ``probabilities``, MISC gets ``HeadProb`` and ``LabelProb`` for every word; k-best
    trees carry ``# kbest_rank`` and ``# tree_score`` comments (rank r > 1 also a
    ``-kbest{r}`` suffix on the sent_id). Tags must already be complete. O(n^3) per
    sentence for probabilities or MBR, O(k n^3) for k-best."""
    if decode not in DECODES:
        raise ValueError(f"decode must be one of {DECODES}, got {decode!r}")
    if decode == "mbr" and k != 1:
        raise ValueError("minimum-risk decoding gives one tree per sentence (k = 1)")
    encoded = parser.scorer.encode(list(sentences))
    mats = score_matrices(parser, encoded)
    lengths = parser.scorer.lengths(encoded)
    T_arc, T_label = parser_temperatures(parser)
    structure = parser.structure
    labels = _labels_of(parser)
    out = []
    for i, (s, (dec, summed)) in enumerate(zip(sentences, mats)):
        n = int(lengths[i])
        if n == 0:
            out.append([s.with_tree(np.array([-1]), np.array([ROOT_TOKEN], dtype=object))])
            continue
        P = None
        if probabilities or decode == "mbr":
            P = arc_marginals(parser, summed, T_arc)
        if decode == "mbr":
            trees = [np.asarray(structure.mbr(P), dtype=np.int64)]
            tree_scores = [float(dec[trees[0][1:], np.arange(1, n + 1)].sum())]
        else:
            need = kbest_bytes(n, k, structure.projective)
            if k > 1 and need > KBEST_BUDGET_BYTES:
                from arboreal.errors import ArborealError

                where = f" (line {s.line})" if s.line is not None else ""
                raise ArborealError(f"the {k} best trees of a {n}-word sentence{where} need "
                                    f"{need >> 20} MiB, over the {KBEST_BUDGET_BYTES >> 20} "
                                    "MiB budget: ask for fewer trees")
            heads, tree_scores = structure.kbest(dec, k)
            trees = [np.asarray(h, dtype=np.int64) for h in heads]
        results = []
        for rank, (heads, score) in enumerate(zip(trees, tree_scores), start=1):
            rows = label_score_rows(parser, encoded, i, heads)
            chosen = rows[1:].argmax(axis=1) if rows.shape[1] else np.zeros(n, np.int64)
            deprels = np.empty(n + 1, dtype=object)
            deprels[0] = ROOT_TOKEN
            deprels[1:] = labels[chosen] if len(labels) else "_"
            parsed = s.with_tree(heads, deprels)
            if probabilities:
                head_p = P[heads[1:], np.arange(1, n + 1)]
                label_p = (_softmax(rows[1:] / T_label)[np.arange(n), chosen]
                           if rows.shape[1] else np.ones(n))
                parsed.misc = _with_probabilities(s.misc, head_p, label_p)
            if k > 1:
                parsed.comments = _kbest_comments(s.comments, rank, float(score))
            results.append(parsed)
        out.append(results)
    return out


def kbest_bytes(n: int, k: int, projective: bool) -> int:
    """Memory of the k-best search for an n-word sentence: the lazy Eisner chart, or the
    forced heads and trees of Lawler's subproblems."""
    if projective:
        return (64 * k + 450) * (n + 1) ** 2
    return (1 + k * max(n, 1)) * (n + 1) * 12 + 8 * (n + 1) ** 2


def _with_probabilities(misc: np.ndarray, head_p: np.ndarray, label_p: np.ndarray
                        ) -> np.ndarray:
    """MISC with ``HeadProb=`` and ``LabelProb=`` (4 decimals) after its other items."""
    out = misc.copy()
    for m in range(1, len(misc)):
        items = [x for x in str(misc[m]).split("|")
                 if x != "_" and not x.startswith(("HeadProb=", "LabelProb="))]
        items += [f"HeadProb={head_p[m - 1]:.4f}", f"LabelProb={label_p[m - 1]:.4f}"]
        out[m] = "|".join(items)
    return out


def _kbest_comments(comments: list[str], rank: int, score: float) -> list[str]:
    out = []
    for c in comments:
        if rank > 1 and c.startswith("# sent_id"):
            key, sep, value = c.partition("=")
            if sep:
                c = f"{key}= {value.strip()}-kbest{rank}"
        # a document or paragraph starts once, at the first tree
        skip = ("# kbest_rank", "# tree_score") + (("# newdoc", "# newpar") if rank > 1 else ())
        if not c.startswith(skip):
            out.append(c)
    return out + [f"# kbest_rank = {rank}", f"# tree_score = {score:.6g}"]
