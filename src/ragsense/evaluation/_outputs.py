"""Writing an evaluation's rows by the output's extension: ``.jsonl``, ``.csv``, ``.parquet``, ``-``.

During a run, chunks are appended to JSONL as they finish (durable, resumable). For a CSV or Parquet
output that JSONL is a working file beside it, ``OUT.partial.jsonl``; when the run ends the final
file is written in one piece and the working file removed. ``--resume`` continues from the working
file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ragsense.data import write_csv, write_jsonl, write_parquet
from ragsense.errors import ParameterError

OUTPUT_SUFFIXES = (".jsonl", ".csv", ".parquet")


def check_output(path: str | os.PathLike[str]) -> str:
    """The output format of ``path`` (``jsonl``, ``csv``, ``parquet``), or a clear error.

    >>> check_output("scores.parquet"), check_output("-")
    ('parquet', 'jsonl')
    """
    if str(path) == "-":
        return "jsonl"
    suffix = Path(path).suffix.lower()
    if suffix not in OUTPUT_SUFFIXES:
        raise ParameterError(
            f"cannot write {str(path)!r}: use a .jsonl, .csv or .parquet output (or - for JSONL on stdout)",
            parameter="output",
        )
    return suffix[1:]


def working_file(path: str | os.PathLike[str]) -> Path:
    """Where a run appends its chunks: the output itself for JSONL, else a ``.partial.jsonl`` beside it."""
    target = Path(path)
    return target if check_output(path) == "jsonl" else target.with_name(target.name + ".partial.jsonl")


def save_rows(path: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]]) -> Path:
    """Write ``rows`` to ``path`` in the format its extension names; returns the path."""
    kind = check_output(path)
    if kind == "csv":
        write_csv(path, rows)
    elif kind == "parquet":
        write_parquet(path, rows)
    else:
        write_jsonl(path, rows)
    return Path(path)
