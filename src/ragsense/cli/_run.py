"""What every scoring command shares: the run flags, one call into the spine, the table, the summary
and the exit code. ``evaluate``, ``grounding``, ``vera evaluate|enhance`` and ``correctness
features|predict`` all go through :func:`run_command`, so ``-o``, ``--resume``, ``--overwrite``,
``--chunk-size``, ``--table``, the exit codes and the output records mean the same everywhere: each
row's input fields, each metric's fields, an ``errors`` list and ``_row`` (``ragsense grounding`` writes
what ``ragsense evaluate --metrics consens`` writes).

Every run is recorded in the run store (``--store``, ``RAGSENSE_STORE``, or the user data directory;
``--no-store`` skips it) and can be gated (``--fail-under``, ``--max-share``, ``--junit``).

Exit codes: 0 every row scored and every gate passed; 3 the run finished but some rows have errors
(listed in the output's ``errors`` and in the summary); 4 a gate failed (after every result was
written; it wins over 3); 2 a usage or setup error (bad flag, missing file, unknown model, existing
output, a gate on a score no chosen metric has); 130 interrupted (finished chunks are saved: continue
with ``--resume``; the stored run is marked incomplete).
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragsense.cli._common import add_model_options
from ragsense.cli._numbers import positive_int
from ragsense.consens import Bands, binding_reasons, score_text, weakest_words
from ragsense.data import LABEL_FIELDS, SUFFIXES, label_field, read_rows, sample_rows_path, shown_label
from ragsense.evaluation import (
    DEFAULT_CHUNK_SIZE,
    EngineSpec,
    Evaluation,
    FinalFile,
    Metric,
    check_free,
    evaluate,
)
from ragsense.runs import (
    EXIT_GATE_FAILED,
    Gate,
    GateSpecError,
    RunStore,
    check_gate_names,
    check_gates,
    parse_gates,
    write_junit,
)
from ragsense.tables import echo, render_table

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_ROW_ERRORS = 3
TABLE_AUTO_ROWS = 50


class UsageExit(SystemExit):
    """A usage error found before anything runs (a bad flag combination, a bad gate): the message goes
    to stderr and the process exits 2, the usage code the exit codes promise. A plain
    ``SystemExit("message")`` would exit 1, the code of a crash.

    ``str()`` of the exception is the message, so callers (and tests) can still read it.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        echo(message)
        self.code = EXIT_USAGE


Columns = Sequence[tuple[str, int, Callable[[dict[str, Any]], str]]]
"""A table: (header, width, cell from an output row) per column."""


def add_run_options(parser: argparse.ArgumentParser, *, output_help: str, sample: bool = True) -> None:
    """Input, output and run flags, the same on every scoring command."""
    parser.add_argument(
        "input", nargs="?", help="rows as .jsonl, .json, .csv or .parquet ('-' for JSONL on stdin)"
    )
    parser.add_argument("-o", "--output", help=output_help)
    if sample:
        parser.add_argument("--sample", action="store_true", help="use the bundled sample rows")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run in --output")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    parser.add_argument(
        "--allow-empty",
        action="store_true",
        help="accept an input file with no rows (else: a warning and exit 2, nothing recorded)",
    )
    parser.add_argument(
        "--chunk-size",
        type=positive_int,
        default=DEFAULT_CHUNK_SIZE,
        help=f"rows per batched, saved chunk (default {DEFAULT_CHUNK_SIZE})",
    )
    parser.add_argument(
        "--table",
        choices=["auto", "always", "never"],
        default="auto",
        help=f"print a table of the results (auto: up to {TABLE_AUTO_ROWS} rows, not with -o -)",
    )
    add_model_options(parser)
    store = parser.add_argument_group("run store and CI gates")
    store.add_argument(
        "--store", help="run store file (default: $RAGSENSE_STORE or runs.sqlite in the user data directory)"
    )
    store.add_argument("--no-store", action="store_true", help="do not record this run in the run store")
    store.add_argument("--tag", help="name the run (e.g. the version of the system under test)")
    store.add_argument(
        "--fail-under",
        metavar="SCORE=MIN,...",
        help="gate: exit 4 when a score's mean is below MIN (e.g. response_adherence=0.8); a mean can pass "
        "with many ungrounded rows: prefer --max-share",
    )
    store.add_argument(
        "--max-share",
        metavar="VERDICT=MAX,...",
        help="gate (recommended): exit 4 when more than MAX of the rows have VERDICT (e.g. ungrounded=0.05; "
        "errors=0); the share is printed with its 95%% Wilson interval",
    )
    store.add_argument(
        "--junit", metavar="PATH", help="write the gates (and with --junit-rows each row) as JUnit XML"
    )
    store.add_argument("--junit-rows", action="store_true", help="with --junit: also one test case per row")
    store.add_argument(
        "--gate-refusals",
        action="store_true",
        help="hold refusals to --fail-under too (its mean and each --junit-rows row); by default a "
        "refusal counts in --max-share only (docs/metrics.md, Refusals)",
    )


def store_of(args: argparse.Namespace) -> RunStore | None:
    """The run store the flags name, or None with ``--no-store``."""
    if getattr(args, "no_store", False):
        if getattr(args, "store", None):
            raise UsageExit("ragsense: give --store or --no-store, not both")
        return None
    return RunStore(args.store) if getattr(args, "store", None) else RunStore()


def gates_of(args: argparse.Namespace, metrics: Sequence[Metric]) -> list[Gate]:
    """The gates of the flags, checked against the chosen metrics before anything runs."""
    try:
        gates = parse_gates(getattr(args, "fail_under", None), getattr(args, "max_share", None))
        scores = [s for m in metrics for s in m.scores]
        values = [str(v) for m in metrics for v in getattr(m, "verdict_values", ())]
        check_gate_names(gates, scores, values)
    except GateSpecError as exc:
        raise UsageExit(f"ragsense: {exc}") from None
    if getattr(args, "junit_rows", False) and not getattr(args, "junit", None):
        raise UsageExit("ragsense: --junit-rows needs --junit PATH")
    return gates


def source_of(args: argparse.Namespace, command: str) -> Any:
    """The input path, or the bundled sample; a usage error for neither or both."""
    has_sample = bool(getattr(args, "sample", False))
    if has_sample == bool(args.input):
        raise UsageExit(f"ragsense {command}: give an input file or --sample (not both)")
    if args.resume and not args.output:
        raise UsageExit(f"ragsense {command}: --resume needs --output")
    if args.chunk_size < 1:
        raise UsageExit(f"ragsense {command}: --chunk-size must be at least 1")
    return sample_rows_path() if has_sample else args.input


def check_not_empty(path: str, command: str, *, allow: bool) -> None:
    """Refuse an input file with no rows (exit 2) unless ``allow``: an empty table, exit 0 and a recorded
    run read as "all passed" when the file was only never filled. Standard input is not read ahead."""
    if allow or not Path(path).is_file() or Path(path).suffix.lower() not in SUFFIXES:
        return  # stdin, a missing file, a folder or an odd suffix: the reader's case, with its own message
    if next(iter(read_rows(path, require_answer=False)), None) is None:
        raise UsageExit(
            f"ragsense {command}: warning: {path} has no rows; nothing was scored or recorded "
            "(pass --allow-empty to accept an empty input)"
        )


def row_id(record: dict[str, Any]) -> str:
    return str(record.get("id", record.get("_row", "")))


def question_of(record: dict[str, Any]) -> str:
    return str(record.get("question", record.get("user_input", "")))


def answer_of(record: dict[str, Any]) -> str:
    return str(record.get("answer", record.get("response", "")))


def error_text(record: dict[str, Any]) -> str | None:
    """``error: FIELD`` for a row with errors, else None."""
    errors = record.get("errors")
    if not errors:
        return None
    first = errors[0]
    return "error: " + str(first.get("field") or first.get("metric") or "model")


def bands_of(metrics: Sequence[Metric]) -> Bands | None:
    """The verdict bands of the run's ConSens metric, if it has one: how its scores are shown."""
    return next((b for m in metrics if isinstance(b := getattr(m, "bands", None), Bands)), None)


def score_cell(key: str, bands: Bands | None) -> Callable[[dict[str, Any]], str]:
    """A ConSens score cell: :func:`ragsense.consens.score_text`, with the digits an edge needs."""

    def cell(record: dict[str, Any]) -> str:
        value = record.get(key)
        return score_text(value, bands) if isinstance(value, float) else fmt(value, signed=True)

    return cell


def fmt(value: Any, signed: bool = False) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:+.2f}" if signed else f"{value:.2f}"
    return str(value)


WEAKEST_SHOWN = 3
LABEL = "label"
"""The header of the column of the user's own label; shown as the field it came from (``label`` or
``expected``), only when some row has one."""


def weakest_cell(record: dict[str, Any]) -> str:
    """Why a row is not grounded: the binding check's strongest finding (a stated word bound where
    the context prefers another), then the answer words the context does not state among its weakest
    (:func:`weakest_words`' order, the one of the guard, the pytest plug-in and the report); nothing
    when the context states them all and nothing is misbound."""
    reasons = binding_reasons(record)[:1]
    words = record.get("words")
    if isinstance(words, list) and words:
        unstated = [w["word"] for w in weakest_words(words, WEAKEST_SHOWN) if not w["stated"]]
        if unstated:
            reasons.append(", ".join(unstated))
    return "; ".join(reasons)


def top_document_cell(record: dict[str, Any]) -> str:
    """``[k] -0.31``: the top document's index and how much the score drops without it."""
    top = record.get("top_document")
    if not isinstance(top, int):
        return "-"
    drops = [d.get("drop") for d in record.get("attribution") or [] if d.get("index") == top]
    return f"[{top}] {drops[0]:+.2f}" if drops and isinstance(drops[0], float) else f"[{top}]"


def label_cell(record: dict[str, Any]) -> str:
    """The row's own label read as a verdict (``1`` is ``grounded``), or as written when unreadable."""
    return shown_label(record) or ""


def render(records: Sequence[dict[str, Any]], columns: Columns) -> str:
    # Optional columns: the user's label only when some row has one (under its field's name), errors
    # only when some row has them, so a clean run's table keeps its width for the evidence.
    fields = [f for f in LABEL_FIELDS if any(label_field(r) == f for r in records)]
    shown = []
    for header, width, cell in columns:
        if header == LABEL:
            if not fields:
                continue
            header = "/".join(fields)
        if header == "errors" and not any(error_text(r) for r in records):
            continue
        shown.append((header, width, cell))
    rows = [[cell(r) for _, _, cell in shown] for r in records]
    return render_table([h for h, _, _ in shown], rows, [w for _, w, _ in shown])


def run_command(
    args: argparse.Namespace,
    command: str,
    metrics: Sequence[Metric],
    columns: Columns,
    *,
    stdout_default: bool = False,
    extra_lines: Callable[[Evaluation], list[str]] | None = None,
    engine: EngineSpec = "local",
    source: Any = None,
) -> int:
    """Run ``metrics`` over the command's input through the spine; print the table and the summary.
    ``engine``: where the rows are scored (``evaluate``'s ``engine``; ``-o`` is then a folder);
    ``source``: rows already read (a trace export), instead of the input path."""
    path = source_of(args, command)
    if source is None and not getattr(args, "sample", False):
        check_not_empty(path, command, allow=bool(getattr(args, "allow_empty", False)))
    source = path if source is None else source
    gates = gates_of(args, metrics)
    if getattr(args, "junit", None):  # an existing JUnit file is refused before the run, not after it
        junit = FinalFile(Path(args.junit), "JUnit file")
        check_free(junit, resume=args.resume, overwrite=args.overwrite)
    output = args.output if args.output else ("-" if stdout_default else None)
    store = store_of(args)
    evaluation = evaluate(
        source,
        metrics,
        output=output,
        chunk_size=args.chunk_size,
        resume=args.resume,
        overwrite=args.overwrite,
        desc=command,
        store=store,
        tag=getattr(args, "tag", None),
        command=shlex.join(["ragsense", *getattr(args, "argv", [command])]),
        engine=engine,
    )
    to_stdout = output == "-"
    show = args.table == "always" or (
        args.table == "auto" and not to_stdout and len(evaluation) <= TABLE_AUTO_ROWS
    )
    if show:
        print(render(evaluation.rows, columns))
    lines = [str(evaluation.summary())]
    if extra_lines is not None:
        lines.extend(extra_lines(evaluation))
    if args.output and not to_stdout:
        lines.append(f"written to {args.output}")
    if store is not None and evaluation.run_id is not None:
        lines.append(
            f"recorded as run {evaluation.run_id} in {store.path} (ragsense report {evaluation.run_id})"
        )
    failed = False
    if gates or getattr(args, "junit", None):
        verdicts = [m.verdict for m in metrics if m.verdict]
        gate_refusals = bool(getattr(args, "gate_refusals", False))
        results = check_gates(gates, evaluation.rows, verdict_fields=verdicts, gate_refusals=gate_refusals)
        for result in results:
            lines.append(f"gate {'passed' if result.passed else 'FAILED'}: {result.message}")
        failed = not all(r.passed for r in results)
        if args.junit:
            path = write_junit(
                args.junit,
                results,
                rows=evaluation.rows if args.junit_rows else None,
                gates=gates,
                verdict_fields=verdicts,
                run_id=evaluation.run_id,
                gate_refusals=gate_refusals,
                overwrite=True,  # checked before the run (check_free)
                bands=bands_of(metrics),
            )
            lines.append(f"JUnit XML written to {path}")
    # Error messages and file names in the summary can carry a user's text: no raw escape sequences.
    echo("", *lines, keep_newlines=True)
    if failed:
        return EXIT_GATE_FAILED
    return EXIT_ROW_ERRORS if evaluation.has_errors else EXIT_OK
