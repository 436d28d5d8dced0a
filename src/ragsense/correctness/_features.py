"""The base model's log-likelihood features under the Baseline, Normal and Perturbed conditions.

For each condition the base model (BM) answers greedily, and the NLL of every token it can score is
read at the paper's places (Section 3.4.1): the whole prompt, the instruction, the context (Normal) or
perturbed context (Perturbed), the question, and the BM's own output. Each place is summarized by the
mean NLL of its tokens (the default feature) and by the max (kept for the ablation in
docs/correctness.md). A token belongs to the place that holds its last character.

Extraction is async: :meth:`FeatureExtractor.aextract_many` sends the condition prompts of all its
samples to the BM in one batched call (:mod:`ragsense.correctness._scoring`), so a server backend
answers them concurrently; the sync ``extract_many`` and ``extract`` are for outermost callers only.

Everything computed is cached on disk (see :mod:`ragsense.correctness._cache`), keyed by the models'
fingerprints, the prompt and the settings: a killed run resumes where it stopped, and the Baseline and
Normal conditions, which do not depend on the perturbation, are computed once for every perturbation
setting tried.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragsense._async import run_sync
from ragsense.correctness._cache import FeatureCache, cache_key
from ragsense.correctness._perturb import PerturbationSettings, PerturbedContext, Perturber
from ragsense.correctness._prompt import (
    ANSWER_STOPS,
    INSTRUCTION,
    PLACES,
    PROMPT_VERSION,
    PromptParts,
    build_prompt,
)
from ragsense.correctness._scoring import RawCondition, answer_all, row_failure
from ragsense.errors import InputError
from ragsense.models import (
    GenerationConfig,
    LanguageModel,
    SupportsGeneration,
    SupportsLogprobs,
    SupportsScoredGeneration,
    require,
)

FEATURES_VERSION = "correctness-features-v1"
CONDITIONS = ("baseline", "normal", "perturbed")
AGGREGATES = ("mean", "max")
DEFAULT_MAX_NEW_TOKENS = 12


def feature_names(aggregates: Sequence[str] = ("mean",)) -> list[str]:
    """The feature vector's layout: condition, place, aggregate (the Baseline has no context).

    >>> names = feature_names()
    >>> len(names), names[0], names[-1]
    (14, 'baseline.prompt.mean', 'perturbed.output.mean')
    """
    for agg in aggregates:
        if agg not in AGGREGATES:
            raise ValueError(f"unknown aggregate {agg!r}; choose from {', '.join(AGGREGATES)}")
    return [
        f"{condition}.{place}.{agg}"
        for condition in CONDITIONS
        for place in PLACES
        if not (condition == "baseline" and place == "context")
        for agg in aggregates
    ]


@dataclass(frozen=True)
class CorrectnessSample:
    """One question with its context; ``references`` (ground-truth answers) are needed to train."""

    question: str
    context: str
    references: tuple[str, ...] = ()
    id: str = ""


@dataclass(frozen=True)
class ConditionResult:
    """The BM's greedy answer in one condition and its NLL summary per place
    (``{place: {"mean": ..., "max": ..., "n": tokens}}``)."""

    answer: str
    finish_reason: str
    nll: dict[str, dict[str, float]]

    def to_record(self) -> dict[str, Any]:
        return {"answer": self.answer, "finish_reason": self.finish_reason, "nll": self.nll}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ConditionResult:
        return cls(answer=record["answer"], finish_reason=record["finish_reason"], nll=record["nll"])


@dataclass(frozen=True)
class SampleFeatures:
    """Everything measured for one sample. ``answer`` is the Normal-condition answer: the one whose
    correctness is estimated. ``context_truncated``: the context was cut to fit the BM's window."""

    id: str
    baseline: ConditionResult
    normal: ConditionResult
    perturbed: ConditionResult
    perturbation: PerturbedContext
    context_truncated: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def answer(self) -> str:
        return self.normal.answer

    def vector(self, aggregates: Sequence[str] = ("mean",)) -> list[float]:
        """The features in :func:`feature_names` order."""
        values = []
        for name in feature_names(aggregates):
            condition, place, agg = name.split(".")
            values.append(float(getattr(self, condition).nll[place][agg]))
        return values

    def to_record(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "answer": self.answer,
            "context_truncated": self.context_truncated,
            **{c: getattr(self, c).to_record() for c in CONDITIONS},
            "perturbation": self.perturbation.to_record(),
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> SampleFeatures:
        return cls(
            id=str(record["id"]),
            baseline=ConditionResult.from_record(record["baseline"]),
            normal=ConditionResult.from_record(record["normal"]),
            perturbed=ConditionResult.from_record(record["perturbed"]),
            perturbation=PerturbedContext.from_record(record["perturbation"]),
            context_truncated=bool(record.get("context_truncated", False)),
        )


def _summary(nlls: Sequence[float]) -> dict[str, float]:
    return {"mean": round(sum(nlls) / len(nlls), 6), "max": round(max(nlls), 6), "n": len(nlls)}


def _model_id(model: LanguageModel) -> dict[str, str]:
    return {"name": model.info.name, "fingerprint": model.info.fingerprint}


@dataclass(frozen=True)
class _Plan:
    """A checked sample, ready for the base model: its Baseline, Normal and Perturbed prompts."""

    sample: CorrectnessSample
    prompts: tuple[PromptParts, ...]
    perturbation: PerturbedContext
    truncated: bool


def _summarize(parts: PromptParts, raw: RawCondition) -> ConditionResult:
    """The NLL summary per place of one prompt's answer; a token belongs to the place that holds its
    last character. Raises :class:`InputError` when a place has no token to score."""
    by_place: dict[str, list[float]] = {place: [] for place in PLACES}
    spans = {"instruction": parts.instruction, "context": parts.context, "question": parts.question}
    for (start, end), lp in zip(raw.prompt.offsets, raw.prompt.logprobs, strict=True):
        last = raw.offset + end - 1
        if end <= start or last < parts.instruction[0]:
            continue
        by_place["prompt"].append(-lp)
        for place, span in spans.items():
            if span is not None and span[0] <= last < span[1]:
                by_place[place].append(-lp)
    by_place["output"] = [-lp for lp in raw.output_logprobs]
    nll = {place: _summary(values) for place, values in by_place.items() if values}
    missing = [p for p in PLACES if p not in nll and not (p == "context" and parts.context is None)]
    if missing:
        raise InputError(f"no token to score at place {missing[0]!r}", field="question")
    return ConditionResult(answer=raw.text.strip(), finish_reason=raw.finish_reason, nll=nll)


class FeatureExtractor:
    """Computes :class:`SampleFeatures` with a base model (BM) and a perturbation model (PM).

    The BM needs generation and log-probabilities (a local model, or a server that returns prompt
    log-probs); a local transformers BM computes both in one pass. The PM (default: the BM) must be a
    local transformers model. ``cache_dir`` (default: none) makes extraction resumable.
    """

    def __init__(
        self,
        base_model: LanguageModel,
        perturbation_model: LanguageModel | None = None,
        *,
        settings: PerturbationSettings | None = None,
        cache_dir: str | Path | None = None,
        max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
        instruction: str = INSTRUCTION,
    ) -> None:
        self.base_model = base_model
        require(base_model, SupportsGeneration, "correctness estimation")  # type: ignore[type-abstract]
        if not isinstance(base_model, SupportsScoredGeneration):
            require(base_model, SupportsLogprobs, "correctness estimation")  # type: ignore[type-abstract]
        self.perturbation_model = perturbation_model or base_model
        self.settings = settings or PerturbationSettings()
        self.perturber = Perturber(self.perturbation_model, self.settings)
        self.max_new_tokens = max_new_tokens
        self.instruction = instruction
        self.cache = FeatureCache(cache_dir) if cache_dir is not None else None
        self._generation = GenerationConfig(max_new_tokens=max_new_tokens, stop=ANSWER_STOPS)

    @property
    def config(self) -> dict[str, Any]:
        """What the features depend on; a saved estimator records it and checks it on load."""
        return {
            "features_version": FEATURES_VERSION,
            "prompt_version": PROMPT_VERSION,
            "instruction_sha256": hashlib.sha256(self.instruction.encode()).hexdigest(),
            "base_model": _model_id(self.base_model),
            "perturbation_model": _model_id(self.perturbation_model),
            "perturbation": self.settings.to_dict(),
            "max_new_tokens": self.max_new_tokens,
        }

    # -- extraction -----------------------------------------------------------------------------------
    async def aextract_many(self, samples: Iterable[CorrectnessSample]) -> list[SampleFeatures | Exception]:
        """Features per sample, in order. A sample whose fields are at fault gives an
        :class:`InputError` naming its row (its position) and field; a sample whose model call failed
        gives the error the backend raised (:class:`~ragsense.errors.ModelCallError` for a server).
        The others go on.

        Every condition prompt of every sample that the cache does not hold goes to the base model in
        one batched call (identical prompts once), so a server backend answers them concurrently.
        """
        results = await self._extract(list(samples))
        return [
            InputError(r.reason, row=row, field=r.field) if isinstance(r, InputError) else r
            for row, r in enumerate(results)
        ]

    async def aextract(self, sample: CorrectnessSample) -> SampleFeatures:
        """Features of one sample; raises :class:`InputError` naming the field at fault, or the
        model's error."""
        [result] = await self._extract([sample])
        if isinstance(result, Exception):
            raise result
        return result

    def extract_many(self, samples: Iterable[CorrectnessSample]) -> list[SampleFeatures | Exception]:
        """:meth:`aextract_many` for synchronous callers (run it once, at the outermost level)."""
        return run_sync(self.aextract_many(samples))

    def extract(self, sample: CorrectnessSample) -> SampleFeatures:
        """:meth:`aextract` for synchronous callers."""
        return run_sync(self.aextract(sample))

    async def _extract(self, samples: list[CorrectnessSample]) -> list[SampleFeatures | Exception]:
        plans: list[_Plan | Exception] = []
        for sample in samples:
            try:
                plans.append(self._plan(sample))
            except Exception as exc:
                plans.append(row_failure(exc))
        done: dict[str, ConditionResult | Exception] = {}  # by prompt text
        groups: list[list[str]] = []
        for plan in plans:
            if isinstance(plan, _Plan):
                groups.append([p.text for p in plan.prompts if not self._known(p.text, done)])
        raw = await answer_all(self.base_model, groups, self._generation)
        results: list[SampleFeatures | Exception] = []
        for plan in plans:
            if isinstance(plan, Exception):
                results.append(plan)
                continue
            conditions = [self._condition(parts, raw, done) for parts in plan.prompts]
            failed = [c for c in conditions if isinstance(c, Exception)]
            if failed:
                results.append(failed[0])
                continue
            baseline, normal, perturbed = (c for c in conditions if isinstance(c, ConditionResult))
            results.append(
                SampleFeatures(
                    id=plan.sample.id,
                    baseline=baseline,
                    normal=normal,
                    perturbed=perturbed,
                    perturbation=plan.perturbation,
                    context_truncated=plan.truncated,
                )
            )
        return results

    def _plan(self, sample: CorrectnessSample) -> _Plan:
        """Check the fields, fit the context to the window, perturb it and render the three prompts."""
        if not sample.question.strip():
            raise InputError("the question is empty", field="question")
        if not sample.context.strip():
            raise InputError("the context is empty: the Normal condition needs one", field="contexts")
        context, truncated = self._fit_context(sample.question, sample.context)
        perturbed = self._perturb(context)
        prompts = tuple(
            build_prompt(sample.question, c, instruction=self.instruction)
            for c in (None, context, perturbed.text)
        )
        return _Plan(sample, prompts, perturbed, truncated)

    def _fit_context(self, question: str, context: str) -> tuple[str, bool]:
        """Truncation policy: cut the context's end until prompt + answer fit the BM's window."""
        budget = self.base_model.info.context_window - self.max_new_tokens - 8
        truncated = False
        while True:
            excess = (
                self.base_model.count_tokens(
                    build_prompt(question, context, instruction=self.instruction).text
                )
                - budget
            )
            if excess <= 0:
                return context, truncated
            share = excess / max(1, self.base_model.count_tokens(context))
            keep = min(len(context) - 1, int(len(context) * (1 - 1.1 * share)))
            if keep <= 0 or share >= 1:
                raise InputError(
                    "the question and instruction alone do not fit the base model's window", field="question"
                )
            context, truncated = context[:keep], True

    def _perturb(self, context: str) -> PerturbedContext:
        key = cache_key(
            FEATURES_VERSION, "perturb", _model_id(self.perturbation_model), self.settings.key, context
        )
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            return PerturbedContext.from_record(hit)
        result = self.perturber.perturb(context)
        if self.cache is not None:
            self.cache.put(key, result.to_record())
        return result

    def _key(self, prompt: str) -> str:
        return cache_key(
            FEATURES_VERSION, "condition", _model_id(self.base_model), prompt, self.max_new_tokens
        )

    def _known(self, prompt: str, done: dict[str, ConditionResult | Exception]) -> bool:
        """Whether the prompt's condition is known: computed in this run, or in the disk cache (then
        loaded into ``done``)."""
        if prompt not in done and self.cache is not None and (hit := self.cache.get(self._key(prompt))):
            done[prompt] = ConditionResult.from_record(hit)
        return prompt in done

    def _condition(
        self,
        parts: PromptParts,
        raw: dict[str, RawCondition | Exception],
        done: dict[str, ConditionResult | Exception],
    ) -> ConditionResult | Exception:
        """The condition of one prompt: from ``done`` (this run, the cache) or from its raw answer."""
        if parts.text in done:
            return done[parts.text]
        answer = raw[parts.text]
        if isinstance(answer, Exception):
            done[parts.text] = answer
            return answer
        try:
            result = _summarize(parts, answer)
        except InputError as exc:
            done[parts.text] = exc
            return exc
        if self.cache is not None:
            self.cache.put(self._key(parts.text), result.to_record())
        done[parts.text] = result
        return result

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
