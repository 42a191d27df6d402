"""The ``arboreal`` command: one subcommand per module, a consistent error policy.

Every subcommand module exposes ``add_parser(subparsers)`` (registers its
arguments and sets ``func``). An :class:`~arboreal.errors.ArborealError`
(bad input, bad model) or an OS error on a named file is printed as one line,
``arboreal: error: ...``, with exit status 2 and no traceback; so is a usage error
(``arboreal: error: argument --order: invalid choice: ...; see 'arboreal train --help'``).
Options may come before, between or after a command's positional arguments. Every
command takes ``--quiet`` and ``--verbose`` (see :mod:`arboreal.cli._logging`). A closed
output pipe (``arboreal parse ... | head``) ends the command as it ends other Unix
tools: silently, exit status 141 (128 + SIGPIPE).
"""
from __future__ import annotations

import argparse
import atexit
import importlib
import logging
import os
import signal
import sys
import threading

from arboreal._atomic import Terminated
from arboreal.cli import _logging
from arboreal.errors import ArborealError

_log = logging.getLogger(__name__)

#: subcommand modules, in the order ``arboreal --help`` lists them
SUBCOMMANDS = ("train", "parse", "tag", "eval", "show", "serve", "models", "download", "package",
               "shrink", "clusters", "lexicon", "embeddings", "warmup", "stats", "validate",
               "projectivize")


#: exit status of a command whose output pipe was closed: what a shell reports for a
#: process ended by SIGPIPE (128 + 13)
EXIT_CLOSED_PIPE = 141


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose usage errors are one line, ``arboreal: error: PROBLEM;
    see 'arboreal COMMAND --help'``, exit status 2 (not the whole usage block)."""

    def error(self, message: str):
        self.exit(2, f"arboreal: error: {message}; see '{self.prog} --help'\n")


def _add_message_options(p: argparse.ArgumentParser) -> None:
    """--quiet and --verbose, for a command that does not define its own --quiet."""
    try:
        p.add_argument("--quiet", action="store_true",
                       help="no progress or information on stderr (warnings and errors only)")
    except argparse.ArgumentError:   # the command's own --quiet says more
        pass
    p.add_argument("--verbose", action="store_true",
                   help="more detail on stderr (e.g. what kind of input was recognised)")


def build_parser(command: str | None = None) -> ArgumentParser:
    """The ``arboreal`` argument parser; with ``command`` one of :data:`SUBCOMMANDS`,
    only that subcommand's module is imported (a command starts without importing the
    others' dependencies, e.g. numba for ``parse --scheduler``). Its ``commands``
    attribute maps each command's name to its own parser."""
    from arboreal import __version__

    parser = ArgumentParser(
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
    for p in sub.choices.values():
        _add_message_options(p)
    parser.commands = dict(sub.choices)
    return parser


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    """The parsed command line: a command's options may come before, between or after
    its positional arguments (``arboreal parse M --input text news.txt``). Usage
    errors exit (status 2) with one line."""
    parser = build_parser(argv[0] if argv else None)
    command = parser.commands.get(argv[0]) if argv else None
    if command is None:   # no command, --help, --version, or an unknown command
        return parser.parse_args(argv)
    args = command.parse_intermixed_args(argv[1:])
    args.command = argv[0]
    if args.quiet and args.verbose:
        command.error("--quiet and --verbose exclude each other")
    return args


def _on_sigterm(signum, frame) -> None:
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_arguments(argv)
    if not getattr(args, "func", None):
        build_parser().print_help(sys.stderr)
        return 2
    _logging.configure(quiet=args.quiet, verbose=args.verbose)
    previous = None
    if threading.current_thread() is threading.main_thread():
        # SIGTERM unwinds like Ctrl-C: temporary files are removed, no output half-written
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        # the reader of our output went away (``arboreal ... | head``): end as a Unix
        # tool does, silently with 141; stdout points at /dev/null so that the
        # interpreter's final flush of what is left stays quiet
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_CLOSED_PIPE
    except ArborealError as exc:
        # the message as text: a log record that held the exception would keep its
        # traceback's frames (the model, the input file) alive in any handler that
        # keeps records (pytest's, a memory handler)
        _log.error("%s", str(exc))
        return 2
    except OSError as exc:
        name = f"{exc.filename}: " if exc.filename is not None else ""
        _log.error("%s%s", name, exc.strerror or str(exc))
        return 2
    except MemoryError:
        _log.error("out of memory (the input needs more memory than this machine has; try "
                   "smaller batches, shorter sentences or a smaller model)")
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
