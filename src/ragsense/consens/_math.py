"""ConSens arithmetic (Vankov et al., section 2), kept free of any model so it is easy to test.

Given per-word negative log-likelihoods (a word's NLL is minus the sum of its tokens' log-probs, so
its perplexity is ``exp(nll)``) under the empty and the real context:

* ``P`` aggregates the word perplexities: the paper's **arithmetic** mean ``mean(exp(nll))``, or the
  **geometric** mean ``exp(mean(nll))`` (standard perplexity).
* ``r = ln(P_empty / P_context)`` and ``ConSens = 2 / (1 + e^-r) - 1``, which equals ``tanh(r / 2)``.

Everything is computed in log space, so a word with an astronomically low probability cannot
overflow to ``inf`` or produce a NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import Enum


# Not StrEnum: that would change str(Aggregation.ARITHMETIC) from "Aggregation.ARITHMETIC" to "arithmetic".
class Aggregation(str, Enum):  # noqa: UP042
    """How word perplexities are averaged into the text perplexity P."""

    ARITHMETIC = "arithmetic"  # the paper's formula: mean of the word perplexities
    GEOMETRIC = "geometric"  # exp of the mean word NLL (standard perplexity)


def log_mean_perplexity(word_nll: Sequence[float], aggregation: Aggregation) -> float:
    """ln P for the given word NLLs.

    >>> round(math.exp(log_mean_perplexity([math.log(4814.38), math.log(7117.1), math.log(1.61)],
    ...                                   Aggregation.ARITHMETIC)), 2)
    3977.7
    """
    if not word_nll:
        raise ValueError("no words to aggregate")
    if any(not math.isfinite(x) for x in word_nll):
        raise ValueError("word NLLs must be finite")
    n = len(word_nll)
    if aggregation is Aggregation.GEOMETRIC:
        return math.fsum(word_nll) / n
    top = max(word_nll)
    return top + math.log(math.fsum(math.exp(x - top) for x in word_nll)) - math.log(n)


def consens_from_log_ppl(log_ppl_empty: float, log_ppl_context: float) -> tuple[float, float]:
    """Return ``(consens, r)`` from ln P_empty and ln P_context.

    >>> consens_from_log_ppl(math.log(10.0), math.log(10.0))
    (0.0, 0.0)
    """
    r = log_ppl_empty - log_ppl_context
    return math.tanh(r / 2.0), r


def consens_from_word_nll(
    nll_empty: Sequence[float], nll_context: Sequence[float], aggregation: Aggregation
) -> tuple[float, float]:
    """ConSens of one answer from the NLLs of its kept words in both conditions.

    The paper's Table 1, first row (word perplexities 4814.38, 7117.1, 1.61 without context and
    263.73, 293.92, 1.72 with it):

    >>> empty = [math.log(p) for p in (4814.38, 7117.1, 1.61)]
    >>> context = [math.log(p) for p in (263.73, 293.92, 1.72)]
    >>> round(consens_from_word_nll(empty, context, Aggregation.ARITHMETIC)[0], 2)
    0.91
    """
    if len(nll_empty) != len(nll_context):
        raise ValueError("both conditions must score the same words")
    return consens_from_log_ppl(
        log_mean_perplexity(nll_empty, aggregation), log_mean_perplexity(nll_context, aggregation)
    )


def safe_exp(x: float) -> float | None:
    """exp(x), or None where it would overflow (JSON has no infinity)."""
    return math.exp(x) if x < 709.0 else None
