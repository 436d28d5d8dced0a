"""``ragsense serve``: serve a model over an OpenAI-compatible HTTP API (prompt log-probs included)."""

from __future__ import annotations

import argparse
from typing import Any

from ragsense.cli._common import add_model_options, model_spec_from_args
from ragsense.cli._numbers import port, positive_float, positive_int

DEFAULT_KEY_ENV = "RAGSENSE_SERVE_API_KEYS"


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("serve", help="serve a model over an OpenAI-compatible HTTP API")
    add_model_options(parser)
    net = parser.add_argument_group("network and security")
    net.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    net.add_argument("--port", type=port, default=8000)
    net.add_argument("--api-key-file", help="file of API keys, one a line (stored hashed)")
    net.add_argument(
        "--api-key-env",
        default=DEFAULT_KEY_ENV,
        help=f"environment variable holding comma-separated API keys (default: {DEFAULT_KEY_ENV})",
    )
    net.add_argument("--insecure", action="store_true", help="allow a non-loopback address without API keys")
    limits = parser.add_argument_group("limits (then 408 for a deadline, 413 for a size)")
    for flag, name, kind, default, text in _LIMIT_FLAGS:
        limits.add_argument(
            flag, dest=name, type=kind, default=default, help=f"{text} (default: {default:,})"
        )
    parser.set_defaults(run=run)


# flag, ServeLimits field, type, default (ServeLimits' own), help
_LIMIT_FLAGS: tuple[tuple[str, str, Any, float, str], ...] = (
    ("--header-timeout", "header_timeout_s", positive_float, 10.0, "seconds to send a request's headers"),
    ("--body-timeout", "body_timeout_s", positive_float, 10.0, "seconds to send a request's body"),
    ("--max-connections", "max_connections", positive_int, 256, "connections served at once"),
    ("--max-body-bytes", "max_body_bytes", positive_int, 8 * 1024 * 1024, "bytes of a request's body"),
    ("--max-prompts", "max_prompts", positive_int, 64, "prompts one request may hold"),
    (
        "--max-prompt-chars",
        "max_chars",
        positive_int,
        1_000_000,
        "characters of prompts or messages a request",
    ),
)


def limits_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~ragsense.serve.ServeLimits` the flags describe."""
    from ragsense.serve import ServeLimits

    return ServeLimits(**{name: getattr(args, name) for _, name, _, _, _ in _LIMIT_FLAGS})


def run(args: argparse.Namespace) -> int:
    from ragsense._access import ApiKeys
    from ragsense.serve import run_server

    # The same model flags as the scoring commands: a backend gets only the options it takes (the
    # fake model has no device), which a hand-made option dict here once got wrong.
    name, options = model_spec_from_args(args)
    keys = ApiKeys.load(args.api_key_file, env=args.api_key_env)
    limits = limits_from_args(args)
    run_server(name, args.host, args.port, api_keys=keys, insecure=args.insecure, limits=limits, **options)
    return 0
