"""Parquet files and dataframe values: what the optional ``parquet`` and ``pandas`` extras read and write.

Values from pandas, Arrow and Hugging Face datasets arrive as numpy scalars and arrays, and a missing
cell as NaN; :func:`plain_value` turns them into the plain Python values rows are made of (a missing
cell becomes ``None``, never NaN).
"""

from __future__ import annotations

import base64
import datetime
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ragsense.data._files import write_output
from ragsense.errors import BackendUnavailableError, InputError


def require_module(module: str, extra: str, purpose: str) -> Any:
    """Import an optional dependency, or say which extra to install.

    >>> require_module("json", "none", "testing").__name__
    'json'
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise BackendUnavailableError(
            f"{purpose} needs the optional package {module.split('.')[0]!r}: pip install 'ragsense[{extra}]'"
        ) from exc


def plain_value(value: Any) -> Any:
    """A plain Python value: numpy scalars and arrays to Python, NaN and NA to ``None``.

    >>> import numpy as np
    >>> plain_value(np.array(["a", "b"])), plain_value(np.float32(0.5)), plain_value(float("nan"))
    (['a', 'b'], 0.5, None)
    """
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): plain_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_value(v) for v in value]
    tolist = getattr(value, "tolist", None)
    if callable(tolist):  # numpy scalar or array
        return plain_value(tolist())
    if type(value).__name__ in {"NAType", "NaTType"}:  # pandas' missing markers
        return None
    return value


def json_value(value: Any) -> Any:
    """``value`` as something JSON holds, for input fields that are carried into output rows as they
    are: dates and times as ISO text, bytes as base64 text, decimals (and anything else JSON has no
    type for) as their ``str``; containers element by element.

    Arrow columns of any type reach rows this way (a Parquet file with a timestamp, binary, decimal or
    date column), and an extra field must pass through, not end the run when the row is written.

    >>> import datetime as dt, decimal
    >>> json_value({"at": dt.datetime(2026, 1, 2, 3, 4), "raw": b"\\x00\\xff", "d": decimal.Decimal("1.50")})
    {'at': '2026-01-02T03:04:00', 'raw': 'AP8=', 'd': '1.50'}
    """
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    # Decimals, durations and anything else JSON has no type for: their own text, which loses nothing
    # a reader of the output needs (a float would round a decimal).
    return str(value)


def plain_record(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A row of plain values; columns whose value is missing are dropped (an absent field)."""
    record = {str(k): plain_value(v) for k, v in raw.items()}
    return {k: v for k, v in record.items() if v is not None}


def parquet_rows(file: Path) -> Iterator[dict[str, Any]]:
    """The rows of a Parquet file as plain dicts, read a batch at a time.

    The file is opened here, before the first row is asked for, so a file that is not Parquet is an
    :class:`~ragsense.errors.InputError` (a usage error) before a run starts, not an Arrow traceback
    in the middle of one. Values keep their Python types (a ``datetime`` stays one, so a needed field
    of the wrong type is a row error); the row parser makes the other fields JSON values.
    """
    pq = require_module("pyarrow.parquet", "parquet", "reading Parquet")
    pa = require_module("pyarrow", "parquet", "reading Parquet")
    try:
        handle = pq.ParquetFile(file)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"cannot read {str(file)!r} as Parquet: {exc}") from None
    return _parquet_batches(handle)


def _parquet_batches(handle: Any) -> Iterator[dict[str, Any]]:
    for batch in handle.iter_batches(batch_size=1024):
        for raw in batch.to_pylist():
            yield plain_record(raw)


def arrow_column(values: list[Any]) -> Any:
    """An Arrow array for one column: scalars typed, lists of strings as lists, other nested values as
    JSON text (metric details vary in shape from row to row; JSON keeps them whole)."""
    import pyarrow as pa

    def nested(v: Any) -> bool:
        return isinstance(v, Mapping) or (isinstance(v, list) and not all(isinstance(x, str) for x in v))

    if any(nested(v) for v in values):
        return pa.array(
            [None if v is None else json.dumps(v, ensure_ascii=False, allow_nan=False) for v in values]
        )
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        # Mixed scalar types in one column (a number in some rows, text in others): keep them as JSON.
        return pa.array(
            [None if v is None else json.dumps(v, ensure_ascii=False, allow_nan=False) for v in values]
        )


def write_parquet(path: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]]) -> int:
    """Write rows to a Parquet file; returns the row count. Columns are the union of the rows' keys in
    first-seen order; nested values (other than lists of strings) are stored as JSON text."""
    pa = require_module("pyarrow", "parquet", "writing Parquet")
    pq = require_module("pyarrow.parquet", "parquet", "writing Parquet")
    materialized = [dict(row) for row in rows]
    columns: dict[str, None] = {}
    for row in materialized:
        columns.update(dict.fromkeys(row))
    table = pa.table({name: arrow_column([row.get(name) for row in materialized]) for name in columns})
    buffer = pa.BufferOutputStream()
    pq.write_table(table, buffer)
    write_output(path, buffer.getvalue().to_pybytes(), overwrite=True)
    return len(materialized)
