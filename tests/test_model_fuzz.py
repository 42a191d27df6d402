"""Fuzzing of model files: every mutated file either loads into a model that parses a
sentence or is refused with ModelError (never another exception, never an unbounded
allocation).

Three tiny models (first order, order 2, and first order with a tokenizer and a
tagger in its file) are trained once per module; each case mutates their bytes (bit
flips, overwrites, truncation, junk), their metadata (a field set to a hostile JSON
value or removed), their members (oversized or lying ``.npy`` headers, extra and
missing members) or builds a zip bomb. Cases load from a file in one temporary
directory, so each costs a few milliseconds.
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arboreal
from arboreal.errors import ModelError
from arboreal.models import Parser, load_model
from arboreal.scorers.labeler import Labeler

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "en_ewt-sample-train.conllu"
def fuzz(examples: int) -> settings:
    """Hypothesis settings of one fuzz test: ``examples`` cases, no deadline (the first
    case of a process may compile), fixtures shared by all cases."""
    return settings(max_examples=examples, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def corpus():
    return arboreal.read_conllu(SAMPLE)[:12]


@pytest.fixture(scope="module")
def models(corpus, tmp_path_factory) -> dict[str, bytes]:
    """The bytes of a tiny first-order and a tiny order-2 model file."""
    d = tmp_path_factory.mktemp("models")
    first = Parser.train(corpus, epochs=1, hash_bits=10, label_bits=8)
    first.save(d / "first.model")
    second = Parser.train(corpus, order=2, epochs=1, hash_bits=10, pruner_epochs=1)
    # a small label table keeps each load cheap; the model stays a valid one
    small = Labeler(second.labeler.templates, second.labeler.labels, bits=8)
    small.W = np.random.default_rng(0).normal(size=small.W.shape).astype(np.float32)
    second.labeler = small
    second.save(d / "second.model")
    # a first-order model with the tokenizer and tagger in its file (small tables)
    from arboreal.models.tagger import Tagger
    from arboreal.models.tokenizer import Tokenizer

    first.tagger = Tagger.train(corpus, epochs=1, bits=10)
    first.tokenizer = Tokenizer.train(corpus, epochs=1, bits=10)
    first.save(d / "pipeline.model")
    return {name: (d / f"{name}.model").read_bytes() for name in ("first", "second", "pipeline")}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


class Env:
    """What every case needs, with a short repr (hypothesis prints its arguments)."""

    def __init__(self, models: dict[str, bytes], workdir: Path, sentence):
        self.models, self.workdir, self.sentence = models, workdir, sentence

    def __repr__(self) -> str:
        return "Env()"

    def check(self, data: bytes) -> None:
        _check(data, self.workdir, self.sentence)


@pytest.fixture(scope="module")
def env(models, workdir, corpus) -> Env:
    return Env(models, workdir, corpus[0])


def _check(data: bytes, workdir: Path, sentence) -> None:
    """Load ``data`` as a model file: ModelError, or a model that parses ``sentence``."""
    path = workdir / "case.model"
    path.write_bytes(data)
    try:
        model = load_model(path)
    except ModelError as exc:
        assert str(exc).startswith(str(path)), exc
        return
    parsed = model.parse([sentence])
    assert len(parsed) == 1 and len(parsed[0].heads) == len(sentence.heads)
    if model.tagger is not None:         # a loaded tagger tags (and its parser parses)
        retagged = model.parse([sentence], retag=True)
        assert len(retagged[0].upos) == len(sentence.upos)
    if model.tokenizer is not None:      # a loaded tokenizer tokenizes
        sentences = list(model.tokenizer.tokenize(["A short text. Another one."]))
        assert sentences and all(len(s) > 0 for s in sentences)


def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


def _zip(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, body in members.items():
            z.writestr(name, body)
    return out.getvalue()


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=False)
    return buf.getvalue()


def _meta(data: bytes) -> dict:
    raw = _members(data)["__meta__.npy"]
    return json.loads(str(np.lib.format.read_array(io.BytesIO(raw))))


def _with_meta(data: bytes, meta: dict) -> bytes:
    members = _members(data)
    members["__meta__.npy"] = _npy(np.array(json.dumps(meta)))
    return _zip(members)


def _paths(obj, prefix=()) -> list[tuple]:
    """Every key path of a JSON object (list items of short lists included); the
    training history is edited only as a whole."""
    out = []
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, list) and len(obj) <= 100:
        items = enumerate(obj)
    else:
        return out
    for k, v in items:
        out.append(prefix + (k,))
        if k not in ("history", "templates") or isinstance(k, int):
            out.extend(_paths(v, prefix + (k,)))
    return out


MODEL = st.sampled_from(["first", "second", "pipeline"])
HOSTILE = st.one_of(
    st.sampled_from([-5, -1, 0, 1, 3, 31, 40, 99, 2**31, 2**63, 10**30, -10**30, 1e308, -1e308,
                     0.5, float("nan"), float("inf"), True, False, None, "", "x", "eisner",
                     "default", [], {}, [""], ["h.pos"], ["g.pos"], ["q.pos"], [".pos"],
                     ["h+9.pos"], {"bits": 40}, "a" * 10_000, ["sib", "sib"], ["trisib"]]),
    st.integers(), st.floats(allow_nan=True), st.text(max_size=20), st.booleans(), st.none(),
    st.lists(st.integers(-3, 100), max_size=4), st.lists(st.text(max_size=8), max_size=4),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3))


@fuzz(200)
@given(which=MODEL, flips=st.lists(st.tuples(st.floats(0, 1, exclude_max=True),
                                             st.integers(0, 7)), min_size=1, max_size=6))
def test_bit_flips(env, which, flips):
    data = bytearray(env.models[which])
    for where, bit in flips:
        data[int(where * len(data))] ^= 1 << bit
    env.check(bytes(data))


@fuzz(100)
@given(which=MODEL, where=st.floats(0, 1, exclude_max=True), junk=st.binary(min_size=1, max_size=64))
def test_byte_overwrites(env, which, where, junk):
    data = bytearray(env.models[which])
    at = int(where * len(data))
    data[at:at + len(junk)] = junk
    env.check(bytes(data[:len(env.models[which])]))


@fuzz(100)
@given(which=MODEL, keep=st.floats(0, 1, exclude_max=True))
def test_truncation(env, which, keep):
    data = env.models[which]
    env.check(data[:int(keep * len(data))])


@fuzz(80)
@given(prefix=st.sampled_from([b"", b"PK\x03\x04", b"PK\x05\x06", b"\x93NUMPY", b"# sent_id"]),
       junk=st.binary(max_size=512))
def test_junk_files(env, prefix, junk):
    env.check(prefix + junk)


@fuzz(300)
@given(which=MODEL, pick=st.floats(0, 1, exclude_max=True), value=HOSTILE, delete=st.booleans())
def test_metadata_edits(env, which, pick, value, delete):
    meta = _meta(env.models[which])
    paths = _paths(meta)
    path = paths[int(pick * len(paths))]
    parent = meta
    for k in path[:-1]:
        parent = parent[k]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    env.check(_with_meta(env.models[which], meta))


def _raw_npy_header(header: str, version: tuple[int, int] = (1, 0), pad: int = 0) -> bytes:
    body = header.encode("latin1") + b" " * pad + b"\n"
    size = (b"\x93NUMPY" + bytes(version)
            + (len(body).to_bytes(2, "little") if version == (1, 0)
               else len(body).to_bytes(4, "little")))
    return size + body


HEADERS = st.sampled_from([
    "{'descr': '<f4', 'fortran_order': False, 'shape': (10000000000,), }",
    "{'descr': '|O', 'fortran_order': False, 'shape': (3,), }",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",
    "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
    "{'descr': '<i8', 'fortran_order': False, 'shape': (), }",
    "{'descr': '<U5', 'fortran_order': False, 'shape': (1,), }",
    "{'descr': '|u1', 'fortran_order': False, 'shape': (100000,), }",
    "{'descr': '<f4', 'fortran_order': False, 'shape': " + "(" * 300 + ")" * 300 + ", }",
    "not a dict at all",
])


@fuzz(100)
@given(which=MODEL, pick=st.floats(0, 1, exclude_max=True), header=HEADERS,
       version=st.sampled_from([(1, 0), (2, 0), (3, 0), (9, 9)]),
       pad=st.sampled_from([0, 20_000, 70_000]), body=st.binary(max_size=64))
def test_lying_npy_headers(env, which, pick, header, version, pad, body):
    members = _members(env.models[which])
    names = sorted(members)
    name = names[int(pick * len(names))]
    members[name] = _raw_npy_header(header, version, pad if version != (1, 0) else 0) + body
    env.check(_zip(members))


@fuzz(100)
@given(which=MODEL, pick=st.floats(0, 1, exclude_max=True), drop=st.booleans(),
       name=st.sampled_from(["junk.npy", "w_dense.npy", "vocab_extra.npy", "allowed.npy",
                             "../x.npy", "dir/", "w_mask.npy", "labels_count.npy", "x"]),
       values=st.lists(st.integers(0, 255), max_size=40))
def test_extra_and_missing_members(env, which, pick, drop, name, values):
    members = _members(env.models[which])
    if drop:
        names = sorted(members)
        del members[names[int(pick * len(names))]]
    else:
        body = _npy(np.array(values, dtype=np.uint8))
        if name in members:   # a second member of that name
            out = io.BytesIO()
            with zipfile.ZipFile(out, "w") as z:
                for n, b in members.items():
                    z.writestr(n, b)
                with pytest.warns(UserWarning):
                    z.writestr(name, body)
            env.check(out.getvalue())
            return
        members[name] = body
    env.check(_zip(members))


# ---------------------------------------------------------------------- resource bounds
def _bomb(data: bytes, member: str, inflated: int) -> bytes:
    """``data`` with ``member`` replaced by a consistent-looking float32 vector of
    ``inflated`` bytes of zeros (deflated to about a thousandth of that)."""
    members = _members(data)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, body in members.items():
            if name != member:
                z.writestr(name, body)
        with z.open(zipfile.ZipInfo(member), "w", force_zip64=True) as f:
            f.write(_raw_npy_header("{'descr': '<f4', 'fortran_order': False, "
                                    f"'shape': ({inflated // 4},), }}", pad=10))
            chunk = bytes(1 << 20)
            for _ in range(inflated // len(chunk)):
                f.write(chunk)
    return out.getvalue()


def _huge_header(data: bytes) -> bytes:
    """A member whose header declares 10^10 float32 values (over a few bytes of data)."""
    members = _members(data)
    members["w_nz.npy"] = _raw_npy_header(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (10000000000,), }") + bytes(64)
    return _zip(members)


def _edited(data: bytes, *path_value) -> bytes:
    meta = _meta(data)
    *keys, value = path_value
    node = meta
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = value
    return _with_meta(data, meta)


@pytest.fixture(scope="module")
def hostile(models, corpus, workdir) -> dict[str, Path]:
    """Hostile files of the issue, written once."""
    files = {
        "labeler_bits_31": _edited(models["first"], "labeler", "bits", 31),
        "labeler_bits_40": _edited(models["first"], "labeler", "bits", 40),
        "max_heads_-5": _edited(models["second"], "higher_order", "max_heads", -5),
        "parts_cousin": _edited(models["second"], "higher_order", "parts", ["cousin"]),
        "sib_reads_g": _edited(models["second"], "higher_order", "templates", "sib",
                                  ["g.pos m.pos"]),
        "huge_header": _huge_header(models["first"]),
        "zip_bomb": _bomb(models["first"], "w_nz.npy", 256 << 20),
        "conllu": SAMPLE.read_bytes()[:5000],
    }
    out = {}
    for name, data in files.items():
        out[name] = workdir / f"{name}.model"
        out[name].write_bytes(data)
    return out


def test_hostile_files_are_refused(hostile):
    for name, path in hostile.items():
        with pytest.raises(ModelError) as info:
            load_model(path)
        message = str(info.value)
        assert message.startswith(f"{path}: "), message
        assert "pickle" not in message and "\n" not in message
        if name == "conllu":
            assert "not an arboreal model file" in message


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
def test_refusing_hostile_files_needs_little_memory(hostile, models, workdir):
    """Under an address-space limit of 128 MiB above what a loaded model needs, the
    zip bomb (a member inflating to 256 MiB) and the 10^10-value header are refused."""
    good = workdir / "good.model"
    good.write_bytes(models["first"])
    script = textwrap.dedent(f"""
        import resource, sys
        from arboreal.errors import ModelError
        from arboreal.models import load_model
        load_model({str(good)!r})
        size = next(int(line.split()[1]) for line in open("/proc/self/status")
                    if line.startswith("VmSize:")) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size + (128 << 20), resource.RLIM_INFINITY))
        for path in sys.argv[1:]:
            try:
                load_model(path)
            except ModelError:
                continue
            sys.exit(f"{{path}} was loaded")
        print("ok")
    """)
    run = subprocess.run([sys.executable, "-c", script, str(hostile["zip_bomb"]),
                          str(hostile["huge_header"])], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]


@pytest.mark.parametrize("name", ["labeler_bits_40", "parts_cousin", "sib_reads_g",
                                  "max_heads_-5", "zip_bomb", "conllu"])
def test_cli_reports_a_bad_model_in_one_line(hostile, workdir, name):
    conllu = workdir / "x.conllu"
    conllu.write_bytes(SAMPLE.read_bytes()[:2000].rsplit(b"\n\n", 1)[0] + b"\n\n")
    env = dict(os.environ)
    run = subprocess.run([sys.executable, "-m", "arboreal", "parse", str(hostile[name]),
                          str(conllu)], capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"arboreal: error: {hostile[name]}: "), lines
    assert run.stdout == ""


def test_the_unmutated_models_load_and_parse(env):
    for which, data in env.models.items():
        path = env.workdir / f"{which}.model"
        path.write_bytes(data)
        model = load_model(path)
        assert len(model.parse([env.sentence])[0].heads) == len(env.sentence.heads)


def test_npy_header_that_breaks_the_tokenizer_is_refused(env):
    """A header with an unclosed bracket fails in Python's tokenizer (TokenError),
    not its parser: still a ModelError (found by test_bit_flips)."""
    members = _members(env.models["first"])
    name = next(k for k in members if k.endswith("_nz.npy"))
    text = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,\n"
    text += b" " * (63 - len(text) - 10) + b"\n"
    header = b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text
    members[name] = header + b"\x00" * 8
    env.check(_zip(members))
    path = env.workdir / "case.model"
    with pytest.raises(ModelError, match="unreadable .npy header"):
        load_model(path)
