"""Tests for paired comparisons: two scores on the same items, or one difference per item.

* :func:`delong_paired`: are two AUROCs measured on the same labelled items different (DeLong et al.
  1988)? The two scores share items, so their AUROCs are correlated and an unpaired comparison of
  two intervals would be far too conservative.
* :func:`sign_test` and :func:`wilcoxon_signed_rank`: is "the full context scored higher in N% of
  pairs" more than chance?
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragsense.stats._core import Sample, _as_array

# |z| reported when the variance of the difference is exactly zero but the AUROCs differ (every
# positive-negative pair is ordered the same way by both scores except a constant shift); a finite
# stand-in for infinity so the result stays JSON-ready.
_Z_CAP = 99.0


@dataclass(frozen=True)
class PairedAuc:
    """DeLong's test of ``auc_a - auc_b`` on the same items; ``p_value`` is two-sided."""

    auc_a: float
    auc_b: float
    difference: float
    se: float
    z: float
    p_value: float

    def to_dict(self) -> dict[str, float]:
        """The fields as a JSON-ready dict."""
        return {k: float(v) for k, v in self.__dict__.items()}


def _placements(pos: npt.NDArray[np.float64], neg: npt.NDArray[np.float64]) -> tuple[Any, Any]:
    """DeLong's structural components: per positive, the share of negatives it outranks (ties
    count one half), and per negative, the share of positives that outrank it."""
    psi = (pos[:, None] > neg[None, :]).astype(np.float64) + 0.5 * (pos[:, None] == neg[None, :])
    return psi.mean(axis=1), psi.mean(axis=0)


def delong_paired(scores_a: Sample, scores_b: Sample, labels: Sequence[bool]) -> PairedAuc:
    """DeLong's paired test for two scores of the same items (``True`` labels are positives).

    >>> labels = [True] * 4 + [False] * 4
    >>> a = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2]   # separates perfectly
    >>> b = [0.9, 0.3, 0.7, 0.2, 0.5, 0.8, 0.6, 0.4]   # barely better than chance
    >>> t = delong_paired(a, b, labels)
    >>> t.auc_a, t.auc_b, t.p_value < 0.05
    (1.0, 0.4375, True)
    """
    a = _as_array(scores_a, "scores_a")
    b = _as_array(scores_b, "scores_b")
    y = np.asarray(labels, dtype=bool)
    if not a.size == b.size == y.size:
        raise ValueError(f"scores and labels differ in length: {a.size}, {b.size}, {y.size}")
    m, n = int(y.sum()), int((~y).sum())
    if m < 2 or n < 2:
        raise ValueError(f"DeLong's test needs at least 2 positives and 2 negatives, got {m} and {n}")
    v10a, v01a = _placements(a[y], a[~y])
    v10b, v01b = _placements(b[y], b[~y])
    auc_a, auc_b = float(v10a.mean()), float(v10b.mean())
    # Var(auc_a - auc_b) from the covariance of the placements (ddof=1), per class.
    var = float(np.var(v10a - v10b, ddof=1) / m + np.var(v01a - v01b, ddof=1) / n)
    diff = auc_a - auc_b
    se = math.sqrt(max(var, 0.0))
    if se > 0.0:
        z = diff / se
        p = math.erfc(abs(z) / math.sqrt(2.0))  # 2 * (1 - Phi(|z|)) without cancellation
    elif diff == 0.0:
        z, p = 0.0, 1.0
    else:
        z, p = math.copysign(_Z_CAP, diff), 0.0
    return PairedAuc(auc_a, auc_b, diff, se, z, min(1.0, p))


@dataclass(frozen=True)
class SignTest:
    """Exact two-sided sign test: how many differences are positive, negative and zero (ties are
    left out of the test, as usual)."""

    n_positive: int
    n_negative: int
    n_ties: int
    p_value: float

    def to_dict(self) -> dict[str, float]:
        """The fields as a JSON-ready dict."""
        return {k: float(v) if isinstance(v, float) else v for k, v in self.__dict__.items()}


def sign_test(differences: Sample) -> SignTest:
    """Exact binomial sign test of "positive and negative differences are equally likely".

    >>> t = sign_test([1.0] * 9 + [-1.0] + [0.0])
    >>> t.n_positive, t.n_negative, t.n_ties, round(t.p_value, 4)
    (9, 1, 1, 0.0215)
    """
    d = _as_array(differences, "differences")
    pos, neg = int((d > 0).sum()), int((d < 0).sum())
    n = pos + neg
    if n == 0:
        return SignTest(0, 0, int(d.size), 1.0)
    k = min(pos, neg)
    tail = sum(math.comb(n, i) for i in range(k + 1))
    # Exact integer arithmetic; the ratio of two big ints is a correctly rounded float.
    p = min(1.0, 2 * tail / (1 << n))
    return SignTest(pos, neg, int(d.size) - n, p)


def _exact_signed_rank_p(w_plus: int, n: int) -> float:
    """Two-sided exact p of the signed-rank statistic (integer ranks 1..n, no ties)."""
    counts = [1] + [0] * (n * (n + 1) // 2)
    for rank in range(1, n + 1):
        for s in range(len(counts) - 1, rank - 1, -1):
            counts[s] += counts[s - rank]
    total = 1 << n
    lower = min(w_plus, n * (n + 1) // 2 - w_plus)
    return min(1.0, 2 * sum(counts[: lower + 1]) / total)


def wilcoxon_signed_rank(differences: Sample) -> float:
    """Two-sided p-value of Wilcoxon's signed-rank test; zero differences are dropped.

    Exact for up to 50 non-zero differences without tied magnitudes, else the normal approximation
    with the tie correction and a continuity correction.

    >>> round(wilcoxon_signed_rank([0.5, 1.2, 0.3, 2.0, 0.8, -0.1, 1.5, 0.9]), 4)
    0.0156
    """
    d = _as_array(differences, "differences")
    d = d[d != 0.0]
    n = int(d.size)
    if n == 0:
        return 1.0
    magnitudes = np.abs(d)
    order = np.argsort(magnitudes, kind="mergesort")
    ranks = np.empty(n, dtype=np.float64)
    sorted_mag = magnitudes[order]
    i = 0
    tie_term = 0.0
    while i < n:  # average ranks over tied magnitudes
        j = i
        while j + 1 < n and sorted_mag[j + 1] == sorted_mag[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j + 2) / 2.0
        t = j - i + 1
        tie_term += t**3 - t
        i = j + 1
    w_plus = float(ranks[d > 0].sum())
    if n <= 50 and tie_term == 0.0:
        return _exact_signed_rank_p(round(w_plus), n)
    mean = n * (n + 1) / 4.0
    var = n * (n + 1) * (2 * n + 1) / 24.0 - tie_term / 48.0
    if var <= 0.0:
        return 1.0
    z = (abs(w_plus - mean) - 0.5) / math.sqrt(var)
    return min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2.0)))
