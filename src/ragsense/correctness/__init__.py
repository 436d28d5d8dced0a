"""Correctness estimation by context perturbation (Zhang et al., "An Automatic Method to Estimate
Correctness of RAG").

The base model answers a question with no context (Baseline), with the context (Normal) and with a
perturbed context (Perturbed); the negative log-likelihood at each place of prompt and output feeds a
random forest that predicts how close the Normal answer is to the ground truth. :class:`Correctness`
is the method as a metric: ``ragsense.evaluate(rows, [Correctness("estimator.npz")])``.

>>> from ragsense.correctness import PerturbationSettings, feature_names
>>> PerturbationSettings().label
'IT-EN k=15 fill=left'
>>> feature_names()[:2]
['baseline.prompt.mean', 'baseline.instruction.mean']
"""

from ragsense.correctness._estimator import (
    DEFAULT_AGGREGATES,
    DEFAULT_THRESHOLDS,
    DEFAULT_TREES,
    CorrectnessEstimate,
    CorrectnessEstimator,
    evaluate_estimates,
)
from ragsense.correctness._features import (
    CONDITIONS,
    ConditionResult,
    CorrectnessSample,
    FeatureExtractor,
    SampleFeatures,
    feature_names,
)
from ragsense.correctness._metric import (
    CORRECTNESS_FIELDS,
    FEATURE_FIELDS,
    Correctness,
    CorrectnessFeatures,
    correctness_sample,
    references,
)
from ragsense.correctness._perturb import PerturbationSettings, PerturbedContext, Perturber, Replacement
from ragsense.correctness._prompt import INSTRUCTION, PLACES, build_prompt
from ragsense.correctness._targets import METRICS, Metric, correctness_targets, rouge_l

__all__ = [
    "CONDITIONS",
    "CORRECTNESS_FIELDS",
    "DEFAULT_AGGREGATES",
    "DEFAULT_THRESHOLDS",
    "DEFAULT_TREES",
    "FEATURE_FIELDS",
    "INSTRUCTION",
    "METRICS",
    "PLACES",
    "ConditionResult",
    "Correctness",
    "CorrectnessEstimate",
    "CorrectnessEstimator",
    "CorrectnessFeatures",
    "CorrectnessSample",
    "FeatureExtractor",
    "Metric",
    "PerturbationSettings",
    "PerturbedContext",
    "Perturber",
    "Replacement",
    "SampleFeatures",
    "build_prompt",
    "correctness_sample",
    "correctness_targets",
    "evaluate_estimates",
    "feature_names",
    "references",
    "rouge_l",
]
