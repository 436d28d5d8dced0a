"""Haystack: :class:`ConSensEvaluator`, a ``@component`` with FaithfulnessEvaluator's inputs and outputs.

Needs ``pip install 'ragsense[haystack]'`` (haystack-ai; written against Haystack 3.x, whose
component API is Haystack 2's). ``run(questions, contexts, predicted_answers)`` scores the rows in one
``ragsense.evaluate`` call and returns ``individual_scores`` (each row's ``consens``; None for a row
that could not be scored), ``score`` (their mean over the scored rows) and ``results`` (per row: score,
verdict, passing, weakest words, feedback and the error of an unscored row), as FaithfulnessEvaluator
does, without a judge LLM.

>>> from ragsense.integrations.haystack import ConSensEvaluator
>>> out = ConSensEvaluator(model="fake").run(
...     questions=["Where is the Eiffel Tower?"], contexts=[["The Eiffel Tower stands in Paris."]],
...     predicted_answers=["It stands in Paris."])
>>> out["individual_scores"], out["results"][0]["verdict"]
([1.0], 'grounded')
"""

# No ``from __future__ import annotations``: Haystack reads run()'s annotations as types for its sockets.
from collections.abc import Callable
from typing import Any, TypeVar

from ragsense.errors import InputError
from ragsense.integrations._core import Judgement, Scorer, require, row

_haystack = require("haystack", "haystack")
component: Any = _haystack.component
_F = TypeVar("_F", bound=Callable[..., Any])


def _output_types(function: _F) -> _F:
    """FaithfulnessEvaluator's output sockets (less its ``meta``), for ``run`` and ``run_async``."""
    outputs = {
        "individual_scores": list[float | None],
        "score": float | None,
        "results": list[dict[str, Any]],
    }
    decorated: _F = component.output_types(**outputs)(function)
    return decorated


def to_output(judgements: list[Judgement]) -> dict[str, Any]:
    """Judgements as FaithfulnessEvaluator's output (``score`` None when no row was scored)."""
    scores = [j.score for j in judgements]
    scored = [s for s in scores if s is not None]
    return {
        "individual_scores": scores,
        "score": sum(scored) / len(scored) if scored else None,
        "results": [
            {
                "score": j.score,
                "verdict": j.verdict,
                "passing": j.passing,
                "weakest_words": j.weakest,
                "feedback": j.feedback,
                "error": j.error,
            }
            for j in judgements
        ],
    }


def _rows(
    questions: list[str], contexts: list[list[str]], predicted_answers: list[str]
) -> list[dict[str, Any]]:
    if not len(questions) == len(contexts) == len(predicted_answers):
        raise InputError(
            f"questions, contexts and predicted_answers must have one entry per row, got "
            f"{len(questions)}, {len(contexts)} and {len(predicted_answers)}",
            field="predicted_answers",
        )
    return [row(q, c, a) for q, c, a in zip(questions, contexts, predicted_answers, strict=True)]


@component
class ConSensEvaluator:
    """Haystack component scoring answers with ragsense's ConSens (``Scorer``'s arguments)."""

    def __init__(self, model: str | None = None, min_consens: float | None = None) -> None:
        self.model = model
        self.min_consens = min_consens
        self._scorer = Scorer(model, min_consens=min_consens)

    def to_dict(self) -> dict[str, Any]:
        """Haystack's serialization (pipelines save their components as YAML)."""
        return {
            "type": f"{type(self).__module__}.{type(self).__name__}",
            "init_parameters": {"model": self.model, "min_consens": self.min_consens},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ConSensEvaluator":
        return cls(**data.get("init_parameters", {}))

    @_output_types
    def run(
        self, questions: list[str], contexts: list[list[str]], predicted_answers: list[str]
    ) -> dict[str, Any]:
        """Score each predicted answer against its question and contexts."""
        return to_output(self._scorer.score(_rows(questions, contexts, predicted_answers), desc="haystack"))

    @_output_types
    async def run_async(
        self, questions: list[str], contexts: list[list[str]], predicted_answers: list[str]
    ) -> dict[str, Any]:
        """The async form of :meth:`run` (Haystack's AsyncPipeline)."""
        rows = _rows(questions, contexts, predicted_answers)
        return to_output(await self._scorer.ascore(rows, desc="haystack"))


__all__ = ["ConSensEvaluator", "to_output"]
