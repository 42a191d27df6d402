"""Training a neural scorer by gradient: tree objective, labels and tags jointly.

:class:`GradientLearner` is an :class:`~arboreal.learn.trainer.EpochLearner` whose items
are batches of sentences of similar length (at most ``token_budget`` padded words each;
the composition is fixed, the order shuffled by the trainer every epoch). The loss of a
batch, per word (each term a mean over the words that have a gold value):

* the tree objective on the arc scores (default ``crf``: Koo et al. 2007's
  log-likelihood through :class:`~arboreal.learn.tree_loss.TreeLoss`, whose gradient
  is arboreal's exact marginals minus the gold arcs); a second-order network's is the
  log-likelihood of arcs and parts together
  (:class:`~arboreal.learn.tree_loss.PartsTreeLoss`: second-order inside-outside over
  the arcs its first-order marginals keep), except in a batch of sentences over
  :data:`~arboreal.neural.scorer.PARTS_MAX_WORDS` words (arcs alone);
* the cross-entropy of each word's gold DEPREL given its gold head;
* the cross-entropy of each predicted tag column (UPOS, XPOS, FEATS, lemma rule).

Optimizer: Adam (beta2 0.9, as Dozat & Manning 2017), the gradient norm clipped, the
learning rate constant for the first half of the planned epochs, then falling
exponentially, step by step, to ``decay`` times its start by the last one (a schedule
for a CPU budget of tens of epochs, in place of Dozat & Manning's 0.75 every 5,000 steps;
no benchmark compares the two yet).

Averaging: with ``average`` > 0 the learner keeps an exponential moving average of the
parameters (Polyak averaging, as the averaged perceptron averages its weights), updated
after every step with the weight ``min(average, (1 + t) / (10 + t))`` on the average at
step t (the warm-up keeps the first steps' random weights from lingering). The
snapshots handed to the trainer, the ones scored on dev and kept, are the average; the
steps themselves run on the live parameters.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import torch

from arboreal.inference.structure import TreeStructure
from arboreal.learn.tree_loss import parts_tree_loss, tree_loss
from arboreal.neural.scorer import PARTS_MAX_WORDS, EncodedCorpus, NeuralScorer, token_batches
from arboreal.neural.vocab import PAD

#: default words per training batch (padded), for a CPU budget of tens of epochs: about
#: twice the updates per epoch of 1,500 words (no benchmark compares the two yet)
TRAIN_TOKEN_BUDGET = 800
#: a small treebank's batches shrink so that an epoch still makes this many updates ...
MIN_UPDATES_PER_EPOCH = 250
#: ... down to this many words a batch
MIN_TRAIN_TOKEN_BUDGET = 200


def train_token_budget(train_words: int) -> int:
    """Words per training batch for a treebank of ``train_words`` words:
    :data:`TRAIN_TOKEN_BUDGET`, or fewer for a small treebank, so that an epoch makes at
    least :data:`MIN_UPDATES_PER_EPOCH` updates (never fewer than
    :data:`MIN_TRAIN_TOKEN_BUDGET` words). With 800-word batches a treebank of 40,000
    words made under 2,000 updates in 40 epochs and was still gaining on dev when they
    ended (Turkish-IMST; Dozat & Manning count training in steps, not epochs)."""
    return int(min(max(train_words // MIN_UPDATES_PER_EPOCH, MIN_TRAIN_TOKEN_BUDGET),
                   TRAIN_TOKEN_BUDGET))


class GradientLearner:
    """One epoch = one pass over the training batches (see the module docstring)."""

    def __init__(self, scorer: NeuralScorer, corpus: EncodedCorpus, structure: TreeStructure,
                 objective: str = "crf", learning_rate: float = 2e-3, decay: float = 0.1,
                 clip: float = 5.0, token_budget: int = TRAIN_TOKEN_BUDGET,
                 progress=None, epochs: int = 40, average: float = 0.0,
                 encoder_learning_rate: float = 5e-5, encoder_warmup: float = 0.1):
        if corpus.gold is None:
            raise ValueError("the training corpus has no gold trees")
        self.scorer = scorer
        self.corpus = corpus
        self.structure = structure
        self.objective = objective
        if scorer.order > 1 and (objective != "crf" or not structure.projective):
            raise ValueError("second-order parts train by the crf objective over projective "
                             "trees")
        self.batches = token_batches(corpus.lengths, token_budget)
        self.size = len(self.batches)
        self.clip = clip
        self.progress = progress
        params = [p for name, p in scorer.network.named_parameters()
                  if p.requires_grad and not name.startswith("encoder.")]
        encoder_params = [p for name, p in scorer.network.named_parameters()
                          if p.requires_grad and name.startswith("encoder.")]
        if not 0.0 <= average < 1.0:
            raise ValueError("average must lie in [0, 1)")
        self.average = average
        #: the moving average of the trainable parameters (``average`` > 0), by name
        self.averaged = {name: p.detach().clone()
                         for name, p in scorer.network.named_parameters()
                         if p.requires_grad} if average else None
        groups = [{"params": params}]
        if encoder_params:       # a fine-tuned transformer: its own rate, warmed up
            groups.append({"params": encoder_params, "lr": encoder_learning_rate})
        self.optimizer = torch.optim.Adam(groups, lr=learning_rate, betas=(0.9, 0.9))
        half = max(1, epochs * self.size // 2)
        warmup = max(1, int(encoder_warmup * epochs * self.size))

        def main_rate(step):
            return decay ** (min(max(step - half, 0), half) / half)

        def encoder_rate(step):
            return min(1.0, (step + 1) / warmup) * main_rate(step)

        self.schedule = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, [main_rate, encoder_rate][:len(groups)])

    def batch_loss(self, rows: np.ndarray) -> tuple[torch.Tensor, dict]:
        """The loss of sentences ``rows`` (a tensor to differentiate) and its parts."""
        b = self.scorer.batch(self.corpus, rows)
        h, arc = self.scorer.forward(b)
        lengths = self.corpus.lengths[rows]
        words = max(int(lengths.sum()), 1)
        gold_heads = b["gold_heads"]
        if self.scorer.order > 1 and int(lengths.max()) <= PARTS_MAX_WORDS:
            parts = self.scorer.network.part_scores(h)
            loss_arc = parts_tree_loss(arc, parts, gold_heads, lengths, self.structure) / words
        else:
            loss_arc = tree_loss(arc, gold_heads, lengths, self.structure,
                                 self.objective) / words
        bi, mi = np.nonzero(gold_heads >= 0)
        parts = {"arc": loss_arc.item()}
        total = loss_arc
        dev = self.scorer.device
        labels = torch.from_numpy(b["gold_deprels"][bi, mi]).to(dev)
        lab = self.scorer.network.label_scores(h, torch.from_numpy(bi).to(dev),
                                               torch.from_numpy(gold_heads[bi, mi]).to(dev),
                                               torch.from_numpy(mi).to(dev))
        if (labels != PAD).any():
            loss_label = torch.nn.functional.cross_entropy(lab, labels, ignore_index=PAD)
            total = total + loss_label
            parts["label"] = loss_label.item()
        if self.scorer.tag_columns:
            scores = self.scorer.network.tag_scores(h)
            for col in self.scorer.tag_columns:
                gold = torch.from_numpy(b["gold_" + col]).to(dev)
                if (gold != PAD).any():
                    s = scores[col]
                    loss_tag = torch.nn.functional.cross_entropy(
                        s.reshape(-1, s.shape[-1]), gold.reshape(-1), ignore_index=PAD)
                    total = total + loss_tag
                    parts[col] = loss_tag.item()
        return total, parts

    def run_epoch(self, order: np.ndarray, epoch: int) -> dict:
        self.scorer.network.train()
        sums: dict = {}
        items = order if self.progress is None else self.progress(order, epoch)
        for k in items:
            loss, parts = self.batch_loss(self.batches[k])
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.scorer.network.parameters(), self.clip)
            self.optimizer.step()
            self.schedule.step()
            self._update_average()
            for key, v in parts.items():
                sums[key] = sums.get(key, 0.0) + v
        self.scorer.network.eval()
        self.scorer.weights_changed()
        return {f"loss_{k}": round(v / max(len(order), 1), 4) for k, v in sums.items()}

    def _update_average(self) -> None:
        if self.averaged is None:
            return
        steps = self.schedule.last_epoch     # the steps taken so far, this one included
        keep = min(self.average, steps / (steps + 9))
        with torch.no_grad():
            for name, p in self.scorer.network.named_parameters():
                if name in self.averaged:
                    self.averaged[name].lerp_(p, 1.0 - keep)

    def snapshot(self) -> dict:
        """The parameters to score and keep (the average when averaging), copied."""
        state = self.scorer.network.state_dict()
        if self.averaged is not None:
            state = {**state, **self.averaged}
        return {k: v.detach().clone() for k, v in state.items()}

    @contextmanager
    def parameters_of(self, snapshot: dict):
        """The network holds ``snapshot`` inside the block, its live parameters again
        after it (to score a snapshot on dev between steps)."""
        if self.averaged is None:
            yield
            return
        live = {k: v.detach().clone() for k, v in self.scorer.network.state_dict().items()}
        self.restore(snapshot)
        try:
            yield
        finally:
            self.restore(live)

    def restore(self, snapshot: dict) -> None:
        self.scorer.network.load_state_dict(snapshot)
        self.scorer.weights_changed()

    # ------------------------------------------------------------------ checkpoints
    def snapshot_state(self, snapshot: dict) -> dict:
        """A snapshot as numpy arrays (for a checkpoint)."""
        return {k: v.detach().cpu().numpy() for k, v in snapshot.items()}

    def snapshot_from_state(self, state: dict) -> dict:
        return {k: torch.from_numpy(np.asarray(v)) for k, v in state.items()}

    def state(self) -> dict:
        """Everything the next epoch depends on, as numpy arrays and JSON values: the
        network's parameters, Adam's moments and step counts, the learning-rate schedule
        and torch's generators (CPU, and the GPUs' when training on one; they draw the
        dropout masks)."""
        optimizer = self.optimizer.state_dict()
        out = {"network": self.snapshot_state(self.scorer.network.state_dict()),
               "optimizer": {"state": {str(k): {n: _array(v) for n, v in s.items()}
                                       for k, s in optimizer["state"].items()},
                             "param_groups": optimizer["param_groups"]},
               "schedule": self.schedule.state_dict(),
               "torch_rng": torch.get_rng_state().numpy()}
        if self.averaged is not None:
            out["averaged"] = self.snapshot_state(self.averaged)
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            out["cuda_rng"] = [s.numpy() for s in torch.cuda.get_rng_state_all()]
        return out

    def load_state(self, state: dict) -> None:
        self.restore(self.snapshot_from_state(state["network"]))
        if self.averaged is not None and "averaged" in state:
            device = self.scorer.device
            self.averaged = {k: v.to(device)
                             for k, v in self.snapshot_from_state(state["averaged"]).items()}
        opt = state["optimizer"]
        self.optimizer.load_state_dict(
            {"state": {int(k): {n: _tensor(v) for n, v in s.items()}
                       for k, s in opt["state"].items()},
             "param_groups": [{**g, "betas": tuple(g["betas"])} for g in opt["param_groups"]]})
        self.schedule.load_state_dict(state["schedule"])
        torch.set_rng_state(torch.from_numpy(np.asarray(state["torch_rng"], dtype=np.uint8)))
        if "cuda_rng" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([torch.from_numpy(np.asarray(s, dtype=np.uint8))
                                          for s in state["cuda_rng"]])


def _array(value):
    """An optimizer state value as a checkpoint holds it."""
    return value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else value


def _tensor(value):
    return torch.from_numpy(np.array(value)) if isinstance(value, np.ndarray) else value
