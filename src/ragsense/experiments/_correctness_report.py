"""The figures of the correctness experiment: paragraph-grouped folds, baselines, thresholds picked on
the training part, calibration and the reliability plot (no model runs here)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ragsense.errors import BackendUnavailableError
from ragsense.stats import (
    bootstrap_ci,
    brier_score,
    delong_paired,
    expected_calibration_error,
    reliability_bins,
    roc_auc,
    wilson_ci,
)

# ----------------------------------------------------------------------------------------

FOLDS = 5
"""Cross-validation folds on the training part (whole paragraphs per fold)."""
OUTPUT_NLL = "normal.output.mean"
"""The single feature fixed in advance as the output-NLL baseline: the BM's mean NLL of its own answer."""
PERTURBED_PREFIX = "perturbed."
RELIABILITY_PLOT = "reliability.png"
BOOTSTRAP = 2000

FitPredict = Callable[[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]], Any]
"""Fit a regressor on (x, y) and return its predictions for a second matrix."""


def forest_fit_predict(n_trees: int, seed: int) -> FitPredict:
    """The estimator's forest (scikit-learn, the same settings as :class:`CorrectnessEstimator`)."""

    def fit_predict(
        x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], x_new: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        from sklearn.ensemble import RandomForestRegressor

        forest = RandomForestRegressor(n_estimators=n_trees, random_state=seed, n_jobs=2)
        return np.asarray(forest.fit(x, y).predict(x_new), dtype=np.float64)

    return fit_predict


def grouped_folds(groups: Sequence[str], folds: int = FOLDS, seed: int = 0) -> list[int]:
    """The fold of each sample, with every group (paragraph) whole in one fold: the groups are dealt
    in a seeded order, each to the fold with the fewest samples so far.

    >>> grouped_folds(["a", "a", "b", "c", "c", "d"], folds=2)
    [1, 1, 0, 0, 0, 1]
    """
    order = list(dict.fromkeys(groups))
    if len(order) < folds:
        raise ValueError(f"{folds} folds need at least {folds} groups, got {len(order)}")
    random.Random(seed).shuffle(order)
    size = Counter(groups)
    load = [0] * folds
    fold_of: dict[str, int] = {}
    for group in order:
        k = min(range(folds), key=lambda i: (load[i], i))
        fold_of[group] = k
        load[k] += size[group]
    return [fold_of[g] for g in groups]


def out_of_fold(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], fold: Sequence[int], fit_predict: FitPredict
) -> npt.NDArray[np.float64]:
    """Each sample predicted by a model fitted on the other folds only."""
    fold_of = np.asarray(fold)
    predicted = np.zeros(len(y), dtype=np.float64)
    for k in sorted(set(fold)):
        test = fold_of == k
        predicted[test] = fit_predict(x[~test], y[~test], x[test])
    return predicted


def _f1(guess: npt.NDArray[np.float64], label: npt.NDArray[np.float64]) -> float:
    tp = float(np.sum((guess > 0) & (label > 0)))
    wrong = float(np.sum((guess > 0) != (label > 0)))
    return 2 * tp / (2 * tp + wrong) if tp else 0.0


def best_f1_threshold(estimates: Sequence[float], labels: Sequence[bool]) -> float:
    """The decision threshold c (``estimate >= c`` means correct) with the highest F1; on a tie the
    highest such c. Candidates are the estimates themselves.

    >>> best_f1_threshold([0.1, 0.4, 0.35, 0.8], [False, True, False, True])
    0.4
    """
    est = np.asarray(estimates, dtype=np.float64)
    lab = np.asarray(labels, dtype=np.float64)
    best, best_f1 = float(est.max()), -1.0
    for c in sorted(set(est.tolist()), reverse=True):
        f1 = _f1((est >= c).astype(np.float64), lab)
        if f1 > best_f1:
            best, best_f1 = float(c), f1
    return best


def _r(value: Any) -> float:
    return round(float(value), 4)


def _ci(interval: tuple[float, float]) -> list[float]:
    return [_r(interval[0]), _r(interval[1])]


def classification(
    guess: Sequence[bool], labels: Sequence[bool], seed: int = 0, n_boot: int = BOOTSTRAP
) -> dict[str, Any]:
    """Accuracy (Wilson 95% interval), F1 (paired percentile bootstrap 95% interval), precision and
    recall of 0/1 guesses against 0/1 labels.

    >>> c = classification([True, False, False, True], [True, False, True, True])
    >>> c["accuracy"], c["f1"], c["precision"], c["recall"]
    (0.75, 0.8, 1.0, 0.6667)
    """
    g = np.asarray(guess, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    n = int(y.size)
    right = int(np.sum(g == y))
    tp = int(np.sum((g > 0) & (y > 0)))
    return {
        "accuracy": _r(right / n),
        "accuracy_ci95": _ci(wilson_ci(right, n)),
        "f1": _r(_f1(g, y)),
        "f1_ci95": _ci(bootstrap_ci(_f1, g, y, n=n_boot, seed=seed, paired=True)),
        "precision": _r(tp / g.sum()) if g.sum() else None,
        "recall": _r(tp / y.sum()) if y.sum() else None,
        "predicted_positive": int(g.sum()),
    }


def _auroc(
    scores: npt.NDArray[np.float64], labels: npt.NDArray[np.bool_], seed: int, n_boot: int = BOOTSTRAP
) -> dict[str, Any]:
    """AUROC of ``scores`` (higher = correct) with its stratified percentile-bootstrap 95% interval."""
    if not 0 < labels.sum() < labels.size:
        return {"auroc": None, "auroc_ci95": None}
    pos, neg = scores[labels], scores[~labels]
    return {
        "auroc": _r(roc_auc(pos, neg)),
        "auroc_ci95": _ci(bootstrap_ci(roc_auc, pos, neg, n=n_boot, seed=seed)),
    }


def _versus(
    a: npt.NDArray[np.float64], b: npt.NDArray[np.float64], labels: npt.NDArray[np.bool_]
) -> dict[str, float] | None:
    """DeLong's paired test of AUROC(a) - AUROC(b) on the same items (None with one class only)."""
    if not 0 < labels.sum() < labels.size:
        return None
    return {k: _r(v) for k, v in delong_paired(a, b, labels.tolist()).to_dict().items()}


def _calibration(
    probs: npt.NDArray[np.float64], labels: npt.NDArray[np.bool_], seed: int, n_boot: int = BOOTSTRAP
) -> dict[str, Any]:
    """Brier score (paired bootstrap 95% interval), ECE and the reliability table (10 equal bins)."""
    p = np.clip(probs, 0.0, 1.0)
    y = labels.tolist()
    bins = reliability_bins(p, y)
    return {
        "brier": _r(brier_score(p, y)),
        "brier_ci95": _ci(
            bootstrap_ci(
                lambda q, o: float(np.mean((q - o) ** 2)),
                p,
                labels.astype(np.float64),
                n=n_boot,
                seed=seed,
                paired=True,
            )
        ),
        "ece": _r(expected_calibration_error(p, y)),
        "reliability": [
            {
                "lo": b.lo,
                "hi": b.hi,
                "n": b.n,
                "mean_predicted": _r(b.mean_predicted),
                "observed": _r(b.observed),
                "observed_ci95": _ci(wilson_ci(round(b.observed * b.n), b.n)),
            }
            for b in bins
        ],
    }


def platt(estimates: Sequence[float], labels: Sequence[bool]) -> tuple[float, float]:
    """Logistic fit ``P(correct) = 1 / (1 + exp(-(a * estimate + b)))`` (Platt scaling), unpenalized
    up to a negligible ridge; returns ``(a, b)``."""
    from sklearn.linear_model import LogisticRegression

    fit = LogisticRegression(C=1e6, max_iter=1000).fit(np.asarray(estimates).reshape(-1, 1), list(labels))
    return float(fit.coef_[0][0]), float(fit.intercept_[0])


def _sigmoid(a: float, b: float, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return np.asarray(1.0 / (1.0 + np.exp(-(a * x + b))), dtype=np.float64)


@dataclass
class Report:
    """The figures (``figures``, JSON-ready) and the per-item values behind them."""

    figures: dict[str, Any]
    eval_items: list[dict[str, Any]]
    train_items: list[dict[str, Any]]


def evaluation_report(
    names: Sequence[str],
    x_train: npt.NDArray[np.float64],
    y_train: Sequence[float],
    groups_train: Sequence[str],
    x_eval: npt.NDArray[np.float64],
    y_eval: Sequence[float],
    *,
    threshold: float,
    fit_predict: FitPredict,
    predicted_eval: npt.NDArray[np.float64] | None = None,
    seed: int = 0,
    folds: int = FOLDS,
    n_boot: int = BOOTSTRAP,
) -> Report:
    """Every figure of the evaluation part, each beside its baselines, and nothing chosen on it.

    * ``forest``: the estimator (all features) on the evaluation part: MSE, AUROC, and accuracy / F1 at
      the fixed threshold ``t`` (``estimate >= t``) and at the decision threshold picked on the training
      part's grouped out-of-fold estimates (highest F1 there).
    * ``baselines``: always-correct and always-incorrect accuracy and F1, and the MSE of predicting the
      training part's mean target.
    * ``single_features``: the feature with the highest AUROC on the training part, its direction
      chosen there too, then its AUROC on the evaluation part; ``output_nll``: the Normal answer's mean
      NLL (fixed in advance, lower = correct); ``forest_without_perturbed``: the same forest without
      any Perturbed-condition feature. Each comes with DeLong's paired test against the forest.
    * ``calibration``: Brier score, ECE and a reliability table of the estimate read as P(correct),
      of a Platt scaling fitted on the training part's out-of-fold estimates, and of the training
      part's positive share as a constant forecast.

    ``predicted_eval``: the estimator's predictions when already made (else ``fit_predict`` makes them).
    """
    names = list(names)
    ytr = np.asarray(y_train, dtype=np.float64)
    yev = np.asarray(y_eval, dtype=np.float64)
    ltr, lev = ytr >= threshold, yev >= threshold
    pred = fit_predict(x_train, ytr, x_eval) if predicted_eval is None else np.asarray(predicted_eval)
    figures: dict[str, Any] = {
        "threshold": threshold,
        "split": {
            "unit": "paragraph",
            "n_train": int(ytr.size),
            "n_eval": int(yev.size),
            "paragraphs_train": len(set(groups_train)),
            "train_positives": int(ltr.sum()),
            "eval_positives": int(lev.sum()),
            "eval_positive_share": _r(lev.mean()),
            "eval_positive_share_ci95": _ci(wilson_ci(int(lev.sum()), int(lev.size))),
        },
    }

    # Out-of-fold estimates of the training part, whole paragraphs per fold: the decision threshold
    # and the Platt scaling are chosen on these, never on the evaluation part.
    folds = min(folds, len(set(groups_train)))  # a tiny run (--limit 10) has few paragraphs
    fold = grouped_folds(groups_train, folds, seed)
    oof = out_of_fold(x_train, ytr, fold, fit_predict)
    decision = best_f1_threshold(oof.tolist(), ltr.tolist()) if ltr.any() else threshold
    figures["train_cv"] = {
        "folds": folds,
        "unit": "paragraph",
        "mse": _r(np.mean((oof - ytr) ** 2)),
        **_auroc(oof, ltr, seed, n_boot),
        "decision_threshold": _r(decision),
        "f1_at_decision_threshold": _r(_f1((oof >= decision).astype(np.float64), ltr.astype(np.float64))),
    }

    always = {
        "always_correct": classification([True] * int(lev.size), lev.tolist(), seed, n_boot),
        "always_incorrect": classification([False] * int(lev.size), lev.tolist(), seed, n_boot),
    }
    for constant in always.values():
        del constant["f1_ci95"]  # constant guesses: no interval worth printing
    figures["baselines"] = {
        **always,
        "train_mean_mse": _r(np.mean((yev - ytr.mean()) ** 2)),
    }
    figures["forest"] = {
        "n_features": len(names),
        "mse": _r(np.mean((pred - yev) ** 2)),
        **_auroc(pred, lev, seed, n_boot),
        "at_t": {
            "decision_threshold": threshold,
            **classification((pred >= threshold).tolist(), lev.tolist(), seed, n_boot),
        },
        "at_train_threshold": {
            "decision_threshold": _r(decision),
            **classification((pred >= decision).tolist(), lev.tolist(), seed, n_boot),
        },
    }

    # Single features: lower NLL should mean correct, but the direction is taken from the training part.
    singles = []
    for j, name in enumerate(names):
        if 0 < ltr.sum() < ltr.size:
            auc = roc_auc(-x_train[ltr, j], -x_train[~ltr, j])
            sign = -1.0 if auc >= 0.5 else 1.0
            singles.append((max(auc, 1 - auc), j, name, sign))
    singles.sort(key=lambda t: (-t[0], t[1]))
    figures["single_features"] = [
        {
            "name": name,
            "direction": "lower NLL = correct" if sign < 0 else "higher NLL = correct",
            "train_auroc": _r(train_auc),
            **{f"eval_{k}": v for k, v in _auroc(sign * x_eval[:, j], lev, seed, n_boot).items()},
        }
        for train_auc, j, name, sign in singles[:5]
    ]
    if singles:
        _, j, name, sign = singles[0]
        figures["best_single_feature"] = {
            "chosen_on": "training part (highest AUROC there)",
            **figures["single_features"][0],
            "forest_minus_feature": _versus(pred, sign * x_eval[:, j], lev),
        }
    if OUTPUT_NLL in names:
        j = names.index(OUTPUT_NLL)
        figures["output_nll"] = {
            "name": OUTPUT_NLL,
            "direction": "lower NLL = correct (fixed in advance)",
            **_auroc(-x_eval[:, j], lev, seed, n_boot),
            "forest_minus_feature": _versus(pred, -x_eval[:, j], lev),
        }
    keep = [j for j, name in enumerate(names) if not name.startswith(PERTURBED_PREFIX)]
    without = pred
    if len(keep) < len(names):
        without = fit_predict(x_train[:, keep], ytr, x_eval[:, keep])
        figures["forest_without_perturbed"] = {
            "n_features": len(keep),
            "mse": _r(np.mean((without - yev) ** 2)),
            **_auroc(without, lev, seed, n_boot),
            "forest_minus_this": _versus(pred, without, lev),
        }

    calibration: dict[str, Any] = {
        "note": "the estimate read as P(correct); Platt scaling and the constant forecast are fitted on "
        "the training part only",
        "estimate": _calibration(pred, lev, seed, n_boot),
        "constant_train_share": {
            "p": _r(ltr.mean()),
            **_calibration(np.full(lev.size, ltr.mean()), lev, seed, n_boot),
        },
    }
    probability = None
    if 0 < ltr.sum() < ltr.size:
        a, b = platt(oof.tolist(), ltr.tolist())
        probability = _sigmoid(a, b, pred)
        calibration["platt"] = {"a": _r(a), "b": _r(b), **_calibration(probability, lev, seed, n_boot)}
    figures["calibration"] = calibration

    eval_items = [
        {
            "target": _r(yev[i]),
            "correct": bool(lev[i]),
            "estimate": round(float(pred[i]), 6),
            "estimate_without_perturbed": round(float(without[i]), 6),
            **({} if probability is None else {"probability": round(float(probability[i]), 6)}),
        }
        for i in range(yev.size)
    ]
    train_items = [
        {
            "target": _r(ytr[i]),
            "correct": bool(ltr[i]),
            "fold": fold[i],
            "estimate_out_of_fold": round(float(oof[i]), 6),
        }
        for i in range(ytr.size)
    ]
    return Report(figures, eval_items, train_items)


def plot_reliability(calibration: Mapping[str, Any], path: Path, *, title: str) -> Path:
    """Reliability diagram of each forecast in ``calibration`` (mean predicted vs observed share of
    correct answers per bin, marker area by count). Raises
    :class:`~ragsense.errors.BackendUnavailableError` without matplotlib ("pip install 'ragsense[plot]'").
    """
    try:
        import matplotlib
        import matplotlib.style
    except ImportError as exc:
        raise BackendUnavailableError(
            f"matplotlib is not installed, so {path.name} was not drawn: pip install 'ragsense[plot]'"
        ) from exc
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.style.context("default"):
        fig = Figure(figsize=(5.2, 5.0), dpi=120, layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfect calibration")
        labels = {"estimate": "forest estimate", "platt": "Platt-scaled (fit on training part)"}
        for key, text in labels.items():
            block = calibration.get(key)
            if not block:
                continue
            bins = block["reliability"]
            ax.plot(
                [b["mean_predicted"] for b in bins],
                [b["observed"] for b in bins],
                marker="o",
                linewidth=1.5,
                label=f"{text}: Brier {block['brier']:.3f}, ECE {block['ece']:.3f}",
            )
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("Mean predicted P(correct) in bin")
        ax.set_ylabel("Observed share correct")
        ax.set_title(" ".join(title.split()), fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", fontsize=7, frameon=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png", metadata={"Software": None})
    return path
