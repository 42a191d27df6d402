"""Faults of a Dask cluster during ``arboreal parse --scheduler`` and ``arboreal train
--scheduler``: a worker killed (SIGKILL) mid-run, a worker that dies more often than
the scheduler retries, a scheduler that goes away, and a cluster whose scheduler and
workers are on separate addresses (network namespaces made by the test).

The cluster is made of separate processes (``python -m dask scheduler|worker``) and
the command runs as a subprocess, as a user runs them. A worker plugin
(tests/_dask_faults.py) stops the first task of a kind in flight on one worker and says
so in a file: the kill then happens while that task runs and before its result left the
worker; no sleep races the work."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("distributed")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _dask_faults import HANG, HoldFirstTask, ProcessCluster, environment, wait_for  # noqa: E402

from arboreal.cli import main  # noqa: E402
from arboreal.io.conllu import read_conllu, write_conllu  # noqa: E402
from arboreal.models import load_model  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
OLD = b"the model saved before this training\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("faults")
    train = read_conllu(SAMPLE / "en_ewt-sample-train.conllu")
    write_conllu(train[:150], d / "train.conllu")
    assert main(["train", str(d / "train.conllu"), "-o", str(d / "m.model"), "--epochs", "1",
                 "--hash-bits", "16", "--no-tagger", "--no-tokenizer", "--quiet"]) == 0
    text = (SAMPLE / "en_ewt-sample-test.conllu").read_text(encoding="utf-8")
    # 8 copies with distinct sentence ids (a lost or repeated sentence shows): 4 shards
    (d / "big.conllu").write_text("".join(text.replace("# sent_id = ", f"# sent_id = c{k}-")
                                          for k in range(8)), encoding="utf-8")
    assert main(["parse", str(d / "m.model"), str(d / "big.conllu"), "-o",
                 str(d / "expected.conllu"), "--quiet"]) == 0
    return d


@pytest.fixture
def cluster(tmp_path):
    made: list[ProcessCluster] = []

    def make(**options) -> ProcessCluster:
        made.append(ProcessCluster(tmp_path, **options))
        return made[-1]

    yield make
    for c in made:
        c.close()


def hold_first(cluster: ProcessCluster, prefix: str) -> None:
    """Arm the plugin: the first task named ``prefix...`` to start is held."""
    (cluster.folder / "armed").touch()
    client = cluster.client()
    try:
        client.register_plugin(HoldFirstTask(str(cluster.folder), prefix))
    finally:
        client.close()


def command(*argv: str, prefix: tuple = ()) -> subprocess.Popen:
    return subprocess.Popen([*prefix, sys.executable, "-m", "arboreal", *argv],
                            env=environment(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def held(cluster: ProcessCluster, proc: subprocess.Popen) -> dict:
    """The held task's worker, once it holds it (the command is still running then,
    since that task's result cannot come back)."""
    started = cluster.folder / "started"
    wait_for(lambda: started.exists() or proc.poll() is not None, "a task to start")
    assert started.exists(), "the command ended before any task was held: " + \
        proc.stderr.read().decode()
    assert proc.poll() is None
    return json.loads(started.read_text())


def finish(proc: subprocess.Popen) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, err.decode("utf-8", "replace")


def kill_worker(cluster: ProcessCluster, pid: int) -> None:
    victim = next(p for p in cluster.workers if p.pid == pid)
    victim.send_signal(signal.SIGKILL)
    assert victim.wait(HANG) == -signal.SIGKILL


def test_worker_killed_mid_parse_output_is_byte_identical(cluster, files, tmp_path):
    c = cluster()
    hold_first(c, "parse_shard")
    out = tmp_path / "out.conllu"
    proc = command("parse", str(files / "m.model"), str(files / "big.conllu"), "-o", str(out),
                   "--scheduler", c.address, "--quiet")
    kill_worker(c, held(c, proc)["pid"])
    rc, err = finish(proc)
    assert rc == 0, err
    assert out.read_bytes() == (files / "expected.conllu").read_bytes()


def test_the_only_copy_of_the_model_lost_with_its_worker_is_sent_again(cluster, files, tmp_path):
    """The model's bytes are scattered to every worker, but Dask's active memory manager
    drops copies that no waiting task needs, so a worker killed mid-parse may hold the
    only one (here, deterministically: the cluster has one worker when the command sends
    the model, a second joins before the kill). The shards that needed it are sent again
    with the model, and the output is whole."""
    c = cluster(workers=1)
    hold_first(c, "parse_shard")
    out = tmp_path / "out.conllu"
    proc = command("parse", str(files / "m.model"), str(files / "big.conllu"), "-o", str(out),
                   "--scheduler", c.address, "--quiet")
    pid = held(c, proc)["pid"]
    c.add_worker()
    c.client().close()      # waits for the new worker
    kill_worker(c, pid)
    rc, err = finish(proc)
    assert rc == 0, err
    assert out.read_bytes() == (files / "expected.conllu").read_bytes()


def test_worker_deaths_past_the_retries_exit_2_and_write_nothing(cluster, files, tmp_path):
    c = cluster(DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="0")   # the first death is fatal
    hold_first(c, "parse_shard")
    outdir = tmp_path / "out"
    outdir.mkdir()
    out = outdir / "out.conllu"
    proc = command("parse", str(files / "m.model"), str(files / "big.conllu"), "-o", str(out),
                   "--scheduler", c.address, "--quiet")
    kill_worker(c, held(c, proc)["pid"])
    rc, err = finish(proc)
    assert rc == 2 and err.count("\n") == 1, err
    assert err.startswith(f"arboreal: error: {files / 'big.conllu'}: the Dask workers parsing "
                          "the shard from line ") and "too many times to retry it" in err
    assert list(outdir.iterdir()) == []


def test_scheduler_gone_mid_parse_is_one_line_and_writes_nothing(cluster, files, tmp_path):
    c = cluster()
    hold_first(c, "parse_shard")
    outdir = tmp_path / "out"
    outdir.mkdir()
    proc = command("parse", str(files / "m.model"), str(files / "big.conllu"), "-o",
                   str(outdir / "out.conllu"), "--scheduler", c.address, "--quiet")
    held(c, proc)
    c.scheduler.send_signal(signal.SIGKILL)
    rc, err = finish(proc)
    assert rc == 2 and err.count("\n") == 1, err
    assert "the connection to the Dask scheduler was lost" in err
    assert list(outdir.iterdir()) == []


def _train_argv(files: Path, out: Path, scheduler: str) -> list[str]:
    return ["train", str(files / "train.conllu"), "-o", str(out), "--scheduler", scheduler,
            "--shards", "2", "--epochs", "3", "--hash-bits", "16", "--no-tagger",
            "--no-tokenizer", "--quiet"]


def test_worker_killed_mid_training_gives_the_uninterrupted_model(cluster, files, tmp_path):
    """The worker running a shard's epoch dies with that shard's sentences: the epoch
    is run again from the client's copies, and the model is the uninterrupted one."""
    c = cluster()
    hold_first(c, "_shard_task")
    out = tmp_path / "m.model"
    out.write_bytes(OLD)
    proc = command(*_train_argv(files, out, c.address))
    kill_worker(c, held(c, proc)["pid"])
    rc, err = finish(proc)
    assert rc == 0, err
    again = tmp_path / "again.model"           # the plugin is spent: no fault this time
    proc = command(*_train_argv(files, again, c.address))
    rc, err = finish(proc)
    assert rc == 0, err
    interrupted, uninterrupted = load_model(out), load_model(again)
    assert np.array_equal(interrupted.weights, uninterrupted.weights)
    assert len(interrupted.meta["history"]) == 3


def test_scheduler_gone_mid_training_keeps_the_old_model(cluster, files, tmp_path):
    c = cluster()
    hold_first(c, "_shard_task")
    out = tmp_path / "m.model"
    out.write_bytes(OLD)
    proc = command(*_train_argv(files, out, c.address))
    held(c, proc)
    c.scheduler.send_signal(signal.SIGKILL)
    rc, err = finish(proc)
    assert rc == 2 and err.count("\n") == 1, err
    assert "the connection to the Dask scheduler was lost" in err
    assert out.read_bytes() == OLD
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".m.model")) == []


# ------------------------------------------------------------ separate addresses


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=60)


@pytest.fixture
def namespaces():
    """Two network namespaces of this test, joined by a veth pair: 10.231.0.1/24 in the
    first, 10.231.0.2/24 in the second (private addresses, in namespaces that no other
    process shares). Removed afterwards whatever happens."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip(f"making network namespaces needs root (this test runs as uid "
                    f"{os.getuid()})")
    if shutil.which("ip") is None:
        pytest.skip("making network namespaces needs the ip command (iproute2)")
    tag = uuid.uuid4().hex[:8]
    first, second = f"arb-a-{tag}", f"arb-b-{tag}"
    made: list[str] = []
    try:
        for ns in (first, second):
            done = _ip("netns", "add", ns)
            if done.returncode != 0:
                pytest.skip(f"cannot make a network namespace here: {done.stderr.strip()}")
            made.append(ns)
        steps = [("link", "add", f"va{tag}", "type", "veth", "peer", "name", f"vb{tag}"),
                 ("link", "set", f"va{tag}", "netns", first),
                 ("link", "set", f"vb{tag}", "netns", second),
                 ("-n", first, "addr", "add", "10.231.0.1/24", "dev", f"va{tag}"),
                 ("-n", second, "addr", "add", "10.231.0.2/24", "dev", f"vb{tag}"),
                 ("-n", first, "link", "set", f"va{tag}", "up"),
                 ("-n", second, "link", "set", f"vb{tag}", "up"),
                 ("-n", first, "link", "set", "lo", "up"),
                 ("-n", second, "link", "set", "lo", "up")]
        for step in steps:
            done = _ip(*step)
            assert done.returncode == 0, f"ip {' '.join(step)}: {done.stderr}"
        yield first, second
    finally:
        for ns in made:         # the veth pair goes with them
            _ip("netns", "del", ns)


def test_scheduler_and_workers_on_separate_addresses(namespaces, cluster, files, tmp_path):
    """Scheduler and command in one namespace (10.231.0.1), two workers in another
    (10.231.0.2): the output is byte for byte that of one process, and a worker killed
    mid-run changes nothing."""
    first, second = namespaces
    inside_first, inside_second = ("ip", "netns", "exec", first), ("ip", "netns", "exec", second)
    c = cluster(host="10.231.0.1", worker_host="10.231.0.2", scheduler_prefix=inside_first,
                worker_prefix=inside_second)
    assert c.address.startswith("tcp://10.231.0.1:")
    out = tmp_path / "out.conllu"
    proc = command("parse", str(files / "m.model"), str(files / "big.conllu"), "-o", str(out),
                   "--scheduler", c.address, "--workers", "2", "--quiet", prefix=inside_first)
    rc, err = finish(proc)
    assert rc == 0, err
    assert out.read_bytes() == (files / "expected.conllu").read_bytes()
    # the workers really are at the other address
    workers = subprocess.run([*inside_first, sys.executable, "-c",
                              "import sys; from distributed import Client; "
                              "c = Client(sys.argv[1], timeout=60); "
                              "print(sorted(c.scheduler_info()['workers'])); c.close()",
                              c.address], env=environment(), capture_output=True, text=True,
                             timeout=HANG)
    assert workers.returncode == 0, workers.stderr
    assert workers.stdout.count("tcp://10.231.0.2:") == 2, workers.stdout
