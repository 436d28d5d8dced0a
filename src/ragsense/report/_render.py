"""One run (or two) -> one HTML page, within the size policy; and the same from a run store."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragsense._version import __version__
from ragsense.consens import RAW_SCORE_MEANINGS
from ragsense.data import write_output
from ragsense.report._data import build_payload, row_keys
from ragsense.report._fit import Report, fit_page
from ragsense.report._summary import (
    bands_note,
    bands_of_run,
    comparison_info,
    run_info,
    score_columns,
    verdict_columns,
)
from ragsense.report._texts import ReportLimits
from ragsense.runs import Comparison, RunStore, StoredRun, check_run_id, compare_rows

RunRows = tuple[StoredRun, Sequence[Mapping[str, Any]]]


def _title(runs: Sequence[StoredRun]) -> str:
    names = [r.id + (f" ({r.tag})" if r.tag else "") for r in runs]
    return "ragsense report · " + " vs ".join(names)


def build_report(
    run: StoredRun,
    rows: Sequence[Mapping[str, Any]],
    *,
    other: RunRows | None = None,
    comparison: Comparison | None = None,
    limits: ReportLimits | None = None,
    compress: bool = True,
) -> Report:
    """Like :func:`render_report`, with what the size policy did (see :class:`Report`)."""
    pairs: list[RunRows] = [(run, rows)] + ([other] if other is not None else [])
    scores = score_columns(pairs)
    verdicts = verdict_columns(pairs)
    meta: dict[str, Any] = {
        "version": __version__,
        "runs": [run_info(r, rs) for r, rs in pairs],
        "scores": scores,
        "verdicts": verdicts,
        # What the ConSens detail's raw value holds under each aggregation (its label in a row view).
        "raw_meanings": RAW_SCORE_MEANINGS,
    }
    if other is not None:
        if comparison is None:
            comparison = compare_rows(rows, other[1], [s["name"] for s in scores], verdicts)
        meta["comparison"] = comparison_info(comparison)
        # The histogram draws B's bands; verdict counts under other edges differ for that reason alone.
        meta["bands_note"] = bands_note(pairs)
    runs_rows = [rs for _, rs in pairs]
    base = limits or ReportLimits()
    bands = [bands_of_run(r, rs) for r, rs in pairs]  # a score at an edge is shown with its deciding digits
    payload = build_payload(runs_rows, row_keys(runs_rows), scores, verdicts, base, bands)
    return fit_page(payload, base, meta, _title([r for r, _ in pairs]), compress)


def render_report(
    run: StoredRun,
    rows: Sequence[Mapping[str, Any]],
    *,
    other: RunRows | None = None,
    comparison: Comparison | None = None,
    limits: ReportLimits | None = None,
    compress: bool = True,
) -> str:
    """The HTML page of one run's ``rows`` (or of a comparison with ``other = (run_b, rows_b)``).

    ``comparison`` defaults to :func:`ragsense.runs.compare_rows` on the scores and verdicts both runs
    have. ``limits`` is the size policy (:class:`ReportLimits`); ``compress=False`` embeds the rows as
    plain JSON instead of gzip + base64 (a larger page, readable with any text tool).
    """
    return build_report(run, rows, other=other, comparison=comparison, limits=limits, compress=compress).html


def default_output(run_id: str, other_id: str | None = None) -> Path:
    """``ragsense-report-<id>.html`` (``ragsense-report-<a>-vs-<b>.html``) in the working directory.

    The name is built from run ids only (12 hex digits, :data:`ragsense.runs.RUN_ID`): anything else
    raises :class:`ragsense.runs.RunIdError`, so an id from a crafted store cannot name a path.

    >>> default_output("0123456789ab").name, default_output("0123456789ab", "ba9876543210").name
    ('ragsense-report-0123456789ab.html', 'ragsense-report-0123456789ab-vs-ba9876543210.html')
    """
    ids = [check_run_id(i, "report file name") for i in (run_id, other_id) if i is not None]
    name = "ragsense-report-" + "-vs-".join(ids) + ".html"
    return Path.cwd() / name


def write_report(
    store: RunStore | str | os.PathLike[str] | None,
    ref: str,
    ref_b: str | None = None,
    *,
    output: str | os.PathLike[str] | None = None,
    limits: ReportLimits | None = None,
    overwrite: bool = False,
) -> Path:
    """Write the report of run ``ref`` (compared with ``ref_b`` when given) from a run store, and
    return its path (default :func:`default_output`). Raises :class:`ragsense.runs.RunNotFoundError`
    for a run the store does not have, :class:`~ragsense.errors.OutputExistsError` for an existing
    file unless ``overwrite`` (written whole, never through a link: :func:`ragsense.data.write_output`)."""
    if not isinstance(store, RunStore):
        store = RunStore(store)
    run = store.get(ref)
    rows = store.rows(run.id)
    other: RunRows | None = None
    if ref_b is not None:
        run_b = store.get(ref_b)
        other = (run_b, store.rows(run_b.id))
    path = Path(output) if output is not None else default_output(run.id, other[0].id if other else None)
    page = render_report(run, rows, other=other, limits=limits)
    return write_output(path, page, overwrite=overwrite, what="report")
