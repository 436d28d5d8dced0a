"""Every kind of data ``evaluate`` takes, turned into the one row stream the runner reads.

* a path (``.jsonl``, ``.json``, ``.csv``, ``.parquet``) or ``"-"`` for JSONL on stdin;
* a list (or any iterable) of dicts or :class:`~ragsense.data.RagRow`;
* a pandas ``DataFrame`` (``pandas`` extra);
* a Hugging Face ``datasets.Dataset`` (``datasets`` extra);
* a RAGAS ``EvaluationDataset`` (``ragas`` extra): its samples' ``user_input``, ``retrieved_contexts``,
  ``response`` and ``reference`` are RAGAS's own field names, which ragsense reads as they are;
* the rows of a trace export, :func:`ragsense.traces.read_traces` (``traces`` extra): OTLP, Phoenix or
  Langfuse, one row per trace with a retriever and an LLM span, its ``trace_id`` and ``span_id`` kept.

Rows are parsed without requiring an answer: each metric says what it needs, so a row without an
answer is still scored by a metric that makes its own (correctness) and marked for the others.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ragsense.data import RagRow, RowOrError, parse_rows, plain_record, read_rows
from ragsense.errors import ParameterError
from ragsense.traces import TraceRows

Data = str | os.PathLike[str] | Iterable[Mapping[str, Any] | RagRow] | Any
"""What ``evaluate`` accepts as data (see the module docstring)."""


class _Rows(list[RowOrError]):
    """Parsed rows, materialized so the runner knows their count (for the progress bar)."""


def _kind(data: Any) -> str:
    cls = type(data)
    return f"{cls.__module__.split('.')[0]}.{cls.__name__}"


def rows_from(data: Data) -> Iterable[RowOrError]:
    """The rows of ``data`` in order: a :class:`RagRow` or a :class:`~ragsense.data.RowError` each.

    >>> [type(r).__name__ for r in rows_from([{"question": "Q?", "context": "C.", "answer": "A."}, {}])]
    ['RagRow', 'RowError']
    """
    if isinstance(data, TraceRows):  # already parsed, its malformed traces already row errors
        return data
    if isinstance(data, str | os.PathLike):
        return read_rows(data if str(data) == "-" else Path(data), require_answer=False)
    source: Any = data  # pandas, datasets and ragas objects are duck-typed: their packages are optional
    kind = _kind(data)
    if kind == "pandas.DataFrame":
        return _Rows(
            parse_rows((plain_record(r) for r in source.to_dict(orient="records")), require_answer=False)
        )
    if kind == "datasets.Dataset":
        return _Rows(parse_rows((plain_record(r) for r in source), require_answer=False))
    if kind.startswith("ragas.") and callable(getattr(data, "to_list", None)):
        # EvaluationDataset.to_list() gives one dict per sample under RAGAS's field names.
        return _Rows(parse_rows((plain_record(r) for r in source.to_list()), require_answer=False))
    if isinstance(data, Mapping) or not isinstance(data, Iterable):
        raise ParameterError(
            f"cannot read rows from a {kind}: give a path, a list of dicts, a pandas DataFrame, a Hugging "
            "Face Dataset or a RAGAS EvaluationDataset",
            parameter="data",
        )
    return _Rows(_mixed(list(source)))


def _mixed(items: list[Mapping[str, Any] | RagRow]) -> Iterator[RowOrError]:
    """Dicts are parsed (ids checked for repeats among them), RagRow objects pass as they are."""
    raws = [
        plain_record(item) if isinstance(item, Mapping) else item
        for item in items
        if not isinstance(item, RagRow)
    ]
    parsed = iter(parse_rows(raws, require_answer=False))
    for item in items:
        yield item if isinstance(item, RagRow) else next(parsed)
