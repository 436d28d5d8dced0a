"""Python clients of ``ragsense guard``: :class:`GuardClient` (sync) and :class:`AsyncGuardClient`.

Both build the same request body and read the same reply; only the HTTP call differs. A refusal
raises :class:`GuardError` with the status, the field the server named and, for 429/503, the seconds to
wait before retrying.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypedDict, Unpack

import httpx

from ragsense.errors import RagsenseError


class GuardError(RagsenseError):
    """The guard refused a request: ``status``, ``kind``, ``field`` (when named), ``retry_after`` (s)."""

    def __init__(
        self, status: int, kind: str, message: str, field: str | None, retry_after: float | None
    ) -> None:
        super().__init__(f"{status} {kind}: {message}")
        self.status = status
        self.kind = kind
        self.field = field
        self.retry_after = retry_after


@dataclass(frozen=True)
class CheckReply:
    """The guard's answer: the request ``id``, whether every row ``passed``, the ``model``, ``results``."""

    id: str
    passed: bool
    model: str
    results: list[dict[str, Any]]


RowLike = Mapping[str, Any]
P = ParamSpec("P")


class CheckOptions(TypedDict, total=False):
    """What a check may ask for besides the rows (the server's defaults apply to what is left out)."""

    attribution: bool  # per-document leave-one-out attribution
    adherence: bool  # VERA response adherence (the server needs --judge)
    min_consens: float  # this request's threshold, within the server's bounds
    weakest: int  # how many weakest words (default 5)
    request_id: str  # the request id echoed back


def check_body(
    question: str, contexts: str | Sequence[str], answer: str, **options: Unpack[CheckOptions]
) -> dict[str, Any]:
    """Check one answer; ``reply.results[0]`` is its result.

    >>> check_body("Q?", "C.", "A.", request_id="r1")
    {'question': 'Q?', 'contexts': ['C.'], 'answer': 'A.', 'id': 'r1'}
    """
    docs = [contexts] if isinstance(contexts, str) else list(contexts)
    return _with_options({"question": question, "contexts": docs, "answer": answer}, options)


def check_rows_body(rows: Sequence[RowLike], **options: Unpack[CheckOptions]) -> dict[str, Any]:
    """Check a batch of rows (dicts with ``question``, ``contexts``, ``answer``, optional ``id``)."""
    return _with_options({"rows": [dict(r) for r in rows]}, options)


def _with_options(body: dict[str, Any], options: CheckOptions) -> dict[str, Any]:
    extra: dict[str, Any] = dict(options)
    if "request_id" in extra:
        extra["id"] = extra.pop("request_id")
    return {**body, **extra}


# One request builder per call, two transports: the sync and async methods are made from the builders,
# so their signatures and documentation cannot drift apart.
def _sync(build: Callable[P, dict[str, Any]]) -> Callable[Concatenate[GuardClient, P], CheckReply]:
    def method(self: GuardClient, /, *args: P.args, **kwargs: P.kwargs) -> CheckReply:
        return _reply(self._http.post("/v1/check", json=build(*args, **kwargs)))

    method.__doc__ = build.__doc__
    return method


def _async(
    build: Callable[P, dict[str, Any]],
) -> Callable[Concatenate[AsyncGuardClient, P], Coroutine[Any, Any, CheckReply]]:
    async def method(self: AsyncGuardClient, /, *args: P.args, **kwargs: P.kwargs) -> CheckReply:
        return _reply(await self._http.post("/v1/check", json=build(*args, **kwargs)))

    method.__doc__ = build.__doc__
    return method


def _reply(response: httpx.Response) -> CheckReply:
    if response.status_code != 200:
        try:
            error = response.json()["error"]
            kind, message, field = str(error["type"]), str(error["message"]), error.get("field")
        except (ValueError, KeyError, TypeError):
            kind, message, field = "http_error", response.text[:200], None
        retry = response.headers.get("retry-after")
        raise GuardError(response.status_code, kind, message, field, float(retry) if retry else None)
    data = response.json()
    return CheckReply(id=data["id"], passed=data["passed"], model=data["model"], results=data["results"])


def _headers(api_key: str | None) -> dict[str, str]:
    return {} if api_key is None else {"Authorization": f"Bearer {api_key}"}


class GuardClient:
    """A synchronous client of ``base_url`` (``http://127.0.0.1:8080``); ``api_key`` if the server has keys.

    >>> client = GuardClient("http://127.0.0.1:8080")  # doctest: +SKIP
    >>> reply = client.check("Who?", ["Ada wrote it."], "Ada.")  # doctest: +SKIP
    >>> reply.passed, reply.results[0]["verdict"]  # doctest: +SKIP
    (True, 'grounded')
    """

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 60.0) -> None:
        self._http = httpx.Client(base_url=base_url, headers=_headers(api_key), timeout=timeout)

    check = _sync(check_body)
    check_rows = _sync(check_rows_body)

    def ready(self) -> bool:
        """Whether the server's model is loaded and it is not shutting down."""
        return self._http.get("/ready").status_code == 200

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> GuardClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncGuardClient:
    """The asynchronous client: the same methods as :class:`GuardClient`, awaited."""

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 60.0) -> None:
        self._http = httpx.AsyncClient(base_url=base_url, headers=_headers(api_key), timeout=timeout)

    check = _async(check_body)
    check_rows = _async(check_rows_body)

    async def ready(self) -> bool:
        return (await self._http.get("/ready")).status_code == 200

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncGuardClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
