"""``ragsense serve``: serve a model over an OpenAI-compatible HTTP API (prompt log-probs included)."""

from __future__ import annotations

import argparse
from typing import Any

from ragsense.cli._common import add_model_options, model_spec_from_args
from ragsense.cli._numbers import port

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
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ragsense._access import ApiKeys
    from ragsense.serve import run_server

    # The same model flags as the scoring commands: a backend gets only the options it takes (the
    # fake model has no device), which a hand-made option dict here once got wrong.
    name, options = model_spec_from_args(args)
    keys = ApiKeys.load(args.api_key_file, env=args.api_key_env)
    run_server(name, args.host, args.port, api_keys=keys, insecure=args.insecure, **options)
    return 0
