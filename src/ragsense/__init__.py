"""ragsense: does a RAG answer come from its context, is it likely correct, which document does it rest on.

>>> import ragsense
>>> result = ragsense.grounding(
...     "What is David Baker known for?",
...     ["David Baker is an American biochemist who designs proteins."],
...     "David Baker is a biochemist.",
...     model="fake",
... )
>>> -1.0 <= result.consens <= 1.0
True
"""

from ragsense._version import __version__
from ragsense.consens import GroundingResult, grounding, grounding_batch

__all__ = ["GroundingResult", "__version__", "grounding", "grounding_batch"]
