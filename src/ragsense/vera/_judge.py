"""Judges that never fail to parse.

Two ways to get a label from a model, chosen by what the model can do:

- :class:`LabelJudge` scores every allowed label as a continuation of the prompt and takes the most
  likely; the label's probability among the allowed labels is the confidence. There is no free text
  to parse, so it cannot fail to parse. Works with any model that gives log-probabilities: the
  bundled models, ``ragsense serve``, vLLM.
- :class:`ChatJudge` asks a chat model for JSON under a JSON schema (the server's structured output),
  validates it, asks once more on a bad reply, and otherwise returns a failed :class:`Verdict` that
  carries the raw text. A timeout or a server error is a failed verdict too, never an exception that
  stops a batch, and never a NaN.

Every successful verdict is cached on disk under the model's fingerprint, the prompt's fingerprint and
the rendered item, so re-running an evaluation costs nothing and gives identical results. Failed
verdicts are not cached: a later run tries again.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypeAlias

from pydantic import BaseModel, ValidationError

from ragsense.cache import JsonCache, cache_key
from ragsense.errors import CapabilityError, ParameterError
from ragsense.models import (
    ChatMessage,
    ChoiceRequest,
    GenerationConfig,
    LanguageModel,
    ScoreRequest,
    SupportsChat,
    SupportsChoiceScoring,
    SupportsGeneration,
    SupportsLogprobs,
    chat_available,
)
from ragsense.vera._prompts import (
    SPLIT_STATEMENTS,
    JudgePrompt,
    SplitInput,
    conversation_text,
)

logger = logging.getLogger(__name__)

JudgeMode = Literal["auto", "labels", "structured"]
JUDGE_MODES: tuple[str, ...] = ("auto", "labels", "structured")
LabelScoring = Literal["sum", "mean", "first_token"]
LABEL_SCORINGS: tuple[str, ...] = ("sum", "mean", "first_token")
"""How a label-scoring judge turns a label's token log-probabilities into its score: ``sum`` (the label's
log-probability; a label of more tokens is penalised), ``mean`` (length-normalised) or ``first_token``
(only the first token, where the labels part). Chosen on WikiEval questions 0-23 (docs/vera.md)."""
DEFAULT_LABEL_SCORING: LabelScoring = "sum"
PromptFormat = Literal["plain", "chat"]
PROMPT_FORMATS: tuple[str, ...] = ("plain", "chat")
CACHE_FILE = "judge.sqlite3"
REASON_CONFIG = GenerationConfig(max_new_tokens=40, stop=("\n",))
# Room for a reason of up to 300 characters, the label and a correction.
CHAT_CONFIG_TOKENS = 256


@dataclass(frozen=True)
class Verdict:
    """One judgment. ``label`` is None exactly when ``error`` says why the item could not be judged.

    ``confidence`` is the label's probability among the allowed labels (label-scoring judges only);
    ``token_logprobs`` holds each label's token log-probabilities (label-scoring judges), so every
    scoring rule can be recomputed from a verdict; ``raw`` keeps a chat judge's reply text when it did
    not validate.
    """

    label: str | None
    confidence: float | None = None
    probabilities: dict[str, float] | None = None
    reason: str | None = None
    correction: str | None = None
    error: str | None = None
    raw: str | None = None
    token_logprobs: dict[str, list[float]] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


SplitResult: TypeAlias = "list[str] | Verdict"


class Judge(Protocol):
    """What VERA's steps need from a judge."""

    @property
    def description(self) -> str:
        """e.g. ``"labels:smollm2-135m"``: the mode and the model, for reports."""
        ...

    @property
    def can_split(self) -> bool:
        """Whether :meth:`split` can split answers into statements (structured-output chat judges)."""
        ...

    async def judge(self, prompt: JudgePrompt[Any], items: Sequence[BaseModel]) -> list[Verdict]:
        """One verdict per item, in order; never raises for a single item's failure."""
        ...

    async def split(self, items: Sequence[SplitInput]) -> list[SplitResult]:
        """Atomic statements of each answer, or a failed verdict saying why."""
        ...


def _softmax(totals: Sequence[float]) -> list[float]:
    top = max(totals)
    weights = [math.exp(t - top) for t in totals]
    norm = math.fsum(weights)
    return [w / norm for w in weights]


def label_scores(token_logprobs: Sequence[Sequence[float]], scoring: LabelScoring | str) -> list[float]:
    """Each label's score under ``scoring`` from its token log-probabilities.

    >>> label_scores([[-1.0], [-0.5, -2.5]], "sum"), label_scores([[-1.0], [-0.5, -2.5]], "mean")
    ([-1.0, -3.0], [-1.0, -1.5])
    >>> label_scores([[-1.0], [-0.5, -2.5]], "first_token")
    [-1.0, -0.5]
    """
    if scoring == "sum":
        return [math.fsum(t) for t in token_logprobs]
    if scoring == "mean":
        return [math.fsum(t) / len(t) for t in token_logprobs]
    if scoring == "first_token":
        return [t[0] for t in token_logprobs]
    raise ParameterError(
        f"must be one of {', '.join(LABEL_SCORINGS)}, got {scoring!r}", parameter="label_scoring"
    )


def label_probabilities(
    labels: Sequence[str],
    token_logprobs: dict[str, list[float]],
    scoring: LabelScoring | str,
    prior: dict[str, list[float]] | None = None,
) -> dict[str, float]:
    """The labels' probabilities among themselves: softmax of their scores under ``scoring``; with a
    ``prior`` (the token log-probabilities for a content-free item) each score first loses the log of
    its prior probability under the same rule (contextual calibration).

    >>> probs = label_probabilities(["a", "b"], {"a": [-1.0], "b": [-1.0]}, "sum", {"a": [-0.1], "b": [-3.0]})
    >>> probs["b"] > probs["a"]
    True
    """
    logits = label_scores([token_logprobs[label] for label in labels], scoring)
    if prior is not None:
        base = [math.log(p) for p in _softmax(label_scores([prior[label] for label in labels], scoring))]
        logits = [t - b for t, b in zip(logits, base, strict=True)]
    return dict(zip(labels, _softmax(logits), strict=True))


def decide_label(labels: Sequence[str], positive: Sequence[str], probabilities: dict[str, float]) -> str:
    """The label a judge decides on: the pass/fail side first, by its summed probability (the positive
    labels win at 0.5 or more), then the most likely label on that side. With one label per side this is
    the argmax; with two positive labels ("stated", "inferable") their probabilities are not split
    against one negative label.

    >>> decide_label(["stated", "inferable", "unsupported"], ["stated", "inferable"],
    ...              {"stated": 0.3, "inferable": 0.3, "unsupported": 0.4})
    'stated'
    """
    grounded = math.fsum(probabilities[label] for label in positive)
    side = [label for label in labels if (label in positive) == (grounded >= 0.5)]
    if not side:
        side = list(labels)
    return max(side, key=lambda label: (probabilities[label], -labels.index(label)))


async def score_choices(model: LanguageModel, requests: Sequence[ChoiceRequest]) -> list[tuple[float, ...]]:
    """Total log-probability of each choice of each request, through the fastest path the model has."""
    if isinstance(model, SupportsChoiceScoring):
        return await model.score_choices(requests)
    if not isinstance(model, SupportsLogprobs):
        raise CapabilityError(f"{model.info.name} gives no log-probabilities; use a structured-output judge")
    flat = [ScoreRequest(r.prompt, c) for r in requests for c in r.choices]
    scores = iter(await model.score(flat))
    return [tuple(next(scores).total for _ in r.choices) for r in requests]


class _Cached:
    """The disk cache shared by both judges (optional)."""

    def __init__(self, cache_dir: str | Path | None) -> None:
        self.cache = JsonCache(cache_dir, CACHE_FILE) if cache_dir is not None else None
        self.hits = 0
        self.misses = 0

    def _get(self, key: str) -> Any:
        if self.cache is None:
            return None
        value = self.cache.get(key)
        if value is not None:
            self.hits += 1
        else:
            self.misses += 1
        return value

    def _put(self, key: str, value: Any) -> None:
        if self.cache is not None:
            self.cache.put(key, value)

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()


class LabelJudge(_Cached):
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
    >>> from ragsense.vera._prompts import STATEMENT_RELEVANCE, StatementInput
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


class ChatJudge(_Cached):
    """Judge through a chat model's structured output: JSON under the prompt's schema, validated.

    A reply that does not validate is answered once with the validation error and a request for JSON
    only; a second bad reply, a timeout or a server error gives a failed verdict with the raw text.
    """

    def __init__(
        self, model: LanguageModel, *, cache_dir: str | Path | None = None, attempts: int = 2
    ) -> None:
        super().__init__(cache_dir)
        if not chat_available(model):
            raise CapabilityError(
                f"a structured-output judge needs a chat model; {model.info.name!r} has no chat format"
            )
        assert isinstance(model, SupportsChat)
        self.model: SupportsChat = model
        self.attempts = attempts

    @property
    def description(self) -> str:
        return f"structured:{self.model.info.name}"

    @property
    def can_split(self) -> bool:
        return True

    async def _ask(
        self, messages: list[ChatMessage], schema: dict[str, Any]
    ) -> tuple[str | None, str | None]:
        """``(text, None)`` or ``(None, error)``: one chat call, exceptions turned into an error."""
        config = GenerationConfig(max_new_tokens=CHAT_CONFIG_TOKENS, json_schema=json.dumps(schema))
        try:
            [generation] = await self.model.chat([messages], config)
        except (ValueError, RuntimeError, TypeError) as exc:
            return None, f"{type(exc).__name__}: {exc}"
        return generation.text, None

    async def _validated(
        self, messages: list[ChatMessage], schema: dict[str, Any], parse: Any
    ) -> tuple[Any, Verdict | None]:
        """Ask, validate, ask again once on a bad reply. ``(parsed, None)`` or ``(None, failed verdict)``."""
        raw: str | None = None
        error = "no attempt made"
        conversation = list(messages)
        for attempt in range(self.attempts):
            text, call_error = await self._ask(conversation, schema)
            if text is None:
                error = f"the judge call failed: {call_error}"
                continue
            raw = text
            try:
                return parse(text), None
            except (ValidationError, ValueError) as exc:
                error = f"the judge's reply did not validate: {_short(exc)}"
                if attempt + 1 < self.attempts:
                    conversation = [
                        *messages,
                        ChatMessage("assistant", text),
                        ChatMessage(
                            "user", f"That reply is not valid ({_short(exc)}). Reply again with JSON only."
                        ),
                    ]
        tries = f"after {self.attempts} attempts" if self.attempts > 1 else "after 1 attempt"
        return None, Verdict(None, error=f"{error} ({tries})", raw=raw)

    async def judge(self, prompt: JudgePrompt[Any], items: Sequence[BaseModel]) -> list[Verdict]:
        schema = prompt.json_schema()
        conversations = [prompt.render_chat(item) for item in items]
        keys = [
            cache_key("structured", self.model.info.fingerprint, prompt.fingerprint, conversation_text(c))
            for c in conversations
        ]

        async def one(key: str, conversation: list[ChatMessage]) -> Verdict:
            hit = self._get(key)
            if hit is not None:
                return Verdict(**hit)
            judgment, failed = await self._validated(conversation, schema, prompt.parse)
            if failed is not None:
                return failed
            verdict = Verdict(
                judgment.label,
                reason=judgment.reason.strip() or None,
                correction=judgment.correction if prompt.correctable else None,
            )
            self._put(key, verdict.to_dict())
            return verdict

        # The client bounds concurrency itself; local chat models run one at a time anyway.
        return list(await asyncio.gather(*(one(k, c) for k, c in zip(keys, conversations, strict=True))))

    async def split(self, items: Sequence[SplitInput]) -> list[SplitResult]:
        prompt = SPLIT_STATEMENTS
        schema = prompt.json_schema()

        async def one(item: SplitInput) -> SplitResult:
            conversation = prompt.render_chat(item)
            key = cache_key(
                "split", self.model.info.fingerprint, prompt.fingerprint, conversation_text(conversation)
            )
            hit = self._get(key)
            if hit is not None:
                return list(hit)
            statements, failed = await self._validated(conversation, schema, prompt.parse)
            if failed is not None:
                return failed
            self._put(key, statements)
            return list(statements)

        return list(await asyncio.gather(*(one(item) for item in items)))


def _short(exc: Exception) -> str:
    text = str(exc).replace("\n", " ")
    return text if len(text) <= 200 else text[:197] + "..."


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


def make_judge(
    model: LanguageModel,
    mode: JudgeMode | str = "auto",
    *,
    cache_dir: str | Path | None = None,
    calibrate: bool = False,
    reasons: bool = False,
    label_scoring: LabelScoring | str = DEFAULT_LABEL_SCORING,
    prompt_format: PromptFormat | str = "plain",
) -> LabelJudge | ChatJudge:
    """The judge for ``model``: ``"labels"`` (log-probabilities), ``"structured"`` (chat + JSON schema),
    or ``"auto"``: labels when the model gives log-probabilities, else structured.

    >>> from ragsense.models import load_model
    >>> make_judge(load_model("fake")).description
    'labels:fake'
    """
    if mode not in JUDGE_MODES:
        raise ParameterError(f"must be one of {', '.join(JUDGE_MODES)}, got {mode!r}", parameter="judge_mode")
    if mode == "labels" or (mode == "auto" and isinstance(model, SupportsChoiceScoring | SupportsLogprobs)):
        return LabelJudge(
            model,
            cache_dir=cache_dir,
            calibrate=calibrate,
            reasons=reasons,
            label_scoring=label_scoring,
            prompt_format=prompt_format,
        )
    return ChatJudge(model, cache_dir=cache_dir)
