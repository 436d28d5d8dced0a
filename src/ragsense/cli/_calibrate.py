"""``ragsense calibrate LABELED -o bands.json``: ConSens verdict bands fitted on the user's labelled rows.

Each row carries a ``label`` (or ``expected``): grounded (``1``, ``true``, ``grounded``) when its answer
is grounded in its context, ungrounded (``0``, ``false``, ``ungrounded``) when it is not
(:func:`ragsense.data.label_verdict`). Rows that already carry the score (an ``evaluate`` or
``grounding`` output) are read as they are; other rows are scored first through
:func:`ragsense.evaluate`, the same path every scoring command takes. Rows the fit cannot use are left
out and counted by reason: a refusal verdict (the bands do not decide it), a label ``unsure`` or
``refusal``. The class counts are those of the rows the fit uses. The fit itself is
:func:`ragsense.consens.calibrate_bands`; this module reads rows and prints.

Exit codes: 0 the bands were written from every row; 3 written, but some rows had errors (each is
listed, naming the row and field, and left out); 2 a usage error, a class with fewer than
``--min-per-class`` rows, or no grounded edge reaching the target precision (nothing is written: bands
that never say ``grounded`` fail every row; the precision the rows support is printed).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ragsense.cli._common import add_aggregation_option, add_model_options, model_spec_from_args
from ragsense.cli._numbers import positive_int, unit_interval
from ragsense.cli._run import EXIT_OK, EXIT_ROW_ERRORS, EXIT_USAGE
from ragsense.consens import (
    DEFAULT_FOLDS,
    DEFAULT_MIN_CALLED,
    DEFAULT_MIN_PER_CLASS,
    DEFAULT_TARGET_PRECISION,
    Aggregation,
    Bands,
    calibrate_bands,
    check_classes,
    edge_text,
)
from ragsense.data import RagRow, label_field, label_verdict, read_rows
from ragsense.errors import InputError, ParameterError
from ragsense.tables import echo, render_table

SCORE_FIELD = "consens"
ERRORS_SHOWN = 10
"""Row errors listed one by one; the rest are counted (a file of 10,000 unlabelled rows is one mistake)."""


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "calibrate",
        help="fit the ConSens verdict bands on your own labelled rows (a file for --bands)",
        description=(
            "Fit where a ConSens score becomes 'grounded' and 'ungrounded' on rows you labelled "
            "(a 'label' or 'expected' column: grounded/1/true, ungrounded/0/false), for a target "
            "precision of each verdict, and write them to a bands file that evaluate and grounding read "
            "with --bands FILE. Rows that already carry the score (an evaluate output) are not scored "
            "again. Prints the in-sample and cross-validated precision and coverage of each verdict with "
            "95% intervals (docs/calibrate.md). Exit codes: 0 written; 3 written, some rows had errors "
            "(listed, left out); 2 usage error, too few rows of a class, or no grounded edge reaches the "
            "target precision (nothing written; the precision the rows support is printed)."
        ),
    )
    parser.add_argument("input", metavar="LABELED", help="labelled rows: .jsonl, .json, .csv or .parquet")
    parser.add_argument("-o", "--output", required=True, help="the bands file to write (JSON)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    numbers: list[tuple[str, Callable[[str], float], float | None, str]] = [
        ("--target-precision", unit_interval, DEFAULT_TARGET_PRECISION, "precision each verdict must reach"),
        (
            "--folds",
            positive_int,
            None,
            f"cross-validation folds (default: {DEFAULT_FOLDS}, or the smaller class's row count if fewer)",
        ),
        ("--min-per-class", positive_int, DEFAULT_MIN_PER_CLASS, "refuse with fewer rows of either class"),
        ("--min-called", positive_int, DEFAULT_MIN_CALLED, "the fewest rows an edge may call"),
    ]
    for flag, kind, default, what in numbers:
        shown = what if default is None else f"{what} (default {default})"
        parser.add_argument(flag, type=kind, default=default, help=shown)
    parser.add_argument(
        "--metric", choices=["consens"], default="consens", help="the score to calibrate (default consens)"
    )
    add_aggregation_option(parser, "the ConSens score the bands are for")
    add_model_options(parser)
    parser.set_defaults(run=run_calibrate)


def label_of(record: Mapping[str, Any], where: int | str) -> int | None:
    """The row's label for the fit: 1 grounded, 0 not, None for a row labelled ``unsure`` or ``refusal``
    (left out: the bands decide neither); a missing or unknown label is an InputError naming the row.

    >>> label_of({"label": "1"}, 3), label_of({"label": 0.0}, 4), label_of({"expected": "grounded"}, 5)
    (1, 0, 1)
    >>> label_of({"label": "true"}, 6), label_of({"label": "unsure"}, 7)
    (1, None)
    >>> label_of({"label": "yes"}, 8)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ragsense.errors.InputError: row 8, field 'label': expected grounded/1/true, ... got 'yes'
    """
    name = label_field(record)
    if name is None:
        raise InputError(
            "missing; label each row grounded (1, true) or ungrounded (0, false)", row=where, field="label"
        )
    verdict = label_verdict(record[name], row=where, field=name)
    return {"grounded": 1, "ungrounded": 0}.get(str(verdict))


def score_of(record: Mapping[str, Any], aggregation: str, where: int | str) -> float:
    """The row's score under ``aggregation``: from ``consens_by_aggregation`` (any aggregation an
    evaluate output scored), else ``consens`` when the row's ``aggregation`` is this one (or unnamed)."""
    by_aggregation = record.get("consens_by_aggregation")
    if isinstance(by_aggregation, str):  # a CSV cell holds the JSON text
        try:
            by_aggregation = json.loads(by_aggregation)
        except json.JSONDecodeError:
            by_aggregation = None
    if isinstance(by_aggregation, Mapping) and aggregation in by_aggregation:
        value, field = by_aggregation[aggregation], "consens_by_aggregation"
    else:
        scored_with = record.get("aggregation")
        if scored_with not in (None, "", aggregation):
            raise InputError(
                f"scored with {scored_with}, not {aggregation}: use --aggregation {scored_with}, or drop "
                "the score fields to have the rows scored again",
                row=where,
                field="aggregation",
            )
        value, field = record.get(SCORE_FIELD), SCORE_FIELD
    try:
        score = float(value) if isinstance(value, int | float | str) and not isinstance(value, bool) else None
    except ValueError:
        score = None
    if score is None or not math.isfinite(score):
        raise InputError(f"expected a finite score, got {value!r}", row=where, field=field)
    return score


def _where(record: Mapping[str, Any], index: int) -> int | str:
    rid = record.get("id")
    return str(rid) if rid not in (None, "") else index


def _scoring_error(record: Mapping[str, Any], where: int | str) -> InputError | None:
    """The first error the scoring run recorded on the row, if any."""
    errors = record.get("errors")
    if not errors or not isinstance(errors, list) or not isinstance(errors[0], Mapping):
        return None
    first = errors[0]
    return InputError(f"not scored: {first.get('message')}", row=where, field=first.get("field"))


def _is_refusal(record: Mapping[str, Any]) -> bool:
    return record.get("verdict") == "refusal" or record.get("refusal") is True


def _read(path: str) -> tuple[list[dict[str, Any]], list[InputError | None]]:
    """Every row's fields, and for each the error that makes it unusable before scoring (or None)."""
    records: list[dict[str, Any]] = []
    problems: list[InputError | None] = []
    for index, item in enumerate(read_rows(path, require_answer=False)):
        if isinstance(item, RagRow):
            record = item.to_record()
            records.append(record)
            problem: InputError | None = None
            try:
                label_of(record, _where(record, index))
            except InputError as exc:
                problem = exc
            problems.append(problem)
        else:
            records.append(item.to_record())
            problems.append(
                InputError(item.message, row=item.id if item.id is not None else index, field=item.field)
            )
    return records, problems


def _score(args: argparse.Namespace, path: str) -> list[dict[str, Any]]:
    """The rows scored by ConSens on the evaluation spine (nothing recorded: the fit is the product)."""
    from ragsense.consens import ConSens
    from ragsense.evaluation import evaluate

    model, options = model_spec_from_args(args)
    metric = ConSens(model, aggregation=args.aggregation, model_options=options)
    return list(evaluate(path, [metric], desc="calibrate", store=None).rows)


LABELLED_AS = {1: "labelled grounded", 0: "labelled ungrounded"}


def _label_word(record: Mapping[str, Any]) -> str:
    """The row's label as a verdict word (``unsure``, ``refusal``)."""
    return str(label_verdict(record[str(label_field(record))]))


def _fit_inputs(
    records: Sequence[Mapping[str, Any]], problems: list[InputError | None], aggregation: str
) -> tuple[list[float], list[int], Counter[str]]:
    """Scores and labels of the rows the fit uses, and why each other usable row was left out (a
    refusal verdict, counted by its label, or a label the bands cannot fit); ``problems`` is filled in
    with each unusable row's error."""
    scores: list[float] = []
    labels: list[int] = []
    left_out: Counter[str] = Counter()
    for index, record in enumerate(records):
        if problems[index] is not None:
            continue
        where = _where(record, index)
        try:
            failed = _scoring_error(record, where)
            if failed is not None:
                raise failed
            label = label_of(record, where)
            if _is_refusal(record):
                # Named by the row's own label ("labelled unsure"), not by a class of labels.
                given = LABELLED_AS[label] if label is not None else f"labelled {_label_word(record)}"
                left_out[f"verdict refusal, {given}"] += 1
                continue
            if label is None:
                left_out[f"labelled {_label_word(record)}"] += 1
                continue
            scores.append(score_of(record, aggregation, where))
            labels.append(label)
        except InputError as exc:
            problems[index] = exc
    return scores, labels, left_out


def left_out_text(left_out: Mapping[str, int]) -> str:
    """Why rows were left out, one phrase per reason (or ``none``); the keys are those the bands file
    records (``verdict refusal, labelled grounded``), read out as a sentence.

    >>> left_out_text({"verdict refusal, labelled grounded": 2, "labelled unsure": 1})
    '1 row labelled unsure; 2 rows whose answer is a refusal (labelled grounded)'
    """
    phrases = []
    for why, n in sorted(left_out.items()):
        rows = "row" if n == 1 else "rows"
        _, _, label = why.partition("verdict refusal, ")
        phrases.append(f"{n} {rows} whose answer is a refusal ({label})" if label else f"{n} {rows} {why}")
    return "; ".join(phrases) or "none"


def fmt_share(figures: Mapping[str, Any], key: str) -> str:
    """``0.83 [0.44, 0.97] (5/6)``: a share, its interval and (for a precision) its counts, or
    ``- (0 called)`` when the edge called no row (precision of nothing is no number). In-sample and
    cross-validated cells are both written so: the same words for the same figure."""
    value = figures[key]
    if value is None:
        return f"- ({figures['called']} called)"
    lo, hi = figures[f"{key}_ci95"]
    counts = f" ({figures['correct']}/{figures['called']})" if key == "precision" else ""
    return f"{value:.2f} [{lo:.2f}, {hi:.2f}]{counts}"


def fit_table(bands: Bands) -> str:
    """The fit as a short table: each verdict's edge (every digit it has, :func:`edge_text`), then its
    precision and coverage in-sample and cross-validated, each cell with its counts. An edge fitted on
    every row that calls none of them is marked, beside cross-validated figures that may call some
    (the folds' edges are fitted on fewer rows)."""
    fit = bands.fit
    rows = []
    for side, edge in (
        ("grounded", f">= {edge_text(bands.grounded_at)}"),
        ("ungrounded", f"< {edge_text(bands.ungrounded_below)}"),
    ):
        figures = fit[side]
        inside, cv = figures["in_sample"], figures["cross_validated"]
        rows.append(
            [
                side,
                edge if figures["calls"] else "(calls none)",
                fmt_share(inside, "precision"),
                fmt_share(inside, "coverage"),
                fmt_share(cv, "precision"),
                fmt_share(cv, "coverage"),
            ]
        )
    headers = [
        "verdict",
        "score",
        "in-sample precision",
        "in-sample coverage",
        f"{fit['folds']}-fold CV precision",
        f"{fit['folds']}-fold CV coverage",
    ]
    return render_table(headers, rows, [10, 16, 26, 18, 26, 18])


def supported_text(figures: Mapping[str, Any] | None) -> str:
    """``0.83 (5 of 6 rows)``, or a word when no edge calls enough rows."""
    if figures is None:
        return "none (no edge calls enough rows)"
    return f"{figures['precision']:.2f} ({figures['correct']} of {figures['called']} rows)"


def _notes(bands: Bands) -> list[str]:
    fit = bands.fit
    notes = []
    for side in ("ungrounded",):  # bands that never say grounded are not written (_never_grounded)
        if not fit[side]["calls"]:
            notes.append(
                f"note: no {side} edge reaches precision {fit['target_precision']} on these rows with at "
                f"least {fit['min_called']} rows called (the most these rows support: "
                f"{supported_text(fit[side]['supported_precision'])}); these bands never say '{side}'"
            )
    if fit["clipped"]:
        notes.append("note: the two edges crossed; ungrounded_below was clipped down to grounded_at")
    return notes


def _never_grounded(bands: Bands) -> str:
    """Why no bands file is written: no grounded edge reaches the target (bands that never say
    ``grounded`` would fail every row of a gate or a guard), what the rows support, and what data
    would give an edge."""
    fit = bands.fit
    best = [fit[side]["supported_precision"] for side in ("grounded", "ungrounded")]
    grounded = best[0]
    # Rounded down, so that the suggested target is one an edge reaches.
    hint = (
        f"rerun with --target-precision {math.floor(grounded['precision'] * 100) / 100:g}; "
        if grounded is not None and grounded["precision"] > 0
        else ""
    )
    return (
        f"no grounded edge reaches precision {fit['target_precision']} on these {fit['n']} rows with at "
        f"least {fit['min_called']} rows called: bands from them would never say 'grounded', so none were "
        f"written. The most these rows support (in-sample): grounded {supported_text(grounded)}, "
        f"ungrounded {supported_text(best[1])}. To go on: {hint}label more rows (an edge needs at least "
        f"{fit['min_called']} rows scoring at or above it, {fit['target_precision']:.0%} of them labelled "
        "grounded), or lower --min-called."
    )


def _check_fit_classes(labels: Sequence[int], min_per_class: int, left_out: Mapping[str, int]) -> None:
    """Refuse too few rows of a class among those the fit uses, naming what was left out."""
    try:
        check_classes(sum(labels), len(labels) - sum(labels), min_per_class)
    except ParameterError as exc:
        if not left_out:
            raise
        raise ParameterError(
            f"{exc.reason}; counted on the rows the fit uses, after leaving out {left_out_text(left_out)}",
            parameter=exc.parameter,
        ) from exc


def run_calibrate(args: argparse.Namespace) -> int:
    output = Path(args.output)
    if output.exists() and not args.overwrite:
        raise FileExistsError(f"output file {str(output)!r} already exists; replace it with --overwrite")
    aggregation = Aggregation(args.aggregation).value
    # Settings are checked before any model loads (calibrate_bands checks them again).
    if not 0.0 < args.target_precision <= 1.0:
        raise ParameterError(
            f"must be in (0, 1], got {args.target_precision}", parameter="--target-precision"
        )
    if args.folds is not None and args.folds < 2:
        raise ParameterError(f"must be at least 2, got {args.folds}", parameter="--folds")
    records, problems = _read(args.input)
    # Refuse too few labels before any model loads: an upper bound, since scoring can find refusals.
    labelled = [
        label_of(r, _where(r, i)) for i, (r, p) in enumerate(zip(records, problems, strict=True)) if p is None
    ]
    binary = [y for y in labelled if y is not None]
    try:
        check_classes(sum(binary), len(binary) - sum(binary), args.min_per_class)
    except ParameterError as exc:
        unusable = [p for p in problems if p is not None]
        if not unusable:
            raise
        # Say why the counts are low when rows were left out: a mislabelled file reads as "too few".
        raise ParameterError(
            f"{exc.reason}; {len(unusable)} row(s) left out as unusable, the first: {unusable[0]}",
            parameter=exc.parameter,
        ) from exc
    if not any(SCORE_FIELD in r for r in records):
        # The spine's rows are the input's, in order; rows it could not parse carry their error.
        records = _score(args, args.input)
    scores, labels, left_out = _fit_inputs(records, problems, aggregation)
    _check_fit_classes(labels, args.min_per_class, left_out)
    settings = {
        "target_precision": args.target_precision,
        "folds": args.folds,
        "min_per_class": args.min_per_class,
        "min_called": args.min_called,
    }
    origin = f"ragsense calibrate {args.input} ({len(records)} rows)"
    refusals = sum(n for why, n in left_out.items() if why.startswith("verdict refusal"))
    bands = calibrate_bands(scores, labels, score=aggregation, origin=origin, refusals=refusals, **settings)
    errors = [p for p in problems if p is not None]
    fit = {
        **bands.fit,
        "left_out": dict(sorted(left_out.items())),
        "input": str(args.input),
        "input_rows": len(records),
        "row_errors": len(errors),
    }
    bands = dataclasses.replace(bands, fit=fit)
    chosen = "" if args.folds is not None else ", chosen from the data"
    # The input's name and its rows' ids and labels are the user's text: escaped (echo), so that a
    # file name or id holding an escape sequence cannot drive the terminal.
    echo(
        f"ConSens {aggregation} bands from {len(scores)} of {len(records)} rows of {args.input} "
        f"({fit['label_1']} grounded, {fit['label_0']} not; left out: {left_out_text(left_out)}; "
        f"row errors: {len(errors)}), target precision {args.target_precision}, "
        f"{fit['folds']} folds{chosen}",
        file=sys.stdout,
    )
    echo(fit_table(bands), file=sys.stdout, keep_newlines=True)
    lines = [f"row error: {e}" for e in errors[:ERRORS_SHOWN]]
    if len(errors) > ERRORS_SHOWN:
        lines.append(f"... and {len(errors) - ERRORS_SHOWN} more row errors")
    if not fit["grounded"]["calls"]:
        lines.append(f"ragsense calibrate: {_never_grounded(bands)}")
        echo(*lines)
        return EXIT_USAGE
    lines = _notes(bands) + lines
    bands.save(output, overwrite=True)  # --overwrite was checked before any row was scored
    lines.append(f"wrote {output} (use it with --bands {output})")
    echo(*lines)
    return EXIT_ROW_ERRORS if errors else EXIT_OK
