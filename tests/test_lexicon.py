"""The lexicon of word statistics (arboreal.features.lexicon, ``arboreal lexicon``):
counts, window pairs and PMI against a slow pure-Python reference, the filters, the
similar-word graph against a dense brute-force cosine, streaming, model files (round
trip and hostile files) and the command."""
from __future__ import annotations

import io
import math
from collections import Counter

import numpy as np
import pytest

from arboreal.errors import ArborealError, ModelError
from arboreal.features import clusters as cl
from arboreal.features import lexicon as lx
from arboreal.features.clusters import normalize_word
from arboreal.features.lexicon import Lexicon, build_lexicon, count_cooccurrences
from arboreal.io.model_file import load_model_file, put_strings, save_model_file


# ---------------------------------------------------------------------------------------
# the slow reference


def _words(n: int) -> list[str]:
    """n distinct words without digits (digits would be normalised together)."""
    return [f"w{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(n)]


def _random_lines(seed: int, n_lines: int = 150, vocab=None) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    vocab = vocab or ["the", "The", "cat", "sat", "on", "mat", "A", "a", "dog", "19", "42",
                      "x", "naïve", "Ünï", "run", "ran", "big", "small"]
    # Zipf-like frequencies so that the filters keep some words and drop others
    p = 1.0 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    return [[vocab[i] for i in rng.choice(len(vocab), rng.integers(0, 12), p=p)]
            for _ in range(n_lines)]


def _data(lines) -> bytes:
    return ("\n".join(" ".join(t) for t in lines) + "\n").encode("utf-8")


def _reference(lines, window: int):
    """(unigrams, unordered pairs, T, N), each token pair enumerated by brute force."""
    uni: Counter = Counter()
    pairs: Counter = Counter()
    n_pairs = 0
    for raw in lines:
        toks = [normalize_word(t) for t in raw]
        uni.update(toks)
        for i in range(len(toks)):
            for j in range(i + 1, min(len(toks), i + window + 1)):
                pairs[tuple(sorted((toks[i], toks[j])))] += 1
                n_pairs += 1
    return uni, pairs, sum(uni.values()), n_pairs


def _reference_pmi(uni, pairs, T, N, min_count=1, min_pair_count=1) -> dict:
    out = {}
    for (a, b), c in pairs.items():
        if uni[a] >= min_count and uni[b] >= min_count and c >= min_pair_count:
            out[a, b] = math.log((c / N) / ((uni[a] / T) * (uni[b] / T)))
    return out


def _lexicon_pairs(lex: Lexicon) -> tuple[dict, dict]:
    a, b = lex.pair_ids()
    counts, pmi = {}, {}
    for i, j, c, v in zip(a.tolist(), b.tolist(), lex.pair_counts.tolist(),
                          lex.pmi_values.tolist()):
        key = tuple(sorted((lex.words[i], lex.words[j])))
        counts[key] = c
        pmi[key] = v
    return counts, pmi


def _build(data: bytes, window=5, min_count=1, min_pair_count=1, neighbours=10,
           similar_words=20000, input_format="tokenized") -> Lexicon:
    counts = count_cooccurrences([io.BytesIO(data)], input_format, window)
    return build_lexicon(counts, min_count, min_pair_count, neighbours, similar_words)


def _same(x: Lexicon, y: Lexicon) -> None:
    assert x.words == y.words
    for name in ("counts", "pair_keys", "pair_counts", "pmi_values", "nb_indptr",
                 "nb_indices", "nb_weights"):
        got, want = getattr(x, name), getattr(y, name)
        assert got.dtype == want.dtype and np.array_equal(got, want), name
    assert x.metadata() == y.metadata()


# ---------------------------------------------------------------------------------------
# counts and PMI


@pytest.mark.parametrize("window", [1, 3, 5])
def test_counts_and_pmi_match_reference(window):
    lines = _random_lines(window)
    lex = _build(_data(lines), window=window)
    uni, pairs, T, N = _reference(lines, window)
    assert dict(zip(lex.words, lex.counts.tolist())) == dict(uni)
    assert lex.tokens == T and lex.pair_tokens == N and lex.sentences == len(lines)
    # rank order: most frequent first, ties in code-point order
    ranks = [(-c, w) for w, c in zip(lex.words, lex.counts.tolist())]
    assert ranks == sorted(ranks)
    got_counts, got_pmi = _lexicon_pairs(lex)
    assert got_counts == dict(pairs)
    want = _reference_pmi(uni, pairs, T, N)
    assert got_pmi.keys() == want.keys()
    for key, v in want.items():
        assert got_pmi[key] == pytest.approx(v, abs=1e-5)
        a, b = key
        assert lex.pmi(a, b) == pytest.approx(v, abs=1e-5)
        assert lex.pmi(b.upper(), a) == lex.pmi(a, b)           # either order, normalised
    assert lex.pmi_values.dtype == np.float32


def test_pmi_lookups_scalar_and_vectorised():
    lines = _random_lines(7)
    lex = _build(_data(lines), window=2)
    uni, pairs, T, N = _reference(lines, 2)
    want = _reference_pmi(uni, pairs, T, N)
    V = len(lex)
    ia, ib = np.meshgrid(np.arange(-1, V + 1), np.arange(-1, V + 1), indexing="ij")
    got = lex.pmi_many(ia, ib)
    assert got.shape == ia.shape and got.dtype == np.float32
    for i in range(-1, V + 1):
        for j in range(-1, V + 1):
            v = got[i + 1, j + 1]
            key = (tuple(sorted((lex.words[i], lex.words[j])))
                   if 0 <= i < V and 0 <= j < V else None)
            if key in want:
                assert v == pytest.approx(want[key], abs=1e-5)
                assert lex.pmi(i, j) == pytest.approx(want[key], abs=1e-5)
            else:
                assert np.isnan(v)
                if key is not None:
                    assert lex.pmi(lex.words[i], lex.words[j]) is None
    assert lex.pmi("the", "no-such-word") is None
    assert lex.index("THE") == lex.words.index("the") and lex.index("zzz") == -1
    assert lex.index("13") == lex.index("00") != -1                    # digits -> 0
    assert lex.ids(["The", "zzz", "42"]).tolist() == [lex.index("the"), -1, lex.index("00")]
    assert lex.pmi_many([], []).shape == (0,)


def test_pairs_never_cross_lines_or_files():
    lex = _build(b"a b\nc d\n", window=5)
    counts, _ = _lexicon_pairs(lex)
    assert counts == {("a", "b"): 1, ("c", "d"): 1}
    counts = count_cooccurrences([io.BytesIO(b"a b"), io.BytesIO(b"c d")], "tokenized", 5)
    lex = build_lexicon(counts, 1, 1)
    assert _lexicon_pairs(lex)[0] == {("a", "b"): 1, ("c", "d"): 1}
    # the same word twice in a window is a pair of that word with itself
    lex = _build(b"x y x\n", window=2)
    assert _lexicon_pairs(lex)[0] == {("x", "y"): 2, ("x", "x"): 1}


def test_min_count_filters():
    lines = _random_lines(3, 300, _words(40) + ["Wba", "WCA"])
    uni, pairs, T, N = _reference(lines, 4)
    lex = _build(_data(lines), window=4, min_count=20, min_pair_count=3)
    assert set(lex.words) == {w for w, c in uni.items() if c >= 20}
    assert 5 < len(lex) < len(uni) - 5                          # the filter did drop words
    assert lex.tokens == T and lex.pair_tokens == N             # totals of the whole corpus
    got_counts, got_pmi = _lexicon_pairs(lex)
    want = _reference_pmi(uni, pairs, T, N, 20, 3)
    assert got_counts == {k: pairs[k] for k in want}
    assert any(pairs[k] < 3 for k in pairs if uni[k[0]] >= 20 and uni[k[1]] >= 20)
    for key, v in want.items():
        assert got_pmi[key] == pytest.approx(v, abs=1e-5)
    # a dropped word keeps its place: its neighbours are not brought closer
    lex = _build(b"a rare b\na b\nx x\n", window=1, min_count=2)
    assert _lexicon_pairs(lex)[0] == {("a", "b"): 1, ("x", "x"): 1}
    assert lex.tokens == 7 and lex.pair_tokens == 4
    with pytest.raises(ArborealError, match="min-count"):
        _build(b"a b c\n", min_count=2)


# ---------------------------------------------------------------------------------------
# similar words


def _reference_neighbours(lex: Lexicon, pmi: dict, S: int, K: int) -> list[list]:
    """Per word 0..S-1: [(similarity, id)] of all others with similarity > 0, sorted by
    decreasing similarity then id, from dense PPMI vectors and dense cosines."""
    V = len(lex)
    index = {w: i for i, w in enumerate(lex.words)}
    X = np.zeros((V, V))
    for (a, b), v in pmi.items():
        X[index[a], index[b]] = X[index[b], index[a]] = max(v, 0.0)
    X = X[:S]
    norms = np.linalg.norm(X, axis=1)
    X = X / np.where(norms > 0, norms, 1.0)[:, None]
    sim = X @ X.T
    out = []
    for i in range(S):
        row = sorted((-sim[i, j], j) for j in range(S) if j != i and sim[i, j] > 1e-12)
        out.append([(-s, j) for s, j in row])
    return out


@pytest.mark.parametrize("seed,S,K", [(0, 12, 3), (1, 30, 5), (2, 8, 20)])
def test_neighbours_match_brute_force(seed, S, K):
    vocab = _words(40)
    lines = _random_lines(seed, 250, vocab)
    lex = _build(_data(lines), window=3, min_pair_count=2, neighbours=K, similar_words=S)
    uni, pairs, T, N = _reference(lines, 3)
    ref = _reference_neighbours(lex, _reference_pmi(uni, pairs, T, N, 1, 2), S, K)
    assert lex.nb_indptr.size == S + 1 and lex.nb_weights.dtype == np.float32
    for i in range(S):
        ids, sims = lex.neighbour_ids(i)
        want = ref[i][:K]
        assert len(ids) == len(want)
        sim_of = {j: s for s, j in ref[i]}
        for j, s in zip(ids.tolist(), sims.tolist()):
            assert s == pytest.approx(sim_of[j], abs=1e-5)
        # every word clearly above the K-th similarity is listed, none clearly below it
        # (words tied with the K-th within rounding may go either way)
        kth = want[-1][0] if len(ref[i]) > K else 0.0
        assert {j for s, j in ref[i] if s > kth + 1e-6} <= set(ids.tolist())
        assert all(sim_of[j] >= kth - 1e-6 for j in ids.tolist())
        if len(ref[i]) <= K or ref[i][K - 1][0] - ref[i][K][0] > 1e-6:
            assert set(ids.tolist()) == {j for _, j in want}
        assert sims.tolist() == sorted(sims.tolist(), reverse=True)
        assert lex.neighbours(lex.words[i]) == [(lex.words[j], s) for j, s in
                                                zip(ids.tolist(), sims.tolist())]
    assert S == len(lex) or lex.neighbours(lex.words[S]) == []     # not among the S
    assert lex.neighbours("no-such-word") == []


def test_neighbour_ties_by_id_and_exact_duplicates():
    # b and c have identical contexts: equal similarity to a, listed by id
    lex = _build(b"a b x\na c x\nb y\nc y\n" * 3, window=2, neighbours=10)
    i = lex.index("a")
    ids, sims = lex.neighbour_ids(i)
    bc = [j for j in ids.tolist() if lex.words[j] in ("b", "c")]
    assert bc == sorted(bc) and len(bc) == 2
    nb = dict(lex.neighbours("a"))
    assert nb["b"] == nb["c"]
    assert dict(lex.neighbours("b"))["c"] == pytest.approx(1.0, abs=1e-6)
    # neighbours 0: no graph at all
    lex = _build(b"a b x\na c x\n", neighbours=0)
    assert lex.nb_indptr.tolist() == [0] and lex.neighbours("a") == []


def test_similarity_blocks_give_the_same_graph(monkeypatch):
    lines = _random_lines(4, 200, _words(30))
    whole = _build(_data(lines), window=3, neighbours=4)
    monkeypatch.setattr(lx, "_SIM_BLOCK_ENTRIES", 7)
    _same(_build(_data(lines), window=3, neighbours=4), whole)


# ---------------------------------------------------------------------------------------
# streaming


def test_streaming_files_and_batches_give_the_same_lexicon(tmp_path, monkeypatch):
    lines = _random_lines(5, 400)
    whole = _build(_data(lines), window=4, min_count=2, min_pair_count=2, neighbours=5)
    parts = []
    for k, chunk in enumerate((lines[:90], lines[90:91], lines[91:300], lines[300:])):
        p = tmp_path / f"part{k}.txt"
        p.write_bytes(_data(chunk))
        parts.append(str(p))
    seen, rows = [], []
    split = build_lexicon(count_cooccurrences(parts, "tokenized", 4, progress=seen.append),
                          2, 2, 5, progress=lambda done, total: rows.append((done, total)))
    assert len(seen) == 4 and seen == sorted(seen) and seen[-1] == whole.tokens
    S = whole.nb_indptr.size - 1
    assert rows and rows[-1] == (S, S)
    assert split.metadata()["tokens"] == whole.tokens
    _same(split, whole)
    # small blocks, and few pair keys per np.unique: many sorted runs merged
    monkeypatch.setattr(cl, "_CHUNK_BYTES", 64)
    monkeypatch.setattr(lx, "_PAIR_KEYS_PER_STEP", 5)
    _same(_build(_data(lines), window=4, min_count=2, min_pair_count=2, neighbours=5), whole)


def test_text_and_conllu_inputs(monkeypatch):
    lines = _random_lines(6, 60)
    whole = _build(_data(lines), window=3, neighbours=3)
    blocks = []
    for t in lines:
        if t:
            blocks.append("".join(f"{i}\t{w}\t_\t_\t_\t_\t_\t_\t_\t_\n"
                                  for i, w in enumerate(t, 1)) + "\n")
    conllu = "".join(blocks).encode("utf-8")
    monkeypatch.setattr(cl, "_BATCH_TOKENS", 7)
    got = _build(conllu, window=3, neighbours=3, input_format="conllu")
    assert got.words == whole.words and np.array_equal(got.pair_keys, whole.pair_keys)
    assert np.array_equal(got.pair_counts, whole.pair_counts)
    assert got.sentences == sum(1 for t in lines if t)
    text = _build(b"Hello, World! It's 2024.\n", window=1, input_format="text")
    assert _lexicon_pairs(text)[0] == {(",", "hello"): 1, (",", "world"): 1, ("!", "world"): 1,
                                       ("!", "it's"): 1, ("0000", "it's"): 1, (".", "0000"): 1}


# ---------------------------------------------------------------------------------------
# model files


@pytest.fixture
def small_lexicon() -> Lexicon:
    return _build(_data(_random_lines(8, 200)), window=3, min_count=2, min_pair_count=2,
                  neighbours=4, similar_words=10)


def test_save_load_round_trip(tmp_path, small_lexicon):
    path = tmp_path / "lex.npz"
    small_lexicon.save(path)
    back = Lexicon.load(path)
    _same(back, small_lexicon)
    assert back.window == 3 and back.n_neighbours == 4 and back.similar_words == 10
    assert back.pmi("the", "cat") == small_lexicon.pmi("the", "cat")
    assert back.neighbours("the") == small_lexicon.neighbours("the")
    with np.load(path, allow_pickle=False) as z:               # a plain npz, no pickle
        assert "lexicon_pmi" in z.files
    meta, _ = load_model_file(path)
    assert meta["model_type"] == "lexicon" and meta["lexicon_version"] == 1
    assert meta["tokens"] == small_lexicon.tokens
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lex.npz"]
    # it loads by type only: where a model is taken, a lexicon is a one-line error
    import arboreal
    from arboreal.cli import main

    assert isinstance(arboreal.load(path, "lexicon"), Lexicon)
    with pytest.raises(ModelError, match="unknown model type 'lexicon'"):
        arboreal.load(path)
    (tmp_path / "in.txt").write_text("a b c\n")
    assert main(["parse", str(path), str(tmp_path / "in.txt"), "--input", "tokenized"]) == 2


def _tampered(tmp_path, lex: Lexicon, meta_changes=None, **arrays):
    meta = {"model_type": "lexicon", "lexicon_version": 1, **lex.metadata(),
            **(meta_changes or {})}
    full = lex.to_arrays()
    for name, value in arrays.items():
        if value is None:
            del full[f"lexicon_{name}"]
        elif name == "words":
            put_strings(full, "lexicon_words", value)
        else:
            full[f"lexicon_{name}"] = value
    path = tmp_path / "bad.npz"
    save_model_file(path, meta, full)
    return path


def test_hostile_files_are_refused(tmp_path, small_lexicon):
    lex = small_lexicon
    keys = lex.pair_keys
    V = len(lex)
    S = lex.nb_indptr.size - 1
    bad_row = lex.nb_indices.copy()
    bad_row[0] = V + 3
    own = lex.nb_indices.copy()
    own[0] = 0
    cases = [
        ({"model_type": "parser"}, {}, "not 'lexicon'"),
        ({"lexicon_version": 2}, {}, "lexicon_version"),
        ({"window": 0}, {}, "window"),
        ({}, {"pmi": lex.pmi_values[:-1]}, "lexicon_pmi"),
        ({}, {"counts": lex.counts[:-1]}, "words"),
        ({}, {"pair_counts": None}, "pair_counts"),
        ({}, {"pair_keys": keys.astype(np.float64)}, "type"),
        ({}, {"pair_keys": np.concatenate([keys[:-1], [(np.int64(V) << 32) | V]])},
         "out of range"),
        ({}, {"pair_keys": np.concatenate([keys[:1] * 0 + ((np.int64(3) << 32) | 1),
                                          keys[1:]])}, "out of range"),
        ({}, {"pair_keys": keys[::-1].copy()}, "increasing"),
        ({}, {"pmi": np.full(keys.size, np.inf, np.float32)}, "finite"),
        ({}, {"nb_indices": bad_row}, "out of range"),
        ({}, {"nb_indices": own}, "own"),
        ({}, {"nb_weights": lex.nb_weights[::-1].copy()}, "sorted"),
        ({}, {"nb_indptr": np.concatenate([lex.nb_indptr[:-1], [lex.nb_indptr[-1] + 1]])},
         "out of range"),
        ({}, {"nb_indptr": np.zeros(V + 2, np.int64)}, "entries"),
        ({}, {"counts": lex.counts[::-1].copy()}, "non-increasing"),
        ({}, {"counts": np.where(np.arange(V) == 0, -5, lex.counts)}, "out of range"),
        ({}, {"words": lex.words[:-1]}, "words"),
        ({}, {"words": ["The"] + lex.words[1:]}, "normalised"),
        ({}, {"words": lex.words[:-1] + [lex.words[0]]}, "twice"),
        ({"min_pair_count": 1000}, {}, "min_pair_count"),
        ({"neighbours": 1}, {}, "more neighbours"),
        ({"similar_words": S + 1}, {}, "neighbour rows"),
    ]
    for meta_changes, arrays, what in cases:
        path = _tampered(tmp_path, lex, meta_changes, **arrays)
        with pytest.raises(ModelError, match=what) as e:
            Lexicon.load(path)
        assert str(path) in str(e.value), what
    # a truncated file, and a file that is no model at all
    good = tmp_path / "good.npz"
    lex.save(good)
    data = good.read_bytes()
    cut = tmp_path / "cut.npz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match="cut.npz"):
        Lexicon.load(cut)
    text = tmp_path / "text.npz"
    text.write_text("hello")
    with pytest.raises(ModelError, match="text.npz"):
        Lexicon.load(text)


def test_from_arrays_checks_sizes_before_decoding_strings():
    arrays = _build(b"a b\na b\n").to_arrays()
    arrays["lexicon_words"] = np.frombuffer(b"a\nb\nc" + b"\xff" * 8, np.uint8)
    arrays["lexicon_words_count"] = np.array(3)
    with pytest.raises(ValueError, match="out of range"):      # 3 > 2 words: not decoded
        Lexicon.from_arrays(arrays)


# ---------------------------------------------------------------------------------------
# the command


def _main(argv):
    import arboreal.cli as cli

    return cli.main(argv)


def test_cli_lexicon(tmp_path, capsys):
    lines = _random_lines(9, 200)
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(_data(lines))
    out = tmp_path / "out.npz"
    assert _main(["lexicon", str(corpus), str(corpus), "-o", str(out), "--window", "3",
                  "--neighbours", "4", "--similar-words", "6"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) in (1, 2) and err[-1].startswith("arboreal: lexicon: ")
    lex = Lexicon.load(out)
    uni, pairs, T, N = _reference(lines + lines, 3)
    assert lex.tokens == T and lex.pair_tokens == N
    assert set(lex.words) == {w for w, c in uni.items() if c >= 2}           # default 2
    assert lex.nb_indptr.size == 7 and lex.n_neighbours == 4
    # --quiet: nothing on stderr; the output replaced atomically, no temporary left
    assert _main(["lexicon", str(corpus), "-o", str(out), "--quiet", "--min-count", "1",
                  "--min-pair-count", "1", "--window", "1"]) == 0
    assert capsys.readouterr().err == ""
    assert Lexicon.load(out).min_count == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "out.npz"]


def test_cli_errors(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok ok\n\xff\n")
    out = tmp_path / "out.npz"
    assert _main(["lexicon", str(bad), "-o", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("arboreal: error: ") and f"{bad}:2:" in err and err.count("\n") == 1
    assert not out.exists()
    assert _main(["lexicon", str(tmp_path / "missing"), "-o", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "missing" in err and err.count("\n") == 1 and not out.exists()
    # an unwritable output is found before the corpus is read
    assert _main(["lexicon", str(bad), "-o", str(tmp_path / "no" / "x.npz"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("arboreal: error:") and "x.npz" in err and "bad.txt" not in err
    assert _main(["lexicon", str(bad), "-o", "-"]) == 2
    assert "file name" in capsys.readouterr().err
    good = tmp_path / "good.txt"
    good.write_bytes(b"a b c\n")
    assert _main(["lexicon", str(good), "-o", str(out), "--quiet"]) == 2   # all seen once
    err = capsys.readouterr().err
    assert "--min-count" in err and err.count("\n") == 1 and not out.exists()
    for option in (["--window", "0"], ["--neighbours", "-1"], ["--min-count", "x"]):
        with pytest.raises(SystemExit) as e:
            _main(["lexicon", str(good), "-o", str(out), *option])
        assert e.value.code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt", "good.txt"]
