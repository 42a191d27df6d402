"""A scorer of its own, in one module: the worked example of docs/design.md.

``TagBilinearScorer`` scores the arc h -> m by a bilinear form of UPOS embeddings plus
a bias per signed distance,

    scores[h, m] = e[upos_h] . W e[upos_m] + b[bucket(m - h)],

all in numpy, and labels each arc by the label most often seen between the two tags
in training. It is trained with the CRF objective of :mod:`arboreal.learn.objectives`
through arboreal's exact marginals, by plain gradient descent under the one training
loop (:class:`arboreal.learn.trainer.Trainer`), and parses with any decoder of
:class:`arboreal.inference.structure.TreeStructure`. Importing the module registers it,
so its model files load with ``arboreal.load``, and registers its training recipe, so
``ARBOREAL_PLUGINS=examples/tag_bilinear_scorer.py arboreal train TRAIN --scorer
tag-bilinear -o M`` trains it and ``arboreal parse M`` parses with it.

Nothing outside this file and its test (tests/test_example_scorer.py) knows about it.
"""
from __future__ import annotations

import numpy as np

from arboreal.inference.structure import TreeStructure, length_buckets, pad_heads, tree_structure
from arboreal.learn.objectives import get_objective
from arboreal.scorers import register_scorer

#: signed distances m - h are bucketed into -MAX_DISTANCE..MAX_DISTANCE
MAX_DISTANCE = 10


class TagBilinearScorer:
    """UPOS embeddings E (T, d), W (d, d), distance biases b (2 MAX_DISTANCE + 1,),
    label counts (T, T, L) of (head UPOS, modifier UPOS, label)."""

    kind = "tag-bilinear"
    reads_tags = True
    tag_columns: list = []

    def __init__(self, tags: list[str], labels: list[str], dim: int = 8, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.tags = ["<root>", "<unk>", *tags]
        self.index = {t: i for i, t in enumerate(self.tags)}
        self.labels = np.array(labels, dtype=object)
        self.E = rng.normal(scale=0.1, size=(len(self.tags), dim))
        self.W = np.eye(dim)
        self.b = np.zeros(2 * MAX_DISTANCE + 1)
        self.counts = np.zeros((len(self.tags), len(self.tags), len(labels)))

    # ------------------------------------------------------------------ the scorer role
    def encode(self, sentences) -> list[np.ndarray]:
        """Each sentence's tag ids (n+1,), position 0 the root."""
        return [np.array([0] + [self.index.get(t, 1) for t in s.upos[1:].tolist()])
                for s in sentences]

    @staticmethod
    def lengths(encoded) -> np.ndarray:
        return np.array([len(e) - 1 for e in encoded], dtype=np.int64)

    @staticmethod
    def batches(lengths: np.ndarray) -> list[np.ndarray]:
        return length_buckets(lengths)

    def _padded(self, encoded, rows) -> tuple[np.ndarray, np.ndarray]:
        lengths = self.lengths(encoded)[rows]
        ids = np.zeros((len(rows), int(lengths.max()) + 1), dtype=np.int64)
        for b, i in enumerate(rows):
            ids[b, : len(encoded[i])] = encoded[i]
        n1 = ids.shape[1]
        dist = np.clip(np.arange(n1)[None, :] - np.arange(n1)[:, None], -MAX_DISTANCE,
                       MAX_DISTANCE) + MAX_DISTANCE          # [h, m]: bucket of m - h
        return ids, dist

    def arc_scores(self, encoded, rows, summed: bool = False) -> np.ndarray:
        """(B, N+1, N+1): e_h . W e_m + b[m - h]."""
        ids, dist = self._padded(encoded, rows)
        X = self.E[ids]                                       # (B, N+1, d)
        return np.einsum("bhi,ij,bmj->bhm", X, self.W, X) + self.b[dist][None]

    def backward(self, encoded, rows, d_scores: np.ndarray) -> dict:
        """Gradients of the parameters given d loss / d scores (B, N+1, N+1)."""
        ids, dist = self._padded(encoded, rows)
        X = self.E[ids]
        dW = np.einsum("bhm,bhi,bmj->ij", d_scores, X, X)
        dX = np.einsum("bhm,ij,bmj->bhi", d_scores, self.W, X) \
            + np.einsum("bhm,ij,bhi->bmj", d_scores, self.W, X)
        dE = np.zeros_like(self.E)
        np.add.at(dE, ids, dX)
        db = np.bincount(dist.ravel(), weights=d_scores.sum(axis=0).ravel(),
                         minlength=self.b.size)
        return {"E": dE, "W": dW, "b": db}

    def label_scores(self, encoded, i: int, heads: np.ndarray) -> np.ndarray:
        tags = encoded[i]
        rows = np.zeros((len(heads), len(self.labels)))
        rows[1:] = np.log1p(self.counts[tags[heads[1:]], tags[1:]])
        return rows

    def predict_labels(self, encoded, rows, heads: list) -> list:
        out = []
        for i, h in zip(rows, heads):
            d = np.empty(len(h), dtype=object)
            d[0] = "<root>"
            d[1:] = self.labels[self.label_scores(encoded, i, h)[1:].argmax(axis=1)]
            out.append(d)
        return out

    def predict_tags(self, encoded, rows) -> dict:
        return {}

    # ------------------------------------------------------------------ model files
    def put(self, meta: dict, arrays: dict) -> None:
        from arboreal.io.model_file import put_strings

        meta["tag_bilinear"] = {"dim": int(self.E.shape[1])}
        put_strings(arrays, "tb_tags", self.tags[2:])
        put_strings(arrays, "tb_labels", self.labels.tolist())
        arrays.update(tb_E=self.E, tb_W=self.W, tb_b=self.b, tb_counts=self.counts)

    @classmethod
    def from_file(cls, fields, arrays) -> "TagBilinearScorer":
        from arboreal.io.model_file import get_string_list

        dim = fields.section("tag_bilinear").int("dim", 1, 1024)
        scorer = cls(get_string_list(arrays, "tb_tags"), get_string_list(arrays, "tb_labels"),
                     dim)
        for name in ("E", "W", "b", "counts"):
            value = np.asarray(arrays[f"tb_{name}"], dtype=np.float64)
            if value.shape != getattr(scorer, name).shape:
                raise ValueError(f"tb_{name} has shape {value.shape}")
            setattr(scorer, name, value)
        return scorer



class GradientDescent:
    """The scorer's learner: one epoch = one pass of full-batch-per-bucket gradient steps
    on an objective of :mod:`arboreal.learn.objectives` (an EpochLearner)."""

    def __init__(self, scorer: TagBilinearScorer, sentences, structure: TreeStructure,
                 objective: str = "crf", rate: float = 0.05):
        self.scorer = scorer
        self.encoded = scorer.encode(sentences)
        self.heads = [np.asarray(s.heads, dtype=np.int64) for s in sentences]
        self.structure = structure
        self.objective = get_objective(objective)
        self.rate = rate
        lengths = scorer.lengths(self.encoded)
        self.batches = [b for b in length_buckets(lengths, max_entries=20_000)
                        if lengths[b].max() > 0]
        self.size = len(self.batches)
        self.words = float(lengths.sum())

    def run_epoch(self, order: np.ndarray, epoch: int) -> dict:
        total = 0.0
        for k in order:
            rows = self.batches[k]
            scores = self.scorer.arc_scores(self.encoded, rows)
            heads = pad_heads([self.heads[i] for i in rows], scores.shape[1])
            loss, d_scores = self.objective(scores, heads, self.scorer.lengths(self.encoded)[rows],
                                            self.structure)
            for name, g in self.scorer.backward(self.encoded, rows, d_scores).items():
                setattr(self.scorer, name, getattr(self.scorer, name) - self.rate * g / len(rows))
            total += float(loss.sum())
        return {"loss": total / self.words}

    def snapshot(self) -> dict:
        return {k: getattr(self.scorer, k).copy() for k in ("E", "W", "b")}

    def restore(self, snapshot: dict) -> None:
        for k, v in snapshot.items():
            setattr(self.scorer, k, v.copy())


def train(sentences, dev=None, decoder: str = "eisner", epochs: int = 10, seed: int = 0,
          dim: int = 8):
    """A :class:`arboreal.models.Parser` with this scorer, trained by the CRF objective."""
    from arboreal.learn.trainer import Trainer
    from arboreal.models import Parser

    tags = sorted({t for s in sentences for t in s.upos[1:].tolist()})
    labels = sorted({d for s in sentences for d in s.deprels[1:].tolist()})
    scorer = TagBilinearScorer(tags, labels, dim=dim, seed=seed)
    label_id = {d: k for k, d in enumerate(labels)}
    for ids, s in zip(scorer.encode(sentences), sentences):
        for m in range(1, len(s) + 1):
            scorer.counts[ids[s.heads[m]], ids[m], label_id[s.deprels[m]]] += 1
    structure = tree_structure(decoder)
    parser = Parser(scorer, decoder)
    learner = GradientDescent(scorer, sentences, structure)

    def evaluate(snapshot, epoch) -> dict:
        pred = parser.predict_heads(dev)
        right = sum(int((h[1:] == s.heads[1:]).sum()) for h, s in zip(pred, dev))
        return {"score": 100.0 * right / max(sum(len(s) for s in dev), 1)}

    result = Trainer(epochs, seed).run(learner, evaluate if dev else None)
    learner.restore(result.snapshot)
    return parser


def recipe(parser_class, sentences, dev, config, run):
    """The training recipe (:data:`arboreal.scorers.RECIPES`): ``arboreal train --scorer
    tag-bilinear`` with ``--scorer-option dim=N``, ``--epochs``, ``--seed`` and
    ``--decoder`` (the linear tagger in front of it, as its scores read UPOS)."""
    from arboreal.errors import ArborealError

    unknown = sorted(set(config.scorer_options) - {"dim"})
    if unknown:
        raise ArborealError(f"tag-bilinear scorer options: {', '.join(unknown)} unknown; "
                            "it takes dim")
    decoder = "eisner" if config.decoder == "auto" else config.decoder
    return train(sentences, dev, decoder=decoder, epochs=config.epochs or 10,
                 seed=config.seed, dim=int(config.scorer_options.get("dim", 8)))


register_scorer(TagBilinearScorer.kind, TagBilinearScorer, recipe=recipe)
