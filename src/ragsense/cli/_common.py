"""Options shared by subcommands that use a model."""

from __future__ import annotations

import argparse
from typing import Any

from ragsense.models import DEFAULT_MODEL, LanguageModel, load_model


def add_model_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model")
    group.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help=(
            "model name: smollm2-135m (default), gemma3-270m, transformers:PATH, openai:NAME "
            f"(default: {DEFAULT_MODEL})"
        ),
    )
    group.add_argument("--base-url", help="base URL of an OpenAI-compatible server, for --model openai:NAME")
    group.add_argument(
        "--device", default="auto", help="transformers backend: cpu, cuda, cuda:1, auto (default)"
    )
    group.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads (keep threads x processes at or below the core count)",
    )


def model_from_args(args: argparse.Namespace) -> LanguageModel:
    options: dict[str, Any] = {}
    if args.model.startswith("openai:"):
        if args.base_url:
            options["base_url"] = args.base_url
    elif args.model != "fake":
        options["device"] = args.device
        if args.threads is not None:
            options["threads"] = args.threads
    return load_model(args.model, **options)
