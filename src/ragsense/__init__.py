"""ragsense: does a RAG answer come from its context, is it likely correct, which document does it rest on.

``evaluate`` (``aevaluate`` on an event loop) is the way in for scoring rows, with any of the metrics
(``consens``, ``attribution``, ``vera``, ``correctness``, ``similarity``, or plug-ins); each row comes
back with its input fields, each metric's fields and an ``errors`` list. ``grounding`` scores one
answer with ConSens through the same path.

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
    from ragsense._grounding import grounding
    from ragsense.consens import ConSens, GroundingResult
    from ragsense.correctness import Correctness
    from ragsense.evaluation import Evaluation, RayEngine, aevaluate, evaluate
    from ragsense.similarity import Similarity
    from ragsense.vera import Vera

# The top-level names load their modules on first use: ``import ragsense.runs`` (or pytest loading the
# ragsense.testing plug-in in every user's test run) should not pay for numpy, pydantic and every metric.
_LAZY = {
    "GroundingResult": "ragsense.consens",
    "Evaluation": "ragsense.evaluation",
    "RayEngine": "ragsense.evaluation",
    "aevaluate": "ragsense.evaluation",
    "evaluate": "ragsense.evaluation",
    "ConSens": "ragsense.consens",
    "Correctness": "ragsense.correctness",
    "Similarity": "ragsense.similarity",
    "Vera": "ragsense.vera",
    "grounding": "ragsense._grounding",
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
]
