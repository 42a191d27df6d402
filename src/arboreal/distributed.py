"""arboreal on a Dask cluster (``dask.distributed``): corpus parsing and the cluster
side of iterative parameter mixing (:mod:`arboreal.learn.mixing`).

Dask is an optional dependency (``pip install 'arboreal[dask]'``); this module
imports it only when asked to, and says how to install it when it is missing.

**The cluster** (:func:`dask_client`): ``--scheduler local --workers N`` starts a
``LocalCluster`` of N worker processes with one thread each (default N: the number
of cores), closed when the command ends; ``--scheduler ADDRESS`` (e.g.
``tcp://10.0.0.5:8786``) connects to a running scheduler and waits for N workers
(default 1). Workers should run one thread each (``dask worker ADDRESS --nthreads 1
--nworkers K``): a parse holds the model's lock, and numba's kernels use one core.

**Parsing** (:func:`parse_files`): every input is cut into shards of whole sentences
(:data:`SHARD_BYTES`, 256 KiB: blocks of :func:`arboreal.io.conllu.iter_blocks` as
``arboreal parse --jobs`` cuts them, joined up to that size; a few thousand words, a
fraction of a second to a second of work for a worker, so that per-task overhead,
milliseconds, stays below 1% and the last shards leave no worker idle for long), and
each shard is one task, :func:`arboreal.models.stream.process_block` on a worker:
read, tag, parse, format, exactly what one process does with a block. The client
keeps at most ``2 x threads`` shards in flight (bounded memory however large the
corpus: a window of shards, as ``--jobs`` does), takes the results in input order,
renumbers raw-text sentences as :func:`~arboreal.models.stream.process_stream` does
and writes each output file atomically. The output is byte for byte that of
``arboreal parse`` in one process.

**The model** travels once per worker, never per task and never as a pickled object:
the model *file's* bytes are scattered to every worker (``client.scatter(...,
broadcast=True)``), and each worker loads them once with
:func:`arboreal.load` (from a file in its scratch directory, since model
arrays are read lazily from the file) and keeps the model in a module-level cache
keyed by the bytes' SHA-256 (one model at a time per worker process); later shards,
and later commands with the same model on the same cluster, find it there. A command
first asks the workers which model they hold (:func:`cached_digest`) and sends nothing
when they all hold this one; a shard that then lands on a worker without it (one
restarted or joined since) comes back :data:`NO_MODEL` and is sent again with the model.

**Failures**: a shard that raises is retried (:data:`RETRIES`); a worker that dies
(killed, out of memory) has its shards rerun elsewhere by the scheduler (up to
``distributed.scheduler.allowed-failures`` deaths per shard, then a one-line error,
exit status 2, and no output file); a scheduler that goes away ends the command with
one line and exit status 2, and no output file. A worker that dies with the last copy
of the model's bytes (Dask keeps one copy of scattered data that no waiting task needs)
cancels the shards that need it: they are sent again with the model. (Parameter mixing
runs an epoch again when a worker died with data it needed: :mod:`arboreal.learn.mixing`.)
Since the client writes each shard's result once, in input order, a redone shard
never loses or duplicates a sentence. Bad input in a shard is not a failure but an
answer: the worker returns the same one-line message ``arboreal parse`` gives
(``FILE:LINE: problem``), the command stops with exit status 2 and that output file
is not written.
"""
from __future__ import annotations

import hashlib
import logging
import operator
import os
import tempfile
import threading
import warnings
from collections import deque
from contextlib import contextmanager
from dataclasses import replace
from typing import Callable, Iterator

import numpy as np

from arboreal._arrays import aligned_zeros
from arboreal.errors import ArborealError, FormatError

#: what to tell a user without Dask
INSTALL_HINT = "pip install 'arboreal[dask]'"
#: bytes of input per shard (one task): about 3,500 words of CoNLL-U, 40,000 of text
SHARD_BYTES = 1 << 18
#: shards in flight per worker thread
WINDOW_PER_THREAD = 2
#: retries of a shard whose task raised (a worker's death is counted separately)
RETRIES = 2
#: seconds to wait for the scheduler and its first workers
CONNECT_TIMEOUT = 60


def import_distributed():
    """``dask.distributed``, or an ArborealError saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise ArborealError("--scheduler needs Dask's distributed scheduler, which is not "
                            f"installed: {INSTALL_HINT}") from None
    return distributed


@contextmanager
def dask_client(scheduler: str, workers: int | None = None, **cluster_options):
    """A ``distributed.Client``: on a new ``LocalCluster`` of ``workers`` processes
    with one thread each (``scheduler == "local"``; ``cluster_options`` go to
    LocalCluster) or on the scheduler at address ``scheduler``, waiting for
    ``workers`` workers (at least one). Closed (and the local cluster shut down) on
    exit. ArborealError when the scheduler cannot be reached."""
    distributed = import_distributed()
    cluster = client = None
    # the client's own error log (a lost scheduler, retried connections) would add lines
    # to the one-line error that the command gives for it
    client_log = logging.getLogger("distributed.client")
    level = client_log.level
    client_log.setLevel(logging.CRITICAL)
    try:
        try:
            if scheduler == "local":
                options = dict(n_workers=workers or os.cpu_count() or 1,
                               threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.ERROR)
                options.update(cluster_options)
                with warnings.catch_warnings():
                    # no dashboard; its port taken by another cluster does not matter
                    warnings.filterwarnings("ignore", message=r"Port \d+ is already in use")
                    cluster = distributed.LocalCluster(**options)
                client = distributed.Client(cluster)
            else:
                client = distributed.Client(scheduler, timeout=CONNECT_TIMEOUT)
                client.wait_for_workers(workers or 1, timeout=CONNECT_TIMEOUT)
        except (OSError, ValueError, TypeError) as exc:
            where = "start a local Dask cluster" if scheduler == "local" else \
                f"use the Dask scheduler at {scheduler}"
            raise ArborealError(f"cannot {where}: {exc}") from None
        yield client
    finally:
        try:
            if client is not None:
                client.close()
            if cluster is not None:
                cluster.close()
        finally:
            client_log.setLevel(level)


def threads(client) -> int:
    """The worker threads of ``client``'s cluster."""
    return sum(client.nthreads().values())


def check_client(client) -> None:
    """ArborealError if ``client``'s cluster has no worker within the timeout."""
    try:
        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError) as exc:
        raise ArborealError(f"the Dask cluster has no workers: {exc}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__


def scheduler_lost(exc: BaseException, client=None) -> bool:
    """Whether ``exc`` (or ``client``'s state) says the client lost its scheduler."""
    from distributed.comm import CommClosedError

    if client is not None and getattr(client, "status", "running") != "running":
        return True                 # "connecting": reconnecting to a scheduler gone
    return isinstance(exc, CommClosedError) or "scheduler-connection-lost" in str(exc) \
        or "lost the connection to the scheduler" in str(exc)


def lost_data(exc: BaseException, client) -> bool:
    """Whether ``exc`` is a task cancelled because data it needed was lost with a
    worker, on a cluster that is still there (worth running the work again)."""
    import concurrent.futures

    return isinstance(exc, concurrent.futures.CancelledError) and \
        not scheduler_lost(exc, client)


@contextmanager
def dask_errors(what: str, client=None):
    """Dask's errors about lost workers, tasks, data or scheduler as one-line
    ArborealErrors naming ``what`` was being done (``client``: the client, whose state
    tells a lost scheduler from a lost worker)."""
    import concurrent.futures

    from distributed import KilledWorker
    from distributed.comm import CommClosedError

    try:
        yield
    except KilledWorker as exc:
        raise ArborealError(f"{what}: Dask workers died while running a task, too many "
                            f"times to retry it ({_first_line(exc)})") from None
    except (CommClosedError, concurrent.futures.CancelledError) as exc:
        if scheduler_lost(exc, client):
            raise ArborealError(f"{what}: the connection to the Dask scheduler was lost "
                                f"({exc.__class__.__name__}: {_first_line(exc)}); did it "
                                "stop?") from None
        raise ArborealError(f"{what}: the Dask cluster lost a task or its data "
                            f"({exc.__class__.__name__}: {_first_line(exc)}); did a worker "
                            "stop?") from None


# ----------------------------------------------------------------------------- workers

#: content hash -> (model, its file) in this worker process: the model loaded once
_MODELS: dict[str, tuple[object, str]] = {}
_MODELS_LOCK = threading.Lock()
#: parsing updates a model's counters (sentences split, fallbacks): one at a time
_PARSE_LOCK = threading.Lock()


def _scratch_directory() -> str:
    try:
        from distributed import get_worker

        return get_worker().local_directory
    except (ImportError, ValueError):
        return tempfile.gettempdir()


def cached_digest() -> str | None:
    """The SHA-256 of the model file this worker process holds loaded, or None (run on
    every worker by ``client.run``: the client sends the model only when one lacks it)."""
    with _MODELS_LOCK:
        return next(iter(_MODELS), None)


def worker_model(model_bytes: bytes | None, digest: str, name: str = "MODEL"):
    """The model whose file holds ``model_bytes`` (SHA-256 ``digest``), loaded on the
    first call in this process and cached (one model: a new one replaces it); errors
    name the model ``name`` (the user's path), not the worker's copy. With
    ``model_bytes`` None (the client found the model cached on every worker): the
    cached model, or None when this process does not hold it (e.g. a worker restarted
    since)."""
    with _MODELS_LOCK:
        hit = _MODELS.get(digest)
        if hit is not None:
            return hit[0]
        if model_bytes is None:
            return None
        import arboreal

        for _, old in _MODELS.values():
            try:
                os.unlink(old)
            except OSError:
                pass
        _MODELS.clear()
        fd, path = tempfile.mkstemp(dir=_scratch_directory(),
                                    prefix=f"arboreal-{digest[:16]}-", suffix=".model")
        with os.fdopen(fd, "wb") as f:
            f.write(model_bytes)
        # the file stays while the model is cached: arrays are read from it lazily
        try:
            model = arboreal.load(path)
        except ArborealError as exc:
            os.unlink(path)
            raise ArborealError(str(exc).replace(path, name)) from None
        _MODELS[digest] = (model, path)
        return model


#: a shard's answer when it was sent without the model and the worker has none
NO_MODEL = (None, None, (0, 0))


def parse_shard(model_bytes: bytes | None, digest: str, model_name: str, data: bytes,
                first_line: int, first_id: int, options):
    """One shard on a worker: :func:`~arboreal.models.stream.process_block`'s
    ``(text, sentences, notes)``, or ``(None, message, (0, 0))`` for bad input (or a
    bad model file, named ``model_name``), or :data:`NO_MODEL` when ``model_bytes`` is
    None and this worker does not hold the model (the client sends it and retries)."""
    from arboreal.models.stream import process_block

    try:
        model = worker_model(model_bytes, digest, model_name)
        if model is None:
            return NO_MODEL
        with _PARSE_LOCK, warnings.catch_warnings():
            # the client sums these up in one line
            warnings.filterwarnings("ignore", message=r".*memory budget")
            return process_block(model, data, first_line, first_id, options)
    except (ArborealError, ValueError) as exc:   # the message crosses to the client
        return None, str(exc), (0, 0)


# ------------------------------------------------------------------------------ client

def shards(source, options, shard_bytes: int | None = None
           ) -> Iterator[tuple[bytes, int, int]]:
    """``(data, first_line, first_id)`` of each shard of ``source``: consecutive blocks
    of ``arboreal parse --jobs`` (whole sentences, or paragraphs of raw text) joined
    up to ``shard_bytes`` (default :data:`SHARD_BYTES`)."""
    from arboreal.models.stream import _tasks

    limit = SHARD_BYTES if shard_bytes is None else shard_bytes
    parts: list[bytes] = []
    size = first_line = first_id = 0
    for data, line, fid in _tasks(source, options):
        if not parts:
            first_line, first_id = line, fid
        parts.append(data)
        size += len(data)
        if size >= limit:
            yield b"".join(parts), first_line, first_id
            parts, size = [], 0
    if parts:
        yield b"".join(parts), first_line, first_id


class _ModelOnCluster:
    """A model file for the workers: its SHA-256, and its bytes scattered to every
    worker (once) unless every worker holds that model already (:func:`cached_digest`),
    as after an earlier command on the same cluster."""

    def __init__(self, client, model: str):
        from arboreal.models.names import resolve_model

        with open(resolve_model(model), "rb") as f:
            self.data = f.read()
        self.digest = hashlib.sha256(self.data).hexdigest()
        self.client = client
        self.future = None
        with dask_errors("asking the workers for their model", client):
            held = client.run(cached_digest)
        if not held or any(d != self.digest for d in held.values()):
            self.send()

    def send(self, lost: bool = False) -> None:
        """Scatter the bytes to every worker, if not done yet, or (``lost``: a task that
        needed them was cancelled) if the cluster holds no copy any more: Dask's active
        memory manager keeps one copy of scattered data that no waiting task needs, and a
        worker that dies takes it with it."""
        if self.future is not None and self.future.status == "finished":
            if not lost:
                return
            with dask_errors("asking the workers for the model", self.client):
                if self.client.who_has([self.future]).get(self.future.key):
                    return
        if self.future is not None:
            self.future.release()
        with dask_errors("sending the model to the workers", self.client):
            self.future = self.client.scatter(self.data, broadcast=True, hash=False)

    def release(self) -> None:
        if self.future is not None:
            self.future.release()


class _Window:
    """Shards of every input submitted ahead (at most ``window``), results taken in
    input order; an error reading input k is raised where input k's shards are. A
    shard answered :data:`NO_MODEL`, or cancelled because the model's last copy was lost
    with a worker (:data:`RETRIES` times at most), is submitted again with the model
    sent."""

    def __init__(self, client, submit: Callable, jobs: list, window: int, shard_bytes,
                 model: _ModelOnCluster):
        self.client = client
        self.submit = submit
        self.window = window
        self.model = model
        # (input index, first line, future | exception, shard, options)
        self.pending: deque = deque()
        self.current = 0
        self.tasks = self._all_shards(jobs, shard_bytes)
        self.exhausted = False

    def _all_shards(self, jobs, shard_bytes):
        for k, (source, _, options) in enumerate(jobs):
            self.current = k
            for shard in shards(source, options, shard_bytes):
                yield k, shard, options

    def fill(self) -> None:
        while not self.exhausted and len(self.pending) < self.window:
            try:
                k, shard, options = next(self.tasks)
            except StopIteration:
                self.exhausted = True
            except Exception as exc:   # reading an input failed: raised in its turn
                self.pending.append((self.current, 0, exc, None, None))
                self.exhausted = True
            else:
                self.pending.append((k, shard[1], self.submit(shard, options), shard, options))

    def results(self, k: int, name: str) -> Iterator[tuple]:
        """Input k's ``(text, sentences, notes)`` per shard, in order."""
        import concurrent.futures

        from distributed import KilledWorker

        while True:
            self.fill()
            if not self.pending or self.pending[0][0] != k:
                return
            _, line, item, shard, options = self.pending.popleft()
            if isinstance(item, Exception):
                raise item
            lost = 0
            while True:
                try:
                    with dask_errors(f"{name}: the shard from line {line}", self.client):
                        try:
                            result = item.result()
                        except KilledWorker:
                            raise ArborealError(
                                f"{name}: the Dask workers parsing the shard from line "
                                f"{line} died, too many times to retry it (out of memory?)"
                            ) from None
                        except concurrent.futures.CancelledError as exc:
                            # the model's last copy died with a worker: send it again
                            if lost == RETRIES or not lost_data(exc, self.client):
                                raise
                            lost += 1
                            result = None
                finally:
                    item.release()
                if result is not None and tuple(result) != NO_MODEL:
                    break
                # the model lost, or a worker without it took the shard
                self.model.send(lost=result is None)
                item = self.submit(shard, options)
            self.fill()          # keep the workers busy while this text is written
            yield result

    def cancel(self) -> None:
        futures = [entry[2] for entry in self.pending if not isinstance(entry[2], Exception)]
        self.pending.clear()
        if futures:
            try:
                self.client.cancel(futures)
            except Exception:   # the cluster is gone already: nothing left to stop
                pass


def parse_files(client, model_path: str, jobs: list, progress: Callable[[int], None] | None
                = None, shard_bytes: int | None = None) -> list:
    """Parse (or tag, per ``options.tag_only``) each ``(source, output, options)`` of
    ``jobs`` on ``client``'s cluster with the model in file ``model_path``: the
    inputs in shards on the workers, each output written atomically in input order,
    byte for byte as :func:`~arboreal.models.stream.process_stream` writes it.
    ``progress(sentences)`` after each shard. Returns a
    :class:`~arboreal.models.stream.StreamReport` per input. An error (bad input in a
    shard, an input without sentences, a lost shard) stops everything: that output
    is not written (those of earlier inputs are complete)."""
    from arboreal.io.conllu import write_text
    from arboreal.io.json import array_framing
    from arboreal.models.stream import _EMPTY, StreamReport, _ordered

    check_client(client)
    model = _ModelOnCluster(client, model_path)

    def submit(shard, options):
        data, first_line, first_id = shard
        return client.submit(parse_shard, model.future, model.digest, model_path, data,
                             first_line, first_id, options, pure=False, retries=RETRIES)

    window = _Window(client, submit, jobs, max(2, WINDOW_PER_THREAD * threads(client)),
                     shard_bytes, model)
    reports = []
    try:
        for k, (_, output, options) in enumerate(jobs):
            report = StreamReport()

            def texts(k=k, options=options, report=report) -> Iterator[str]:
                yield from _ordered(window.results(k, options.name), report, options,
                                    progress)
                if report.sentences == 0:   # raised before the output is committed
                    raise FormatError(options.name, 1,
                                      _EMPTY.get(options.input_format, "empty input"))

            write_text(array_framing(texts(), options.output_format), output)
            reports.append(report)
    finally:
        window.cancel()
        model.release()
    return reports


def output_paths(inputs: list[str], output_dir: str) -> list[str]:
    """Where ``--output-dir`` puts each input's output: its file name in the folder
    (created if missing). ArborealError for standard input, two inputs of the same
    name, or an output that would replace its input."""
    names = [os.path.basename(os.path.normpath(p)) for p in inputs]
    if "-" in inputs:
        raise ArborealError("--output-dir needs named input files, not standard input")
    seen: dict[str, str] = {}
    for path, name in zip(inputs, names):
        if name in seen:
            raise ArborealError(f"--output-dir: {seen[name]} and {path} would both be written "
                                f"to {os.path.join(output_dir, name)}")
        seen[name] = path
    os.makedirs(output_dir, exist_ok=True)
    outputs = [os.path.join(output_dir, name) for name in names]
    for path, out in zip(inputs, outputs):
        if os.path.exists(out) and os.path.samefile(path, out):
            raise ArborealError(f"--output-dir: the output {out} would replace its input")
    return outputs


def stream_jobs(inputs: list[str], outputs: list[str], options) -> list:
    """``(source, output, options)`` for :func:`parse_files`, each input named in its
    own options (error messages)."""
    return [(src, out, replace(options, name="<stdin>" if src == "-" else src))
            for src, out in zip(inputs, outputs)]


# ---------------------------------------------------------------- parameter mixing
def parameter_mixing(client, shards: int = 1, mode: str = "uniform"):
    """The ``mixing`` argument of :meth:`arboreal.models.Parser.train` for a Dask
    cluster: the online learner trained by iterative parameter mixing with its shards as
    tasks of ``client``'s cluster (:class:`DaskMixingRunner`); see
    :mod:`arboreal.learn.mixing`."""
    from arboreal.learn.mixing import parameter_mixing as mixing_of

    return mixing_of(client, shards, mode, DaskMixingRunner)


#: times an epoch of parameter mixing that lost data with a dead worker is run again
MIXING_EPOCH_RETRIES = 2


class DaskMixingRunner:
    """The shards as Dask tasks: data scattered once, weights per epoch.

    A worker that dies takes its share of the scattered data with it (data scattered
    from the client cannot be recomputed, and Dask keeps one copy of it). The client
    keeps the weights and averaging sum at the start of each epoch (fetched at the end
    of the previous one, from which it also computes the averaged weights), so an
    epoch that lost data is run again (:data:`MIXING_EPOCH_RETRIES` times at most) after the
    data and those weights are scattered anew: the result is bit for bit that of an
    uninterrupted run, since a shard's epoch depends only on its inputs."""

    def __init__(self, mixing, data, parts: list):
        self.mixing = mixing
        self.data = data
        self.parts = parts
        self.client = client = mixing.client
        check_client(client)
        self.errors = dask_errors
        self.m_host = self.U_host = None
        with dask_errors("scattering the training data", client):
            self._send_data()

    def _send_data(self) -> None:
        client, data = self.client, self.data
        # the feature engine to every worker once; each shard's sentences once
        self.features = client.scatter(data.features, broadcast=True, hash=False)
        # (a list of one item: scatter would send a tuple's items one by one)
        self.shards = [client.scatter([([data.encoded[j] for j in p],
                                        [data.heads[j] for j in p])], hash=False)[0]
                       for p in self.parts]
        # each shard's epochs run where its sentences are (Dask underrates their size
        # and would rather move them to the weights)
        holders = client.who_has(self.shards)
        self.where = [list(holders[f.key]) or None for f in self.shards]

    def _send_weights(self):
        m = self.client.scatter(self.m_host, broadcast=True, hash=False)
        U = self.client.scatter(self.U_host, workers=self.where[0], hash=False)
        return m, U

    def start(self):
        dim = self.data.features.dim
        self.m_host, self.U_host = aligned_zeros(dim), np.zeros(dim, dtype=np.float32)
        with self.errors("starting training", self.client):
            m, U = self._send_weights()
        return m, U, 1.0

    def epoch(self, orders, m, U, c, epoch):
        with self.errors(f"training epoch {epoch}", self.client):
            for attempt in range(MIXING_EPOCH_RETRIES + 1):
                try:
                    return self._epoch(orders, m, U, c, epoch)
                except Exception as exc:
                    if attempt == MIXING_EPOCH_RETRIES or not lost_data(exc, self.client):
                        raise
                # a worker died with data this epoch needs: everything sent again
                self._send_data()
                m, U = self._send_weights()
        raise AssertionError("unreachable")

    def _epoch(self, orders, m, U, c, epoch):
        from distributed import as_completed

        from arboreal.learn.mixing import advance_bar

        client, data, learner = self.client, self.data, self.mixing.learner
        futures = []
        for i, (shard, order) in enumerate(zip(self.shards, orders)):
            futures.append(client.submit(
                _shard_task, learner, self.features, shard, data.structure,
                order, m, U if i == 0 else None, c, epoch,
                workers=self.where[i], allow_other_workers=True, pure=False))
        bar = iter(data.wrap(range(len(data)), epoch))
        for future in as_completed(futures):
            if future.status != "finished":
                # a shard's error, or its cancellation by a lost scheduler, raised now: the
                # tasks below would wait for the client's reconnection attempts to end
                future.result()
            advance_bar(bar, len(orders[futures.index(future)]))
        advance_bar(bar, len(data))
        state = client.submit(_mix_task, futures, m, c, self.mixing.mode, pure=False)
        m_new = client.submit(operator.itemgetter(0), state, pure=False)
        U_new = client.submit(operator.itemgetter(1), state, pure=False)
        updates = client.submit(operator.itemgetter(2), state, pure=False)
        # the client's copies, from which a failed next epoch starts again
        m_host, U_host, updates = client.gather([m_new, U_new, updates])
        del futures, state
        # the mixed weights to every worker now, while they are idle (fetched by the
        # next epoch's shards, they would come from a worker busy with its own shard)
        client.replicate([m_new])
        self.m_host, self.U_host = m_host, U_host
        return m_new, U_new, c + len(data), updates

    def averaged(self, m, U, c, average):
        from arboreal.learn.mixing import averaged_weights

        return averaged_weights(self.m_host, self.U_host, c, average)

    def host(self, m, U):
        return self.m_host, self.U_host

    def load(self, m, U, c):
        self.m_host = aligned_zeros(m.size)
        self.m_host[:] = m
        self.U_host = np.array(U, dtype=np.float32)
        with self.errors("sending the weights", self.client):
            m_f, U_f = self._send_weights()
        return m_f, U_f, c

    def close(self) -> None:
        for f in (self.features, *self.shards):
            f.release()


def _shard_task(learner, features, shard, structure, order, m, u0, c, epoch):
    from arboreal.learn.mixing import run_shard_epoch

    encoded, heads = shard
    return run_shard_epoch(learner, features, encoded, heads, structure,
                           order, m, u0, c, epoch)


def _mix_task(results, m, c, mode):
    from arboreal.learn.mixing import mix

    return mix(results, m, c, mode)
