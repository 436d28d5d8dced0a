"""AUROC against scikit-learn, HDI as the shortest window, summaries, the bootstrap, mean_ci, shares."""

from __future__ import annotations

import doctest
import importlib
import math
from typing import Any

import numpy as np
import pytest

from ragsense.stats import (
    bootstrap_ci,
    brier_score,
    delong_paired,
    expected_calibration_error,
    format_share,
    hdi,
    mean_ci,
    paired_summary,
    reliability_bins,
    roc_auc,
    share_ci,
    shares_of,
    sign_test,
    summarize,
    wilcoxon_signed_rank,
    wilson_ci,
)


def sklearn_auc(pos: Any, neg: Any) -> float:
    metrics = pytest.importorskip("sklearn.metrics")
    labels = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
    return float(metrics.roc_auc_score(labels, np.r_[pos, neg]))


# --- roc_auc --------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_roc_auc_matches_sklearn_on_continuous_scores(seed: int) -> None:
    rng = np.random.default_rng(seed)
    pos = rng.normal(0.5, 1.0, size=rng.integers(1, 300))
    neg = rng.normal(0.0, 1.0, size=rng.integers(1, 300))
    assert roc_auc(pos, neg) == pytest.approx(sklearn_auc(pos, neg), abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_roc_auc_matches_sklearn_with_many_ties(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    pos = rng.integers(0, 4, size=157).astype(float)
    neg = rng.integers(0, 3, size=89).astype(float)
    assert roc_auc(pos, neg) == pytest.approx(sklearn_auc(pos, neg), abs=1e-12)


def test_roc_auc_edge_values() -> None:
    assert roc_auc([2.0, 3.0], [0.0, 1.0]) == 1.0
    assert roc_auc([0.0, 1.0], [2.0, 3.0]) == 0.0
    assert roc_auc([1.0, 1.0, 1.0], [1.0]) == 0.5
    assert roc_auc([0.5], [0.5, 0.4]) == 0.75
    assert roc_auc(np.array([1, 2]), (0,)) == 1.0  # any numeric sequence


@pytest.mark.parametrize(
    ("pos", "neg", "match"),
    [
        ([], [1.0], "scores_positive is empty"),
        ([1.0], [], "scores_negative is empty"),
        ([1.0, math.nan], [0.0], "non-finite value at index 1"),
        ([1.0], [math.inf], "non-finite"),
        ([[1.0]], [0.0], "one-dimensional"),
    ],
)
def test_roc_auc_rejects_bad_input(pos: Any, neg: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        roc_auc(pos, neg)


# --- hdi ------------------------------------------------------------------------------------------


def brute_force_shortest(values: np.ndarray, mass: float) -> float:
    """The width of the shortest [x_i, x_j] holding at least mass of the sample, by trying all."""
    x = np.sort(values)
    n = len(x)
    best = math.inf
    for i in range(n):
        for j in range(i, n):
            if (j - i + 1) / n >= mass - 1e-12:
                best = min(best, x[j] - x[i])
                break
    return best


def test_hdi_on_a_uniform_grid() -> None:
    grid = np.arange(101, dtype=float)  # 0..100
    lo, hi = hdi(grid, 0.9)
    assert hi - lo == 90.0  # 91 of 101 values: every window is equally short
    assert (lo, hi) == (0.0, 90.0)  # ties go to the lowest window
    assert hdi(np.arange(10.0), 0.9) == (0.0, 8.0)  # 9 of 10 values, not 10 (see the docstring)


def test_hdi_of_a_skewed_sample_is_the_shortest_window() -> None:
    rng = np.random.default_rng(7)
    sample = rng.exponential(1.0, size=400)
    lo, hi = hdi(sample, 0.9)
    assert hi - lo == pytest.approx(brute_force_shortest(sample, 0.9))
    assert np.mean((sample >= lo) & (sample <= hi)) >= 0.9
    # For a right-skewed sample the HDI starts at the minimum and is shorter than the
    # equal-tailed interval.
    assert lo == sample.min()
    q_lo, q_hi = np.quantile(sample, [0.05, 0.95])
    assert hi - lo < q_hi - q_lo


@pytest.mark.parametrize("mass", [0.5, 0.8, 0.9, 0.95, 1.0])
def test_hdi_random_samples_against_brute_force(mass: float) -> None:
    rng = np.random.default_rng(int(mass * 100))
    sample = np.r_[rng.normal(0, 1, 60), rng.normal(6, 0.3, 30)]
    lo, hi = hdi(sample, mass)
    assert hi - lo == pytest.approx(brute_force_shortest(sample, mass))
    assert np.mean((sample >= lo) & (sample <= hi)) >= mass - 1e-12


def test_hdi_small_and_degenerate_samples() -> None:
    assert hdi([5.0]) == (5.0, 5.0)
    assert hdi([0.0, 1.0, 2.0, 3.0, 100.0], 0.8) == (0.0, 3.0)
    assert hdi([3.0, 1.0, 2.0], 1.0) == (1.0, 3.0)
    assert hdi([2.0, 2.0, 2.0, 9.0], 0.75) == (2.0, 2.0)
    assert hdi([1.0, 2.0], 0.01) == (1.0, 1.0)


@pytest.mark.parametrize("mass", [0.0, -0.1, 1.5, math.nan])
def test_hdi_rejects_bad_mass(mass: float) -> None:
    with pytest.raises(ValueError, match="mass"):
        hdi([1.0, 2.0], mass)


def test_hdi_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="empty"):
        hdi([])
    with pytest.raises(ValueError, match="non-finite"):
        hdi([1.0, math.nan])


# --- summaries ------------------------------------------------------------------------------------


def test_summarize() -> None:
    rng = np.random.default_rng(3)
    values = rng.normal(2.0, 1.5, size=250)
    s = summarize(values)
    assert s["n"] == 250
    assert s["mean"] == pytest.approx(values.mean())
    assert s["median"] == pytest.approx(np.median(values))
    assert s["std"] == pytest.approx(values.std(ddof=1))
    assert s["hdi90"] == list(hdi(values, 0.9))
    assert summarize([4.0]) == {"n": 1, "mean": 4.0, "median": 4.0, "std": 0.0, "hdi90": [4.0, 4.0]}
    with pytest.raises(ValueError, match="empty"):
        summarize([])


def test_paired_summary() -> None:
    a = [0.9, 0.5, 0.3, 0.8, 0.4]
    b = [0.1, 0.5, 0.6, 0.2, 0.4]
    s = paired_summary(a, b)
    diff = np.subtract(a, b)
    assert s["n"] == 5
    assert s["mean_diff"] == pytest.approx(diff.mean())
    assert s["median_diff"] == pytest.approx(np.median(diff))
    assert s["hdi90_diff"] == list(hdi(diff, 0.9))
    assert s["share_a_greater"] == pytest.approx(0.4)
    assert s["share_ties"] == pytest.approx(0.4)
    with pytest.raises(ValueError, match="differ in length"):
        paired_summary([1.0, 2.0], [1.0])


# --- bootstrap ------------------------------------------------------------------------------------


def test_bootstrap_ci_of_auroc_is_deterministic_and_brackets_the_estimate() -> None:
    rng = np.random.default_rng(11)
    pos = rng.normal(1.0, 1.0, 120)
    neg = rng.normal(0.0, 1.0, 150)
    point = roc_auc(pos, neg)
    lo, hi = bootstrap_ci(roc_auc, pos, neg, n=500)
    assert lo < point < hi
    assert 0.0 < hi - lo < 0.2
    assert bootstrap_ci(roc_auc, pos, neg, n=500) == (lo, hi)
    assert bootstrap_ci(roc_auc, pos, neg, n=500, seed=1) != (lo, hi)
    narrow = bootstrap_ci(roc_auc, pos, neg, n=500, mass=0.5)
    assert lo < narrow[0] <= narrow[1] < hi


def test_bootstrap_ci_matches_a_direct_percentile_bootstrap() -> None:
    values = np.arange(20, dtype=float) ** 1.5
    lo, hi = bootstrap_ci(np.mean, values, n=300, seed=5, mass=0.9)
    rng = np.random.default_rng(5)
    means = [values[rng.integers(0, 20, size=20)].mean() for _ in range(300)]
    assert (lo, hi) == tuple(np.quantile(means, [0.05, 0.95]))


def test_bootstrap_ci_paired_keeps_pairs_together() -> None:
    b = np.random.default_rng(2).normal(size=50)
    a = b + 1.0
    lo, hi = bootstrap_ci(lambda x, y: float(np.mean(x - y)), a, b, n=200, paired=True)
    assert lo == pytest.approx(1.0) and hi == pytest.approx(1.0)
    lo, hi = bootstrap_ci(lambda x, y: float(np.mean(x - y)), a, b, n=200)
    assert hi - lo > 0.1  # independent draws break the pairs


def test_bootstrap_ci_errors() -> None:
    with pytest.raises(ValueError, match="at least one sample"):
        bootstrap_ci(np.mean)
    with pytest.raises(ValueError, match="n must be"):
        bootstrap_ci(np.mean, [1.0], n=0)
    with pytest.raises(ValueError, match="mass"):
        bootstrap_ci(np.mean, [1.0], mass=0.0)
    with pytest.raises(ValueError, match="differ in length"):
        bootstrap_ci(roc_auc, [1.0, 2.0], [1.0], paired=True)
    with pytest.raises(ValueError, match="sample 1 is empty"):
        bootstrap_ci(roc_auc, [1.0], [])
    with pytest.raises(ValueError, match="non-finite value on a bootstrap replicate"):
        bootstrap_ci(lambda x: math.nan, [1.0, 2.0], n=3)


# --- mean_ci --------------------------------------------------------------------------------------


@pytest.mark.parametrize("level", [0.8, 0.95, 0.99])
def test_mean_ci_is_the_percentile_bootstrap_of_the_mean(level: float) -> None:
    x = np.random.default_rng(1).normal(3.0, 2.0, size=25)
    mean, low, high = mean_ci(x, level)
    # The same interval from the general bootstrap (independent code path, its own draws): the two
    # agree to Monte Carlo error (about 0.1 standard error at 2,000 draws; a wrong scale or a
    # t interval at the wrong level would miss by several tenths).
    ref_low, ref_high = bootstrap_ci(lambda v: float(v.mean()), x, n=4000, seed=7, mass=level)
    half = float(np.std(x, ddof=1)) / math.sqrt(x.size)
    assert mean == pytest.approx(x.mean(), abs=1e-12)
    assert low == pytest.approx(ref_low, abs=0.3 * half) and high == pytest.approx(ref_high, abs=0.3 * half)
    assert mean_ci(x, level) == (mean, low, high)  # seeded: the same values give the same interval
    assert mean_ci(x, level, seed=1) != (mean, low, high)


SMALL_SAMPLES = [
    [0.5],
    [-1.0],
    [1.0, 1.0],
    [-1.0, 1.0],
    [0.2, 0.2, 0.2],
    [-1.0, -1.0, 1.0],
    [-1.0, 1.0, 1.0, 1.0, 1.0],
    [0.1, 0.1, 0.1, 0.1 + 1e-12],  # nearly constant: rounding must not step outside
]


@pytest.mark.parametrize("values", SMALL_SAMPLES)
def test_mean_ci_stays_inside_the_range_of_small_and_extreme_samples(values: list[float]) -> None:
    mean, low, high = mean_ci(values)
    assert all(math.isfinite(v) for v in (mean, low, high))
    assert min(values) <= low <= mean <= high <= max(values)


def test_mean_ci_stays_inside_the_score_range_on_random_small_samples() -> None:
    # Property check: scores in [-1, 1] (ConSens) and [0, 1] (VERA), n = 1..8, often at the edges,
    # where a t interval ran to [-1.25, +2.10] and [-5.85, +6.85].
    rng = np.random.default_rng(2026)
    for _ in range(300):
        lo_edge, hi_edge = ((-1.0, 1.0), (0.0, 1.0))[int(rng.integers(2))]
        n = int(rng.integers(1, 9))
        values = rng.uniform(lo_edge, hi_edge, n)
        values[rng.random(n) < 0.4] = hi_edge
        values[rng.random(n) < 0.3] = lo_edge
        mean, low, high = mean_ci(values)
        assert lo_edge <= min(values) <= low <= mean <= high <= max(values) <= hi_edge


def test_mean_ci_small_and_constant_samples_give_no_nan() -> None:
    assert mean_ci([4.0]) == (4.0, 4.0, 4.0)
    assert mean_ci(np.array([3.0])) == (3.0, 3.0, 3.0)
    assert mean_ci([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)
    mean, low, high = mean_ci([0.0, 1.0])
    assert all(math.isfinite(v) for v in (mean, low, high)) and low < mean < high
    assert mean_ci([0.1] * 7) == (0.1, 0.1, 0.1)  # not one ulp off, as a float sum would be


def test_mean_ci_errors() -> None:
    with pytest.raises(ValueError, match="values is empty"):
        mean_ci([])
    with pytest.raises(ValueError, match="non-finite"):
        mean_ci([1.0, math.nan])
    with pytest.raises(ValueError, match="level"):
        mean_ci([1.0, 2.0], level=1.0)
    with pytest.raises(ValueError, match="finite interval"):
        mean_ci([1e308, -1e308, 1e308])
    with pytest.raises(ValueError, match="finite interval"):
        mean_ci([1e308, 1e308])
    with pytest.raises(ValueError, match="resamples"):
        mean_ci([1.0, 2.0], resamples=0)


def test_doctests() -> None:
    result = doctest.testmod(importlib.import_module("ragsense.stats"))
    assert result.attempted > 0
    assert result.failed == 0


# --- paired tests, proportions, calibration -------------------------------------------------------


def test_wilson_matches_the_published_formula_values() -> None:
    # Reference: Wilson (1927) score interval; 3 of 10 at 95% is (0.1078, 0.6032) in every textbook table.
    lo, hi = wilson_ci(3, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.1078, 0.6032)
    assert wilson_ci(0, 12)[0] == 0.0 and wilson_ci(12, 12)[1] == 1.0
    with pytest.raises(ValueError):
        wilson_ci(5, 4)


def test_share_ci_and_shares_of() -> None:
    # 3 of 5 at 95%: p = 0.6, z = 1.959964; centre (0.6 + z^2/10) / (1 + z^2/5) = 0.5566,
    # half-width 0.3257: (0.2307, 0.8824).
    s = share_ci(3, 5)
    assert (s["share"], s["count"], s["n"]) == (0.6, 3, 5)
    assert (round(s["low"], 4), round(s["high"], 4)) == (0.2307, 0.8824)
    assert format_share(s) == "60% [23%, 88%] (3 of 5)"
    assert share_ci(0, 0) == {"share": 0.0, "low": 0.0, "high": 1.0, "n": 0, "count": 0}
    one = share_ci(1, 1)
    assert one["high"] == 1.0 and 0.0 < one["low"] < 0.25  # one row proves little
    shares = shares_of(
        ["ungrounded", "grounded", "ungrounded", "odd"], order=["grounded", "unsure", "ungrounded"]
    )
    assert list(shares) == ["grounded", "unsure", "ungrounded", "odd"]
    assert [shares[k]["count"] for k in shares] == [1, 0, 2, 1] and {v["n"] for v in shares.values()} == {4}


def test_sign_test_is_exact_and_symmetric() -> None:
    assert sign_test([1.0] * 10).p_value == pytest.approx(2 / 1024)
    assert sign_test([-1.0] * 10).p_value == sign_test([1.0] * 10).p_value
    balanced = sign_test([1.0, -1.0] * 5)
    assert balanced.p_value == 1.0 and (balanced.n_positive, balanced.n_negative) == (5, 5)


def test_wilcoxon_agrees_with_scipy_when_available() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(1)
    for n in (8, 30, 80):
        d = rng.normal(0.3, 1.0, size=n)
        ours = wilcoxon_signed_rank(d)
        ref = scipy_stats.wilcoxon(d, correction=True, method="exact" if n <= 50 else "approx").pvalue
        assert ours == pytest.approx(ref, rel=1e-6, abs=1e-9)


def test_delong_se_is_close_to_the_paired_bootstrap() -> None:
    rng = np.random.default_rng(0)
    labels = [True] * 60 + [False] * 60
    signal = np.array([1.0] * 60 + [0.0] * 60)
    a = signal + rng.normal(0, 1.0, 120)
    b = signal + rng.normal(0, 1.0, 120) * 0.5 + 0.5 * a
    test = delong_paired(a, b, labels)
    assert test.auc_a == pytest.approx(roc_auc(a[:60], a[60:]))
    assert test.difference == pytest.approx(test.auc_a - test.auc_b)
    diffs = []
    for _ in range(400):
        pi = rng.integers(0, 60, 60)
        ni = rng.integers(60, 120, 60)
        diffs.append(roc_auc(a[pi], a[ni]) - roc_auc(b[pi], b[ni]))
    assert test.se == pytest.approx(float(np.std(diffs)), rel=0.25)
    same = delong_paired(a, a, labels)
    assert (same.difference, same.p_value) == (0.0, 1.0)


def test_calibration_figures() -> None:
    assert brier_score([0.0, 1.0], [False, True]) == 0.0
    assert brier_score([1.0, 0.0], [False, True]) == 1.0
    perfect = [0.25] * 4 + [0.75] * 4
    outcomes = [True, False, False, False, True, True, True, False]
    assert expected_calibration_error(perfect, outcomes) == pytest.approx(0.0)
    assert [b.n for b in reliability_bins([0.05, 1.0, 0.999], [False, True, True], 10)] == [1, 2]
    with pytest.raises(ValueError):
        brier_score([1.2], [True])
