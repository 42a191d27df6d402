"""Ctrl-C while a long compiled call runs, without timing: the signal is raised once
the call's worker thread (``arboreal._interrupt``, named ``arboreal-kernel``) is
running, and the test checks that the KeyboardInterrupt reached the caller while that
thread was still running, i.e. the caller did not wait for the kernel to finish (which
it would if the kernel held the GIL or ran in the caller's thread). No sleep races the
work and no duration is asserted; the deadline only bounds a hang."""
from __future__ import annotations

import signal
import threading
import time

WORKER = "arboreal-kernel"
#: seconds to wait for the worker thread before giving up (a hang, not a timing)
DEADLINE = 600


def kernel_running() -> bool:
    """Whether a worker thread of :func:`arboreal._interrupt.interruptible` runs: it is
    listed from its start until its function has returned. (Not ``is_alive()``: a
    ``join`` interrupted by KeyboardInterrupt can leave a running thread marked as
    stopped, CPython's bpo-45274 handling.)"""
    return any(t.name == WORKER for t in threading.enumerate())


def interrupt_once_a_kernel_runs(done: threading.Event) -> threading.Thread:
    """A started thread that sends SIGINT to the main thread as soon as a kernel's worker
    thread runs, or gives up once ``done`` is set (join it after the call). The signal
    goes to the main thread itself (``pthread_kill``), never to whichever thread a
    process-wide signal would reach."""
    main = threading.main_thread().ident

    def watch() -> None:
        deadline = time.monotonic() + DEADLINE
        while not kernel_running():
            if done.is_set() or time.monotonic() > deadline:
                return                    # the caller's assertion then fails
            time.sleep(0.001)
        signal.pthread_kill(main, signal.SIGINT)

    watcher = threading.Thread(target=watch, name="interrupter", daemon=True)
    watcher.start()
    return watcher


def interrupted_while_running(call) -> bool:
    """Run ``call()`` with a SIGINT raised once its kernel runs; True when the
    KeyboardInterrupt came back while the kernel was still running. AssertionError when
    the call returned instead."""
    done = threading.Event()
    watcher = interrupt_once_a_kernel_runs(done)
    try:
        call()
    except KeyboardInterrupt:
        running = kernel_running()
    else:
        raise AssertionError("the call returned: it was not interrupted")
    finally:
        done.set()
        watcher.join(DEADLINE)
    return running
