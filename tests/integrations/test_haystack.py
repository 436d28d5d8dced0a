"""Haystack 3: ConSensEvaluator after a real RAG pipeline (InMemoryDocumentStore, BM25 retriever,
ChatPromptBuilder, Haystack's MockChatGenerator), in an evaluation pipeline of its own as Haystack's
evaluators are run, scoring exactly as ``ragsense.evaluate`` does on the same rows."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("haystack", reason="Haystack not installed: pip install 'ragsense[haystack]'")

from haystack import Document, Pipeline
from haystack.components.builders import ChatPromptBuilder
from haystack.components.generators.chat.mock import MockChatGenerator
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore

from ragsense.errors import InputError
from ragsense.integrations.haystack import ConSensEvaluator

from ._helpers import ANSWER, DOCUMENTS, QUESTION, REAL_MODEL, WRONG_ANSWER, expected

TEMPLATE = [
    ChatMessage.from_user("{% for d in documents %}{{ d.content }}\n{% endfor %}Question: {{ question }}")
]


def _rag(answers: list[str]) -> Pipeline:
    store = InMemoryDocumentStore()
    store.write_documents([Document(content=t) for t in DOCUMENTS])
    rag = Pipeline()
    rag.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=2))
    rag.add_component("prompt", ChatPromptBuilder(template=TEMPLATE, required_variables=["question"]))
    rag.add_component("llm", MockChatGenerator(responses=answers))
    rag.connect("retriever.documents", "prompt.documents")
    rag.connect("prompt.prompt", "llm.messages")
    return rag


def _answer(rag: Pipeline, question: str) -> tuple[list[str], str]:
    out = rag.run(
        {"retriever": {"query": question}, "prompt": {"question": question}},
        include_outputs_from={"retriever"},
    )
    return [d.content for d in out["retriever"]["documents"]], out["llm"]["replies"][0].text


def _eval_pipeline(model: str) -> Pipeline:
    pipeline = Pipeline()
    pipeline.add_component("consens", ConSensEvaluator(model=model))
    return pipeline


def test_evaluation_pipeline_equals_evaluate() -> None:
    rag = _rag([ANSWER, WRONG_ANSWER])
    questions = [QUESTION, "Who built the Eiffel Tower?"]
    contexts, answers = zip(*(_answer(rag, q) for q in questions), strict=True)
    out = _eval_pipeline("fake").run(
        {"consens": {"questions": questions, "contexts": list(contexts), "predicted_answers": list(answers)}}
    )["consens"]
    wants = [expected(q, c, a, "fake") for q, c, a in zip(questions, contexts, answers, strict=True)]
    for got, result, want in zip(out["individual_scores"], out["results"], wants, strict=True):
        assert got == pytest.approx(want["consens"], abs=1e-9)
        assert result["verdict"] == want["verdict"] and result["feedback"].startswith(want["verdict"])
    assert out["score"] == pytest.approx(sum(w["consens"] for w in wants) / 2, abs=1e-9)
    evaluator = ConSensEvaluator(model="fake")
    again = asyncio.run(
        evaluator.run_async(questions=questions, contexts=list(contexts), predicted_answers=list(answers))
    )
    assert again["individual_scores"] == out["individual_scores"]


def test_component_serializes_and_checks_lengths() -> None:
    pipeline = _eval_pipeline("fake")
    # Haystack loads only classes from modules it is told to trust.
    loaded = Pipeline.loads(pipeline.dumps(), allowed_modules=["ragsense.integrations.haystack"])
    assert loaded.get_component("consens").model == "fake"
    out = ConSensEvaluator(model="fake").run(
        questions=[QUESTION], contexts=[DOCUMENTS], predicted_answers=[""]
    )
    assert out["individual_scores"] == [None] and out["score"] is None
    assert "answer" in out["results"][0]["error"]
    with pytest.raises(InputError, match="one entry per row"):
        ConSensEvaluator(model="fake").run(questions=[QUESTION], contexts=[], predicted_answers=[ANSWER])


@pytest.mark.model
def test_real_model_equals_evaluate() -> None:
    contexts, answer = _answer(_rag([ANSWER]), QUESTION)
    out = ConSensEvaluator(model=REAL_MODEL).run(
        questions=[QUESTION], contexts=[contexts], predicted_answers=[answer]
    )
    assert out["individual_scores"][0] == pytest.approx(
        expected(QUESTION, contexts, answer, REAL_MODEL)["consens"], abs=1e-9
    )
