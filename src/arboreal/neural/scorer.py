"""The neural scorer: arc, label and tag scores from a BiLSTM encoder.

:class:`NeuralScorer` is a scorer under arboreal's seam (:mod:`arboreal.scorers`): it
encodes sentences, returns arc scores ``(B, N+1, N+1)`` in the one score convention for
the model's :class:`~arboreal.inference.structure.TreeStructure` to decode, label scores
of the chosen arcs, and the tags its classifiers predict; it saves its parameters as
plain arrays in the model file (no pickle, no ``torch.load``). Training it is
:mod:`arboreal.learn.neural`'s job; this module does not import the learners.

Sentences are encoded once per call (:class:`EncodedCorpus`): every distinct form gets
its word id, pretrained-vector id and character ids; a batch gathers them by numpy
indexing, so no Python loop runs over the words of a batch.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from arboreal._cores import available_cores
from arboreal.errors import ArborealError
from arboreal.neural.vocab import PAD, TAG_COLUMNS, UNK, Vocab, Vocabularies

#: characters of a word beyond this many are not read by the character model
MAX_WORD_CHARS = 30
#: a batch of the parser holds at most this many words (memory and speed: bucketed by
#: length under this budget)
PARSE_TOKEN_BUDGET = 4000
#: the names of a fine-tuned transformer's parameters in the network's state
ENCODER_PREFIX = "encoder.model."
#: pieces per transformer pass when a frozen encoder's states are computed ahead
FORWARD_PIECE_BUDGET = 4096
#: sentences longer than this get arc scores only (decoded at first order): the
#: second-order part scores of n words are (n+1)^3 numbers per part kind
PARTS_MAX_WORDS = 200
#: second-order part scores are computed for at most this many entries (B (N+1)^3) at a
#: time in parsing (256 MiB of float64 per part kind)
PART_SCORE_ENTRIES = 1 << 25


def require_torch():
    """The torch module, or ArborealError naming the extra to install. OpenMP is told to
    wait passively first (it reads the setting once, when torch loads): spinning threads
    slow a busy machine several times."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import torch
    except ImportError:
        raise ArborealError("this model has a neural scorer, which needs torch: pip install "
                            "'arboreal[neural]' (for the CPU build: pip install torch "
                            "--index-url https://download.pytorch.org/whl/cpu)") from None
    return torch


def default_threads() -> int:
    """``OMP_NUM_THREADS`` when it is set to a positive number (a user sharing the
    machine, or processes side by side, as test workers), else the cores this process
    may use."""
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    return available_cores()


PRECISIONS = ("float32", "bfloat16")


def native_bfloat16() -> bool:
    """Whether this CPU multiplies bfloat16 natively (AVX512-BF16 or AMX), as torch
    reports it (False where torch cannot tell)."""
    torch = require_torch()
    cpu = getattr(torch, "cpu", None)
    checks = [getattr(cpu, name, None) for name in ("_is_avx512_bf16_supported",
                                                     "_is_amx_tile_supported")]
    try:
        return any(check() for check in checks if check is not None)
    except RuntimeError:
        return False


def default_precision() -> str:
    """The precision of a loaded model's parsing: ``ARBOREAL_PRECISION`` when it names
    one of :data:`PRECISIONS`, else ``bfloat16`` on a CPU that computes it natively
    (:func:`native_bfloat16`) and ``float32`` elsewhere."""
    value = os.environ.get("ARBOREAL_PRECISION", "").strip().lower()
    if value:
        if value not in PRECISIONS:
            raise ArborealError(f"ARBOREAL_PRECISION={value!r}: expected one of "
                                f"{', '.join(PRECISIONS)}")
        return value
    return "bfloat16" if native_bfloat16() else "float32"


def configure_threads(threads: int | None = None) -> None:
    """torch's intra-op threads = ``threads``, or :func:`default_threads`."""
    torch = require_torch()
    torch.set_num_threads(max(1, default_threads() if threads is None else threads))


@dataclass
class EncodedCorpus:
    """Sentences as id arrays for the network.

    lengths (S,) words per sentence; starts (S+1,) offsets into the flat per-word arrays;
    form_ids (W,) each word's row in the form table; table_words / table_pretrained (F,)
    ids of each distinct form; table_chars (F, C) its character ids (PAD-padded);
    input_tags (W,) UPOS input ids (zeros when unused); gold: column -> (W,) class ids
    (heads and deprels too) when the sentences carry them, else None. With a transformer
    encoder: piece_offsets (F+1,) and piece_ids (P,), the word pieces of each distinct
    form (:meth:`PieceTokenizer.pieces <arboreal.neural.transformer.PieceTokenizer.
    pieces>`), and encoder_states (W, S, D), a frozen encoder's word states computed
    once (:meth:`NeuralScorer.compute_encoder_states`; None: computed per batch). With
    word encoders (:mod:`arboreal.neural.encoders`): word_encoder_tables, name -> (F, K)
    int64 features of each distinct form.
    """

    lengths: np.ndarray
    starts: np.ndarray
    form_ids: np.ndarray
    table_words: np.ndarray
    table_pretrained: np.ndarray
    table_chars: np.ndarray
    input_tags: np.ndarray
    gold: dict | None
    piece_offsets: np.ndarray | None = None
    piece_ids: np.ndarray | None = None
    encoder_states: object = None
    word_encoder_tables: dict | None = None

    def __len__(self) -> int:
        return len(self.lengths)


class NeuralScorer:
    """Vocabularies, pretrained vectors and the :class:`~arboreal.neural.network.Network`.

    ``pretrained_words`` / ``pretrained`` (V, D) float32: frozen vectors (row 0 zeros for
    words without one), or None. ``lemma_lookup``: the training words' lemmas, used before
    the predicted lemma rule (:func:`arboreal.features.lemmas.build_lemma_lookup`; empty
    without lemmas). ``encoder``: a pretrained transformer
    (:class:`~arboreal.neural.transformer.PretrainedEncoder`) and ``encoder_record`` what
    the model file says of it (name, sha256 of its weights, pooling, whether it is
    fine-tuned, the distribution that bundles it). A frozen encoder computes in the
    precision of :func:`default_precision` throughout, training included, so that the
    states a model was trained on are those it parses with; a fine-tuned one is part of
    the network (:meth:`Network.attach_encoder
    <arboreal.neural.network.Network.attach_encoder>`).
    """

    kind = "neural"

    def __init__(self, config, vocabs: Vocabularies, pretrained_words: list[str] | None = None,
                 pretrained: np.ndarray | None = None, network=None,
                 lemma_lookup: dict[tuple[str, str], str] | None = None,
                 encoder=None, encoder_record: dict | None = None):
        torch = require_torch()
        from arboreal.neural.network import Network

        self.config = config
        self.vocabs = vocabs
        self.pretrained_vocab = Vocab(pretrained_words or [])
        if pretrained is not None:
            rows = self.pretrained_vocab.ids(pretrained_words)
            keep = rows > UNK                       # a word spelt like a reserved entry
            table = torch.zeros((len(self.pretrained_vocab), pretrained.shape[1]))
            # rounded to float16, as model files store them: a saved model scores as the
            # trained one (torch converts: numpy's float16 casts are several times slower)
            table[torch.from_numpy(rows[keep])] = \
                torch.from_numpy(np.ascontiguousarray(pretrained[keep])).half().float()
            self.pretrained = table
        else:
            self.pretrained = None
        self.network = network if network is not None else Network(config, vocabs)
        self.lemma_lookup = dict(lemma_lookup or {})
        self._cache = None
        self.device = "cpu"
        self._precision = "float32"
        self._low_network = None
        self.encoder = encoder
        self.encoder_record = dict(encoder_record or {})
        if encoder is not None:
            if self.fine_tuned:
                if self.network.encoder is None:
                    self.network.attach_encoder(encoder)
            else:
                encoder.to(getattr(torch, default_precision()))
                encoder.eval()

    @property
    def fine_tuned(self) -> bool:
        """Whether the transformer encoder is trained with the network."""
        return bool(self.encoder_record.get("fine_tuned"))

    @property
    def precision(self) -> str:
        """The precision of inference: ``float32`` (training, and models built in this
        process) or ``bfloat16`` (the encoder of :func:`~arboreal.neural.network.
        low_precision_copy`; loaded models on a CPU with native bfloat16, see
        :func:`default_precision`). Setting it drops the cached low-precision copy."""
        return self._precision

    @precision.setter
    def precision(self, value: str) -> None:
        if value not in PRECISIONS:
            raise ValueError(f"precision {value!r}: expected one of {', '.join(PRECISIONS)}")
        self._precision = value
        self.weights_changed()

    def weights_changed(self) -> None:
        """Drop what was computed from the network's weights (the low-precision copy and
        the last batch's states); call it after changing them."""
        self._low_network = None
        self._cache = None

    def _inference_network(self):
        """The network that parsing runs: the float32 one, or its bfloat16 copy."""
        if self._precision == "float32":
            return self.network
        if self._low_network is None:
            from arboreal.neural.network import low_precision_copy

            self._low_network = low_precision_copy(self.network)
        return self._low_network

    def _inference_encoder(self):
        """The transformer that parsing runs (None without one)."""
        if self.encoder is None:
            return None
        return self._inference_network().encoder if self.fine_tuned else self.encoder

    def to(self, device: str) -> "NeuralScorer":
        """Move the network (and the pretrained vectors) to a torch device ("cpu",
        "cuda", ...); batches are built there, scores come back to the CPU."""
        self.device = device
        self.network.to(device)
        if self.encoder is not None:
            self.encoder.to(device)
        if self.pretrained is not None:
            self.pretrained = self.pretrained.to(device)
        self.weights_changed()
        return self

    # ------------------------------------------------------------------ facts
    @property
    def labels(self) -> np.ndarray:
        """The DEPREL of each label id (reserved ids included)."""
        return np.array(self.vocabs.deprels.items, dtype=object)

    @property
    def reads_tags(self) -> bool:
        """Whether the encoder reads the input's UPOS column."""
        return bool(self.config.tag_dim)

    @property
    def tag_columns(self) -> list[str]:
        """The Sentence columns the network predicts."""
        return list(self.network.tag_columns)

    @property
    def part_kinds(self) -> tuple[str, ...]:
        """The second-order part kinds the network scores ("sib", "grand"; empty at
        first order)."""
        return tuple(self.network.part_kinds)

    @property
    def order(self) -> int:
        """1 (arc scores) or 2 (arc, sibling and/or grandparent scores)."""
        return 2 if self.part_kinds else 1

    # ------------------------------------------------------------------ encoding
    def encode(self, sentences, with_gold: bool = False) -> EncodedCorpus:
        """Id arrays of ``sentences`` (and their gold trees, labels and tag classes with
        ``with_gold``). O(words + distinct forms x characters)."""
        lengths = np.array([len(s) for s in sentences], dtype=np.int64)
        starts = np.zeros(len(sentences) + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        flat_forms = [f for s in sentences for f in s.forms[1:].tolist()]
        form_table: dict[str, int] = {}
        form_ids = np.fromiter((form_table.setdefault(f, len(form_table)) for f in flat_forms),
                               dtype=np.int64, count=len(flat_forms))
        forms = list(form_table)
        lower = [f.lower() for f in forms]
        chars = np.zeros((len(forms), min(MAX_WORD_CHARS, max((len(f) for f in forms),
                                                               default=1)) or 1), np.int64)
        cindex = self.vocabs.chars.index
        for i, f in enumerate(forms):
            ids = [cindex.get(ch, UNK) for ch in f[:chars.shape[1]]]
            chars[i, :len(ids)] = ids
        input_tags = (self.vocabs.input_tags.ids([t for s in sentences
                                                  for t in s.upos[1:].tolist()])
                      if self.config.tag_dim else np.zeros(len(flat_forms), dtype=np.int64))
        piece_offsets = piece_ids = None
        if self.encoder is not None:
            piece_offsets, piece_ids = self.encoder.tokenizer.pieces(forms)
        gold = None
        if with_gold:
            from arboreal.neural.vocab import lemma_class

            gold = {"heads": np.concatenate([np.asarray(s.heads[1:], dtype=np.int64)
                                             for s in sentences]) if sentences else
                    np.zeros(0, np.int64),
                    "deprels": self.vocabs.deprels.ids([d for s in sentences
                                                        for d in s.deprels[1:].tolist()])}
            for col in self.tag_columns:
                if col == "lemmas":
                    values = [lemma_class(f, l) for s in sentences
                              for f, l in zip(s.forms[1:].tolist(), s.lemmas[1:].tolist())]
                else:
                    values = [v for s in sentences for v in getattr(s, col)[1:].tolist()]
                ids = self.vocabs.tags[col].ids(values)
                if "_" not in self.vocabs.tags[col].index:
                    # "_" is not a class of this column (unannotated): no loss there
                    ids[np.array([v == "_" for v in values], dtype=bool)] = PAD
                gold[col] = ids
        tables = None
        if self.network.word_encoders is not None:
            tables = {name: enc.form_features(forms)
                      for name, enc in self.network.word_encoders.items()}
        return EncodedCorpus(lengths, starts, form_ids, self.vocabs.words.ids(lower),
                             self.pretrained_vocab.ids(lower), chars, input_tags, gold,
                             piece_offsets, piece_ids, word_encoder_tables=tables)

    def encoder_state_bytes(self, corpus: EncodedCorpus) -> int:
        """Bytes that :meth:`compute_encoder_states` would hold for ``corpus``."""
        if self.encoder is None:
            return 0
        item = 2 if default_precision() == "bfloat16" else 4
        return int(corpus.lengths.sum()) * self.encoder.states * self.encoder.hidden * item

    def compute_encoder_states(self, corpus: EncodedCorpus) -> None:
        """Run a frozen transformer over ``corpus`` once and keep its word states in it
        (``corpus.encoder_states``, (W, S, D) in the encoder's precision), so that
        training epochs and dev scoring gather them instead of running it again.
        O(words x the model's cost per piece); memory :meth:`encoder_state_bytes`."""
        torch = require_torch()
        if self.encoder is None or self.fine_tuned:
            return
        total = int(corpus.lengths.sum())
        out = torch.empty((total, self.encoder.states, self.encoder.hidden),
                          dtype=next(self.encoder.parameters()).dtype)
        counts = corpus.piece_offsets[1:] - corpus.piece_offsets[:-1]
        pieces = np.add.reduceat(counts[corpus.form_ids], corpus.starts[:-1]) \
            if total else np.zeros(len(corpus), np.int64)
        pieces = np.where(corpus.lengths > 0, pieces, 0)
        with torch.inference_mode():
            for rows in token_batches(pieces + 2, FORWARD_PIECE_BUDGET):
                rows = np.sort(rows)
                words = np.concatenate([np.arange(corpus.starts[r], corpus.starts[r + 1])
                                        for r in rows])
                states = self.encoder(self.encoder.inputs(
                    corpus.piece_offsets, corpus.piece_ids, corpus.form_ids[words],
                    corpus.lengths[rows]), self.device)
                out[torch.from_numpy(words)] = states.cpu()
        corpus.encoder_states = out

    def batch(self, corpus: EncodedCorpus, rows: np.ndarray) -> dict:
        """The padded tensors of sentences ``rows`` of ``corpus`` (see
        :meth:`Network.encode <arboreal.neural.network.Network.encode>`), plus the gold
        arrays (B, N+1) (heads, with -1 in padding and at 0) when the corpus has them."""
        torch = require_torch()
        rows = np.asarray(rows, dtype=np.int64)
        lengths = corpus.lengths[rows]
        N = int(lengths.max()) if len(rows) else 0
        pos = np.arange(N)
        valid = pos[None, :] < lengths[:, None]                     # (B, N)
        flat = np.where(valid, corpus.starts[rows][:, None] + pos[None, :], 0)
        fids = np.where(valid, corpus.form_ids[flat] if len(corpus.form_ids) else 0, -1)
        uniq, inverse = np.unique(fids[valid], return_inverse=True)
        char_index = np.zeros((len(rows), N), dtype=np.int64)
        char_index[valid] = inverse
        words = np.where(valid, corpus.table_words[np.maximum(fids, 0)], PAD)
        def tensor(a: np.ndarray):
            return torch.from_numpy(a).to(self.device)

        out = {"lengths": torch.from_numpy(lengths.copy()),     # pack_padded wants the CPU
               "words": tensor(words),
               "chars": tensor(corpus.table_chars[uniq] if len(uniq) else
                               np.zeros((1, 1), np.int64)),
               "char_index": tensor(char_index)}
        if self.pretrained is not None:
            pre = np.where(valid, corpus.table_pretrained[np.maximum(fids, 0)], PAD)
            out["pretrained"] = torch.nn.functional.embedding(tensor(pre), self.pretrained)
        if self.config.tag_dim:
            out["input_tags"] = tensor(np.where(valid, corpus.input_tags[flat], PAD))
        if corpus.word_encoder_tables is not None:
            out["word_encoder_tables"] = {
                name: tensor(table[uniq] if len(uniq) else np.zeros((1, 1), np.int64))
                for name, table in corpus.word_encoder_tables.items()}
        if self.encoder is not None:
            out["encoder_valid"] = valid
            if corpus.encoder_states is not None and not self.fine_tuned:
                out["encoder_states"] = self._scatter(
                    corpus.encoder_states[torch.from_numpy(flat[valid])], valid)
            else:
                out["encoder_inputs"] = self.encoder.inputs(
                    corpus.piece_offsets, corpus.piece_ids, corpus.form_ids[flat[valid]],
                    lengths)
        if corpus.gold is not None:
            for key, values in corpus.gold.items():
                fill = -1 if key == "heads" else PAD
                g = np.full((len(rows), N + 1), fill, dtype=np.int64)
                g[:, 1:][valid] = values[flat[valid]]
                out["gold_" + key] = g
        return out

    def _scatter(self, states, valid: np.ndarray):
        """(W, S, D) word states -> (B, N, S, D), zeros in padding."""
        torch = require_torch()
        mask = torch.from_numpy(valid).to(states.device)
        out = states.new_zeros((*valid.shape, *states.shape[1:]))
        out[mask] = states
        return out.to(self.device)

    # ------------------------------------------------------------------ scoring
    def forward(self, batch: dict, network=None):
        """(encoder states (B, N+1, H), arc scores (B, N+1, N+1) tensor) of ``network``
        (default: the trained float32 one). A batch without ``encoder_states`` gets them
        from the transformer first (with gradients when it is fine-tuned and training)."""
        network = self.network if network is None else network
        if "encoder_inputs" in batch and "encoder_states" not in batch:
            torch = require_torch()
            encoder = network.encoder if self.fine_tuned else self.encoder
            with torch.set_grad_enabled(self.fine_tuned and torch.is_grad_enabled()):
                states = encoder(batch["encoder_inputs"], self.device)
            batch = dict(batch, encoder_states=self._scatter(states, batch["encoder_valid"]))
        h = network.encode(batch)
        return h, network.arc_scores(h)

    @staticmethod
    def lengths(corpus: EncodedCorpus) -> np.ndarray:
        return corpus.lengths

    def _states(self, corpus: EncodedCorpus, rows: np.ndarray):
        """(encoder states, arc scores) of sentences ``rows``, in inference mode; the
        last batch's are kept, so that its labels and tags (of the whole batch or of
        some of its sentences) cost no second pass."""
        torch = require_torch()
        key = tuple(int(r) for r in rows)
        if self._cache is not None and self._cache[0] is corpus:
            if self._cache[1] == key:
                return self._cache[2]
            where = {r: b for b, r in enumerate(self._cache[1])}
            if all(r in where for r in key):    # sentences of the last batch: its rows
                pick = torch.tensor([where[r] for r in key])
                h, arc = self._cache[2]
                return h[pick.to(h.device)], arc[pick.to(arc.device)]
        self.network.eval()
        with torch.inference_mode():
            out = self.forward(self.batch(corpus, rows), self._inference_network())
        self._cache = (corpus, key, out)
        return out

    @staticmethod
    def batches(lengths: np.ndarray) -> list[np.ndarray]:
        """Sentence indices in batches of similar length for parsing (at most
        :data:`PARSE_TOKEN_BUDGET` padded words each)."""
        return token_batches(lengths, PARSE_TOKEN_BUDGET)

    def arc_scores(self, corpus: EncodedCorpus, rows: np.ndarray, summed: bool = False
                   ) -> np.ndarray:
        """(B, N+1, N+1) float64 arc scores of sentences ``rows``. O(n^2 arc_dim) each
        after the encoder."""
        return self._states(corpus, rows)[1].double().cpu().numpy()

    def potentials(self, corpus: EncodedCorpus, rows: np.ndarray):
        """Yield (k, :class:`~arboreal.inference.potentials.Potentials`) for each sentence
        ``rows[k]``: its arc scores and second-order part scores (float64, cropped to its
        length), computed a few sentences at a time (at most :data:`PART_SCORE_ENTRIES`
        entries); a sentence over :data:`PARTS_MAX_WORDS` words gets arc scores only.
        O(n d^3 + n^3 d) per sentence and part kind of d units."""
        torch = require_torch()
        from arboreal.inference.potentials import Potentials

        h, arc = self._states(corpus, rows)
        lengths = corpus.lengths[rows]
        arcs = arc.double().cpu().numpy()
        short = np.flatnonzero(lengths <= PARTS_MAX_WORDS)
        for k in np.flatnonzero(lengths > PARTS_MAX_WORDS).tolist():
            n = int(lengths[k])
            yield k, Potentials(np.ascontiguousarray(arcs[k, : n + 1, : n + 1]))
        network = self._inference_network()
        start = 0
        while start < len(short):
            top = int(lengths[short[start:]].max()) + 1
            take = short[start: start + max(1, PART_SCORE_ENTRIES // top ** 3)]
            start += len(take)
            N = int(lengths[take].max()) + 1
            with torch.inference_mode():
                parts = network.part_scores(h[torch.from_numpy(take).to(h.device), :N])
                parts = {kind: t.double().cpu().numpy() for kind, t in parts.items()}
            for j, k in enumerate(take.tolist()):
                n = int(lengths[k]) + 1
                yield k, Potentials(np.ascontiguousarray(arcs[k, :n, :n]),
                                    **{kind: np.ascontiguousarray(t[j, :n, :n, :n])
                                       for kind, t in parts.items()})

    def _label_matrix(self, corpus: EncodedCorpus, rows: np.ndarray, heads: list):
        """(label scores (P, L) tensor with the reserved ids at -inf, the arcs' heads (P,),
        the offsets of each sentence's words (B+1,))."""
        torch = require_torch()
        h, _ = self._states(corpus, rows)
        lengths = [len(x) - 1 for x in heads]
        bi = np.repeat(np.arange(len(rows)), lengths)
        mi = np.concatenate([np.arange(1, n + 1) for n in lengths]) if lengths else \
            np.zeros(0, np.int64)
        hi = np.concatenate([np.asarray(x[1:], dtype=np.int64) for x in heads]) if heads else \
            np.zeros(0, np.int64)
        with torch.inference_mode():
            dev = self.device
            network = self._inference_network()
            lab = network.label_scores(h, torch.from_numpy(bi).to(dev),
                                       torch.from_numpy(hi).to(dev),
                                       torch.from_numpy(mi.astype(np.int64)).to(dev))
            lab = lab.double().cpu().numpy().copy()
        lab[:, :2] = -np.inf                                # the reserved ids
        return lab, hi, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)

    def label_scores(self, corpus: EncodedCorpus, i: int, heads: np.ndarray) -> np.ndarray:
        """(n+1, L) float64 label scores of sentence i's words given ``heads`` (row 0
        zeros; the reserved ids -inf; the root rule not applied)."""
        lab, _, _ = self._label_matrix(corpus, np.array([i]), [heads])
        out = np.zeros((len(heads), lab.shape[1]))
        out[1:] = lab
        return out

    def predict_labels(self, corpus: EncodedCorpus, rows: np.ndarray, heads: list) -> list:
        """DEPREL arrays (n+1,) of the given trees: each arc's best label, ``root``
        exactly for the words on the root when the label set has it."""
        lab, hi, cut = self._label_matrix(corpus, rows, heads)
        root_id = self.vocabs.deprels.index.get("root")
        if root_id is not None and len(hi):
            on_root = hi == 0
            rooted = lab[:, root_id].copy()
            lab[on_root] = -np.inf
            lab[on_root, root_id] = rooted[on_root]
            lab[~on_root, root_id] = -np.inf
        ids = lab.argmax(axis=1) if len(hi) else np.zeros(0, np.int64)
        labels = self.labels
        out = []
        for k in range(len(rows)):
            d = np.empty(cut[k + 1] - cut[k] + 1, dtype=object)
            d[0] = "<root>"
            d[1:] = labels[ids[cut[k]:cut[k + 1]]]
            out.append(d)
        return out

    def predict_tags(self, corpus: EncodedCorpus, rows: np.ndarray) -> dict:
        """column -> [predicted values (n,) object] for sentences ``rows``."""
        torch = require_torch()
        h, _ = self._states(corpus, rows)
        with torch.inference_mode():
            scores = self._inference_network().tag_scores(h)
            # the best class past the two reserved ids (first of equals, as numpy's)
            best = {col: (s[..., 2:].argmax(dim=-1) + 2).cpu().numpy()
                    for col, s in scores.items()}
        out = {}
        lengths = corpus.lengths[rows]
        for col, ids in best.items():
            classes = np.array(self.vocabs.tags[col].items, dtype=object)
            out[col] = [classes[ids[k, 1: int(n) + 1]] for k, n in enumerate(lengths)]
        return out

    # ------------------------------------------------------------------ files
    def put(self, meta: dict, arrays: dict) -> None:
        """Add the scorer to a model file being written: metadata section ``neural``
        (sizes, tag columns) and arrays ``nn_*`` (parameters, float32), ``nv_*``
        (vocabularies), ``np_*`` (pretrained vectors, float16), ``nl_lemma_*`` (the lemma
        lookup, if any)."""
        from arboreal.io.model_file import put_strings

        state = self.network.state_dict()
        names, encoder_names = [], []
        for k, v in state.items():
            if k.startswith(ENCODER_PREFIX):     # a fine-tuned transformer: float16
                encoder_names.append(k[len(ENCODER_PREFIX):])
                arrays["nt_" + encoder_names[-1].replace(".", "__")] = \
                    v.detach().cpu().to(require_torch().float16).numpy()
                continue
            key = "nn_" + k.replace(".", "__")
            arrays[key] = v.detach().cpu().numpy().astype(np.float32)
            names.append(k)
        for name, items in self.vocabs.names_and_lists().items():
            put_strings(arrays, "nv_" + name, items)
        if self.pretrained is not None:
            put_strings(arrays, "np_words", self.pretrained_vocab.items[2:])
            arrays["np_vectors"] = self.pretrained[2:].cpu().numpy().astype(np.float16)
        if self.lemma_lookup:
            from arboreal.features.lemmas import put_lemma_lookup

            put_lemma_lookup(arrays, "nl_lemma", self.lemma_lookup)
        meta["neural"] = {"config": self.config.as_dict(), "parameters": names,
                          "tag_columns": self.tag_columns}
        if self.encoder is not None:
            record = {k: v for k, v in self.encoder_record.items() if k != "files"}
            if self.fine_tuned:
                import json

                arrays["ntfiles"] = np.frombuffer(json.dumps(self.encoder.files).encode(),
                                                  dtype=np.uint8)
                record["parameters"] = encoder_names
            meta["neural"]["encoder"] = record

    @classmethod
    def from_file(cls, fields, arrays) -> "NeuralScorer":
        """The scorer of a model file (every shape checked against the metadata;
        ModelError / ValueError for a bad file). ArborealError without torch."""
        torch = require_torch()
        from arboreal.io.model_file import array_shape, get_string_list
        from arboreal.neural.network import NetworkConfig

        section = fields.section("neural")
        raw = section.json("config", dict)
        known = NetworkConfig.__dataclass_fields__
        if set(raw) - set(known):
            raise section.fail("config", f"unknown sizes {sorted(set(raw) - set(known))}")
        config = NetworkConfig(**raw)
        if not isinstance(config.word_encoders, dict) or not all(
                isinstance(v, dict) for v in config.word_encoders.values()):
            raise section.fail("config", "word_encoders is not a table of options")
        for key, value in config.as_dict().items():
            if key == "word_encoders":
                continue
            if not isinstance(value, (int, float)) or isinstance(value, bool) \
                    or value < (-1 if key == "encoder_layer" else 0) \
                    or value > (1 if key.endswith("dropout") else 1 << 16):
                raise section.fail("config", f"bad size {key}={value!r}")
        if config.encoder_states and config.encoder_layer >= config.encoder_states:
            raise section.fail("config", "encoder_layer beyond the encoder's states")
        lists = {name: get_string_list(arrays, "nv_" + name)
                 for name in ("words", "chars", "deprels", "input_tags",
                              *(f"tag_{c}" for c in TAG_COLUMNS))}
        vocabs = Vocabularies.from_lists(lists)
        words = pretrained = None
        if config.pretrained_dim:
            words = get_string_list(arrays, "np_words")
            if array_shape(arrays, "np_vectors") != (len(words), config.pretrained_dim):
                raise ValueError("pretrained vectors disagree with their word list")
            pretrained = np.asarray(arrays["np_vectors"])      # float16, as saved
            if pretrained.dtype.kind != "f":
                raise ValueError("pretrained vectors are not floating-point numbers")
        lemma_lookup = None
        if "nl_lemma_keys" in arrays:
            from arboreal.features.lemmas import get_lemma_lookup

            lemma_lookup = get_lemma_lookup(arrays, "nl_lemma")
        encoder, record = _encoder_of_file(section, arrays, config)
        scorer = cls(config, vocabs, words, pretrained, lemma_lookup=lemma_lookup,
                     encoder=encoder, encoder_record=record)
        state = {k: v for k, v in scorer.network.state_dict().items()
                 if not k.startswith(ENCODER_PREFIX)}
        names = section.strings("parameters", max_items=1024)
        if set(names) != set(state):
            raise section.fail("parameters", "do not match the network of these sizes")
        loaded = {}
        for k in names:
            key = "nn_" + k.replace(".", "__")
            if array_shape(arrays, key) != tuple(state[k].shape):
                raise ValueError(f"parameter {k} has shape {array_shape(arrays, key)}, "
                                 f"expected {tuple(state[k].shape)}")
            value = np.asarray(arrays[key], dtype=np.float32)
            if not np.isfinite(value).all():
                raise ValueError(f"parameter {k} holds inf or NaN")
            loaded[k] = torch.from_numpy(value.copy())
        scorer.network.load_state_dict(loaded, strict=scorer.network.encoder is None)
        scorer.network.eval()
        scorer.precision = default_precision()
        configure_threads()
        return scorer


def _encoder_of_file(section, arrays, config):
    """(the transformer encoder, its record) of a model file's ``neural`` section, or
    (None, None): a frozen one located by name and checked by the sha256 of its
    weights (ArborealError saying what to install where it is not found), a
    fine-tuned one built from the stored files and float16 weights."""
    record = section.section("encoder").data if section.has("encoder") else None
    if record is None:
        if config.encoder_states:
            raise section.fail("config", "names a transformer encoder the file lacks")
        return None, None
    if not isinstance(record.get("name"), str) \
            or not isinstance(record.get("pooling", "mean"), str):
        raise section.fail("encoder", "not an encoder record")
    from arboreal.neural.transformer import PretrainedEncoder, locate_encoder

    pooling = record.get("pooling", "mean")
    if record.get("fine_tuned"):
        torch = require_torch()
        from arboreal.io.model_file import array_shape

        import json

        try:
            files = json.loads(np.asarray(arrays["ntfiles"], dtype=np.uint8).tobytes())
        except (KeyError, ValueError, UnicodeDecodeError):
            files = None
        names = record.get("parameters")
        if not isinstance(files, dict) or "config.json" not in files \
                or not isinstance(names, list) or len(names) > 100_000:
            raise section.fail("encoder", "a fine-tuned encoder without its files")
        state = {}
        for name in names:
            key = "nt_" + str(name).replace(".", "__")
            if key not in arrays:
                raise ValueError(f"encoder parameter {name} is missing")
            array_shape(arrays, key)
            value = np.asarray(arrays[key])
            if value.dtype.kind != "f" or not np.isfinite(value).all():
                raise ValueError(f"encoder parameter {name} is not finite floats")
            state[name] = torch.from_numpy(value.astype(np.float32))
        encoder = PretrainedEncoder(files=files, state=state, pooling=pooling)
    else:
        sha = record.get("sha256")
        if not isinstance(sha, str) or len(sha) != 64:
            raise section.fail("encoder", "no sha256 of the encoder's weights")
        source = None
        path = record.get("path")
        if isinstance(path, str):
            try:
                source = locate_encoder(path, sha, download=False)
            except ArborealError:
                source = None
        if source is None:
            source = locate_encoder(record["name"], sha)
        encoder = PretrainedEncoder(source.folder, pooling=pooling)
    if (encoder.states, encoder.hidden) != (config.encoder_states, config.encoder_hidden):
        raise section.fail("encoder", f"has {encoder.states} states of {encoder.hidden} "
                                      f"units, the network expects "
                                      f"{config.encoder_states} of {config.encoder_hidden}")
    return encoder, record


def token_batches(lengths: np.ndarray, budget: int, order: np.ndarray | None = None
                  ) -> list[np.ndarray]:
    """Sentence indices cut into batches of similar length, each at most ``budget``
    words of padded size (B x longest), one sentence at least. Sentences are sorted
    by length (``order``: a given order, e.g. noisy lengths for training). O(S log S)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(lengths, kind="stable") if order is None else order
    out = []
    start = 0
    while start < len(order):
        end = start + 1
        top = max(int(lengths[order[start]]), 1)
        while end < len(order):
            top_next = max(top, int(lengths[order[end]]))
            if top_next * (end - start + 1) > budget:
                break
            top = top_next
            end += 1
        out.append(order[start:end])
        start = end
    return out
