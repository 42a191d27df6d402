"""The long-sentence Eisner path: same trees as the batched kernel (ties,
-inf arcs, single and multi root), in batches too, and interruptible."""
from __future__ import annotations

import importlib
import signal
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

E = importlib.import_module("arboreal.inference.eisner")


def _tree_score(s: np.ndarray, heads: np.ndarray) -> float:
    m = np.arange(1, len(heads))
    return float(s[heads[1:], m].sum())


def _both(s, single_root, monkeypatch, **kw):
    out = []
    for threshold in (10 ** 9, 1):
        monkeypatch.setattr(E, "_LONG_MIN_N", threshold)
        try:
            out.append(E.eisner(s, single_root=single_root, **kw))
        except ValueError:
            out.append(None)
    return out


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 90), seed=st.integers(0, 2 ** 31), single_root=st.booleans(),
       kind=st.sampled_from(["normal", "ties", "forbidden"]), tile=st.sampled_from([2, 4, 32]))
def test_long_path_matches_batched(monkeypatch, n, seed, single_root, kind, tile):
    rng = np.random.default_rng(seed)
    if kind == "normal":
        s = rng.normal(size=(n + 1, n + 1))
    else:       # integer scores: many ties
        s = rng.integers(0, 3, size=(n + 1, n + 1)).astype(float)
        if kind == "forbidden":
            s[rng.random(s.shape) < 0.3] = -np.inf
    # small tiles and blocks: many blocks, off-diagonal tiles and kernel calls
    monkeypatch.setattr(E, "_LONG_TILE", tile)
    monkeypatch.setattr(E, "_LONG_BLOCK", 4 * tile)
    monkeypatch.setattr(E, "_LONG_CALL_WORK", 64)
    ref, got = _both(s, single_root, monkeypatch)
    if ref is None:
        assert got is None
        return
    np.testing.assert_array_equal(got, ref)
    assert _tree_score(s, got) == _tree_score(s, ref)


def test_long_sentences_in_a_batch(monkeypatch):
    """Long sentences of a padded batch take the long path, the others the
    batched kernel; each gets its own tree."""
    rng = np.random.default_rng(3)
    lengths = np.array([5, 70, 12, 0, 64, 1] * 3)
    batch = rng.integers(0, 4, size=(len(lengths), 71, 71)).astype(np.float32)
    monkeypatch.setattr(E, "_LONG_MIN_N", 60)
    got = E.eisner(batch, lengths=lengths)
    for b, n in enumerate(lengths):
        alone = E.eisner(batch[b, : n + 1, : n + 1].astype(np.float64))
        np.testing.assert_array_equal(got[b, : n + 1], alone)
        assert (got[b, n + 1:] == -1).all()


def test_long_decode_is_interruptible(ctrl_c, monkeypatch):
    # the long decode runs in the caller's thread as a series of compiled chunks; a
    # Ctrl-C that arrives during the first chunk is raised before the second one runs
    # (no duration is measured: the chunks are counted)
    n = 1000
    s = np.random.default_rng(0).normal(size=(n + 1, n + 1))
    chunk, calls = E._long_chunk, []

    def counted(*args):
        calls.append(1)
        chunk(*args)

    monkeypatch.setattr(E, "_long_chunk", counted)
    expected = E.eisner(s)
    whole = len(calls)
    assert whole > 1

    def first_chunk_then_ctrl_c(*args):
        counted(*args)
        if len(calls) == 1:
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    calls.clear()
    monkeypatch.setattr(E, "_long_chunk", first_chunk_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        E.eisner(s)
    assert len(calls) == 1 < whole
    monkeypatch.setattr(E, "_long_chunk", chunk)
    np.testing.assert_array_equal(E.eisner(s), expected)   # nothing left half-done
