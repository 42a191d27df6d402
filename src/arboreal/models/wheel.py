"""A model as an installable Python package: a wheel written directly.

``arboreal package`` writes ``arboreal_model_NAME-VERSION-py3-none-any.whl``
(distribution ``arboreal-model-NAME``), which pip installs offline (``pip install
--no-index DIR/*.whl``) or from any package index. A wheel is a zip archive of a
documented layout (PyPA "Binary distribution format"): the package
``arboreal_model_NAME/`` (``model.npz``, ``card.json`` and a two-function
``__init__.py``) and ``arboreal_model_NAME-VERSION.dist-info/`` with ``METADATA``
(core metadata 2.1), ``WHEEL``, ``entry_points.txt`` (the entry point ``NAME`` in the
group ``arboreal_models``, which :mod:`arboreal.models.names` looks up) and ``RECORD``
(every file's SHA-256, urlsafe base64 without padding, and size). Every member gets
the same timestamp, so the same model and card give the same wheel byte for byte.
"""
from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from pathlib import Path

from arboreal.errors import ArborealError
from arboreal.models.names import CARD_FILE, ENTRY_POINT_GROUP, MODEL_FILE, check_name

#: public version identifiers of PEP 440 in their normalized form (1.0, 2.1.3rc1, ...)
VERSION_PATTERN = re.compile(r"(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))*((a|b|rc)(0|[1-9][0-9]*))?"
                             r"(\.post(0|[1-9][0-9]*))?(\.dev(0|[1-9][0-9]*))?")
#: zip cannot store times before 1980; a fixed time keeps wheels reproducible
_TIMESTAMP = (1980, 1, 1, 0, 0, 0)


def check_version(version: str) -> str:
    """``version`` if it is a normalized PEP 440 public version, else ArborealError."""
    if not VERSION_PATTERN.fullmatch(version):
        raise ArborealError(f"{version!r} is not a package version (PEP 440, normalized: "
                            "e.g. 1.0, 2.1.3, 1.0rc1)")
    return version


def distribution_name(name: str) -> str:
    """The distribution (project) name of model ``name``: ``arboreal-model-NAME``,
    normalized as PEP 503 does (lower case, runs of '-', '_', '.' as one '-')."""
    return re.sub(r"[-_.]+", "-", f"arboreal-model-{check_name(name)}").lower()


def module_name(name: str) -> str:
    """The Python package that holds model ``name``: ``arboreal_model_NAME`` (an
    identifier: every '-' and '.' as '_')."""
    return distribution_name(name).replace("-", "_")


def wheel_filename(name: str, version: str) -> str:
    """``arboreal_model_NAME-VERSION-py3-none-any.whl``."""
    return f"{module_name(name)}-{check_version(version)}-py3-none-any.whl"


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode('ascii')}"


def _metadata(name: str, version: str, card: dict, requires: str | list[str]) -> str:
    from arboreal.models.cards import describe

    summary = card.get("description") or f"arboreal model {name}"
    lines = ["Metadata-Version: 2.1", f"Name: {distribution_name(name)}", f"Version: {version}",
             f"Summary: {' '.join(str(summary).split())}"]
    if card.get("license"):
        lines.append(f"License: {' '.join(str(card['license']).split())}")
    requires = [requires] if isinstance(requires, str) else list(requires)
    lines += ["Requires-Python: >=3.10", *(f"Requires-Dist: {r}" for r in requires),
              "Description-Content-Type: text/plain", "",
              f"The arboreal model {name!r}: arboreal.load({name!r}) or "
              f"'arboreal parse {name} INPUT' once installed.", "",
              *describe(card, "this package"), ""]
    return "\n".join(lines)


def _init_py(name: str, version: str) -> str:
    return (f'"""The arboreal model {name!r} {version} (its card: card.json beside)."""\n'
            "from pathlib import Path\n\n"
            f"NAME = {name!r}\n"
            f"MODEL_FILE = Path(__file__).with_name({MODEL_FILE!r})\n"
            f"CARD_FILE = Path(__file__).with_name({CARD_FILE!r})\n\n\n"
            "def load():\n"
            '    """The model, loaded by arboreal.load."""\n'
            "    import arboreal\n\n"
            "    return arboreal.load(str(MODEL_FILE))\n")


def write_wheel(out_dir: str | Path, name: str, version: str, model_bytes: bytes,
                card_text: str, card: dict, requires: str | list[str]) -> Path:
    """Write the wheel of model ``name`` into ``out_dir`` (created if missing), atomically;
    returns its path. ``requires``: its Requires-Dist (arboreal itself, with the extras
    and packages the model needs)."""
    from arboreal._atomic import atomic_write

    module = module_name(name)
    info = f"{module}-{check_version(version)}.dist-info"
    files = [
        (f"{module}/__init__.py", _init_py(name, version).encode("utf-8")),
        (f"{module}/{MODEL_FILE}", model_bytes),
        (f"{module}/{CARD_FILE}", card_text.encode("utf-8")),
        (f"{info}/METADATA", _metadata(name, version, card, requires).encode("utf-8")),
        (f"{info}/WHEEL", ("Wheel-Version: 1.0\nGenerator: arboreal\nRoot-Is-Purelib: true\n"
                           "Tag: py3-none-any\n").encode("ascii")),
        (f"{info}/entry_points.txt",
         f"[{ENTRY_POINT_GROUP}]\n{name} = {module}\n".encode("utf-8")),
    ]
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in files)
    files.append((f"{info}/RECORD", (record + f"{info}/RECORD,,\n").encode("utf-8")))

    def write(f) -> None:
        with zipfile.ZipFile(f, "w") as zf:
            for path, data in files:
                member = zipfile.ZipInfo(path, date_time=_TIMESTAMP)
                member.compress_type = zipfile.ZIP_DEFLATED
                member.external_attr = 0o644 << 16
                zf.writestr(member, data)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    target = out / wheel_filename(name, version)
    atomic_write(target, write)
    return target
