"""The training configuration (arboreal.models.training.TrainingConfig) and the layers
around it: the command line and ``Parser.train`` build the same config and train the
same model for every learner; the config holds the defaults (the learner's own epochs)
and is saved in the model; options that duplicated others are one-line errors naming
the one kept; ``Parser.train`` is short; parsing never imports the learners."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from arboreal.cli import main
from arboreal.errors import ArborealError
from arboreal.io.conllu import read_conllu, write_conllu
from arboreal.learn import LEARNERS
from arboreal.models import Parser
from arboreal.models.training import HIGHER_ORDER_OPTIONS, TrainingConfig

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "arboreal"
SAMPLE = ROOT / "data" / "sample" / "en_ewt-sample-train.conllu"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    sents = [s for s in read_conllu(SAMPLE) if 2 <= len(s) <= 15][:40]
    path = tmp_path_factory.mktemp("tiny") / "train.conllu"
    write_conllu(sents, path)
    return sents, path


def model_arrays(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def assert_same_arrays(a: Path, b: Path) -> None:
    xa, xb = model_arrays(a), model_arrays(b)
    xa.pop("__meta__"), xb.pop("__meta__")
    assert sorted(xa) == sorted(xb)
    for k in xa:
        assert xa[k].dtype == xb[k].dtype and np.array_equal(xa[k], xb[k]), k


def meta(path: Path) -> dict:
    return json.loads(str(model_arrays(path)["__meta__"]))


@pytest.mark.parametrize("learner", LEARNERS.names())
def test_api_and_command_line_train_the_same_model(tiny, tmp_path, learner):
    sents, path = tiny
    api = Parser.train(sents, learner=learner, epochs=2, hash_bits=12)
    api.save(tmp_path / "api.model")
    assert main(["train", str(path), "-o", str(tmp_path / "cli.model"), "--learner", learner,
                 "--epochs", "2", "--hash-bits", "12", "--no-tagger", "--no-tokenizer",
                 "--quiet"]) == 0
    assert_same_arrays(tmp_path / "api.model", tmp_path / "cli.model")
    config = meta(tmp_path / "api.model")["training"]["config"]
    assert meta(tmp_path / "cli.model")["training"]["config"] == config
    assert TrainingConfig.from_dict(config) == TrainingConfig(learner=learner, epochs=2,
                                                              hash_bits=12)


def test_the_learners_default_epochs_are_the_configs_for_both(tiny, tmp_path):
    """Once the command line ran 25 L-BFGS iterations where Parser.train ran 10."""
    sents, path = tiny
    assert TrainingConfig(learner="loglinear").epochs_to_run() == 25
    assert TrainingConfig(learner="local-margin").epochs_to_run() == 15
    assert TrainingConfig(learner="mira").epochs_to_run() == 10
    api = Parser.train(sents, learner="loglinear", C=1.0, hash_bits=12)
    api.save(tmp_path / "api.model")
    assert main(["train", str(path), "-o", str(tmp_path / "cli.model"), "--learner",
                 "loglinear", "--learner-option", "C=1", "--hash-bits", "12", "--no-tagger",
                 "--no-tokenizer", "--quiet"]) == 0
    assert api.meta["training"]["epochs"] == 25
    assert meta(tmp_path / "cli.model")["training"]["epochs"] == 25
    assert_same_arrays(tmp_path / "api.model", tmp_path / "cli.model")


def test_higher_order_options_are_named_options(tiny, tmp_path, capsys):
    """``--max-heads 4`` and the old ``--learner-option max_heads=4`` (a warning naming
    the new spelling) train the same model as ``Parser.train(max_heads=4)``."""
    sents, path = tiny
    common = ["train", str(path), "--order", "2", "--epochs", "1", "--pruner-epochs", "1",
              "--hash-bits", "12", "--no-tagger", "--no-tokenizer"]
    assert main([*common, "-o", str(tmp_path / "new.model"), "--max-heads", "4",
                 "--quiet"]) == 0
    capsys.readouterr()
    assert main([*common, "-o", str(tmp_path / "old.model"), "--learner-option",
                 "max_heads=4"]) == 0
    err = capsys.readouterr().err
    assert "--learner-option max_heads=4 is deprecated: use --max-heads 4" in err
    Parser.train(sents, order=2, epochs=1, pruner_epochs=1, hash_bits=12,
                 max_heads=4).save(tmp_path / "api.model")
    assert_same_arrays(tmp_path / "new.model", tmp_path / "old.model")
    assert_same_arrays(tmp_path / "new.model", tmp_path / "api.model")
    assert meta(tmp_path / "new.model")["higher_order"]["max_heads"] == 4


@pytest.mark.parametrize("argv, kept", [
    (["--C", "0.1"], "use --learner-option C=0.1"),
    (["--laplacian", "2"], "use --learner-option laplacian=2"),
    (["--iterations", "5"], "use --epochs 5"),
    (["--labeled-partition"], "use --learner loglinear-labeled"),
])
def test_options_that_duplicated_others_name_the_one_kept(tiny, tmp_path, capsys, argv, kept):
    _, path = tiny
    with pytest.raises(SystemExit) as stop:
        main(["train", str(path), "-o", str(tmp_path / "m.model"), *argv])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and kept in err and "Traceback" not in err
    assert not (tmp_path / "m.model").exists()


def test_the_help_lists_no_removed_option(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    for gone in ("--C ", "--laplacian", "--iterations", "--labeled-partition"):
        assert gone not in out
    for named in HIGHER_ORDER_OPTIONS:
        assert "--" + named.replace("_", "-") in out


def test_the_command_lines_higher_order_options_and_defaults_are_the_configs(capsys):
    from arboreal.cli.train_cmd import HIGHER_ORDER_KEYS

    assert HIGHER_ORDER_KEYS == HIGHER_ORDER_OPTIONS
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    config = TrainingConfig()
    assert f"(default {config.prune_recall:g})" in out
    assert f"(default {config.threshold:.0e})".replace("e-0", "e-") in out
    assert f"(default {config.memory_budget / 2**30:g} GiB" in out
    assert f"{config.grand_scope}, default" in out
    # the hash size: stated once (features.first_order), the help says the same
    from arboreal.features.first_order import DEFAULT_HASH_BITS, FeatureSet

    assert config.hash_bits == DEFAULT_HASH_BITS == FeatureSet().bits
    assert (f"(default {DEFAULT_HASH_BITS}: {4 * 2 ** DEFAULT_HASH_BITS // 2 ** 20} MB of "
            "float32)") in out


def test_the_helps_epoch_tagger_and_neural_defaults_are_the_codes(capsys, monkeypatch):
    """The help of `arboreal train` states each default that the code holds elsewhere
    (the command line does not import the learners to print them)."""
    monkeypatch.setenv("COLUMNS", "10000")        # no line broken at a hyphen
    from arboreal.models.neural import TRAINING_DEFAULTS
    from arboreal.models.pipeline import JACKKNIFE_FOLDS
    from arboreal.models.tagger import DEFAULT_EPOCHS as TAGGER_EPOCHS
    from arboreal.models.training import DEFAULT_EPOCHS

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    epochs = {name: LEARNERS[name].default_epochs for name in (
        "loglinear", "loglinear-labeled", "eg", "local-margin")}
    assert epochs["loglinear"] == epochs["loglinear-labeled"] == epochs["eg"]
    assert (f"training epochs (default {DEFAULT_EPOCHS}; loglinear, loglinear-labeled and eg: "
            f"{epochs['eg']} L-BFGS iterations or passes; local-margin: "
            f"{epochs['local-margin']}; --scorer neural: {TRAINING_DEFAULTS['epochs']};") in out
    assert all(getattr(LEARNERS[name], "default_epochs", DEFAULT_EPOCHS) == DEFAULT_EPOCHS
               for name in LEARNERS.names() if name not in epochs)
    assert f"--scorer neural: {TRAINING_DEFAULTS['patience']}, on dev LAS" in out
    assert f"folds of the jackknifed training tags (default {JACKKNIFE_FOLDS})" in out
    assert f"tagger training passes per stage (default {TAGGER_EPOCHS};" in out


def test_the_learner_may_still_be_the_third_argument(tiny):
    model = Parser.train(tiny[0][:10], None, "perceptron", epochs=1, hash_bits=10)
    assert model.meta["training"]["learner"] == "perceptron"


@pytest.mark.parametrize("options, problem", [
    ({"learner": "nope"}, "unknown learner 'nope'"),
    ({"max_heads": 5}, "need a higher-order model"),
    ({"learner_options": {"max_heads": 5}, "order": 2}, "not of the learner (--max-heads)"),
    ({"order": 2, "prune_recall": 1.5}, "prune_recall must lie in"),
    ({"embeddings": "x.vec"}, "for the neural scorer only"),
    ({"scorer": "neural", "parts": ["sibling"]}, "do not apply (parts)"),
    ({"scorer": "neural", "order": 3}, "trains orders 1 (arcs) and 2"),
    ({"scorer": "neural", "order": 2, "decoder": "cle"}, "--decoder eisner"),
    ({"decoder": "both"}, "unknown decoder"),
    ({"epochs": 0}, "epochs must be at least 1"),
    # the learner's fit to the order: refused before a tagger is trained for the parser
    ({"order": 2, "learner": "local-margin"}, "'local-margin' is not supported with --order"),
    ({"order": 3, "learner": "loglinear"}, "needs part marginals"),
    ({"order": 2, "learner": "loglinear-labeled"}, "is first-order only"),
    ({"scorer": "neural", "scorer_options": {"encoder_layer": 3}}, "give --encoder"),
])
def test_the_config_is_validated(tiny, options, problem):
    with pytest.raises(ArborealError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        TrainingConfig(**options).validate()
    with pytest.raises(ArborealError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        Parser.train(tiny[0][:5], config=TrainingConfig(**options))


def test_the_encoder_only_options_are_options_of_the_neural_scorer():
    from dataclasses import fields

    from arboreal.models.neural import ENCODER_OPTIONS, neural_options
    from arboreal.neural.network import NetworkConfig

    training = neural_options({})[1]
    known = {f.name for f in fields(NetworkConfig)} | set(training)
    assert ENCODER_OPTIONS and set(ENCODER_OPTIONS) <= known


def test_parser_train_is_at_most_80_lines():
    tree = ast.parse((SRC / "models" / "parser.py").read_text(encoding="utf-8"))
    parser = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Parser")
    train = next(n for n in parser.body if isinstance(n, ast.FunctionDef) and n.name == "train")
    first = min([train.lineno, *(d.lineno for d in train.decorator_list)])
    assert train.end_lineno - first + 1 <= 80


# ---------------------------------------------------------------------- layers
#: the modules a parse goes through (models/higher_order.py trains only
#: through a function-level import of arboreal.models.training)
PARSING = ["models/parser.py", "models/analysis.py", "models/pipeline.py", "models/tagger.py",
           "models/tokenizer.py", "models/higher_order.py",
           "models/pieces.py", "models/stream.py", "neural/scorer.py", "neural/network.py",
           *(str(p.relative_to(SRC)) for p in sorted((SRC / "scorers").glob("*.py"))),
           *(str(p.relative_to(SRC)) for p in sorted((SRC / "inference").rglob("*.py")))]
TRAINING = ("arboreal.learn", "arboreal.models.training")


def module_imports(path: Path) -> list[str]:
    """The modules ``path`` imports when it is imported (statements outside functions)."""
    names = []

    def visit(body):
        for node in body:
            if isinstance(node, ast.Import):
                names.extend(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.append(node.module)
                names.extend(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.ClassDef)):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    for child in getattr(node, field, []):
                        visit(child.body if isinstance(child, ast.ExceptHandler) else [child])
    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return names


@pytest.mark.parametrize("module", PARSING)
def test_parsing_modules_do_not_import_the_learners(module):
    bad = [m for m in module_imports(SRC / module) if m.startswith(TRAINING)]
    assert bad == [], f"{module} imports {bad} when imported"


def test_the_import_check_sees_imports(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import os\nfrom arboreal.learn import x\nif True:\n"
                    "    import arboreal.learn.trainer\nclass A:\n    from arboreal.models "
                    "import training\ndef f():\n    import arboreal.learn.eg\n",
                    encoding="utf-8")
    assert [m for m in module_imports(path) if m.startswith(TRAINING)] == \
        ["arboreal.learn", "arboreal.learn.x", "arboreal.learn.trainer",
         "arboreal.models.training"]


def test_loading_and_parsing_text_never_imports_the_learners(tiny, tmp_path):
    """A whole pipeline model (tokenizer, tagger, parser) loaded and parsing raw text
    and CoNLL-U, in a fresh interpreter: no module of arboreal.learn is loaded."""
    _, path = tiny
    model = tmp_path / "m.model"
    assert main(["train", str(path), "-o", str(model), "--epochs", "1", "--tagger-epochs",
                 "1", "--jackknife", "2", "--hash-bits", "12", "--quiet"]) == 0
    script = textwrap.dedent(f"""
        import sys
        import arboreal
        from arboreal.io.conllu import read_conllu
        model = arboreal.load({str(model)!r})
        assert model.tokenizer is not None and model.tagger is not None
        parsed = model.parse_text("The dog barked. It was late.")
        assert len(parsed) >= 1
        model.parse(read_conllu({str(path)!r})[:5])
        print(sorted(m for m in sys.modules if m.startswith({TRAINING!r})))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
