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

from ragsense._version import __version__
from ragsense.consens import GroundingResult
from ragsense.evaluation import Evaluation, aevaluate, evaluate
from ragsense.metrics import ConSens, Correctness, Similarity, Vera, grounding, grounding_batch

__all__ = [
    "ConSens",
    "Correctness",
    "Evaluation",
    "GroundingResult",
    "Similarity",
    "Vera",
    "__version__",
    "aevaluate",
    "evaluate",
    "grounding",
    "grounding_batch",
]
