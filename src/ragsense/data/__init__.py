"""Rows in and results out: the row schema (with RAGAS aliases), readers and writers, dataset loaders.

>>> rows = list(read_rows(sample_rows_path()))
>>> all(isinstance(row, RagRow) for row in rows)
True
"""

from __future__ import annotations

from importlib.resources import as_file, files
from pathlib import Path

from ragsense.data._datasets import (
    DATA_DIR_ENV,
    FaithBenchItem,
    HaluEvalItem,
    PubMedQAItem,
    SquadItem,
    WikiEvalItem,
    default_data_dir,
    load_faithbench,
    load_halueval,
    load_pubmedqa,
    load_squad_v2,
    load_wikieval,
)
from ragsense.data._files import open_output, write_output
from ragsense.data._io import SUFFIXES, RowError, RowOrError, parse_rows, read_files, read_rows
from ragsense.data._labels import LABEL_FIELDS, LABEL_VALUES, label_field, label_verdict, shown_label
from ragsense.data._schema import ALIASES, RagRow, parse_row
from ragsense.data._tabular import (
    arrow_column,
    parquet_rows,
    plain_record,
    plain_value,
    require_module,
    write_parquet,
)
from ragsense.data._writers import JsonlWriter, dumps_json, write_csv, write_jsonl


def sample_rows_path() -> Path:
    """The bundled sample file: 10 small RAG rows with a ``case`` (grounded, invented, partial, refusal) and
    the verdict a reader expects of each (``expected``: grounded, ungrounded, unsure, refusal).

    >>> sample_rows_path().name
    'sample_rag.jsonl'
    """
    resource = files("ragsense.data").joinpath("samples", "sample_rag.jsonl")
    # Installed packages are plain directories, so the path stays valid after the context exits.
    with as_file(resource) as path:
        return Path(path)


__all__ = [
    "ALIASES",
    "DATA_DIR_ENV",
    "LABEL_FIELDS",
    "LABEL_VALUES",
    "SUFFIXES",
    "FaithBenchItem",
    "HaluEvalItem",
    "JsonlWriter",
    "PubMedQAItem",
    "RagRow",
    "RowError",
    "RowOrError",
    "SquadItem",
    "WikiEvalItem",
    "arrow_column",
    "default_data_dir",
    "dumps_json",
    "label_field",
    "label_verdict",
    "load_faithbench",
    "load_halueval",
    "load_pubmedqa",
    "load_squad_v2",
    "load_wikieval",
    "open_output",
    "parquet_rows",
    "parse_row",
    "parse_rows",
    "plain_record",
    "plain_value",
    "read_files",
    "read_rows",
    "require_module",
    "sample_rows_path",
    "shown_label",
    "write_csv",
    "write_jsonl",
    "write_output",
    "write_parquet",
]
