"""The cores this process may run on (its CPU affinity, as a container or ``taskset``
limits it), for the thread counts of numba's kernels and torch."""
from __future__ import annotations

import os


def available_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:            # not on Linux
        return os.cpu_count() or 1
