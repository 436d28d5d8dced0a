"""VERA's three scores (context relevance, response relevance, response adherence) as a metric."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragsense.contract import Needs
from ragsense.data import RagRow
from ragsense.errors import ParameterError
from ragsense.models import ModelPool, ModelSpec
from ragsense.vera import SCORED_STEPS
from ragsense.vera import Vera as VeraEvaluator

VERA_FIELDS = ("context_relevance", "response_relevance", "response_adherence", "retrieval_required", "vera")
ENHANCE_FIELDS = ("enhanced_contexts", "enhanced_answer", "refused", "refusal", *VERA_FIELDS)


class Vera:
    """VERA evaluate (Birur et al.): a judge model decides on every context sentence and answer statement.

    ``judge``: the judge model (name or object; default the bundled SmolLM2-135M). ``steps``: which of
    ``context``, ``relevance``, ``adherence`` to score (the others' scores are null); ``retrieval``
    adds step 1, the retrieval-need check. Other options are :class:`ragsense.vera.Vera`'s
    (``judge_mode``, ``splitter``, ``adherence_signal``, ``consens_model``, ``consens_threshold``,
    ``calibrate``, ``reasons``, ``cache``, ``cache_dir``).

    >>> Vera(judge="fake", steps=("adherence",)).settings()["steps"]
    ['adherence']
    """

    name = "vera"
    needs = Needs(("question", "contexts", "answer"))
    fields: tuple[str, ...] = VERA_FIELDS
    scores = ("context_relevance", "response_relevance", "response_adherence")
    verdict = None

    def __init__(
        self,
        judge: ModelSpec | None = None,
        *,
        steps: Sequence[str] = SCORED_STEPS,
        retrieval: bool = True,
        model_options: dict[str, Any] | None = None,
        model: ModelSpec | None = None,
        **options: Any,
    ) -> None:
        # ``model`` is what ``evaluate(..., model=...)`` gives every metric named: here, the judge.
        judge = judge if judge is not None else model
        bad = [s for s in steps if s not in SCORED_STEPS]
        if bad or not steps:
            raise ParameterError(
                f"choose among {', '.join(SCORED_STEPS)}, got {list(steps)!r}", parameter="steps"
            )
        self.judge_spec = judge
        self.steps = tuple(steps)
        self.retrieval = retrieval
        self.model_options = dict(model_options or {})
        self.options = options
        self.evaluator: VeraEvaluator | None = None

    def settings(self) -> dict[str, Any]:
        judge = self.judge_spec if isinstance(self.judge_spec, str | None) else self.judge_spec.info.name
        return {
            "judge": judge,
            "steps": list(self.steps),
            "retrieval": self.retrieval,
            **{k: str(v) if isinstance(v, Path) else v for k, v in self.options.items()},
        }

    def model_fingerprints(self) -> dict[str, str]:
        """The judge's fingerprint (once set up), for the run store."""
        if self.evaluator is None:
            return {}
        info = getattr(self.evaluator.judge_model, "info", None)
        return {} if info is None else {"judge": info.fingerprint}

    async def setup(self, pool: ModelPool) -> None:
        judge = pool.get(self.judge_spec, **self.model_options)
        self.evaluator = VeraEvaluator(
            judge, steps=self.steps, check_retrieval=self.retrieval, pool=pool, **self.options
        )

    async def score(self, rows: Sequence[RagRow]) -> list[dict[str, Any] | Exception]:
        if self.evaluator is None:
            raise ParameterError("call setup() first", parameter="Vera")
        return [r if isinstance(r, Exception) else r.to_record() for r in await self.evaluator.evaluate(rows)]

    async def aclose(self) -> None:
        if self.evaluator is not None:
            await self.evaluator.aclose()


class VeraEnhance(Vera):
    """VERA enhance as a runner step (``ragsense vera enhance``): edited contexts and answers.

    Not an evaluation metric (it rewrites rather than scores), so it is not registered under a name.
    ``generate`` re-answers every question from its edited context.
    """

    name = "vera_enhance"
    fields = ENHANCE_FIELDS

    def __init__(self, judge: ModelSpec | None = None, *, generate: Any = None, **options: Any) -> None:
        super().__init__(judge, **options)
        self.generate = generate
        self.needs = Needs(
            ("question", "contexts") if generate is not None else ("question", "contexts", "answer")
        )

    async def score(self, rows: Sequence[RagRow]) -> list[dict[str, Any] | Exception]:
        if self.evaluator is None:
            raise ParameterError("call setup() first", parameter="VeraEnhance")
        results = await self.evaluator.enhance(rows, self.generate)
        return [r if isinstance(r, Exception) else r.to_record() for r in results]
