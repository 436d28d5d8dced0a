"""``ragsense vera evaluate|enhance``: VERA's three scores, decisions and edits for a file of rows."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from ragsense._async import run_sync
from ragsense.cli._common import add_model_options, model_from_args
from ragsense.cli._table import render_table
from ragsense.data import RagRow, read_rows, sample_rows_path
from ragsense.errors import ParameterError
from ragsense.models import load_model
from ragsense.runner import run_batch
from ragsense.vera import ADHERENCE_SIGNALS, JUDGE_MODES, SPLITTERS, AnswerFn, Vera


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
    parser.set_defaults(run=lambda args: parser.print_help() or 2)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", nargs="?", help="rows as .jsonl, .json or .csv ('-' for JSONL on stdin)")
    parser.add_argument("-o", "--output", help="output JSONL (input fields + VERA fields)")
    parser.add_argument("--sample", action="store_true", help="use the bundled sample rows")
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
        default="judge",
        help="judge, consens (ConSens score of each statement) or combined",
    )
    group.add_argument("--consens-model", help="model for the ConSens signal (default: the judge, if it can)")
    group.add_argument(
        "--consens-threshold", type=float, default=0.0, help="ConSens above which a statement is grounded"
    )
    group.add_argument("--calibrate", action="store_true", help="content-free calibration of label scores")
    group.add_argument("--reasons", action="store_true", help="label-scoring judge: also generate reasons")
    group.add_argument("--no-retrieval-check", action="store_true", help="skip step 1")
    group.add_argument("--cache-dir", help="judge cache directory (default: the ragsense cache)")
    group.add_argument("--no-cache", action="store_true", help="do not read or write the judge cache")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run in --output")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    parser.add_argument("--chunk-size", type=int, default=8, help="rows per batched, saved chunk (default 8)")
    parser.add_argument(
        "--table",
        choices=["auto", "always", "never"],
        default="auto",
        help="print a table (auto: up to 50 rows)",
    )
    add_model_options(parser)
    parser.set_defaults(run=run)


def vera_from_args(args: argparse.Namespace) -> Vera:
    """The :class:`Vera` configured by the judge options (the judge model is ``--model``)."""
    return Vera(
        model_from_args(args),
        judge_mode=args.judge_mode,
        splitter=args.splitter,
        adherence_signal=args.adherence_signal,
        consens_model=args.consens_model,
        consens_threshold=args.consens_threshold,
        check_retrieval=not args.no_retrieval_check,
        cache=not args.no_cache,
        cache_dir=args.cache_dir,
        calibrate=args.calibrate,
        reasons=args.reasons,
    )


def answer_fn(model_name: str, **options: Any) -> AnswerFn:
    """Answers from documents with ragsense's RAG prompt and ``model_name`` (chat format when it has one)."""
    from ragsense.rag import answer_function

    return answer_function(load_model(model_name, **options))


def run(args: argparse.Namespace) -> int:
    name = f"ragsense vera {args.vera_command}"
    if args.sample == bool(args.input):
        raise SystemExit(f"{name}: give an input file or --sample (not both)")
    if args.resume and not args.output:
        raise SystemExit(f"{name}: --resume needs --output")
    if args.chunk_size < 1:
        raise ParameterError("must be at least 1", parameter="--chunk-size")
    source = sample_rows_path() if args.sample else args.input
    vera = vera_from_args(args)
    enhance = args.vera_command == "enhance"
    generate = answer_fn(args.generator) if enhance and getattr(args, "generator", None) else None

    def process(chunk: list[RagRow]) -> list[dict[str, Any] | Exception]:
        if enhance:
            results: list[Any] = run_sync(vera.enhance(chunk, generate))
        else:
            results = run_sync(vera.evaluate(chunk))
        return [r if isinstance(r, Exception) else r.to_record() for r in results]

    with tempfile.TemporaryDirectory() as tmp:
        out_path = Path(args.output) if args.output else Path(tmp) / "out.jsonl"
        summary = run_batch(
            read_rows(source, require_answer=not (enhance and generate is not None)),
            process,
            out_path,
            chunk_size=args.chunk_size,
            resume=args.resume,
            overwrite=args.overwrite,
            desc=f"vera {args.vera_command}",
        )
        records = [
            json.loads(line) for line in out_path.read_text(encoding="utf-8").splitlines() if line.strip()
        ]
    if args.table == "always" or (args.table == "auto" and len(records) <= 50):
        print(_table(records, enhance))
    ok = [r for r in records if "error" not in r]
    lines = [str(summary), f"judge: {vera.judge.description}"]
    for key in ("context_relevance", "response_relevance", "response_adherence"):
        values = [r[key] for r in ok if r.get(key) is not None]
        if values:
            lines.append(f"mean {key} {sum(values) / len(values):.3f} over {len(values)} rows")
    if enhance and ok:
        lines.append(f"refused {sum(bool(r['refused']) for r in ok)} of {len(ok)} rows")
    if args.output:
        lines.append(f"written to {args.output}")
    print("\n" + "\n".join(lines), file=sys.stderr)
    for index, field, message in summary.errors:
        print(f"  row {index}: {field or '-'}: {message}", file=sys.stderr)
    return 0 if summary.n_ok or not summary.n_rows else 1


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"


def _table(records: list[dict[str, Any]], enhance: bool) -> str:
    headers = ["id", "question", "ctx rel", "resp rel", "adherence"] + (
        ["enhanced answer"] if enhance else ["answer"]
    )
    widths = [8, 36, 7, 8, 9, 40]
    rows = []
    for rec in records:
        question = str(rec.get("question", rec.get("user_input", "")))
        if "error" in rec:
            err = rec["error"]
            rows.append(
                [str(rec.get("id", rec["_row"])), question, "-", "-", "-", f"error: {err.get('message', '')}"]
            )
            continue
        answer = rec["enhanced_answer"] if enhance else str(rec.get("answer", rec.get("response", "")))
        rows.append(
            [
                str(rec.get("id", rec["_row"])),
                question,
                _fmt(rec["context_relevance"]),
                _fmt(rec["response_relevance"]),
                _fmt(rec["response_adherence"]),
                answer,
            ]
        )
    return render_table(headers, rows, widths)
