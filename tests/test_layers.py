"""The layers of docs/design.md hold: every import of every module (at module level or
inside a function), read with ``ast``, points down the layers. (Parsing modules that
import no learner at all is tests/test_training_config.py's check, by running one.)"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "arboreal"

DESIGN = SRC.parents[1] / "docs" / "design.md"


def read_rules(text: str) -> dict[str, tuple[str, ...]]:
    """docs/design.md's table of layer rules: package -> the arboreal packages it never
    imports (the rows between the ``layer rules`` markers)."""
    rows = text.split("<!-- layer rules: begin -->", 1)[1].split("<!-- layer rules: end -->")[0]
    rules = {}
    for line in rows.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].startswith("`"):
            rules[cells[0].strip("`")] = tuple(x.strip() for x in cells[1].split(","))
    return rules


#: package (a folder of arboreal, or a module) -> the arboreal packages it never imports
RULES = read_rules(DESIGN.read_text(encoding="utf-8"))


#: the packages at the top, which may import any layer (models, commands) or are the
#: package's own plumbing; every other package or module of arboreal has a rule above
TOP = {"models", "cli", "server", "server_workers", "distributed", "integrations",
       "evaluation", "evaluation_ud", "__init__", "__main__"}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) of every import in ``path``, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            out.append((node.lineno, module))
            # "from arboreal import models" imports arboreal.models
            if module == "arboreal":
                out += [(node.lineno, f"arboreal.{alias.name}") for alias in node.names]
    return out


def _modules(package: str) -> list[Path]:
    folder = SRC / package
    return sorted(folder.rglob("*.py")) if folder.is_dir() else [SRC / f"{package}.py"]


@pytest.mark.parametrize("package", sorted(RULES))
def test_no_import_points_up_the_layers(package):
    broken = []
    for path in _modules(package):
        for line, module in _imports(path):
            parts = module.split(".")
            if parts[0] == "arboreal" and len(parts) > 1 and parts[1] in RULES[package]:
                broken.append(f"{path.relative_to(SRC)}:{line} imports {module}")
    assert not broken, "\n".join(broken)


def test_every_package_has_a_rule_or_is_at_the_top():
    """A new package or module of arboreal gets a rule (or is named as one at the top);
    private helpers (``_name.py``) are the shared plumbing of every layer."""
    names = {p.stem if p.is_file() else p.name for p in SRC.iterdir()
             if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py"}
    unruled = sorted(n for n in names - TOP - set(RULES) if not n.startswith("_"))
    assert not unruled, f"packages without a layer rule: {unruled}"


def test_the_table_is_read_whole():
    """Every package of the table is a package of arboreal, and every package it forbids
    too (a misspelt row would hold nothing)."""
    names = {p.stem if p.is_file() else p.name for p in SRC.iterdir()}
    assert {"inference", "trees", "io", "scorers", "neural", "learn", "features"} <= set(RULES)
    for package, never in RULES.items():
        assert package in names and set(never) <= names, (package, never)


def test_no_two_modules_import_each_other_at_module_level():
    """The import graph of module-level imports has no circle."""
    graph = {}
    for path in SRC.rglob("*.py"):
        name = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
        graph[name.removesuffix(".__init__")] = path
    edges = {}
    for name, path in graph.items():
        top = ast.parse(path.read_text(encoding="utf-8")).body
        lines = {n.lineno for n in top if isinstance(n, (ast.Import, ast.ImportFrom))}
        edges[name] = {m for line, m in _imports(path) if line in lines and m in graph
                       and m != name}
    state: dict[str, int] = {}

    def circle_from(v, path):
        state[v] = 1
        for w in sorted(edges[v]):
            if state.get(w) == 1:
                return path + [w]
            if w not in state:
                found = circle_from(w, path + [w])
                if found:
                    return found
        state[v] = 2
        return None

    for v in sorted(edges):
        if v not in state:
            found = circle_from(v, [v])
            assert found is None, " -> ".join(found)


def test_the_rules_see_what_they_check(tmp_path, monkeypatch):
    """The reader finds imports in functions and relative imports (so the test above
    can fail)."""
    fake = SRC / "features" / "_layer_probe.py"
    src = "def f():\n    from ..models import parser\n    import arboreal.learn.trainer\n"
    tree = {"path": fake, "text": src}
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None: tree["text"]
                        if self == fake else Path.read_bytes(self).decode())
    found = [m for _, m in _imports(fake)]
    assert "arboreal.models" in found and "arboreal.learn.trainer" in found


#: the modules that ``arboreal train`` walks through, from the command to the learners
#: (docs/design.md, "what runs when")
TRAINING_WALK = ("cli/train_cmd.py", "models/pipeline.py", "models/parser.py",
                 "models/training.py", "models/neural.py", "learn/trainer.py",
                 "learn/neural.py")


def _private_uses(path: Path) -> list[str]:
    """What ``path`` uses of another module's private names: imports of ``_name`` from
    another arboreal module, and ``obj._name`` on anything but ``self`` and ``cls``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("arboreal"):
            out += [f"{node.lineno}: from {node.module} import {a.name}" for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__") \
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            out.append(f"{node.lineno}: {ast.unparse(node)}")
    return out


@pytest.mark.parametrize("module", TRAINING_WALK)
def test_the_training_walk_uses_no_private_name_of_another_module(module):
    assert _private_uses(SRC / module) == []


def test_the_private_name_check_sees_both_kinds(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from arboreal.models.parser import _with_columns\n"
                   "def f(parser):\n    return parser._parse_whole([])\n", encoding="utf-8")
    assert _private_uses(bad) == ["1: from arboreal.models.parser import _with_columns",
                                  "3: parser._parse_whole"]


def test_the_pipeline_calls_no_function_of_its_caller():
    """models/pipeline.py takes no callable parameter to train the parser with: it calls
    Parser.train itself (a closure from the command line was a call back up)."""
    tree = ast.parse((SRC / "models" / "pipeline.py").read_text(encoding="utf-8"))
    train = next(n for n in tree.body
                 if isinstance(n, ast.FunctionDef) and n.name == "train_pipeline")
    args = train.args.args
    assert [a.arg for a in args][:3] == ["train", "dev", "parser_options"]
    assert ast.unparse(args[2].annotation) == "dict | None"
