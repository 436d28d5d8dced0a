"""``ragsense vera evaluate|enhance``: VERA's three scores, decisions and edits for a file of rows; ``vera
evaluate`` is the short name of ``ragsense evaluate --metrics vera`` with the judge's flags, writing the
same records (each row's ``errors`` list); ``vera enhance`` writes its edits in the same shape."""

from __future__ import annotations

import argparse
from typing import Any

from ragsense.cli._common import model_spec_from_args
from ragsense.cli._numbers import score
from ragsense.cli._run import add_run_options, answer_of, fmt, question_of, row_id, run_command
from ragsense.evaluation import Evaluation
from ragsense.models import shared_pool
from ragsense.rag import answer_function
from ragsense.vera import (
    ADHERENCE_SIGNALS,
    DEFAULT_ADHERENCE_SIGNAL,
    DEFAULT_LABEL_SCORING,
    DEFAULT_STEP_SIGNAL,
    JUDGE_MODES,
    LABEL_SCORINGS,
    PROMPT_FORMATS,
    SPLITTERS,
    STEP_SIGNALS,
    Vera,
    VeraEnhance,
)


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "vera",
        help="VERA: evaluate and enhance contexts and answers with an LLM judge",
        description=(
            "VERA (Birur et al.): judge each context sentence and answer statement, score context "
            "relevance, response relevance and response adherence, and edit contexts and answers."
        ),
    )
    commands = parser.add_subparsers(dest="vera_command", metavar="COMMAND", required=True)
    evaluate = commands.add_parser(
        "evaluate",
        help="add context_relevance, response_relevance, response_adherence and every decision",
        description="Score rows (question, contexts, answer) as given; the output keeps every input field.",
    )
    enhance = commands.add_parser(
        "enhance",
        help="write edited contexts (C') and answers, refusing when no context is relevant",
        description=(
            "Trim each row's contexts to the relevant sentences, stop with a refusal when none is left, "
            "optionally regenerate the answer from the trimmed context (--generator), then keep the "
            "relevant statements and the grounded (or corrected) ones."
        ),
    )
    for command in (evaluate, enhance):
        _add_common(command)
    enhance.add_argument(
        "--generator",
        help="re-answer every question from its edited context with this model (e.g. smollm2-135m)",
    )


def _add_common(parser: argparse.ArgumentParser) -> None:
    add_run_options(parser, output_help="output .jsonl, .csv or .parquet (input fields + VERA fields)")
    group = parser.add_argument_group("judge")
    group.add_argument(
        "--judge-mode",
        choices=JUDGE_MODES,
        default="auto",
        help="labels: score the allowed labels (log-probabilities); structured: chat JSON schema; "
        "auto (default): labels when the model gives log-probabilities",
    )
    group.add_argument(
        "--splitter",
        choices=SPLITTERS,
        default="auto",
        help="atomic statements from the rule-based splitter, the judge, or auto (judge when it can)",
    )
    group.add_argument(
        "--adherence-signal",
        choices=ADHERENCE_SIGNALS,
        default=DEFAULT_ADHERENCE_SIGNAL,
        help="consens (ConSens score of each statement), judge or combined "
        f"(default {DEFAULT_ADHERENCE_SIGNAL})",
    )
    group.add_argument(
        "--signals",
        choices=STEP_SIGNALS,
        default=DEFAULT_STEP_SIGNAL,
        help="how steps 1-3 decide: offline (retrieval-need regression, BM25 + MiniLM sentence ranking, "
        f"likelihood lift per statement) or judge (a capable judge's labels); default {DEFAULT_STEP_SIGNAL}",
    )
    group.add_argument("--consens-model", help="model for the ConSens signal (default: the judge, if it can)")
    group.add_argument(
        "--consens-threshold", type=score, default=0.0, help="ConSens above which a statement is grounded"
    )
    group.add_argument("--calibrate", action="store_true", help="content-free calibration of label scores")
    group.add_argument(
        "--label-scoring",
        choices=LABEL_SCORINGS,
        default=DEFAULT_LABEL_SCORING,
        help="label-scoring judge: a label's score from its tokens' log-probabilities "
        f"(sum, mean, first_token; default {DEFAULT_LABEL_SCORING})",
    )
    group.add_argument(
        "--prompt-format",
        choices=PROMPT_FORMATS,
        default="plain",
        help="label-scoring judge: plain completion prompt, or the model's chat template",
    )
    group.add_argument("--reasons", action="store_true", help="label-scoring judge: also generate reasons")
    group.add_argument("--no-retrieval-check", action="store_true", help="skip step 1")
    group.add_argument("--cache-dir", help="judge cache directory (default: the ragsense cache)")
    group.add_argument("--no-cache", action="store_true", help="do not read or write the judge cache")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    enhance = args.vera_command == "enhance"
    model, options = model_spec_from_args(args)
    settings: dict[str, Any] = {
        "model_options": options,
        "retrieval": not args.no_retrieval_check,
        "judge_mode": args.judge_mode,
        "splitter": args.splitter,
        "adherence_signal": args.adherence_signal,
        "signals": args.signals,
        "consens_model": args.consens_model,
        "consens_threshold": args.consens_threshold,
        "cache": not args.no_cache,
        "cache_dir": args.cache_dir,
        "calibrate": args.calibrate,
        "label_scoring": args.label_scoring,
        "prompt_format": args.prompt_format,
        "reasons": args.reasons,
    }
    metric: Vera
    if enhance:
        generator = getattr(args, "generator", None)
        generate = answer_function(shared_pool().get(generator)) if generator else None
        metric = VeraEnhance(model, generate=generate, **settings)
    else:
        metric = Vera(model, **settings)
    columns: list[tuple[str, int, Any]] = [
        ("id", 14, row_id),
        ("question", 36, question_of),
        ("ctx rel", 7, lambda r: fmt(r.get("context_relevance"))),
        ("resp rel", 8, lambda r: fmt(r.get("response_relevance"))),
        ("adherence", 9, lambda r: fmt(r.get("response_adherence"))),
        (
            "enhanced answer" if enhance else "answer",
            40,
            lambda r: _error_message(r) or (str(r["enhanced_answer"]) if enhance else answer_of(r)),
        ),
    ]

    def judge_line(evaluation: Evaluation) -> list[str]:
        lines = [f"judge: {metric.evaluator.judge.description}" if metric.evaluator else ""]
        ok = [r for r in evaluation.rows if not r["errors"]]
        if enhance and ok:
            lines.append(f"refused {sum(bool(r['refused']) for r in ok)} of {len(ok)} rows")
        return lines

    return run_command(args, f"vera {args.vera_command}", [metric], columns, extra_lines=judge_line)


def _error_message(record: dict[str, Any]) -> str | None:
    errors = record.get("errors")
    return f"error: {errors[0].get('message', '')}" if errors else None
