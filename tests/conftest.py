"""Fixtures shared by several test modules."""
from __future__ import annotations

import signal

import pytest


@pytest.fixture
def ctrl_c():
    """SIGINT raises KeyboardInterrupt during the test, as in an interactive Python,
    even when the test process was started with SIGINT ignored (a command run in the
    background of a non-interactive shell inherits that)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
