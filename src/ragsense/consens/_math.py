"""ConSens arithmetic (Vankov et al., section 2) and word-level aggregates, free of any model.

Given per-word negative log-likelihoods (a word's NLL is minus the sum of its tokens' log-probs, so
its perplexity is ``exp(nll)``) under the empty and the real context:

* the paper's ConSens aggregates the word perplexities of each condition into a text perplexity
  ``P``: the **arithmetic** mean ``mean(exp(nll))`` (the paper's formula), or the **geometric**
  mean ``exp(mean(nll))`` (standard perplexity); ``r = ln(P_empty / P_context)``;
* the **word-level** aggregates look at each word's contrast ``d = nll_empty - nll_context`` (how
  much the context made that word more likely, in nats) and summarise where the answer is least
  grounded: the least-grounded word (``min_word``), a low quantile (``q10``, ``q25``), the mean of
  the least-grounded quarter (``tail25``), the mean averaged with it (``mean_tail``), or the share of
  words the context made more likely (``share``). Then ``r`` is that summary.

* the **support** score (the default) also reads whether the context *states* each word (exact,
  lemma or number match, :mod:`ragsense.text._support`): a word's probability of being supported is
  1 when the context states it and ``sigmoid(d - 1)`` otherwise (the context must have made it e
  times more likely to count as half supported); ``r`` is the mean log of these probabilities (<= 0)
  and the score is ``2 exp(r) - 1``, in [-1, 1]: twice the geometric mean of the support
  probabilities, minus one. 1 means every word is stated; a score below 0 means the typical word is
  less likely supported than not. Chosen by rule 2 of papers/consens/grounding_default.py.
* **support_count** adds a count to that share: with ``E`` the expected number of unsupported words
  (the sum of one minus each word's support probability), the score is the mean of ``support`` and
  ``2 exp(-E) - 1`` (the chance, word by word independent, that no word is unsupported), in [-1, 1];
  ``r = -E``. One invented word lowers it whatever the answer's length. Chosen by rule 3 of
  papers/consens/grounding_default.py (docs/results.md); not the default.

For the others the score is ``2 / (1 + e^-r) - 1 = tanh(r / 2)``, in (-1, 1): 0 means the context
changed nothing. The geometric ``r`` is the mean of the word contrasts, so ``geometric`` is the
mean word-level aggregate. Everything is computed in log space, so a word with an astronomically
low probability cannot overflow to ``inf`` or produce a NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import Enum


# Not StrEnum: that would change str(Aggregation.ARITHMETIC) from "Aggregation.ARITHMETIC" to "arithmetic".
class Aggregation(str, Enum):  # noqa: UP042
    """How the answer's words make one score (see the module docstring)."""

    ARITHMETIC = "arithmetic"  # the paper's ConSens: mean of the word perplexities
    GEOMETRIC = "geometric"  # exp of the mean word NLL (standard perplexity) = mean word contrast
    MIN_WORD = "min_word"  # the least-grounded word's contrast
    Q10 = "q10"  # the 10th percentile of the word contrasts
    Q25 = "q25"  # the 25th percentile
    TAIL25 = "tail25"  # the mean contrast of the least-grounded quarter of the words
    MEAN_TAIL = "mean_tail"  # (mean + tail25) / 2: the mean with a penalty for the worst words
    SHARE = "share"  # 2p - 1, p = the (smoothed) share of words the context made more likely
    SUPPORT = "support"  # 2 * geometric mean of the words' support probabilities - 1 (needs stated flags)
    SUPPORT_COUNT = "support_count"  # mean of support and 2 exp(-E) - 1, E the expected unsupported words
    LEARNED = "learned"  # a logistic model over features of the pass (_learned.py); needs the texts


STATED_AGGREGATIONS = (Aggregation.SUPPORT, Aggregation.SUPPORT_COUNT)
"""The aggregations that also read whether the context states each word."""

WORD_AGGREGATIONS = tuple(a for a in Aggregation if a is not Aggregation.LEARNED)
"""The aggregations computed from the word NLLs (and stated flags) alone; ``learned`` also reads the
answer's sentences and the context's (the scorer computes it, :mod:`ragsense.consens._learned`)."""


PERPLEXITY_AGGREGATIONS = (Aggregation.ARITHMETIC, Aggregation.GEOMETRIC)
"""The aggregations that average perplexities per condition; the others summarise word contrasts."""

RAW_SCORE_MEANINGS: dict[str, str] = {
    Aggregation.ARITHMETIC.value: "ln(P_empty / P_context), P the arithmetic mean of word perplexities",
    Aggregation.GEOMETRIC.value: "ln(P_empty / P_context) = mean word contrast (nats)",
    Aggregation.MIN_WORD.value: "the least-grounded word's contrast (nats)",
    Aggregation.Q10.value: "10th percentile of the word contrasts (nats)",
    Aggregation.Q25.value: "25th percentile of the word contrasts (nats)",
    Aggregation.TAIL25.value: "mean contrast of the least-grounded quarter of the words (nats)",
    Aggregation.MEAN_TAIL.value: "(mean contrast + tail25) / 2 (nats)",
    Aggregation.SHARE.value: "logit of the smoothed share of words the context made more likely",
    Aggregation.SUPPORT.value: "mean ln P(word supported) (<= 0)",
    Aggregation.SUPPORT_COUNT.value: "-E, E the expected number of unsupported words",
    Aggregation.LEARNED.value: "the learned model's logit z (score = 2 sigmoid(z) - 1)",
}
"""What ``consens_raw`` (the ``r`` of the formulas above, before it becomes a score in [-1, 1]) holds
under each aggregation: one line each, as the report labels it. Only ``arithmetic`` and ``geometric``
make it ``ln(P_empty / P_context)``."""


def perplexity_aggregation(aggregation: Aggregation) -> Aggregation:
    """How to report the text perplexities P for a score under ``aggregation``: itself for the two
    perplexity means, the geometric mean (standard perplexity) for a word-level aggregate.

    >>> perplexity_aggregation(Aggregation.Q10).value
    'geometric'
    """
    return aggregation if aggregation in PERPLEXITY_AGGREGATIONS else Aggregation.GEOMETRIC


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (NumPy's default), on a sorted list."""
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _tail_mean(sorted_values: Sequence[float], share: float) -> float:
    k = max(1, math.ceil(len(sorted_values) * share))
    return math.fsum(sorted_values[:k]) / k


def word_contrast_r(contrasts: Sequence[float], aggregation: Aggregation) -> float:
    """``r`` of a word-level aggregate from the word contrasts ``nll_empty - nll_context``.

    >>> d = [2.0, 1.0, -1.0, 3.0]
    >>> [word_contrast_r(d, a) for a in (Aggregation.GEOMETRIC, Aggregation.MIN_WORD, Aggregation.TAIL25)]
    [1.25, -1.0, -1.0]
    >>> round(math.tanh(word_contrast_r(d, Aggregation.SHARE) / 2), 4)  # 2 * (3 + 0.5) / (4 + 1) - 1
    0.4
    """
    if not contrasts:
        raise ValueError("no words to aggregate")
    if any(not math.isfinite(x) for x in contrasts):
        raise ValueError("word contrasts must be finite")
    if aggregation is Aggregation.GEOMETRIC:
        return math.fsum(contrasts) / len(contrasts)
    if aggregation is Aggregation.SHARE:
        # Smoothed (+1/2, +1/2) so one word cannot give a share of exactly 0 or 1; the logit makes
        # tanh(r / 2) equal 2p - 1.
        p = (sum(d > 0.0 for d in contrasts) + 0.5) / (len(contrasts) + 1.0)
        return math.log(p / (1.0 - p))
    ordered = sorted(contrasts)
    if aggregation is Aggregation.MIN_WORD:
        return ordered[0]
    if aggregation is Aggregation.Q10:
        return _quantile(ordered, 0.10)
    if aggregation is Aggregation.Q25:
        return _quantile(ordered, 0.25)
    if aggregation is Aggregation.TAIL25:
        return _tail_mean(ordered, 0.25)
    if aggregation is Aggregation.MEAN_TAIL:
        return (math.fsum(ordered) / len(ordered) + _tail_mean(ordered, 0.25)) / 2.0
    raise ValueError(f"{aggregation.value} is not a word-contrast aggregate")


SUPPORT_MIDPOINT = 1.0
"""In nats: an unstated word the context made this much more likely counts as half supported."""


def _support_logs(contrasts: Sequence[float], stated: Sequence[bool]) -> list[float]:
    """Each word's log probability of being supported (<= 0, finite)."""
    if not contrasts:
        raise ValueError("no words to aggregate")
    if len(stated) != len(contrasts):
        raise ValueError("one stated flag per word")
    if any(not math.isfinite(x) for x in contrasts):
        raise ValueError("word contrasts must be finite")
    # log sigmoid(x) = -log1p(exp(-x)), computed without overflow for very negative x.
    logs = [
        0.0
        if s
        else (
            -math.log1p(math.exp(-(d - SUPPORT_MIDPOINT)))
            if d - SUPPORT_MIDPOINT > -30
            else d - SUPPORT_MIDPOINT
        )
        for d, s in zip(contrasts, stated, strict=True)
    ]
    return logs


def support_r(contrasts: Sequence[float], stated: Sequence[bool]) -> float:
    """``r`` of the support score: the mean log support probability of the words (<= 0, finite).

    >>> round(support_r([3.0, -2.0], [True, False]), 4)  # (log 1 + log sigmoid(-3)) / 2
    -1.5243
    >>> support_r([-5.0], [True])  # a stated word is supported whatever its contrast
    0.0
    """
    logs = _support_logs(contrasts, stated)
    return math.fsum(logs) / len(logs)


def expected_unsupported(contrasts: Sequence[float], stated: Sequence[bool]) -> float:
    """``E``: the expected number of unsupported words, the sum of one minus each support probability.

    >>> round(expected_unsupported([3.0, -2.0, 0.0], [True, False, False]), 4)  # sigmoid(3) + sigmoid(1)
    1.6836
    """
    return math.fsum(-math.expm1(x) for x in _support_logs(contrasts, stated))


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
    if aggregation is not Aggregation.ARITHMETIC:
        raise ValueError(f"{aggregation.value} does not average perplexities; see perplexity_aggregation")
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
    nll_empty: Sequence[float],
    nll_context: Sequence[float],
    aggregation: Aggregation,
    stated: Sequence[bool] | None = None,
) -> tuple[float, float]:
    """``(score, r)`` of one answer from the NLLs of its kept words in both conditions.

    ``stated`` (whether the context states each word) is needed by :data:`STATED_AGGREGATIONS` only.

    The paper's Table 1, first row (word perplexities 4814.38, 7117.1, 1.61 without context and
    263.73, 293.92, 1.72 with it):

    >>> empty = [math.log(p) for p in (4814.38, 7117.1, 1.61)]
    >>> context = [math.log(p) for p in (263.73, 293.92, 1.72)]
    >>> round(consens_from_word_nll(empty, context, Aggregation.ARITHMETIC)[0], 2)
    0.91
    """
    if len(nll_empty) != len(nll_context):
        raise ValueError("both conditions must score the same words")
    if aggregation is Aggregation.LEARNED:
        raise ValueError(
            "the learned score reads the answer and context texts: use ragsense.consens.learned_score"
        )
    if aggregation in STATED_AGGREGATIONS:
        if stated is None:
            raise ValueError(f"the {aggregation.value} score needs each word's stated flag")
        contrasts = [e - c for e, c in zip(nll_empty, nll_context, strict=True)]
        r = support_r(contrasts, stated)
        if aggregation is Aggregation.SUPPORT:
            return 2.0 * math.exp(r) - 1.0, r
        expected = expected_unsupported(contrasts, stated)
        # The mean of support (2 e^r - 1) and the count score (2 e^-E - 1).
        return math.exp(r) + math.exp(-expected) - 1.0, -expected
    if aggregation not in PERPLEXITY_AGGREGATIONS:
        r = word_contrast_r([e - c for e, c in zip(nll_empty, nll_context, strict=True)], aggregation)
        return math.tanh(r / 2.0), r
    return consens_from_log_ppl(
        log_mean_perplexity(nll_empty, aggregation), log_mean_perplexity(nll_context, aggregation)
    )


def safe_exp(x: float) -> float | None:
    """exp(x), or None where it would overflow (JSON has no infinity)."""
    return math.exp(x) if x < 709.0 else None
