"""The forest, its file format, targets and metrics: fast tests, no language model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragsense.correctness import (
    CorrectnessEstimator,
    PerturbationSettings,
    SampleFeatures,
    build_prompt,
    correctness_targets,
    evaluate_estimates,
    feature_names,
    rouge_l,
)
from ragsense.correctness._estimator import FORMAT_VERSION
from ragsense.correctness._features import ConditionResult
from ragsense.correctness._forest import ForestArrays
from ragsense.correctness._perturb import PerturbedContext
from ragsense.errors import InputError, ParameterError
from ragsense.models import load_model


def _condition(rng: np.random.Generator, with_context: bool) -> ConditionResult:
    places = ["prompt", "instruction", "question", "output"] + (["context"] if with_context else [])
    nll = {p: {"mean": float(rng.uniform(0, 5)), "max": float(rng.uniform(5, 12)), "n": 3} for p in places}
    return ConditionResult(answer="a", finish_reason="stop", nll=nll)


def _features(n: int, seed: int = 0) -> list[SampleFeatures]:
    rng = np.random.default_rng(seed)
    empty = PerturbedContext(text="x", replacements=(), n_tokens=1, truncated=False)
    return [
        SampleFeatures(str(i), _condition(rng, False), _condition(rng, True), _condition(rng, True), empty)
        for i in range(n)
    ]


def _targets(features: list[SampleFeatures]) -> list[float]:
    # A learnable target: lower output NLL in the Normal condition means more correct.
    return [float(np.clip(1 - f.normal.nll["output"]["mean"] / 5, 0, 1)) for f in features]


def _config(fingerprint: str = "fake:fake") -> dict[str, object]:
    return {
        "base_model": {"name": "fake", "fingerprint": fingerprint},
        "perturbation_model": {"name": "fake", "fingerprint": fingerprint},
        "perturbation": PerturbationSettings().to_dict(),
        "max_new_tokens": 12,
    }


def test_feature_layout_matches_the_papers_places() -> None:
    names = feature_names()
    assert len(names) == 14
    assert "baseline.context.mean" not in names
    assert {"normal.context.mean", "perturbed.context.mean", "perturbed.output.mean"} <= set(names)
    assert len(feature_names(("mean", "max"))) == 28
    with pytest.raises(ValueError, match="unknown aggregate"):
        feature_names(("median",))


def test_prompt_spans_hold_their_parts() -> None:
    parts = build_prompt("Who built it?", "Gustave Eiffel built it.")
    assert parts.text[slice(*parts.context)] == "Gustave Eiffel built it."  # type: ignore[misc]
    assert parts.text[slice(*parts.question)] == "Who built it?"
    baseline = build_prompt("Who built it?", None)
    assert baseline.context is None
    # The instruction is the same text in both conditions.
    assert baseline.text[slice(*baseline.instruction)] == parts.text[slice(*parts.instruction)]


def test_exported_forest_predicts_exactly_what_sklearn_predicts() -> None:
    from sklearn.ensemble import RandomForestRegressor

    rng = np.random.default_rng(1)
    x = rng.normal(size=(120, 6))
    y = x[:, 0] * 0.3 + rng.normal(scale=0.1, size=120)
    forest = RandomForestRegressor(n_estimators=25, random_state=0, n_jobs=1).fit(x, y)
    test = rng.normal(size=(40, 6))
    mine = ForestArrays.from_sklearn(forest).predict(test)
    assert np.array_equal(mine, forest.predict(test))


def test_fit_save_load_round_trip_is_bit_exact(tmp_path: Path) -> None:
    train, test = _features(80), _features(20, seed=1)
    est = CorrectnessEstimator(n_trees=30, extractor_config=_config()).fit(train, _targets(train))
    path = est.save(tmp_path / "est")
    assert path.suffix == ".npz"
    loaded = CorrectnessEstimator.load(path, base_model=load_model("fake"))
    assert np.array_equal(loaded.predict(test), est.predict(test))
    assert loaded.metadata()["extractor"] == _config()
    assert loaded.n_train == 80 and loaded.threshold == est.threshold
    # It learned something: the estimate ranks the held-out targets.
    result = evaluate_estimates(est.predict(test).tolist(), _targets(test), 0.5)
    assert result["auroc"] is not None and result["auroc"] > 0.8


def test_loading_with_another_base_model_is_an_error(tmp_path: Path) -> None:
    train = _features(10)
    est = CorrectnessEstimator(n_trees=5, extractor_config=_config("other-model@123")).fit(
        train, _targets(train)
    )
    path = est.save(tmp_path / "est.npz")
    with pytest.raises(ParameterError, match=r"trained with base model 'fake'.*other-model@123"):
        CorrectnessEstimator.load(path, base_model=load_model("fake"))


def _rewrite_header(path: Path, **changes: object) -> None:
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    header = json.loads(str(arrays["header"]))
    header.update(changes)
    arrays["header"] = np.array(json.dumps(header))
    np.savez(path, **arrays)


def test_a_file_from_another_format_version_is_refused(tmp_path: Path) -> None:
    train = _features(10)
    path = (
        CorrectnessEstimator(n_trees=5, extractor_config=_config())
        .fit(train, _targets(train))
        .save(tmp_path / "e.npz")
    )
    _rewrite_header(path, format_version=FORMAT_VERSION + 1, ragsense_version="9.9.9")
    with pytest.raises(ParameterError, match=r"saved by ragsense 9\.9\.9.*re-train"):
        CorrectnessEstimator.load(path)


def test_pickled_content_is_never_loaded(tmp_path: Path) -> None:
    path = tmp_path / "evil.npz"
    np.savez(path, header=np.array([{"format": "x"}], dtype=object))
    with pytest.raises(ParameterError, match="cannot read"):
        CorrectnessEstimator.load(path)


def test_corrupt_trees_are_refused(tmp_path: Path) -> None:
    train = _features(10)
    path = (
        CorrectnessEstimator(n_trees=3, extractor_config=_config())
        .fit(train, _targets(train))
        .save(tmp_path / "e.npz")
    )
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    arrays["children_left"] = np.zeros_like(arrays["children_left"])  # every node its own child: a loop
    np.savez(path, **arrays)
    with pytest.raises(ParameterError, match="corrupt forest"):
        CorrectnessEstimator.load(path)


def test_targets_need_a_reference_and_name_the_row() -> None:
    with pytest.raises(InputError, match="row 1, field 'reference'"):
        correctness_targets(["Paris", "Rome"], [["Paris"], []], "rouge_f1")


def test_rouge_targets_take_the_best_reference() -> None:
    assert rouge_l("the 10th and 11th centuries", "10th and 11th centuries")[2] == pytest.approx(
        0.8889, abs=1e-4
    )
    assert correctness_targets(["in France"], [["Spain", "France"]], "rouge_precision") == [0.5]
    assert correctness_targets(["in France"], [["Spain", "France"]], "rouge_f1") == [
        pytest.approx(0.6667, abs=1e-4)
    ]


def test_cosine_target_is_high_for_a_paraphrase_and_zero_for_no_answer() -> None:
    refs = [["France", "the French people"]] * 3
    high, unrelated, none = correctness_targets(["the French", "a ripe banana", ""], refs, "cosine")
    assert high > 0.75 and high > unrelated + 0.4
    assert none == 0.0


def test_metrics_follow_the_threshold_and_report_a_single_class() -> None:
    result = evaluate_estimates([0.9, 0.8], [0.95, 0.99], threshold=0.5)
    assert result["auroc"] is None and result["accuracy"] == 1.0 and result["positives"] == 2
    with pytest.raises(ValueError, match="finite"):
        evaluate_estimates([float("nan")], [0.5], threshold=0.5)


def test_bad_settings_name_the_parameter() -> None:
    with pytest.raises(ParameterError, match="where"):
        PerturbationSettings(where="middle")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="n_trees"):
        CorrectnessEstimator(n_trees=0)
    with pytest.raises(ParameterError, match="not fitted"):
        CorrectnessEstimator().predict(_features(1))
