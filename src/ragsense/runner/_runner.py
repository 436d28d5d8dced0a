"""A resumable batch runner, independent of any metric.

It feeds rows to a ``process_chunk`` function in fixed chunks of the input order and appends each finished
chunk to a JSONL file. Chunk ``k`` is always input rows ``k*chunk_size ... (k+1)*chunk_size - 1``, whatever
was already done, because batch composition can change a model's float results: a resumed run must
compute exactly what a fresh run computes.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Literal, TypeAlias

from tqdm import tqdm

from ragsense.data import JsonlWriter, RagRow, RowError, RowOrError, dumps_json
from ragsense.errors import InputError

logger = logging.getLogger(__name__)

ProcessChunk: TypeAlias = Callable[[list[RagRow]], Sequence[Mapping[str, Any] | Exception]]
"""Takes the valid rows of one chunk, returns per row, in order, a dict of result fields or the
exception that marks that row (an :class:`~ragsense.errors.InputError` names its field)."""

MAX_REPORTED_ERRORS = 20


@dataclass
class RunSummary:
    """What a run did. Counts cover the whole output file, resumed rows included.

    ``errors`` holds the first 20 error rows as ``(row index, field or None, message)``.
    """

    n_rows: int = 0
    n_ok: int = 0
    n_errors: int = 0
    n_skipped_resumed: int = 0
    seconds: float = 0.0
    errors: list[tuple[int, str | None, str]] = field(default_factory=list)

    def _count(self, index: int, error: tuple[str | None, str] | None) -> None:
        self.n_rows += 1
        if error is None:
            self.n_ok += 1
            return
        self.n_errors += 1
        if len(self.errors) < MAX_REPORTED_ERRORS:
            self.errors.append((index, *error))

    def __str__(self) -> str:
        resumed = f", {self.n_skipped_resumed} resumed" if self.n_skipped_resumed else ""
        return f"{self.n_rows} rows: {self.n_ok} ok, {self.n_errors} errors{resumed} in {self.seconds:.1f} s"


@dataclass
class _Previous:
    """What an existing output file already holds, by input row index."""

    ids: dict[int, str | None]
    errors: dict[int, tuple[str | None, str] | None]
    needs_rewrite: bool  # a truncated or unterminated last line, duplicates or blank lines


def run_batch(
    rows: Iterable[RowOrError],
    process_chunk: ProcessChunk,
    out_path: str | os.PathLike[str],
    *,
    chunk_size: int = 16,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool | Literal["always"] = True,
    desc: str = "ragsense",
) -> RunSummary:
    """Run ``process_chunk`` over ``rows`` in fixed chunks, appending results to the JSONL ``out_path``.

    Each output row is the input row's fields (under their original names), then the result fields
    (which replace an input field of the same name), then ``"_row"``: the row's 0-based position in
    ``rows``. A bad input row (a :class:`~ragsense.data.RowError`) or a row whose processing failed gets
    ``"error": {"field": ..., "message": ...}`` instead of result fields. When ``process_chunk`` raises
    for a chunk, its rows are retried one by one so that only the failing rows are marked.

    With ``resume=True`` an existing output is continued: leading chunks whose rows are all present are
    skipped (without calling ``process_chunk``); from the first incomplete chunk on, the file is cut back
    and computed afresh. Resume with the same input and ``chunk_size``. Without ``resume``, an existing
    output raises :class:`FileExistsError` unless ``overwrite=True``.

    ``progress``: a tqdm bar on stderr when it is a terminal (``"always"``: in any case; False: never).

    >>> import tempfile, pathlib
    >>> from ragsense.data import parse_rows
    >>> rows = parse_rows([{"question": "Q?", "context": "C.", "answer": "A."}] * 3)
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "out.jsonl"
    >>> summary = run_batch(rows, lambda chunk: [{"n": len(r.answer)} for r in chunk], out, progress=False)
    >>> summary.n_ok, summary.n_errors
    (3, 0)
    >>> out.read_text().splitlines()[0]
    '{"id": "0", "question": "Q?", "context": "C.", "answer": "A.", "n": 2, "_row": 0}'
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    path = Path(out_path)
    previous: _Previous | None = None
    if path.exists():
        if resume:
            previous = _read_previous(path)
        elif not overwrite:
            raise FileExistsError(
                f"output file {str(path)!r} already exists; continue it with resume=True (--resume) "
                "or replace it with overwrite=True (--overwrite)"
            )

    summary = RunSummary()
    started = time.perf_counter()
    total = len(rows) if isinstance(rows, Sized) else None
    show = progress == "always" or (progress is True and sys.stderr.isatty())
    bar = tqdm(total=total, desc=desc, unit="row", disable=not show, file=sys.stderr)
    # A fresh run truncates now, so even an empty input leaves a valid (empty) output file.
    writer: JsonlWriter | None = None if previous is not None else JsonlWriter(path)
    try:
        for start, chunk in _chunks(rows, chunk_size):
            if writer is None:
                assert previous is not None
                if _already_done(previous, start, chunk, path):
                    for offset in range(len(chunk)):
                        summary._count(start + offset, previous.errors[start + offset])
                    summary.n_skipped_resumed += len(chunk)
                    bar.update(len(chunk))
                    continue
                # First incomplete chunk: drop it and anything after it, then append from here.
                _cut_back(path, previous, keep_below=start)
                writer = JsonlWriter(path, append=True)
            out_rows = _process(start, chunk, process_chunk)
            writer.write_batch(out_rows)
            for out in out_rows:
                summary._count(out["_row"], _error_of(out))
            bar.update(len(chunk))
        if writer is None and previous is not None:
            _finish_resume(path, previous, n_rows=summary.n_rows)
    finally:
        if writer is not None:
            writer.close()
        bar.close()
    summary.seconds = time.perf_counter() - started
    return summary


def _chunks(rows: Iterable[RowOrError], size: int) -> Iterator[tuple[int, list[RowOrError]]]:
    iterator = iter(rows)
    start = 0
    while chunk := list(islice(iterator, size)):
        yield start, chunk
        start += len(chunk)


def _already_done(previous: _Previous, start: int, chunk: list[RowOrError], path: Path) -> bool:
    positions = range(start, start + len(chunk))
    if not all(index in previous.ids for index in positions):
        return False
    for index, item in zip(positions, chunk, strict=True):
        old, new = previous.ids[index], item.id
        if old is not None and new is not None and old != new:
            raise ValueError(
                f"cannot resume {str(path)!r}: its row {index} has id {old!r} but the input's has {new!r}, "
                "so it was written for a different input; use overwrite=True (--overwrite) to start over"
            )
    return True


def _finish_resume(path: Path, previous: _Previous, *, n_rows: int) -> None:
    """Every input chunk was already done; check nothing is left over and tidy the file if needed."""
    extra = [index for index in previous.ids if index >= n_rows]
    if extra:
        raise ValueError(
            f"cannot resume {str(path)!r}: it holds rows up to {max(extra)} but the input has only "
            f"{n_rows} rows, so it was written for a different input; use overwrite=True (--overwrite)"
        )
    if previous.needs_rewrite:
        _cut_back(path, previous, keep_below=n_rows)


def _error_of(record: Mapping[str, Any]) -> tuple[str | None, str] | None:
    error = record.get("error")
    if error is None:
        return None
    if isinstance(error, Mapping):
        return error.get("field"), str(error.get("message", ""))
    return None, str(error)


def _parse_output_line(line: str) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None


def _read_previous(path: Path) -> _Previous:
    with path.open(encoding="utf-8") as handle:
        lines = handle.readlines()
    ids: dict[int, str | None] = {}
    errors: dict[int, tuple[str | None, str] | None] = {}
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
            raise ValueError(
                f"cannot resume {str(path)!r}: line {number} is not a ragsense output row (no valid JSON "
                "with a '_row' index); fix the file or use overwrite=True (--overwrite)"
            )
        if is_last and not line.endswith("\n"):
            needs_rewrite = True  # appending would glue the next row onto this line
        if row in ids:
            needs_rewrite = True  # keep the first copy
            continue
        row_id = record.get("id")
        ids[row] = None if row_id is None else str(row_id)
        errors[row] = _error_of(record)
    return _Previous(ids=ids, errors=errors, needs_rewrite=needs_rewrite)


def _cut_back(path: Path, previous: _Previous, *, keep_below: int) -> None:
    """Rewrite the output keeping only rows with ``_row < keep_below`` (first copies, complete lines)."""
    if not previous.needs_rewrite and all(index < keep_below for index in previous.ids):
        return
    kept: list[str] = []
    seen: set[int] = set()
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            record = _parse_output_line(line) if line.strip() else None
            if record is None:
                continue
            row = record["_row"]
            if row < keep_below and row not in seen:
                seen.add(row)
                kept.append(line if line.endswith("\n") else line + "\n")
    dropped = len(previous.ids) - len(seen)
    if dropped:
        logger.info(
            "resume: recomputing from row %d; dropped %d partial row(s) of %s", keep_below, dropped, path
        )
    # Write aside and swap in, so a crash during the rewrite leaves the old file whole.
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", encoding="utf-8", newline="\n") as handle:
        handle.write("".join(kept))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    for index in [index for index in previous.ids if index >= keep_below]:
        del previous.ids[index]
        del previous.errors[index]
    previous.needs_rewrite = False


def _error_row(record: dict[str, Any], index: int, field_name: str | None, message: str) -> dict[str, Any]:
    return {**record, "error": {"field": field_name, "message": message}, "_row": index}


def _describe(exc: Exception) -> tuple[str | None, str]:
    if isinstance(exc, InputError):
        return exc.field, exc.reason
    return None, f"{type(exc).__name__}: {exc}"


class ResultCountError(ValueError):
    """``process_chunk`` returned a different number of results than rows it was given."""


def _checked(
    result: Sequence[Mapping[str, Any] | Exception], expected: int
) -> Sequence[Mapping[str, Any] | Exception]:
    if len(result) != expected:
        # A programming error in the metric, not a property of the rows: stop rather than misalign rows.
        raise ResultCountError(f"process_chunk returned {len(result)} results for {expected} rows")
    return result


def _results(rows: list[RagRow], process_chunk: ProcessChunk) -> list[Mapping[str, Any] | Exception]:
    """Result fields for each row, or the exception that row raised."""
    try:
        return list(_checked(process_chunk(rows), len(rows)))
    except ResultCountError:
        raise
    except Exception as exc:  # any failure of the metric: isolate the failing rows below
        chunk_error = exc
    if len(rows) == 1:
        return [chunk_error]
    logger.warning("a chunk failed (%s); retrying its %d rows one by one", chunk_error, len(rows))
    results: list[Mapping[str, Any] | Exception] = []
    for row in rows:
        try:
            results.append(_checked(process_chunk([row]), 1)[0])
        except ResultCountError:
            raise
        except Exception as exc:
            results.append(exc)
    return results


def _process(start: int, chunk: list[RowOrError], process_chunk: ProcessChunk) -> list[dict[str, Any]]:
    valid = [item for item in chunk if isinstance(item, RagRow)]
    results = iter(_results(valid, process_chunk) if valid else [])
    out_rows: list[dict[str, Any]] = []
    for offset, item in enumerate(chunk):
        index = start + offset
        if isinstance(item, RowError):
            out_rows.append(_error_row(item.to_record(), index, item.field, item.message))
            continue
        record = item.to_record()
        result = next(results)
        if isinstance(result, Exception):
            out_rows.append(_error_row(record, index, *_describe(result)))
            continue
        out = {**record, **result, "_row": index}
        try:
            dumps_json(out)
        except (ValueError, TypeError) as exc:
            # One unwritable result (a NaN, an odd type) marks its own row instead of ending the run.
            out = _error_row(record, index, None, f"result could not be written: {exc}")
        out_rows.append(out)
    return out_rows
