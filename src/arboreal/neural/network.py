"""The neural scorer's network (torch): an encoder, biaffine arc and label scorers, and
the tag classifiers that share the encoder (UDPipe 2's joint design).

Encoder (Kiperwasser & Goldberg 2016; Dozat & Manning 2017), per word position 0..n
(0 the root, a learned vector):

* a trainable embedding of the lower-cased word (``word_dim``), plus a frozen pretrained
  one projected to the same size when the model has pretrained vectors;
* a character CNN over the word's characters (``char_dim`` filters of widths 2-4,
  max-pooled), computed once per distinct word of a batch;
* optionally an embedding of the input UPOS (``tag_dim`` > 0);
* optionally the word states of a pretrained transformer
  (:class:`~arboreal.neural.transformer.PretrainedEncoder`, ``encoder_states`` S > 0
  states of ``encoder_hidden`` units): a learned scalar mix of the S states
  (:class:`ScalarMix`; ``encoder_layer`` >= 0 takes that one state instead), projected
  to ``encoder_dim`` units;
* optionally the vectors of registered word encoders (:mod:`arboreal.neural.encoders`,
  ``word_encoders``: name -> options; e.g. a bag of character n-grams);
* a BiLSTM of ``lstm_layers`` layers of ``lstm_dim`` units per direction; with
  ``lstm_layers=0`` the features above go to the scorers directly.

Scorers: ``arc[b, h, m] = e_h^T W d_m + e_h^T u`` with MLPs ``e`` (head) and ``d``
(dependent) of ``arc_dim`` units (the score convention of :mod:`arboreal.inference`);
label scores of the arc h -> m: a biaffine form of ``label_dim``-unit MLPs, one output
per DEPREL. Tag classifiers: one hidden layer of ``tag_hidden`` units, then one linear
output per predicted column (UPOS, XPOS, FEATS, lemma rule).

Second-order parts (``sib_dim`` / ``grand_dim`` > 0, ``arboreal train --order 2``):
sibling scores ``sib[h, a, b]`` and grandparent scores ``grand[g, h, m]``, each a
:class:`Triaffine` form over three MLPs of the encoder states, one per role of the
part's words (Zhang et al. 2020's second-order CRF parser).

Costs per sentence of n words: O(n (lstm_dim^2 + arc_dim^2)) for the encoder and MLPs,
O(n^2 arc_dim) for the arc scores, O(n label_dim^2 L) for the labels of n arcs, O(n d^3 +
n^3 d) for a part kind of ``d`` units.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from arboreal.neural.vocab import PAD, TAG_COLUMNS, Vocabularies


@dataclass
class NetworkConfig:
    """The sizes of the network; saved in the model file."""

    word_dim: int = 100
    char_dim: int = 100
    char_embedding_dim: int = 50
    tag_dim: int = 0
    lstm_dim: int = 300
    lstm_layers: int = 3
    arc_dim: int = 400
    label_dim: int = 100
    tag_hidden: int = 200
    dropout: float = 0.33
    word_dropout: float = 0.25
    #: size of the pretrained vectors (0: none)
    pretrained_dim: int = 0
    #: hidden states (layers + 1) and their width of the pretrained transformer (0: none)
    encoder_states: int = 0
    encoder_hidden: int = 0
    #: the transformer's mixed states are projected to this many units
    encoder_dim: int = 256
    #: -1: a learned scalar mix of every state; k >= 0: state k alone (0 the embeddings)
    encoder_layer: int = -1
    #: second-order parts (``--order 2``): units of the MLPs of the sibling and of the
    #: grandparent triaffine scorers (0: that part kind is not scored)
    sib_dim: int = 0
    grand_dim: int = 0
    #: registered word encoders (:mod:`arboreal.neural.encoders`) -> their options;
    #: their vectors join the word features before the BiLSTM
    word_encoders: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        out = asdict(self)
        if not out["word_encoders"]:        # as model files without any stored it
            del out["word_encoders"]
        return out


def _mlp(n_in: int, n_out: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(nn.Linear(n_in, n_out), nn.LeakyReLU(0.1), nn.Dropout(dropout))


class CharCNN(nn.Module):
    """Characters of a word -> one vector: embeddings, convolutions of widths 2, 3 and 4,
    max over positions. chars (W, C) int64 (PAD-padded) -> (W, out_dim)."""

    def __init__(self, n_chars: int, emb_dim: int, out_dim: int):
        super().__init__()
        self.embed = nn.Embedding(n_chars, emb_dim, padding_idx=PAD)
        widths = (2, 3, 4)
        sizes = [out_dim // 3, out_dim // 3, out_dim - 2 * (out_dim // 3)]
        self.convs = nn.ModuleList(nn.Conv1d(emb_dim, k, w, padding=w - 1)
                                   for w, k in zip(widths, sizes))

    def forward(self, chars: torch.Tensor) -> torch.Tensor:
        x = self.embed(chars).transpose(1, 2)            # (W, E, C)
        pad = (chars == PAD).unsqueeze(1)                 # (W, 1, C)
        outs = []
        for conv in self.convs:
            y = conv(x)[:, :, : chars.shape[1]]           # (W, K, C)
            y = y.masked_fill(pad, float("-inf")).amax(dim=2)
            outs.append(torch.relu(torch.nan_to_num(y, neginf=0.0)))
        return torch.cat(outs, dim=1)


class ScalarMix(nn.Module):
    """A softmax-weighted sum of S states, times a learned scale (Peters et al. 2018):
    x (..., S, D) -> (..., D); the weights start equal."""

    def __init__(self, states: int):
        super().__init__()
        self.weights = nn.Parameter(torch.zeros(states))
        self.gamma = nn.Parameter(torch.ones(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = torch.softmax(self.weights, dim=0).to(x.dtype)
        return self.gamma.to(x.dtype) * torch.einsum("...sd,s->...d", x, w)


class BiLSTM(nn.Module):
    """A stacked bidirectional LSTM over padded batches, without packing: each layer runs
    a forward LSTM over the words as they are and a backward one over each sentence
    reversed within its own length, so padding (at the end of both) never reaches a
    word's state. (torch's packed sequences cost a slice and a zero-filled gradient per
    time step on the CPU, several times the LSTM's own arithmetic.) x (B, T, n_in),
    lengths (B,) -> (B, T, 2 hidden)."""

    def __init__(self, n_in: int, hidden: int, layers: int, dropout: float):
        super().__init__()
        self.forward_layers = nn.ModuleList(
            nn.LSTM(n_in if k == 0 else 2 * hidden, hidden, batch_first=True)
            for k in range(layers))
        self.backward_layers = nn.ModuleList(
            nn.LSTM(n_in if k == 0 else 2 * hidden, hidden, batch_first=True)
            for k in range(layers))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        t = torch.arange(T, device=x.device)
        n = lengths.to(x.device)[:, None]
        # position t of the reversed sentence reads word n-1-t (padding stays in place)
        rev = torch.where(t[None, :] < n, n - 1 - t[None, :], t[None, :])
        index = rev[:, :, None]

        def reverse(y: torch.Tensor) -> torch.Tensor:
            return torch.gather(y, 1, index.expand(-1, -1, y.shape[2]))

        for k, (fwd, bwd) in enumerate(zip(self.forward_layers, self.backward_layers)):
            if k:
                x = self.dropout(x)
            x = torch.cat([fwd(x)[0], reverse(bwd(reverse(x))[0])], dim=-1)
        return x


class Biaffine(nn.Module):
    """s[b, i, j, o] = x_i^T U_o y_j (+ bias terms): x (B, N, dx), y (B, N, dy)."""

    def __init__(self, dx: int, dy: int, n_out: int, bias_x: bool, bias_y: bool):
        super().__init__()
        self.bias_x, self.bias_y = bias_x, bias_y
        self.weight = nn.Parameter(torch.zeros(n_out, dx + bias_x, dy + bias_y))

    def _pad(self, x: torch.Tensor, on: bool) -> torch.Tensor:
        return torch.cat([x, torch.ones_like(x[..., :1])], dim=-1) if on else x

    def _inputs(self, x: torch.Tensor, y: torch.Tensor):
        # in the weight's precision: float32 scores from a bfloat16 encoder (see
        # low_precision_copy)
        dtype = self.weight.dtype
        return self._pad(x.to(dtype), self.bias_x), self._pad(y.to(dtype), self.bias_y)

    def pairs(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Scores of every pair: (B, n_out, N_x, N_y)."""
        x, y = self._inputs(x, y)
        return torch.einsum("bxi,oij,byj->boxy", x, self.weight, y)

    def aligned(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Scores of given pairs: x (P, dx), y (P, dy) -> (P, n_out)."""
        x, y = self._inputs(x, y)
        return torch.einsum("pi,oij,pj->po", x, self.weight, y)


class Triaffine(nn.Module):
    """s[b, k, i, j] = sum_pqr x'_ip W_pqr y'_jq z_kr with x' = [x; 1], y' = [y; 1]
    (Zhang et al. 2020's second-order scorer): x, y, z (B, N, d) -> (B, N, N, N). O(B N d^3
    + B N^2 d (N + d)); the weight starts at zero (the parts then score nothing)."""

    def __init__(self, d: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(d + 1, d, d + 1))

    def forward(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        dtype = self.weight.dtype
        one = torch.ones_like(x[..., :1], dtype=dtype)
        x = torch.cat([x.to(dtype), one], dim=-1)
        y = torch.cat([y.to(dtype), one], dim=-1)
        wz = torch.einsum("bkr,prq->bkpq", z.to(dtype), self.weight)    # (B, N, d+1, d+1)
        return torch.einsum("bip,bkpq,bjq->bkij", x, wz, y)


#: the roles of the three words of each second-order part, in the layout of its scores
#: (:mod:`arboreal.inference.potentials`): ``sib[h, a, b]`` and ``grand[g, h, m]``
PART_ROLES = {"sib": ("head", "inner", "child"), "grand": ("grand", "head", "child")}


class Network(nn.Module):
    """Encoder, arc and label scorers, tag classifiers (see the module docstring)."""

    def __init__(self, config: NetworkConfig, vocabs: Vocabularies):
        super().__init__()
        self.config = config
        c = config
        self.word_embed = nn.Embedding(len(vocabs.words), c.word_dim, padding_idx=PAD)
        nn.init.normal_(self.word_embed.weight, std=0.1)
        if c.pretrained_dim:
            self.pretrained_proj = nn.Linear(c.pretrained_dim, c.word_dim, bias=False)
        self.char_cnn = CharCNN(len(vocabs.chars), c.char_embedding_dim, c.char_dim)
        n_in = c.word_dim + c.char_dim
        if c.tag_dim:
            self.tag_embed = nn.Embedding(len(vocabs.input_tags), c.tag_dim, padding_idx=PAD)
            n_in += c.tag_dim
        if c.encoder_states:
            if c.encoder_layer < 0:
                self.encoder_mix = ScalarMix(c.encoder_states)
            self.encoder_proj = nn.Linear(c.encoder_hidden, c.encoder_dim)
            n_in += c.encoder_dim
        #: the registered word encoders of ``config.word_encoders`` (None: none)
        self.word_encoders = None
        if c.word_encoders:
            from arboreal.neural.encoders import build_word_encoders

            self.word_encoders = nn.ModuleDict(build_word_encoders(c.word_encoders))
            n_in += sum(e.dim for e in self.word_encoders.values())
        #: a fine-tuned transformer (:meth:`attach_encoder`), trained and saved with the
        #: network; a frozen one stays outside it (the scorer's)
        self.encoder = None
        self.root = nn.Parameter(torch.randn(n_in) * 0.1)
        self.lstm = BiLSTM(n_in, c.lstm_dim, c.lstm_layers, c.dropout) if c.lstm_layers else None
        self.dropout = nn.Dropout(c.dropout)
        h = 2 * c.lstm_dim if c.lstm_layers else n_in
        self.arc_head = _mlp(h, c.arc_dim, c.dropout)
        self.arc_dep = _mlp(h, c.arc_dim, c.dropout)
        self.arc_biaffine = Biaffine(c.arc_dim, c.arc_dim, 1, bias_x=False, bias_y=True)
        self.label_head = _mlp(h, c.label_dim, c.dropout)
        self.label_dep = _mlp(h, c.label_dim, c.dropout)
        self.label_biaffine = Biaffine(c.label_dim, c.label_dim, len(vocabs.deprels),
                                       bias_x=True, bias_y=True)
        #: second-order part kind -> (MLP per role, triaffine)
        self.part_kinds = [k for k in PART_ROLES if getattr(c, f"{k}_dim")]
        if self.part_kinds:
            self.part_mlps = nn.ModuleDict({
                f"{k}_{role}": _mlp(h, getattr(c, f"{k}_dim"), c.dropout)
                for k in self.part_kinds for role in PART_ROLES[k]})
            self.part_triaffines = nn.ModuleDict({k: Triaffine(getattr(c, f"{k}_dim"))
                                                  for k in self.part_kinds})
        self.tag_columns = [col for col in TAG_COLUMNS if vocabs.tags[col].used]
        if self.tag_columns:
            self.tag_mlp = _mlp(h, c.tag_hidden, c.dropout)
            self.tag_out = nn.ModuleDict({col: nn.Linear(c.tag_hidden, len(vocabs.tags[col]))
                                          for col in self.tag_columns})

    # ------------------------------------------------------------------ encoder
    def encode(self, batch: dict) -> torch.Tensor:
        """Contextual vectors (B, N+1, 2 lstm_dim) of a padded batch (see
        :meth:`NeuralScorer.batch <arboreal.neural.scorer.NeuralScorer.batch>`)."""
        words = batch["words"]                             # (B, N) word ids, PAD-padded
        if self.training and self.config.word_dropout:
            drop = torch.rand(words.shape, device=words.device) < self.config.word_dropout
            words = words.masked_fill(drop & (words != PAD), 1)
        x = self.word_embed(words)
        if self.config.pretrained_dim:
            proj = self.pretrained_proj
            x = x + proj(batch["pretrained"].to(proj.weight.dtype))
        chars = self.char_cnn(batch["chars"])[batch["char_index"]]   # (B, N, char_dim)
        parts = [x, chars]
        if self.config.tag_dim:
            parts.append(self.tag_embed(batch["input_tags"]))
        if self.config.encoder_states:
            parts.append(self.encoder_proj(self.mixed_states(batch["encoder_states"])))
        if self.word_encoders is not None:
            tables = batch["word_encoder_tables"]
            parts += [enc(tables[name], batch["char_index"]).to(x.dtype)
                      for name, enc in self.word_encoders.items()]
        x = torch.cat(parts, dim=-1)
        B = x.shape[0]
        x = torch.cat([self.root.expand(B, 1, -1), x], dim=1)       # position 0: the root
        x = self.dropout(x)
        if self.lstm is None:
            return x
        return self.dropout(self.lstm(x, batch["lengths"] + 1))

    def mixed_states(self, states: torch.Tensor) -> torch.Tensor:
        """(B, N, S, D) transformer states -> (B, N, D) in the network's precision."""
        states = states.to(self.encoder_proj.weight.dtype)
        if self.config.encoder_layer >= 0:
            return states[:, :, self.config.encoder_layer]
        return self.encoder_mix(states)

    def attach_encoder(self, encoder: nn.Module) -> None:
        """Make ``encoder`` part of the network: trained (its weights unfrozen) and saved
        with it."""
        encoder.requires_grad_(True)
        self.encoder = encoder

    # ------------------------------------------------------------------ outputs
    def arc_scores(self, h: torch.Tensor) -> torch.Tensor:
        """(B, N+1, N+1) scores[b, head, modifier]."""
        head, dep = self.arc_head(h), self.arc_dep(h)
        return self.arc_biaffine.pairs(head, dep)[:, 0]

    def part_scores(self, h: torch.Tensor) -> dict:
        """kind -> (B, N+1, N+1, N+1) second-order scores in the layout of
        :mod:`arboreal.inference.potentials` (``sib[b, h, a, c]``, ``grand[b, g, h, m]``);
        empty for a first-order network."""
        out = {}
        for kind in self.part_kinds:
            outer, left, right = (self.part_mlps[f"{kind}_{role}"](h)
                                  for role in PART_ROLES[kind])
            out[kind] = self.part_triaffines[kind](left, right, outer)
        return out

    def label_scores(self, h: torch.Tensor, b: torch.Tensor, heads: torch.Tensor,
                     mods: torch.Tensor) -> torch.Tensor:
        """(P, L) label scores of the arcs heads[p] -> mods[p] of sentences b[p]."""
        return self.label_biaffine.aligned(self.label_head(h[b, heads]),
                                           self.label_dep(h[b, mods]))

    def tag_scores(self, h: torch.Tensor) -> dict:
        """column -> (B, N+1, classes) scores of the tag classifiers (position 0 unused)."""
        if not self.tag_columns:
            return {}
        z = self.tag_mlp(h)
        return {col: out(z.to(out.weight.dtype))
                for col, out in ((c, self.tag_out[c]) for c in self.tag_columns)}


def low_precision_copy(network: Network) -> Network:
    """A copy of ``network`` for inference whose encoder, MLPs and embeddings compute in
    bfloat16, while the biaffine forms and tag outputs stay float32: scores keep float32
    resolution (bfloat16 has 8 significant bits: at a score of 16 its step is 0.125).
    Faster on a CPU with native bfloat16 (AVX512-BF16, AMX), slower elsewhere; the
    scores differ from the float32 network's by bfloat16 rounding (docs/benchmarks.md,
    section neural_precision, measures the effect on accuracy)."""
    import copy

    low = copy.deepcopy(network).to(torch.bfloat16)
    low.arc_biaffine.float()
    low.label_biaffine.float()
    if low.part_kinds:
        low.part_triaffines.float()
    if low.tag_columns:
        low.tag_out.float()
    return low.eval()
