"""The ``ragsense`` command: thin subcommands that parse arguments and call the library."""

from ragsense.cli._main import build_parser, main

__all__ = ["build_parser", "main"]
