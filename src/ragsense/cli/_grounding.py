"""``ragsense grounding``: ConSens scores for a file of RAG rows; the short name of ``ragsense evaluate
--metrics consens`` (or ``attribution``), writing the same records (each row's ``errors`` list)."""

from __future__ import annotations

import argparse
from typing import Any

from ragsense.cli._common import add_consens_options, model_spec_from_args
from ragsense.cli._run import (
    add_run_options,
    answer_of,
    error_text,
    question_of,
    row_id,
    run_command,
    score_cell,
    top_document_cell,
    weakest_cell,
)
from ragsense.consens import ConSens


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "grounding",
        help="ConSens grounding score of each answer (and, with --attribution, per document)",
        description="Score how much each answer rests on its retrieved context (ConSens).",
    )
    add_run_options(parser, output_help="output .jsonl, .csv or .parquet (input fields + scores)")
    parser.add_argument("--attribution", action="store_true", help="leave-one-document-out attribution")
    add_consens_options(parser, "how word perplexities are averaged (every aggregation is in the output)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    model, options = model_spec_from_args(args)
    metric = ConSens(
        model,
        attribution=args.attribution,
        aggregation=args.aggregation,
        model_options=options,
        bands=args.bands,
        context_budget=args.context_budget,
        binding=args.binding,
    )
    columns: list[tuple[str, int, Any]] = [
        ("id", 14, row_id),
        ("question", 38, question_of),
        ("answer", 44, answer_of),
        ("consens", 7, score_cell("consens", metric.bands)),
        ("verdict", 16, lambda r: error_text(r) or r["verdict"]),
        ("why", 30, weakest_cell),
    ]
    if args.attribution:
        columns.append(("top doc", 10, top_document_cell))
    return run_command(args, "grounding", [metric], columns)
