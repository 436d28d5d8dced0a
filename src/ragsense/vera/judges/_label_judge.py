"""The label-scoring judge: every allowed label scored as a continuation of the prompt; nothing to parse."""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ragsense.cache import cache_key
from ragsense.errors import CapabilityError, ParameterError
from ragsense.models import (
    ChatMessage,
    ChoiceRequest,
    GenerationConfig,
    LanguageModel,
    ScoreRequest,
    SupportsChoiceScoring,
    SupportsGeneration,
    SupportsLogprobs,
)
from ragsense.vera._prompts import JudgePrompt, SplitInput
from ragsense.vera.judges._cache import VerdictCache
from ragsense.vera.judges._labels import decide_label, label_probabilities, score_choices
from ragsense.vera.judges._verdict import (
    DEFAULT_LABEL_SCORING,
    LABEL_SCORINGS,
    PROMPT_FORMATS,
    LabelScoring,
    PromptFormat,
    SplitResult,
    Verdict,
)

logger = logging.getLogger(__name__)

REASON_CONFIG = GenerationConfig(max_new_tokens=40, stop=("\n",))


class LabelJudge(VerdictCache):
    """Judge by scoring the allowed labels with the model's log-probabilities.

    Each label's token log-probabilities come from one prompt pass (every token-prefix of every label is
    scored on the prompt's KV state). ``label_scoring`` turns them into the label's score: ``sum``,
    ``mean`` (length-normalised) or ``first_token``; the labels' probabilities are the softmax of the
    scores. The decision goes by sides (:func:`decide_label`): the positive labels together against
    the others, so two labels that both mean "grounded" do not split the vote.

    ``calibrate=True`` divides each label's probability by its probability for a content-free item
    (every field "N/A") before normalising, which removes a small model's standing preference for one
    label (contextual calibration, Zhao et al. 2021). ``prompt_format="chat"`` renders the prompt with
    the model's chat template (instruction as the system turn, each worked example as a user turn
    answered by its label) and scores the labels as the assistant's reply; it needs a local model with
    a chat template. ``reasons=True`` also generates a one-line reason after the chosen label (plain
    prompts only; off by default because it costs more than the label itself).

    >>> import asyncio
    >>> from ragsense.models import load_model
    >>> from ragsense.vera import STATEMENT_RELEVANCE, StatementInput
    >>> judge = LabelJudge(load_model("fake"))
    >>> [v] = asyncio.run(judge.judge(STATEMENT_RELEVANCE, [StatementInput(question="Q?", statement="S.")]))
    >>> v.label in STATEMENT_RELEVANCE.labels, 0.0 < v.confidence <= 1.0
    (True, True)
    >>> sorted(v.token_logprobs)
    ['irrelevant', 'relevant']
    """

    def __init__(
        self,
        model: LanguageModel,
        *,
        cache_dir: str | Path | None = None,
        calibrate: bool = False,
        reasons: bool = False,
        label_scoring: LabelScoring | str = DEFAULT_LABEL_SCORING,
        prompt_format: PromptFormat | str = "plain",
    ) -> None:
        super().__init__(cache_dir)
        if not isinstance(model, SupportsChoiceScoring | SupportsLogprobs):
            raise CapabilityError(
                f"a label-scoring judge needs log-probabilities; {model.info.name!r} "
                f"({model.info.backend} backend) gives none: use judge mode 'structured'"
            )
        if label_scoring not in LABEL_SCORINGS:
            raise ParameterError(
                f"must be one of {', '.join(LABEL_SCORINGS)}, got {label_scoring!r}",
                parameter="label_scoring",
            )
        if prompt_format not in PROMPT_FORMATS:
            raise ParameterError(
                f"must be one of {', '.join(PROMPT_FORMATS)}, got {prompt_format!r}",
                parameter="prompt_format",
            )
        if prompt_format == "chat" and _chat_template(model) is None:
            raise CapabilityError(
                f"prompt format 'chat' needs a local model with a chat template; {model.info.name!r} has none"
            )
        if reasons and not isinstance(model, SupportsGeneration):
            raise CapabilityError(f"reasons need a model that generates text; {model.info.name!r} does not")
        if reasons and prompt_format == "chat":
            raise ParameterError("reasons are generated after plain prompts only", parameter="reasons")
        self.model = model
        self.calibrate = calibrate
        self.reasons = reasons
        self.label_scoring: str = label_scoring
        self.prompt_format: str = prompt_format
        self._priors: dict[str, dict[str, list[float]]] = {}
        self._prefixes: dict[str, list[tuple[str, ...]]] = {}

    @property
    def description(self) -> str:
        parts = [f"labels:{self.model.info.name}"]
        if self.label_scoring != "sum":
            parts.append(self.label_scoring)
        if self.prompt_format != "plain":
            parts.append(self.prompt_format)
        if self.calibrate:
            parts.append("calibrated")
        return ":".join(parts)

    @property
    def can_split(self) -> bool:
        return False

    async def split(self, items: Sequence[SplitInput]) -> list[SplitResult]:
        raise CapabilityError("a label-scoring judge cannot split answers; use the rule-based splitter")

    def _key(self, prompt: JudgePrompt[Any], text: str) -> str:
        # shared_fields changes how the prompt is split into passes, hence the last float bits.
        return cache_key(
            "labels-v2",
            self.model.info.fingerprint,
            prompt.fingerprint,
            text,
            self.calibrate,
            self.reasons,
            prompt.shared_fields,
            self.label_scoring,
            self.prompt_format,
        )

    def _choices(self, prompt: JudgePrompt[Any]) -> tuple[str, ...]:
        return prompt.choices if self.prompt_format == "plain" else prompt.labels

    def render(self, prompt: JudgePrompt[Any], item: BaseModel) -> tuple[str, int]:
        """The text the judge continues with a label, and how many of its leading characters items like
        ``item`` share (run once and kept as a cached prefix state)."""
        if self.prompt_format == "plain":
            return prompt.render_plain(item), prompt.shared_length(item)
        template = _chat_template(self.model)
        assert template is not None  # checked in __init__
        text = str(template(prompt.render_chat_labels(item)))
        body = prompt.render_item(item)
        at = text.rfind(body)
        if at < 0:  # the template changed the item's text: share the instruction and examples only
            return text, 0
        shared = "\n".join(body.split("\n")[: prompt.shared_fields]) + "\n" if prompt.shared_fields else ""
        return text, at + len(shared)

    async def _label_prefixes(self, prompt: JudgePrompt[Any]) -> list[tuple[str, ...]]:
        """Per label, the label cut after each of its tokens (the last is the whole label), from how the
        model tokenizes it after the prompt's last characters; one piece when the model cannot say."""
        if prompt.name not in self._prefixes:
            choices = self._choices(prompt)
            out: list[tuple[str, ...]] = [(c,) for c in choices]
            if isinstance(self.model, SupportsLogprobs):
                tail = "Label:" if self.prompt_format == "plain" else "assistant\n"
                scores = await self.model.score([ScoreRequest(tail, c) for c in choices])
                out = []
                for choice, score in zip(choices, scores, strict=True):
                    ends = [end for _, end in score.offsets if 0 < end < len(choice)]
                    out.append((*(choice[:end] for end in sorted(set(ends))), choice))
            self._prefixes[prompt.name] = out
        return self._prefixes[prompt.name]

    async def _token_logprobs(
        self, prompt: JudgePrompt[Any], texts: Sequence[tuple[str, int]]
    ) -> list[dict[str, list[float]] | Exception]:
        """Each label's token log-probabilities after each text, from one pass over the text."""
        prefixes = await self._label_prefixes(prompt)
        flat = list(dict.fromkeys(p for label in prefixes for p in label))
        totals = await self._score_isolated(
            [ChoiceRequest(text, tuple(flat), shared_prefix=shared) for text, shared in texts]
        )
        out: list[dict[str, list[float]] | Exception] = []
        for total in totals:
            if isinstance(total, Exception):
                out.append(total)
                continue
            by_prefix = dict(zip(flat, total, strict=True))
            per_label: dict[str, list[float]] = {}
            for label, pieces in zip(prompt.labels, prefixes, strict=True):
                cumulative = [by_prefix[p] for p in pieces]
                per_label[label] = [cumulative[0]] + [b - a for a, b in itertools.pairwise(cumulative)]
            out.append(per_label)
        return out

    async def prior(self, prompt: JudgePrompt[Any]) -> dict[str, list[float]]:
        """Each label's token log-probabilities for the content-free item (every field "N/A")."""
        if prompt.name not in self._priors:
            fields = {name: "N/A" for name in prompt.input_model.model_fields}
            text = self.render(prompt, prompt.input_model(**fields))
            [result] = await self._token_logprobs(prompt, [text])
            if isinstance(result, Exception):
                raise result
            self._priors[prompt.name] = result
        return self._priors[prompt.name]

    def known_prior(self, prompt: JudgePrompt[Any]) -> dict[str, list[float]] | None:
        """The prior :meth:`prior` has computed for ``prompt``, or None when it has not been asked yet."""
        return self._priors.get(prompt.name)

    async def judge(self, prompt: JudgePrompt[Any], items: Sequence[BaseModel]) -> list[Verdict]:
        rendered = [self.render(prompt, item) for item in items]
        keys = [self._key(prompt, text) for text, _ in rendered]
        verdicts: list[Verdict | None] = []
        for key in keys:
            hit = self._get(key)
            verdicts.append(Verdict(**hit) if hit is not None else None)
        todo = [i for i, v in enumerate(verdicts) if v is None]
        if todo:
            token_logprobs = await self._token_logprobs(prompt, [rendered[i] for i in todo])
            prior = await self.prior(prompt) if self.calibrate else None
            fresh = [self._verdict(prompt, t, prior) for t in token_logprobs]
            if self.reasons:
                fresh = await self._add_reasons(prompt, [items[i] for i in todo], fresh)
            for i, verdict in zip(todo, fresh, strict=True):
                verdicts[i] = verdict
                if verdict.ok:
                    self._put(keys[i], verdict.to_dict())
        return [v for v in verdicts if v is not None]

    async def _score_isolated(self, requests: list[ChoiceRequest]) -> list[tuple[float, ...] | Exception]:
        """Score in one batch; when the batch fails, item by item so one bad item fails alone."""
        try:
            return list(await score_choices(self.model, requests))
        except (ValueError, RuntimeError) as exc:
            if len(requests) == 1:
                return [exc]
        out: list[tuple[float, ...] | Exception] = []
        for request in requests:
            out.extend(await self._score_isolated([request]))
        return out

    def _verdict(
        self,
        prompt: JudgePrompt[Any],
        token_logprobs: dict[str, list[float]] | Exception,
        prior: dict[str, list[float]] | None,
    ) -> Verdict:
        if isinstance(token_logprobs, Exception):
            return Verdict(None, error=f"the judge model failed: {token_logprobs}")
        values = [t for lps in token_logprobs.values() for t in lps]
        if not all(math.isfinite(t) for t in values):
            return Verdict(None, error=f"the judge model returned a non-finite log-probability: {values}")
        probs = label_probabilities(prompt.labels, token_logprobs, self.label_scoring, prior)
        label = decide_label(prompt.labels, prompt.positive_labels, probs)
        return Verdict(label, confidence=probs[label], probabilities=probs, token_logprobs=token_logprobs)

    async def _add_reasons(
        self, prompt: JudgePrompt[Any], items: Sequence[BaseModel], verdicts: list[Verdict]
    ) -> list[Verdict]:
        generator = self.model
        assert isinstance(generator, SupportsGeneration)  # checked in __init__
        wanted = [i for i, v in enumerate(verdicts) if v.ok]
        prompts = [prompt.reason_prompt(items[i], str(verdicts[i].label)) for i in wanted]
        try:
            generations = await generator.generate(prompts, REASON_CONFIG)
        except (ValueError, RuntimeError) as exc:
            logger.warning("reasons could not be generated: %s", exc)
            return verdicts
        out = list(verdicts)
        for i, generation in zip(wanted, generations, strict=True):
            reason = generation.text.strip()[:300] or None
            out[i] = Verdict(**{**verdicts[i].to_dict(), "reason": reason})
        return out


def _chat_template(model: LanguageModel) -> Callable[[list[ChatMessage]], str] | None:
    """Render a conversation with a local model's chat template (to be continued by the assistant),
    or None when the model has no tokenizer with a chat template (servers, base models, the fake)."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return None

    def render(messages: list[ChatMessage]) -> str:
        turns = [{"role": m.role, "content": m.content} for m in messages]
        return str(tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True))

    return render
