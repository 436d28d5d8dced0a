"""The guard's request intake, before any model work: JSON replies, the media-type check, pydantic's
errors turned into one small 422, and the Host/Origin middleware. Kept apart from the app
(``_app.py``) so each refusal rule can be read and tested on its own."""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from fastapi.responses import Response
from pydantic import ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from ragsense._access import host_refusal
from ragsense.guard._limits import GuardRequestError

# A refusal lists at most this many validation errors, each message cut to this many characters: the
# reply to a bad request stays small whatever the request holds.
_MAX_DETAILS = 10
_MAX_MESSAGE_CHARS = 200


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    data = json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
    return Response(data, status_code=status, media_type="application/json", headers=headers)


def field_path(loc: Sequence[int | str]) -> str | None:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or None


def validation_error(exc: ValidationError) -> GuardRequestError:
    """A 422 naming the first error, listing at most :data:`_MAX_DETAILS` (each message shortened)."""
    errors = exc.errors(include_url=False, include_input=False, include_context=False)[:_MAX_DETAILS]
    details = [
        {"field": field_path(e["loc"]), "message": e["msg"][:_MAX_MESSAGE_CHARS], "type": e["type"]}
        for e in errors
    ]
    first = details[0]
    where = f"{first['field']}: " if first["field"] else ""
    more = exc.error_count() - len(details)
    message = where + str(first["message"]) + (f" (and {more} more errors)" if more > 0 else "")
    return GuardRequestError(422, "invalid_request", message, field=first["field"], details=details)


def is_json_media_type(content_type: str | None) -> bool:
    """Whether a Content-Type is ``application/json`` (parameters allowed; a charset only UTF-8).

    Exactly that type, because a browser sends a cross-site ``no-cors`` POST only with a "simple"
    type (``text/plain``, forms) or none: ``text/plain; charset=json`` must not pass as JSON.

    >>> [is_json_media_type(t) for t in ("application/json; charset=UTF-8", "text/plain; charset=json",
    ...                                    None, "application/json; charset=latin-1")]
    [True, False, False, False]
    """
    if content_type is None:
        return False
    media, _, params = content_type.partition(";")
    if media.strip().lower() != "application/json":
        return False
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"').lower() not in ("utf-8", "utf8"):
            return False
    return True


class Inflater:
    """A gzip body (``Content-Encoding: gzip``, the OpenTelemetry Collector's default) inflated as it
    arrives, never to more than ``limit`` bytes: past that, 413 at once.

    Each piece is inflated with ``max_length`` set to the room left, so a gzip bomb (200 MB of zeros in
    200 kB) costs the first ``limit`` bytes of output, not its whole size.

    >>> import gzip
    >>> bomb = gzip.compress(bytes(10_000_000))
    >>> inflater = Inflater(1_000)
    >>> try:
    ...     inflater.feed(bomb)
    ... except GuardRequestError as exc:
    ...     print(exc.status, exc.kind, inflater.size)
    413 inflated_too_large 1001
    >>> inflater = Inflater(100)
    >>> inflater.feed(gzip.compress(b"a" * 50) + gzip.compress(b"b" * 50)) == b"a" * 50 + b"b" * 50
    True
    >>> inflater.finish()
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self._stream = zlib.decompressobj(16 + zlib.MAX_WBITS)  # 16: the gzip wrapper

    def feed(self, chunk: bytes) -> bytes:
        """The inflated bytes of one more piece of the body; 413 past the limit, 400 if not gzip."""
        out: list[bytes] = []
        while chunk:
            try:
                piece = self._stream.decompress(chunk, self.limit - self.size + 1)
            except zlib.error as exc:
                raise GuardRequestError(
                    400, "invalid_encoding", f"the body is not valid gzip: {exc}", field="content-encoding"
                ) from None
            self.size += len(piece)
            if self.size > self.limit:
                raise GuardRequestError(
                    413,
                    "inflated_too_large",
                    f"the gzip body inflates to more than {self.limit} bytes",
                    field="body",
                    headers={"Connection": "close"},  # refused before it is all read
                )
            out.append(piece)
            # Not at its end: the input was all used (else the output would have passed the limit).
            chunk = self._stream.unused_data if self._stream.eof else b""
            if chunk:  # another gzip member follows (a valid gzip file may hold several)
                self._stream = zlib.decompressobj(16 + zlib.MAX_WBITS)
        return b"".join(out)

    def finish(self) -> None:
        """400 when the body ended inside the gzip stream."""
        if not self._stream.eof:
            raise GuardRequestError(400, "invalid_encoding", "the gzip body ends early", field="body")


def inflater_for(encoding: str | None, limit: int) -> Inflater | None:
    """The :class:`Inflater` a ``Content-Encoding`` needs (None: the body is sent as it is); 415 for an
    encoding other than gzip."""
    name = (encoding or "identity").strip().lower()
    if name == "identity":
        return None
    if name in ("gzip", "x-gzip"):
        return Inflater(limit)
    raise GuardRequestError(
        415,
        "unsupported_encoding",
        f"send the body as it is or gzip-compressed, not {name[:40]!r}",
        field="content-encoding",
    )


class HostCheck:
    """Refuse (403) a request whose Host or Origin shows it does not come from this machine's clients.

    A pure ASGI middleware, so it runs before routing and before any body is read, for every endpoint
    (a rebinding page must not read ``/metrics`` or ``/ready`` either).
    """

    def __init__(self, app: ASGIApp, reject: Callable[[str], None], allowed: frozenset[str] | None) -> None:
        self.app = app
        self.reject = reject  # counts the refusal in /metrics
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            reason = host_refusal(headers.get("host"), headers.get("origin"), self.allowed)
            if reason is not None:
                self.reject("host")
                field = "origin" if "Origin" in reason else "host"
                error = GuardRequestError(403, "forbidden", reason, field=field)
                await json_response(error.body(), 403)(scope, receive, send)
                return
        await self.app(scope, receive, send)
