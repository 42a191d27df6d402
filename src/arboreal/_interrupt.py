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

import threading
from typing import Any, Callable

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
