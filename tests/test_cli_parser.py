"""arboreal train / arboreal parse: round trip through files and stdin, error exits."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from arboreal.cli import main

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"


@pytest.fixture(scope="module")
def small_files(small_trained_copy):
    """conftest's small treebank and its model, copied: the tests write beside them."""
    return small_trained_copy


@pytest.fixture(scope="module")
def trained(small_files):
    return small_files / "m.npz"


def test_train_and_parse_files(small_files, trained, capsys):
    from arboreal.io.conllu import read_conllu

    out = small_files / "out.conllu"
    assert main(["parse", str(trained), str(small_files / "dev.conllu"), "-o", str(out)]) == 0
    gold = read_conllu(small_files / "dev.conllu")
    pred = read_conllu(out)
    assert len(pred) == len(gold)
    for g, p in zip(gold, pred):
        assert (g.forms == p.forms).all() and p.has_heads
        assert g.comments == p.comments


def test_train_reports_epochs(small_files, capsys):
    rc = main(["train", str(small_files / "train.conllu"), "--dev", str(small_files / "dev.conllu"),
               "-o", str(small_files / "m2.npz"), "--epochs", "2", "--hash-bits", "16",
               "--learner", "mira", "--features", "mcdonald"])
    assert rc == 0
    err = capsys.readouterr().err
    assert "epoch 1:" in err and "epoch 2:" in err and "dev UAS" in err and "LAS" in err


def test_parse_stdin_stdout_with_missing_heads(small_files, trained):
    text = (small_files / "dev.conllu").read_text(encoding="utf-8")
    blank = "\n".join(
        "\t".join(f[:6] + ["_", "_"] + f[8:]) if (f := line.split("\t")) and len(f) == 10 else line
        for line in text.split("\n"))
    res = subprocess.run([sys.executable, "-m", "arboreal", "parse", str(trained)], input=blank,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    words = [line.split("\t") for line in res.stdout.splitlines() if line and not line.startswith("#")]
    words = [w for w in words if w[0].isdigit()]
    assert words and all(w[6] != "_" and w[7] != "_" for w in words)


@pytest.mark.parametrize("argv", [
    ["parse", "MISSING_MODEL.npz", "IN"],
    ["parse", "BAD_MODEL", "IN"],
    ["parse", "GOOD_MODEL", "MISSING.conllu"],
    ["train", "MISSING.conllu", "-o", "OUT"],
    ["train", "IN", "-o", "OUT", "--learner", "nope"],
    ["train", "IN", "-o", "OUT", "--epochs", "0"],
    ["train", "IN", "-o", "OUT", "--decoder", "magic"],
    ["train", "IN", "-o", "OUT", "--parts", "sibling"],
    ["train", "IN", "-o", "OUT", "--patience", "2"],
    ["train", "IN", "-o", "OUT", "--patience", "0"],
    ["parse"],
])
def test_errors_exit_2_without_traceback(small_files, trained, argv, capsys):
    bad = small_files / "bad.npz"
    bad.write_text("not a model\n")
    subst = {"BAD_MODEL": str(bad), "GOOD_MODEL": str(trained), "IN": str(small_files / "dev.conllu"),
             "OUT": str(small_files / "o.npz"), "MISSING.conllu": str(small_files / "missing.conllu"),
             "MISSING_MODEL.npz": str(small_files / "missing.npz")}
    argv = [subst.get(a, a) for a in argv]
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse usage errors
        rc = exc.code
    assert rc == 2
    err = capsys.readouterr().err
    assert "error" in err and "Traceback" not in err


def test_parse_streams_in_batches_with_the_same_result(small_files, trained, monkeypatch):
    """parse_iter (what `arboreal parse` runs) gives the parses of one big call, in
    order, whatever the batch size; the CLI writes them in batches too."""
    import arboreal.io.conllu as conllu
    from arboreal.io.conllu import format_conllu, iter_conllu, read_conllu
    from arboreal.models import load_model, parse_iter

    model = load_model(trained)
    sents = read_conllu(small_files / "dev.conllu")
    whole = format_conllu(model.parse(sents))
    for batch_size in (1, 3, 7, 1000):
        streamed = parse_iter(model, iter_conllu(small_files / "dev.conllu"), batch_size)
        assert format_conllu(streamed) == whole
    with pytest.raises(ValueError):
        list(parse_iter(model, sents, 0))
    monkeypatch.setattr(conllu, "_WRITE_BATCH", 4)
    out = small_files / "streamed.conllu"
    assert main(["parse", str(trained), str(small_files / "dev.conllu"), "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == whole


def test_parse_error_late_in_the_input_leaves_no_output(small_files, trained, monkeypatch,
                                                        capsys):
    """An input error after some batches were parsed: exit 2 with the line, and the
    output file is not created (nor an existing one touched)."""
    import arboreal.io.conllu as conllu

    monkeypatch.setattr(conllu, "_WRITE_BATCH", 2)
    good = (small_files / "dev.conllu").read_text(encoding="utf-8")
    bad_input = small_files / "late_error.conllu"
    bad_input.write_text(good + "1\tword\t_\tNOUN\t_\t_\tx\tdep\t_\t_\n\n", encoding="utf-8")
    out = small_files / "never.conllu"
    assert main(["parse", str(trained), str(bad_input), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    bad_line = good.count("\n") + 1
    assert f"late_error.conllu:{bad_line}:" in err and "Traceback" not in err
    assert not out.exists()
    assert not list(small_files.glob(".never.conllu.*"))
    out.write_text("old\n")
    assert main(["parse", str(trained), str(bad_input), "-o", str(out)]) == 2
    assert out.read_text() == "old\n"
