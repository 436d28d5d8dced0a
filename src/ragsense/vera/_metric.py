"""VERA's three scores (context relevance, response relevance, response adherence) as a metric, and
VERA enhance as a runner step."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragsense.contract import Needs
from ragsense.data import RagRow
from ragsense.errors import ParameterError
from ragsense.models import ModelPool, ModelSpec
from ragsense.vera._enhance import AnswerFn
from ragsense.vera._evaluator import VeraEvaluator
from ragsense.vera._settings import (
    DEFAULT_ADHERENCE_SIGNAL,
    DEFAULT_STEP_SIGNAL,
    SCORED_STEPS,
    AdherenceSignal,
    SplitterMode,
    StepSignal,
    VeraSettings,
)
from ragsense.vera.judges import DEFAULT_LABEL_SCORING, JudgeMode, LabelScoring, PromptFormat

VERA_FIELDS = ("context_relevance", "response_relevance", "response_adherence", "retrieval_required", "vera")
ENHANCE_FIELDS = ("enhanced_contexts", "enhanced_answer", "refused", "refusal", *VERA_FIELDS)


def _name(model: ModelSpec | None) -> str | None:
    """A model spec as the run store keeps it: its name."""
    return model if isinstance(model, str | None) else model.info.name


class Vera:
    """VERA evaluate (Birur et al.): a decision on every context sentence and answer statement.

    By default steps 1-3 decide by offline signals of the bundled models and step 4 by ConSens per
    statement (``signals="offline"``, ``adherence_signal="consens"``); ``signals="judge"`` uses the
    judge's labels, for a capable judge (docs/vera.md, "Offline signals").

    ``judge``: the judge model (name or object; default the bundled SmolLM2-135M); ``model`` is what
    ``evaluate(..., model=...)`` gives every metric named, used when ``judge`` is not given.
    ``model_options`` go to the pool when it loads the judge. ``steps``: which of ``context``,
    ``relevance``, ``adherence`` to score (the others' scores are null); ``retrieval`` adds step 1,
    the retrieval-need check. The other settings are :class:`VeraSettings`' (checked here, so a bad
    value fails when the metric is made). :meth:`setup` makes the :class:`VeraEvaluator` that scores.

    >>> Vera(judge="fake", steps=("adherence",)).settings()["steps"]
    ['adherence']
    >>> Vera(judge="fake", splitter="llm")
    Traceback (most recent call last):
    ...
    ragsense.errors.ParameterError: splitter: must be one of auto, rules, judge, got 'llm'
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
        judge_mode: JudgeMode | str = "auto",
        splitter: SplitterMode | str = "auto",
        adherence_signal: AdherenceSignal | str = DEFAULT_ADHERENCE_SIGNAL,
        signals: StepSignal | str = DEFAULT_STEP_SIGNAL,
        consens_model: ModelSpec | None = None,
        consens_threshold: float = 0.0,
        cache: bool = True,
        cache_dir: str | Path | None = None,
        calibrate: bool = False,
        reasons: bool = False,
        label_scoring: LabelScoring | str = DEFAULT_LABEL_SCORING,
        prompt_format: PromptFormat | str = "plain",
        model_options: dict[str, Any] | None = None,
        model: ModelSpec | None = None,
    ) -> None:
        self.judge_spec = judge if judge is not None else model
        self.model_options = dict(model_options or {})
        self.config = VeraSettings(
            steps=tuple(steps),
            check_retrieval=retrieval,
            judge_mode=judge_mode,
            splitter=splitter,
            adherence_signal=adherence_signal,
            signals=signals,
            consens_model=consens_model,
            consens_threshold=consens_threshold,
            cache=cache,
            cache_dir=cache_dir,
            calibrate=calibrate,
            reasons=reasons,
            label_scoring=label_scoring,
            prompt_format=prompt_format,
        )
        self.evaluator: VeraEvaluator | None = None

    @property
    def steps(self) -> tuple[str, ...]:
        return self.config.steps

    @property
    def retrieval(self) -> bool:
        return self.config.check_retrieval

    def settings(self) -> dict[str, Any]:
        """Every setting, as JSON values (what the run store keeps and a resume compares)."""
        c = self.config
        return {
            "judge": _name(self.judge_spec),
            "steps": list(c.steps),
            "retrieval": c.check_retrieval,
            "judge_mode": c.judge_mode,
            "splitter": c.splitter,
            "adherence_signal": c.adherence_signal,
            "signals": c.signals,
            "consens_model": _name(c.consens_model),
            "consens_threshold": c.consens_threshold,
            "cache": c.cache,
            "cache_dir": None if c.cache_dir is None else str(c.cache_dir),
            "calibrate": c.calibrate,
            "reasons": c.reasons,
            "label_scoring": c.label_scoring,
            "prompt_format": c.prompt_format,
        }

    def model_fingerprints(self) -> dict[str, str]:
        """The judge's fingerprint (once set up), for the run store."""
        if self.evaluator is None:
            return {}
        info = getattr(self.evaluator.judge_model, "info", None)
        return {} if info is None else {"judge": info.fingerprint}

    async def setup(self, pool: ModelPool) -> None:
        judge = pool.get(self.judge_spec, **self.model_options)
        self.evaluator = VeraEvaluator(judge, self.config, pool=pool)

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
    ``generate`` re-answers every question from its edited context; the other parameters are
    :class:`Vera`'s.
    """

    name = "vera_enhance"
    fields = ENHANCE_FIELDS

    def __init__(
        self,
        judge: ModelSpec | None = None,
        *,
        generate: AnswerFn | None = None,
        steps: Sequence[str] = SCORED_STEPS,
        retrieval: bool = True,
        judge_mode: JudgeMode | str = "auto",
        splitter: SplitterMode | str = "auto",
        adherence_signal: AdherenceSignal | str = DEFAULT_ADHERENCE_SIGNAL,
        signals: StepSignal | str = DEFAULT_STEP_SIGNAL,
        consens_model: ModelSpec | None = None,
        consens_threshold: float = 0.0,
        cache: bool = True,
        cache_dir: str | Path | None = None,
        calibrate: bool = False,
        reasons: bool = False,
        label_scoring: LabelScoring | str = DEFAULT_LABEL_SCORING,
        prompt_format: PromptFormat | str = "plain",
        model_options: dict[str, Any] | None = None,
        model: ModelSpec | None = None,
    ) -> None:
        super().__init__(
            judge,
            steps=steps,
            retrieval=retrieval,
            judge_mode=judge_mode,
            splitter=splitter,
            adherence_signal=adherence_signal,
            signals=signals,
            consens_model=consens_model,
            consens_threshold=consens_threshold,
            cache=cache,
            cache_dir=cache_dir,
            calibrate=calibrate,
            reasons=reasons,
            label_scoring=label_scoring,
            prompt_format=prompt_format,
            model_options=model_options,
            model=model,
        )
        self.generate = generate
        self.needs = Needs(
            ("question", "contexts") if generate is not None else ("question", "contexts", "answer")
        )

    async def score(self, rows: Sequence[RagRow]) -> list[dict[str, Any] | Exception]:
        if self.evaluator is None:
            raise ParameterError("call setup() first", parameter="VeraEnhance")
        results = await self.evaluator.enhance(rows, self.generate)
        return [r if isinstance(r, Exception) else r.to_record() for r in results]
