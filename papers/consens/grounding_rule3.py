"""Rule 3's candidate grounding scores (papers/consens/grounding_default.py docstring, ``--rule 3``).

Each candidate reads one answer's scored words in text order: ``d`` their likelihood contrasts
(``nll_empty - nll_context``, nats) and ``stated`` whether the context states each word (exact, lemma
or number match). None runs a model, so each costs what today's default ``support`` costs.

``p(d, stated)`` is ``support``'s word probability of being supported: 1 for a stated word,
``sigmoid(d - 1)`` otherwise.

>>> d, s = [3.0, -2.0, 0.5, 4.0], [True, False, False, False]
>>> round(unsupported_count(d, s), 4)  # E = (1 - sigmoid(-3)) + (1 - sigmoid(-0.5)) + (1 - sigmoid(3))
-0.6052
>>> [round(x, 4) for x in span_support(d, s)]  # one span of three unstated words, sum d = 2.5
[0.8176]
>>> round(weakest_span(d, s), 4)
0.6351
>>> round(span_count([0.0, 5.0, 0.0], [False, True, False]), 4)  # two spans, each sigmoid(-1)
-0.5365
>>> round(weakest_span([1.0, 2.0], [True, True]), 4)  # every word stated: no span to doubt
1.0
"""

from __future__ import annotations

import math
from collections.abc import Sequence

MIDPOINT = 1.0
"""support's midpoint (nats): an unstated word (or span) made e times more likely is half supported."""
STATED_PRIOR = 2.0
"""stated_contrast: a copied word the context leaves unchanged (d = 0) counts as sigmoid(2) = 0.88."""


def _log_sigmoid(x: float) -> float:
    return -math.log1p(math.exp(-x)) if x > -30 else x


def _sigmoid(x: float) -> float:
    return math.exp(_log_sigmoid(x))


def word_support(d: Sequence[float], stated: Sequence[bool]) -> list[float]:
    """support's per-word probability of being supported."""
    return [1.0 if s else _sigmoid(x - MIDPOINT) for x, s in zip(d, stated, strict=True)]


def unsupported_count(d: Sequence[float], stated: Sequence[bool]) -> float:
    """``2 exp(-E) - 1``, E the expected number of unsupported words (a count, not a share)."""
    expected = math.fsum(1.0 - p for p in word_support(d, stated))
    return 2.0 * math.exp(-expected) - 1.0


def span_support(d: Sequence[float], stated: Sequence[bool]) -> list[float]:
    """Each span's probability of being supported: ``sigmoid(sum of its d - 1)``.

    A span is a maximal run of consecutive unstated scored words (a stated word ends it).
    """
    spans: list[float] = []
    run: list[float] = []
    for x, s in zip(d, stated, strict=True):
        if s:
            if run:
                spans.append(math.fsum(run))
            run = []
        else:
            run.append(x)
    if run:
        spans.append(math.fsum(run))
    return [_sigmoid(c - MIDPOINT) for c in spans]


def weakest_span(d: Sequence[float], stated: Sequence[bool]) -> float:
    """``2 min(span support) - 1``; 1 when the context states every word."""
    spans = span_support(d, stated)
    return 2.0 * min(spans) - 1.0 if spans else 1.0


def span_count(d: Sequence[float], stated: Sequence[bool]) -> float:
    """``2 exp(-E) - 1``, E the expected number of unsupported spans (claims)."""
    expected = math.fsum(1.0 - p for p in span_support(d, stated))
    return 2.0 * math.exp(-expected) - 1.0


def stated_contrast(d: Sequence[float], stated: Sequence[bool]) -> float:
    """support with stated words weighed too: ``sigmoid(d + 2)`` for a stated word, geometric mean."""
    logs = [
        _log_sigmoid(x + STATED_PRIOR) if s else _log_sigmoid(x - MIDPOINT)
        for x, s in zip(d, stated, strict=True)
    ]
    return 2.0 * math.exp(math.fsum(logs) / len(logs)) - 1.0


def support(d: Sequence[float], stated: Sequence[bool]) -> float:
    """today's default: ``2 * geometric mean of word_support - 1``."""
    logs = [0.0 if s else _log_sigmoid(x - MIDPOINT) for x, s in zip(d, stated, strict=True)]
    return 2.0 * math.exp(math.fsum(logs) / len(logs)) - 1.0


def support_and_count(d: Sequence[float], stated: Sequence[bool]) -> float:
    """The mean of ``support`` (a share of evidence) and ``unsupported_count`` (a count)."""
    return (support(d, stated) + unsupported_count(d, stated)) / 2.0


RULE3 = {
    "unsupported_count": unsupported_count,
    "weakest_span": weakest_span,
    "span_count": span_count,
    "stated_contrast": stated_contrast,
    "support_and_count": support_and_count,
}
"""The new candidates, in the order the rule lists them."""
