"""ragsense: does a RAG answer come from its context, is it likely correct, which document does it rest on.

>>> import ragsense
>>> run = ragsense.evaluate(
...     [{"question": "What is David Baker known for?",
...       "contexts": ["David Baker is an American biochemist who designs proteins."],
...       "answer": "David Baker is a biochemist."}],
...     metrics=["consens"], model="fake", progress=False)
>>> -1.0 <= run.rows[0]["consens"] <= 1.0
True
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ragsense._version import __version__

if TYPE_CHECKING:
    from ragsense.consens import GroundingResult
    from ragsense.evaluation import Evaluation, RayEngine, aevaluate, evaluate
    from ragsense.metrics import ConSens, Correctness, Similarity, Vera, grounding, grounding_batch

# The top-level names load their modules on first use: ``import ragsense.runs`` (or pytest loading the
# ragsense.testing plug-in in every user's test run) should not pay for numpy, pydantic and every metric.
_LAZY = {
    "GroundingResult": "ragsense.consens",
    "Evaluation": "ragsense.evaluation",
    "RayEngine": "ragsense.evaluation",
    "aevaluate": "ragsense.evaluation",
    "evaluate": "ragsense.evaluation",
    "ConSens": "ragsense.metrics",
    "Correctness": "ragsense.metrics",
    "Similarity": "ragsense.metrics",
    "Vera": "ragsense.metrics",
    "grounding": "ragsense.metrics",
    "grounding_batch": "ragsense.metrics",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ragsense' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "ConSens",
    "Correctness",
    "Evaluation",
    "GroundingResult",
    "RayEngine",
    "Similarity",
    "Vera",
    "__version__",
    "aevaluate",
    "evaluate",
    "grounding",
    "grounding_batch",
]
