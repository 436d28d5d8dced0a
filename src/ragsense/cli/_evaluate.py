"""``ragsense evaluate``: the chosen metrics over every row in one pass (the spine's command)."""

from __future__ import annotations

import argparse
from typing import Any

from ragsense.cli._common import model_spec_from_args
from ragsense.cli._run import Columns, add_run_options, error_text, fmt, question_of, row_id, run_command
from ragsense.consens import DEFAULT_AGGREGATION, Aggregation
from ragsense.evaluation import DEFAULT_METRICS, Metric, available_metrics, create_metric, resolve_metrics


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "evaluate",
        help="run several metrics (consens, attribution, vera, correctness, similarity) in one pass",
        description=(
            "Score every row with each chosen metric. The output keeps every input field and adds each "
            "metric's fields (docs/metrics.md) and an 'errors' list; a row one metric cannot score is "
            "still scored by the others. Exit codes: 0 every row scored, 3 some rows have errors, "
            "2 usage or setup error."
        ),
    )
    add_run_options(parser, output_help="output .jsonl, .csv or .parquet ('-' for JSONL on stdout)")
    parser.add_argument(
        "--metrics",
        default=",".join(DEFAULT_METRICS),
        help=(
            "comma-separated metric names (default: consens); registered: "
            + ", ".join(sorted(available_metrics()))
        ),
    )
    group = parser.add_argument_group("metric options")
    group.add_argument(
        "--aggregation",
        choices=[a.value for a in Aggregation],
        default=DEFAULT_AGGREGATION.value,
        help=f"ConSens: how word perplexities are averaged (default {DEFAULT_AGGREGATION.value})",
    )
    group.add_argument("--estimator", help="correctness: the estimator file (ragsense correctness train)")
    group.add_argument("--judge", help="vera: judge model (default: --model)")
    group.add_argument(
        "--no-judge-cache", action="store_true", help="vera: do not read or write the judge cache"
    )
    group.add_argument(
        "--similarity-mode",
        choices=["whole", "max_chunk"],
        default="whole",
        help="similarity: context windows",
    )
    parser.set_defaults(run=run)


def metrics_from_args(args: argparse.Namespace) -> list[Metric]:
    """Each named metric with the options the flags give it."""
    model, options = model_spec_from_args(args)
    names = [m.strip() for m in args.metrics.split(",") if m.strip()]
    per_metric: dict[str, dict[str, Any]] = {
        "consens": {"model": model, "model_options": options, "aggregation": args.aggregation},
        "attribution": {"model": model, "model_options": options, "aggregation": args.aggregation},
        "vera": {
            "judge": args.judge or model,
            "model_options": {} if args.judge else options,
            "cache": not args.no_judge_cache,
        },
        "correctness": {"estimator": args.estimator, "model_options": options},
        "similarity": {"mode": args.similarity_mode},
    }
    if "attribution" in names and "consens" in names:  # attribution is ConSens with leave-one-out
        names.remove("consens")
    plain = {"model": model, "model_options": options}
    return resolve_metrics([create_metric(n, **per_metric.get(n, plain)) for n in names])


def _columns(metrics: list[Metric]) -> Columns:
    columns: list[tuple[str, int, Any]] = [
        ("id", 8, row_id),
        ("question", 30, question_of),
    ]
    for metric in metrics:
        for key in metric.scores:
            header = key.replace("_", " ")
            # ConSens and similarity range over [-1, 1] (signed); VERA's shares over [0, 1].
            signed = metric.name in ("consens", "similarity")
            columns.append(
                (header, max(9, len(header)), lambda r, k=key, sg=signed: fmt(r.get(k), signed=sg))
            )
        if metric.verdict is not None:
            columns.append((metric.verdict, 10, lambda r, k=metric.verdict: fmt(r.get(k))))
    columns.append(("errors", 18, lambda r: error_text(r) or ""))
    return columns


def run(args: argparse.Namespace) -> int:
    metrics = metrics_from_args(args)
    return run_command(args, "evaluate", metrics, _columns(metrics))
