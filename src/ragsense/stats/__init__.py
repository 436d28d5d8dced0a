"""Statistics shared by every layer: AUROC, intervals, paired tests and calibration.

NumPy only, exact where it can be (AUROC counts pairs in integers, the sign test sums binomial terms
in integers), deterministic everywhere (the bootstrap takes a seed). Intervals stay inside what they
bound: a mean's is a percentile bootstrap (:func:`mean_ci`, inside the values' range), a share's a
Wilson interval (:func:`wilson_ci`, :func:`share_ci`, inside [0, 1]); every summary, gate, comparison
and report uses these two.

>>> from ragsense.stats import hdi, mean_ci, roc_auc, share_ci, wilson_ci
>>> roc_auc([0.9, 0.8, 0.4], [0.1, 0.4, 0.3])  # doctest: +ELLIPSIS
0.944444...
>>> hdi(list(range(11)), mass=0.8)
(0.0, 8.0)
>>> mean_ci([2.0, 2.0, 2.0])
(2.0, 2.0, 2.0)
>>> [round(x, 3) for x in wilson_ci(3, 10)]
[0.108, 0.603]
>>> share_ci(0, 1)["high"] < 1.0
True
"""

from ragsense.stats._calibration import (
    ReliabilityBin,
    brier_score,
    expected_calibration_error,
    reliability_bins,
)
from ragsense.stats._core import (
    MEAN_CI_RESAMPLES,
    PairedSummary,
    Sample,
    Summary,
    bootstrap_ci,
    hdi,
    mean_ci,
    paired_summary,
    roc_auc,
    summarize,
)
from ragsense.stats._paired import PairedAuc, SignTest, delong_paired, sign_test, wilcoxon_signed_rank
from ragsense.stats._proportions import Share, format_share, share_ci, shares_of, wilson_ci

__all__ = [
    "MEAN_CI_RESAMPLES",
    "PairedAuc",
    "PairedSummary",
    "ReliabilityBin",
    "Sample",
    "Share",
    "SignTest",
    "Summary",
    "bootstrap_ci",
    "brier_score",
    "delong_paired",
    "expected_calibration_error",
    "format_share",
    "hdi",
    "mean_ci",
    "paired_summary",
    "reliability_bins",
    "roc_auc",
    "share_ci",
    "shares_of",
    "sign_test",
    "summarize",
    "wilcoxon_signed_rank",
    "wilson_ci",
]
