"""The figures every ConSens experiment reports, computed the same way for all of them.

A contrast is a set of paired items: one text that should score higher (a grounded answer, the
full context, the context with the right document) and one that should score lower. For each
score the experiments report

* the pooled AUROC with a percentile bootstrap interval (the pairs are resampled together);
* the paired view: in how many pairs the higher-expected text scored higher, with an exact sign
  test and Wilcoxon's signed-rank test on the paired differences;
* DeLong's paired test of every other score's AUROC against the default's, on the same items;
* for the answer-level experiments, the verdict bands' precision and recall for ``ungrounded``.

Only measured figures go into the experiments' JSON; the papers' figures are quoted in the docs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ragsense.stats import bootstrap_ci, delong_paired, hdi, roc_auc, sign_test, wilcoxon_signed_rank

_ROUND = 4


def _r(x: float) -> float:
    return round(float(x), _ROUND)


def describe(values: Sequence[float]) -> dict[str, Any]:
    """Mean and 90% highest density interval (the paper's summary)."""
    lo, hi = hdi(values, 0.9)
    return {"mean": _r(sum(values) / len(values)), "hdi90": [_r(lo), _r(hi)]}


def _paired_auroc(pos: Any, neg: Any) -> float:
    return roc_auc(pos, neg)


def contrast(pos: Sequence[float], neg: Sequence[float]) -> dict[str, Any]:
    """AUROC (with a paired bootstrap interval), the paper's summaries and the paired tests."""
    diff = [a - b for a, b in zip(pos, neg, strict=True)]
    sign = sign_test(diff)
    return {
        "auroc": _r(roc_auc(pos, neg)),
        # The two texts of a pair share a question or an item: resample pairs, not texts.
        "auroc_ci95": [_r(x) for x in bootstrap_ci(_paired_auroc, pos, neg, n=1000, seed=0, paired=True)],
        "positive": describe(pos),
        "negative": describe(neg),
        "difference": describe(diff),
        "share_positive_higher": _r(sign.n_positive / len(diff)),
        "sign_test": {
            "positive_higher": sign.n_positive,
            "negative_higher": sign.n_negative,
            "ties": sign.n_ties,
            "p_value": float(f"{sign.p_value:.3g}"),
        },
        "wilcoxon_p_value": float(f"{wilcoxon_signed_rank(diff):.3g}"),
    }


def unpaired(pos: Sequence[float], neg: Sequence[float]) -> dict[str, Any]:
    """AUROC of two independent groups (not pairs) with a stratified bootstrap interval.

    >>> unpaired([0.9, 0.8], [0.1, 0.2])["auroc"]
    1.0
    """
    return {
        "auroc": _r(roc_auc(pos, neg)),
        "auroc_ci95": [_r(x) for x in bootstrap_ci(roc_auc, pos, neg, n=1000, seed=0)],
    }


def delong_against(
    reference: tuple[Sequence[float], Sequence[float]],
    others: Mapping[str, tuple[Sequence[float], Sequence[float]]],
) -> dict[str, Any]:
    """DeLong's paired test of ``reference``'s AUROC against each of ``others`` on the same items.

    Each entry is ``(scores of the positives, scores of the negatives)``; the difference is the
    reference's AUROC minus the other's.
    """
    labels = [True] * len(reference[0]) + [False] * len(reference[1])
    ref = [*reference[0], *reference[1]]
    out: dict[str, Any] = {}
    for name, (pos, neg) in others.items():
        test = delong_paired(ref, [*pos, *neg], labels)
        out[name] = {
            "difference": _r(test.difference),
            "se": _r(test.se),
            "p_value": float(f"{test.p_value:.3g}"),
        }
    return out


def verdict_figures(
    pos: Sequence[float], neg: Sequence[float], verdict: Callable[[float], str]
) -> dict[str, Any]:
    """How the verdict bands sort positives (grounded) and negatives (not grounded).

    ``ungrounded`` precision: the share of texts called ungrounded that are negatives; recall: the
    share of negatives called ungrounded. The same for ``not grounded`` (``unsure`` or ``ungrounded``).
    """
    vp = [verdict(x) for x in pos]
    vn = [verdict(x) for x in neg]

    def pr(flagged: set[str]) -> dict[str, Any]:
        tp = sum(v in flagged for v in vn)
        fp = sum(v in flagged for v in vp)
        return {
            "precision": _r(tp / (tp + fp)) if tp + fp else None,
            "recall": _r(tp / len(vn)),
            "flagged_positives": fp,
            "flagged_negatives": tp,
        }

    bands = sorted(set(vp) | set(vn))
    return {
        "positives_by_verdict": {b: vp.count(b) for b in bands},
        "negatives_by_verdict": {b: vn.count(b) for b in bands},
        "ungrounded": pr({"ungrounded"}),
        "not_grounded": pr({"ungrounded", "unsure"}),
    }


def length_baseline(pos_texts: Sequence[str], neg_texts: Sequence[str]) -> dict[str, Any]:
    """The trivial baseline "the shorter text is the grounded one": AUROC of minus the word count."""
    pos = [-float(len(t.split())) for t in pos_texts]
    neg = [-float(len(t.split())) for t in neg_texts]
    return {
        "auroc": _r(roc_auc(pos, neg)),
        "mean_words_positive": _r(float(np.mean([-x for x in pos]))),
        "mean_words_negative": _r(float(np.mean([-x for x in neg]))),
    }
