"""Entry point and subcommand wiring. Each subcommand lives in its own module with ``add_parser``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Sequence

from ragsense._version import __version__
from ragsense.cli import (
    _bench,
    _calibrate,
    _correctness,
    _evaluate,
    _experiment,
    _grounding,
    _guard,
    _models,
    _report,
    _runs,
    _serve,
    _vera,
)
from ragsense.cli._run import EXIT_USAGE
from ragsense.errors import RagsenseError
from ragsense.evaluation import ResultCountError
from ragsense.tables import echo, terminal_safe

EXIT_INTERNAL = 1
"""A bug, in ragsense or in a plug-in it loaded: the code Python itself exits with on an uncaught error."""
EXIT_INTERRUPTED = 130
"""128 + SIGINT: Ctrl-C."""
EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE: what a Unix tool exits with when its reader went away (``ragsense runs --json | head``)."""

DEBUG_ENV = "RAGSENSE_DEBUG"
"""Set (to anything but empty or ``0``) to print the traceback of an error the command line reports."""

EXIT_CODES: tuple[tuple[type[BaseException], int], ...] = (
    # A metric that returned the wrong number of results broke its contract: a bug (often a
    # plug-in's), not the user's doing, though it is a RagsenseError like everything ragsense raises.
    (ResultCountError, EXIT_INTERNAL),
    # Every error ragsense raises on purpose: bad input or setting, unknown model, missing backend,
    # unreachable server, existing output, unreadable run store. Checked before the builtin bases
    # some of them keep (ValueError, LookupError) for Python callers.
    (RagsenseError, EXIT_USAGE),
    # A path the user gave that is missing, in the way, or not theirs to read or write.
    (FileNotFoundError, EXIT_USAGE),
    (FileExistsError, EXIT_USAGE),
    (IsADirectoryError, EXIT_USAGE),
    (NotADirectoryError, EXIT_USAGE),
    (PermissionError, EXIT_USAGE),
    (KeyboardInterrupt, EXIT_INTERRUPTED),
    (BrokenPipeError, EXIT_BROKEN_PIPE),
)
"""What an exception escaping a subcommand exits with: the first entry the exception is an instance of
wins, and anything else (a plain ValueError or TypeError included) is a bug, :data:`EXIT_INTERNAL`.
The scoring commands' own codes (0, 3, 4) are returned, not raised; argparse exits 2 by itself."""


class _Parser(argparse.ArgumentParser):
    """argparse without prefix matching: ``--metric`` must not be taken silently as ``--metrics``.
    Subcommand parsers are made of the same class, so the rule holds at every level."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ragsense",
        description="Offline, deterministic evaluation of RAG answers: grounding, attribution, correctness.",
    )
    parser.add_argument("--version", action="version", version=f"ragsense {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (
        _evaluate,
        _grounding,
        _vera,
        _correctness,
        _calibrate,
        _runs,
        _report,
        _experiment,
        _bench,
        _models,
        _serve,
        _guard,
    ):
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # the run store keeps the command line
    handler = logging.StreamHandler()
    handler.setFormatter(_EscapingFormatter("%(message)s"))
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, handlers=[handler])
    try:
        code: int = args.run(args)
    except (Exception, KeyboardInterrupt) as exc:  # SystemExit (argparse, UsageExit) passes through
        return report_error(exc)
    return code


class _EscapingFormatter(logging.Formatter):
    """Log lines (a metric's chunk error quotes the row's text) escaped like every other line the
    command line prints (:func:`ragsense.tables.terminal_safe`)."""

    def format(self, record: logging.LogRecord) -> str:
        return terminal_safe(super().format(record), keep_newlines=True)


def exit_code(error: BaseException) -> int:
    """The exit code of an exception that ended a subcommand (:data:`EXIT_CODES`).

    >>> from ragsense.errors import ParameterError
    >>> exit_code(ParameterError("must be positive", parameter="chunk_size"))
    2
    >>> exit_code(ValueError("a bug"))
    1
    """
    for kind, code in EXIT_CODES:
        if isinstance(error, kind):
            return code
    return EXIT_INTERNAL


def report_error(error: BaseException) -> int:
    """Tell the user about ``error`` on stderr in one line (a bug in three) and return its exit code."""
    code = exit_code(error)
    if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        traceback.print_exception(error)
    if code == EXIT_BROKEN_PIPE:
        _silence_stdout()
    elif code == EXIT_INTERRUPTED:
        echo("ragsense: interrupted; finished rows are saved (continue with --resume)")
    elif code == EXIT_INTERNAL:
        # Not "error: <message>" alone: a bug's message reads like advice the user cannot act on.
        echo(
            f"ragsense: internal error: {type(error).__name__}: {error}",
            "ragsense: this is a bug in ragsense or in a plug-in it loaded; please report it with the "
            f"command line (set {DEBUG_ENV}=1 to see the traceback)",
        )
    else:
        # Messages quote the input (a span or trace id, a bands file's field): escaped, never raw.
        echo(f"ragsense: error: {error.for_cli() if isinstance(error, RagsenseError) else error}")
    return code


def _silence_stdout() -> None:
    """The reader of stdout went away: point stdout at /dev/null so the interpreter's final flush does
    not raise again (and print a traceback) on the way out."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file descriptor (a captured stream)
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
