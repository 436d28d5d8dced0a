"""The one runner: every metric over fixed chunks of the input, error records, durable appends, resume.

Chunk ``k`` is always input rows ``k*chunk_size ... (k+1)*chunk_size - 1``, whatever was already done,
because batch composition can change a model's float results: a resumed run computes exactly what a
fresh run computes. Each finished chunk is appended to the JSONL output and fsynced before the next
starts, so an interrupted run loses at most the chunk it was in.

Within a chunk every metric scores the rows it can (those with the fields it needs) in one batched
call; the metrics run concurrently on the one event loop (a server backend keeps their requests in
flight together; a local model computes them one after the other). When a metric fails for a whole
chunk, its rows are retried one by one so that only the failing rows are marked. This is the only
"retry a failed chunk row by row" in ragsense.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Literal

from tqdm import tqdm

from ragsense.contract import INPUT, REDERIVE_HOOK, ErrorRecord, RowOutcome, RunItem, Step
from ragsense.data import JsonlWriter, RowError, dumps_json, write_output
from ragsense.errors import OutputExistsError, ParameterError, RagsenseError, ResumeError

logger = logging.getLogger(__name__)

INPUT_KEY = "_input"
"""The key of a row's input fingerprint (:func:`row_fingerprint`) in the files a run appends to and
resumes from: the JSONL output or working file, and the Ray engine's shard files. Records in memory,
the run store and final CSV/Parquet outputs do not carry it."""

Shape = Callable[[RowOutcome], dict[str, Any]]
"""How an outcome is written: :meth:`RowOutcome.to_record` unless a front keeps an older format."""

ChunkSink = Callable[[Sequence[RunItem], Sequence[dict[str, Any]]], None]
"""Called with each chunk's input items and output records once the chunk is done (computed or taken
from the output being resumed), in input order: how the run store keeps a run as it goes."""


class ResultCountError(RagsenseError, ValueError):
    """A metric returned a different number of results than rows it was given (a bug in the metric)."""


@dataclass
class RunStats:
    """How a run went: rows in the output, how many came from an earlier run, how many an earlier run
    had finished but were recomputed because their input changed since, seconds spent."""

    n_rows: int = 0
    n_resumed: int = 0
    seconds: float = 0.0
    n_input_changed: int = 0


def row_fingerprint(item: RunItem) -> str:
    """A fingerprint of one input row's content (a bad row's reason and raw text included): what a
    resume compares to tell a finished row of the same input from one whose input has changed.

    Keys are sorted, so the same row with its columns in another order has the same fingerprint.

    >>> from ragsense.data import parse_rows
    >>> a, b = parse_rows([{"id": "1", "question": "Q?", "context": "C.", "answer": a} for a in "AB"])
    >>> row_fingerprint(a) == row_fingerprint(a), row_fingerprint(a) == row_fingerprint(b)
    (True, False)
    """
    if isinstance(item, RowError):
        content: Any = {"error": [item.field, item.message], "raw": item.raw}
    else:
        content = {"row": item.to_record()}
    text = json.dumps(content, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def with_fingerprint(record: Mapping[str, Any], item: RunItem) -> dict[str, Any]:
    """``record`` as written to a resumable file: with its input's fingerprint."""
    return {**record, INPUT_KEY: row_fingerprint(item)}


def without_fingerprint(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` as read back from a resumable file, without the fingerprint."""
    return {k: v for k, v in record.items() if k != INPUT_KEY}


def finished_row_matches(record: Mapping[str, Any], item: RunItem, index: int, where: str) -> bool:
    """The one resume rule (the local runner and the Ray engine both use it): whether the finished
    output ``record`` at input position ``index`` may be kept for ``item``, the input's row there now.

    Rows are matched by id and by content: an id that differs means the file was written for another
    input (:class:`ValueError`); the same id with another fingerprint (an answer edited since, or a
    record written before fingerprints were kept) means the row must be recomputed (False).
    """
    old, new = record.get("id"), item.id
    if old is not None and new is not None and str(old) != new:
        raise ResumeError(
            f"cannot resume {where!r}: its row {index} has id {old!r} but the input's has {new!r}, "
            "so it was written for a different input; use overwrite=True (--overwrite) to start over"
        )
    return record.get(INPUT_KEY) == row_fingerprint(item)


@dataclass
class _Previous:
    """What an existing output file already holds, by input row index."""

    records: dict[int, dict[str, Any]]
    needs_rewrite: bool  # a truncated or unterminated last line, duplicates or blank lines


async def run_rows(
    rows: Iterable[RunItem],
    metrics: Sequence[Step],
    *,
    output: str | os.PathLike[str] | None = None,
    chunk_size: int = 16,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool | Literal["always"] = True,
    desc: str = "ragsense",
    shape: Shape | None = None,
    on_chunk: ChunkSink | None = None,
) -> tuple[list[dict[str, Any]], RunStats]:
    """Run ``metrics`` over ``rows``; returns every output record in input order and the run's stats.

    With ``output`` (a JSONL path) each chunk is appended there as it finishes. With ``resume=True`` an
    existing output is continued: leading chunks whose rows are all present are taken from it (no
    metric is called for them); from the first incomplete chunk on, the file is cut back and computed
    afresh. Resume with the same input, metrics and ``chunk_size``. Without ``resume``, an existing
    output raises :class:`FileExistsError` unless ``overwrite=True``.

    ``on_chunk``: called with each finished chunk's items and records (see :data:`ChunkSink`).

    ``progress``: a tqdm bar on stderr when it is a terminal (``"always"``: in any case; False: never).
    Metrics must already be set up (:meth:`Metric.setup`). Items are usually parsed rows
    (:class:`~ragsense.data.RagRow`, or a :class:`~ragsense.data.RowError` that is recorded as an input
    error); any :class:`RunItem` works with steps that read it.
    """
    if chunk_size < 1:
        raise ParameterError(f"must be at least 1, got {chunk_size}", parameter="chunk_size")
    shape = shape or RowOutcome.to_record
    path = None if output is None else Path(output)
    previous: _Previous | None = None
    if path is not None and path.exists():
        if resume:
            previous = _read_previous(path)
        elif not overwrite:
            raise OutputExistsError(f"output file {str(path)!r} already exists")
    stats = RunStats()
    started = time.perf_counter()
    records: list[dict[str, Any]] = []
    total = len(rows) if isinstance(rows, Sized) else None
    show = progress == "always" or (progress is True and sys.stderr.isatty())
    bar = tqdm(total=total, desc=desc, unit="row", disable=not show, file=sys.stderr)
    # A fresh run truncates now, so even an empty input leaves a valid (empty) output file.
    writer: JsonlWriter | None = None if path is None or previous is not None else JsonlWriter(path)
    # Resuming: chunks are taken from the previous file while they match (`appending` False); the first
    # chunk that does not cuts the file back there, and from then on every chunk is appended, whether
    # computed or (a later chunk that still matches) taken from the previous file as it was.
    appending = previous is None
    try:
        for start, chunk in _chunks(rows, chunk_size):
            if previous is not None:
                assert path is not None
                done, changed = _previous_chunk(previous, start, chunk, path, metrics)
                stats.n_input_changed += changed
                if done is not None:
                    rederived = _rederived(done, chunk, metrics)
                    if rederived != done and not appending:
                        # A verdict (or a field's name) changed under this run's settings: the file
                        # must say what the run returns, so it is rewritten from this chunk on.
                        _cut_back(path, previous, keep_below=start)
                        writer = JsonlWriter(path, append=True)
                        appending = True
                    done = rederived
                    kept = [without_fingerprint(r) for r in done]
                    if appending and writer is not None:
                        writer.write_batch(done)
                    records.extend(kept)
                    if on_chunk is not None:
                        on_chunk(chunk, kept)
                    stats.n_resumed += len(chunk)
                    bar.update(len(chunk))
                    continue
                if not appending:
                    # First chunk to compute: drop it and anything after it from the file, then append.
                    _cut_back(path, previous, keep_below=start)
                    writer = JsonlWriter(path, append=True)
                    appending = True
            outcomes = await _process_chunk(start, chunk, metrics)
            shaped = [_writable(shape, outcome) for outcome in outcomes]
            if writer is not None:
                writer.write_batch([with_fingerprint(r, item) for r, item in zip(shaped, chunk, strict=True)])
            if on_chunk is not None:
                on_chunk(chunk, shaped)
            records.extend(shaped)
            bar.update(len(chunk))
        if not appending and previous is not None and path is not None:
            _finish_resume(path, previous, n_rows=len(records))
    finally:
        if writer is not None:
            writer.close()
        bar.close()
    if stats.n_input_changed:
        # The summary says it too ("M recomputed because their input changed"); the log is for runs
        # whose summary nobody prints.
        logger.info(
            "resume: %d finished row(s) of %s were recomputed because their input changed",
            stats.n_input_changed,
            path,
        )
    stats.n_rows = len(records)
    stats.seconds = time.perf_counter() - started
    return records, stats


def _writable(shape: Shape, outcome: RowOutcome) -> dict[str, Any]:
    record = shape(outcome)
    try:
        dumps_json(record)
    except (ValueError, TypeError) as exc:
        # One unwritable result (a NaN, an odd type) marks its own row instead of ending the run.
        outcome.fields = dict.fromkeys(outcome.fields)
        outcome.errors.append(ErrorRecord("output", None, f"result could not be written: {exc}"))
        record = shape(outcome)
    return record


# ------------------------------------------------------------------------------------------- scoring


async def _process_chunk(start: int, chunk: list[RunItem], metrics: Sequence[Step]) -> list[RowOutcome]:
    outcomes: list[RowOutcome] = []
    valid: list[tuple[RowOutcome, RunItem]] = []
    for offset, item in enumerate(chunk):
        outcome = RowOutcome(start + offset, item.to_record())
        outcomes.append(outcome)
        if isinstance(item, RowError):
            outcome.errors.append(ErrorRecord(INPUT, item.field, item.message))
            for metric in metrics:  # null fields: every row has the same metric columns
                outcome.fields.update(dict.fromkeys(metric.fields))
        else:
            valid.append((outcome, item))
    per_metric = await asyncio.gather(*(_score_metric(metric, valid) for metric in metrics))
    for metric, results in zip(metrics, per_metric, strict=True):
        for (outcome, _), result in zip(valid, results, strict=True):
            if isinstance(result, ErrorRecord):
                outcome.errors.append(result)
                # The metric's fields are still there (null): every row has the same columns.
                outcome.fields.update(dict.fromkeys(metric.fields))
            else:
                outcome.fields.update(result)
    return outcomes


async def _score_metric(
    metric: Step, valid: Sequence[tuple[RowOutcome, RunItem]]
) -> list[Mapping[str, Any] | ErrorRecord]:
    """The metric's fields for each valid row, or the error record that marks the row."""
    results: list[Mapping[str, Any] | ErrorRecord | None] = [None] * len(valid)
    eligible: list[int] = []
    for k, (_, row) in enumerate(valid):
        missing = metric.needs.missing(row)
        if missing is None:
            eligible.append(k)
        else:
            results[k] = ErrorRecord(
                metric.name, missing, f"{missing!r} is missing or empty ({metric.name} needs it)"
            )
    scored = await _isolated(metric, [valid[k][1] for k in eligible])
    for k, result in zip(eligible, scored, strict=True):
        if isinstance(result, BaseException):
            results[k] = ErrorRecord.from_exception(metric.name, result)
        else:
            fields = {name: result.get(name) for name in metric.fields}
            try:
                dumps_json(fields)
            except (ValueError, TypeError) as exc:
                # One unwritable result (a NaN, an odd type) marks its own row for this metric only.
                results[k] = ErrorRecord(metric.name, None, f"result could not be written: {exc}")
            else:
                results[k] = fields
    return [r for r in results if r is not None]


def _checked(result: Sequence[Any], expected: int, metric: Step) -> list[Any]:
    if len(result) != expected:
        # A programming error in the metric, not a property of the rows: stop rather than misalign rows.
        raise ResultCountError(f"metric {metric.name!r} returned {len(result)} results for {expected} rows")
    return list(result)


async def _isolated(metric: Step, rows: list[RunItem]) -> list[Mapping[str, Any] | Exception]:
    """The metric on all rows in one call; if that call fails, on each row alone."""
    if not rows:
        return []
    try:
        return _checked(await metric.score(rows), len(rows), metric)
    except ResultCountError:
        raise
    except Exception as exc:  # any failure of the metric: isolate the failing rows below
        chunk_error = exc
    if len(rows) == 1:
        return [chunk_error]
    logger.warning(
        "%s failed on a chunk (%s); retrying its %d rows one by one", metric.name, chunk_error, len(rows)
    )
    out: list[Mapping[str, Any] | Exception] = []
    for row in rows:
        try:
            out.append(_checked(await metric.score([row]), 1, metric)[0])
        except ResultCountError:
            raise
        except Exception as exc:
            out.append(exc)
    return out


# -------------------------------------------------------------------------------------------- resume


def _chunks(rows: Iterable[RunItem], size: int) -> Iterator[tuple[int, list[RunItem]]]:
    iterator = iter(rows)
    start = 0
    while chunk := list(islice(iterator, size)):
        yield start, chunk
        start += len(chunk)


def _previous_chunk(
    previous: _Previous, start: int, chunk: list[RunItem], path: Path, metrics: Sequence[Step]
) -> tuple[list[dict[str, Any]] | None, int]:
    """The chunk's finished records from the previous file (None when it must be computed) and how
    many of its finished rows are recomputed because their input changed (:func:`finished_row_matches`)."""
    positions = range(start, start + len(chunk))
    changed = 0
    for index, item in zip(positions, chunk, strict=True):
        record = previous.records.get(index)
        if record is None:
            continue
        if not finished_row_matches(record, item, index, str(path)):
            changed += 1
        elif not isinstance(item, RowError):
            for metric in metrics:
                if metric.fields and metric.fields[0] not in record and not _has_error(record):
                    raise ResumeError(
                        f"cannot resume {str(path)!r}: its row {index} has no {metric.fields[0]!r} field, so "
                        f"it was written without the metric {metric.name!r}; resume with the same metrics "
                        "or use overwrite=True (--overwrite)"
                    )
    if changed or not all(index in previous.records for index in positions):
        return None, changed
    return [previous.records[index] for index in positions], 0


def resumes_whole(
    rows: Iterable[RunItem], metrics: Sequence[Step], output: str | os.PathLike[str], chunk_size: int
) -> bool:
    """Whether :func:`run_rows` resuming ``output`` would take every chunk of ``rows`` from it and call
    no metric (a ``--resume`` that only re-reads verdicts under new bands), decided by the rule it
    applies (:func:`_previous_chunk`). An engine then sets no model up: loading one would take most
    of such a run's time. Anything doubtful (no file, an unreadable one, a row to compute, rows left
    over) is False, and the run goes the usual way, which says what is wrong.
    """
    path = Path(output)
    if chunk_size < 1 or not path.is_file():
        return False
    try:
        previous = _read_previous(path)
        n_rows = 0
        for start, chunk in _chunks(rows, chunk_size):
            done, _ = _previous_chunk(previous, start, chunk, path, metrics)
            if done is None:
                return False
            n_rows += len(chunk)
    except RagsenseError:
        return False
    return n_rows > 0 and n_rows == len(previous.records)


def _has_error(record: Mapping[str, Any]) -> bool:
    return bool(record.get("errors")) or record.get("error") is not None


def _rederived(
    records: list[dict[str, Any]], chunk: Sequence[RunItem], metrics: Sequence[Step]
) -> list[dict[str, Any]]:
    """Finished records as this run's metrics would write them without a model: each metric with the
    ``rederive`` capability (:data:`~ragsense.contract.REDERIVE_HOOK`; ConSens re-reads its verdict
    under the current bands) updates the rows it scored. Rows it failed on keep their error."""
    hooks = [(m.name, hook) for m in metrics if callable(hook := getattr(m, REDERIVE_HOOK, None))]
    if not hooks:
        return records
    out = []
    for record, item in zip(records, chunk, strict=True):
        if not isinstance(item, RowError):
            failed = {e.get("metric") for e in record.get("errors") or [] if isinstance(e, Mapping)}
            for name, hook in hooks:
                if name not in failed:
                    record = dict(hook(record, item))
        out.append(record)
    return out


def _finish_resume(path: Path, previous: _Previous, *, n_rows: int) -> None:
    """Every input chunk was already done; check nothing is left over and tidy the file if needed."""
    extra = [index for index in previous.records if index >= n_rows]
    if extra:
        raise ResumeError(
            f"cannot resume {str(path)!r}: it holds rows up to {max(extra)} but the input has only "
            f"{n_rows} rows, so it was written for a different input; use overwrite=True (--overwrite)"
        )
    if previous.needs_rewrite:
        _cut_back(path, previous, keep_below=n_rows)


def _parse_output_line(line: str) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None


def _read_previous(path: Path) -> _Previous:
    with path.open(encoding="utf-8") as handle:
        lines = handle.readlines()
    records: dict[int, dict[str, Any]] = {}
    needs_rewrite = False
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            needs_rewrite = True
            continue
        record = _parse_output_line(line)
        is_last = number == len(lines)
        if record is None and is_last:
            # The run was killed while writing this line: it never finished, so drop it.
            logger.info("resume: dropping the truncated last line of %s", path)
            needs_rewrite = True
            continue
        row = None if record is None else record.get("_row")
        if record is None or not isinstance(row, int) or isinstance(row, bool) or row < 0:
            raise ResumeError(
                f"cannot resume {str(path)!r}: line {number} is not a ragsense output row (no valid JSON "
                "with a '_row' index); fix the file or use overwrite=True (--overwrite)"
            )
        if is_last and not line.endswith("\n"):
            needs_rewrite = True  # appending would glue the next row onto this line
        if row in records:
            needs_rewrite = True  # keep the first copy
            continue
        records[row] = record
    return _Previous(records=records, needs_rewrite=needs_rewrite)


def _cut_back(path: Path, previous: _Previous, *, keep_below: int) -> None:
    """Rewrite the output keeping only rows with ``_row < keep_below`` (first copies, complete lines)."""
    if not previous.needs_rewrite and all(index < keep_below for index in previous.records):
        return
    kept = [previous.records[index] for index in sorted(previous.records) if index < keep_below]
    dropped = len(previous.records) - len(kept)
    if dropped:
        logger.info(
            "resume: recomputing from row %d; dropped %d partial row(s) of %s", keep_below, dropped, path
        )
    # Written aside and swapped in, so a crash during the rewrite leaves the old file whole.
    write_output(path, "".join(dumps_json(dict(r)) + "\n" for r in kept), overwrite=True)
    # The records from `keep_below` on stay in memory: a later chunk that still matches its input is
    # appended from there instead of being computed again.
    previous.needs_rewrite = False
