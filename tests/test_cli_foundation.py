"""The eval, stats and validate subcommands: in-process and as a real process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from arboreal.cli import main

REPO = Path(__file__).resolve().parents[1]
TRAIN = REPO / "data" / "sample" / "en_ewt-sample-train.conllu"
TEST = REPO / "data" / "sample" / "en_ewt-sample-test.conllu"

GOOD = ("1\tBirds\tbird\tNOUN\tNNS\t_\t2\tnsubj\t_\t_\n"
        "2\tsing\tsing\tVERB\tVBP\t_\t0\troot\t_\t_\n"
        "3\t.\t.\tPUNCT\t.\t_\t2\tpunct\t_\t_\n\n")


def run_cli(*argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "arboreal", *argv], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.parametrize("command", ["eval", "stats", "validate"])
def test_help(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert f"arboreal {command}" in out


def test_cluster_client_path_does_not_import_numba(tmp_path):
    """``arboreal parse --scheduler`` leaves the parsing to Dask workers: the command's
    own process checks the model file's metadata and streams shards without importing
    numba (a cost paid per command otherwise), while the model stays fully checked."""
    model = tmp_path / "m.model"
    assert run_cli("train", str(TRAIN), "-o", str(model), "--epochs", "1", "--no-tagger",
                   "--no-tokenizer", "--quiet").returncode == 0
    code = (
        "import sys\n"
        "from arboreal.cli import build_parser\n"
        "build_parser('parse')\n"
        "from arboreal.models.facts import ModelFacts\n"
        "import arboreal.distributed, arboreal.models.stream, arboreal.io.conllu\n"
        f"facts = ModelFacts({str(model)!r})\n"
        "blocks = list(arboreal.io.conllu.iter_blocks(sys.argv[1]))\n"
        "assert facts.order == 1 and facts.tagger is None and blocks\n"
        "print(sorted(m for m in ('numba', 'scipy', 'arboreal.models.parser') "
        "if m in sys.modules))\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-c", code, str(TEST)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    bad = tmp_path / "bad.model"
    bad.write_bytes(model.read_bytes()[:100])
    done = run_cli("parse", str(bad), str(TEST), "--scheduler", "local", "--workers", "1")
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_eval_table_and_json(capsys, tmp_path):
    assert main(["eval", str(TEST), str(TEST)]) == 0
    out = capsys.readouterr().out
    assert out.count("100.00") == 6 and "UAS" in out and "Complete match (labeled)" in out
    system = tmp_path / "sys.conllu"
    # a copy with one head and one label changed
    text = GOOD.replace("3\t.\t.\tPUNCT\t.\t_\t2\tpunct", "3\t.\t.\tPUNCT\t.\t_\t1\tpunct")
    text = text.replace("\tnsubj\t", "\tobj\t")
    gold = tmp_path / "gold.conllu"
    gold.write_text(GOOD)
    system.write_text(text)
    assert main(["eval", "--json", str(gold), str(system)]) == 0
    r = json.loads(capsys.readouterr().out)
    assert set(r) == {"uas", "las", "las_full", "root", "complete", "complete_labeled", "words", "sentences"}
    assert r["uas"] == pytest.approx(200 / 3) and r["las"] == pytest.approx(100 / 3)
    assert r["words"] == 3 and r["sentences"] == 1 and r["complete"] == 0.0 and r["root"] == 100.0
    assert main(["eval", "--json", "--exclude-punct", str(gold), str(system)]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["words"] == 2 and r["uas"] == 100.0 and r["las"] == 50.0 and r["complete"] == 100.0
    assert main(["eval", str(gold), str(system)]) == 0
    out = capsys.readouterr().out
    assert "66.67" in out and "33.33" in out


def test_stats_text_and_json(capsys):
    assert main(["stats", str(TRAIN), str(TEST)]) == 0
    out = capsys.readouterr().out
    assert str(TRAIN) in out and str(TEST) in out and "non-projective arcs" in out and "UPOS (" in out
    assert main(["stats", "--json", str(TEST)]) == 0
    st = json.loads(capsys.readouterr().out)[str(TEST)]
    from arboreal.io import read_conllu

    sents = read_conllu(TEST)
    assert st["sentences"] == len(sents) == 200
    assert st["words"] == sum(len(s) for s in sents)
    assert st["max_length"] == max(len(s) for s in sents)
    assert sum(st["deprels"].values()) == st["words"] == sum(st["upos"].values())
    assert st["deprels"]["root"] == 200 and st["multi_root_sentences"] == 0
    assert 0 < st["nonprojective_sentences"] <= st["nonprojective_arcs"]


def test_validate_ok_and_errors(capsys, tmp_path):
    assert main(["validate", str(TRAIN), str(TEST)]) == 0
    out = capsys.readouterr().out
    assert f"{TRAIN}: OK (600 sentences" in out
    bad = tmp_path / "bad.conllu"
    bad.write_text(GOOD + GOOD.replace("\t0\troot", "\t2\troot"))
    assert main(["validate", str(TEST), str(bad)]) == 2
    cap = capsys.readouterr()
    assert f"{TEST}: OK" in cap.out
    assert cap.err.strip() == f"arboreal: error: {bad}:6: word 2 is its own head"
    unparsed = tmp_path / "unparsed.conllu"
    unparsed.write_text(GOOD.replace("\t2\tnsubj\t", "\t_\t_\t"))
    assert main(["validate", str(unparsed)]) == 2
    assert "allow-missing-heads" in capsys.readouterr().err
    assert main(["validate", "--allow-missing-heads", str(unparsed)]) == 0


MALFORMED = {
    "columns": ("1\tBirds\tbird\tNOUN\tNNS\t_\t2\tnsubj\t_\n", 1, "wrong number of columns"),
    "head": (GOOD.replace("\t2\tnsubj", "\tx\tnsubj"), 1, "HEAD 'x'"),
    "range": (GOOD.replace("\t2\tnsubj", "\t9\tnsubj"), 1, "out of range"),
    "ids": (GOOD.replace("3\t.", "4\t."), 3, "expected 3"),
    "cycle": (GOOD.replace("\t0\troot", "\t3\troot")
              .replace("1\tBirds\tbird\tNOUN\tNNS\t_\t2", "1\tBirds\tbird\tNOUN\tNNS\t_\t0"), 2, "head cycle"),
    "self": (GOOD.replace("\t0\troot", "\t2\troot"), 2, "its own head"),
    "noroot": (GOOD.replace("\t0\troot", "\t1\troot").replace("\t2\tnsubj", "\t3\tnsubj"), 1, "root"),
    "mwt": ("1-4\tx\t_\t_\t_\t_\t_\t_\t_\t_\n" + GOOD, 1, "multiword token 1-4"),
    "empty": ("", 1, "empty file"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_files_exit_2_in_process(case, tmp_path, capsys):
    text, line, words = MALFORMED[case]
    p = tmp_path / f"{case}.conllu"
    p.write_text(text)
    for argv in (["validate", str(p)], ["stats", str(p)], ["eval", str(p), str(p)]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith(f"arboreal: error: {p}:{line}: ") and words in err, err
        assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("case", ["cycle", "ids"])
def test_malformed_file_exit_2_as_a_process(case, tmp_path):
    text, line, words = MALFORMED[case]
    p = tmp_path / f"{case}.conllu"
    p.write_text(text)
    r = run_cli("eval", str(p), str(TEST))
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.startswith(f"arboreal: error: {p}:{line}: ") and words in r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_invalid_utf8_and_missing_file_as_a_process(tmp_path):
    p = tmp_path / "latin1.conllu"
    p.write_bytes(GOOD.replace("Birds", "Bird\u00e9").encode("latin-1"))
    r = run_cli("validate", str(p))
    assert r.returncode == 2 and r.stderr.startswith(f"arboreal: error: {p}:1: invalid UTF-8")
    assert "Traceback" not in r.stderr
    r = run_cli("stats", str(tmp_path / "nope.conllu"))
    assert r.returncode == 2 and "nope.conllu" in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1


def test_word_mismatch_in_eval_is_one_line(tmp_path):
    gold = tmp_path / "g.conllu"
    gold.write_text(GOOD)
    other = tmp_path / "s.conllu"
    other.write_text(GOOD.replace("Birds", "Bees"))
    r = run_cli("eval", str(gold), str(other))
    assert r.returncode == 2
    assert r.stderr == ("arboreal: error: gold and system differ at sentence 1, line 1: word 1 is 'Birds' "
                        "in gold, 'Bees' in the system output\n")


def test_eval_cli_matches_independent_evaluator_on_changed_copy(tmp_path, capsys):
    import numpy as np

    from arboreal.io import read_conllu, write_conllu
    from test_evaluation import descends, independent_evaluate

    gold = read_conllu(TEST)
    rng = np.random.default_rng(7)
    system = []
    for s in gold:
        heads, rels = s.heads.copy(), s.deprels.copy()
        for m in range(1, len(s) + 1):
            if rng.random() < 0.1:
                heads[m] = rng.choice([h for h in range(len(s) + 1) if h != m and not descends(heads, h, m)])
            if rng.random() < 0.1:
                rels[m] = "dep" if rels[m] != "dep" else "obj"
        system.append(s.with_tree(heads, rels))
    path = tmp_path / "changed.conllu"
    write_conllu(system, path)
    for extra in ([], ["--exclude-punct"]):
        assert main(["eval", "--json", *extra, str(TEST), str(path)]) == 0
        got = json.loads(capsys.readouterr().out)
        want = independent_evaluate(gold, read_conllu(path), exclude_punct=bool(extra))
        assert got == pytest.approx(want)
        assert got["uas"] < 100


def test_compile_notice_needs_one_decoder_of_the_alternatives(tmp_path):
    """A model decodes with one decoder: once its kernels are cached, the 'compiling'
    notice stays quiet although the other decoder was never compiled."""
    from types import SimpleNamespace

    from arboreal._compile import kernels_cached

    def kernel(name, cached):
        path = tmp_path / f"{name}.nbi"
        if cached:
            path.write_bytes(b"")
        return SimpleNamespace(_cache=SimpleNamespace(
            _cache_file=SimpleNamespace(_index_path=str(path))))

    eisner, cle, tagger = kernel("e", True), kernel("c", False), kernel("t", True)
    assert kernels_cached(((eisner, cle), tagger))
    assert not kernels_cached(((kernel("e2", False), cle), tagger))
    assert not kernels_cached(((eisner, cle), kernel("t2", False)))


def test_the_compile_notice_probes_the_kernels_the_model_runs():
    """A neural parser (no second-stage labeler) with CLE is probed on CLE only; a linear
    pipeline on Eisner, the tagging stage and the labeler: a neural model's parse no
    longer announces, every run, the labeler's compilation that never comes."""
    from types import SimpleNamespace

    from arboreal._compile import _PROBES, model_probes

    neural = SimpleNamespace(decoder="cle", scorer=SimpleNamespace(), tokenizer=None,
                             tagger=None)
    assert model_probes(neural) == (_PROBES[0][1],)
    linear = SimpleNamespace(decoder="eisner", scorer=SimpleNamespace(labeler=object()),
                             tokenizer=None, tagger=None)
    pipeline = SimpleNamespace(parser=linear, tokenizer=object(), tagger=None)
    assert model_probes(pipeline) == (_PROBES[0][0], _PROBES[1], _PROBES[2])
