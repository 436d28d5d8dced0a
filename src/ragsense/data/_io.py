"""Reading rows from JSONL / JSON / CSV / Parquet files (writing them: :mod:`ragsense.data._writers`).

Reading never stops at a bad row: each data row yields either a :class:`RagRow` or a :class:`RowError`,
so a run can score the good rows and report the bad ones. Whatever a row holds (bytes that are not
UTF-8, nesting past any reader's depth, a number of thousands of digits, NaN) it is that row's error
naming its line or field; a file that cannot be split into rows at all (a CSV or ``.json`` file
with such bytes, nesting or numbers) is an :class:`~ragsense.errors.InputError` naming the file and
the place. Writing never lets a NaN or an infinity
through silently: a result that has no value must be written as ``None`` (JSON ``null``).
"""

from __future__ import annotations

import csv
import json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from ragsense.data._schema import RagRow, check_unique_id, given_id, parse_row
from ragsense.data._tabular import json_value, parquet_rows, plain_value
from ragsense.data._writers import nonfinite_path, unguard_csv_text
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
        # The bytes when there are any (a replaced sys.stdin, as in tests, may be text only).
        binary = getattr(sys.stdin, "buffer", None)
        lines = _utf8_lines(binary) if binary is not None else ((line, None) for line in sys.stdin)
        return _rows(_jsonl_records(lines, "standard input"), require_answer)
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
            # NaN (JSON as Python reads it allows NaN, Infinity and 1e999) would reach the output and
            # fail there, after scoring: the row's error now, naming the field.
            nonfinite = nonfinite_path(raw) if isinstance(raw, Mapping) else None
            if nonfinite is not None:
                message = "NaN or an infinite number: JSON has no such value (write null for none)"
                raise InputError(message, row=index, field=nonfinite)
            row = parse_row(raw, index, require_answer=require_answer)
            check_unique_id(row, index, seen)
        except InputError as exc:
            # The row's fields are carried into its output row: make them JSON values (see json_value),
            # a NaN among them null.
            fields = json_value(plain_value(dict(raw))) if isinstance(raw, Mapping) else None
            yield RowError(index, _safe_id(raw, index), exc.field, exc.reason, fields, line)
        except RecursionError:  # a field nested deeper than the readers of its value go
            yield RowError(index, None, None, "a field is nested too deeply to read", None, line)
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
    with file.open("rb") as handle:
        yield from _jsonl_records(_utf8_lines(handle), repr(str(file)))


def _utf8_lines(handle: Iterable[bytes]) -> Iterator[tuple[str, str | None]]:
    """Each line (split at "\n" only) decoded, or ``("", why)`` for one that is not UTF-8: one odd
    byte spoils its line, not the file. A byte-order mark (Windows tools write one) is dropped."""
    for number, data in enumerate(handle, start=1):
        if number == 1:
            data = data.removeprefix(b"\xef\xbb\xbf")
        try:
            yield data.decode("utf-8"), None
        except UnicodeDecodeError as exc:
            yield (
                "",
                f"line {number} is not UTF-8 text (byte 0x{data[exc.start]:02x} at column {exc.start + 1})",
            )


def _jsonl_records(lines: Iterable[tuple[str, str | None]], source: str) -> Iterator[_Record]:
    # Lines are numbered from 1 with blank ones counted, as editors number them: the message must lead
    # the user to the line, and a 0-based data-row index does not.
    for number, (line, problem) in enumerate(lines, start=1):
        if problem is not None:
            yield None, problem, number
            continue
        if not line.strip():
            continue
        text = line.rstrip("\r\n")
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            # The source is named: a row error's empty field once read as "-", standard input.
            yield text, f"not valid JSON ({exc.msg} at line {number}, column {exc.colno} of {source})", number
            continue
        except (RecursionError, ValueError) as exc:  # nesting, or an int of over 4,300 digits
            yield None, f"line {number}: {_unreadable(exc)}", number
            continue
        yield _as_object(value, number)


def _unreadable(exc: BaseException) -> str:
    """Why valid JSON could not be read: too deep for the parser, or a number Python will not read."""
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply to read"
    return f"a JSON number too long to read ({str(exc).split(';')[0]})"


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
    except UnicodeDecodeError as exc:
        raise InputError(f"{str(file)!r} is not UTF-8 text (byte {exc.start} of the file)") from None
    except (RecursionError, ValueError) as exc:
        raise InputError(f"{str(file)!r}: {_unreadable(exc)}; use .jsonl for one row a line") from None
    if not isinstance(data, list):
        raise InputError(f"{str(file)!r} must hold a JSON list of row objects, got {type(data).__name__}")
    for value in data:
        yield _as_object(value)


def _csv_records(file: Path) -> Iterator[_Record]:
    overflow = "\0overflow"  # restkey for cells beyond the header; cannot clash with a column name

    def lines(handle: Iterable[bytes]) -> Iterator[str]:
        # A record may span lines (a quoted line break), so a line that is not UTF-8 cannot be one
        # row's error: the file is refused, naming the line.
        for line, problem in _utf8_lines(handle):
            if problem is not None:
                raise InputError(f"{str(file)!r}: {problem}")
            yield line

    with file.open("rb") as handle:
        for record in csv.DictReader(lines(handle), restkey=overflow):
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
