"""The layers of docs/design.md hold: every import of every module (at module level or
inside a function), read with ``ast``, points down the layers. (Parsing modules that
import no learner at all is tests/test_training_config.py's check, by running one.)"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "arboreal"

#: package (a folder of arboreal, or a module) -> the arboreal packages it never imports
RULES = {
    "inference": ("learn", "models", "scorers", "neural", "features", "io", "cli", "server",
                  "server_workers", "distributed", "integrations"),
    "trees": ("learn", "models", "scorers", "neural", "features", "cli", "server",
              "distributed", "integrations"),
    "io": ("integrations", "learn", "models", "scorers", "neural", "features", "cli",
           "server", "distributed"),
    "features": ("models", "learn", "scorers", "neural", "cli", "server", "distributed",
                 "integrations"),
    # learning never reads files and never touches a cluster
    "learn": ("io", "distributed", "cli", "server", "server_workers", "integrations"),
    # a scorer never imports the models that hold it, nor the learners that train it
    "neural": ("learn", "models", "cli", "server", "server_workers", "distributed",
               "integrations"),
}


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
