"""How well predicted probabilities match observed frequencies: Brier score, reliability bins, ECE."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ragsense.stats._core import Sample, _as_array


def _checked(
    probs: Sample, outcomes: Sequence[bool]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    p = _as_array(probs, "probs")
    y = np.asarray(outcomes, dtype=np.float64)
    if p.size != y.size:
        raise ValueError(f"probs and outcomes differ in length: {p.size} and {y.size}")
    if np.any(p < 0.0) or np.any(p > 1.0):
        raise ValueError("probs must lie in [0, 1]")
    return p, y


def brier_score(probs: Sample, outcomes: Sequence[bool]) -> float:
    """Mean squared difference between the predicted probability and the 0/1 outcome (lower is better).

    >>> brier_score([1.0, 0.0, 0.5], [True, False, True])
    0.08333333333333333
    """
    p, y = _checked(probs, outcomes)
    return float(np.mean((p - y) ** 2))


@dataclass(frozen=True)
class ReliabilityBin:
    """Predictions in ``[lo, hi)`` (the last bin includes 1.0): how many, their mean, how often true."""

    lo: float
    hi: float
    n: int
    mean_predicted: float
    observed: float


def reliability_bins(probs: Sample, outcomes: Sequence[bool], n_bins: int = 10) -> list[ReliabilityBin]:
    """Equal-width bins over [0, 1]; empty bins are left out.

    >>> bins = reliability_bins([0.1, 0.2, 0.9], [False, True, True], n_bins=2)
    >>> [(b.n, b.mean_predicted, b.observed) for b in bins]
    [(2, 0.15000000000000002, 0.5), (1, 0.9, 1.0)]
    """
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    p, y = _checked(probs, outcomes)
    index = np.minimum((p * n_bins).astype(np.int64), n_bins - 1)
    bins = []
    for k in range(n_bins):
        mask = index == k
        if mask.any():
            bins.append(
                ReliabilityBin(
                    k / n_bins,
                    (k + 1) / n_bins,
                    int(mask.sum()),
                    float(p[mask].mean()),
                    float(y[mask].mean()),
                )
            )
    return bins


def expected_calibration_error(probs: Sample, outcomes: Sequence[bool], n_bins: int = 10) -> float:
    """ECE: the gap between mean prediction and observed frequency per bin, weighted by bin size.

    >>> round(expected_calibration_error([0.1, 0.2, 0.9], [False, True, True], 2), 4)
    0.2667
    """
    bins = reliability_bins(probs, outcomes, n_bins)
    total = sum(b.n for b in bins)
    return float(sum(b.n / total * abs(b.mean_predicted - b.observed) for b in bins))
