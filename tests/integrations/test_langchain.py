"""LangChain: the callback handler in a real retrieval chain (InMemoryVectorStore with LangChain's
DeterministicFakeEmbedding, FakeListChatModel), and the LangSmith RunEvaluator on the chain's traced run,
both scoring exactly as ``ragsense.evaluate`` does on the same row."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langchain_core", reason="LangChain not installed: pip install 'ragsense[langchain]'")

from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_core.tracers.run_collector import RunCollectorCallbackHandler
from langchain_core.vectorstores import InMemoryVectorStore
from langsmith.evaluation import EvaluationResult

from ragsense.integrations.langchain import ConSensCallbackHandler, ConSensRunEvaluator

from ._helpers import ANSWER, DOCUMENTS, QUESTION, REAL_MODEL, WRONG_ANSWER, expected


def _chain(answers: list[str]):  # type: ignore[no-untyped-def]
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_texts(DOCUMENTS)
    retriever = store.as_retriever(search_kwargs={"k": 2})
    prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
    join = RunnableLambda(lambda docs: "\n".join(d.page_content for d in docs))
    return (
        {"context": retriever | join, "question": RunnablePassthrough()}
        | prompt
        | FakeListChatModel(responses=answers)
        | StrOutputParser()
    ), retriever


@pytest.mark.parametrize("answer", [ANSWER, WRONG_ANSWER])
def test_callback_scores_each_retrieval_and_llm_run(answer: str) -> None:
    chain, retriever = _chain([answer])
    handler, collector = ConSensCallbackHandler(model="fake"), RunCollectorCallbackHandler()
    assert chain.invoke(QUESTION, config={"callbacks": [handler, collector]}) == answer
    contexts = [d.page_content for d in retriever.invoke(QUESTION)]
    want = expected(QUESTION, contexts, answer, "fake")
    [result] = handler.results
    assert isinstance(result, EvaluationResult) and result.key == "consens"
    assert result.score == pytest.approx(want["consens"], abs=1e-9)
    assert result.value == want["verdict"] and result.comment.startswith(want["verdict"])
    llm_runs = [r for r in collector.traced_runs[0].child_runs if r.run_type == "llm"]
    assert result.source_run_id == llm_runs[0].id
    # The same traced run, evaluated afterwards as LangSmith's evaluate would, gives the same result.
    evaluator = ConSensRunEvaluator(model="fake")
    for again in (
        evaluator.evaluate_run(collector.traced_runs[0]),
        asyncio.run(evaluator.aevaluate_run(collector.traced_runs[0])),
    ):
        assert again.score == pytest.approx(want["consens"], abs=1e-9)
        assert again.source_run_id == result.source_run_id


def test_llm_run_without_retrieval_is_not_scored() -> None:
    handler = ConSensCallbackHandler(model="fake")
    FakeListChatModel(responses=["hi"]).invoke("hello", config={"callbacks": [handler]})
    assert handler.results == []


def test_model_failure_is_a_result_without_score() -> None:
    chain, _ = _chain([ANSWER])
    handler = ConSensCallbackHandler(model="no-such-model")
    assert chain.invoke(QUESTION, config={"callbacks": [handler]}) == ANSWER  # the chain goes on
    [result] = handler.results
    assert result.score is None and "no-such-model" in result.comment


def test_run_without_answer_is_reported_not_scored() -> None:
    _, retriever = _chain([ANSWER])
    collector = RunCollectorCallbackHandler()
    retriever.invoke(QUESTION, config={"callbacks": [collector]})
    result = ConSensRunEvaluator(model="fake").evaluate_run(collector.traced_runs[0])
    assert result.score is None and "answer" in result.extra["error"]


@pytest.mark.model
def test_real_model_equals_evaluate() -> None:
    chain, retriever = _chain([ANSWER])
    handler = ConSensCallbackHandler(model=REAL_MODEL)
    chain.invoke(QUESTION, config={"callbacks": [handler]})
    contexts = [d.page_content for d in retriever.invoke(QUESTION)]
    assert handler.results[0].score == pytest.approx(
        expected(QUESTION, contexts, ANSWER, REAL_MODEL)["consens"], abs=1e-9
    )
