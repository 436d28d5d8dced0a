"""Descriptive statistics and intervals: AUROC, highest density intervals, bootstrap intervals."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, TypedDict

import numpy as np
import numpy.typing as npt

Sample = Sequence[float] | npt.NDArray[Any]


class Summary(TypedDict):
    """``n``, ``mean``, ``median``, ``std`` (sample, ddof=1; 0.0 when n == 1), ``hdi90`` as [lo, hi]."""

    n: int
    mean: float
    median: float
    std: float
    hdi90: list[float]


class PairedSummary(TypedDict):
    """Statistics of ``a - b`` over pairs, and how often ``a`` wins, ties or loses."""

    n: int
    mean_diff: float
    median_diff: float
    hdi90_diff: list[float]
    share_a_greater: float
    share_ties: float


def _as_array(values: Sample, what: str = "values") -> npt.NDArray[np.float64]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{what} is empty")
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"{what} has a non-finite value at index {bad}: {arr[bad]}")
    return arr


def _check_mass(mass: float) -> None:
    if not 0.0 < mass <= 1.0:
        raise ValueError(f"mass must be in (0, 1], got {mass}")


def roc_auc(scores_positive: Sample, scores_negative: Sample) -> float:
    """Area under the ROC curve: P(score of a positive > score of a negative), ties counting 1/2.

    This is the Mann-Whitney U statistic over ``len(pos) * len(neg)``, equal to scikit-learn's
    ``roc_auc_score`` on the concatenated labels. Raises ValueError on an empty side or a
    non-finite score.

    >>> roc_auc([1.0, 1.0], [1.0, 0.0])
    0.75
    """
    pos = _as_array(scores_positive, "scores_positive")
    neg = np.sort(_as_array(scores_negative, "scores_negative"))
    # For each positive: negatives strictly below count 1, equal ones 1/2. Summing left + right
    # insertion points counts 2 per win and 1 per tie, all in exact integers.
    below = np.searchsorted(neg, pos, side="left").sum(dtype=np.int64)
    below_or_equal = np.searchsorted(neg, pos, side="right").sum(dtype=np.int64)
    return float(int(below + below_or_equal) / (2 * pos.size * neg.size))


def hdi(values: Sample, mass: float = 0.9) -> tuple[float, float]:
    """The highest density interval of a sample: the shortest ``[lo, hi]`` holding ``mass`` of it.

    The window holds ``ceil(mass * n)`` sorted values (so at least ``mass`` of the sample); among
    equally short windows the lowest is returned. ArviZ's ``hdi`` takes ``floor(mass * n) + 1``
    values instead, one more when ``mass * n`` is a whole number; the two agree otherwise.

    >>> hdi([0, 1, 2, 3, 100], mass=0.8)   # the outlier is left out
    (0.0, 3.0)
    >>> hdi([5.0])
    (5.0, 5.0)
    """
    _check_mass(mass)
    x = np.sort(_as_array(values))
    n = x.size
    # The epsilon keeps 0.9 * 10 = 9.000000000000002 from asking for 10 values.
    k = max(1, math.ceil(mass * n - 1e-9))
    widths = x[k - 1 :] - x[: n - k + 1]
    start = int(np.argmin(widths))  # argmin takes the first of equal minima: the lowest window
    return float(x[start]), float(x[start + k - 1])


def summarize(values: Sample) -> Summary:
    """n, mean, median, sample standard deviation and the 90% HDI of ``values``.

    >>> summarize([1.0, 2.0, 3.0, 4.0])  # doctest: +ELLIPSIS
    {'n': 4, 'mean': 2.5, 'median': 2.5, 'std': 1.290994..., 'hdi90': [1.0, 4.0]}
    """
    x = _as_array(values)
    lo, hi = hdi(x, 0.9)
    return {
        "n": int(x.size),
        "mean": float(x.mean()),
        "median": float(np.median(x)),
        "std": float(x.std(ddof=1)) if x.size > 1 else 0.0,
        "hdi90": [lo, hi],
    }


def paired_summary(a: Sample, b: Sample) -> PairedSummary:
    """Compare two paired samples (e.g. two metrics' scores on the same rows) through ``a - b``.

    >>> s = paired_summary([3.0, 2.0, 1.0, 5.0], [1.0, 2.0, 2.0, 1.0])
    >>> s["mean_diff"], s["share_a_greater"], s["share_ties"]
    (1.25, 0.5, 0.25)
    """
    x = _as_array(a, "a")
    y = _as_array(b, "b")
    if x.size != y.size:
        raise ValueError(f"paired samples differ in length: {x.size} vs {y.size}")
    diff = x - y
    lo, hi = hdi(diff, 0.9)
    return {
        "n": int(diff.size),
        "mean_diff": float(diff.mean()),
        "median_diff": float(np.median(diff)),
        "hdi90_diff": [lo, hi],
        "share_a_greater": float(np.mean(diff > 0)),
        "share_ties": float(np.mean(diff == 0)),
    }


def bootstrap_ci(
    fn: Callable[..., float],
    *samples: Sample,
    n: int = 2000,
    seed: int = 0,
    mass: float = 0.95,
    paired: bool = False,
) -> tuple[float, float]:
    """Percentile bootstrap interval holding ``mass`` of the statistic ``fn(*samples)``.

    Each of ``n`` replicates draws every sample with replacement at its own size and calls ``fn``
    on the draws (NumPy arrays). Samples are drawn independently (stratified: for AUROC the
    positives and negatives keep their counts), or, with ``paired=True``, with the same indices
    for all samples, which must then have one length. Same seed, same interval.

    >>> lo, hi = bootstrap_ci(roc_auc, [0.9, 0.8, 0.7, 0.4, 0.6], [0.1, 0.5, 0.3, 0.2], n=500)
    >>> 0.5 < lo <= hi <= 1.0
    True
    """
    _check_mass(mass)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not samples:
        raise ValueError("bootstrap_ci needs at least one sample")
    arrays = [_as_array(s, f"sample {i}") for i, s in enumerate(samples)]
    if paired and len({a.size for a in arrays}) > 1:
        raise ValueError(f"paired samples differ in length: {[a.size for a in arrays]}")
    rng = np.random.default_rng(seed)
    stats = np.empty(n, dtype=np.float64)
    for r in range(n):
        if paired:
            idx = rng.integers(0, arrays[0].size, size=arrays[0].size)
            draws = [a[idx] for a in arrays]
        else:
            draws = [a[rng.integers(0, a.size, size=a.size)] for a in arrays]
        stats[r] = fn(*draws)
    if not np.all(np.isfinite(stats)):
        raise ValueError("the statistic returned a non-finite value on a bootstrap replicate")
    tail = (1.0 - mass) / 2.0
    lo, hi = np.quantile(stats, [tail, 1.0 - tail])
    return float(lo), float(hi)


MEAN_CI_RESAMPLES = 2000
"""Bootstrap resamples behind :func:`mean_ci` (with seed 0: the same rows give the same interval)."""

# Resampled values held at once: bounds the memory of a large run's bootstrap (~16 MB of indices).
_BOOTSTRAP_BLOCK = 2_000_000


def mean_ci(
    values: Sample, level: float = 0.95, *, resamples: int = MEAN_CI_RESAMPLES, seed: int = 0
) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean and its percentile bootstrap interval holding ``level``.

    ``resamples`` draws of the values with replacement (NumPy, seeded: same values, same interval);
    ``low``/``high`` are the ``(1 - level) / 2`` quantiles of the resampled means. A mean of resampled
    values cannot leave ``[min, max]`` of the values, so unlike a t interval (mean +- t s / sqrt(n),
    which on a small run reached [-1.25, +2.10] for a score in [-1, 1]) the interval stays inside the
    score's range. It is narrow at small n for the same reason: with one value, or identical ones, it is that
    value; read it with the n beside it. Never NaN: an empty or non-finite sample raises ValueError.

    >>> m, lo, hi = mean_ci([0.0, 0.0, 1.0])
    >>> round(m, 4), lo, hi
    (0.3333, 0.0, 1.0)
    >>> mean_ci([7.0])
    (7.0, 7.0, 7.0)
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    x = _as_array(values)
    low_edge, high_edge = float(x.min()), float(x.max())
    try:  # fsum: the mean of identical values is that value, not one ulp off it
        mean = min(max(math.fsum(x.tolist()) / x.size, low_edge), high_edge)
    except OverflowError:
        raise ValueError("values are too large for a finite interval") from None
    if low_edge == high_edge:
        return mean, mean, mean
    rng = np.random.default_rng(seed)
    means = np.empty(resamples, dtype=np.float64)
    block = max(1, _BOOTSTRAP_BLOCK // x.size)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is caught below as non-finite
        for start in range(0, resamples, block):
            stop = min(resamples, start + block)
            means[start:stop] = x[rng.integers(0, x.size, size=(stop - start, x.size))].mean(axis=1)
    if not np.all(np.isfinite(means)):
        raise ValueError("values are too large for a finite interval")
    tail = (1.0 - level) / 2.0
    low, high = (float(v) for v in np.quantile(means, [tail, 1.0 - tail]))
    # Rounding in a resampled mean can step one ulp past the data or the point mean; the interval
    # must hold both.
    return mean, max(low_edge, min(low, mean)), min(high_edge, max(high, mean))
