"""Correctness estimation by context perturbation (Zhang et al.) as a metric (``--metrics correctness``):
the base model answers each question from its context, and a trained estimator predicts how correct
that answer is. Also the features step ``ragsense correctness features`` runs."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragsense.cache import cache_dir
from ragsense.contract import Needs
from ragsense.correctness._estimator import CorrectnessEstimator
from ragsense.correctness._features import CorrectnessSample, FeatureExtractor
from ragsense.correctness._perturb import PerturbationSettings
from ragsense.data import RagRow
from ragsense.errors import ParameterError
from ragsense.models import LanguageModel, ModelPool, ModelSpec

CORRECTNESS_FIELDS = ("correctness", "correct", "correctness_answer", "correctness_context_truncated")


def references(value: Any) -> tuple[str, ...]:
    """Ground truths from a ``reference`` string or a list of them (blank ones dropped).

    >>> references("Paris"), references(["Paris", " "]), references(None)
    (('Paris',), ('Paris',), ())
    """
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    return tuple(str(v) for v in value if str(v).strip())


def correctness_sample(row: RagRow) -> CorrectnessSample:
    """The row as the estimator reads it: one ground truth in ``reference`` (or RAGAS's
    ``ground_truth``), or several in ``references``; the documents joined by blank lines."""
    refs = references(row.reference) + references(row.extra.get("references"))
    return CorrectnessSample(row.question, "\n\n".join(row.contexts), refs, row.id)


class Correctness:
    """Estimated correctness of the base model's own answer to each row (``correctness`` in [0, 1],
    ``correct`` at the estimator's threshold, the answer in ``correctness_answer``).

    ``estimator``: a file written by ``ragsense correctness train`` (required: the estimator learns one
    base model's confusion). ``model``: the base model (default: the one the estimator was trained with,
    by name; it is checked by fingerprint). The row's own ``answer`` is not used.
    """

    name = "correctness"
    needs = Needs(("question", "contexts"))
    fields = CORRECTNESS_FIELDS
    scores = ("correctness",)
    verdict = "correct"

    def __init__(
        self,
        estimator: str | os.PathLike[str] | CorrectnessEstimator | None = None,
        *,
        model: ModelSpec | None = None,
        model_options: dict[str, Any] | None = None,
        feature_cache: str | os.PathLike[str] | None = None,
    ) -> None:
        if estimator is None:
            raise ParameterError(
                "the correctness metric needs a trained estimator: Correctness(estimator=PATH) or "
                "--estimator PATH (train one with 'ragsense correctness train')",
                parameter="estimator",
            )
        self.estimator = (
            estimator if isinstance(estimator, CorrectnessEstimator) else CorrectnessEstimator.load(estimator)
        )
        self.estimator_path = None if isinstance(estimator, CorrectnessEstimator) else str(estimator)
        self.model_spec = model
        self.model_options = dict(model_options or {})
        self.feature_cache = Path(feature_cache) if feature_cache is not None else cache_dir() / "correctness"
        self._base: LanguageModel | None = None
        self._pm: LanguageModel | None = None

    def settings(self) -> dict[str, Any]:
        return {
            "estimator": self.estimator_path,
            "base_model": self.estimator.extractor_config.get("base_model", {}).get("name"),
            "threshold": self.estimator.threshold,
        }

    def model_fingerprints(self) -> dict[str, str]:
        """The base and perturbation models' fingerprints (once set up), for the run store."""
        out: dict[str, str] = {}
        if self._base is not None:
            out["base_model"] = self._base.info.fingerprint
        if self._pm is not None:
            out["perturbation_model"] = self._pm.info.fingerprint
        return out

    async def setup(self, pool: ModelPool) -> None:
        config = self.estimator.extractor_config
        spec = self.model_spec if self.model_spec is not None else config.get("base_model", {}).get("name")
        self._base = pool.get(spec, **self.model_options)
        self.estimator.check_base_model(self._base)
        pm = self.estimator.perturbation_model_name(self._base)
        self._pm = self._base if pm is None else pool.get(pm)

    async def score(self, rows: Sequence[RagRow]) -> list[dict[str, Any] | Exception]:
        if self._base is None:
            raise ParameterError("call setup() first", parameter="Correctness")
        results = await self.estimator.aestimate(
            [correctness_sample(r) for r in rows], self._base, self._pm, cache_dir=self.feature_cache
        )
        out: list[dict[str, Any] | Exception] = []
        for res in results:
            if isinstance(res, Exception):
                out.append(res)
                continue
            record = res.to_record()
            out.append(
                {
                    "correctness": record["correctness"],
                    "correct": record["correct"],
                    "correctness_answer": record["answer"],
                    "correctness_context_truncated": record["context_truncated"],
                }
            )
        return out

    async def aclose(self) -> None:
        """Nothing to release: models belong to the pool, the feature cache is closed per call."""


FEATURE_FIELDS = (
    "answer",
    "context_truncated",
    "baseline",
    "normal",
    "perturbed",
    "perturbation",
    "feature_config",
)


class CorrectnessFeatures:
    """The estimator's features of each row as a runner step (``ragsense correctness features``): the base
    model's answers and NLL summaries in the three conditions. Not an evaluation metric (it measures the
    inputs of one), so it is not registered under a name.
    """

    name = "correctness_features"
    needs = Needs(("question", "contexts"))
    fields = FEATURE_FIELDS
    scores: tuple[str, ...] = ()
    verdict = None

    def __init__(
        self,
        model: ModelSpec | None = None,
        *,
        perturbation_model: ModelSpec | None = None,
        settings: PerturbationSettings | None = None,
        model_options: dict[str, Any] | None = None,
        feature_cache: str | os.PathLike[str] | None = None,
    ) -> None:
        self.model_spec = model
        self.pm_spec = perturbation_model
        self.perturbation = settings or PerturbationSettings()
        self.model_options = dict(model_options or {})
        self.feature_cache = Path(feature_cache) if feature_cache is not None else cache_dir() / "correctness"
        self.extractor: FeatureExtractor | None = None

    def settings(self) -> dict[str, Any]:
        return {"perturbation": self.perturbation.to_dict(), "feature_cache": str(self.feature_cache)}

    async def setup(self, pool: ModelPool) -> None:
        base = pool.get(self.model_spec, **self.model_options)
        pm = None if self.pm_spec is None else pool.get(self.pm_spec)
        self.extractor = FeatureExtractor(base, pm, settings=self.perturbation, cache_dir=self.feature_cache)

    async def score(self, rows: Sequence[RagRow]) -> list[dict[str, Any] | Exception]:
        if self.extractor is None:
            raise ParameterError("call setup() first", parameter="CorrectnessFeatures")
        config = self.extractor.config
        out: list[dict[str, Any] | Exception] = []
        for result in await self.extractor.aextract_many([correctness_sample(r) for r in rows]):
            if isinstance(result, Exception):
                out.append(result)
                continue
            record = result.to_record()
            del record["id"]
            record["feature_config"] = config
            out.append(record)
        return out

    async def aclose(self) -> None:
        if self.extractor is not None:
            self.extractor.close()
