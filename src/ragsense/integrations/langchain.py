"""LangChain: :class:`ConSensCallbackHandler` scores each retriever + LLM run as it finishes, and
:class:`ConSensRunEvaluator` is a LangSmith ``RunEvaluator`` for a traced run.

Needs ``pip install 'ragsense[langchain]'`` (langchain-core, which brings langsmith). Both return
LangSmith's own ``EvaluationResult``: ``key`` ``"consens"``, ``score`` the ``consens`` field
``ragsense.evaluate`` writes for the same row, ``value`` the verdict, ``comment`` the verdict, score and
weakest words, and ``source_run_id`` the LLM run that was scored. A run the model failed to score gets
a result with no score and the error as its comment (LangChain only logs a handler's exceptions).

The handler pairs an LLM run with the last retriever run under the same root run (a chain that
retrieves, then prompts the model), reading the question from the retriever's query, the contexts from
the documents and the answer from the generation; it keeps its results in ``results``.

>>> from langchain_core.documents import Document
>>> from ragsense.integrations.langchain import ConSensRunEvaluator
>>> from langsmith.schemas import Run
>>> import datetime, uuid
>>> now = datetime.datetime.now(datetime.timezone.utc)
>>> retriever = Run(id=uuid.uuid4(), name="retriever", run_type="retriever", start_time=now,
...                 inputs={"query": "Where is the Eiffel Tower?"}, trace_id=uuid.uuid4(),
...                 outputs={"documents": [Document(page_content="The Eiffel Tower stands in Paris.")]})
>>> llm = Run(id=uuid.uuid4(), name="llm", run_type="llm", start_time=now, inputs={}, trace_id=uuid.uuid4(),
...           outputs={"generations": [[{"text": "It stands in Paris."}]]})
>>> root = Run(id=uuid.uuid4(), name="chain", run_type="chain", start_time=now, inputs={},
...            trace_id=uuid.uuid4(), child_runs=[retriever, llm])
>>> result = ConSensRunEvaluator(model="fake").evaluate_run(root)
>>> result.key, result.value, result.score
('consens', 'grounded', 1.0)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from ragsense.errors import RagsenseError
from ragsense.integrations._core import Judgement, Scorer, require, row

_callbacks = require("langchain_core.callbacks", "langchain")
_evaluator = require("langsmith.evaluation", "langchain")
_BaseCallbackHandler: Any = _callbacks.BaseCallbackHandler
_RunEvaluator: Any = _evaluator.RunEvaluator
EvaluationResult: Any = _evaluator.EvaluationResult

KEY = "consens"
"""The feedback key of every result (LangSmith shows it as the metric's name)."""


def to_result(judgement: Judgement, source_run_id: Any = None) -> Any:
    """A :class:`Judgement` as LangSmith's ``EvaluationResult``."""
    return EvaluationResult(
        key=KEY,
        score=judgement.score,
        value=judgement.verdict,
        comment=judgement.feedback,
        source_run_id=source_run_id,
        extra={"passing": judgement.passing, "weakest_words": judgement.weakest, "error": judgement.error},
    )


def _text(document: Any) -> str:
    """A retrieved document's text: a ``Document``, its dict form, or a string."""
    if isinstance(document, Mapping):
        return str(document.get("page_content", ""))
    return str(getattr(document, "page_content", document))


def _generation(outputs: Any) -> str | None:
    """The first generation's text of an LLM run's outputs (an ``LLMResult`` or its dict form)."""
    generations = outputs.get("generations") if isinstance(outputs, Mapping) else outputs.generations
    if not generations or not generations[0]:
        return None
    first = generations[0][0]
    if isinstance(first, Mapping):
        message = first.get("message")
        text = first.get("text") or (message.get("content") if isinstance(message, Mapping) else None)
        return str(text) if text else None
    return str(getattr(first, "text", "") or getattr(getattr(first, "message", None), "content", "")) or None


@dataclass
class _Retrieval:
    query: str | None = None
    contexts: list[str] = field(default_factory=list)


class ConSensCallbackHandler(_BaseCallbackHandler):  # type: ignore[misc]
    """Scores every LLM run that follows a retriever run in the same chain, as the LLM run finishes.

    ``Scorer``'s arguments (``model``, ``min_consens``, ...). ``results``: one LangSmith
    ``EvaluationResult`` per scored LLM run, in the order they finished.
    """

    def __init__(self, model: Any = None, **options: Any) -> None:
        super().__init__()
        self._scorer = Scorer(model, **options)
        self._parents: dict[UUID, UUID | None] = {}
        self._queries: dict[UUID, str] = {}
        self._retrievals: dict[UUID, _Retrieval] = {}  # root run -> its latest finished retrieval
        self.results: list[Any] = []

    def _root(self, run_id: UUID) -> UUID:
        seen = {run_id}
        while (parent := self._parents.get(run_id)) is not None and parent not in seen:
            seen.add(parent)
            run_id = parent
        return run_id

    def _start(self, run_id: UUID, parent_run_id: UUID | None) -> None:
        self._parents[run_id] = parent_run_id

    def on_chain_start(
        self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._start(run_id, parent_run_id)

    def on_llm_start(
        self, serialized: Any, prompts: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._start(run_id, parent_run_id)

    def on_chat_model_start(
        self,
        serialized: Any,
        messages: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._start(run_id, parent_run_id)

    def on_retriever_start(
        self, serialized: Any, query: str, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._start(run_id, parent_run_id)
        self._queries[run_id] = query

    def on_retriever_end(
        self, documents: Sequence[Any], *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        retrieval = _Retrieval(self._queries.pop(run_id, None), [_text(d) for d in documents])
        self._retrievals[self._root(run_id)] = retrieval

    def on_llm_end(
        self, response: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        retrieval = self._retrievals.get(self._root(run_id))
        if retrieval is None:
            return  # an LLM call with no retrieval before it: nothing to be grounded in
        answer = _generation(response)
        try:
            [judgement] = self._scorer.score(
                [row(retrieval.query, retrieval.contexts, answer)], desc="langchain"
            )
        except RagsenseError as error:
            # LangChain logs a handler's exception and goes on: keep the failure where results are read.
            self.results.append(
                EvaluationResult(key=KEY, comment=f"not scored: {error}", source_run_id=run_id)
            )
            return
        self.results.append(to_result(judgement, source_run_id=run_id))


def _walk(run: Any) -> Iterator[Any]:
    yield run
    for child in getattr(run, "child_runs", None) or []:
        yield from _walk(child)


class ConSensRunEvaluator(_RunEvaluator):  # type: ignore[misc]
    """A LangSmith ``RunEvaluator``: scores a traced chain run by its last retriever and LLM child runs.

    The question falls back to the example's or the root run's ``question`` / ``input`` / ``query``
    input when no retriever run has one.
    """

    def __init__(self, model: Any = None, **options: Any) -> None:
        self._scorer = Scorer(model, **options)

    def _row(self, run: Any, example: Any) -> tuple[dict[str, Any], Any]:
        runs = list(_walk(run))
        retrievers = [r for r in runs if r.run_type == "retriever"]
        llms = [r for r in runs if r.run_type == "llm" and r.outputs]
        question = retrievers[-1].inputs.get("query") if retrievers else None
        if question is None:
            inputs = {**(getattr(example, "inputs", None) or {}), **(run.inputs or {})}
            question = next((inputs[k] for k in ("question", "input", "query") if k in inputs), None)
        contexts = (
            [_text(d) for d in (retrievers[-1].outputs or {}).get("documents", [])] if retrievers else []
        )
        answer = _generation(llms[-1].outputs) if llms else None
        return row(question, contexts, answer), (llms[-1].id if llms else run.id)

    def evaluate_run(self, run: Any, example: Any = None, evaluator_run_id: Any = None) -> Any:
        data, source = self._row(run, example)
        [judgement] = self._scorer.score([data], desc="langchain")
        return to_result(judgement, source_run_id=source)

    async def aevaluate_run(self, run: Any, example: Any = None, evaluator_run_id: Any = None) -> Any:
        data, source = self._row(run, example)
        [judgement] = await self._scorer.ascore([data], desc="langchain")
        return to_result(judgement, source_run_id=source)


__all__ = ["KEY", "ConSensCallbackHandler", "ConSensRunEvaluator", "EvaluationResult", "to_result"]
