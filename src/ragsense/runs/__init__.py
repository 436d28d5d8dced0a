"""Runs kept, compared and gated: the run store (SQLite), paired comparison of two runs, CI gates.

``ragsense evaluate`` records every run in the store (docs/runs.md); ``ragsense runs`` lists them,
``ragsense compare A B`` compares two, ``ragsense report`` draws one or two as a web page, and
``--fail-under``/``--max-share``/``--junit`` gate a run in CI.

>>> import tempfile, pathlib
>>> store = RunStore(pathlib.Path(tempfile.mkdtemp()) / "runs.sqlite")
>>> for tag, shift in (("before", 0.0), ("after", 0.1)):
...     rec = store.start(metrics=[{"name": "consens", "scores": ["consens"], "verdict": "verdict"}], tag=tag)
...     rec.add_rows([{"id": str(i), "_row": i, "consens": i / 10 + shift} for i in range(5)])
...     rec.finish({})
>>> c = compare_runs(store, "before", "after")
>>> c.n_shared, c.scores[0].n_better
(5, 5)
"""

from ragsense.runs._compare import (
    Comparison,
    RowChange,
    ScoreComparison,
    VerdictComparison,
    compare_rows,
    compare_runs,
    format_comparison,
)
from ragsense.runs._gates import (
    ERRORS,
    EXIT_GATE_FAILED,
    Gate,
    GateResult,
    GateSpecError,
    check_gate_names,
    check_gates,
    parse_gates,
    row_failures,
    write_junit,
)
from ragsense.runs._schema import SCHEMA_VERSION, StoreVersionError
from ragsense.runs._store import (
    COMPLETE,
    INCOMPLETE,
    RUN_ID,
    RUNNING,
    STORE_ENV,
    InputHasher,
    RunIdError,
    RunNotFoundError,
    RunRecorder,
    RunStore,
    StoredRun,
    check_run_id,
    default_store_path,
)

__all__ = [
    "COMPLETE",
    "ERRORS",
    "EXIT_GATE_FAILED",
    "INCOMPLETE",
    "RUNNING",
    "RUN_ID",
    "SCHEMA_VERSION",
    "STORE_ENV",
    "Comparison",
    "Gate",
    "GateResult",
    "GateSpecError",
    "InputHasher",
    "RowChange",
    "RunIdError",
    "RunNotFoundError",
    "RunRecorder",
    "RunStore",
    "ScoreComparison",
    "StoreVersionError",
    "StoredRun",
    "VerdictComparison",
    "check_gate_names",
    "check_gates",
    "check_run_id",
    "compare_rows",
    "compare_runs",
    "default_store_path",
    "format_comparison",
    "parse_gates",
    "row_failures",
    "write_junit",
]
