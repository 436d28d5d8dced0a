"""``ragsense serve``: serve a model over an OpenAI-compatible HTTP API (prompt log-probs included)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("serve", help="serve a model over an OpenAI-compatible HTTP API")
    parser.add_argument("--model", default="smollm2-135m", help="model name (default: smollm2-135m)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=None)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ragsense.serve import run_server

    options: dict[str, Any] = {"device": args.device}
    if args.threads is not None:
        options["threads"] = args.threads
    run_server(args.model, args.host, args.port, **options)
    return 0
