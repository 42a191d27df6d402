"""What a new user meets first on the command line (issue 41): options anywhere among
the positional arguments, one-line usage errors, the input's kind recognised, a parser
trained without tags that parses untagged input, messages through ``logging`` and
progress lines fit for a file, a closed output pipe, and help that lists what exists."""
from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from arboreal.cli import main

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample"
TEXT = "What if Google expanded on its search engine?\n\nThe cat sat on the mat. It slept.\n"


def run_cli(*argv: str, **kwargs) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    if "stdout" not in kwargs and "stderr" not in kwargs:
        kwargs["capture_output"] = True
    return subprocess.run([sys.executable, "-m", "arboreal", *argv], env=env, timeout=600,
                          **kwargs)


def blank_tags(text: str) -> str:
    """CoNLL-U text with UPOS and XPOS '_' on every word line."""
    rows = []
    for line in text.split("\n"):
        fields = line.split("\t")
        if len(fields) == 10:
            fields[3] = fields[4] = "_"
            line = "\t".join(fields)
        rows.append(line)
    return "\n".join(rows)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from arboreal.io.conllu import read_conllu, write_conllu

    d = tmp_path_factory.mktemp("first_hour")
    sents = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")
    write_conllu(sents[:40], d / "train.conllu")
    write_conllu(sents[40:50], d / "test.conllu")
    (d / "untagged-train.conllu").write_text(
        blank_tags((d / "train.conllu").read_text(encoding="utf-8")), encoding="utf-8")
    (d / "untagged-test.conllu").write_text(
        blank_tags((d / "test.conllu").read_text(encoding="utf-8")), encoding="utf-8")
    (d / "news.txt").write_text(TEXT, encoding="utf-8")
    return d


@pytest.fixture(scope="module")
def model(files):
    """A pipeline (tokenizer, tagger, parser) trained on tagged data."""
    path = files / "tagged.model"
    assert main(["train", str(files / "train.conllu"), "-o", str(path), "--epochs", "1",
                 "--hash-bits", "16", "--tagger-epochs", "1", "--quiet"]) == 0
    return path


def _parse(*argv) -> tuple[int, str]:
    """``main(argv)``'s exit status and its output file's text (argv has ``-o OUT``)."""
    out = Path(argv[argv.index("-o") + 1])
    rc = main(list(argv))
    return rc, out.read_text(encoding="utf-8") if rc == 0 else ""


# ---------------------------------------------------------------------------------------
# argument order and usage errors


def test_options_may_come_between_and_after_positional_arguments(files, model, capsys):
    out = str(files / "order.conllu")
    news = str(files / "news.txt")
    rc, before = _parse("parse", "--input", "text", "-o", out, str(model), news)
    assert rc == 0 and before.count("# text = ") == 3
    rc, between = _parse("parse", str(model), "--input", "text", news, "-o", out)
    assert (rc, between) == (0, before)
    test = str(files / "test.conllu")
    rc, quiet_first = _parse("parse", str(model), "--quiet", test, "-o", out)
    rc2, quiet_last = _parse("parse", str(model), test, "-o", out, "--quiet")
    assert rc == rc2 == 0 and quiet_first == quiet_last and quiet_first.count("# sent_id") == 10
    rc, tagged = _parse("tag", str(model), "--input", "text", news, "-o", out)
    assert rc == 0 and tagged.count("# text = ") == 3
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("argv, option, accepted", [
    (["train", "T", "-o", "M", "--order", "4"], "argument --order", "choose from 1, 2, 3"),
    (["parse", "M", "--jobs", "0"], "argument --jobs", "must be in 1..256"),
    (["parse", "M", "--input", "txt"], "argument --input",
     "choose from 'auto', 'conllu', 'tokenized', 'words', 'text'"),
    (["tag", "M", "--marginals"], "unrecognized arguments: --marginals", ""),
    (["eval", "G"], "the following arguments are required: SYSTEM", ""),
])
def test_a_usage_error_is_one_line_with_a_pointer_to_help(argv, option, accepted, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    captured = capsys.readouterr()
    err = captured.err
    assert err.count("\n") == 1 and err.startswith("arboreal: error: "), err
    assert option in err and accepted in err
    assert err.rstrip().endswith(f"see 'arboreal {argv[0]} --help'")
    assert "usage:" not in err and captured.out == ""


# ---------------------------------------------------------------------------------------
# the input's kind


def test_input_auto_tells_conllu_from_text(files, model):
    out = str(files / "auto.conllu")
    news, test = str(files / "news.txt"), str(files / "test.conllu")
    rc, auto_text = _parse("parse", str(model), news, "-o", out)
    rc2, explicit_text = _parse("parse", str(model), news, "-o", out, "--input", "text")
    assert rc == rc2 == 0 and auto_text == explicit_text and auto_text.count("# text") == 3
    rc, auto_conllu = _parse("parse", str(model), test, "-o", out)
    rc2, explicit_conllu = _parse("parse", str(model), test, "-o", out, "--input", "conllu")
    assert rc == rc2 == 0 and auto_conllu == explicit_conllu
    assert auto_conllu.count("# sent_id") == 10
    # standard input, either kind
    for path, want in ((news, auto_text), (test, auto_conllu)):
        res = run_cli("parse", str(model), "--quiet", input=Path(path).read_bytes())
        assert res.returncode == 0, res.stderr
        assert res.stdout.decode("utf-8") == want


def test_input_auto_reads_a_named_pipe_once(files, model):
    """A path that is a pipe (a shell's ``<(command)``) cannot be read twice: the lines
    looked at are replayed, not lost."""
    import threading

    out = str(files / "fifo.conllu")
    rc, want = _parse("parse", str(model), str(files / "news.txt"), "-o", out)
    fifo = files / "news.fifo"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as f:
            f.write(TEXT.encode("utf-8"))

    writer = threading.Thread(target=write)
    writer.start()
    try:
        rc2, got = _parse("parse", str(model), str(fifo), "-o", out)
    finally:
        writer.join()
    assert rc == rc2 == 0 and got == want


def test_sniffing_standard_input_reads_only_its_first_lines():
    """``--input auto`` looks at the lines up to the first that decides, and the stream
    handed back replays them: the rest of standard input is still read as it comes."""
    from arboreal.io.sniff import CONLLU, TEXT, sniff

    class Pipe(io.RawIOBase):
        def __init__(self, data: bytes):
            self.data, self.taken = data, 0

        def readable(self):
            return True

        def readinto(self, buffer):
            n = min(len(buffer), 4096, len(self.data) - self.taken)   # a pipe's trickle
            buffer[:n] = self.data[self.taken:self.taken + n]
            self.taken += n
            return n

    conllu = (SAMPLE / "en_ewt-sample-test.conllu").read_bytes()
    text = (SAMPLE / "en_ewt-sample-test.txt").read_bytes()
    for data, kind, line in ((conllu, CONLLU, 5), (text, TEXT, 1)):
        pipe = Pipe(data)
        got, number, _, stream = sniff(io.BufferedReader(pipe, 8192), "<stdin>")
        assert (got, number) == (kind, line)
        assert pipe.taken <= 16384 < len(data)   # not the whole input
        assert stream.read() == data
        assert stream.name == "<stdin>"
    assert sniff(io.BytesIO(b"# only comments\n\n"))[0] == CONLLU
    assert sniff(io.BytesIO(b"# A heading\nThen prose.\n"))[:2] == (TEXT, 2)
    assert sniff(io.BytesIO(b"1-2\tdu\t_\n"))[:2] == (CONLLU, 1)
    assert sniff(io.BytesIO(b"\xef\xbb\xbf# sent_id = 1\n1\tA\n"))[:2] == (CONLLU, 2)


@pytest.mark.parametrize("case", ["text read as conllu", "conllu read as text",
                                  "conllu read as tokenized", "model file as input",
                                  "model file as treebank", "model file as gold",
                                  "text as treebank", "treebank as model"])
def test_input_mixups_are_one_line_errors_naming_the_fix(case, files, model, capsys):
    news, test = str(files / "news.txt"), str(files / "test.conllu")
    out = str(files / "never.conllu")
    argv, wanted = {
        "text read as conllu": (["parse", str(model), news, "--input", "conllu", "-o", out],
                                [f"{news}:1:", "plain text, not CoNLL-U", "--input text"]),
        "conllu read as text": (["parse", str(model), test, "--input", "text", "-o", out],
                                [f"{test}:", "this is CoNLL-U", "--input conllu"]),
        "conllu read as tokenized": (["tag", str(model), test, "--input", "tokenized"],
                                     ["this is CoNLL-U, not tokenized", "--input conllu"]),
        "model file as input": (["parse", str(model), str(model), "-o", out],
                                [f"{model}:", "arboreal model file", "MODEL comes first"]),
        "model file as treebank": (["train", str(model), "-o", str(files / "x.model")],
                                   [f"{model}:", "this is an arboreal model file",
                                    "not a CoNLL-U treebank"]),
        "model file as gold": (["eval", str(model), test],
                               ["arboreal model file", "not a CoNLL-U treebank"]),
        "text as treebank": (["train", news, "-o", str(files / "x.model")],
                             [f"{news}:1:", "plain text, not a CoNLL-U treebank"]),
        "treebank as model": (["parse", test, news, "-o", out],
                              [f"{test}: not an arboreal model file", "it is a CoNLL-U file"]),
    }[case]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("arboreal: error: ") and err.count("\n") == 1, err
    for text in wanted:
        assert text in err, (text, err)
    assert not Path(out).exists() and not (files / "x.model").exists()


# ---------------------------------------------------------------------------------------
# a parser trained without tags


def test_a_parser_trained_on_untagged_data_parses_untagged_input(files, model, capsys):
    from arboreal.features.first_order import default_templates
    from arboreal.io.conllu import read_conllu
    from arboreal.models import load_model

    path = files / "untagged.model"
    assert main(["train", str(files / "untagged-train.conllu"), "-o", str(path),
                 "--epochs", "1", "--hash-bits", "16"]) == 0
    err = capsys.readouterr().err
    assert "needs tagged input" not in err and "word forms only" in err
    untagged = load_model(path)
    assert untagged.tagger is None and not untagged.reads_tags
    assert untagged.features.name == "words"
    out = files / "untagged.out.conllu"
    assert main(["parse", str(path), str(files / "untagged-test.conllu"), "-o", str(out)]) == 0
    parsed = read_conllu(out)
    assert len(parsed) == 10 and all(s.has_heads for s in parsed)
    assert all(set(s.upos[1:].tolist()) == {"_"} for s in parsed)   # nothing invented
    assert main(["parse", str(path), str(files / "news.txt"), "-o", str(out)]) == 0
    assert len(read_conllu(out)) == 3
    # a model trained on tagged data keeps its tagger and the default templates
    tagged = load_model(model)
    assert tagged.tagger is not None and tagged.reads_tags
    assert tagged.features.name == "default"
    assert list(tagged.features.templates) == default_templates()


def test_a_higher_order_parser_trained_on_untagged_data_reads_no_tags(files, capsys):
    from arboreal.features.higher_order import WORD_PART_TEMPLATES
    from arboreal.models import load_model

    path = files / "untagged2.model"
    assert main(["train", str(files / "untagged-train.conllu"), "-o", str(path), "--order",
                 "2", "--epochs", "1", "--hash-bits", "16", "--no-tokenizer",
                 "--quiet"]) == 0
    parser = load_model(path)
    assert not parser.reads_tags and parser.order == 2
    kinds = parser.higher_order.parts.templates
    assert kinds and all(kinds[k] == WORD_PART_TEMPLATES[k] for k in kinds)
    out = files / "untagged2.out.conllu"
    assert main(["parse", str(path), str(files / "untagged-test.conllu"), "-o", str(out)]) == 0
    assert "error" not in capsys.readouterr().err


# ---------------------------------------------------------------------------------------
# messages and progress


def test_training_writes_one_line_per_epoch_when_stderr_is_not_a_terminal(files, capsys,
                                                                         monkeypatch):
    """Under capsys stderr is no terminal (as a file or a pipe): no progress bar
    (nothing redrawn with '\\r'), one line per epoch, and on a first use the notice that
    kernels are compiled (and that 'arboreal warmup' does it ahead), before the epochs."""
    import arboreal._compile as compile_module

    monkeypatch.setattr(compile_module, "kernels_cached", lambda probes=None: False)
    assert main(["train", str(files / "train.conllu"), "-o", str(files / "lines.model"),
                 "--epochs", "3", "--hash-bits", "14", "--no-tagger", "--no-tokenizer"]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err
    lines = err.splitlines()
    epochs = [line for line in lines if line.startswith("epoch ")]
    assert [line.split(":")[0] for line in epochs] == ["epoch 1", "epoch 2", "epoch 3"]
    notice = [i for i, line in enumerate(lines) if "'arboreal warmup'" in line]
    assert len(notice) == 1 and "compiling" in lines[notice[0]]
    assert notice[0] < lines.index(epochs[0])


def test_messages_go_through_the_arboreal_logger(files, capsys):
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    keep = Keep()
    logger = logging.getLogger("arboreal")
    logger.addHandler(keep)
    try:
        argv = ["train", str(files / "train.conllu"), "-o", str(files / "log.model"),
                "--epochs", "2", "--hash-bits", "14", "--no-tagger", "--no-tokenizer"]
        assert main(argv) == 0
        said = [r.getMessage() for r in records if r.name.startswith("arboreal.")]
        assert any(m.startswith("epoch 2:") for m in said)
        assert any(m.startswith("saved ") for m in said)
        records.clear()
        assert main(argv + ["--quiet"]) == 0
        assert not [r for r in records if r.levelno < logging.WARNING]
        records.clear()
        assert main(argv + ["--verbose"]) == 0
        assert logger.getEffectiveLevel() == logging.DEBUG
    finally:
        logger.removeHandler(keep)
        logger.setLevel(logging.INFO)   # as the next command sets it
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(argv + ["--quiet", "--verbose"])
    assert "exclude each other" in capsys.readouterr().err


def test_an_error_kept_by_a_log_handler_keeps_no_input_file_or_model_alive(files, model,
                                                                           capsys):
    """A handler that keeps records (pytest's, a MemoryHandler) got the exception
    itself, whose traceback held the failed command's frames: its open input file and
    its model, one more of each per failed parse (the CoNLL-U fuzz test ran the machine
    out of memory beside other suites)."""
    import gc
    import weakref

    from arboreal.models import stream

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    broken = files / "broken.conllu"
    broken.write_bytes(b"\t# sent_id = 0\n1\t0\t0\tNOUN\t0\t_\t0\troot\t_\t_\n\n")
    models = []
    real = stream.process_stream

    def watched(m, *args, **kwargs):   # a weak reference to each parse's model
        models.append(weakref.ref(m))
        return real(m, *args, **kwargs)

    keep = Keep()
    logging.getLogger("arboreal").addHandler(keep)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(stream, "process_stream", watched)
            for argv in (["validate", str(broken)],
                         ["parse", str(model), str(broken), "-o", str(files / "b.conllu")]):
                assert main(argv) == 2
    finally:
        logging.getLogger("arboreal").removeHandler(keep)
    assert any("wrong number of columns" in r.getMessage() for r in records)
    gc.collect()
    assert models and all(ref() is None for ref in models)
    still_open = [o for o in gc.get_objects() if isinstance(o, io.IOBase)
                  and not o.closed and str(getattr(o, "name", "")) == str(broken)]
    assert still_open == []
    capsys.readouterr()


def test_every_command_takes_quiet_and_verbose(capsys):
    from arboreal.cli import SUBCOMMANDS

    for command in SUBCOMMANDS:
        with pytest.raises(SystemExit):
            main([command, "--help"])
        out = capsys.readouterr().out
        assert "--quiet" in out and "--verbose" in out, command


def test_waitress_queue_depth_lines_are_not_shown_but_its_warnings_are(capsys):
    from arboreal.cli._logging import configure_waitress

    configure_waitress()
    logging.getLogger("waitress.queue").warning("Task queue depth is %d", 4)
    logging.getLogger("waitress").warning("a real problem")
    err = capsys.readouterr().err
    assert "Task queue depth" not in err
    assert err == "waitress: warning: a real problem\n"
    configure_waitress(verbose=True)
    logging.getLogger("waitress.queue").warning("Task queue depth is %d", 4)
    assert "Task queue depth is 4" in capsys.readouterr().err
    configure_waitress()


def test_parse_progress_has_a_total_for_a_file(files, capsys):
    """On a terminal, ``parse``'s bar counts the bytes read out of the input's size
    (total and time left), with the sentences written so far."""
    from arboreal.cli.parse_cmd import _Progress

    path = files / "test.conllu"
    size = path.stat().st_size
    with open(path, "rb") as f, _Progress([str(path)]) as bar:
        assert bar.total == size and bar.bar.total == size
        bar.fd = f.fileno()
        f.read(100)
        bar.update(1)
        assert 0 < bar.bar.n <= size
        f.read()
        bar.update(9)
        assert bar.bar.n == size and bar.sentences == 10
    with _Progress([str(path), str(path)]) as bar:   # several files: sentences, no total
        bar.update(3)
        assert bar.total is None and bar.bar.n == 3
    capsys.readouterr()


def test_a_closed_output_pipe_ends_parse_as_a_unix_tool(files, model):
    """``arboreal parse ... | head``: once the reader is gone, the command stops, exit
    status 141 (128 + SIGPIPE) and nothing on stderr (no traceback, no 'Exception
    ignored'). The pipe's reading end is closed before the command starts, so its
    first write fails whatever the machine's speed."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        res = run_cli("parse", str(model), str(files / "test.conllu"), "--quiet",
                      stdout=write_end, stderr=subprocess.PIPE)
    finally:
        os.close(write_end)
    assert res.returncode == 141
    assert res.stderr == b""


# ---------------------------------------------------------------------------------------
# help


def test_help_lists_every_learner_and_only_real_options(capsys, monkeypatch):
    from arboreal.cli.train_cmd import LEARNER_HELP
    from arboreal.learn import LEARNERS

    assert sorted(LEARNER_HELP) == LEARNERS.names()
    monkeypatch.setenv("COLUMNS", "10000")   # no line breaks inside names
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    for name in LEARNERS.names():
        assert f"{name}:" in out, name
    with pytest.raises(SystemExit):
        main(["tag", "--help"])
    assert "--marginals" not in capsys.readouterr().out
