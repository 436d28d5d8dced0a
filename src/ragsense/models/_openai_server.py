"""The OpenAI-compatible server backend: vLLM, ``ragsense serve`` or any legacy-completions server.

Scoring sends one ``POST {base_url}/completions`` per unique request with ``echo: true``,
``logprobs: 0`` and ``max_tokens: 0``: the server tokenizes ``prompt + continuation`` jointly and
returns every prompt token's log-probability (``choices[0].logprobs``: ``tokens``,
``token_logprobs``, ``text_offset``), which is exactly the :class:`ScoreRequest` contract.

Servers disagree on the details, so the response is read defensively: see :func:`parse_echo` in
:mod:`ragsense.models._openai_echo` (listed or hidden BOS, drifting vLLM ``text_offset``, characters
split across tokens). Also:

* llama.cpp's server returns log-probabilities of generated tokens only: scoring fails with a
  clear error there; generation works.
* Structured output (``GenerationConfig.json_schema``) is sent with chat requests as OpenAI's
  ``response_format: {"type": "json_schema", "json_schema": {"name": "ragsense_judgment",
  "schema": ..., "strict": true}}`` (vLLM, llama.cpp, OpenAI, ``ragsense serve``); plain
  ``/completions`` generation cannot carry it and raises :class:`CapabilityError`.

>>> from ragsense.models import load_model
>>> model = load_model("openai:my-model", base_url="http://127.0.0.1:8000/v1")  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from collections.abc import Sequence
from typing import Any

from ragsense._access import without_credentials
from ragsense.errors import BackendUnavailableError, CapabilityError, ModelCallError, ParameterError
from ragsense.models._interface import (
    ChatMessage,
    ContinuationScore,
    Generation,
    GenerationConfig,
    ModelInfo,
    ScoreRequest,
)

# parse_echo lives in _openai_echo; it is re-exported here, where callers have always imported it.
from ragsense.models._openai_echo import _get
from ragsense.models._openai_echo import parse_echo as parse_echo
from ragsense.models._token_counts import TokenCounts

_INSTALL_HINT = "pip install 'ragsense[server]'"
_DEFAULT_WINDOW = 8192
_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})


# -- HTTP ------------------------------------------------------------------------------------------
def _error_message(resp: Any) -> str:
    try:
        body = resp.json()
    except ValueError:
        return str(resp.text)[:300] or str(resp.reason_phrase)
    err = body.get("error", body) if isinstance(body, dict) else body  # OpenAI, old vLLM, FastAPI
    if isinstance(err, dict):
        err = err.get("message") or err.get("detail") or err
    return str(err)[:300]


def _json_body(resp: Any, url: str) -> dict[str, Any]:
    try:
        body = resp.json()
    except ValueError:
        raise ModelCallError(f"{_at(url)} answered with invalid JSON: {resp.text[:200]!r}") from None
    if not isinstance(body, dict):
        raise ModelCallError(f"{_at(url)} answered with a JSON {type(body).__name__}, not an object")
    return body


def _at(url: str) -> str:
    """How messages name a server: its URL without the ``user:password@`` it may carry."""
    return f"the server at {without_credentials(url)}"


def _transport_failure(exc: BaseException, base_url: str, timeout: float, httpx: Any) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"{_at(base_url)} did not answer within {timeout:g} s (timeout)"
    cause = str(exc) or type(exc).__name__
    link: BaseException | None = exc
    while link is not None:  # httpx hides the refusal a few causes down
        if isinstance(link, ConnectionRefusedError):
            cause = "connection refused"
        link = link.__cause__ or link.__context__
    return f"cannot reach {_at(base_url)}: {cause}"


class OpenAIGenerationModel:
    """Text generation through an OpenAI-compatible ``/completions`` endpoint (no log-probabilities).

    Create it with ``load_model("openai:MODEL", base_url=..., supports_logprobs=False)``.
    """

    def __init__(
        self,
        model_id: str,
        *,
        base_url: str,
        api_key: str | None,
        timeout: float,
        max_retries: int,
        concurrency: int,
        context_window: int | None,
        echo_max_tokens: int,
        httpx: Any,
        chat: bool = True,
    ) -> None:
        self.model_id = model_id
        self._chat = chat
        self.base_url = base_url.rstrip("/")
        self._root = re.sub(r"/v1$", "", self.base_url)  # vLLM and llama.cpp serve /tokenize at the root
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout
        self._max_retries = max(0, max_retries)
        self._concurrency = max(1, concurrency)
        self._window = context_window
        self._echo_max_tokens = echo_max_tokens
        self._httpx = httpx
        # An async client and a semaphore belong to one event loop; callers may use several in turn.
        self._loops: dict[asyncio.AbstractEventLoop, tuple[Any, asyncio.Semaphore]] = {}
        self._sync: Any = None
        self._info: ModelInfo | None = None
        self._counts = TokenCounts(self._count_uncached)
        self._no_tokenize = False

    # -- LanguageModel -------------------------------------------------------------------------
    @property
    def info(self) -> ModelInfo:
        if self._info is None:
            window, source = self._window, "given"
            if window is None:
                window, source = self._fetch_window()
            self._info = ModelInfo(
                name=f"openai:{self.model_id}",
                backend="openai",
                context_window=window,
                fingerprint=f"openai:{self.model_id}@{without_credentials(self.base_url)}",
                extra={"base_url": without_credentials(self.base_url), "context_window_source": source},
            )
        return self._info

    def _fetch_window(self) -> tuple[int, str]:
        # vLLM lists max_model_len in GET /models; other servers do not, hence the default.
        try:
            body = self._sync_call("GET", f"{self.base_url}/models", None)
            cards = [c for c in body.get("data", []) if isinstance(c, dict)]
            card = next((c for c in cards if c.get("id") == self.model_id), cards[0] if cards else {})
            value = card.get("max_model_len")
            if isinstance(value, int) and value > 0:
                return value, "GET /models max_model_len"
            return _DEFAULT_WINDOW, "default (GET /models has no max_model_len)"
        except ModelCallError as exc:
            return _DEFAULT_WINDOW, f"default (GET /models failed: {exc})"

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` without special tokens, from the server's ``POST /tokenize`` (vLLM,
        llama.cpp, ``ragsense serve``); servers without it get a rough ``len(text) // 4`` estimate."""
        return self._counts(text)

    def _count_uncached(self, text: str) -> int:
        count = max(1, len(text) // 4) if text else 0
        if not self._no_tokenize and text:
            payload = {"model": self.model_id, "prompt": text, "content": text, "add_special_tokens": False}
            try:
                body = self._sync_call("POST", f"{self._root}/tokenize", payload)
            except _EndpointMissing:
                self._no_tokenize = True
            else:
                raw = body.get("count", len(body.get("tokens", [])))
                if not isinstance(raw, int):
                    raise ModelCallError(f"malformed /tokenize response from {self._root}: no count")
                count = raw
        return count

    async def aclose(self) -> None:
        for client, _ in self._loops.values():
            with contextlib.suppress(RuntimeError):  # its loop is gone: nothing to close cleanly
                await client.aclose()
        self._loops.clear()
        if self._sync is not None:
            self._sync.close()
            self._sync = None

    # -- SupportsGeneration --------------------------------------------------------------------
    async def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[Generation]:
        if config.json_schema is not None:
            raise CapabilityError(
                f"structured output (GenerationConfig.json_schema) needs chat: {self.model_id!r} on "
                f"{without_credentials(self.base_url)} sends plain prompts to /completions, which has no "
                "response_format; use chat()"
            )
        return list(await asyncio.gather(*(self._generate_one(p, config) for p in prompts)))

    async def _generate_one(self, prompt: str, config: GenerationConfig) -> Generation:
        body, choice = await self._complete("/completions", {"prompt": prompt}, config)
        return _generation(body, choice, _get(choice, "text", str, "choices[0]"))

    async def _complete(
        self, path: str, request: dict[str, Any], config: GenerationConfig
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """POST a completion request (``/completions`` or ``/chat/completions``) with ``config``'s
        decoding settings; returns the body and its first choice."""
        payload: dict[str, Any] = {
            "model": self.model_id,
            **request,
            "max_tokens": config.max_new_tokens,
            "temperature": config.temperature,
            "seed": config.seed,
        }
        if config.stop:
            payload["stop"] = list(config.stop)
        body = await self._post(path, payload)
        choices = _get(body, "choices", list, "response")
        if not choices or not isinstance(choices[0], dict):
            raise ModelCallError("malformed server response: choices is empty")
        return body, choices[0]

    # -- SupportsChat --------------------------------------------------------------------------
    @property
    def chat_available(self) -> bool:
        # Assumed; a server without a chat format answers the first chat call with a clear error.
        return self._chat

    async def chat(
        self, conversations: Sequence[Sequence[ChatMessage]], config: GenerationConfig
    ) -> list[Generation]:
        return list(await asyncio.gather(*(self._chat_one(c, config) for c in conversations)))

    async def _chat_one(self, conversation: Sequence[ChatMessage], config: GenerationConfig) -> Generation:
        request: dict[str, Any] = {"messages": [{"role": m.role, "content": m.content} for m in conversation]}
        if config.json_schema is not None:
            request["response_format"] = response_format(config.json_schema)
        body, choice = await self._complete("/chat/completions", request, config)
        content = _get(choice, "message", dict, "choices[0]").get("content")
        if not isinstance(content, str):
            raise ModelCallError("malformed server response: choices[0].message.content is not a string")
        return _generation(body, choice, content)

    # -- transport -----------------------------------------------------------------------------
    def _state(self) -> tuple[Any, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            for old in [lp for lp in self._loops if lp.is_closed()]:
                del self._loops[old]
            state = (self._httpx.AsyncClient(timeout=self._timeout), asyncio.Semaphore(self._concurrency))
            self._loops[loop] = state
        return state

    async def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        client, semaphore = self._state()
        cause = ""
        async with semaphore:
            for attempt in range(self._max_retries + 1):
                if attempt:
                    await asyncio.sleep(min(0.25 * 2 ** (attempt - 1), 4.0))
                try:
                    resp = await client.post(url, json=payload, headers=self._headers)
                except self._httpx.RequestError as exc:
                    cause = _transport_failure(exc, self.base_url, self._timeout, self._httpx)
                    continue
                if resp.status_code < 400:
                    return _json_body(resp, url)
                cause = f"{_at(url)} answered HTTP {resp.status_code}: {_error_message(resp)}"
                if resp.status_code not in _RETRY_STATUS:
                    raise ModelCallError(cause)
        tries = f" (tried {self._max_retries + 1} times)" if self._max_retries else ""
        raise ModelCallError(cause + tries)

    def _sync_call(self, method: str, url: str, payload: dict[str, Any] | None) -> dict[str, Any]:
        # info and count_tokens are synchronous in the interface, hence a small blocking client.
        if self._sync is None:
            self._sync = self._httpx.Client(timeout=self._timeout)
        try:
            resp = self._sync.request(method, url, json=payload, headers=self._headers)
        except self._httpx.RequestError as exc:
            raise ModelCallError(_transport_failure(exc, self.base_url, self._timeout, self._httpx)) from exc
        if resp.status_code in (404, 405, 501):
            raise _EndpointMissing(url)
        if resp.status_code >= 400:
            raise ModelCallError(f"{_at(url)} answered HTTP {resp.status_code}: {_error_message(resp)}")
        return _json_body(resp, url)


def response_format(json_schema: str, name: str = "ragsense_judgment") -> dict[str, Any]:
    """OpenAI's ``response_format`` asking for a JSON document valid under ``json_schema`` (JSON text).

    >>> response_format('{"type": "object"}')["json_schema"]["schema"]
    {'type': 'object'}
    """
    try:
        schema = json.loads(json_schema)
    except json.JSONDecodeError as exc:
        raise ParameterError(f"not valid JSON: {exc}", parameter="json_schema") from None
    if not isinstance(schema, dict):
        raise ParameterError("a JSON schema must be a JSON object", parameter="json_schema")
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def _generation(body: dict[str, Any], choice: dict[str, Any], text: str) -> Generation:
    usage = body.get("usage")
    n_tokens = usage.get("completion_tokens") if isinstance(usage, dict) else 0
    return Generation(
        text=text, finish_reason=str(choice.get("finish_reason") or "stop"), n_tokens=int(n_tokens or 0)
    )


class _EndpointMissing(ModelCallError):
    """The server has no such endpoint (404/405/501)."""


class OpenAICompatibleModel(OpenAIGenerationModel):
    """Log-probabilities and generation from an OpenAI-compatible server.

    Requests run concurrently (at most ``concurrency`` at once), identical requests are sent once,
    and results come back in request order. Connection failures, timeouts, HTTP 408/429/5xx are
    retried ``max_retries`` times with a short backoff; every failure raises :class:`ModelCallError`
    naming the server and the cause.
    """

    async def score(self, requests: Sequence[ScoreRequest]) -> list[ContinuationScore]:
        for req in requests:
            if not req.continuation:
                raise ValueError("empty continuation: nothing to score")
        unique = list(dict.fromkeys(requests))
        results = await asyncio.gather(*(self._score_one(r) for r in unique))
        by_request = dict(zip(unique, results, strict=True))
        return [by_request[r] for r in requests]

    async def _score_one(self, req: ScoreRequest) -> ContinuationScore:
        payload = {
            "model": self.model_id,
            "prompt": req.prompt + req.continuation,
            "max_tokens": self._echo_max_tokens,
            "echo": True,
            "logprobs": 0,
            "temperature": 0,
        }
        body = await self._post("/completions", payload)
        choices = _get(body, "choices", list, "response")
        if not choices:
            raise ModelCallError("malformed server response: choices is empty")
        return parse_echo(req.prompt, req.continuation, choices[0])


def served_model_ids(base_url: str, *, api_key: str | None = None, timeout: float = 10.0) -> list[str]:
    """The model ids a server lists at ``GET {base_url}/models``, in its order."""
    try:
        import httpx
    except ImportError as exc:
        raise BackendUnavailableError(f"the openai backend needs httpx: {_INSTALL_HINT}") from exc
    url = f"{base_url.rstrip('/')}/models"
    api_key = api_key or os.environ.get("RAGSENSE_API_KEY") or os.environ.get("OPENAI_API_KEY")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        resp = httpx.get(url, headers=headers, timeout=timeout)
    except httpx.RequestError as exc:
        raise ModelCallError(_transport_failure(exc, base_url, timeout, httpx)) from exc
    if resp.status_code >= 400:
        raise ModelCallError(f"{_at(url)} answered HTTP {resp.status_code}: {_error_message(resp)}")
    cards = _json_body(resp, url).get("data", [])
    ids = [c["id"] for c in cards if isinstance(c, dict) and isinstance(c.get("id"), str)]
    if not ids:
        raise ModelCallError(f"{_at(url)} lists no models; name one with --model openai:NAME")
    return ids


def create_openai_model(
    model_id: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = 60.0,
    max_retries: int = 2,
    concurrency: int = 8,
    context_window: int | None = None,
    supports_logprobs: bool = True,
    echo_max_tokens: int = 0,
    chat: bool = True,
    **unused: Any,
) -> OpenAIGenerationModel:
    """A model served over HTTP. ``base_url`` ends in ``/v1`` (default: ``RAGSENSE_BASE_URL``, then
    ``OPENAI_BASE_URL``); ``api_key`` defaults to ``RAGSENSE_API_KEY``, then ``OPENAI_API_KEY``.

    ``supports_logprobs=False`` gives a generation-only model, so metrics needing log-probabilities
    fail early. ``echo_max_tokens=1`` is for servers that crash on ``max_tokens: 0`` with ``echo``
    (vLLM before about 0.6): the generated token is ignored. ``chat=False`` says the server has no
    ``/chat/completions`` (a base model), so pipelines send plain prompts to ``/completions``.
    Nothing is sent until the first call.

    >>> create_openai_model("m", base_url="http://127.0.0.1:8000/v1/").base_url
    'http://127.0.0.1:8000/v1'
    """
    if unused:
        raise TypeError(f"unknown options for the openai backend: {', '.join(sorted(unused))}")
    try:
        import httpx
    except ImportError as exc:
        raise BackendUnavailableError(f"the openai backend needs httpx: {_INSTALL_HINT}") from exc
    base_url = base_url or os.environ.get("RAGSENSE_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
    if not base_url:
        raise ParameterError(
            "the openai backend needs its server's address: --base-url URL on the command line, "
            "base_url=... in Python (e.g. http://127.0.0.1:8000/v1), or RAGSENSE_BASE_URL",
            parameter="base_url",
        )
    if api_key is None:
        api_key = os.environ.get("RAGSENSE_API_KEY") or os.environ.get("OPENAI_API_KEY")
    cls = OpenAICompatibleModel if supports_logprobs else OpenAIGenerationModel
    return cls(
        model_id,
        base_url=base_url,
        api_key=api_key,
        timeout=timeout,
        max_retries=max_retries,
        concurrency=concurrency,
        context_window=context_window,
        echo_max_tokens=echo_max_tokens,
        httpx=httpx,
        chat=chat,
    )
