"""Long compiled calls that Ctrl-C and SIGTERM interrupt at once.

Python runs signal handlers between bytecodes of the main thread, so a numba kernel
that runs for seconds (the Matrix-Tree marginals or a higher-order dynamic program of
a sentence of thousands of words) delays Ctrl-C and SIGTERM until it returns.
:func:`interruptible` runs such a kernel, compiled with ``nogil=True``, in a worker
thread while the main thread waits in short steps, so the KeyboardInterrupt (or the
command line's :class:`~arboreal._atomic.Terminated`) is raised in the main thread at
once and unwinds as usual (temporary files removed). The abandoned worker finishes
its call in the background and its result is dropped; the ``arboreal`` command exits
right away (``os._exit``), a library caller's process keeps a busy thread until the
call ends. Small calls, and calls from other threads, run directly.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Callable, Iterator

#: work (about n^3 for a sentence of n words) from which a call gets a worker thread
MIN_WORK = 200 ** 3
#: seconds between two checks of the main thread for a pending signal
POLL_SECONDS = 0.05


def interruptible(kernel: Callable[..., Any], *args: Any, work: float) -> Any:
    """``kernel(*args)``, in a worker thread when ``work >= MIN_WORK`` and the caller
    is the main thread (``kernel`` must release the GIL: ``@njit(nogil=True)``).
    Exceptions of the kernel are raised in the caller."""
    if work < MIN_WORK or threading.current_thread() is not threading.main_thread():
        return kernel(*args)
    box: list = []

    def call() -> None:
        try:
            box.append((True, kernel(*args)))
        except BaseException as exc:    # handed to the caller
            box.append((False, exc))

    worker = threading.Thread(target=call, name="arboreal-kernel", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(POLL_SECONDS)
    ok, value = box[0]
    if not ok:
        raise value
    return value


#: the signals that unwind a command (Ctrl-C, termination)
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


@contextlib.contextmanager
def stop_signals_deferred() -> Iterator[None]:
    """Ctrl-C and SIGTERM held back (blocked) in the main thread while the block runs,
    then delivered as usual. For forking a process pool: Python runs fork handlers
    (``os.register_at_fork``, e.g. logging's) whose exceptions are printed and
    dropped, so a KeyboardInterrupt or Terminated raised inside one would be lost and
    the command would carry on. A child forked here starts with the two signals
    blocked and unblocks them itself (:func:`allow_stop_signals`). Elsewhere than the
    main thread it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def allow_stop_signals() -> None:
    """Unblock Ctrl-C and SIGTERM (in a child forked under
    :func:`stop_signals_deferred`, once its handlers are set)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
