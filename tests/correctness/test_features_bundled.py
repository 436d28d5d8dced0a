"""Feature extraction, training and estimation end to end on the bundled SmolLM2 and real SQuAD rows."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from ragsense.correctness import (
    CorrectnessEstimator,
    CorrectnessSample,
    FeatureExtractor,
    PerturbationSettings,
    SampleFeatures,
    correctness_targets,
    feature_names,
)
from ragsense.errors import InputError, ParameterError
from ragsense.experiments._correctness import squad_split
from ragsense.models import load_model

FAST = PerturbationSettings(k=3, how="single_shot")


@pytest.fixture(scope="module")
def samples(shared_data: Path) -> list[CorrectnessSample]:
    train, _ = squad_split(str(shared_data / "squad_v2" / "dev-v2.0.json"), None, 0)
    return train[:6]


class _GenerateAndScoreOnly:
    """The SmolLM2 backend seen through generate + score only, as a server backend would offer."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @property
    def info(self) -> Any:
        return self._inner.info

    def count_tokens(self, text: str) -> int:
        return int(self._inner.count_tokens(text))

    async def aclose(self) -> None:
        return None

    async def score(self, requests: Any) -> Any:
        return await self._inner.score(requests)

    async def generate(self, prompts: Any, config: Any) -> Any:
        return await self._inner.generate(prompts, config)


def test_features_are_finite_cached_and_resumable(
    smollm2: Any, samples: list[CorrectnessSample], tmp_path: Path
) -> None:
    extractor = FeatureExtractor(smollm2, settings=FAST, cache_dir=tmp_path)
    [first] = extractor.extract_many(samples[:1])
    assert isinstance(first, SampleFeatures)
    vector = first.vector()
    assert len(vector) == len(feature_names()) and all(math.isfinite(v) and v >= 0 for v in vector)
    assert first.normal.nll["context"]["n"] > 20 and "context" not in first.baseline.nll
    # The instruction is the same text in every condition, so its NLL is too.
    assert first.baseline.nll["instruction"] == first.normal.nll["instruction"]
    assert first.perturbation.text != samples[0].context
    assert len(extractor.cache or []) == 4  # perturbation + three conditions
    extractor.close()
    # A new extractor on the same cache computes nothing: the perturber and the model are not called.
    again = FeatureExtractor(smollm2, settings=FAST, cache_dir=tmp_path)
    again.perturber.perturb = None  # type: ignore[assignment,method-assign]
    again._generate = None  # type: ignore[assignment,method-assign]
    assert again.extract(samples[0]) == first
    again.close()


def test_generate_then_score_agrees_with_the_fused_pass(
    smollm2: Any, samples: list[CorrectnessSample]
) -> None:
    fused = FeatureExtractor(smollm2, settings=FAST).extract(samples[1])
    plain = FeatureExtractor(_GenerateAndScoreOnly(smollm2), smollm2, settings=FAST).extract(samples[1])  # type: ignore[arg-type]
    assert plain.normal.answer == fused.normal.answer
    for condition in ("baseline", "normal", "perturbed"):
        a, b = getattr(plain, condition).nll, getattr(fused, condition).nll
        for place in ("prompt", "instruction", "question", "context"):
            if place in a:
                assert a[place]["n"] == b[place]["n"]
                assert a[place]["mean"] == pytest.approx(b[place]["mean"], abs=2e-3)
        assert a["output"]["mean"] == pytest.approx(b["output"]["mean"], abs=0.25)


def test_bad_rows_are_reported_and_good_rows_kept(smollm2: Any, samples: list[CorrectnessSample]) -> None:
    rows = [
        samples[2],
        CorrectnessSample("Where?", ""),
        CorrectnessSample("Where?", "Short text."),
        CorrectnessSample("", "x"),
    ]
    results = FeatureExtractor(smollm2, settings=PerturbationSettings(k=5)).extract_many(rows)
    assert isinstance(results[0], SampleFeatures)
    assert [(r.row, r.field) for r in results[1:] if isinstance(r, InputError)] == [
        (1, "contexts"),
        (2, "contexts"),
        (3, "question"),
    ]


def test_long_contexts_are_cut_to_the_window_and_flagged(samples: list[CorrectnessSample]) -> None:
    small = load_model("smollm2-135m", context_window=160)
    features = FeatureExtractor(small, settings=FAST).extract(samples[3])
    assert features.context_truncated
    full = small.count_tokens(samples[3].context)
    assert features.normal.nll["context"]["n"] < full and features.perturbation.n_tokens < full
    assert features.perturbation.text.split()[-1] in samples[3].context


def test_train_save_load_estimate(smollm2: Any, samples: list[CorrectnessSample], tmp_path: Path) -> None:
    extractor = FeatureExtractor(smollm2, settings=FAST, cache_dir=tmp_path)
    train = [f for f in extractor.extract_many(samples[:5]) if isinstance(f, SampleFeatures)]
    targets = correctness_targets([f.answer for f in train], [s.references for s in samples[:5]], "rouge_f1")
    est = CorrectnessEstimator(n_trees=20, target_metric="rouge_f1", extractor_config=extractor.config).fit(
        train, targets
    )
    path = est.save(tmp_path / "est.npz")
    loaded = CorrectnessEstimator.load(path, base_model=smollm2)
    [estimate, bad] = loaded.estimate(
        [samples[5], CorrectnessSample("Why?", "")], smollm2, cache_dir=tmp_path
    )
    assert not isinstance(estimate, InputError) and isinstance(bad, InputError)
    assert 0.0 <= estimate.correctness <= 1.0
    assert estimate.correct == (estimate.correctness >= 0.5)
    assert estimate.correctness == pytest.approx(float(est.predict([estimate.features])[0]), abs=0)
    with pytest.raises(ParameterError, match="trained with base model 'smollm2-135m'"):
        CorrectnessEstimator.load(path, base_model=load_model("fake"))
