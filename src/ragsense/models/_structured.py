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

Supported schemas (anything else raises :class:`UnsupportedSchemaError` naming the construct): a
top-level ``{"type": "object", "properties": {...}, "required": [...], "additionalProperties": ...}``
whose properties are each one of

* ``{"type": "string"}``, optionally with ``maxLength``;
* ``{"enum": [...]}`` or ``{"const": ...}`` of JSON scalars (optionally with a matching ``type``);
* ``{"type": "boolean"}``;
* ``{"type": "integer"}`` with optional ``minimum``, ``maximum``, ``exclusiveMinimum``,
  ``exclusiveMaximum``;
* ``{"type": "array", "items": <a string or enum schema>}`` with optional ``minItems``, ``maxItems``
  (at most 16 items when ``maxItems`` is not given);
* a nullable string, enum or boolean: ``{"anyOf": [<schema>, {"type": "null"}]}`` (or ``oneOf``, either
  order) or ``{"type": ["string", "null"]}``.

``title``, ``description``, ``default``, ``examples`` and ``$comment`` are allowed anywhere and ignored.
Every property is emitted, in the schema's ``properties`` order, as compact JSON
(``{"reason": "...", "label": "relevant"}``).

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
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from ragsense.errors import CapabilityError
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

# Items of an array without maxItems; integer ranges enumerated (scored) rather than generated.
DEFAULT_MAX_ITEMS = 16
MAX_ENUMERATED_INTEGERS = 20
# Tokens generated for a wide integer (its digits, maybe a sign and a space).
_INTEGER_TOKENS = 8
# Restarts of a string generation after an escaped quote (\") cut it; bounds a looping model.
_MAX_RESTARTS = 32
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment"})
_JSON_SCALAR = (str, int, float, bool, type(None))
T = TypeVar("T")


class UnsupportedSchemaError(CapabilityError):
    """The JSON schema uses a construct the local structured decoder does not support."""


# -- parsed schema ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Choice:
    """One of a fixed set of JSON values (enum, const, boolean, small integer range, with null)."""

    values: tuple[Any, ...]


@dataclass(frozen=True)
class _String:
    max_length: int | None = None
    nullable: bool = False


@dataclass(frozen=True)
class _Integer:
    minimum: int | None = None
    maximum: int | None = None


@dataclass(frozen=True)
class _Array:
    items: _Choice | _String
    min_items: int = 0
    max_items: int = DEFAULT_MAX_ITEMS


_Field = _Choice | _String | _Integer | _Array


@dataclass(frozen=True)
class StructuredSchema:
    """A schema the decoder supports: an object's properties, in order."""

    fields: tuple[tuple[str, _Field], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.fields)


def _fail(where: str, what: str) -> UnsupportedSchemaError:
    return UnsupportedSchemaError(
        f"unsupported JSON schema construct at {where}: {what} (structured output supports an object of "
        "string, enum, boolean, integer, array-of-string and nullable-string properties)"
    )


def _extra_keys(node: Mapping[str, Any], allowed: set[str], where: str) -> None:
    for key in node:
        if key not in allowed and key not in _ANNOTATIONS:
            raise _fail(where, f"keyword {key!r}")


def _int_keyword(node: Mapping[str, Any], key: str, where: str) -> int | None:
    value = node.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not float(value).is_integer():
        raise _fail(where, f"{key!r} must be an integer, got {value!r}")
    return int(value)


def _parse_field(node: Any, where: str, *, in_array: bool = False) -> _Field:
    if not isinstance(node, Mapping):
        raise _fail(where, f"a schema must be an object, got {type(node).__name__}")
    for key in ("anyOf", "oneOf"):
        if key in node:
            return _parse_nullable(node, key, where, in_array)
    if "enum" in node or "const" in node:  # before a type list: null is allowed only when listed
        return _parse_choice(node, where)
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = set(kind)
        if len(kind) != 2 or "null" not in kinds or not all(isinstance(k, str) for k in kind):
            raise _fail(where, f"'type': {kind!r} (only a type plus 'null' is supported)")
        inner = _parse_field({**node, "type": next(k for k in kind if k != "null")}, where)
        return _with_null(inner, where, in_array)
    if kind == "string":
        _extra_keys(node, {"type", "maxLength"}, where)
        max_length = _int_keyword(node, "maxLength", where)
        if max_length is not None and max_length < 0:
            raise _fail(where, "a negative 'maxLength'")
        return _String(max_length)
    if kind == "boolean":
        _extra_keys(node, {"type"}, where)
        return _Choice((True, False))
    if kind == "integer":
        keys = {"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
        _extra_keys(node, keys, where)
        low, high = _int_keyword(node, "minimum", where), _int_keyword(node, "maximum", where)
        ex_low, ex_high = (_int_keyword(node, k, where) for k in ("exclusiveMinimum", "exclusiveMaximum"))
        if ex_low is not None:
            low = ex_low + 1 if low is None else max(low, ex_low + 1)
        if ex_high is not None:
            high = ex_high - 1 if high is None else min(high, ex_high - 1)
        if low is not None and high is not None:
            if low > high:
                raise _fail(where, f"an empty integer range [{low}, {high}]")
            if high - low < MAX_ENUMERATED_INTEGERS:
                return _Choice(tuple(range(low, high + 1)))
        return _Integer(low, high)
    if kind == "array":
        if in_array:
            raise _fail(where, "nested arrays")
        _extra_keys(node, {"type", "items", "minItems", "maxItems"}, where)
        items = _parse_field(node.get("items", {"type": "string"}), f"{where}.items", in_array=True)
        if not isinstance(items, _Choice | _String) or not _all_strings(items):
            raise _fail(f"{where}.items", "array items other than strings")
        low = _int_keyword(node, "minItems", where) or 0
        high = _int_keyword(node, "maxItems", where)
        high = DEFAULT_MAX_ITEMS if high is None else high
        if low < 0 or high < low:
            raise _fail(where, f"minItems {low} / maxItems {high}")
        return _Array(items, low, high)
    if kind == "object":
        raise _fail(where, "a nested object")
    if kind is None:
        _extra_keys(node, set(), where)  # names $ref, allOf, ... when one is there
        raise _fail(where, "a schema without 'type'")
    raise _fail(where, f"'type': {kind!r}")


def _all_strings(field: _Choice | _String) -> bool:
    if isinstance(field, _String):
        return not field.nullable
    return all(isinstance(v, str) for v in field.values)


def _parse_choice(node: Mapping[str, Any], where: str) -> _Choice:
    _extra_keys(node, {"type", "enum", "const"}, where)
    if "const" in node:
        values: list[Any] = [node["const"]]
        if "enum" in node:
            raise _fail(where, "both 'enum' and 'const'")
    else:
        raw = node["enum"]
        if not isinstance(raw, list) or not raw:
            raise _fail(where, "'enum' must be a non-empty list")
        values = list(raw)
    for v in values:
        if not isinstance(v, _JSON_SCALAR) or (isinstance(v, float) and not math.isfinite(v)):
            raise _fail(where, f"the enum value {v!r} (only strings, numbers, booleans and null)")
    kind = node.get("type")
    if kind is not None:
        kinds = set(kind) if isinstance(kind, list) else {kind}
        for v in values:
            if _json_type(v) not in kinds and not (_json_type(v) == "integer" and "number" in kinds):
                raise _fail(where, f"the enum value {v!r} does not match 'type': {kind!r}")
    unique: dict[str, Any] = {}
    for v in values:
        unique.setdefault(json.dumps(v), v)  # 1 and 1.0 differ in JSON text; both stay
    return _Choice(tuple(unique.values()))


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string"


def _parse_nullable(node: Mapping[str, Any], key: str, where: str, in_array: bool) -> _Field:
    _extra_keys(node, {key}, where)
    options = node[key]
    if not isinstance(options, list) or len(options) != 2:
        raise _fail(where, f"{key!r} other than [<schema>, {{'type': 'null'}}]")
    nulls = [o for o in options if isinstance(o, Mapping) and o.get("type") == "null"]
    if len(nulls) != 1:
        raise _fail(where, f"{key!r} other than [<schema>, {{'type': 'null'}}]")
    _extra_keys(nulls[0], {"type"}, f"{where}.{key}")
    other = next(o for o in options if o is not nulls[0])
    return _with_null(_parse_field(other, f"{where}.{key}"), where, in_array)


def _with_null(inner: _Field, where: str, in_array: bool) -> _Field:
    if in_array:
        raise _fail(where, "nullable array items")
    if isinstance(inner, _String):
        return replace(inner, nullable=True)
    if isinstance(inner, _Choice):
        return inner if None in inner.values else _Choice((*inner.values, None))
    raise _fail(where, "a nullable integer or array (only strings, enums and booleans can be null)")


def parse_schema(schema: str | Mapping[str, Any] | StructuredSchema) -> StructuredSchema:
    """Check that ``schema`` (JSON text or a parsed dict) is in the supported subset; raises
    :class:`UnsupportedSchemaError` naming the first unsupported construct."""
    if isinstance(schema, StructuredSchema):
        return schema
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as exc:
            raise UnsupportedSchemaError(f"the JSON schema is not valid JSON: {exc}") from None
    if not isinstance(schema, Mapping):
        raise _fail("the top level", f"a schema must be an object, got {type(schema).__name__}")
    if schema.get("type") != "object":
        raise _fail("the top level", f"'type': {schema.get('type')!r} (the top level must be an object)")
    _extra_keys(
        schema, {"type", "properties", "required", "additionalProperties", "$schema"}, "the top level"
    )
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise _fail("the top level", "'properties' must be an object")
    required = schema.get("required", [])
    if not isinstance(required, list) or any(r not in properties for r in required):
        raise _fail("the top level", f"'required' names a property not in 'properties': {required!r}")
    if not isinstance(schema.get("additionalProperties", False), bool):
        raise _fail("the top level", "an 'additionalProperties' schema")
    fields = tuple((str(name), _parse_field(node, f"properties.{name}")) for name, node in properties.items())
    return StructuredSchema(fields)


# -- validation --------------------------------------------------------------------------------------
def validate_instance(schema: str | Mapping[str, Any] | StructuredSchema, value: Any) -> None:
    """Raise :class:`ValueError` unless ``value`` (parsed JSON) is valid under ``schema`` with every
    property present, as the decoder writes it. Useful to check a remote server's structured reply."""
    parsed = parse_schema(schema)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    for name, field in parsed.fields:
        if name not in value:
            raise ValueError(f"the property {name!r} is missing")
        _check(field, value[name], name)


def _check(field: _Field, value: Any, where: str) -> None:
    if isinstance(field, _Choice):
        if not any(json.dumps(value) == json.dumps(v) for v in field.values):
            raise ValueError(f"{where}: {value!r} is not one of {list(field.values)!r}")
    elif isinstance(field, _String):
        if value is None and field.nullable:
            return
        if not isinstance(value, str):
            raise ValueError(f"{where}: expected a string, got {value!r}")
        if field.max_length is not None and len(value) > field.max_length:
            raise ValueError(f"{where}: longer than maxLength {field.max_length}")
    elif isinstance(field, _Integer):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where}: expected an integer, got {value!r}")
        if (field.minimum is not None and value < field.minimum) or (
            field.maximum is not None and value > field.maximum
        ):
            raise ValueError(f"{where}: {value} is outside [{field.minimum}, {field.maximum}]")
    else:
        if not isinstance(value, list) or not field.min_items <= len(value) <= field.max_items:
            raise ValueError(f"{where}: expected {field.min_items}-{field.max_items} items, got {value!r}")
        for i, item in enumerate(value):
            _check(field.items, item, f"{where}[{i}]")


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


def strip_added_bos(tokenizer: Any, text: str) -> str:
    """``text`` without a leading BOS token text when ``tokenizer`` adds a BOS itself.

    A chat template's rendering already holds the BOS; scoring and generating functions that add
    special tokens would double it. Removing the text lets them add it back: the token ids are then
    those of the rendering tokenized without special tokens. A tokenizer that adds no BOS (SmolLM2,
    whose BOS text ``<|im_start|>`` opens every chat turn) leaves ``text`` alone.
    """
    bos = getattr(tokenizer, "bos_token", None)
    bos_id = getattr(tokenizer, "bos_token_id", None)
    if not bos or bos_id is None or not text.startswith(bos):
        return text
    try:
        with_special = list(tokenizer("a", add_special_tokens=True)["input_ids"])
        plain = list(tokenizer("a", add_special_tokens=False)["input_ids"])
    except (TypeError, KeyError, AttributeError):
        return text
    adds_bos = len(with_special) > len(plain) and with_special[:1] == [bos_id]
    return text[len(bos) :] if adds_bos else text


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
