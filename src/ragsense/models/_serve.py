"""``ragsense serve``: any ragsense model behind an OpenAI-compatible HTTP API (stdlib only).

Endpoints (the subset ragsense's own ``openai`` backend and most evaluation tools use):

* ``GET /v1/models``: the OpenAI list format, plus vLLM's ``max_model_len``. ``GET /health``.
* ``POST /v1/completions``: ``prompt`` (a string or a list of strings), ``max_tokens`` (default 16),
  ``temperature`` (default 1.0), ``stop``, ``seed``, ``echo``, ``logprobs`` (0-20).

  - With ``echo: true`` and ``logprobs`` set, ``choices[i].logprobs`` lists the prompt's tokens
    (the tokenizer's own token strings), ``token_logprobs``, ``text_offset`` (character starts),
    ``top_logprobs`` and ``text_end_offset`` (character ends; an extension other clients ignore).
    The first token's logprob is ``null`` unless the tokenizer adds a BOS: the BOS itself is not
    listed, so the first text token gets a real log-probability. Use ``max_tokens: 0`` to score only;
    with ``max_tokens > 0`` the text is also continued, but the log-probabilities cover the prompt.
    Models other than the transformers backend are scored as ``ScoreRequest("", prompt)``.
  - Without ``echo``, the prompt is continued with the model's ``generate``. Log-probabilities of
    generated tokens are not supported (HTTP 400).
* ``POST /v1/chat/completions``: ``messages`` (system, user, assistant turns), ``max_tokens``,
  ``temperature``, ``stop``, ``seed``; rendered with the model's chat template (HTTP 400 for a model
  without one, such as a base model).

  - ``response_format: {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`` asks for
    structured output: the reply is a JSON document valid under ``schema``, decoded greedily whatever
    the temperature (``stop`` is ignored); ``max_tokens`` bounds each free-string field. A backend
    that declares ``structured_output = True`` gets the schema as ``GenerationConfig.json_schema``;
    any other model with a chat template, ``score`` and ``generate`` is decoded here by
    :mod:`ragsense.models._structured`. A schema outside its subset is HTTP 400 naming the construct.
    ``{"type": "json_object"}`` (JSON without a schema) is HTTP 400; ``{"type": "text"}`` is the default.
* ``POST /tokenize`` (also ``/v1/tokenize``): vLLM's ``{"prompt", "add_special_tokens"}`` or
  llama.cpp's ``{"content", "add_special"}`` -> ``{"tokens": [ids], "count": n, "max_model_len"}``.

Errors are OpenAI-style JSON ``{"error": {"message", "type", "code"}}``: 400 for bad requests, 404 for
unknown paths or model names, 500 for model failures; the server itself keeps running. Requests are
served one at a time (a lock around the model): torch already uses every core it is given.

>>> from ragsense.models import load_model
>>> server, url = start_in_thread(load_model("fake"), log_requests=False)
>>> url.startswith("http://127.0.0.1:")
True
>>> server.close()
"""

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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

from ragsense.errors import CapabilityError
from ragsense.models._interface import (
    ChatMessage,
    Generation,
    GenerationConfig,
    LanguageModel,
    ScoreRequest,
    SupportsChat,
    SupportsGeneration,
    SupportsLogprobs,
    chat_available,
)
from ragsense.models._structured import generate_structured

_MAX_BODY = 32 * 1024 * 1024
_MAX_TOP = 20
# Rows of hidden states sent through the LM head at once (bounds the logits buffer).
_HEAD_CHUNK = 128
T = TypeVar("T")


class RequestError(Exception):
    """A request the server refuses; becomes an OpenAI-style error response."""

    def __init__(self, message: str, status: int = 400, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


@dataclass
class _Echo:
    tokens: list[str]
    logprobs: list[float | None]
    starts: list[int]
    ends: list[int]
    top: list[dict[str, float] | None] | None


def transformers_prompt_logprobs(model: Any, text: str, top: int = 0) -> _Echo:
    """Log-probabilities of every token of ``text`` under a :class:`TransformersModel`, one forward pass.

    This reaches into the backend on purpose (its torch model and LM head): the public ``score``
    cannot score a first token. A leading BOS is left out, so the first listed token then gets a
    real log-probability; without a BOS it gets ``None``.
    """
    torch = model._torch
    tok = model.tokenizer
    enc = tok(text, add_special_tokens=True, return_offsets_mapping=True)
    ids: list[int] = list(enc["input_ids"])
    offsets = [(int(s), int(e)) for s, e in enc["offset_mapping"]]
    if not ids:
        raise RequestError("the prompt is empty: nothing to score")
    window = model.info.context_window
    if len(ids) > window:
        raise RequestError(f"the prompt is {len(ids)} tokens, over the context window of {window}")
    special = set(tok.all_special_ids)
    lead = 0
    while lead < len(ids) - 1 and ids[lead] in special and offsets[lead][0] == offsets[lead][1]:
        lead += 1
    values: list[float | None] = [None] * len(ids)
    tops: list[dict[str, float] | None] = [None] * len(ids)
    if len(ids) > 1:
        inp = torch.tensor([ids], dtype=torch.long, device=model._device)
        with torch.inference_mode():
            if model._head_only_ok:  # LM head on chunks of rows, as the local backend does
                rows, head = model._model.base_model(input_ids=inp).last_hidden_state[0, :-1], model._head
            else:
                rows, head = model._model(input_ids=inp).logits[0, :-1], None
            targets = inp[0, 1:]
            for start in range(0, rows.shape[0], _HEAD_CHUNK):
                chunk = rows[start : start + _HEAD_CHUNK]
                logits = (head(chunk) if head is not None else chunk).float()
                logp = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
                picked = logp.gather(1, targets[start : start + _HEAD_CHUNK, None])[:, 0].tolist()
                values[start + 1 : start + 1 + len(picked)] = picked
                if top:
                    best_v, best_i = logp.topk(top, dim=-1)
                    for r, (vs, ix) in enumerate(zip(best_v.tolist(), best_i.tolist(), strict=True)):
                        names = tok.convert_ids_to_tokens(ix)
                        tops[start + 1 + r] = dict(zip(names, vs, strict=True))
    tokens = list(tok.convert_ids_to_tokens(ids[lead:]))
    top_lists = tops[lead:] if top else None
    if top_lists is not None:  # OpenAI lists the chosen token too
        for t, v, d in zip(tokens, values[lead:], top_lists, strict=True):
            if d is not None and v is not None:
                d.setdefault(t, v)
    return _Echo(
        tokens, values[lead:], [s for s, _ in offsets[lead:]], [e for _, e in offsets[lead:]], top_lists
    )


def _typed(body: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any) -> Any:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        name = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise RequestError(f"'{key}' must be {name}, got {type(value).__name__}")
    return value


class ModelService:
    """The transport-free part of the server: request dict in, response dict out."""

    def __init__(
        self, model: LanguageModel, model_name: str | None = None, *, owns_model: bool = False
    ) -> None:
        self.model = model
        self.name = model_name or model.info.name
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
            return exc.status, _error(str(exc), exc.kind, exc.status)
        except ValueError as exc:  # the model refused the input (too long, empty, ...)
            return 400, _error(str(exc), "invalid_request_error", 400)
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            return 500, _error(f"the model failed: {type(exc).__name__}: {exc}", "server_error", 500)

    @staticmethod
    def _body(raw: bytes) -> dict[str, Any]:
        try:
            body = json.loads(raw.decode("utf-8")) if raw else None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RequestError(f"the request body is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise RequestError("the request body must be a JSON object")
        return body

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
        special = bool(body.get("add_special_tokens", body.get("add_special", True)))
        tokenizer = getattr(self.model, "tokenizer", None)
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
        max_tokens = _typed(body, "max_tokens", int, 16)
        echo = _typed(body, "echo", bool, False)
        logprobs = _typed(body, "logprobs", int, None)
        temperature = float(_typed(body, "temperature", (int, float), 1.0))
        seed = _typed(body, "seed", int, 0)
        stop = _typed(body, "stop", (str, list), [])
        stop = [stop] if isinstance(stop, str) else stop
        if max_tokens < 0 or temperature < 0 or not all(isinstance(s, str) for s in stop):
            raise RequestError("'max_tokens' and 'temperature' must be >= 0; 'stop' a string or strings")
        if logprobs is not None and not 0 <= logprobs <= _MAX_TOP:
            raise RequestError(f"'logprobs' must be between 0 and {_MAX_TOP}")
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
        max_tokens = _typed(body, "max_tokens", int, 16)
        temperature = float(_typed(body, "temperature", (int, float), 1.0))
        stop = _typed(body, "stop", (str, list), [])
        stop = [stop] if isinstance(stop, str) else stop
        if max_tokens < 1 or temperature < 0 or not all(isinstance(s, str) for s in stop):
            raise RequestError("'max_tokens' must be >= 1, 'temperature' >= 0, 'stop' a string or strings")
        schema = _response_schema(body)
        config = GenerationConfig(
            max_new_tokens=max_tokens,
            temperature=temperature,
            stop=tuple(stop) if schema is None else (),
            seed=_typed(body, "seed", int, 0),
            json_schema=schema,
        )
        model = self.model
        assert isinstance(model, SupportsChat)  # chat_available checked it
        with self._lock:
            if schema is None or getattr(model, "structured_output", False) is True:
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
        :func:`~ragsense.models._structured.generate_structured` on its ``score`` and ``generate``."""
        render = getattr(self.model, "render_chat", None)
        if not callable(render):
            raise RequestError(
                f"the model {self.name!r} cannot produce structured output (response_format json_schema)"
            )
        try:  # an unsupported schema or a model that cannot score: 400, naming what is missing
            generated = self._run(generate_structured(self.model, str(render(messages)), schema, config))
        except CapabilityError as exc:
            raise RequestError(str(exc)) from None
        return Generation(generated.text, generated.finish_reason, self.model.count_tokens(generated.text))

    def _echo(self, text: str, top: int) -> dict[str, Any]:
        from ragsense.models._transformers import TransformersModel

        if isinstance(self.model, TransformersModel):
            echo = transformers_prompt_logprobs(self.model, text, top)
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


def _error(message: str, kind: str, code: int) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": code}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: clients send many small requests
    server: RagsenseHTTPServer

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        started = time.perf_counter()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if self.headers.get("Transfer-Encoding"):  # chunked bodies are not read: send Content-Length
            self.close_connection = True
            status, payload = 411, _error("send the body with a Content-Length", "invalid_request_error", 411)
        elif length < 0 or length > _MAX_BODY:
            self.close_connection = True  # the body is not read: the connection cannot be reused
            status, payload = (
                413,
                _error(f"the body must be 0-{_MAX_BODY} bytes", "invalid_request_error", 413),
            )
        else:
            raw = self.rfile.read(length) if length else b""
            status, payload = self.server.service.handle(method, self.path, raw)
        try:
            data = json.dumps(payload, ensure_ascii=False, allow_nan=False).encode("utf-8")
        except ValueError as exc:  # a non-finite number slipped through: still answer in JSON
            status, payload = 500, _error(f"unserializable response: {exc}", "server_error", 500)
            data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        if self.server.log_requests:
            ms = (time.perf_counter() - started) * 1000
            print(f'{self.client_address[0]} "{method} {self.path}" {status} {ms:.0f} ms', file=sys.stderr)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # _serve logs one line per request itself

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.log_requests:
            print(f"{self.client_address[0]} {format % args}", file=sys.stderr)


class RagsenseHTTPServer(ThreadingHTTPServer):
    """The HTTP server; ``serve_forever()`` runs it, ``close()`` stops it and releases the model."""

    daemon_threads = True  # a client holding a keep-alive connection must not block shutdown

    def __init__(self, address: tuple[str, int], service: ModelService, log_requests: bool = True) -> None:
        super().__init__(address, _Handler)
        self.service = service
        self.log_requests = log_requests
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def close(self) -> None:
        if self._thread is not None:
            self.shutdown()  # only valid while serve_forever runs
            self._thread.join()
            self._thread = None
        self.server_close()
        self.service.close()


def serve(
    model: LanguageModel,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    model_name: str | None = None,
    log_requests: bool = True,
) -> RagsenseHTTPServer:
    """Bind a server for ``model`` (``port=0``: any free port); call ``serve_forever()`` to run it.

    ``model_name`` is the id clients send (default: ``model.info.name``).
    """
    return RagsenseHTTPServer((host, port), ModelService(model, model_name), log_requests)


def start_in_thread(
    model: LanguageModel,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    model_name: str | None = None,
    log_requests: bool = True,
) -> tuple[RagsenseHTTPServer, str]:
    """Serve ``model`` from a daemon thread; returns the server and its base URL (ends in ``/v1``)."""
    server = serve(model, host, port, model_name=model_name, log_requests=log_requests)
    server._thread = threading.Thread(target=server.serve_forever, name="ragsense-serve", daemon=True)
    server._thread.start()
    return server, server.base_url


def run_server(model_name: str, host: str = "127.0.0.1", port: int = 8000, **model_options: Any) -> None:
    """Load ``model_name`` and serve it until Ctrl-C (blocking); one log line per request on stderr."""
    from ragsense.models._registry import load_model

    model = load_model(model_name, **model_options)
    server = RagsenseHTTPServer((host, port), ModelService(model, model_name, owns_model=True))
    print(f"ragsense: serving {model_name!r} at {server.base_url} (Ctrl-C to stop)", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("ragsense: stopping", file=sys.stderr)
    finally:
        server.server_close()
        server.service.close()
