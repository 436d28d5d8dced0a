"""``ragsense guard``: the grounding guardrail service (docs/guard.md)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from ragsense.cli._common import add_model_options, model_spec_from_args
from ragsense.cli._numbers import non_negative_float, port, positive_float, positive_int, score
from ragsense.cli._run import EXIT_USAGE
from ragsense.tables import echo

_LIMIT_FLAGS = (
    ("--max-body-bytes", "max_body_bytes", "request body size"),
    ("--max-rows", "max_rows", "rows per request (batch size)"),
    ("--max-documents", "max_documents", "context documents per row"),
    ("--max-question-chars", "max_question_chars", "characters of a question"),
    ("--max-answer-chars", "max_answer_chars", "characters of an answer"),
    ("--max-document-chars", "max_document_chars", "characters of one context document"),
    ("--max-question-tokens", "max_question_tokens", "tokens of a question"),
    ("--max-answer-tokens", "max_answer_tokens", "tokens of an answer"),
    ("--max-context-tokens", "max_context_tokens", "tokens of a row's documents together"),
)


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "guard",
        help="serve ConSens grounding checks over HTTP (POST /v1/check), safely and under load",
        description=(
            "A grounding guardrail service on FastAPI/uvicorn (needs: pip install 'ragsense[guard]')."
        ),
    )
    add_model_options(parser)
    net = parser.add_argument_group("network and security")
    net.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    net.add_argument("--port", type=port, default=8080, help="port (default: 8080)")
    net.add_argument("--api-key-file", help="file of API keys, one a line (stored hashed)")
    net.add_argument(
        "--api-key-env",
        default="RAGSENSE_GUARD_API_KEYS",
        help="environment variable holding comma-separated API keys (default: RAGSENSE_GUARD_API_KEYS)",
    )
    net.add_argument("--insecure", action="store_true", help="allow a non-loopback address without API keys")
    net.add_argument(
        "--per-key-concurrency",
        type=positive_int,
        default=32,
        help="requests in flight per key",
    )
    net.add_argument("--per-key-rate", type=positive_float, default=None, help="requests a second per key")
    net.add_argument(
        "--trace-sink",
        metavar="FILE",
        help="append each trace scored on POST /v1/traces (OTLP) to this JSONL file (docs/traces.md)",
    )
    net.add_argument(
        "--max-export-rows",
        type=positive_int,
        default=None,
        help="RAG traces one OTLP export may have scored; the others are rejected in its answer "
        "(default: 256, or 16 x --queue-rows when smaller)",
    )
    net.add_argument(
        "--trace-wait",
        type=positive_float,
        default=30.0,
        help="seconds spans wait for their trace's root span on POST /v1/traces (then the trace is "
        "read as it is)",
    )
    net.add_argument(
        "--header-timeout",
        type=positive_float,
        default=10.0,
        help="seconds a client may take to send a request's headers (then the connection is closed)",
    )
    net.add_argument(
        "--max-connections",
        type=positive_int,
        default=None,
        help="connections open at once (default: from the file limit); past it a new one closes the "
        "oldest still sending its headers",
    )
    net.add_argument(
        "--docs",
        action="store_true",
        help="serve /docs, /redoc and /openapi.json (their pages load scripts from public CDNs)",
    )
    net.add_argument("--log-content", action="store_true", help="also log questions, contexts, answers")
    net.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    policy = parser.add_argument_group("policy")
    policy.add_argument(
        "--min-consens",
        type=score,
        default=None,
        help="pass threshold (default: the bands' grounded_at, 0.02 with the default bands)",
    )
    policy.add_argument(
        "--bands",
        metavar="FILE",
        help="ConSens verdict bands from `ragsense calibrate` (default: the score's default bands)",
    )
    policy.add_argument(
        "--min-consens-bounds",
        type=score,
        nargs=2,
        metavar=("LOW", "HIGH"),
        help="range a request's min_consens may take (default: from --min-consens to 1)",
    )
    policy.add_argument("--judge", help="VERA judge model: enables adherence on request")
    batching = parser.add_argument_group("batching and limits")
    batching.add_argument("--max-batch-rows", type=positive_int, default=16, help="rows per micro-batch")
    batching.add_argument(
        "--max-batch-tokens",
        type=positive_int,
        default=32_768,
        help="estimated tokens per batch",
    )
    batching.add_argument(
        "--max-wait-ms",
        type=non_negative_float,
        default=10.0,
        help="longest wait for a batch to fill",
    )
    batching.add_argument("--queue-rows", type=positive_int, default=64, help="rows that may wait (then 429)")
    batching.add_argument(
        "--timeout",
        type=positive_float,
        default=30.0,
        help="seconds per request (then 504)",
    )
    batching.add_argument(
        "--body-timeout",
        type=positive_float,
        default=10.0,
        help="seconds to receive a request's body (then 408)",
    )
    batching.add_argument(
        "--hostile-delay",
        type=non_negative_float,
        default=1.0,
        help="seconds before refusing a body with more JSON values than any valid request",
    )
    for flag, _, text in _LIMIT_FLAGS:
        batching.add_argument(flag, type=positive_int, default=None, help=f"limit: {text}")
    parser.set_defaults(run=run)


def build_config(args: argparse.Namespace) -> Any:
    """The :class:`~ragsense.guard.GuardConfig` the flags describe."""
    from ragsense.consens import GROUNDED_AT, Bands
    from ragsense.guard import ApiKeys, GuardConfig, Limits, Policy

    model, options = model_spec_from_args(args)
    keys = ApiKeys.load(args.api_key_file, env=args.api_key_env)
    limits = Limits(
        **{name: getattr(args, name) for _, name, _ in _LIMIT_FLAGS if getattr(args, name) is not None}
    )
    bands = None if args.bands is None else Bands.load(args.bands)
    default_threshold = GROUNDED_AT if bands is None else bands.grounded_at
    min_consens = default_threshold if args.min_consens is None else args.min_consens
    bounds = (
        None if args.min_consens_bounds is None else (args.min_consens_bounds[0], args.min_consens_bounds[1])
    )
    return GuardConfig(
        model=model,
        model_options=options,
        judge=args.judge,
        judge_options={},  # a named judge loads with its defaults, as in `ragsense evaluate --judge`
        bands=bands,
        policy=Policy(min_consens=min_consens, bounds=bounds),
        limits=limits,
        max_batch_rows=args.max_batch_rows,
        max_batch_tokens=args.max_batch_tokens,
        max_wait_ms=args.max_wait_ms,
        max_queue_rows=args.queue_rows,
        timeout_s=args.timeout,
        body_timeout_s=args.body_timeout,
        hostile_delay_s=args.hostile_delay,
        api_keys=keys,
        concurrency_per_key=args.per_key_concurrency,
        rate_per_key=args.per_key_rate,
        log_content=args.log_content,
        docs=args.docs,
        trace_sink=args.trace_sink,
        max_export_rows=args.max_export_rows,
        trace_wait_s=args.trace_wait,
        header_timeout_s=args.header_timeout,
        max_connections=args.max_connections,
    )


def run(args: argparse.Namespace) -> int:
    from ragsense.guard import INSTALL_HINT

    try:
        from ragsense.guard import serve
    except ImportError as exc:  # the extra is missing; the message names what to install
        message = str(exc) if INSTALL_HINT in str(exc) else f"{exc} ({INSTALL_HINT})"
        echo(f"ragsense: error: {message}")
        return EXIT_USAGE
    level = getattr(logging, args.log_level.upper())
    logging.getLogger("ragsense.guard").setLevel(level)
    config = build_config(args)
    print(
        f"ragsense guard: {config.model} on http://{args.host}:{args.port} "
        f"({'API keys: ' + str(len(config.api_keys.ids)) if config.api_keys else 'no API keys'})",
        file=sys.stderr,
    )
    serve(config, host=args.host, port=args.port, insecure=args.insecure, log_level=args.log_level)
    return 0
