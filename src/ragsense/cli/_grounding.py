"""``ragsense grounding``: ConSens scores for a file of RAG rows (JSONL, JSON or CSV)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from ragsense._async import run_sync
from ragsense.cli._common import add_model_options, model_from_args
from ragsense.cli._table import render_table
from ragsense.consens import DEFAULT_AGGREGATION, Aggregation, GroundingResult, GroundingScorer
from ragsense.data import RagRow, read_rows, sample_rows_path
from ragsense.runner import run_batch

# Verdict bands on the ConSens scale. ConSens is tanh(r/2) with r = ln(P_empty / P_context): 0.5 means
# the context makes the answer's content words about 3x less perplexing, 0 means no effect.
GROUNDED_AT = 0.5
UNGROUNDED_BELOW = 0.0


def verdict(consens: float) -> str:
    """``grounded`` (>= 0.5), ``weak`` (0 to 0.5) or ``ungrounded`` (< 0).

    >>> [verdict(x) for x in (0.9, 0.2, -0.3)]
    ['grounded', 'weak', 'ungrounded']
    """
    if consens >= GROUNDED_AT:
        return "grounded"
    return "weak" if consens >= UNGROUNDED_BELOW else "ungrounded"


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "grounding",
        help="ConSens grounding score of each answer (and, with --attribution, per document)",
        description="Score how much each answer rests on its retrieved context (ConSens).",
    )
    parser.add_argument("input", nargs="?", help="rows as .jsonl, .json or .csv ('-' for JSONL on stdin)")
    parser.add_argument("-o", "--output", help="output JSONL (input fields + scores); required for --resume")
    parser.add_argument("--sample", action="store_true", help="score the bundled sample rows")
    parser.add_argument("--attribution", action="store_true", help="leave-one-document-out attribution")
    parser.add_argument(
        "--aggregation",
        choices=[a.value for a in Aggregation],
        default=DEFAULT_AGGREGATION.value,
        help=(
            f"how word perplexities are averaged (default: {DEFAULT_AGGREGATION.value}; "
            "both are in the output)"
        ),
    )
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run in --output")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    parser.add_argument("--chunk-size", type=int, default=16, help="rows per saved chunk (default 16)")
    parser.add_argument(
        "--table",
        choices=["auto", "always", "never"],
        default="auto",
        help="print a table of the scores (auto: for up to 50 rows)",
    )
    add_model_options(parser)
    parser.set_defaults(run=run)


def _result_fields(result: GroundingResult, model_name: str) -> dict[str, Any]:
    fields = result.to_dict()
    fields["verdict"] = verdict(result.consens)
    fields["model"] = model_name
    if fields["attribution"] is None:
        del fields["attribution"]
        del fields["top_document"]
    return fields


def run(args: argparse.Namespace) -> int:
    if args.sample == bool(args.input):
        raise SystemExit("ragsense grounding: give an input file or --sample (not both)")
    source = sample_rows_path() if args.sample else args.input
    if args.resume and not args.output:
        raise SystemExit("ragsense grounding: --resume needs --output")
    model = model_from_args(args)
    scorer = GroundingScorer(model, aggregation=args.aggregation)

    def process(chunk: list[RagRow]) -> list[dict[str, Any] | Exception]:
        results = run_sync(
            scorer.score([(r.question, r.contexts, r.answer) for r in chunk], attribution=args.attribution)
        )
        return [
            res if isinstance(res, Exception) else _result_fields(res, model.info.name) for res in results
        ]

    with tempfile.TemporaryDirectory() as tmp:
        out_path = Path(args.output) if args.output else Path(tmp) / "out.jsonl"
        summary = run_batch(
            read_rows(source),
            process,
            out_path,
            chunk_size=args.chunk_size,
            resume=args.resume,
            overwrite=args.overwrite,
            desc="grounding",
        )
        records = [r for r in _read_jsonl(out_path)]
    show = args.table == "always" or (args.table == "auto" and len(records) <= 50)
    if show:
        print(_table(records, args.attribution))
    _print_summary(records, summary, args.output)
    return 0 if summary.n_ok or not summary.n_rows else 1


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    import json

    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _table(records: list[dict[str, Any]], attribution: bool) -> str:
    headers = ["id", "question", "answer", "consens", "verdict"] + (["top doc"] if attribution else [])
    widths = [8, 38, 44, 7, 16] + ([7] if attribution else [])
    rows = []
    for rec in records:
        question = str(rec.get("question", rec.get("user_input", "")))
        answer = str(rec.get("answer", rec.get("response", "")))
        if "error" in rec:
            err = rec["error"]
            rows.append(
                [
                    str(rec.get("id", rec["_row"])),
                    question,
                    answer,
                    "-",
                    "error: " + (err.get("field") or "model"),
                ]
                + (["-"] if attribution else [])
            )
            continue
        top = rec.get("top_document")
        rows.append(
            [str(rec.get("id", rec["_row"])), question, answer, f"{rec['consens']:+.2f}", rec["verdict"]]
            + ([str(top) if top is not None else "-"] if attribution else [])
        )
    return render_table(headers, rows, widths)


def _print_summary(records: list[dict[str, Any]], summary: Any, output: str | None) -> None:
    ok = [r for r in records if "error" not in r]
    verdicts = Counter(r["verdict"] for r in ok)
    mean = sum(r["consens"] for r in ok) / len(ok) if ok else float("nan")
    parts = [str(summary)]
    if ok:
        parts.append(
            f"mean ConSens {mean:+.3f}; " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items()))
        )
    if output:
        parts.append(f"written to {output}")
    print("\n" + "\n".join(parts), file=sys.stderr)
    for index, field, message in summary.errors:
        print(f"  row {index}: {field or '-'}: {message}", file=sys.stderr)
