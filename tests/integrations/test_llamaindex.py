"""LlamaIndex: ConSensEvaluator in a real query engine (in-memory vector index, LlamaIndex's MockLLM and
MockEmbedding), scoring exactly as ``ragsense.evaluate`` does on the same row."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("llama_index.core", reason="LlamaIndex not installed: pip install 'ragsense[llamaindex]'")

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.evaluation import BatchEvalRunner, EvaluationResult
from llama_index.core.llms import MockLLM

from ragsense.integrations.llamaindex import ConSensEvaluator

from ._helpers import ANSWER, DOCUMENTS, QUESTION, REAL_MODEL, WRONG_ANSWER, expected


@pytest.fixture(scope="module")
def query_engine():  # type: ignore[no-untyped-def]
    index = VectorStoreIndex.from_documents(
        [Document(text=t) for t in DOCUMENTS], embed_model=MockEmbedding(embed_dim=8)
    )
    return index.as_query_engine(llm=MockLLM(max_tokens=6), similarity_top_k=2)


def _row(response):  # type: ignore[no-untyped-def]
    return [n.get_content() for n in response.source_nodes], response.response


def test_evaluate_response_equals_evaluate(query_engine) -> None:  # type: ignore[no-untyped-def]
    response = query_engine.query(QUESTION)
    contexts, answer = _row(response)
    assert len(contexts) == 2 and answer  # the pipeline really retrieved and generated
    result = ConSensEvaluator(model="fake").evaluate_response(query=QUESTION, response=response)
    want = expected(QUESTION, contexts, answer, "fake")
    assert isinstance(result, EvaluationResult)
    assert result.score == pytest.approx(want["consens"], abs=1e-9)
    assert result.passing == (want["verdict"] == "grounded")
    assert result.feedback.startswith(f"{want['verdict']}: consens ")
    assert not result.invalid_result


def test_async_and_batch_runner_agree_with_evaluate(query_engine) -> None:  # type: ignore[no-untyped-def]
    evaluator = ConSensEvaluator(model="fake")
    contexts = DOCUMENTS[:2]
    result = asyncio.run(evaluator.aevaluate(query=QUESTION, response=WRONG_ANSWER, contexts=contexts))
    want = expected(QUESTION, contexts, WRONG_ANSWER, "fake")
    assert result.score == pytest.approx(want["consens"], abs=1e-9)
    assert result.passing is False and "weakest words: " in result.feedback
    runner = BatchEvalRunner({"consens": evaluator}, workers=2)
    responses = [query_engine.query(QUESTION), query_engine.query("Who built the tower?")]
    batch = runner.evaluate_responses(queries=[QUESTION, "Who built the tower?"], responses=responses)
    for query, response, got in zip(
        [QUESTION, "Who built the tower?"], responses, batch["consens"], strict=True
    ):
        contexts, answer = _row(response)
        assert got.score == pytest.approx(expected(query, contexts, answer, "fake")["consens"], abs=1e-9)


def test_unscorable_row_is_an_invalid_result_naming_the_field() -> None:
    result = ConSensEvaluator(model="fake").evaluate(query=QUESTION, response="  ", contexts=DOCUMENTS)
    assert result.invalid_result and result.score is None and result.passing is None
    assert "answer" in result.invalid_reason


@pytest.mark.model
def test_real_model_equals_evaluate() -> None:
    result = ConSensEvaluator(model=REAL_MODEL).evaluate(
        query=QUESTION, response=ANSWER, contexts=DOCUMENTS[:2]
    )
    want = expected(QUESTION, DOCUMENTS[:2], ANSWER, REAL_MODEL)
    assert result.score == pytest.approx(want["consens"], abs=1e-9)
    assert result.feedback.startswith(want["verdict"])
