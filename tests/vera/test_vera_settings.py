"""VERA's settings and its one public ``Vera``: a frozen, checked VeraSettings; the metric's explicit
signature building it; the evaluator configured by it; and the package's docstring examples."""

from __future__ import annotations

import dataclasses
import doctest
import importlib
import inspect
from pathlib import Path

import pytest

from ragsense.errors import ParameterError
from ragsense.vera import (
    SCORED_STEPS,
    Vera,
    VeraEnhance,
    VeraEvaluator,
    VeraSettings,
    default_cache_dir,
)

SETTINGS = [f.name for f in dataclasses.fields(VeraSettings)]


@pytest.mark.parametrize(
    ("options", "parameter"),
    [
        ({"steps": ()}, "steps"),
        ({"steps": ("context", "vibes")}, "steps"),
        ({"splitter": "llm"}, "splitter"),
        ({"adherence_signal": "vibes"}, "adherence_signal"),
        ({"consens_threshold": 1.0}, "consens_threshold"),
        ({"consens_threshold": -1.5}, "consens_threshold"),
        ({"judge_mode": "chatty"}, "judge_mode"),
        ({"label_scoring": "max"}, "label_scoring"),
        ({"prompt_format": "xml"}, "prompt_format"),
    ],
)
def test_a_bad_setting_fails_when_made_naming_its_parameter(
    options: dict[str, object], parameter: str
) -> None:
    with pytest.raises(ParameterError) as caught:
        VeraSettings(**options)
    assert caught.value.parameter == parameter
    # The metric checks the same settings when it is made, not at setup.
    metric_options = {("retrieval" if k == "check_retrieval" else k): v for k, v in options.items()}
    with pytest.raises(ParameterError) as from_metric:
        Vera(judge="fake", **metric_options)
    assert from_metric.value.parameter == parameter


def test_settings_are_frozen_and_keep_steps_as_given() -> None:
    settings = VeraSettings(steps=["adherence", "context"])
    assert settings.steps == ("adherence", "context")
    assert settings.scored_steps == ("context", "adherence")  # the order VERA runs them
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.splitter = "rules"
    assert hash(settings) == hash(VeraSettings(steps=("adherence", "context")))


def test_judge_cache_dir(tmp_path: Path) -> None:
    assert VeraSettings().judge_cache_dir == default_cache_dir()
    assert VeraSettings(cache_dir=str(tmp_path)).judge_cache_dir == tmp_path
    assert VeraSettings(cache=False, cache_dir=tmp_path).judge_cache_dir is None


def test_the_metric_spells_out_every_setting() -> None:
    """No ``**options``: every VeraSettings field is a typed keyword of the metric (``check_retrieval``
    is the metric's ``retrieval``), and ``settings()`` records each of them."""
    for cls in (Vera, VeraEnhance):
        parameters = inspect.signature(cls).parameters
        assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        expected = {"retrieval" if name == "check_retrieval" else name for name in SETTINGS}
        assert expected <= set(parameters)
        assert all(parameters[name].annotation is not inspect.Parameter.empty for name in expected)
    metric = Vera(judge="fake", splitter="rules", cache_dir=Path("/tmp/x"), retrieval=False)
    assert metric.config == VeraSettings(splitter="rules", cache_dir=Path("/tmp/x"), check_retrieval=False)
    recorded = metric.settings()
    assert set(recorded) == {"judge"} | {"retrieval" if n == "check_retrieval" else n for n in SETTINGS}
    assert recorded["splitter"] == "rules" and recorded["cache_dir"] == "/tmp/x"
    assert recorded["retrieval"] is False and recorded["steps"] == list(SCORED_STEPS)
    # Configured the same way, the metric records the same settings however its values were given.
    assert Vera(judge="fake").settings() == Vera(judge="fake", splitter="auto", cache=True).settings()


def test_one_public_class_named_vera() -> None:
    import ragsense

    assert ragsense.Vera is Vera  # the top-level name is the metric, too
    assert Vera.__module__ == "ragsense.vera._metric"
    assert not hasattr(VeraEvaluator, "score") and hasattr(Vera, "score")


def test_the_evaluator_takes_the_settings_the_metric_built() -> None:
    import asyncio

    from ragsense.models import ModelPool

    metric = Vera(judge="fake", steps=("adherence",), cache=False)
    asyncio.run(metric.setup(ModelPool()))
    assert isinstance(metric.evaluator, VeraEvaluator)
    assert metric.evaluator.settings is metric.config
    asyncio.run(metric.aclose())


@pytest.mark.parametrize(
    "name",
    [
        "ragsense.vera",
        "ragsense.vera._evaluator",
        "ragsense.vera._metric",
        "ragsense.vera._pipeline",
        "ragsense.vera._settings",
        "ragsense.vera.judges._factory",
        "ragsense.vera.judges._label_judge",
        "ragsense.vera.judges._labels",
    ],
)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
