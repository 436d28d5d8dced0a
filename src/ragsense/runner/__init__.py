"""A resumable, metric-independent batch runner: fixed chunks, error rows, durable appends, progress.

>>> from ragsense.data import read_rows, sample_rows_path
>>> import tempfile, pathlib
>>> out = pathlib.Path(tempfile.mkdtemp()) / "out.jsonl"
>>> summary = run_batch(read_rows(sample_rows_path()), lambda rows: [{} for _ in rows], out, progress=False)
>>> summary.n_errors
0
"""

from __future__ import annotations

from ragsense.runner._runner import ProcessChunk, ResultCountError, RunSummary, run_batch

__all__ = ["ProcessChunk", "ResultCountError", "RunSummary", "run_batch"]
