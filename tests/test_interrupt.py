"""Long compiled calls run where Ctrl-C reaches them at once (arboreal._interrupt)."""
from __future__ import annotations

import numpy as np
import pytest
from _kernel_interrupt import interrupted_while_running
from numba import njit

import arboreal._interrupt as interrupt
from arboreal.inference import marginals


@njit(nogil=True)
def _spin(seconds_of_work, out):
    x = 0.0
    for i in range(seconds_of_work):
        x += np.sqrt(i + 1.0)
    out[0] = x
    if seconds_of_work < 0:
        raise ValueError("negative work")
    return x


def test_results_and_errors_come_back_through_the_worker():
    out = np.zeros(1)
    assert interrupt.interruptible(_spin, 1000, out, work=1e12) == out[0] > 0
    with pytest.raises(ValueError, match="negative work"):
        interrupt.interruptible(_spin, -1, out, work=1e12)
    small = interrupt.interruptible(_spin, 1000, out, work=1)      # direct call
    assert small == out[0]


def test_ctrl_c_interrupts_a_long_marginals_call_at_once(ctrl_c):
    # at once: while the kernel still runs, not when it ends (no duration is measured)
    marginals(np.random.default_rng(0).standard_normal((8, 8)))      # compiled first
    scores = np.random.default_rng(0).standard_normal((1601, 1601))
    assert interrupted_while_running(lambda: marginals(scores))


def test_stop_signals_are_deferred_not_lost(ctrl_c):
    """A Ctrl-C that arrives while a process pool forks (Python drops exceptions raised
    in fork handlers) is held back and raised once the block ends."""
    import signal
    import threading

    from arboreal._interrupt import stop_signals_deferred

    reached = []
    with pytest.raises(KeyboardInterrupt):
        with stop_signals_deferred():
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            reached.extend(range(1000))       # bytecode runs: the signal is held back
            reached.append("end of block")
    assert reached[-1] == "end of block"
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())
