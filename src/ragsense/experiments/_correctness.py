"""The correctness paper's experiment on SQuAD 2.0 (Zhang et al., Section 4): a seeded split of
answerable questions into a training part (2,100) and an evaluation part (up to 900), features from the
base model under the three conditions, a random forest, and its figures on the evaluation part beside
trivial and single-feature baselines, with calibration and intervals (:func:`evaluation_report`).

Only the dev split of SQuAD 2.0 is shipped in ../shared/data, so both parts come from it, split by
paragraph (:func:`squad_split`): no paragraph has questions in both parts. ``limit`` keeps the 70 / 30
proportion from the front of each part, so smaller runs are nested in larger ones and reuse their
cached features. Nothing is chosen on the evaluation part: the decision threshold, the Platt scaling
and the best single feature come from the training part (its out-of-fold estimates, with folds that
hold whole paragraphs). The paper's own figures are quoted in docs/results.md, never returned here.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ragsense._async import run_sync
from ragsense.cache import cache_dir
from ragsense.correctness import (
    DEFAULT_AGGREGATES,
    CorrectnessEstimator,
    CorrectnessSample,
    FeatureExtractor,
    PerturbationSettings,
    SampleFeatures,
    correctness_targets,
)
from ragsense.correctness._targets import Metric
from ragsense.data import dumps_json, load_squad_v2
from ragsense.errors import BackendUnavailableError, ParameterError
from ragsense.evaluation import Needs, run_rows
from ragsense.metrics import FEATURE_FIELDS
from ragsense.models import LanguageModel, load_model
from ragsense.stats import (
    bootstrap_ci,
    brier_score,
    delong_paired,
    expected_calibration_error,
    reliability_bins,
    roc_auc,
    wilson_ci,
)

N_TRAIN, N_EVAL = 2100, 900


def squad_split(
    data: str | None, limit: int | None, seed: int
) -> tuple[list[CorrectnessSample], list[CorrectnessSample]]:
    """The seeded train / evaluation samples (answerable questions only), split by paragraph.

    The paragraphs are shuffled with ``seed`` and given whole to the training part until it holds
    ``N_TRAIN`` questions (the questions of the paragraph that crosses the line beyond ``N_TRAIN`` are
    used nowhere), then to the evaluation part until it holds ``N_EVAL`` or the data ends. So no
    paragraph has questions in both parts: the context-place features, which are a fingerprint of the
    paragraph, cannot carry a label from one part to the other. Each part is then shuffled (same
    seed), so that its front, which ``limit`` takes, spreads over many paragraphs. ``limit`` keeps the
    70 / 30 proportion from the front of each part, so smaller runs are nested in larger ones.
    """
    items = [item for item in load_squad_v2(data) if not item.is_impossible and item.answers]
    paragraphs: dict[tuple[str, str], list[CorrectnessSample]] = {}
    for it in items:
        sample = CorrectnessSample(it.question, it.context, tuple(it.answers), it.id)
        paragraphs.setdefault((it.title, it.context), []).append(sample)
    groups = list(paragraphs.values())
    rng = random.Random(seed)
    rng.shuffle(groups)
    train: list[CorrectnessSample] = []
    evaluation: list[CorrectnessSample] = []
    for group in groups:
        if len(train) < N_TRAIN:
            train.extend(group[: N_TRAIN - len(train)])
        elif len(evaluation) < N_EVAL:
            evaluation.extend(group[: N_EVAL - len(evaluation)])
    rng.shuffle(train)
    rng.shuffle(evaluation)
    if limit is not None:
        if limit < 10:
            raise ValueError(
                f"--limit must be at least 10 (7 training and 3 evaluation samples), got {limit}"
            )
        n_train = round(limit * N_TRAIN / (N_TRAIN + N_EVAL))
        train, evaluation = train[:n_train], evaluation[: limit - n_train]
    return train, evaluation


def paragraph_of(sample: CorrectnessSample) -> str:
    """The group a sample belongs to for splits and cross-validation folds: its paragraph."""
    return sample.context


# Samples per batched model call: the runner's chunk. Features are computed on ragsense's one runner
# (:func:`ragsense.evaluation.run_rows`): each sample is an item and feature extraction its one step,
# run over each part on its own, so a part's chunks are its samples 0-7, 8-15, ... With ``out`` each
# part's records are appended to ``features_<part>.jsonl`` (the format of ``ragsense correctness
# features``) as its chunks finish and ``resume=True`` continues them without recomputing finished
# chunks; the extractor's disk cache (``cache``) also keeps every computed condition.
# Small (8), so that a run cut short on a busy machine loses at most a few samples' conditions.
FEATURE_CHUNK = 8


@dataclass(frozen=True)
class _SampleItem:
    """One sample of one part: the runner's item."""

    sample: CorrectnessSample
    part: str

    @property
    def id(self) -> str:
        return self.sample.id

    def to_record(self) -> dict[str, Any]:
        return {"id": self.sample.id, "part": self.part, "references": list(self.sample.references)}


@dataclass
class _FeatureStep:
    """The base model's features of a chunk of samples, in one batched :meth:`aextract_many` call."""

    extractor: FeatureExtractor
    name: str = "correctness_features"
    needs: Needs = field(default_factory=lambda: Needs(fields=()))
    fields: tuple[str, ...] = FEATURE_FIELDS

    async def score(self, rows: Sequence[Any]) -> list[Mapping[str, Any] | Exception]:
        config = self.extractor.config
        results = await self.extractor.aextract_many([row.sample for row in rows])
        return [
            r if isinstance(r, Exception) else {**r.to_record(), "feature_config": config} for r in results
        ]


Part = tuple[list[SampleFeatures], list[CorrectnessSample], list[str]]


def _check_config(path: Path, config: dict[str, Any]) -> None:
    """Refuse to resume a features file computed with another model or other settings."""
    if not path.exists():
        return
    expected = json.loads(dumps_json(config))
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a truncated last line: the runner drops it
        found = record.get("feature_config") if isinstance(record, dict) else None
        if found is not None and found != expected:
            raise ParameterError(
                f"{path} holds features computed with other models or settings; resume needs the same "
                "ones (or use another --out)",
                parameter="resume",
            )


def _error_note(part: str, record: Mapping[str, Any]) -> str:
    error = record["errors"][0]
    where = f"field {error['field']!r}: " if error.get("field") else ""
    return f"{part} {record['id']}: {where}{error['message']}"


async def _features(
    extractor: FeatureExtractor,
    parts: dict[str, list[CorrectnessSample]],
    out: Path | None,
    resume: bool,
) -> list[Part]:
    """Features of each part: kept features (read back from the records), their samples, and one note
    per failed sample (bad fields or a failed model call)."""
    result: list[Part] = []
    step = _FeatureStep(extractor)
    for part, samples in parts.items():
        output = None if out is None else out / f"features_{part}.jsonl"
        if output is not None and resume:
            _check_config(output, extractor.config)
        records, _ = await run_rows(
            [_SampleItem(sample, part) for sample in samples],
            [step],
            output=output,
            chunk_size=FEATURE_CHUNK,
            resume=resume,
            overwrite=not resume,
            desc=f"features ({part})",
        )
        kept_features: list[SampleFeatures] = []
        kept_samples: list[CorrectnessSample] = []
        errors: list[str] = []
        for sample, record in zip(samples, records, strict=True):
            if record["errors"]:
                errors.append(_error_note(part, record))
            else:
                kept_features.append(SampleFeatures.from_record(record))
                kept_samples.append(sample)
        result.append((kept_features, kept_samples, errors))
    return result


# -- the figures ----------------------------------------------------------------------------------------

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


def _paragraph_id(context: str) -> str:
    return hashlib.sha256(context.encode("utf-8")).hexdigest()[:12]


def correctness_squad(
    model: LanguageModel | None = None,
    data: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    out: str | None = None,
    *,
    perturbation_model: LanguageModel | str | None = None,
    settings: PerturbationSettings | None = None,
    metric: Metric = "cosine",
    threshold: float | None = None,
    n_trees: int = 2100,
    aggregates: tuple[str, ...] = DEFAULT_AGGREGATES,
    cache: str | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """Train on the training part, evaluate on the evaluation part; returns the figures
    (:func:`evaluation_report`, plus the run's settings).

    With ``out``, the features of each part are kept there (``features_train.jsonl``,
    ``features_eval.jsonl``) and ``resume=True`` continues an interrupted run from them (same
    arguments): finished chunks of samples are not computed again. ``out`` also gets the estimator,
    ``eval.jsonl`` (per evaluation item: features, target, label, estimates), ``train_cv.jsonl`` (per
    training item: fold and out-of-fold estimate), ``figures.json`` and ``reliability.png``.
    """
    started = time.perf_counter()
    base = model or load_model("smollm2-135m")
    pm = load_model(perturbation_model) if isinstance(perturbation_model, str) else perturbation_model
    train, evaluation = squad_split(data, limit, seed)
    extractor = FeatureExtractor(
        base,
        pm,
        settings=settings or PerturbationSettings(),
        cache_dir=cache or (cache_dir() / "correctness"),
    )
    folder = None if out is None else Path(out)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    try:
        # The evaluation part first: a run stopped during the training part leaves a complete
        # evaluation part, so a smaller ``limit`` (nested in this one) finds all its features cached.
        (eval_f, eval_s, errors), (train_f, train_s, train_errors) = run_sync(
            _features(extractor, {"eval": evaluation, "train": train}, folder, resume)
        )
    finally:
        extractor.close()
    errors += train_errors
    feature_seconds = time.perf_counter() - started
    train_y = correctness_targets([f.answer for f in train_f], [s.references for s in train_s], metric)
    eval_y = correctness_targets([f.answer for f in eval_f], [s.references for s in eval_s], metric)
    estimator = CorrectnessEstimator(
        n_trees=n_trees,
        seed=seed,
        aggregates=aggregates,
        target_metric=metric,
        threshold=threshold,
        extractor_config=extractor.config,
    ).fit(train_f, train_y)
    predicted = estimator.predict(eval_f)
    figures = estimator.evaluate(eval_f, eval_y)
    train_groups = [paragraph_of(s) for s in train_s]
    eval_groups = {paragraph_of(s) for s in eval_s}
    report = evaluation_report(
        estimator.feature_names,
        np.asarray([f.vector(aggregates) for f in train_f], dtype=np.float64),
        train_y,
        train_groups,
        np.asarray([f.vector(aggregates) for f in eval_f], dtype=np.float64),
        eval_y,
        threshold=estimator.threshold,
        fit_predict=forest_fit_predict(n_trees, seed),
        predicted_eval=predicted,
        seed=seed,
        n_boot=BOOTSTRAP,
    )
    figures.update(report.figures)
    figures["auroc_ci95"] = report.figures["forest"]["auroc_ci95"]
    figures["split"].update(
        paragraphs_eval=len(eval_groups),
        paragraphs_shared=len(eval_groups & set(train_groups)),
    )
    every = list(train_f) + list(eval_f)
    figures["answers_equal_to_normal"] = {
        "n": len(every),
        "perturbed": sum(f.perturbed.answer == f.normal.answer for f in every),
        "baseline": sum(f.baseline.answer == f.normal.answer for f in every),
    }
    figures.update(
        n_train=len(train_f),
        n_eval=len(eval_f),
        n_errors=len(errors),
        errors=errors[:10],
        metric=metric,
        aggregates=list(aggregates),
        n_trees=n_trees,
        seed=seed,
        limit=limit,
        base_model=base.info.name,
        perturbation_model=(pm or base).info.name,
        perturbation=(settings or PerturbationSettings()).label,
        train_target_mean=round(sum(train_y) / len(train_y), 4),
        eval_positive_share=round(sum(y >= estimator.threshold for y in eval_y) / len(eval_y), 4),
        seconds=round(time.perf_counter() - started, 1),
        feature_seconds_per_sample=round(feature_seconds / max(1, len(train) + len(evaluation)), 3),
    )
    if folder is not None:
        estimator.save(folder / "estimator.npz")
        with (folder / "eval.jsonl").open("w", encoding="utf-8") as handle:
            for f, s, item in zip(eval_f, eval_s, report.eval_items, strict=True):
                record = {
                    **f.to_record(),
                    "paragraph": _paragraph_id(s.context),
                    "question": s.question,
                    "references": list(s.references),
                    **item,
                }
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        with (folder / "train_cv.jsonl").open("w", encoding="utf-8") as handle:
            for f, s, item in zip(train_f, train_s, report.train_items, strict=True):
                record = {"id": f.id, "paragraph": _paragraph_id(s.context), "answer": f.answer, **item}
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        png = folder / RELIABILITY_PLOT
        try:
            plot_reliability(
                figures["calibration"],
                png,
                title=f"correctness-squad, evaluation part (n = {len(eval_f)}), {base.info.name}",
            )
            figures["reliability_plot"] = RELIABILITY_PLOT
        except BackendUnavailableError as exc:
            png.unlink(missing_ok=True)
            figures["reliability_plot"] = f"skipped: {exc}"
        (folder / "figures.json").write_text(
            json.dumps(json.loads(dumps_json(figures)), indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
    return figures
