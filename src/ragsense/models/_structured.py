"""Schema-guided JSON decoding for local models: structured output without an external library.

A model that can score continuations and generate text can be made to answer in a JSON document valid
under a schema: the decoder writes the JSON structure itself and asks the model only for the parts it
must choose or write. Every decision is greedy, so the output is deterministic.

* an enumerated value (``enum``, ``const``, ``boolean``, an ``integer`` range of at most 20 values, a
  ``null`` alternative) is the choice with the highest total log-probability of its JSON text (plus
  the ``,`` or ``}`` that follows it) as a continuation of the text so far;
* a free ``string`` is generated greedily after its opening quote and ends at an unescaped closing
  quote, a newline, ``config.max_new_tokens`` tokens or ``maxLength`` characters; the model's escapes
  are decoded and the value is written back with proper JSON escaping;
* a wide ``integer`` is generated greedily (its digits) and clamped to ``minimum``/``maximum``;
* an ``array`` of strings chooses after ``[`` and after each item between going on and ``]``.

The supported schema subset is described and checked in :mod:`ragsense.models._json_schema`
(:func:`parse_schema`; anything else raises :class:`UnsupportedSchemaError` naming the construct).

The decoder is model-agnostic: :func:`decode_structured` (async) and :func:`decode_structured_sync`
take two callables, ``score(prompt, choices) -> [total log-prob per choice]`` and
``generate(prompt, config) -> Generation``, which must tokenize ``prompt`` the way the model saw it.
:func:`generate_structured` wires a :class:`SupportsLogprobs` + :class:`SupportsGeneration` model;
both add the tokenizer's special tokens, so a chat-template rendering that already starts with the
BOS text gets it removed first (:func:`strip_added_bos`), which gives the same token ids as tokenizing
the rendering without special tokens.

>>> parse_schema('{"type": "object", "properties": {"ok": {"type": "boolean"}}}').names
('ok',)
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ragsense.errors import CapabilityError
from ragsense.models._chat import strip_added_bos
from ragsense.models._interface import (
    ChoiceRequest,
    Generation,
    GenerationConfig,
    LanguageModel,
    ScoreRequest,
    SupportsChoiceScoring,
    SupportsGeneration,
    SupportsLogprobs,
)
from ragsense.models._json_schema import (
    DEFAULT_MAX_ITEMS,
    MAX_ENUMERATED_INTEGERS,
    StructuredSchema,
    UnsupportedSchemaError,
    _Array,
    _Choice,
    _Field,
    _Integer,
    _String,
    parse_schema,
    validate_instance,
)

__all__ = [
    "DEFAULT_MAX_ITEMS",
    "MAX_ENUMERATED_INTEGERS",
    "StructuredSchema",
    "UnsupportedSchemaError",
    "decode_structured",
    "decode_structured_sync",
    "generate_structured",
    "generate_structured_sync",
    "parse_schema",
    "strip_added_bos",
    "validate_instance",
]

# Tokens generated for a wide integer (its digits, maybe a sign and a space).
_INTEGER_TOKENS = 8
# Restarts of a string generation after an escaped quote (\") cut it; bounds a looping model.
_MAX_RESTARTS = 32
T = TypeVar("T")


# -- decoding (a generator of model calls, driven by a sync or an async loop) --------------------------
@dataclass(frozen=True)
class _ScoreCall:
    prompt: str
    choices: tuple[str, ...]


@dataclass(frozen=True)
class _GenerateCall:
    prompt: str
    config: GenerationConfig


_Call = _ScoreCall | _GenerateCall
_Reply = list[float] | Generation
_Steps = Generator[_Call, _Reply, T]


class _Decoder:
    def __init__(self, config: GenerationConfig) -> None:
        self.config = config
        self.n_tokens = 0

    def choose(self, prompt: str, choices: Sequence[str]) -> _Steps[int]:
        """Index of the choice with the highest total log-probability (the first one on ties)."""
        if len(choices) == 1:
            return 0
        reply = yield _ScoreCall(prompt, tuple(choices))
        if not isinstance(reply, list) or len(reply) != len(choices):
            raise RuntimeError(f"the scorer returned {reply!r} for {len(choices)} choices")
        totals = [float(v) if not math.isnan(v) else -math.inf for v in reply]
        return max(range(len(totals)), key=lambda i: (totals[i], -i))

    def generate(self, prompt: str, max_new_tokens: int, stop: tuple[str, ...]) -> _Steps[Generation]:
        # Greedy whatever the request's temperature: structured output is deterministic.
        config = GenerationConfig(max_new_tokens=max_new_tokens, temperature=0.0, stop=stop, seed=0)
        reply = yield _GenerateCall(prompt, config)
        if not isinstance(reply, Generation):
            raise RuntimeError(f"the generator returned {reply!r}, not a Generation")
        self.n_tokens += reply.n_tokens
        return reply

    def field(self, field: _Field, prefix: str, after: str) -> _Steps[str]:
        """The JSON text of one value (with its leading space) continuing ``prefix``; ``after`` is the
        character that follows the value (``,`` or ``}``): scoring it tells ``1`` from ``10``."""
        if isinstance(field, _Choice):
            texts = [" " + json.dumps(v, ensure_ascii=False) for v in field.values]
            best = yield from self.choose(prefix, [t + after for t in texts])
            return texts[best]
        if isinstance(field, _String):
            if field.nullable:
                best = yield from self.choose(prefix, [" null", ' "'])
                if best == 0:
                    return " null"
            value = yield from self.string(prefix + ' "', field.max_length)
            return " " + value
        if isinstance(field, _Integer):
            return " " + (yield from self.integer(prefix, field))
        return " " + (yield from self.array(prefix + " ", field))

    def string(self, prefix: str, max_length: int | None) -> _Steps[str]:
        """A free string: ``prefix`` ends with its opening quote; returns the quoted JSON string."""
        budget = self.config.max_new_tokens
        if max_length is not None:  # a token gives at least one character: no need for more
            budget = min(budget, max_length + 8)
        raw = ""
        for _ in range(_MAX_RESTARTS):
            if budget <= 0 or (max_length is not None and len(_unescape(raw)) >= max_length):
                break
            gen = yield from self.generate(prefix + raw, budget, ('"', "\n"))
            budget -= max(gen.n_tokens, 1)
            piece, closed = _string_content(gen.text)
            raw += piece
            if closed or gen.finish_reason != "stop":
                break
            if _odd_backslashes(raw):  # the stop cut an escaped quote: \" belongs to the string
                raw += '"'
                continue
            break  # ended at the closing quote, a newline or the end of text
        value = _unescape(raw)
        if max_length is not None and len(value) > max_length:
            value = value[:max_length]
        return json.dumps(value, ensure_ascii=False)

    def integer(self, prefix: str, field: _Integer) -> _Steps[str]:
        budget = min(self.config.max_new_tokens, _INTEGER_TOKENS)
        gen = yield from self.generate(prefix, budget, (",", "}"))
        match = re.match(r'\s*"?(-?\d+)', gen.text)
        value = int(match.group(1)) if match else 0
        if field.minimum is not None:
            value = max(value, field.minimum)
        if field.maximum is not None:
            value = min(value, field.maximum)
        return str(value)

    def array(self, prefix: str, field: _Array) -> _Steps[str]:
        text = "["
        items = 0
        while items < field.max_items:
            go_on = '"' if items == 0 else ","
            if items >= field.min_items:
                best = yield from self.choose(prefix + text, [go_on, "]"])
                if best == 1:
                    break
            if items:
                text += ", "
            if isinstance(field.items, _Choice):
                values = [json.dumps(v, ensure_ascii=False) for v in field.items.values]
                best = yield from self.choose(prefix + text, values)
                text += values[best]
            else:
                text += '"'
                text += (yield from self.string(prefix + text, field.items.max_length))[1:]
            items += 1
        return text + "]"


def _decode(prompt: str, schema: StructuredSchema, config: GenerationConfig) -> _Steps[Generation]:
    decoder = _Decoder(config)
    out = "{"
    for i, (name, field) in enumerate(schema.fields):
        if i:
            out += ", "
        out += json.dumps(name, ensure_ascii=False) + ":"
        after = "," if i < len(schema.fields) - 1 else "}"
        out += yield from decoder.field(field, prompt + out, after)
    out += "}"
    return Generation(text=out, finish_reason="stop", n_tokens=decoder.n_tokens)


def _string_content(text: str) -> tuple[str, bool]:
    """``text`` up to its first unescaped quote or newline, and whether one was found (a generator
    that ignores stop strings is handled too)."""
    backslashes = 0
    for i, ch in enumerate(text):
        if ch == "\\":
            backslashes += 1
            continue
        if ch == "\n" or ch == "\r" or (ch == '"' and backslashes % 2 == 0):
            return text[:i], True
        backslashes = 0
    return text, False


def _odd_backslashes(text: str) -> bool:
    return (len(text) - len(text.rstrip("\\"))) % 2 == 1


_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")


def _unescape(raw: str) -> str:
    """The string a model meant by the JSON string content ``raw``, read leniently: valid escapes are
    decoded, an invalid one (``C:\\path``) keeps its backslash, a trailing lone backslash is dropped,
    lone surrogates become U+FFFD."""
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = raw[i + 1 : i + 2]
        if nxt in _ESCAPES and nxt:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt == "u" and _HEX4.fullmatch(raw[i + 2 : i + 6]):
            code = int(raw[i + 2 : i + 6], 16)
            i += 6
            if 0xD800 <= code < 0xDC00 and raw[i : i + 2] == "\\u" and _HEX4.fullmatch(raw[i + 2 : i + 6]):
                low = int(raw[i + 2 : i + 6], 16)
                if 0xDC00 <= low < 0xE000:
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
            out.append("\ufffd" if 0xD800 <= code < 0xE000 else chr(code))
        elif not nxt:
            i += 1
        else:
            out.append("\\")
            i += 1
    return "".join(out)


# -- drivers -----------------------------------------------------------------------------------------
ScoreFn = Callable[[str, Sequence[str]], list[float]]
GenerateFn = Callable[[str, GenerationConfig], Generation]
AsyncScoreFn = Callable[[str, Sequence[str]], Awaitable[list[float]]]
AsyncGenerateFn = Callable[[str, GenerationConfig], Awaitable[Generation]]


def decode_structured_sync(
    prompt_text: str,
    schema: str | Mapping[str, Any] | StructuredSchema,
    config: GenerationConfig,
    *,
    score: ScoreFn,
    generate: GenerateFn,
) -> Generation:
    """A JSON document valid under ``schema`` continuing ``prompt_text``, greedily.

    ``score(prompt, choices)`` returns each choice's total log-probability as a continuation of
    ``prompt``; ``generate(prompt, config)`` continues ``prompt`` (honouring ``config.stop``). Both must
    tokenize ``prompt`` as the model should see it. ``config.max_new_tokens`` bounds each free string.
    ``n_tokens`` of the result counts generated tokens only (not the scored choices).
    """
    steps = _decode(prompt_text, parse_schema(schema), config)
    try:
        call = next(steps)
        while True:
            if isinstance(call, _ScoreCall):
                call = steps.send(list(score(call.prompt, call.choices)))
            else:
                call = steps.send(generate(call.prompt, call.config))
    except StopIteration as done:
        result: Generation = done.value
        return result


async def decode_structured(
    prompt_text: str,
    schema: str | Mapping[str, Any] | StructuredSchema,
    config: GenerationConfig,
    *,
    score: AsyncScoreFn,
    generate: AsyncGenerateFn,
) -> Generation:
    """:func:`decode_structured_sync` with async ``score`` and ``generate``."""
    steps = _decode(prompt_text, parse_schema(schema), config)
    try:
        call = next(steps)
        while True:
            if isinstance(call, _ScoreCall):
                call = steps.send(list(await score(call.prompt, call.choices)))
            else:
                call = steps.send(await generate(call.prompt, call.config))
    except StopIteration as done:
        result: Generation = done.value
        return result


class _LocalSyncModel(Protocol):
    """A TransformersModel-like backend: synchronous scoring and generation."""

    def score_sync(self, requests: Sequence[ScoreRequest]) -> list[Any]: ...

    def generate_sync(self, prompts: Sequence[str], config: GenerationConfig) -> list[Generation]: ...


def generate_structured_sync(
    model: _LocalSyncModel, prompt_text: str, schema: str | Mapping[str, Any], config: GenerationConfig
) -> Generation:
    """Structured output from a local model with ``score_sync`` (or ``score_choices_sync``) and
    ``generate_sync`` (:class:`~ragsense.models._transformers.TransformersModel`). ``prompt_text`` may
    be a chat-template rendering: its BOS text is removed when the tokenizer adds one
    (:func:`strip_added_bos`)."""
    prompt = strip_added_bos(getattr(model, "tokenizer", None), prompt_text)
    score_choices = getattr(model, "score_choices_sync", None)

    def score(p: str, choices: Sequence[str]) -> list[float]:
        if callable(score_choices):  # one pass over the shared prompt serves every choice
            [totals] = score_choices([ChoiceRequest(p, tuple(choices), len(prompt))])
            return [float(t) for t in totals]
        return [s.total for s in model.score_sync([ScoreRequest(p, c) for c in choices])]

    def generate(p: str, cfg: GenerationConfig) -> Generation:
        [generation] = model.generate_sync([p], cfg)
        return generation

    return decode_structured_sync(prompt, schema, config, score=score, generate=generate)


async def generate_structured(
    model: LanguageModel, prompt_text: str, schema: str | Mapping[str, Any], config: GenerationConfig
) -> Generation:
    """Structured output from any model with :class:`SupportsLogprobs` (or
    :class:`SupportsChoiceScoring`) and :class:`SupportsGeneration`; raises :class:`CapabilityError`
    otherwise, and :class:`UnsupportedSchemaError` for a schema outside the supported subset.

    ``prompt_text`` is the already-rendered prompt (a chat-template rendering ending with the assistant
    opener, or a plain prompt); the model's ``score`` and ``generate`` add special tokens, so a leading
    BOS text is removed when the tokenizer adds one (:func:`strip_added_bos`).
    """
    parsed = parse_schema(schema)
    if not isinstance(model, SupportsGeneration) or not isinstance(
        model, SupportsLogprobs | SupportsChoiceScoring
    ):
        raise CapabilityError(
            f"structured output needs a model that scores continuations and generates text; "
            f"{model.info.name!r} ({model.info.backend} backend) does not"
        )
    generator = model
    prompt = strip_added_bos(getattr(model, "tokenizer", None), prompt_text)

    async def score(p: str, choices: Sequence[str]) -> list[float]:
        if isinstance(model, SupportsChoiceScoring):
            # Every prompt the decoder scores extends ``prompt``: a backend may keep its KV state.
            [totals] = await model.score_choices([ChoiceRequest(p, tuple(choices), len(prompt))])
            return list(totals)
        assert isinstance(model, SupportsLogprobs)
        return [s.total for s in await model.score([ScoreRequest(p, c) for c in choices])]

    async def generate(p: str, cfg: GenerationConfig) -> Generation:
        [generation] = await generator.generate([p], cfg)
        return generation

    return await decode_structured(prompt, parsed, config, score=score, generate=generate)
