"""The built-in metrics, each an object with its options that implements
:class:`ragsense.evaluation.Metric`. They are registered by name in the ``ragsense.metrics`` entry point
group, the same way a plug-in registers its own.

>>> from ragsense.metrics import ConSens, Similarity
>>> ConSens(model="fake", attribution=True).fields[-2:]
('attribution', 'top_document')
"""

from ragsense.metrics._consens import (
    ATTRIBUTION_FIELDS,
    CONSENS_FIELDS,
    ConSens,
    attribution_metric,
    grounding,
    grounding_batch,
)
from ragsense.metrics._correctness import (
    CORRECTNESS_FIELDS,
    FEATURE_FIELDS,
    Correctness,
    CorrectnessFeatures,
    correctness_sample,
    references,
)
from ragsense.metrics._similarity import Similarity
from ragsense.vera import ENHANCE_FIELDS, VERA_FIELDS, Vera, VeraEnhance

__all__ = [
    "ATTRIBUTION_FIELDS",
    "CONSENS_FIELDS",
    "CORRECTNESS_FIELDS",
    "ENHANCE_FIELDS",
    "FEATURE_FIELDS",
    "VERA_FIELDS",
    "ConSens",
    "Correctness",
    "CorrectnessFeatures",
    "Similarity",
    "Vera",
    "VeraEnhance",
    "attribution_metric",
    "correctness_sample",
    "grounding",
    "grounding_batch",
    "references",
]
