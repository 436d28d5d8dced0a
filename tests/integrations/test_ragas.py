"""RAGAS: ConSensRagas in ``ragas.evaluate`` beside one of RAGAS's own metrics (StringPresence, no LLM),
scoring exactly as ``ragsense.evaluate`` does on the same rows; RAGAS's analytics are switched off."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("ragas", reason="RAGAS not installed: pip install 'ragsense[ragas]'")

from ragas import EvaluationDataset, SingleTurnSample
from ragas import evaluate as ragas_evaluate
from ragas.metrics import StringPresence

from ragsense.errors import InputError
from ragsense.integrations.ragas import ConSensRagas

from ._helpers import ANSWER, DOCUMENTS, QUESTION, REAL_MODEL, WRONG_ANSWER, expected


def test_ragas_evaluate_beside_its_own_metric() -> None:
    assert os.environ["RAGAS_DO_NOT_TRACK"] == "true"
    rows = [
        {"user_input": QUESTION, "retrieved_contexts": DOCUMENTS[:2], "response": a, "reference": "Paris"}
        for a in (ANSWER, WRONG_ANSWER)
    ]
    metric = ConSensRagas(model="fake")
    result = ragas_evaluate(
        EvaluationDataset.from_list(rows), metrics=[metric, StringPresence()], show_progress=False
    )
    for row, scores in zip(rows, result.scores, strict=True):
        want = expected(QUESTION, DOCUMENTS[:2], row["response"], "fake")
        assert scores["consens"] == pytest.approx(want["consens"], abs=1e-9)
        assert scores["string_present"] == float("Paris" in row["response"])
    assert sorted(j.verdict for j in metric.judgements) == sorted(
        expected(QUESTION, DOCUMENTS[:2], a, "fake")["verdict"] for a in (ANSWER, WRONG_ANSWER)
    )


def test_unscorable_sample_raises_naming_the_field() -> None:
    sample = SingleTurnSample(user_input=QUESTION, retrieved_contexts=DOCUMENTS, response=" ")
    with pytest.raises(InputError, match="answer"):
        ConSensRagas(model="fake").single_turn_score(sample)


@pytest.mark.model
def test_real_model_equals_evaluate() -> None:
    sample = SingleTurnSample(user_input=QUESTION, retrieved_contexts=DOCUMENTS[:2], response=ANSWER)
    score = ConSensRagas(model=REAL_MODEL).single_turn_score(sample)
    assert score == pytest.approx(expected(QUESTION, DOCUMENTS[:2], ANSWER, REAL_MODEL)["consens"], abs=1e-9)
