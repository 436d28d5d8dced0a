"""LlamaIndex: :class:`ConSensEvaluator`, a ``BaseEvaluator`` (sync and async) scoring with ConSens.

Needs ``pip install 'ragsense[llamaindex]'`` (llama-index-core). It returns LlamaIndex's own
``EvaluationResult``: ``score`` is the ``consens`` field ``ragsense.evaluate`` writes for the same row,
``passing`` the verdict (``grounded`` or ``refusal``, or ``score >= min_consens`` when given) and
``feedback`` the verdict, score and weakest words. It works wherever a ``BaseEvaluator`` does:
``evaluate_response(query, response)`` on a query engine's response, or ``BatchEvalRunner``.

>>> from ragsense.integrations.llamaindex import ConSensEvaluator
>>> result = ConSensEvaluator(model="fake").evaluate(
...     query="Where is the Eiffel Tower?", contexts=["The Eiffel Tower stands in Paris."],
...     response="It stands in Paris.")
>>> result.passing, result.feedback.split(";")[0]
(True, 'grounded: consens +1.00 (grounded >= +0.83)')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragsense.integrations._core import Judgement, Scorer, require, row

_core = require("llama_index.core.evaluation", "llamaindex")
_BaseEvaluator: Any = _core.BaseEvaluator
EvaluationResult: Any = _core.EvaluationResult


def to_result(judgement: Judgement, query: str | None, response: str | None, contexts: Any) -> Any:
    """A :class:`Judgement` as LlamaIndex's ``EvaluationResult`` (invalid when the row was not scored)."""
    return EvaluationResult(
        query=query,
        contexts=list(contexts) if contexts is not None else None,
        response=response,
        passing=judgement.passing if judgement.error is None else None,
        score=judgement.score,
        feedback=judgement.feedback,
        invalid_result=judgement.error is not None,
        invalid_reason=judgement.error,
    )


class ConSensEvaluator(_BaseEvaluator):  # type: ignore[misc]
    """A LlamaIndex evaluator whose score is ragsense's ConSens (``Scorer``'s arguments)."""

    def __init__(self, model: Any = None, **options: Any) -> None:
        self._scorer = Scorer(model, **options)

    def _get_prompts(self) -> dict[str, Any]:
        return {}  # judge-free: there is no prompt to show or replace

    def _update_prompts(self, prompts_dict: dict[str, Any]) -> None:
        return None

    def evaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> Any:
        # Scored on this thread: no event loop to start (LlamaIndex's default runs aevaluate in one).
        [judgement] = self._scorer.score([row(query, contexts, response)], desc="llamaindex")
        return to_result(judgement, query, response, contexts)

    async def aevaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[str] | None = None,
        sleep_time_in_seconds: int = 0,
        **kwargs: Any,
    ) -> Any:
        [judgement] = await self._scorer.ascore([row(query, contexts, response)], desc="llamaindex")
        return to_result(judgement, query, response, contexts)


__all__ = ["ConSensEvaluator", "EvaluationResult", "to_result"]
