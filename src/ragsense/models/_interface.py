"""The narrow model interface every metric goes through.

A backend implements :class:`LanguageModel` (identity and limits) plus any of the capability
protocols below. Metrics ask for the capability they need with :func:`require`, so a chat-only API
that cannot return log-probabilities fails early with a clear message instead of deep inside a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from ragsense.errors import CapabilityError


@dataclass(frozen=True)
class ScoreRequest:
    """Score ``continuation`` given ``prompt``.

    Tokenization contract, identical for every backend (local or server):

    1. The text ``prompt + continuation`` is tokenized **once, jointly**, exactly as the model's
       tokenizer does for plain text (including a BOS token when the tokenizer adds one). Nothing is
       inserted between the two strings: put the separating space or newline in one of them
       (ragsense puts it at the start of the continuation, e.g. ``" Paris"``).
    2. The continuation's tokens are the tokens whose character span ends after ``len(prompt)``.
       A token that starts inside the prompt and ends inside the continuation (possible only when
       the join falls inside a word) is counted as a continuation token and reported through
       :attr:`ContinuationScore.straddles_boundary`.
    3. Each continuation token at position ``i`` gets ``log p(token_i | tokens_<i)`` from the
       model's output at position ``i - 1`` (natural log, float32 log-softmax over the full
       vocabulary). A continuation whose first token is at position 0 (empty prompt, no BOS) cannot
       be scored and raises :class:`ValueError`.

    Joint tokenization is what OpenAI-compatible servers do with ``echo=True``, which is why server
    and local scores agree.

    ``splits`` are optional character positions in ``prompt`` where other prompts may share its
    leading part (ConSens declares the end of each context document, so leave-one-out prompts share
    the documents before the one they drop). The transformers backend runs the prompt pass in
    segments cut at the tokens that start exactly at these positions (a position inside a token is
    dropped), always, so a prompt whose first segments another prompt already ran starts from that
    state with bit-identical results. Other backends ignore them.
    """

    prompt: str
    continuation: str
    splits: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if any(not 0 <= s <= len(self.prompt) for s in self.splits):
            raise ValueError(f"splits must lie in the prompt (0 to {len(self.prompt)}): {self.splits}")


@dataclass(frozen=True)
class ContinuationScore:
    """Per-token log-probabilities of a continuation.

    ``offsets`` are character spans relative to the continuation string (a straddling first token
    is clipped to start at 0). ``prompt_tokens`` counts the tokens before the first continuation token.
    """

    tokens: tuple[str, ...]
    offsets: tuple[tuple[int, int], ...]
    logprobs: tuple[float, ...]
    prompt_tokens: int
    straddles_boundary: bool = False

    @property
    def total(self) -> float:
        """Sum of the continuation's token log-probabilities."""
        return float(sum(self.logprobs))

    @property
    def n_tokens(self) -> int:
        return len(self.logprobs)


@dataclass(frozen=True)
class GenerationConfig:
    """Decoding settings. The default is greedy decoding, which is deterministic.

    ``json_schema`` (the JSON text of a JSON schema) asks a chat backend for structured output: the
    reply is a JSON document valid under the schema. OpenAI-compatible servers get it as
    ``response_format``; a backend that cannot honour it raises
    :class:`~ragsense.errors.CapabilityError` rather than returning free text.
    """

    max_new_tokens: int = 128
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    seed: int = 0
    json_schema: str | None = None


@dataclass(frozen=True)
class Generation:
    text: str
    finish_reason: str = "stop"  # "stop" | "length"
    n_tokens: int = 0


@dataclass(frozen=True)
class ModelInfo:
    """What a metric needs to know about a model to plan its work."""

    name: str
    backend: str
    context_window: int
    # A stable identity used in cache keys: changes when weights or tokenizer change.
    fingerprint: str
    extra: dict[str, str] = field(default_factory=dict)


@runtime_checkable
class LanguageModel(Protocol):
    """Identity, limits and tokenization of a model. Every backend implements this."""

    @property
    def info(self) -> ModelInfo: ...

    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text`` tokenized alone (no special tokens)."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class SupportsLogprobs(LanguageModel, Protocol):
    """Capability: log-probabilities of given continuations (ConSens, correctness features)."""

    async def score(self, requests: Sequence[ScoreRequest]) -> list[ContinuationScore]:
        """Score many requests; the backend batches them. Results come back in request order."""
        ...


@dataclass(frozen=True)
class ScoreGroup:
    """Requests that extend one prompt, to be scored together (the binding check's variants of one
    answer, each after its own part of the answer).

    Every request's ``prompt`` starts with ``prompt``, whose ``splits`` are as in
    :class:`ScoreRequest` (the transformers backend finds that prompt's state in its prompt cache by
    its tokens and cuts). Each request is scored by the :class:`ScoreRequest` contract (joint
    tokenization). A backend may run ``prompt`` once, the parts of the requests' prompts after it once
    where one extends another, and every continuation as one batch: a request's log-probs may then
    differ from a lone :meth:`SupportsLogprobs.score` of it by floating-point summation order (the
    batch's shapes; about 1e-5 in a log-probability on a CPU), but they depend on its group only,
    never on other groups, calls or the prompt cache: the same group gives the same bits.

    >>> g = ScoreGroup("Q: ", (ScoreRequest("Q: It is", " red."), ScoreRequest("Q: It is", " blue.")))
    >>> ScoreGroup("A: ", g.requests)
    Traceback (most recent call last):
    ...
    ValueError: request 0's prompt does not start with the group's prompt
    """

    prompt: str
    requests: tuple[ScoreRequest, ...]
    splits: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if any(not 0 <= s <= len(self.prompt) for s in self.splits):
            raise ValueError(f"splits must lie in the prompt (0 to {len(self.prompt)}): {self.splits}")
        for i, req in enumerate(self.requests):
            if not req.prompt.startswith(self.prompt):
                raise ValueError(f"request {i}'s prompt does not start with the group's prompt")


@runtime_checkable
class SupportsGroupScoring(SupportsLogprobs, Protocol):
    """Capability: score groups of requests (:class:`ScoreGroup`), each as one batch after its prompt.

    Scoring ``k`` requests that extend one prompt then costs one body call for the parts of their
    prompts after the shared one and one for their continuations, instead of ``k``: on a CPU each call
    reads every weight of the model, so few calls of many tokens beat many calls of few (docs/speed.md,
    "Binding check on a CPU"). Backends without it are served by :meth:`SupportsLogprobs.score` on
    the groups' requests.
    """

    async def score_groups(self, groups: Sequence[ScoreGroup]) -> list[list[ContinuationScore]]: ...


@dataclass(frozen=True)
class ChoiceRequest:
    """Score each of ``choices`` as a continuation of ``prompt`` (a judge picking a label).

    Each choice is scored exactly as ``ScoreRequest(prompt, choice)`` would be (joint tokenization);
    the result is the sum of its token log-probabilities. ``shared_prefix`` is the number of leading
    characters of ``prompt`` that many requests share (instructions and few-shot examples): a backend
    may keep their KV state between calls. It must not change any result, bit for bit.
    """

    prompt: str
    choices: tuple[str, ...]
    shared_prefix: int = 0


@runtime_checkable
class SupportsChoiceScoring(LanguageModel, Protocol):
    """Capability: total log-probability of each of a few continuations of one prompt.

    One pass over the prompt serves every choice, which is what makes label-scoring judges cheap.
    Backends without it are served by :meth:`SupportsLogprobs.score` on one request per choice.
    """

    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[tuple[float, ...]]: ...


@runtime_checkable
class SupportsGeneration(LanguageModel, Protocol):
    """Capability: text generation (answers, judge reasons)."""

    async def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[Generation]: ...


@dataclass(frozen=True)
class ScoredGeneration:
    """A greedy generation together with the log-probabilities of its prompt and its output.

    ``prompt`` scores every prompt token the model can score: all of them when the tokenizer adds a
    BOS token, all but the first otherwise; its offsets are relative to the prompt string.
    ``output_logprobs`` covers every generated token, the one that completed a stop string included
    (so an answer that is cut to the empty string still has the log-probability of ending).
    ``text`` is cut at the stop string, as :meth:`SupportsGeneration.generate` cuts it.
    """

    text: str
    finish_reason: str
    prompt: ContinuationScore
    output_tokens: tuple[str, ...]
    output_logprobs: tuple[float, ...]


@runtime_checkable
class SupportsScoredGeneration(LanguageModel, Protocol):
    """Capability: greedy generation that also returns prompt and output log-probabilities.

    One forward pass over the prompt serves both, which halves the cost of the correctness features
    compared to :meth:`SupportsGeneration.generate` followed by :meth:`SupportsLogprobs.score`.
    """

    async def generate_scored(
        self, prompts: Sequence[str], config: GenerationConfig
    ) -> list[ScoredGeneration]: ...


@dataclass(frozen=True)
class PromptLogprobs:
    """The log-probability of every token of a text, as an OpenAI ``echo`` reply lists them.

    The text is tokenized alone, special tokens (BOS) added, as :class:`ScoreRequest` tokenizes
    ``prompt + continuation``. Leading special tokens without text (the BOS) are not listed; the first
    listed token then gets a real log-probability, else (no BOS) ``None``: it has no left context.
    ``offsets`` are character spans in the text; ``top`` (when asked for) maps each position's most
    likely token strings to their log-probabilities (``None`` where the log-probability is ``None``).
    Every value comes from the same kernel as :meth:`SupportsLogprobs.score`, so a token scored both
    ways gets the same float.
    """

    tokens: tuple[str, ...]
    logprobs: tuple[float | None, ...]
    offsets: tuple[tuple[int, int], ...]
    top: tuple[dict[str, float] | None, ...] | None = None


@runtime_checkable
class SupportsPromptLogprobs(LanguageModel, Protocol):
    """Capability: the log-probability of every token of a text from one pass (an ``echo`` endpoint).

    :meth:`SupportsLogprobs.score` cannot score a text's first token; this can when the tokenizer adds
    a BOS. ``top`` (0-20) asks for each position's most likely tokens too. A text over the context
    window, or one without any token, raises :class:`ValueError`.
    """

    async def prompt_logprobs(self, texts: Sequence[str], top: int = 0) -> list[PromptLogprobs]: ...


@runtime_checkable
class SupportsTokenAccess(LanguageModel, Protocol):
    """Capability: token-level access to a local model (the correctness perturber).

    ``tokenizer`` is the model's Hugging Face tokenizer. :meth:`forward_hidden` runs the body on token
    ids (a ``[batch, n]`` tensor) after an optional KV cache and returns ``(states, cache)``;
    :meth:`lm_head` turns states into float32 logits; :meth:`token_logprobs` gives ``log p(targets[i]
    | states[i])`` row by row and :meth:`next_token_logprobs` the full log-softmax row of one state
    (``[1, hidden]``). All four go through the backend's one log-prob kernel; call them under
    ``torch.inference_mode()``.
    """

    @property
    def tokenizer(self) -> Any: ...

    def forward_hidden(self, ids: Any, cache: Any = None) -> tuple[Any, Any]: ...

    def lm_head(self, states: Any) -> Any: ...

    def token_logprobs(self, states: Any, targets: Any) -> Any: ...

    def next_token_logprobs(self, state: Any) -> Any: ...


@dataclass(frozen=True)
class ChatMessage:
    """One turn of a conversation."""

    role: Literal["system", "user", "assistant"]
    content: str


@runtime_checkable
class SupportsChat(LanguageModel, Protocol):
    """Capability: generation from a conversation, rendered by the model's own chat format.

    Instruction-tuned models answer far better in the format they were tuned on. ``chat_available``
    is False when the backend could chat in principle but this model has no chat format (a base
    model without a chat template); callers then fall back to a plain prompt.
    """

    @property
    def chat_available(self) -> bool: ...

    async def chat(
        self, conversations: Sequence[Sequence[ChatMessage]], config: GenerationConfig
    ) -> list[Generation]: ...


@runtime_checkable
class SupportsChatTemplate(LanguageModel, Protocol):
    """Capability: the model's chat format as text, for callers that decode on their own (the
    schema-guided decoder of ``ragsense serve`` for a backend whose ``chat`` cannot take a schema)."""

    def render_chat(self, conversation: Sequence[ChatMessage]) -> str: ...


@runtime_checkable
class SupportsStructuredChat(SupportsChat, Protocol):
    """Capability: ``chat`` honours ``GenerationConfig.json_schema`` (schema-guided decoding inside
    the backend). A backend declares it with the class attribute ``structured_output = True``."""

    structured_output: bool


def structured_chat(model: LanguageModel) -> bool:
    """Whether ``model``'s ``chat`` decodes to a JSON schema itself.

    >>> from ragsense.models import load_model
    >>> structured_chat(load_model("fake"))
    True
    """
    return isinstance(model, SupportsStructuredChat) and model.structured_output is True


def chat_available(model: LanguageModel) -> bool:
    """Whether ``model`` can generate from a conversation in its own chat format.

    >>> from ragsense.models import load_model
    >>> chat_available(load_model("fake"))
    True
    """
    return isinstance(model, SupportsChat) and bool(model.chat_available)


Capability = TypeVar("Capability", bound=LanguageModel)


def require(model: LanguageModel, capability: type[Capability], purpose: str) -> Capability:
    """Return ``model`` typed as ``capability`` or raise :class:`CapabilityError` naming what is missing.

    >>> from ragsense.models import load_model, SupportsLogprobs
    >>> require(load_model("fake"), SupportsLogprobs, "ConSens").info.backend
    'fake'
    """
    if not isinstance(model, capability):
        raise CapabilityError(
            f"{purpose} needs a model with the {capability.__name__} capability; "
            f"{model.info.name!r} ({model.info.backend} backend) does not provide it"
        )
    return model
