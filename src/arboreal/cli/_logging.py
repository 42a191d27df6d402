"""How the command line shows the package's messages: the ``arboreal`` logger (every
module logs to ``arboreal.<module>``) and, for ``arboreal serve``, waitress's logger
write to standard error, one line each.

Progress and information (INFO) are written as they are; warnings and errors are
prefixed ``arboreal: warning:`` / ``arboreal: error:`` (``waitress: ...`` for
waitress's). ``--quiet`` shows warnings and errors only, ``--verbose`` debugging
details too.
"""
from __future__ import annotations

import logging
import sys

#: the package's logger; modules log to its children (``logging.getLogger(__name__)``)
PACKAGE_LOGGER = "arboreal"


class _StderrHandler(logging.StreamHandler):
    """A handler writing to whatever ``sys.stderr`` is when a record is emitted (a
    command run in-process, e.g. under pytest's capture, sees its own stderr)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:   # StreamHandler.__init__ sets it
        pass


class _Formatter(logging.Formatter):
    """INFO and DEBUG as they are; ``NAME: level: message`` for warnings and errors,
    NAME the logger's top-level package (arboreal, waitress)."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if record.levelno < logging.WARNING:
            return text
        return f"{record.name.partition('.')[0]}: {record.levelname.lower()}: {text}"


def _handler_of(logger: logging.Logger) -> logging.Handler:
    for handler in logger.handlers:
        if isinstance(handler, _StderrHandler):
            return handler
    handler = _StderrHandler()
    handler.setFormatter(_Formatter())
    logger.addHandler(handler)
    return handler


def configure(quiet: bool = False, verbose: bool = False) -> None:
    """Send the ``arboreal`` logger's records to standard error, at level WARNING
    (``quiet``), DEBUG (``verbose``) or INFO. Idempotent."""
    logger = logging.getLogger(PACKAGE_LOGGER)
    _handler_of(logger)
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)
    logger.propagate = False


def configure_waitress(verbose: bool = False) -> None:
    """waitress's warnings and errors on standard error, but not its "Task queue depth
    is N" lines (a busy server, not a fault; shown with ``verbose``)."""
    logger = logging.getLogger("waitress")
    _handler_of(logger)
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING)
    logger.propagate = False
    logging.getLogger("waitress.queue").setLevel(logging.NOTSET if verbose else logging.ERROR)


def is_terminal(stream=None) -> bool:
    """Whether ``stream`` (default: standard error) is a terminal: progress bars
    redraw themselves there; elsewhere (a file, a pipe) messages are whole lines."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):   # no isatty, or closed
        return False
