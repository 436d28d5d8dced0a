"""A deterministic fake model for fast unit tests of logic. Never the only test of a feature.

It honours the same contract as the real backends (tests/models/test_model_contract.py checks it):

* **Tokens** are whitespace-separated words, a leading space belonging to the token as in BPE
  (``"Paris is"`` -> ``"Paris"``, ``" is"``); trailing whitespace is a token of its own. The fake
  tokenizer adds a (hidden, zero-width) BOS token, so a first token can be scored and
  ``ScoreRequest("", text)`` is valid; :meth:`FakeModel.count_tokens` leaves the BOS out.
* **Scoring** follows the :class:`~ragsense.models.ScoreRequest` contract: ``prompt + continuation``
  is tokenized jointly and the continuation's tokens are those whose span ends after the prompt (a
  join inside a word gives one straddling token). A token's log-probability is high when its
  lowercase word (punctuation stripped) occurs in the prompt and low otherwise, so context-dependent
  metrics behave in the expected direction without a real model.
* **Generation** writes ``fake answer about <the prompt's last non-empty line, 40 characters>`` one
  word (token) at a time, stops after the token that completes a stop string (the text is cut before
  it) or after ``max_new_tokens`` tokens (``finish_reason="length"``). Temperature is ignored: the
  fake is always deterministic.
* **Scored generation** returns the text :meth:`FakeModel.generate` gives; its prompt log-probs are
  ``score([ScoreRequest("", prompt)])`` (every prompt token, thanks to the BOS) and its output
  log-probs ``score([ScoreRequest(prompt, generated)])``, the generated text before the stop cut.
* **Structured output** (``GenerationConfig.json_schema``, in ``generate``, ``chat`` and
  ``generate_scored``): a compact JSON document of deterministic values valid under the schema:
  the first ``enum`` value, ``const``, ``""`` (or ``"x" * minLength``), ``false``, ``0`` (or the
  nearest bound), ``null``, ``minItems`` copies of the item value, every property of an object.
  A schema construct it cannot satisfy (``pattern``, ``format``, ``$ref``, ``allOf``, ...) raises
  :class:`~ragsense.models._json_schema.UnsupportedSchemaError`, a :class:`CapabilityError`.

>>> import asyncio
>>> from ragsense.models import GenerationConfig, ScoreRequest
>>> fake = FakeModel()
>>> [s] = asyncio.run(fake.score([ScoreRequest("Paris is big.", " Paris")]))
>>> s.tokens, s.offsets, s.prompt_tokens
((' Paris',), ((0, 6),), 4)
>>> [g] = asyncio.run(fake.generate(["Q: capital?"], GenerationConfig(max_new_tokens=2)))
>>> g.text, g.finish_reason, g.n_tokens
('fake answer', 'length', 2)
>>> schema = '{"type": "object", "properties": {"label": {"enum": ["yes", "no"]}, "n": {"type": "integer"}}}'
>>> asyncio.run(fake.generate(["Q"], GenerationConfig(json_schema=schema)))[0].text
'{"label": "yes", "n": 0}'
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ragsense.errors import ParameterError
from ragsense.models._interface import (
    ChatMessage,
    ChoiceRequest,
    ContinuationScore,
    Generation,
    GenerationConfig,
    ModelInfo,
    ScoredGeneration,
    ScoreGroup,
    ScoreRequest,
)
from ragsense.models._json_schema import UnsupportedSchemaError

# A word with its leading whitespace, or trailing whitespace on its own.
_TOKEN = re.compile(r"\s*\S+|\s+")
# Tokens before the text: the hidden BOS.
_BOS = 1


def _noise(text: str) -> float:
    return int(hashlib.sha256(text.encode()).hexdigest()[:4], 16) / 65535.0


def _word(token: str) -> str:
    return token.strip().strip(".,;:!?").lower()


class FakeModel:
    """Deterministic stand-in implementing every capability (see the module docstring)."""

    # chat() honours GenerationConfig.json_schema, so `ragsense serve` passes schemas through.
    structured_output = True

    def __init__(self, name: str = "fake", context_window: int = 4096) -> None:
        self._info = ModelInfo(
            name=name, backend="fake", context_window=context_window, fingerprint=f"fake:{name}"
        )
        self.calls: list[int] = []  # batch sizes seen by score(), for tests of batching

    @property
    def info(self) -> ModelInfo:
        return self._info

    def count_tokens(self, text: str) -> int:
        return len(_TOKEN.findall(text))

    async def aclose(self) -> None:
        return None

    # -- SupportsLogprobs ----------------------------------------------------------------------
    async def score(self, requests: Sequence[ScoreRequest]) -> list[ContinuationScore]:
        self.calls.append(len(requests))
        return [self._score_one(r) for r in requests]

    def _score_one(self, req: ScoreRequest) -> ContinuationScore:
        if not req.continuation:
            raise ValueError("empty continuation: nothing to score")
        boundary = len(req.prompt)
        spans = [m.span() for m in _TOKEN.finditer(req.prompt + req.continuation)]
        if _BOS + len(spans) > self._info.context_window:
            raise ValueError(
                f"prompt + continuation is {_BOS + len(spans)} tokens, over the context window of "
                f"{self._info.context_window}; truncate the context first"
            )
        first = next(i for i, (_, end) in enumerate(spans) if end > boundary)
        text = req.prompt + req.continuation
        prompt_words = {_word(w) for w in req.prompt.split()}
        tokens, offsets, logprobs = [], [], []
        for start, end in spans[first:]:
            token = text[start:end]
            word = _word(token)
            tokens.append(token)
            offsets.append((max(start - boundary, 0), end - boundary))
            logprobs.append(-0.2 - _noise(word) if word in prompt_words else -6.0 - 2 * _noise(word))
        return ContinuationScore(
            tuple(tokens),
            tuple(offsets),
            tuple(logprobs),
            prompt_tokens=_BOS + first,
            straddles_boundary=spans[first][0] < boundary,
        )

    # -- SupportsGroupScoring ------------------------------------------------------------------
    async def score_groups(self, groups: Sequence[ScoreGroup]) -> list[list[ContinuationScore]]:
        """Each group through :meth:`score` (the fake's scores do not depend on batches; a subclass
        that changes ``score`` changes its groups the same way)."""
        return [await self.score(list(g.requests)) for g in groups]

    # -- SupportsChoiceScoring -----------------------------------------------------------------
    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[tuple[float, ...]]:
        """Each choice's total is the sum of ``score([ScoreRequest(prompt, choice)])`` log-probs."""
        out = []
        for req in requests:
            if not req.choices:
                raise ValueError("ChoiceRequest has no choices: give at least one")
            out.append(
                tuple(float(sum(self._score_one(ScoreRequest(req.prompt, c)).logprobs)) for c in req.choices)
            )
        return out

    # -- SupportsGeneration --------------------------------------------------------------------
    async def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[Generation]:
        out = []
        for p in prompts:
            text, _, finish, n_tokens = self._generate_one(p, config)
            out.append(Generation(text, finish, n_tokens))
        return out

    def _generate_one(self, prompt: str, config: GenerationConfig) -> tuple[str, str, str, int]:
        """``(text, raw, finish_reason, n_tokens)``: ``raw`` is every generated token's text, ``text``
        is ``raw`` cut at the first stop string."""
        if config.json_schema is not None:
            document = schema_instance_json(config.json_schema)
            return document, document, "stop", self.count_tokens(document)
        lines = [ln for ln in prompt.strip().splitlines() if ln.strip()]
        words = f"fake answer about {lines[-1][:40] if lines else ''}".split()
        raw, n_tokens, finish = "", 0, "stop"  # running out of words is the fake's end of text
        for i, word in enumerate(words):
            if n_tokens >= config.max_new_tokens:
                finish = "length"
                break
            raw += word if i == 0 else " " + word
            n_tokens += 1
            if any(s in raw for s in config.stop):
                break
        text = raw
        for stop in config.stop:
            cut = text.find(stop)
            if cut >= 0:
                text = text[:cut]
        return text, raw, finish, n_tokens

    # -- SupportsScoredGeneration --------------------------------------------------------------
    async def generate_scored(
        self, prompts: Sequence[str], config: GenerationConfig
    ) -> list[ScoredGeneration]:
        if config.temperature > 0:
            raise ParameterError("scored generation is greedy; use temperature 0", parameter="temperature")
        out = []
        for p in prompts:
            text, raw, finish, _ = self._generate_one(p, config)
            prompt_score = self._score_one(ScoreRequest("", p)) if p else ContinuationScore((), (), (), _BOS)
            output = self._score_one(ScoreRequest(p, raw)) if raw else None
            out.append(
                ScoredGeneration(
                    text=text,
                    finish_reason=finish,
                    prompt=prompt_score,
                    output_tokens=output.tokens if output else (),
                    output_logprobs=output.logprobs if output else (),
                )
            )
        return out

    # -- SupportsChat --------------------------------------------------------------------------
    @property
    def chat_available(self) -> bool:
        return True

    async def chat(
        self, conversations: Sequence[Sequence[ChatMessage]], config: GenerationConfig
    ) -> list[Generation]:
        # A conversation is rendered as its turns one per line, so the fake answers its last line.
        prompts = ["\n".join(f"{m.role}: {m.content}" for m in conv) for conv in conversations]
        return await self.generate(prompts, config)


# -- structured output: a deterministic instance of a JSON schema --------------------------------------
_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "$schema", "$id", "readOnly", "writeOnly"}
)
_KEYWORDS = {
    "object": {"properties", "required", "additionalProperties"},
    "array": {"items", "minItems", "maxItems", "uniqueItems"},
    "string": {"minLength", "maxLength"},
    "integer": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"},
    "boolean": set(),
    "null": set(),
}


def _unsupported(where: str, what: str) -> UnsupportedSchemaError:
    return UnsupportedSchemaError(
        f"the fake model cannot satisfy the JSON schema construct at {where}: {what}"
    )


def schema_instance_json(json_schema: str) -> str:
    """The compact JSON text of :func:`schema_instance` for a schema given as JSON text.

    >>> schema_instance_json('{"type": "object", "properties": {"ok": {"type": "boolean"}}}')
    '{"ok": false}'
    """
    try:
        schema = json.loads(json_schema)
    except json.JSONDecodeError as exc:
        raise UnsupportedSchemaError(f"the JSON schema is not valid JSON: {exc}") from None
    return json.dumps(schema_instance(schema), ensure_ascii=False)


def schema_instance(schema: Any, where: str = "the top level") -> Any:
    """A deterministic value valid under ``schema`` (parsed JSON); raises
    :class:`UnsupportedSchemaError` for a construct it cannot satisfy."""
    if schema is True:
        return None
    if not isinstance(schema, Mapping):
        raise _unsupported(where, f"a schema must be an object, got {schema!r}")
    if "const" in schema:
        _keywords(schema, {"const", "type"}, where)
        return schema["const"]
    if "enum" in schema:
        _keywords(schema, {"enum", "type"}, where)
        values = schema["enum"]
        if not isinstance(values, list) or not values:
            raise _unsupported(where, "'enum' must be a non-empty list")
        return values[0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            _keywords(schema, {key}, where)
            return _alternatives(schema[key], key, f"{where}.{key}")
    kind = schema.get("type")
    if isinstance(kind, list):
        if not kind or not all(isinstance(k, str) for k in kind):
            raise _unsupported(where, f"'type': {kind!r}")
        # The first listed type whose keywords all apply to it (a string keyword on ["string", "null"]).
        kind = next(
            (k for k in kind if set(schema) - _ANNOTATIONS - {"type"} <= _KEYWORDS.get(k, set())), kind[0]
        )
    if kind is None:
        _keywords(schema, set(), where)
        return None  # no constraint: anything is valid
    if kind not in _KEYWORDS:
        raise _unsupported(where, f"'type': {kind!r}")
    _keywords(schema, {"type"} | _KEYWORDS[kind], where)
    if kind == "object":
        return _object(schema, where)
    if kind == "array":
        return _array(schema, where)
    if kind == "string":
        low, high = _bound(schema, "minLength", where) or 0, _bound(schema, "maxLength", where)
        if high is not None and low > high:
            raise _unsupported(where, f"minLength {low} > maxLength {high}")
        return "x" * int(low)
    if kind in ("integer", "number"):
        return _number(schema, kind == "integer", where)
    return False if kind == "boolean" else None


def _keywords(schema: Mapping[str, Any], allowed: set[str], where: str) -> None:
    for key in schema:
        if key not in allowed and key not in _ANNOTATIONS:
            raise _unsupported(where, f"the keyword {key!r}")


def _bound(schema: Mapping[str, Any], key: str, where: str) -> float | None:
    value = schema.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _unsupported(where, f"{key!r} must be a finite number, got {value!r}")
    return value


def _alternatives(options: Any, key: str, where: str) -> Any:
    if not isinstance(options, list) or not options:
        raise _unsupported(where, f"{key!r} must be a non-empty list")
    if key == "oneOf":
        # The value must match exactly one option: only options of pairwise different types qualify.
        kinds = [o.get("type") if isinstance(o, Mapping) else None for o in options]
        if (
            not all(isinstance(k, str) for k in kinds)
            or len(set(kinds)) != len(kinds)
            or ({"integer", "number"} <= set(kinds))
        ):
            raise _unsupported(where, "'oneOf' other than options of different single types")
    failures = []
    for i, option in enumerate(options):
        try:
            return schema_instance(option, f"{where}[{i}]")
        except UnsupportedSchemaError as exc:
            failures.append(str(exc))
    raise _unsupported(where, "no satisfiable option: " + "; ".join(failures))


def _object(schema: Mapping[str, Any], where: str) -> dict[str, Any]:
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise _unsupported(where, "'properties' must be an object")
    required = schema.get("required", [])
    if not isinstance(required, list) or any(r not in properties for r in required):
        raise _unsupported(where, f"'required' names a property without a schema: {required!r}")
    return {
        str(name): schema_instance(node, f"{where}.properties.{name}") for name, node in properties.items()
    }


def _array(schema: Mapping[str, Any], where: str) -> list[Any]:
    low = int(_bound(schema, "minItems", where) or 0)
    high = _bound(schema, "maxItems", where)
    if high is not None and low > high:
        raise _unsupported(where, f"minItems {low} > maxItems {high}")
    if not low:
        return []
    items = schema.get("items", {})
    if isinstance(items, list):
        raise _unsupported(where, "tuple-form 'items'")
    if schema.get("uniqueItems") is True and low > 1:
        raise _unsupported(where, "'uniqueItems' with minItems > 1 (the fake repeats one value)")
    value = schema_instance(items, f"{where}.items")
    return [value] * low


def _number(schema: Mapping[str, Any], integer: bool, where: str) -> int | float:
    low, high = _bound(schema, "minimum", where), _bound(schema, "maximum", where)
    ex_low, ex_high = _bound(schema, "exclusiveMinimum", where), _bound(schema, "exclusiveMaximum", where)

    def ok(v: float) -> bool:
        return (
            (low is None or v >= low)
            and (high is None or v <= high)
            and (ex_low is None or v > ex_low)
            and (ex_high is None or v < ex_high)
        )

    candidates: list[float] = [0]
    if integer:
        if low is not None:
            candidates.append(math.ceil(low))
        if ex_low is not None:
            candidates.append(math.floor(ex_low) + 1)
        if high is not None:
            candidates.append(math.floor(high))
        if ex_high is not None:
            candidates.append(math.ceil(ex_high) - 1)
    else:
        candidates += [b for b in (low, high) if b is not None]
        lows = [b for b in (low, ex_low) if b is not None]
        highs = [b for b in (high, ex_high) if b is not None]
        if lows and highs:
            candidates.append((max(lows) + min(highs)) / 2)
        elif lows:
            candidates.append(max(lows) + 1)
        elif highs:
            candidates.append(min(highs) - 1)
    for v in candidates:
        if ok(v):
            return int(v) if integer or float(v).is_integer() else v
    raise _unsupported(where, "an empty numeric range")


def create_fake_model(model_id: str = "fake", **options: Any) -> FakeModel:
    window = int(options.pop("context_window", 4096))
    if options:
        raise TypeError(f"unknown options for the fake backend: {', '.join(sorted(options))}")
    return FakeModel(model_id, context_window=window)
