"""The transport-free part of ``ragsense serve``: an OpenAI-style request dict in, a response dict out."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import sys
import threading
import time
import traceback
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from ragsense.errors import CapabilityError, ParameterError, RagsenseError
from ragsense.models import (
    ChatMessage,
    Generation,
    GenerationConfig,
    LanguageModel,
    ScoreRequest,
    SupportsChat,
    SupportsChatTemplate,
    SupportsGeneration,
    SupportsLogprobs,
    SupportsPromptLogprobs,
    SupportsTokenAccess,
    chat_available,
    generate_structured,
    structured_chat,
)

MAX_TOP = 20
MAX_TEMPERATURE = 2.0  # OpenAI's range
MAX_SEED = 2**63 - 1  # what torch's generator takes
T = TypeVar("T")


@dataclass(frozen=True)
class ServeLimits:
    """What ``ragsense serve`` lets one client take (each a flag of the command).

    Per connection: ``header_timeout_s`` to send a request's headers and ``body_timeout_s`` to send
    its body (from its first byte to its last, however it trickles; then 408 and the connection is
    closed); ``max_connections`` served at once, past which a new one closes the oldest still sending
    its headers or body. Per request: a body of ``max_body_bytes`` at most (413), and the work it asks
    for: ``max_prompts`` prompts and ``max_chars`` characters of prompts or messages in all (413; an
    echoed prompt list costs about 15 times its size in the answer).

    >>> ServeLimits().max_prompts
    64
    """

    header_timeout_s: float = 10.0
    body_timeout_s: float = 10.0
    max_connections: int = 256
    max_body_bytes: int = 8 * 1024 * 1024
    max_prompts: int = 64
    max_chars: int = 1_000_000

    def __post_init__(self) -> None:
        for name in ("header_timeout_s", "body_timeout_s"):
            seconds = getattr(self, name)
            if not (seconds > 0 and math.isfinite(seconds)):
                raise ParameterError(f"must be a finite number above 0, got {seconds}", parameter=name)
        for name in ("max_connections", "max_body_bytes", "max_prompts", "max_chars"):
            if getattr(self, name) < 1:
                raise ParameterError(f"must be at least 1, got {getattr(self, name)}", parameter=name)


class RequestError(RagsenseError):
    """A request the server refuses; becomes an OpenAI-style error response (``param``: the field)."""

    def __init__(
        self, message: str, status: int = 400, kind: str = "invalid_request_error", param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.param = param


@dataclass
class _Echo:
    tokens: list[str]
    logprobs: list[float | None]
    starts: list[int]
    ends: list[int]
    top: list[dict[str, float] | None] | None


def _typed(body: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any) -> Any:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        name = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise RequestError(f"'{key}' must be {name}, got {type(value).__name__}", param=key)
    return value


def _bounded(
    body: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any, low: float, high: float
) -> Any:
    """A number field within ``[low, high]``, else 422 naming it (NaN and infinities are out of range).

    JSON as Python reads it allows ``NaN``, ``Infinity`` and ``1e999`` (an infinite float): a
    temperature of NaN would reach the sampler.

    >>> _bounded({"temperature": float("nan")}, "temperature", (int, float), 1.0, 0, 2)
    Traceback (most recent call last):
    ...
    ragsense.serve._service.RequestError: 'temperature' must be a finite number between 0 and 2, got nan
    """
    value = _typed(body, key, kind, default)
    if value is None:
        return None
    if not (math.isfinite(value) and low <= value <= high):
        raise RequestError(
            f"'{key}' must be a finite number between {low} and {high}, got {value}", 422, param=key
        )
    return value


class ModelService:
    """The transport-free part of the server: request dict in, response dict out."""

    def __init__(
        self,
        model: LanguageModel,
        model_name: str | None = None,
        *,
        owns_model: bool = False,
        limits: ServeLimits | None = None,
    ) -> None:
        self.model = model
        self.name = model_name or model.info.name
        self.limits = limits if limits is not None else ServeLimits()
        self._owns_model = owns_model  # close the model with the server (run_server loaded it)
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()  # one loop, used under the lock, so async clients stay valid

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._loop.run_until_complete(coro)

    def close(self) -> None:
        with self._lock:
            if not self._loop.is_closed():
                if self._owns_model:
                    self._run(self.model.aclose())
                self._loop.close()

    def handle(self, method: str, path: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        """Route one request; never raises."""
        path = path.split("?", 1)[0].rstrip("/")
        try:
            if method == "GET" and path in ("/v1/models", "/models"):
                return 200, self.models()
            if method == "GET" and path == "/health":
                return 200, {"status": "ok"}
            if method == "POST" and path in ("/v1/completions", "/completions"):
                return 200, self.completions(self._body(raw))
            if method == "POST" and path in ("/v1/chat/completions", "/chat/completions"):
                return 200, self.chat_completions(self._body(raw))
            if method == "POST" and path in ("/tokenize", "/v1/tokenize"):
                return 200, self.tokenize(self._body(raw))
            raise RequestError(f"no route {method} {path or '/'}", 404, "not_found_error")
        except RequestError as exc:
            return exc.status, error_body(str(exc), exc.kind, exc.status, exc.param)
        except ValueError as exc:  # the model refused the input (too long, empty, ...)
            return 400, error_body(str(exc), "invalid_request_error", 400)
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            return 500, error_body(f"the model failed: {type(exc).__name__}: {exc}", "server_error", 500)

    @staticmethod
    def _body(raw: bytes) -> dict[str, Any]:
        try:
            body = json.loads(raw.decode("utf-8")) if raw else None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RequestError(f"the request body is not valid JSON: {exc}") from None
        except RecursionError:  # not a server failure: the parser's stack is bounded by design
            raise RequestError("the request body is nested too deeply") from None
        if not isinstance(body, dict):
            raise RequestError("the request body must be a JSON object")
        return body

    def _check_work(self, texts: list[str], param: str) -> None:
        """413 for more prompts or characters than one request may ask the model to read."""
        limits = self.limits
        if len(texts) > limits.max_prompts:
            raise RequestError(
                f"'{param}' holds {len(texts)} entries; at most {limits.max_prompts} a request "
                "(--max-prompts)",
                413,
                param=param,
            )
        chars = sum(len(t) for t in texts)
        if chars > limits.max_chars:
            raise RequestError(
                f"'{param}' holds {chars:,} characters; at most {limits.max_chars:,} a request "
                "(--max-prompt-chars)",
                413,
                param=param,
            )

    def _check_model(self, body: dict[str, Any]) -> None:
        asked = body.get("model")
        if asked is not None and asked != self.name:
            raise RequestError(f"the model {asked!r} does not exist; this server serves {self.name!r}", 404)

    def models(self) -> dict[str, Any]:
        card = {
            "id": self.name,
            "object": "model",
            "created": 0,
            "owned_by": "ragsense",
            "max_model_len": self.model.info.context_window,
        }
        return {"object": "list", "data": [card]}

    def tokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        self._check_model(body)
        text = body.get("prompt", body.get("content"))
        if not isinstance(text, str):
            raise RequestError("'prompt' (or 'content') must be a string")
        self._check_work([text], "prompt")
        special = bool(body.get("add_special_tokens", body.get("add_special", True)))
        tokenizer = self.model.tokenizer if isinstance(self.model, SupportsTokenAccess) else None
        ids: list[int] = []
        with self._lock:
            if tokenizer is not None:
                ids = [int(i) for i in tokenizer(text, add_special_tokens=special)["input_ids"]]
                count = len(ids)
            else:  # a model without a tokenizer object can only count
                count = self.model.count_tokens(text)
        return {"tokens": ids, "count": count, "max_model_len": self.model.info.context_window}

    def completions(self, body: dict[str, Any]) -> dict[str, Any]:
        self._check_model(body)
        prompt = body.get("prompt")
        prompts = [prompt] if isinstance(prompt, str) else prompt
        if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
            raise RequestError("'prompt' must be a string or a list of strings (token ids are not supported)")
        self._check_work(prompts, "prompt")
        max_tokens = _bounded(body, "max_tokens", int, 16, 0, self.model.info.context_window)
        echo = _typed(body, "echo", bool, False)
        logprobs = _bounded(body, "logprobs", int, None, 0, MAX_TOP)
        temperature = float(_bounded(body, "temperature", (int, float), 1.0, 0, MAX_TEMPERATURE))
        seed = _bounded(body, "seed", int, 0, 0, MAX_SEED)
        stop = _typed(body, "stop", (str, list), [])
        stop = [stop] if isinstance(stop, str) else stop
        if not all(isinstance(s, str) for s in stop):
            raise RequestError("'stop' must be a string or strings", param="stop")
        if _typed(body, "n", int, 1) != 1 or _typed(body, "stream", bool, False):
            raise RequestError("only n=1 without streaming is supported")
        if logprobs is not None and not echo:
            raise RequestError("log-probabilities of generated tokens are not supported; use echo=true")
        config = GenerationConfig(
            max_new_tokens=max_tokens, temperature=temperature, stop=tuple(stop), seed=seed
        )
        choices, n_prompt, n_gen = [], 0, 0
        for i, text in enumerate(prompts):
            with self._lock:
                echoed = self._echo(text, logprobs) if logprobs is not None else None
                generated = self._generate(text, config) if max_tokens > 0 else None
                n_prompt += self.model.count_tokens(text)
            n_gen += generated.n_tokens if generated else 0
            choices.append(
                {
                    "index": i,
                    "text": (text if echo else "") + (generated.text if generated else ""),
                    "logprobs": echoed,
                    "finish_reason": generated.finish_reason if generated else "length",
                }
            )
        return {
            "id": f"cmpl-{time.time_ns():x}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": choices,
            "usage": {
                "prompt_tokens": n_prompt,
                "completion_tokens": n_gen,
                "total_tokens": n_prompt + n_gen,
            },
        }

    def chat_completions(self, body: dict[str, Any]) -> dict[str, Any]:
        self._check_model(body)
        if not chat_available(self.model):
            raise RequestError(f"the model {self.name!r} has no chat format; use /v1/completions")
        raw_messages = body.get("messages")
        if not isinstance(raw_messages, list) or not raw_messages:
            raise RequestError("'messages' must be a non-empty list")
        messages = []
        for i, m in enumerate(raw_messages):
            role, content = (m.get("role"), m.get("content")) if isinstance(m, dict) else (None, None)
            if role not in ("system", "user", "assistant") or not isinstance(content, str):
                raise RequestError(f"messages[{i}] needs a role (system, user, assistant) and string content")
            messages.append(ChatMessage(role, content))
        self._check_work(["".join(m.content for m in messages)], "messages")  # characters only
        max_tokens = _bounded(body, "max_tokens", int, 16, 1, self.model.info.context_window)
        temperature = float(_bounded(body, "temperature", (int, float), 1.0, 0, MAX_TEMPERATURE))
        stop = _typed(body, "stop", (str, list), [])
        stop = [stop] if isinstance(stop, str) else stop
        if not all(isinstance(s, str) for s in stop):
            raise RequestError("'stop' must be a string or strings", param="stop")
        schema = _response_schema(body)
        config = GenerationConfig(
            max_new_tokens=max_tokens,
            temperature=temperature,
            stop=tuple(stop) if schema is None else (),
            seed=_bounded(body, "seed", int, 0, 0, MAX_SEED),
            json_schema=schema,
        )
        model = self.model
        assert isinstance(model, SupportsChat)  # chat_available checked it
        with self._lock:
            if schema is None or structured_chat(model):
                try:
                    [generated] = self._run(model.chat([messages], config))
                except CapabilityError as exc:  # the backend cannot honour this schema
                    raise RequestError(str(exc)) from None
            else:
                generated = self._structured_chat(messages, schema, config)
            if schema is not None:
                # The reply is the whole JSON document, scored choices included: count all its tokens.
                generated = dataclasses.replace(generated, n_tokens=model.count_tokens(generated.text))
        return {
            "id": f"chatcmpl-{time.time_ns():x}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": generated.text},
                    "finish_reason": generated.finish_reason,
                }
            ],
            "usage": {"completion_tokens": generated.n_tokens},
        }

    def _structured_chat(
        self, messages: list[ChatMessage], schema: str, config: GenerationConfig
    ) -> Generation:
        """Structured output decoded by the server, for a backend whose ``chat`` does not declare
        ``structured_output``: the conversation rendered by the backend's ``render_chat``, then
        :func:`~ragsense.models.generate_structured` on its ``score`` and ``generate``."""
        if not isinstance(self.model, SupportsChatTemplate):
            raise RequestError(
                f"the model {self.name!r} cannot produce structured output (response_format json_schema)"
            )
        render = self.model.render_chat
        try:  # an unsupported schema or a model that cannot score: 400, naming what is missing
            generated = self._run(generate_structured(self.model, str(render(messages)), schema, config))
        except CapabilityError as exc:
            raise RequestError(str(exc)) from None
        return Generation(generated.text, generated.finish_reason, self.model.count_tokens(generated.text))

    def _echo(self, text: str, top: int) -> dict[str, Any]:
        if isinstance(self.model, SupportsPromptLogprobs):
            [scored] = self._run(self.model.prompt_logprobs([text], top))
            tokens = list(scored.tokens)
            top_lists = None if scored.top is None else [None if d is None else dict(d) for d in scored.top]
            if top_lists is not None:  # OpenAI lists the chosen token too
                for t, v, d in zip(tokens, scored.logprobs, top_lists, strict=True):
                    if d is not None and v is not None:
                        d.setdefault(t, v)
            starts, ends = [o[0] for o in scored.offsets], [o[1] for o in scored.offsets]
            echo = _Echo(tokens, list(scored.logprobs), starts, ends, top_lists)
        elif isinstance(self.model, SupportsLogprobs):
            # Generic models: score the whole text as a continuation of an empty prompt.
            [s] = self._run(self.model.score([ScoreRequest("", text)]))
            starts, ends = [o[0] for o in s.offsets], [o[1] for o in s.offsets]
            echo = _Echo(list(s.tokens), list(s.logprobs), starts, ends, None)
        else:
            raise RequestError(f"the model {self.name!r} cannot return log-probabilities")
        for v in echo.logprobs:
            if v is not None and math.isnan(v):
                raise RuntimeError("the model produced NaN log-probabilities")
        return {
            "tokens": echo.tokens,
            # JSON has no -inf; vLLM clamps to -9999 too.
            "token_logprobs": [v if v is None else max(v, -9999.0) for v in echo.logprobs],
            "top_logprobs": echo.top,
            "text_offset": echo.starts,
            "text_end_offset": echo.ends,
        }

    def _generate(self, text: str, config: GenerationConfig) -> Any:
        if not isinstance(self.model, SupportsGeneration):
            raise RequestError(f"the model {self.name!r} cannot generate text")
        [generation] = self._run(self.model.generate([text], config))
        return generation


def _response_schema(body: dict[str, Any]) -> str | None:
    """The JSON text of the schema an OpenAI ``response_format`` asks for, or None for plain text."""
    fmt = body.get("response_format")
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        raise RequestError(
            "response_format 'json_object' is not supported: only 'json_schema' (with a schema) is"
        )
    if kind != "json_schema":
        raise RequestError(f"response_format type {kind!r} is not supported: use 'json_schema' or 'text'")
    spec = fmt.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if not isinstance(schema, dict):
        raise RequestError("response_format json_schema needs 'json_schema': {'name': ..., 'schema': {...}}")
    return json.dumps(schema)


def error_body(message: str, kind: str, code: int, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error shape: ``{"error": {"message", "type", "code", "param"}}``."""
    return {"error": {"message": message, "type": kind, "code": code, "param": param}}
