"""DeepEval: :class:`ConSensMetric`, a ``BaseMetric`` scoring an ``LLMTestCase`` with ConSens.

Needs ``pip install 'ragsense[deepeval]'``. Importing this module sets ``DEEPEVAL_TELEMETRY_OPT_OUT=1``
(unless already set) before DeepEval loads: its usage telemetry is on by default. The metric reads the
test case's ``input``, ``retrieval_context`` and ``actual_output``; ``measure`` returns the ``consens``
field ``ragsense.evaluate`` writes for the same row and sets ``score``, ``success`` (the verdict, or
``score >= threshold`` when a threshold is given) and ``reason`` (verdict, score, weakest words).

>>> from deepeval.test_case import LLMTestCase
>>> from ragsense.integrations.deepeval import ConSensMetric
>>> metric = ConSensMetric(model="fake")
>>> metric.measure(LLMTestCase(input="Where is the Eiffel Tower?", actual_output="It stands in Paris.",
...                            retrieval_context=["The Eiffel Tower stands in Paris."]))
1.0
>>> metric.is_successful(), metric.reason.split(";")[0]
(True, 'grounded: consens +1.00 (grounded >= +0.83)')
"""

from __future__ import annotations

from typing import Any

from ragsense.consens import DEFAULT_AGGREGATION, Aggregation, Bands
from ragsense.integrations._core import WEAKEST, Judgement, Scorer, require, row
from ragsense.models import ModelSpec

_base = require("deepeval.metrics", "deepeval")
_BaseMetric: Any = _base.BaseMetric


class ConSensMetric(_BaseMetric):  # type: ignore[misc]
    """A DeepEval metric whose score is ragsense's ConSens, judge-free (``Scorer``'s arguments).

    ``threshold``: the minimum score to succeed; None (default): the verdict bands' ``grounded`` edge,
    so a test case succeeds when its verdict is ``grounded`` (or ``refusal``).
    """

    _required_params: list[Any] = []  # noqa: RUF012 (DeepEval's own class attribute)

    def __init__(
        self,
        model: ModelSpec | None = None,
        threshold: float | None = None,
        aggregation: Aggregation | str = DEFAULT_AGGREGATION,
        bands: Bands | str | None = None,
        weakest: int = WEAKEST,
    ) -> None:
        # Kept under the parameters' names: DeepEval copies a metric per test case by calling the class
        # with the attributes that match its __init__ parameters (deepeval.metrics.utils.copy_metrics).
        self.model, self.aggregation, self.bands, self.weakest = model, aggregation, bands, weakest
        scorer = Scorer(model, aggregation=aggregation, bands=bands, min_consens=threshold, weakest=weakest)
        self._scorer = scorer
        # DeepEval's evaluate needs a threshold; by default the bands' grounded edge, the verdict's own.
        self.threshold = threshold if threshold is not None else scorer.metric.bands.grounded_at
        self.include_reason = True
        self.async_mode = True
        self.strict_mode = False
        self.evaluation_model = "ragsense ConSens (judge-free)"
        self.evaluation_cost = 0.0
        self.judgement: Judgement | None = None

    def _row(self, test_case: Any) -> dict[str, Any]:
        contexts = (
            test_case.retrieval_context if test_case.retrieval_context is not None else test_case.context
        )
        return row(test_case.input, contexts, test_case.actual_output)

    def _set(self, judgement: Judgement) -> float:
        self.judgement = judgement
        self.reason = judgement.feedback
        self.error = judgement.error
        self.score = judgement.score if judgement.score is not None else 0.0
        self.success = judgement.passing
        return self.score

    def measure(self, test_case: Any, *args: Any, **kwargs: Any) -> float:
        [judgement] = self._scorer.score([self._row(test_case)], desc="deepeval")
        return self._set(judgement)

    async def a_measure(self, test_case: Any, *args: Any, **kwargs: Any) -> float:
        [judgement] = await self._scorer.ascore([self._row(test_case)], desc="deepeval")
        return self._set(judgement)

    def is_successful(self) -> bool:
        return bool(self.success) and self.error is None

    @property
    def __name__(self) -> str:
        return "ConSens"


__all__ = ["ConSensMetric"]
