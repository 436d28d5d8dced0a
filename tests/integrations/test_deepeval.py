"""DeepEval: ConSensMetric through DeepEval's own ``evaluate`` on LLMTestCases, scoring exactly as
``ragsense.evaluate`` does on the same row; DeepEval's telemetry is switched off by the integration."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("deepeval", reason="DeepEval not installed: pip install 'ragsense[deepeval]'")

from deepeval import evaluate as deepeval_evaluate
from deepeval.evaluate.configs import AsyncConfig, DisplayConfig
from deepeval.test_case import LLMTestCase

from ragsense.integrations.deepeval import ConSensMetric

from ._helpers import ANSWER, DOCUMENTS, QUESTION, REAL_MODEL, WRONG_ANSWER, expected


def test_telemetry_is_off() -> None:
    assert os.environ["DEEPEVAL_TELEMETRY_OPT_OUT"] in {"1", "true", "YES", "True"}


@pytest.mark.parametrize("run_async", [False, True])
def test_deepeval_evaluate_equals_evaluate(run_async: bool, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)  # DeepEval writes its .deepeval cache in the working directory
    cases = [
        LLMTestCase(input=QUESTION, actual_output=answer, retrieval_context=DOCUMENTS[:2])
        for answer in (ANSWER, WRONG_ANSWER)
    ]
    result = deepeval_evaluate(
        test_cases=cases,
        metrics=[ConSensMetric(model="fake")],
        async_config=AsyncConfig(run_async=run_async),
        display_config=DisplayConfig(show_indicator=False, print_results=False),
    )
    by_output = {r.actual_output: r.metrics_data[0] for r in result.test_results}
    for answer in (ANSWER, WRONG_ANSWER):
        want = expected(QUESTION, DOCUMENTS[:2], answer, "fake")
        data = by_output[answer]
        assert data.score == pytest.approx(want["consens"], abs=1e-9)
        assert data.success == (want["verdict"] == "grounded")
        assert data.reason.startswith(want["verdict"])


def test_unscorable_case_fails_with_the_reason() -> None:
    metric = ConSensMetric(model="fake")
    metric.measure(LLMTestCase(input=QUESTION, actual_output="x", retrieval_context=[]))
    assert not metric.is_successful() and "contexts" in metric.error


@pytest.mark.model
def test_real_model_equals_evaluate() -> None:
    metric = ConSensMetric(model=REAL_MODEL)
    score = metric.measure(LLMTestCase(input=QUESTION, actual_output=ANSWER, retrieval_context=DOCUMENTS[:2]))
    assert score == pytest.approx(expected(QUESTION, DOCUMENTS[:2], ANSWER, REAL_MODEL)["consens"], abs=1e-9)
