"""Statistics shared by every layer: AUROC, intervals, paired tests and calibration.

NumPy only (SciPy, when installed, gives exact t quantiles to :func:`mean_ci`), exact where it can
be (AUROC counts pairs in integers, the sign test sums binomial terms in integers), deterministic
everywhere (the bootstrap takes a seed).

>>> from ragsense.stats import hdi, mean_ci, roc_auc, wilson_ci
>>> roc_auc([0.9, 0.8, 0.4], [0.1, 0.4, 0.3])  # doctest: +ELLIPSIS
0.944444...
>>> hdi(list(range(11)), mass=0.8)
(0.0, 8.0)
>>> mean_ci([2.0, 2.0, 2.0])
(2.0, 2.0, 2.0)
>>> [round(x, 3) for x in wilson_ci(3, 10)]
[0.108, 0.603]
"""

from ragsense.stats._calibration import (
    ReliabilityBin,
    brier_score,
    expected_calibration_error,
    reliability_bins,
)
from ragsense.stats._core import (
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
from ragsense.stats._proportions import wilson_ci

__all__ = [
    "PairedAuc",
    "PairedSummary",
    "ReliabilityBin",
    "Sample",
    "SignTest",
    "Summary",
    "bootstrap_ci",
    "brier_score",
    "delong_paired",
    "expected_calibration_error",
    "hdi",
    "mean_ci",
    "paired_summary",
    "reliability_bins",
    "roc_auc",
    "sign_test",
    "summarize",
    "wilcoxon_signed_rank",
    "wilson_ci",
]
