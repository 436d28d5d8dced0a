"""Per-word evidence beyond the likelihood contrast: what the context states, and features of a row.

Each scored answer word has a contrast ``d = nll_empty - nll_context`` (how much the context made it
more likely, in nats) and a flag ``stated`` (the context states the word: exact, lemma or number
match, :mod:`ragsense.text._support`). A small model sometimes fails to raise the likelihood of a word
the context states verbatim (a rare name, a number split into many tokens); the *floored* contrast
``e = max(d, 0)`` for stated words and ``e = d`` otherwise never counts such a word against the
answer.

:func:`row_features` summarises a row for the calibrated grounding score
(:mod:`ragsense.consens._calibrated`); every feature is a share or a per-word average, never a
length, so the score cannot learn "short answers are right" from one data set.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ragsense.consens._math import _quantile as sorted_quantile

FEATURES = (
    "q25",  # 25th percentile of d
    "mean",  # mean of d (the geometric ConSens r)
    "q25_floored",  # 25th percentile of e
    "mean_floored",  # mean of e
    "min_floored",  # least-supported word's e
    "share_unstated",  # share of words the context does not state
    "share_unsupported",  # share of words neither stated nor made more likely (d <= 0)
    "mean_unstated",  # mean d over the words the context does not state (0 when every word is stated)
)
"""The row features, in the order :func:`row_features` returns them."""


def floored(contrasts: Sequence[float], stated: Sequence[bool]) -> list[float]:
    """``max(d, 0)`` for words the context states, ``d`` for the others.

    >>> floored([-1.5, 2.0, -0.5], [True, True, False])
    [0.0, 2.0, -0.5]
    """
    return [max(d, 0.0) if s else d for d, s in zip(contrasts, stated, strict=True)]


def row_features(contrasts: Sequence[float], stated: Sequence[bool]) -> list[float]:
    """The :data:`FEATURES` of one answer from its word contrasts and stated flags.

    >>> [round(x, 3) for x in row_features([2.0, -1.0, 0.5, -2.0], [True, True, False, False])]
    [-1.25, -0.125, -0.5, 0.125, -2.0, 0.5, 0.25, -0.75]
    """
    if not contrasts:
        raise ValueError("no words to aggregate")
    if len(contrasts) != len(stated):
        raise ValueError("one stated flag per word")
    if any(not math.isfinite(d) for d in contrasts):
        raise ValueError("word contrasts must be finite")
    e = floored(contrasts, stated)
    n = len(contrasts)
    unstated = [d for d, s in zip(contrasts, stated, strict=True) if not s]
    return [
        sorted_quantile(sorted(contrasts), 0.25),
        math.fsum(contrasts) / n,
        sorted_quantile(sorted(e), 0.25),
        math.fsum(e) / n,
        min(e),
        len(unstated) / n,
        sum(1 for d, s in zip(contrasts, stated, strict=True) if not s and d <= 0.0) / n,
        math.fsum(unstated) / len(unstated) if unstated else 0.0,
    ]
