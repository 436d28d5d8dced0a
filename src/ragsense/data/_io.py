"""Reading rows from JSONL / JSON / CSV files and writing result rows to JSONL / CSV.

Reading never stops at a bad row: each data row yields either a :class:`RagRow` or a :class:`RowError`,
so a run can score the good rows and report the bad ones. Writing never lets a NaN or an infinity
through silently: a result that has no value must be written as ``None`` (JSON ``null``).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeAlias

from ragsense.data._schema import RagRow, check_unique_id, given_id, parse_row
from ragsense.data._tabular import json_value, parquet_rows
from ragsense.errors import InputError

SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")

# Long context passages exceed csv's default 128 KiB cell limit; the limit is process-wide, so raise it
# once here rather than fail on real data.
csv.field_size_limit(2**31 - 1)


@dataclass(frozen=True)
class RowError:
    """An input row that could not be used: where it is, which field, why, and what it held.

    ``index`` is the 0-based data row number; ``id`` the row's own id when it had a readable one;
    ``message`` the reason (without the row prefix); ``raw`` the row's fields, or the line's text when
    it was not even valid JSON; ``line`` the 1-based line of a JSONL file (blank lines counted, as an
    editor counts them), so a row without a readable id is found where an editor shows it.
    """

    index: int
    id: str | None
    field: str | None
    message: str
    raw: dict[str, Any] | str | None = None
    line: int | None = None

    def to_record(self) -> dict[str, Any]:
        """The input fields (unchanged) to carry into an output row."""
        return dict(self.raw) if isinstance(self.raw, dict) else {}

    def __str__(self) -> str:
        if self.id is not None:
            where = [f"row {self.id}"]
        elif self.line is not None:
            where = [f"line {self.line}"]
        else:
            where = [f"row {self.index}"]
        if self.field is not None:
            where.append(f"field {self.field!r}")
        return ", ".join(where) + ": " + self.message


RowOrError: TypeAlias = RagRow | RowError


# --------------------------------------------------------------------------------------------- reading


def read_rows(path: str | os.PathLike[str], *, require_answer: bool = True) -> Iterator[RowOrError]:
    """Read rows from a ``.jsonl``, ``.json`` (a list of objects), ``.csv`` or ``.parquet`` file, or ``-``
    (JSONL on stdin). Parquet needs the ``parquet`` extra (pyarrow).

    Yields one item per data row, in file order: a :class:`RagRow`, or a :class:`RowError` for a row
    that is malformed, misses a field, or repeats an earlier id. Blank JSONL lines are not data rows.
    A missing file or an unsupported suffix raises at once; a ``.json`` file that is not valid JSON
    raises :class:`~ragsense.errors.InputError`.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "rows.jsonl"
    >>> _ = p.write_text('{"question": "Q?", "context": "C.", "answer": "A."}\\n{oops\\n')
    >>> [type(r).__name__ for r in read_rows(p)]
    ['RagRow', 'RowError']
    """
    if str(path) == "-":
        return _rows(_jsonl_records(sys.stdin, "standard input"), require_answer)
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in SUFFIXES:
        raise InputError(
            f"cannot read {str(file)!r}: unsupported file type {suffix or '(none)'!r}; "
            "use .jsonl, .json, .csv or .parquet (or - for JSONL on stdin)"
        )
    if not file.is_file():
        raise FileNotFoundError(f"input file not found: {str(file)!r}")
    return _rows(_file_records(file), require_answer)


def read_files(
    files: Iterable[str | os.PathLike[str]], *, require_answer: bool = True
) -> Iterator[RowOrError]:
    """The rows of several files read as one input, in order: each file as :func:`read_rows` reads it,
    the rows numbered and their ids checked for repeats across all the files (the Ray engine's input).

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "a.jsonl").write_text('{"id": "1", "question": "Q?", "context": "C.", "answer": "A."}\\n')
    >>> _ = (d / "b.jsonl").write_text('{"id": "1", "question": "Q?", "context": "C.", "answer": "B."}\\n')
    >>> [type(r).__name__ for r in read_files([d / "a.jsonl", d / "b.jsonl"])]
    ['RagRow', 'RowError']
    """

    def records() -> Iterator[_Record]:
        for file in files:
            yield from _file_records(Path(file))

    return _rows(records(), require_answer)


def _file_records(file: Path) -> Iterator[_Record]:
    """One file's records, by its suffix (``.jsonl`` for any other)."""
    suffix = file.suffix.lower()
    if suffix == ".json":
        return _json_records(file)
    if suffix == ".csv":
        return _csv_records(file)
    if suffix == ".parquet":
        return ((raw, None, None) for raw in parquet_rows(file))
    return _jsonl_file_records(file)


# A record is (raw fields, None, line) or (raw text, why it is not a row, line); line is the 1-based
# line of a JSONL file, None for other sources.
_Record: TypeAlias = tuple[Any, str | None, int | None]


def parse_rows(raws: Iterable[Mapping[str, Any]], *, require_answer: bool = True) -> Iterator[RowOrError]:
    """Parse in-memory rows (dicts) in order, yielding a :class:`RagRow` or a :class:`RowError` for each.

    The same checks as :func:`read_rows`, a repeated id included, for rows that are not in a file.

    >>> rows = [{"id": "a", "question": "Q?", "context": "C.", "answer": "A."}] * 2
    >>> [type(r).__name__ for r in parse_rows(rows)]
    ['RagRow', 'RowError']
    """
    return _rows(((raw, None, None) for raw in raws), require_answer)


def _rows(records: Iterable[_Record], require_answer: bool) -> Iterator[RowOrError]:
    seen: set[str] = set()
    for index, (raw, problem, line) in enumerate(records):
        if problem is not None:
            yield RowError(index, None, None, problem, raw, line)
            continue
        try:
            row = parse_row(raw, index, require_answer=require_answer)
            check_unique_id(row, index, seen)
        except InputError as exc:
            # The row's fields are carried into its output row: make them JSON values (see json_value).
            fields = json_value(dict(raw)) if isinstance(raw, Mapping) else None
            yield RowError(index, _safe_id(raw, index), exc.field, exc.reason, fields, line)
        else:
            yield row


def _safe_id(raw: Any, index: int) -> str | None:
    if not isinstance(raw, Mapping):
        return None
    try:
        return given_id(raw, index)
    except InputError:
        return None


def _jsonl_file_records(file: Path) -> Iterator[_Record]:
    # utf-8-sig: files saved by Windows tools often start with a byte-order mark.
    with file.open(encoding="utf-8-sig") as handle:
        yield from _jsonl_records(handle, repr(str(file)))


def _jsonl_records(lines: Iterable[str], source: str) -> Iterator[_Record]:
    # Lines are numbered from 1 with blank ones counted, as editors number them: the message must lead
    # the user to the line, and a 0-based data-row index does not.
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        text = line.rstrip("\r\n")
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            # The source is named: a row error's empty field once read as "-", standard input.
            yield text, f"not valid JSON ({exc.msg} at line {number}, column {exc.colno} of {source})", number
            continue
        yield _as_object(value, number)


def _as_object(value: Any, line: int | None = None) -> _Record:
    if isinstance(value, dict):
        return value, None, line
    where = "" if line is None else f" on line {line}"
    return (
        value if isinstance(value, str) else json.dumps(value),
        f"expected a JSON object with named fields{where}, got {type(value).__name__}",
        line,
    )


def _json_records(file: Path) -> Iterator[_Record]:
    try:
        with file.open(encoding="utf-8-sig") as handle:
            data = json.load(handle)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{str(file)!r} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
            "a .json input must be one list of row objects (use .jsonl for one object per line)"
        ) from exc
    if not isinstance(data, list):
        raise InputError(f"{str(file)!r} must hold a JSON list of row objects, got {type(data).__name__}")
    for value in data:
        yield _as_object(value)


def _csv_records(file: Path) -> Iterator[_Record]:
    overflow = "\0overflow"  # restkey for cells beyond the header; cannot clash with a column name
    with file.open(encoding="utf-8-sig", newline="") as handle:
        for record in csv.DictReader(handle, restkey=overflow):
            if overflow in record:
                yield dict(record), "row has more cells than the header has columns", None
                continue
            # A short row leaves the columns it lacks as None: treat them as absent. Cells guarded
            # against formula injection when written (write_csv) read back as they were.
            yield (
                {
                    unguard_csv_text(key): unguard_csv_text(value)
                    for key, value in record.items()
                    if value is not None
                },
                None,
                None,
            )


# --------------------------------------------------------------------------------------------- writing


def _to_json_value(value: Any) -> Any:
    # numpy scalars and arrays (what metrics usually return) have .tolist(); plain floats result.
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    raise TypeError(f"value of type {type(value).__name__} is not JSON serializable")


def _nonfinite_path(value: Any, path: str = "") -> str | None:
    """Where the first NaN/infinity sits in a nested value, as a key path; None if nowhere."""
    if isinstance(value, float):
        return None if math.isfinite(value) else path or "(value)"
    if isinstance(value, Mapping):
        for key, item in value.items():
            found = _nonfinite_path(item, f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = _nonfinite_path(item, f"{path}[{i}]")
            if found is not None:
                return found
    elif callable(getattr(value, "tolist", None)):
        return _nonfinite_path(value.tolist(), path)
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
        where = _nonfinite_path(value)
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
            self._handle = target.open("a" if append else "w", encoding="utf-8", newline="\n")
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
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(_csv_lines([header, *cells])), encoding="utf-8", newline="")
    return len(materialized)
