"""Label math: a label's score from its token log-probabilities, the labels' probabilities, the decision."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ragsense.errors import CapabilityError, ParameterError
from ragsense.models import (
    ChoiceRequest,
    LanguageModel,
    ScoreRequest,
    SupportsChoiceScoring,
    SupportsLogprobs,
)
from ragsense.vera.judges._verdict import LABEL_SCORINGS, LabelScoring


def _softmax(totals: Sequence[float]) -> list[float]:
    top = max(totals)
    weights = [math.exp(t - top) for t in totals]
    norm = math.fsum(weights)
    return [w / norm for w in weights]


def label_scores(token_logprobs: Sequence[Sequence[float]], scoring: LabelScoring | str) -> list[float]:
    """Each label's score under ``scoring`` from its token log-probabilities.

    >>> label_scores([[-1.0], [-0.5, -2.5]], "sum"), label_scores([[-1.0], [-0.5, -2.5]], "mean")
    ([-1.0, -3.0], [-1.0, -1.5])
    >>> label_scores([[-1.0], [-0.5, -2.5]], "first_token")
    [-1.0, -0.5]
    """
    if scoring == "sum":
        return [math.fsum(t) for t in token_logprobs]
    if scoring == "mean":
        return [math.fsum(t) / len(t) for t in token_logprobs]
    if scoring == "first_token":
        return [t[0] for t in token_logprobs]
    raise ParameterError(
        f"must be one of {', '.join(LABEL_SCORINGS)}, got {scoring!r}", parameter="label_scoring"
    )


def label_probabilities(
    labels: Sequence[str],
    token_logprobs: dict[str, list[float]],
    scoring: LabelScoring | str,
    prior: dict[str, list[float]] | None = None,
) -> dict[str, float]:
    """The labels' probabilities among themselves: softmax of their scores under ``scoring``; with a
    ``prior`` (the token log-probabilities for a content-free item) each score first loses the log of
    its prior probability under the same rule (contextual calibration).

    >>> probs = label_probabilities(["a", "b"], {"a": [-1.0], "b": [-1.0]}, "sum", {"a": [-0.1], "b": [-3.0]})
    >>> probs["b"] > probs["a"]
    True
    """
    logits = label_scores([token_logprobs[label] for label in labels], scoring)
    if prior is not None:
        base = [math.log(p) for p in _softmax(label_scores([prior[label] for label in labels], scoring))]
        logits = [t - b for t, b in zip(logits, base, strict=True)]
    return dict(zip(labels, _softmax(logits), strict=True))


def decide_label(labels: Sequence[str], positive: Sequence[str], probabilities: dict[str, float]) -> str:
    """The label a judge decides on: the pass/fail side first, by its summed probability (the positive
    labels win at 0.5 or more), then the most likely label on that side. With one label per side this is
    the argmax; with two positive labels ("stated", "inferable") their probabilities are not split
    against one negative label.

    >>> decide_label(["stated", "inferable", "unsupported"], ["stated", "inferable"],
    ...              {"stated": 0.3, "inferable": 0.3, "unsupported": 0.4})
    'stated'
    """
    grounded = math.fsum(probabilities[label] for label in positive)
    side = [label for label in labels if (label in positive) == (grounded >= 0.5)]
    if not side:
        side = list(labels)
    return max(side, key=lambda label: (probabilities[label], -labels.index(label)))


async def score_choices(model: LanguageModel, requests: Sequence[ChoiceRequest]) -> list[tuple[float, ...]]:
    """Total log-probability of each choice of each request, through the fastest path the model has."""
    if isinstance(model, SupportsChoiceScoring):
        return await model.score_choices(requests)
    if not isinstance(model, SupportsLogprobs):
        raise CapabilityError(f"{model.info.name} gives no log-probabilities; use a structured-output judge")
    flat = [ScoreRequest(r.prompt, c) for r in requests for c in r.choices]
    scores = iter(await model.score(flat))
    return [tuple(next(scores).total for _ in r.choices) for r in requests]
