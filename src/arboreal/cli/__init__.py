"""The ``arboreal`` command: one subcommand per module, a consistent error policy.

Every subcommand module exposes ``add_parser(subparsers)`` (registers its
arguments and sets ``func``). An :class:`~arboreal.errors.ArborealError`
(bad input, bad model) or an OS error on a named file is printed as one line,
``arboreal: error: ...``, with exit status 2 and no traceback.
"""
from __future__ import annotations

import argparse
import atexit
import importlib
import os
import signal
import sys
import threading

from arboreal._atomic import Terminated
from arboreal.errors import ArborealError

#: subcommand modules, in the order ``arboreal --help`` lists them
SUBCOMMANDS = ("train", "parse", "tag", "eval", "show", "serve", "models", "download", "package",
               "shrink", "clusters", "lexicon", "warmup", "stats", "validate", "projectivize")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``arboreal`` argument parser; with ``command`` one of :data:`SUBCOMMANDS`,
    only that subcommand's module is imported (a command starts without importing the
    others' dependencies, e.g. numba for ``parse --scheduler``)."""
    from arboreal import __version__

    parser = argparse.ArgumentParser(
        prog="arboreal",
        description="Discriminative dependency parsing with spanning-tree methods.",
    )
    parser.add_argument("--version", action="version", version=f"arboreal {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in (command,) if command in SUBCOMMANDS else SUBCOMMANDS:
        try:
            module = importlib.import_module(f"arboreal.cli.{name}_cmd")
        except ModuleNotFoundError as exc:  # a subcommand not written yet
            if exc.name == f"arboreal.cli.{name}_cmd":
                continue
            raise
        module.add_parser(sub)
    return parser


def _on_sigterm(signum, frame) -> None:
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    previous = None
    if threading.current_thread() is threading.main_thread():
        # SIGTERM unwinds like Ctrl-C: temporary files are removed, no output half-written
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        # the reader of our output went away (``arboreal ... | head``): not an error;
        # point stdout at /dev/null so the interpreter's final flush stays quiet
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except ArborealError as exc:
        print(f"arboreal: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        name = f"{exc.filename}: " if exc.filename is not None else ""
        print(f"arboreal: error: {name}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print("arboreal: error: out of memory (the input needs more memory than this machine "
              "has; try smaller batches, shorter sentences or a smaller model)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("arboreal: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("arboreal: terminated", file=sys.stderr)
        return 143
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def run() -> None:
    """The ``arboreal`` command (console script and ``python -m arboreal``): :func:`main`,
    then a fast exit.

    Once the command is done (outputs written and closed, atexit handlers run, standard
    streams flushed) the process exits without the interpreter's final teardown of
    every module and object: with numba's compiled code loaded that teardown is a
    sizeable part of a short command's run time.
    """
    status = main()
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:   # the reader went away; nothing left to say
        pass
    os._exit(status)
