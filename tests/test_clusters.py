"""Brown clustering (arboreal.features.brown / clusters): the windowed greedy algorithm
against a slow reference that recomputes the AMI from scratch for every candidate
merge, the AMI objective, counting, paths files, the Clusters lookups and the
``arboreal clusters`` command."""
from __future__ import annotations

import io
import itertools
import math
from collections import Counter

import numpy as np
import pytest

from arboreal.errors import ArborealError, FormatError
from arboreal.features import clusters as cl
from arboreal.features.brown import average_mutual_information, brown_cluster
from arboreal.features.clusters import (NOCL, Clusters, CorpusCounts, brown_clusters,
                                        count_corpus, normalize_word, read_paths,
                                        tokenize_text, write_paths)


# ---------------------------------------------------------------------------------------
# the slow reference


def _csr(n: np.ndarray):
    """The kernel's CSR input from a dense V x V bigram count matrix."""
    V = n.shape[0]
    w1, w2 = np.nonzero(n)
    c = n[w1, w2]
    return CorpusCounts([f"w{i}" for i in range(V)], np.ones(V, np.int64), w1, w2, c).csr()


def _window_ami(groups, n, ml, mr, N):
    """N * AMI (nats) of the window: counts between the given clusters only, the
    marginals of the whole matrix (as the windowed algorithm defines it)."""
    ind = np.zeros((n.shape[0], len(groups)))
    for i, g in enumerate(groups):
        ind[list(g), i] = 1.0
    M = ind.T @ n @ ind
    a, b = ind.T @ ml, ind.T @ mr
    nz = M > 0
    return float(np.sum(M[nz] * np.log(M[nz] * N / np.outer(a, b)[nz])))


def _losses(groups, n, ml, mr, N):
    """{(i, j): N * loss} of merging groups i < j, each recomputed from scratch."""
    before = _window_ami(groups, n, ml, mr, N)
    out = {}
    for i, j in itertools.combinations(range(len(groups)), 2):
        trial = [g for k, g in enumerate(groups) if k not in (i, j)] + [groups[i] | groups[j]]
        out[i, j] = before - _window_ami(trial, n, ml, mr, N)
    return out


def _reference(n: np.ndarray, C: int):
    """Liang's windowed algorithm, every loss recomputed from scratch: the merges as
    (frozenset, frozenset) of words, and the losses (bits)."""
    V = n.shape[0]
    ml, mr, N = n.sum(1).astype(float), n.sum(0).astype(float), float(n.sum())
    groups: list[frozenset] = []
    merges, losses = [], []

    def merge():
        loss = _losses(groups, n, ml, mr, N)
        (i, j), best = min(loss.items(), key=lambda kv: kv[1])
        merges.append(frozenset((groups[i], groups[j])))
        losses.append(best / N / math.log(2))
        groups[:] = [g for k, g in enumerate(groups) if k not in (i, j)] + [groups[i] | groups[j]]

    for a in range(V):
        groups.append(frozenset([a]))
        if len(groups) > C:
            merge()
    while len(groups) > 1:
        merge()
    return merges, losses


def _as_sets(result, V):
    """The kernel's merges as (frozenset, frozenset) of words."""
    members = {i: frozenset([i]) for i in range(V)}
    out = []
    for k, (a, b) in enumerate(result.merges.tolist()):
        out.append(frozenset((members[a], members[b])))
        members[V + k] = members[a] | members[b]
    return out


def _random_counts(rng, V, density, scale=8.0, self_loops=True):
    n = rng.poisson(scale * rng.random((V, V)) ** 2) * (rng.random((V, V)) < density)
    if not self_loops:
        np.fill_diagonal(n, 0)
    n[rng.integers(V), rng.integers(V)] += 1          # never all zero
    return n.astype(np.int64)


CASES = [  # (seed, V, C, density)
    (0, 10, 3, 0.9), (1, 14, 4, 0.5), (2, 18, 5, 0.3), (3, 12, 2, 0.7), (4, 16, 6, 0.25),
    (5, 9, 9, 0.6), (6, 11, 20, 0.5), (7, 15, 1, 0.6),
]


@pytest.mark.parametrize("seed,V,C,density", CASES)
def test_same_merges_as_reference(seed, V, C, density):
    """On random bigram counts (no exact ties), the kernel makes the same merges with
    the same losses as the from-scratch reference, to the end of the tree."""
    n = _random_counts(np.random.default_rng(seed), V, density)
    got = brown_cluster(*_csr(n), n_clusters=C)
    ref_merges, ref_losses = _reference(n, C)
    assert len(got.merges) == V - 1
    assert _as_sets(got, V) == ref_merges
    np.testing.assert_allclose(got.losses, ref_losses, rtol=1e-9, atol=1e-12)


def _replay_check(n: np.ndarray, C: int, **kw):
    """Each merge the kernel makes is one of the best candidates of its window, and its
    loss is the loss recomputed from scratch; the replay follows the kernel's choices
    (so ties may be broken either way)."""
    V = n.shape[0]
    got = brown_cluster(*_csr(n), n_clusters=C, **kw)
    ml, mr, N = n.sum(1).astype(float), n.sum(0).astype(float), float(n.sum())
    groups: dict[int, frozenset] = {}
    nxt = 0
    for k, (a, b) in enumerate(got.merges.tolist()):
        while nxt < V and len(groups) <= C:      # the kernel: add a word, then merge
            groups[nxt] = frozenset([nxt])
            nxt += 1
        ids = list(groups)
        loss = _losses([groups[i] for i in ids], n, ml, mr, N)
        best = min(loss.values())
        i, j = sorted((ids.index(a), ids.index(b)))
        assert loss[i, j] / N / math.log(2) == pytest.approx(got.losses[k], rel=1e-9, abs=1e-12)
        assert loss[i, j] <= best + 1e-9 * max(1.0, abs(best))
        groups[V + k] = groups.pop(a) | groups.pop(b)
    assert len(groups) == 1 and nxt == V
    return got


def test_each_merge_is_optimal_with_ties():
    """Words that tie (no bigrams at all, identical rows): every merge still optimal."""
    rng = np.random.default_rng(11)
    for trial in range(4):
        n = _random_counts(rng, 16, 0.3)
        n[5, :] = 0
        n[:, 5] = 0                     # a word with no bigrams: merging it costs nothing
        n[9] = n[7]                     # two words with identical right contexts
        _replay_check(n, 4)


def _zipf_text_counts(rng, V, tokens, sentence=12):
    """Bigram counts of Zipf-distributed text with some structure (two word classes
    that alternate), like a real corpus: rare words with few neighbours."""
    ranks = np.minimum(rng.zipf(1.3, tokens), V) - 1
    cls = ranks % 2
    n = np.zeros((V, V), np.int64)
    for k in range(tokens - 1):
        if (k + 1) % sentence and (cls[k] != cls[k + 1] or rng.random() < 0.3):
            n[ranks[k], ranks[k + 1]] += 1
    seen = (n.sum(0) + n.sum(1)) > 0
    n = n[seen][:, seen]
    order = np.argsort(-(n.sum(0) + n.sum(1)), kind="stable")
    return n[order][:, order]


def test_text_like_counts_merges_optimal():
    """Sparse, Zipfian counts (the case the incremental rows and the row minima are
    built for): every merge optimal, losses exact."""
    rng = np.random.default_rng(2)
    n = _zipf_text_counts(rng, 90, 3000)
    stats = {}
    _replay_check(n, 6, stats=stats)
    assert stats["incremental_rows"] > 0 and stats["rescans"] > 0


def test_large_counts_beyond_the_table(monkeypatch):
    """Counts past the n log n table (computed with log instead): same merges as the
    reference; and the same clustering with a tiny table."""
    from arboreal.features import brown

    n = _random_counts(np.random.default_rng(4), 12, 0.6) * 10007
    got = brown_cluster(*_csr(n), n_clusters=4)
    ref_merges, ref_losses = _reference(n, 4)
    assert _as_sets(got, 12) == ref_merges
    np.testing.assert_allclose(got.losses, ref_losses, rtol=1e-9, atol=1e-12)
    monkeypatch.setattr(brown, "_TABLE_SIZE", 2)
    small = brown_cluster(*_csr(n), n_clusters=4)
    assert _as_sets(small, 12) == ref_merges


def test_ami_of_final_clusters_matches_reference():
    """The AMI of the C clusters (recomputed independently) is the reference's."""
    rng = np.random.default_rng(5)
    for V, C in ((20, 4), (25, 6)):
        n = _random_counts(rng, V, 0.35)
        got = brown_cluster(*_csr(n), n_clusters=C)
        ref_merges, _ = _reference(n, C)
        groups = {frozenset([i]) for i in range(V)}
        for m in ref_merges[:V - C]:
            a, b = tuple(m)
            groups -= {a, b}
            groups.add(a | b)
        labels = np.empty(V, np.int64)
        for k, g in enumerate(groups):
            labels[list(g)] = k
        w1, w2 = np.nonzero(n)
        ours = average_mutual_information(w1, w2, n[w1, w2], got.leaf)
        theirs = average_mutual_information(w1, w2, n[w1, w2], labels)
        assert ours == pytest.approx(theirs, rel=1e-12)
        assert len(set(got.leaf.tolist())) == C


def test_ami_objective_by_hand():
    """average_mutual_information is the mutual information of adjacent clusters."""
    rng = np.random.default_rng(3)
    n = _random_counts(rng, 9, 0.5)
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1, -1])
    joint = Counter()
    for a in range(9):
        for b in range(9):
            if n[a, b] and labels[a] >= 0 and labels[b] >= 0:
                joint[labels[a], labels[b]] += int(n[a, b])
    N = sum(joint.values())
    left, right = Counter(), Counter()
    for (c, d), k in joint.items():
        left[c] += k
        right[d] += k
    expect = sum(k / N * math.log2(k * N / (left[c] * right[d])) for (c, d), k in joint.items())
    w1, w2 = np.nonzero(n)
    assert average_mutual_information(w1, w2, n[w1, w2], labels) == pytest.approx(expect, rel=1e-12)
    # every word its own cluster: the mutual information of adjacent words
    assert average_mutual_information(w1, w2, n[w1, w2], np.arange(9)) > \
        average_mutual_information(w1, w2, n[w1, w2], labels)
    one = np.zeros(9, np.int64)
    assert average_mutual_information(w1, w2, n[w1, w2], one) == pytest.approx(0.0)


def test_bits_follow_the_top_tree():
    """Bit strings: the C clusters are the leaves of the tree of the last C - 1 merges,
    left = the older (smaller id) child; words of one cluster share a string."""
    n = _random_counts(np.random.default_rng(8), 30, 0.3)
    got = brown_cluster(*_csr(n), n_clusters=5)
    by_leaf = {}
    for w, (leaf, bits) in enumerate(zip(got.leaf.tolist(), got.bits)):
        assert by_leaf.setdefault(leaf, bits) == bits
    assert len(by_leaf) == 5
    strings = sorted(by_leaf.values())
    for a, b in itertools.combinations(strings, 2):
        assert not b.startswith(a)                     # leaves of one binary tree
    assert sum(2.0 ** -len(s) for s in strings) == pytest.approx(1.0)
    # the last merge joins the subtrees "0..." (smaller id) and "1..."
    a, b = got.merges[-1]
    assert min(a, b) != max(a, b)


def test_single_word_and_single_cluster():
    n = np.array([[3]], np.int64)
    got = brown_cluster(*_csr(n), n_clusters=10)
    assert got.bits == [""] and len(got.merges) == 0
    n = _random_counts(np.random.default_rng(1), 6, 0.5)
    got = brown_cluster(*_csr(n), n_clusters=1)
    assert got.bits == [""] * 6


# ---------------------------------------------------------------------------------------
# normalisation, tokenization, counting


def test_normalize_word():
    assert normalize_word("The") == "the"
    assert normalize_word("1984") == "0000"
    assert normalize_word("A4-B12") == "a0-b00"
    assert normalize_word("٣٤") == "00"                 # Arabic-Indic digits are digits
    assert normalize_word("ÉCOLE") == "école"


def test_tokenize_text():
    assert tokenize_text("Hi! Don't e-mail U.S. people, 3.14 or 1,000 (ok)") == [
        "Hi", "!", "Don't", "e-mail", "U.S", ".", "people", ",", "3.14", "or", "1,000",
        "(", "ok", ")"]
    assert tokenize_text("  ") == []


def _reference_counts(lines):
    uni, bi = Counter(), Counter()
    for toks in lines:
        toks = [normalize_word(t) for t in toks]
        uni.update(toks)
        bi.update(zip(toks, toks[1:]))
    return uni, bi


def _as_counters(cc: CorpusCounts):
    uni = dict(zip(cc.words, cc.counts.tolist()))
    bi = Counter()
    for a, b, c in zip(cc.w1.tolist(), cc.w2.tolist(), cc.bigram_counts.tolist()):
        bi[cc.words[a], cc.words[b]] += c
    return uni, bi


def test_count_corpus_streamed(monkeypatch):
    """Small chunks and batches (many runs of bigram counts merged) count what a
    Counter counts; bigrams never cross a line; words ranked by count then text."""
    monkeypatch.setattr(cl, "_CHUNK_BYTES", 64)
    rng = np.random.default_rng(0)
    vocab = ["the", "The", "cat", "sat", "on", "mat", "A", "a", "dog", "19", "42", "x"]
    lines = [[vocab[i] for i in rng.integers(0, len(vocab), rng.integers(0, 9))]
             for _ in range(300)]
    data = ("\n".join(" ".join(t) for t in lines) + "\n").encode()
    cc = count_corpus([io.BytesIO(data)], "tokenized")
    uni, bi = _reference_counts(lines)
    got_uni, got_bi = _as_counters(cc)
    assert got_uni == dict(uni) and got_bi == bi
    assert cc.tokens == sum(uni.values()) and cc.sentences == 300
    keys = [(-c, w) for w, c in zip(cc.words, cc.counts.tolist())]
    assert keys == sorted(keys)
    # two sources: no bigram across them
    cc2 = count_corpus([io.BytesIO(b"a b\n"), io.BytesIO(b"c d")], "tokenized")
    assert sorted((cc2.words[a], cc2.words[b]) for a, b in zip(cc2.w1, cc2.w2)) == [
        ("a", "b"), ("c", "d")]


def test_count_many_words_and_unicode_spaces(monkeypatch):
    """The vocabulary's hash table and byte store grow (100,000 distinct words, small
    chunks); tokens are split where str.split() splits, Unicode spaces included."""
    monkeypatch.setattr(cl, "_CHUNK_BYTES", 1 << 14)

    def word(i):
        out = ""
        for _ in range(4):
            out += "abcdefghijklmnopqrstuvwxyz"[i % 26]
            i //= 26
        return out + "é"

    words = [word(i) for i in range(100_000)]
    lines = [" ".join(words[i:i + 7]) for i in range(0, len(words), 7)]
    lines.append("x\u00a0y\u2009z\x1cw\x0bv\u3000U")
    data = ("\n".join(lines) + "\n").encode()
    cc = count_corpus([io.BytesIO(data)], "tokenized")
    uni, bi = _reference_counts(line.split() for line in lines)
    got_uni, got_bi = _as_counters(cc)
    assert got_uni == dict(uni) and got_bi == bi
    assert ("x", "y") in got_bi and ("v", "u") in got_bi


def test_count_text_and_conllu(tmp_path):
    text = tmp_path / "raw.txt"
    text.write_text("Hello, World!\nIt's 2024.\n", encoding="utf-8")
    cc = count_corpus([str(text)], "text")
    _, bi = _as_counters(cc)
    assert bi == Counter({("hello", ","): 1, (",", "world"): 1, ("world", "!"): 1,
                          ("it's", "0000"): 1, ("0000", "."): 1})
    conllu = tmp_path / "x.conllu"
    conllu.write_text("# text = The Cat\n1\tThe\t_\t_\t_\t_\t_\t_\t_\t_\n"
                      "2\tCat\t_\t_\t_\t_\t_\t_\t_\t_\n\n"
                      "1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n1\tdo\t_\t_\t_\t_\t_\t_\t_\t_\n"
                      "2\tn't\t_\t_\t_\t_\t_\t_\t_\t_\n\n", encoding="utf-8")
    cc = count_corpus([str(conllu)], "conllu")
    uni, bi = _as_counters(cc)
    assert uni == {"the": 1, "cat": 1, "do": 1, "n't": 1}
    assert bi == Counter({("the", "cat"): 1, ("do", "n't"): 1})


def test_count_errors(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\nbad \xff byte\n")
    with pytest.raises(FormatError) as e:
        count_corpus([str(bad)], "tokenized")
    assert e.value.line == 2 and "UTF-8" in e.value.problem
    nul = tmp_path / "nul.txt"
    nul.write_bytes(b"a\nb\nc\x00d\n")
    with pytest.raises(FormatError) as e:
        count_corpus([str(nul)], "text")
    assert e.value.line == 3
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"\n \n")
    with pytest.raises(ArborealError, match="no tokens"):
        count_corpus([str(empty)], "tokenized")


def test_min_count_and_restrict():
    data = b"a b a c\na b d\n"
    cc = count_corpus([io.BytesIO(data)], "tokenized")
    r = cc.restrict(2)
    assert r.words == ["a", "b"]
    uni, bi = _as_counters(r)
    assert bi == Counter({("a", "b"): 2, ("b", "a"): 1})   # "a c", "b d" dropped, none joined
    clusters = brown_clusters(cc, 10, min_count=2)
    assert set(clusters.words) == {"a", "b"}
    assert clusters.cluster("c") == NOCL
    with pytest.raises(ArborealError, match="min-count"):
        brown_clusters(cc, 10, min_count=5)


# ---------------------------------------------------------------------------------------
# Clusters and paths files


def _corpus_bytes(seed=0, lines=400):
    rng = np.random.default_rng(seed)
    words = [f"{a}{b}" for a in "bcdfg" for b in "aeiou"]
    out = []
    for _ in range(lines):
        k = rng.integers(1, 10)
        out.append(" ".join(words[min(int(x), len(words)) - 1] for x in rng.zipf(1.6, k)
                            if x <= len(words)))
    return ("\n".join(out) + "\n").encode()


def test_brown_clusters_and_paths_round_trip(tmp_path):
    cc = count_corpus([io.BytesIO(_corpus_bytes())], "tokenized")
    clusters = brown_clusters(cc, 6)
    assert clusters.n_clusters == 6 and len(clusters) == len(cc.words)
    assert clusters.bits == sorted(clusters.bits)            # wcluster's order
    assert clusters.ami == pytest.approx(cl.average_mutual_information(cc, clusters))
    path = tmp_path / "paths"
    write_paths(clusters, path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(clusters)
    bits, word, count = lines[0].split("\t")
    assert clusters.cluster(word) == bits and int(count) == clusters.counts[0]
    back = read_paths(path)
    assert back.words == clusters.words and back.bits == clusters.bits
    assert back.counts.tolist() == clusters.counts.tolist()


def test_clusters_lookup_and_prefix():
    c = Clusters(["the", "cat", "0000"], ["0110", "10", ""], [5, 3, 1])
    assert c.cluster("The") == "0110" and c["THE"] == "0110"
    assert c.prefix("the", 2) == "01" and c.prefix("cat", 6) == "10"
    assert c.prefix("1999", 4) == ""                # normalised to 0000
    assert c.cluster("dog") == NOCL and c.prefix("dog", 4) == NOCL
    assert "Cat" in c and "dog" not in c
    assert c.lookup(["the", "dog", "Cat"], 1) == ["0", NOCL, "1"]
    assert c.n_clusters == 3
    with pytest.raises(ValueError, match="normalised"):
        Clusters(["The"], ["0"])
    with pytest.raises(ValueError, match="twice"):
        Clusters(["a", "a"], ["0", "1"])


def test_to_arrays_round_trip_through_a_model_file(tmp_path):
    from arboreal.io.model_file import load_model_file, save_model_file

    c = Clusters(["the", "naïve", "ünï", "0.0"], ["00", "01", "1", "1"], [9, 4, 2, 1])
    arrays = c.to_arrays("clusters")
    assert all(a.dtype != object for a in arrays.values())
    path = tmp_path / "m.npz"
    save_model_file(path, {"model_type": "test"}, arrays)
    meta, loaded = load_model_file(path)
    back = Clusters.from_arrays(loaded, "clusters")
    assert back.words == c.words and back.bits == c.bits
    assert back.counts.tolist() == [9, 4, 2, 1]
    bad = dict(arrays)
    from arboreal.io.model_file import put_strings

    put_strings(bad, "clusters_bits", ["00", "0x", "1", "1"])
    with pytest.raises(ValueError, match="bit string"):
        Clusters.from_arrays(bad)
    for words, bits, what in ((["the", "", "x", "y"], None, "'' is not a word"),
                              (["the", "a\tb", "x", "y"], None, "is not a word"),
                              (["the", "a\x07", "x", "y"], None, "is not a word"),
                              (["the", "a" * 1001, "x", "y"], None, "is not a word"),
                              (None, ["00", "0" * 5000, "1", "1"], "at most")):
        bad = dict(arrays)
        if words:
            put_strings(bad, "clusters_words", words)
        if bits:
            put_strings(bad, "clusters_bits", bits)
        with pytest.raises(ValueError, match=what):
            Clusters.from_arrays(bad)
    bad = dict(arrays)
    bad["clusters_counts"] = np.array([1, 2, -3, 4])
    with pytest.raises(ValueError, match="non-negative"):
        Clusters.from_arrays(bad)


def test_read_paths_from_elsewhere(tmp_path):
    """wcluster's own output (case kept, CRLF, blank line): normalised on reading, the
    more frequent of two colliding words wins."""
    p = tmp_path / "paths"
    p.write_bytes(b"0\tThe\t10\r\n0\tthe\t50\n10\tCat\t3\n\n110\t1999\t2\n111\tdogs\t0\n")
    c = read_paths(p)
    assert c.words == ["the", "cat", "0000", "dogs"]
    assert c.cluster("THE") == "0" and c.counts.tolist() == [50, 3, 2, 0]


@pytest.mark.parametrize("content,line,what", [
    (b"0\ta\t1\n01\tb\n", 2, "2 tab-separated fields"),
    (b"0\ta\t1\n012\tb\t1\n", 2, "other than 0 and 1"),
    (b"0\ta\t1\n1\tb\t-1\n", 2, "non-negative integer"),
    (b"0\ta\t1\n1\tb\t1x\n", 2, "non-negative integer"),
    (b"0\ta\t1\n1\tb\t1234567890123456789\n", 2, "18 digits"),
    (b"0\ta\t1\n1\t\t1\n", 2, "empty word"),
    (b"0\ta\t1\n1\ta\t1\n", 2, "already listed on line 1"),
    (b"0\ta\t1\n1\tb\xfe\t1\n", 2, "invalid UTF-8"),
    (b"0\ta\t1\n1\tb\x01\t1\n", 2, "control character"),
    (b"\n\n", 1, "empty paths file"),
    (("1" * 5000 + "\ta\t1\n").encode(), 1, "more than 4096"),
    (b"0\t" + b"a" * 1001 + b"\t1\n", 1, "more than 1000"),
    (b"0\t" + b"a" * 20000 + b"\t1\n", 1, "line longer than"),
])
def test_read_paths_errors(tmp_path, content, line, what):
    p = tmp_path / "bad.paths"
    p.write_bytes(content)
    with pytest.raises(FormatError) as e:
        read_paths(p)
    assert e.value.line == line and what in e.value.problem
    assert e.value.path == str(p)


def test_read_paths_size_limit(tmp_path, monkeypatch):
    p = tmp_path / "big.paths"
    p.write_bytes(b"".join(b"0\tw%d\t1\n" % i for i in range(20)))
    monkeypatch.setattr(cl, "MAX_PATHS_BYTES", 50)
    with pytest.raises(FormatError, match="more than the"):
        read_paths(p)                                   # refused before reading
    with pytest.raises(FormatError, match="more than the"):
        read_paths(io.BytesIO(p.read_bytes()))          # a stream: while reading
    monkeypatch.setattr(cl, "MAX_PATHS_BYTES", 1 << 20)
    monkeypatch.setattr(cl, "MAX_PATHS_WORDS", 1)
    with pytest.raises(FormatError, match="more than 1 words"):
        read_paths(p)


# ---------------------------------------------------------------------------------------
# the command


def _main(monkeypatch, argv):
    import arboreal.cli as cli

    if "clusters" not in cli.SUBCOMMANDS:
        monkeypatch.setattr(cli, "SUBCOMMANDS", cli.SUBCOMMANDS + ("clusters",))
    return cli.main(argv)


def test_cli_clusters(tmp_path, monkeypatch, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(_corpus_bytes(1))
    out = tmp_path / "out.paths"
    assert _main(monkeypatch, ["clusters", str(corpus), str(corpus), "-o", str(out),
                               "--clusters", "4", "--min-count", "2"]) == 0
    err = capsys.readouterr().err
    assert "4 clusters" in err and "AMI" in err
    c = read_paths(out)
    assert c.n_clusters == 4 and min(c.counts) >= 2 * 2 - 2
    # --quiet: nothing on stderr; the output replaced atomically, no temporary left
    assert _main(monkeypatch, ["clusters", str(corpus), "-o", str(out), "--clusters", "3",
                               "--quiet", "--input", "text"]) == 0
    assert capsys.readouterr().err == ""
    assert read_paths(out).n_clusters == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "out.paths"]


def test_cli_errors(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n\xff\n")
    out = tmp_path / "out.paths"
    assert _main(monkeypatch, ["clusters", str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("arboreal: error: ") and f"{bad}:2:" in err and "\n" not in err
    assert not out.exists()
    assert _main(monkeypatch, ["clusters", str(tmp_path / "missing"), "-o", str(out)]) == 2
    assert "missing" in capsys.readouterr().err
    assert _main(monkeypatch, ["clusters", str(bad), "-o", str(tmp_path / "no" / "x")]) == 2
    assert "arboreal: error:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _main(monkeypatch, ["clusters", str(bad), "-o", str(out), "--clusters", "0"])


# ---------------------------------------------------------------------------------------
# cluster features in the parser


SAMPLE_DIR = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "sample"


def _sample_clusters(sentences) -> Clusters:
    """A clustering of the sample's words by their most frequent UPOS (8 bits: the POS's
    index, then the word's rank bits), plus a word absent from the treebank."""
    from collections import defaultdict

    pos_of = defaultdict(Counter)
    for s in sentences:
        for f, p in zip(s.forms[1:], s.upos[1:]):
            pos_of[normalize_word(f)][p] += 1
    tags = sorted({p for c in pos_of.values() for p in c})
    words = sorted(pos_of) + ["zyzzyva"]
    bits = [format(tags.index(pos_of[w].most_common(1)[0][0]), "04b") + format(i % 16, "04b")
            for i, w in enumerate(words[:-1])] + [format(tags.index("NOUN"), "04b") + "1111"]
    return Clusters(words, bits)


def test_parser_with_clusters_codes_unseen_words_by_cluster_and_stores_them(tmp_path):
    """--clusters: each word's cluster prefixes are token attributes (c4, c6, cl), known
    for words the treebank never showed; cluster templates are added to the arc, part and
    label templates; the clustering travels in the model file."""
    from arboreal.cli import main
    from arboreal.features.first_order import ATTR_INDEX, UNK
    from arboreal.io.conllu import read_conllu
    from arboreal.models import Parser, load_model

    train = read_conllu(SAMPLE_DIR / "en_ewt-sample-train.conllu")[:80]
    clusters = _sample_clusters(train)
    model = Parser.train(train, order=2, epochs=1, pruner_epochs=1, hash_bits=16,
                         label_bits=10, clusters=clusters)
    fs = model.features
    assert "h.c4 m.c4" in fs.templates and "m.c4" in model.labeler.templates
    assert "s.c4 m.c4" in model.higher_order.parts.templates["sib"]
    [s] = read_conllu(SAMPLE_DIR / "en_ewt-sample-train.conllu")[:1]
    unseen = _with_form(s, "Zyzzyva")    # not in the treebank, in the clustering
    codes = fs.encode([unseen])[0].codes
    assert codes[ATTR_INDEX["word"], 2] == UNK
    noun = next(w for w, b in zip(clusters.words, clusters.bits)
                if b[:4] == clusters.cluster("zyzzyva")[:4] and w != "zyzzyva")
    assert codes[ATTR_INDEX["c4"], 2] == fs.encode([_with_form(unseen, noun)])[0].codes[
        ATTR_INDEX["c4"], 2] != UNK
    path = tmp_path / "m.npz"
    model.save(path)
    again = load_model(path)
    assert again.features.clusters.cluster("zyzzyva") == clusters.cluster("zyzzyva")
    test = read_conllu(SAMPLE_DIR / "en_ewt-sample-test.conllu")[:30]
    for a, b in zip(model.predict_heads(test), again.predict_heads(test)):
        assert np.array_equal(a, b)
    # without a clustering the cluster attributes are one constant and fire nothing
    plain = Parser.train(train, epochs=1, hash_bits=16, label_bits=10)
    assert not any(".c4" in t or ".cl" in t for t in plain.features.templates)
    assert set(plain.features.encode(test)[0].codes[ATTR_INDEX["cl"], 2:-1].tolist()) == \
        {plain.features._codes_of("cl", np.array([NOCL], dtype=object))[0]}
    # the command line: --clusters PATHS, a bad file is a one-line error
    paths = tmp_path / "paths"
    write_paths(clusters, paths)
    conllu = tmp_path / "train.conllu"
    from arboreal.io.conllu import write_conllu

    write_conllu(train, conllu)
    assert main(["train", str(conllu), "--clusters", str(paths), "--no-tagger",
                 "--no-tokenizer", "--epochs", "1", "--hash-bits", "14", "-o",
                 str(tmp_path / "c.npz"), "--quiet"]) == 0
    assert load_model(tmp_path / "c.npz").features.clusters is not None
    paths.write_text("not a paths file\n")
    assert main(["train", str(conllu), "--clusters", str(paths), "--epochs", "1",
                 "-o", str(tmp_path / "d.npz"), "--quiet"]) == 2
    assert not (tmp_path / "d.npz").exists()


def _with_form(sentence, form):
    import copy

    other = copy.deepcopy(sentence)
    other.forms = other.forms.copy()
    other.forms[1] = form
    return other


def test_top_words_keeps_lexical_features_of_frequent_words_only(tmp_path):
    """--top-words N (Koo et al. 2008's feature pruning): the word, 5-prefix and lemma
    vocabularies hold the N most frequent training values; a rarer word shares the
    unknown code with unseen words but keeps its cluster; the setting is saved."""
    from collections import Counter

    from arboreal.cli import main
    from arboreal.features.first_order import _DIGIT_TABLE, ATTR_INDEX, UNK
    from arboreal.io.conllu import read_conllu, write_conllu
    from arboreal.models import Parser, load_model

    train = read_conllu(SAMPLE_DIR / "en_ewt-sample-train.conllu")[:80]
    clusters = _sample_clusters(train)
    model = Parser.train(train, epochs=1, hash_bits=16, label_bits=10, clusters=clusters,
                         top_words=20)
    fs = model.features
    full = Parser.train(train, epochs=1, hash_bits=16, label_bits=10, clusters=clusters)
    def norm(form):
        return form.lower().translate(_DIGIT_TABLE)

    words = Counter(norm(f) for s in train for f in s.forms[1:])
    top = {w for w, _ in words.most_common(15)}
    assert len(fs.vocabs["word"]) == 20 and top <= set(fs.vocabs["word"].tolist())
    assert len(fs.vocabs["lemma"]) == 20 and len(fs.vocabs["p5"]) == 20
    assert len(full.features.vocabs["word"]) > 100
    assert list(fs.vocabs["pos"]) == list(full.features.vocabs["pos"])  # tags not pruned
    assert list(fs.vocabs["c4"]) == list(full.features.vocabs["c4"])    # nor clusters
    kept = set(fs.vocabs["word"].tolist())
    rare = next(s for s in train if any(norm(f) not in kept for f in s.forms[1:]))
    codes = fs.encode([rare])[0].codes
    row = 1 + next(i for i, f in enumerate(rare.forms) if i and norm(f) not in kept)
    assert codes[ATTR_INDEX["word"], row] == UNK   # column 0 pads the sentence start
    assert codes[ATTR_INDEX["cl"], row] == full.features.encode([rare])[0].codes[ATTR_INDEX["cl"], row]
    path = tmp_path / "m.npz"
    model.save(path)
    again = load_model(path)
    assert again.features.top_words == 20 and again.meta["training"]["top_words"] == 20
    test = read_conllu(SAMPLE_DIR / "en_ewt-sample-test.conllu")[:30]
    for a, b in zip(model.predict_heads(test), again.predict_heads(test)):
        assert np.array_equal(a, b)
    conllu = tmp_path / "train.conllu"
    write_conllu(train, conllu)
    assert main(["train", str(conllu), "--top-words", "30", "--no-tagger", "--no-tokenizer",
                 "--epochs", "1", "--hash-bits", "14", "-o", str(tmp_path / "c.npz"),
                 "--quiet"]) == 0
    assert len(load_model(tmp_path / "c.npz").features.vocabs["word"]) == 30
    with pytest.raises(SystemExit) as bad:
        main(["train", str(conllu), "--top-words", "-1", "-o", str(tmp_path / "d.npz")])
    assert bad.value.code == 2
