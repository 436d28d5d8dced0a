"""Writing result rows to JSON Lines and CSV, never letting a NaN or an infinity through silently: a
result that has no value must be written as ``None`` (JSON ``null``). Finished files are written
through :func:`~ragsense.data._files.write_output`; JSON Lines as it goes, through
:func:`~ragsense.data._files.open_output` (never through a link).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from ragsense.data._files import open_output, write_output


def _to_json_value(value: Any) -> Any:
    # numpy scalars and arrays (what metrics usually return) have .tolist(); plain floats result.
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    raise TypeError(f"value of type {type(value).__name__} is not JSON serializable")


def nonfinite_path(value: Any, path: str = "") -> str | None:
    """Where the first NaN/infinity sits in a nested value, as a key path; None if nowhere."""
    if isinstance(value, float):
        return None if math.isfinite(value) else path or "(value)"
    if isinstance(value, Mapping):
        for key, item in value.items():
            found = nonfinite_path(item, f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = nonfinite_path(item, f"{path}[{i}]")
            if found is not None:
                return found
    elif callable(getattr(value, "tolist", None)):
        return nonfinite_path(value.tolist(), path)
    return None


def dumps_json(value: Any) -> str:
    """Serialize one value as compact JSON, refusing NaN and infinity.

    >>> dumps_json({"score": 0.5, "note": None})
    '{"score": 0.5, "note": null}'
    >>> dumps_json({"score": float("nan")})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: cannot write a NaN or infinite float at 'score': JSON has no such value; ...
    """
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, default=_to_json_value)
    except ValueError as exc:
        where = nonfinite_path(value)
        if where is None:
            raise
        raise ValueError(
            f"cannot write a NaN or infinite float at {where!r}: JSON has no such value; "
            "write None (null) for a missing result"
        ) from exc


class JsonlWriter:
    """Writes rows to a JSONL file, one batch at a time, each batch flushed and fsynced to disk.

    Because each :meth:`write_batch` is on disk before it returns, a run that is interrupted keeps every
    batch it finished. A batch is serialized completely before anything is written, so a row that
    cannot be written (NaN, unserializable value) leaves the file unchanged. ``path="-"`` writes to stdout.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "out.jsonl"
    >>> with JsonlWriter(p) as w:
    ...     w.write_batch([{"id": "a", "score": 1.0}, {"id": "b", "score": None}])
    2
    >>> p.read_text()
    '{"id": "a", "score": 1.0}\\n{"id": "b", "score": null}\\n'
    """

    def __init__(self, path: str | os.PathLike[str], *, append: bool = False) -> None:
        self._owned = str(path) != "-"
        self._handle: IO[str]
        if self._owned:
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            self._handle = open_output(target, append=append)
        else:
            self._handle = sys.stdout

    def write_batch(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Append rows and make them durable; returns how many were written."""
        lines = [dumps_json(dict(row)) + "\n" for row in rows]
        self._handle.write("".join(lines))
        self._handle.flush()
        if self._owned:
            os.fsync(self._handle.fileno())
        return len(lines)

    def write(self, row: Mapping[str, Any]) -> None:
        """Append one row (one fsync: prefer :meth:`write_batch` for many)."""
        self.write_batch([row])

    def close(self) -> None:
        if self._owned and not self._handle.closed:
            self._handle.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def write_jsonl(
    path: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]], *, batch_size: int = 1000
) -> int:
    """Write rows to a JSONL file (replacing it; ``-`` for stdout); returns the row count.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "out.jsonl"
    >>> write_jsonl(p, [{"id": "a"}, {"id": "b"}])
    2
    """
    count = 0
    batch: list[Mapping[str, Any]] = []
    with JsonlWriter(path) as writer:
        for row in rows:
            batch.append(row)
            if len(batch) >= batch_size:
                count += writer.write_batch(batch)
                batch = []
        count += writer.write_batch(batch)
    return count


CSV_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What a spreadsheet reads as the start of a formula: a text cell starting so is written with a
``'`` before it (OWASP's advice against CSV injection)."""


def guard_csv_text(text: str) -> str:
    """A text cell as written to CSV: ``'`` put before one a spreadsheet would run as a formula.

    A cell that is already ``'`` followed by such a start gets one more ``'``, so
    :func:`unguard_csv_text` gives back every original value exactly.

    >>> guard_csv_text("=HYPERLINK(A1)"), guard_csv_text("'@SUM(A1)"), guard_csv_text("plain")
    ("'=HYPERLINK(A1)", "''@SUM(A1)", 'plain')
    """
    return "'" + text if text.lstrip("'").startswith(CSV_FORMULA_STARTS) else text


def unguard_csv_text(text: str) -> str:
    """A CSV cell as read: :func:`guard_csv_text` undone (one ``'`` before a formula start removed).

    >>> [unguard_csv_text(guard_csv_text(t)) for t in ["=1", "'=1", "''@x", "'a", "-", ""]]
    ['=1', "'=1", "''@x", "'a", '-', '']
    """
    if text.startswith("'") and text[1:].lstrip("'").startswith(CSV_FORMULA_STARTS):
        return text[1:]
    return text


def _csv_cell(value: Any, row: int, column: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        # Ids, questions and answers come from users and models: a cell such as =HYPERLINK(...) or
        # @SUM(...) would run in the spreadsheet that opens the file. Numbers (-0.5) are not text and
        # stay as they are.
        return guard_csv_text(value)
    try:
        # Lists and dicts become JSON, which read_rows parses back for a `contexts` column.
        return dumps_json(value)
    except ValueError as exc:
        raise ValueError(f"row {row}, column {column!r}: {exc}") from exc


def _csv_lines(records: Iterable[Sequence[str]]) -> Iterator[str]:
    r"""CSV records, each ending in ``\n``, every cell holding a CR or LF quoted.

    The csv module quotes a cell that holds a character of its line terminator, and only those: with
    ``\n`` alone a bare CR went out unquoted and a reader split the record there, the text after
    it a new record whose first cell no formula guard had seen (issue 38). So each record is written
    with ``\r\n`` (both quoted) and that ending, the record's last two characters, becomes ``\n``.

    >>> list(_csv_lines([["a", "Ada.\r=cmd", "x\ny"]]))
    ['a,"Ada.\r=cmd","x\ny"\n']
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    for cells in records:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(cells)
        yield buffer.getvalue()[:-2] + "\n"


def write_csv(path: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]]) -> int:
    """Write rows to a CSV file; returns the row count.

    Columns are the union of the rows' keys in first-seen order. ``None`` is an empty cell; numbers and
    booleans are written as JSON (``0.5``, ``true``); lists and dicts as JSON text. NaN/infinity raise.
    A text cell a spreadsheet would run as a formula (starting with ``=``, ``+``, ``-``, ``@``, a tab
    or a carriage return) is written with a ``'`` before it (:func:`guard_csv_text`, OWASP's advice
    against CSV injection), column names included; a cell holding a line break (CR or LF) is quoted,
    so it stays one cell. :func:`read_rows` removes the guard again, so the values round-trip.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "out.csv"
    >>> write_csv(p, [{"id": "a", "contexts": ["x", "y"]}, {"id": "b", "score": 0.5}])
    2
    >>> print(p.read_text(), end="")
    id,contexts,score
    a,"[""x"", ""y""]",
    b,,0.5
    """
    materialized = [dict(row) for row in rows]
    columns: dict[str, None] = {}
    for row in materialized:
        columns.update(dict.fromkeys(row))
    cells = [
        [_csv_cell(row.get(column), index, column) for column in columns]
        for index, row in enumerate(materialized)
    ]
    # Column names come from the input too: guarded like every other text cell.
    header = [guard_csv_text(str(column)) for column in columns]
    write_output(path, "".join(_csv_lines([header, *cells])), overwrite=True)
    return len(materialized)
