"""The base model's greedy answers and log-probabilities for many prompts in one batched call.

A backend with scored generation (a local transformers model) answers and scores every prompt in one
``generate_scored`` call; any other backend gets one batched ``generate`` and then one batched
``score`` of prompt + answer. A server backend sends the requests of one call concurrently.

A failure of the batched call is retried group by group (a group: the prompts of one sample), so a
failing request marks only the samples that need it. The failure is returned as the error the backend
raised (:class:`~ragsense.errors.ModelCallError` for a server), never as an
:class:`~ragsense.errors.InputError`: the row's fields are not at fault when the model fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from ragsense.correctness._prompt import ANSWER_STOPS
from ragsense.errors import CapabilityError, ModelCallError, ParameterError, RagsenseError
from ragsense.models import (
    ContinuationScore,
    GenerationConfig,
    LanguageModel,
    ScoreRequest,
    SupportsGeneration,
    SupportsLogprobs,
    SupportsScoredGeneration,
    require,
)

# Errors that mark a row (its model call or its text) rather than stop the whole run.
ROW_FAILURES = (RagsenseError, ValueError, RuntimeError, OSError, TimeoutError)


@dataclass(frozen=True)
class RawCondition:
    """One prompt's answer and log-probs. ``prompt`` holds the prompt's scored tokens, with offsets
    relative to ``prompt_text[offset:]``; ``output_logprobs`` covers the answer and its ending."""

    text: str
    finish_reason: str
    prompt: ContinuationScore
    offset: int
    output_logprobs: tuple[float, ...]


def row_failure(exc: BaseException) -> Exception:
    """``exc`` when it marks one row; raised again when it is a setting every row would fail on
    (:class:`ParameterError`, :class:`CapabilityError`) or a programming error.

    >>> row_failure(ModelCallError("HTTP 500")).args
    ('HTTP 500',)
    >>> row_failure(ParameterError("greedy only", parameter="temperature"))
    Traceback (most recent call last):
    ...
    ragsense.errors.ParameterError: temperature: greedy only
    """
    if isinstance(exc, (ParameterError, CapabilityError)) or not isinstance(exc, ROW_FAILURES):
        raise exc
    return exc


def model_failure(exc: BaseException) -> Exception:
    """A failed model call as a row's error: :func:`row_failure`, except that an exception of another
    type (an HTTP client's own error a backend let through) becomes a :class:`ModelCallError`.

    >>> model_failure(ConnectionError("refused")).args
    ('refused',)
    >>> model_failure(LookupError("no such key"))
    ModelCallError('the model call failed: LookupError: no such key')
    """
    if isinstance(exc, Exception) and not isinstance(exc, ROW_FAILURES):
        wrapped = ModelCallError(f"the model call failed: {type(exc).__name__}: {exc}")
        wrapped.__cause__ = exc
        return wrapped
    return row_failure(exc)


async def answer_and_score(
    model: LanguageModel, prompts: Sequence[str], config: GenerationConfig
) -> list[RawCondition]:
    """Greedy answer and log-probs of every prompt, in order, in one batched call (two for backends
    without scored generation). Raises what the backend raises."""
    if not prompts:
        return []
    if isinstance(model, SupportsScoredGeneration):
        scored = await model.generate_scored(list(prompts), config)
        _check_count(model, len(scored), len(prompts))
        return [RawCondition(g.text, g.finish_reason, g.prompt, 0, tuple(g.output_logprobs)) for g in scored]
    # Fallback: generate, then score prompt + output jointly. The stop string that ended the answer is
    # scored with it, as the fused path does. The prompt's first word is the request's prompt, so that
    # every token the fused path scores is scored here too.
    generator = require(model, SupportsGeneration, "correctness estimation")  # type: ignore[type-abstract]
    scorer = require(model, SupportsLogprobs, "correctness estimation")  # type: ignore[type-abstract]
    generations = await generator.generate(list(prompts), config)
    _check_count(model, len(generations), len(prompts))
    heads = [prompt.split(" ", 1)[0] for prompt in prompts]
    requests = [
        ScoreRequest(
            head, prompt[len(head) :] + gen.text + (ANSWER_STOPS[0] if gen.finish_reason == "stop" else "")
        )
        for prompt, head, gen in zip(prompts, heads, generations, strict=True)
    ]
    scores = await scorer.score(requests)
    _check_count(model, len(scores), len(prompts))
    out = []
    for prompt, head, gen, score in zip(prompts, heads, generations, scores, strict=True):
        boundary = len(prompt) - len(head)
        n_prompt = sum(1 for s, _ in score.offsets if s < boundary)
        prompt_part = ContinuationScore(
            tokens=score.tokens[:n_prompt],
            offsets=score.offsets[:n_prompt],
            logprobs=score.logprobs[:n_prompt],
            prompt_tokens=score.prompt_tokens,
        )
        out.append(
            RawCondition(gen.text, gen.finish_reason, prompt_part, len(head), score.logprobs[n_prompt:])
        )
    return out


def _check_count(model: LanguageModel, got: int, wanted: int) -> None:
    if got != wanted:
        raise ModelCallError(f"{model.info.name!r} returned {got} results for {wanted} prompts")


async def answer_all(
    model: LanguageModel, groups: Sequence[Sequence[str]], config: GenerationConfig
) -> dict[str, RawCondition | Exception]:
    """Every distinct prompt of ``groups`` (a group: one sample's prompts) in one batched call; when it
    fails, each group again in a call of its own (concurrently), so that a failure marks only the
    groups whose call failed. A prompt several groups share is computed once, in the first group."""
    unique = list(dict.fromkeys(p for group in groups for p in group))
    if not unique:
        return {}
    try:
        return dict(zip(unique, await answer_and_score(model, unique, config), strict=True))
    except Exception as exc:
        failure = model_failure(exc)
        parts = _own_prompts(groups)
        if len(parts) <= 1:
            return dict.fromkeys(unique, failure)
    outcomes = await asyncio.gather(
        *(answer_and_score(model, part, config) for part in parts), return_exceptions=True
    )
    out: dict[str, RawCondition | Exception] = {}
    for part, outcome in zip(parts, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            out.update(dict.fromkeys(part, model_failure(outcome)))
        else:
            out.update(zip(part, outcome, strict=True))
    return out


def _own_prompts(groups: Sequence[Sequence[str]]) -> list[list[str]]:
    """Each group's prompts that no earlier group holds; empty groups are dropped.

    >>> _own_prompts([["a", "b"], ["b", "c"], ["a"]])
    [['a', 'b'], ['c']]
    """
    seen: set[str] = set()
    parts = []
    for group in groups:
        own = [p for p in dict.fromkeys(group) if p not in seen]
        seen.update(own)
        if own:
            parts.append(own)
    return parts
