"""The evaluation spine: one ``Metric`` contract, one runner, one way to evaluate with every metric,
on the engine asked for (:mod:`ragsense.evaluation.engines`: this process or a Ray cluster).

>>> from ragsense.evaluation import evaluate
>>> run = evaluate([{"question": "Who designs proteins?",
...                  "contexts": ["David Baker designs proteins."], "answer": "David Baker."}],
...                "consens", model="fake", progress=False)
>>> run.rows[0]["verdict"]
'grounded'
"""

from ragsense.contract import (
    INPUT,
    ROW_FIELDS,
    ErrorRecord,
    Metric,
    Needs,
    RowOutcome,
    RunItem,
    Step,
)
from ragsense.evaluation._api import aevaluate, evaluate
from ragsense.evaluation._evaluation import (
    Evaluation,
    MetricInfo,
    MetricSummary,
    ScoreSummary,
    Summary,
    errors_of,
    summarize,
)
from ragsense.evaluation._inputs import Data, rows_from
from ragsense.evaluation._outputs import (
    OUTPUT_SUFFIXES,
    FinalFile,
    check_free,
    check_output,
    claim_output,
    save_rows,
    working_file,
)
from ragsense.evaluation._registry import (
    DEFAULT_METRICS,
    ENTRY_POINT_GROUP,
    available_metrics,
    create_metric,
    resolve_metrics,
)
from ragsense.evaluation._runner import ResultCountError, RunStats, Shape, run_rows
from ragsense.evaluation.engines import (
    DEFAULT_CHUNK_SIZE,
    Engine,
    EngineSpec,
    EvaluateRequest,
    LocalEngine,
    RayEngine,
    read_shards,
    require_ray,
)

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_METRICS",
    "ENTRY_POINT_GROUP",
    "INPUT",
    "OUTPUT_SUFFIXES",
    "ROW_FIELDS",
    "Data",
    "Engine",
    "EngineSpec",
    "ErrorRecord",
    "EvaluateRequest",
    "Evaluation",
    "FinalFile",
    "LocalEngine",
    "Metric",
    "MetricInfo",
    "MetricSummary",
    "Needs",
    "RayEngine",
    "ResultCountError",
    "RowOutcome",
    "RunItem",
    "RunStats",
    "ScoreSummary",
    "Shape",
    "Step",
    "Summary",
    "aevaluate",
    "available_metrics",
    "check_free",
    "check_output",
    "claim_output",
    "create_metric",
    "errors_of",
    "evaluate",
    "read_shards",
    "require_ray",
    "resolve_metrics",
    "rows_from",
    "run_rows",
    "save_rows",
    "summarize",
    "working_file",
]
