"""Entry point and subcommand wiring. Each subcommand lives in its own module with ``add_parser``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
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
from ragsense.errors import OutputExistsError, RagsenseError
from ragsense.runs import RunNotFoundError, StoreVersionError

EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE: what a Unix tool exits with when its reader went away (``ragsense runs --json | head``)."""


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
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    try:
        code: int = args.run(args)
    except OutputExistsError as exc:  # the flags, not the Python keywords
        print(f"ragsense: error: {exc.for_cli()}", file=sys.stderr)
        return EXIT_USAGE
    except (RagsenseError, FileNotFoundError, FileExistsError, RunNotFoundError, StoreVersionError) as exc:
        print(f"ragsense: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as exc:  # a resume that does not match its output file, a bad parameter value
        print(f"ragsense: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("ragsense: interrupted; finished rows are saved (continue with --resume)", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
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
