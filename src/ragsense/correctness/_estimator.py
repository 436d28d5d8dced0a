"""The random-forest correctness estimator: fit, predict, evaluate, save and load.

A saved estimator is one ``.npz`` file (no pickle, see :mod:`ragsense.correctness._forest`) with a
JSON header that records the base model, the perturbation model and every setting the features
depend on. Loading it for a different base model raises :class:`~ragsense.errors.ParameterError`:
its trees learned one model's confusion and say nothing about another's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragsense._async import run_sync
from ragsense._version import __version__
from ragsense.correctness._features import (
    FEATURES_VERSION,
    CorrectnessSample,
    FeatureExtractor,
    SampleFeatures,
    feature_names,
)
from ragsense.correctness._forest import ForestArrays
from ragsense.correctness._perturb import PerturbationSettings
from ragsense.correctness._targets import METRICS, Metric
from ragsense.errors import InputError, ParameterError
from ragsense.models import LanguageModel
from ragsense.stats import roc_auc

FORMAT = "ragsense-correctness-estimator"
FORMAT_VERSION = 1
DEFAULT_TREES = 2100
# Where "correct" starts, per target metric: see docs/correctness.md for how these were chosen.
DEFAULT_THRESHOLDS: dict[str, float] = {"cosine": 0.7, "rouge_f1": 0.5, "rouge_precision": 0.5}
# Mean and max NLL per place: adding the max raised the cross-validated AUROC on the training part of
# the SQuAD split from 0.66 to 0.72 (docs/results.md); the evaluation part was not used to choose.
DEFAULT_AGGREGATES = ("mean", "max")


def evaluate_estimates(
    predicted: Sequence[float], target: Sequence[float], threshold: float
) -> dict[str, Any]:
    """The paper's metrics (Section 4.2): MSE of estimate vs target; with the threshold ``t``, a target
    of at least ``t`` is correct, AUROC ranks the estimates against that label, and accuracy and F1
    compare ``estimate >= t`` with it. AUROC is ``None`` when the labels hold one class only.

    >>> evaluate_estimates([0.9, 0.2, 0.8, 0.4], [1.0, 0.1, 0.6, 0.3], threshold=0.5)
    {'mse': 0.0175, 'auroc': 1.0, 'accuracy': 1.0, 'f1': 1.0, 'threshold': 0.5, 'n': 4, 'positives': 2}
    """
    pred = np.asarray(predicted, dtype=np.float64)
    true = np.asarray(target, dtype=np.float64)
    if pred.shape != true.shape or pred.ndim != 1 or pred.size == 0:
        raise ValueError("predicted and target must be non-empty sequences of the same length")
    if not (np.isfinite(pred).all() and np.isfinite(true).all()):
        raise ValueError("predicted and target must be finite")
    label = true >= threshold
    guess = pred >= threshold
    tp = int((label & guess).sum())
    fp = int((~label & guess).sum())
    fn = int((label & ~guess).sum())
    f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    auroc = roc_auc(pred[label], pred[~label]) if 0 < label.sum() < label.size else None
    return {
        "mse": round(float(np.mean((pred - true) ** 2)), 6),
        "auroc": None if auroc is None else round(auroc, 4),
        "accuracy": round(float((label == guess).mean()), 4),
        "f1": round(f1, 4),
        "threshold": threshold,
        "n": int(pred.size),
        "positives": int(label.sum()),
    }


@dataclass(frozen=True)
class CorrectnessEstimate:
    """The estimated correctness of one sample's answer, with the features it came from."""

    id: str
    answer: str
    correctness: float
    correct: bool
    features: SampleFeatures

    def to_record(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "answer": self.answer,
            "correctness": round(self.correctness, 6),
            "correct": self.correct,
            "context_truncated": self.features.context_truncated,
        }


class CorrectnessEstimator:
    """Predicts how correct the base model's answer is from its confusion under the three conditions.

    >>> est = CorrectnessEstimator(n_trees=10)
    >>> est.target_metric, est.threshold, len(est.feature_names)
    ('cosine', 0.7, 28)
    """

    def __init__(
        self,
        *,
        n_trees: int = DEFAULT_TREES,
        seed: int = 0,
        aggregates: Sequence[str] = DEFAULT_AGGREGATES,
        target_metric: Metric = "cosine",
        threshold: float | None = None,
        extractor_config: dict[str, Any] | None = None,
    ) -> None:
        if n_trees < 1:
            raise ParameterError(f"must be at least 1, got {n_trees}", parameter="n_trees")
        if target_metric not in METRICS:
            raise ParameterError(
                f"must be one of {', '.join(METRICS)}, got {target_metric!r}", parameter="target_metric"
            )
        self.n_trees = n_trees
        self.seed = seed
        self.aggregates = tuple(aggregates)
        self.feature_names = feature_names(self.aggregates)
        self.target_metric: Metric = target_metric
        self.threshold = DEFAULT_THRESHOLDS[target_metric] if threshold is None else float(threshold)
        self.extractor_config = extractor_config or {}
        self.forest: ForestArrays | None = None
        self.n_train = 0

    # -- training and prediction --------------------------------------------------------------------
    def _matrix(self, features: Sequence[SampleFeatures]) -> np.ndarray:
        return np.asarray([f.vector(self.aggregates) for f in features], dtype=np.float64).reshape(
            len(features), len(self.feature_names)
        )

    def fit(self, features: Sequence[SampleFeatures], targets: Sequence[float]) -> CorrectnessEstimator:
        """Fit the forest (scikit-learn, ``n_jobs=2``: the machines this runs on have two cores)."""
        from sklearn.ensemble import RandomForestRegressor

        if len(features) != len(targets):
            raise ValueError(f"{len(features)} feature rows but {len(targets)} targets")
        if len(features) < 2:
            raise ValueError("at least two training samples are needed")
        y = np.asarray(targets, dtype=np.float64)
        if not np.isfinite(y).all():
            bad = int(np.flatnonzero(~np.isfinite(y))[0])
            raise InputError("the target correctness is not a finite number", row=bad, field="reference")
        forest = RandomForestRegressor(n_estimators=self.n_trees, random_state=self.seed, n_jobs=2)
        forest.fit(self._matrix(features), y)
        self.forest = ForestArrays.from_sklearn(forest)
        self.n_train = len(features)
        return self

    def predict(self, features: Sequence[SampleFeatures]) -> np.ndarray:
        """Estimated correctness per sample, in [0, 1] when the targets were."""
        if self.forest is None:
            raise ParameterError("the estimator is not fitted: call fit() or load()", parameter="estimator")
        if not features:
            return np.zeros(0)
        return self.forest.predict(self._matrix(features))

    def evaluate(self, features: Sequence[SampleFeatures], targets: Sequence[float]) -> dict[str, Any]:
        """:func:`evaluate_estimates` of this estimator's predictions at its threshold."""
        return evaluate_estimates(self.predict(features).tolist(), targets, self.threshold)

    async def aestimate(
        self,
        samples: Sequence[CorrectnessSample],
        base_model: LanguageModel,
        perturbation_model: LanguageModel | None = None,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> list[CorrectnessEstimate | Exception]:
        """Answer each sample with ``base_model`` and estimate that answer's correctness.

        The models must be the ones the estimator was trained with (checked by fingerprint); the
        perturbation model defaults to loading the recorded one by name. A sample gives an
        :class:`InputError` when its fields are at fault and the model's error (e.g.
        :class:`~ragsense.errors.ModelCallError`) when its model call failed; the others go on.
        All samples' prompts go to the base model in one batched call
        (:meth:`FeatureExtractor.aextract_many`).
        """
        self.check_base_model(base_model)
        if perturbation_model is None:
            name = self.perturbation_model_name(base_model)
            if name is None:
                perturbation_model = base_model
            else:
                from ragsense.models import shared_pool

                perturbation_model = shared_pool().get(name)
        self._check_model(perturbation_model, "perturbation_model")
        extractor = FeatureExtractor(
            base_model,
            perturbation_model,
            settings=PerturbationSettings.from_dict(self.extractor_config["perturbation"]),
            cache_dir=None if cache_dir is None else Path(cache_dir),
            max_new_tokens=int(self.extractor_config["max_new_tokens"]),
        )
        try:
            if extractor.config != self.extractor_config:
                raise ParameterError(
                    "the feature settings differ from those the estimator was trained with",
                    parameter="estimator",
                )
            extracted = await extractor.aextract_many(samples)
        finally:
            extractor.close()
        good = [f for f in extracted if isinstance(f, SampleFeatures)]
        scores = iter(self.predict(good).tolist())
        out: list[CorrectnessEstimate | Exception] = []
        for f in extracted:
            if isinstance(f, Exception):
                out.append(f)
                continue
            value = next(scores)
            out.append(CorrectnessEstimate(f.id, f.answer, value, value >= self.threshold, f))
        return out

    def estimate(
        self,
        samples: Sequence[CorrectnessSample],
        base_model: LanguageModel,
        perturbation_model: LanguageModel | None = None,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> list[CorrectnessEstimate | Exception]:
        """:meth:`aestimate` for synchronous callers (run it once, at the outermost level)."""
        return run_sync(self.aestimate(samples, base_model, perturbation_model, cache_dir=cache_dir))

    def perturbation_model_name(self, base_model: LanguageModel) -> str | None:
        """The recorded perturbation model's name, or None when it is ``base_model`` itself (or none
        was recorded) and the base model perturbs too."""
        pm = self.extractor_config.get("perturbation_model", {})
        if not pm or pm.get("fingerprint") == base_model.info.fingerprint:
            return None
        return str(pm.get("name", base_model.info.name))

    # -- model checks -------------------------------------------------------------------------------
    def check_base_model(self, model: LanguageModel) -> None:
        """Raise :class:`ParameterError` unless ``model`` is the base model the estimator learned."""
        self._check_model(model, "base_model")

    def _check_model(self, model: LanguageModel, role: str) -> None:
        saved = self.extractor_config.get(role)
        if saved is None:
            return
        if saved["fingerprint"] != model.info.fingerprint:
            raise ParameterError(
                f"this estimator was trained with {role.replace('_', ' ')} {saved['name']!r} "
                f"(fingerprint {saved['fingerprint']}), not {model.info.name!r} ({model.info.fingerprint}); "
                "its trees describe that model's confusion only: train one for this model",
                parameter=role,
            )

    # -- persistence --------------------------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        import sklearn

        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "ragsense_version": __version__,
            "sklearn_version": sklearn.__version__,
            "features_version": FEATURES_VERSION,
            "feature_names": self.feature_names,
            "aggregates": list(self.aggregates),
            "target_metric": self.target_metric,
            "threshold": self.threshold,
            "n_trees": self.n_trees,
            "seed": self.seed,
            "n_train": self.n_train,
            "extractor": self.extractor_config,
        }

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the estimator to ``path`` (an ``.npz`` file; the suffix is added when missing)."""
        if self.forest is None:
            raise ParameterError("the estimator is not fitted: nothing to save", parameter="estimator")
        target = Path(path)
        if target.suffix != ".npz":
            target = target.with_name(target.name + ".npz")
        header = np.array(json.dumps(self.metadata(), sort_keys=True))
        arrays: dict[str, Any] = {"header": header, **self.forest.to_arrays()}
        np.savez_compressed(target, **arrays)
        return target

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], *, base_model: LanguageModel | None = None
    ) -> CorrectnessEstimator:
        """Read a saved estimator; with ``base_model``, check it is the model the estimator learned.

        Never unpickles: a file that needs pickle to load is refused.
        """
        try:
            with np.load(path, allow_pickle=False) as data:
                header = json.loads(str(data["header"]))
                arrays = {name: data[name] for name in data.files if name != "header"}
        except (OSError, ValueError, KeyError) as exc:
            raise ParameterError(
                f"cannot read a correctness estimator from {str(path)!r}: {exc}", parameter="path"
            ) from exc
        if header.get("format") != FORMAT:
            raise ParameterError(f"{str(path)!r} is not a ragsense correctness estimator", parameter="path")
        if (
            header.get("format_version") != FORMAT_VERSION
            or header.get("features_version") != FEATURES_VERSION
        ):
            raise ParameterError(
                f"{str(path)!r} was saved by ragsense {header.get('ragsense_version')} (estimator format "
                f"{header.get('format_version')}, features {header.get('features_version')}); this ragsense "
                f"{__version__} reads format {FORMAT_VERSION} with features {FEATURES_VERSION}: "
                "re-train it with this version",
                parameter="path",
            )
        est = cls(
            n_trees=int(header["n_trees"]),
            seed=int(header["seed"]),
            aggregates=header["aggregates"],
            target_metric=header["target_metric"],
            threshold=float(header["threshold"]),
            extractor_config=header["extractor"],
        )
        if est.feature_names != header["feature_names"]:
            raise ParameterError(
                f"{str(path)!r} lists features this version does not compute", parameter="path"
            )
        try:
            est.forest = ForestArrays.from_arrays(arrays)
        except (KeyError, ValueError) as exc:
            raise ParameterError(f"{str(path)!r} holds a corrupt forest: {exc}", parameter="path") from exc
        if int(est.forest.feature.max(initial=0)) >= len(est.feature_names):
            raise ParameterError(f"{str(path)!r} splits on a feature it does not list", parameter="path")
        est.n_train = int(header["n_train"])
        if base_model is not None:
            est.check_base_model(base_model)
        return est
