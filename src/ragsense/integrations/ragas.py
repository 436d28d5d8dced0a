"""RAGAS: :class:`ConSensRagas`, a single-turn metric usable in ``ragas.evaluate`` beside RAGAS's own.

Needs ``pip install 'ragsense[ragas]'``. Importing this module sets ``RAGAS_DO_NOT_TRACK=true`` (unless
already set): RAGAS's usage analytics are on by default. The metric reads ``user_input``,
``retrieved_contexts`` and ``response`` and its score (column ``consens``) is the ``consens`` field
``ragsense.evaluate`` writes for the same row; RAGAS's legacy metrics return a bare float, so the
verdict and weakest words of each scored sample are kept in ``judgements`` (in the order they
finished). A row that cannot be scored raises :class:`~ragsense.errors.InputError` naming the field,
which ``ragas.evaluate`` reports as it does any metric's failure.

>>> from ragas import SingleTurnSample
>>> from ragsense.integrations.ragas import ConSensRagas
>>> metric = ConSensRagas(model="fake")
>>> metric.single_turn_score(SingleTurnSample(user_input="Where is the Eiffel Tower?",
...     retrieved_contexts=["The Eiffel Tower stands in Paris."], response="It stands in Paris."))
1.0
>>> metric.judgements[-1].verdict
'grounded'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ragsense.errors import InputError
from ragsense.integrations._core import Judgement, Scorer, require, row

_base = require("ragas.metrics.base", "ragas")
_SingleTurnMetric: Any = _base.SingleTurnMetric
_MetricType: Any = _base.MetricType


@dataclass
class ConSensRagas(_SingleTurnMetric):  # type: ignore[misc]
    """ragsense's ConSens as a RAGAS metric, judge-free: no ``llm`` or ``embeddings`` to set."""

    name: str = "consens"
    model: str | None = None
    min_consens: float | None = None
    _required_columns: dict[Any, set[str]] = field(
        default_factory=lambda: {_MetricType.SINGLE_TURN: {"user_input", "retrieved_contexts", "response"}}
    )
    judgements: list[Judgement] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._scorer = Scorer(self.model, min_consens=self.min_consens)

    def init(self, run_config: Any) -> None:
        return None  # nothing to connect: the model is loaded once per process by ragsense's pool

    async def _single_turn_ascore(self, sample: Any, callbacks: Any) -> float:
        data = row(sample.user_input, sample.retrieved_contexts, sample.response)
        [judgement] = await self._scorer.ascore([data], desc="ragas")
        self.judgements.append(judgement)
        if judgement.score is None:
            field_name = next(
                (e.get("field") for e in judgement.record.get("errors", []) if e.get("field")), None
            )
            raise InputError(judgement.error or "not scored", field=field_name)
        return judgement.score

    async def _ascore(self, row: dict[str, Any], callbacks: Any) -> float:
        return await self._single_turn_ascore(_ragas_sample(row), callbacks)


def _ragas_sample(data: dict[str, Any]) -> Any:
    return require("ragas", "ragas").SingleTurnSample(**data)


__all__ = ["ConSensRagas"]
