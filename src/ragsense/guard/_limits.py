"""Input limits and hostile-input checks of ``POST /v1/check``: every refusal names its field.

What is checked where, and why there:

* the body's size (413) before it is read whole, so a huge body costs nothing;
* its encoding and JSON (400): strict UTF-8, no ``NaN``/``Infinity``, no number that overflows to an
  infinite float, no nesting deep enough to exhaust the parser, no object with more members than
  :data:`MAX_MEMBERS` (the request has a dozen fields; a million unknown ones would be a million
  errors for pydantic to report);
* the number of JSON values (400), from a count of the body's commas, before the body is parsed: a
  1 MB body of ``[0, 0, ...]`` costs ``json.loads`` 20 ms of CPU holding the GIL, a count 2 ms;
* types and shape (422) by the pydantic request model (``_schema.py``);
* counts and characters per field (422) here, on the event loop, before anything is queued;
* tokens per field (422) in the model worker (:func:`token_violation`), because only the worker may use
  the tokenizer: a fast tokenizer used from two threads at once can fail ("Already borrowed").
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragsense.errors import ParameterError, RagsenseError
from ragsense.guard._schema import CheckRequest, CheckRow


class GuardRequestError(RagsenseError):
    """A request the service refuses: the HTTP status, a short type, a message naming the field."""

    def __init__(
        self,
        status: int,
        kind: str,
        message: str,
        *,
        field: str | None = None,
        details: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.field = field
        self.details = details or []
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        """The JSON error body every refusal has: ``{"error": {status, type, message, field, details}}``."""
        return {
            "error": {
                "status": self.status,
                "type": self.kind,
                "message": self.message,
                "field": self.field,
                "details": self.details,
            }
        }


@dataclass(frozen=True)
class Limits:
    """What one request may hold. Defaults fit the bundled model's 8k-token window with room to spare.

    >>> Limits().max_rows, Limits().max_documents
    (16, 16)
    """

    max_body_bytes: int = 1_048_576
    max_rows: int = 16
    max_documents: int = 16
    max_question_chars: int = 2_000
    max_answer_chars: int = 8_000
    max_document_chars: int = 20_000
    max_question_tokens: int = 512
    max_answer_tokens: int = 2_048
    max_context_tokens: int = 8_192
    max_id_chars: int = 128

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            # Zero or a negative limit would refuse every request, or (a negative body size) none.
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ParameterError(f"must be a whole number >= 1, got {value!r}", parameter=name)


MAX_MEMBERS = 64
"""The most members a JSON object of a request may have: far above the schema's dozen fields."""


# A JSON string, escapes included: what is removed before counting the commas that separate values.
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')


def max_values(limits: Limits) -> int:
    """The most JSON values a request within ``limits`` can hold (a generous bound, not the schema).

    >>> max_values(Limits())
    1344
    """
    return MAX_MEMBERS + limits.max_rows * (MAX_MEMBERS + limits.max_documents)


def _too_many_values(limit: int) -> GuardRequestError:
    return GuardRequestError(
        400,
        "too_many_values",
        f"the body holds more than {limit} JSON values; no valid request has that many",
        headers={"Connection": "close"},  # it may be refused before it is all read
    )


class ValueCounter:
    """Counts the commas outside JSON strings of a body as it arrives; 400 once over ``limit``.

    So a body of a million values is refused after its first kilobytes, not read whole: receiving a
    megabyte costs the server more than refusing it. A chunk with a backslash ends the count (an
    escaped quote would need a parser); :func:`check_value_count` then decides on the whole body.

    >>> counter = ValueCounter(3)
    >>> counter.feed(b'{"a": "x, y, z, ')
    >>> counter.feed(b'w", "b": [1, 2')
    >>> counter.outside
    2
    >>> try:
    ...     counter.feed(b", 3, 4]}")
    ... except GuardRequestError as exc:
    ...     print(exc.status, exc.kind)
    400 too_many_values
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.outside = 0
        self._inside = False  # whether the last chunk ended inside a string
        self._exact = True

    def feed(self, chunk: bytes) -> None:
        """Count one more chunk of the body."""
        if not self._exact:
            return
        if b"\\" in chunk:
            self._exact = False
            return
        pieces = chunk.split(b'"')
        self.outside += sum(piece.count(b",") for piece in pieces[1 if self._inside else 0 :: 2])
        if len(pieces) % 2 == 0:  # an odd number of quotes: the chunk ends on the other side
            self._inside = not self._inside
        if self.outside > self.limit:
            raise _too_many_values(self.limit)


def check_value_count(raw: bytes, limit: int) -> None:
    """Refuse (400) a body with more than ``limit`` JSON values, without parsing it.

    Each comma outside a string separates two values or members, so their count bounds the values.
    Commas inside strings (documents have many) are counted only when the raw count is over the limit.

    >>> check_value_count(b'{"contexts": ["a, b, c, d"]}', 2)
    >>> check_value_count(b'{"contexts": ["a, \\\\"b, c, d"]}', 2)
    >>> try:
    ...     check_value_count(b"[" + b"0," * 10 + b"0]", 2)
    ... except GuardRequestError as exc:
    ...     print(exc.status, exc.message)
    400 the body holds more than 2 JSON values; no valid request has that many
    """
    if raw.count(b",") <= limit:
        return
    if b"\\" in raw:  # an escaped quote may end no string: the exact (slower) way
        outside = _JSON_STRING.sub(b"", raw).count(b",")
    else:  # no escapes: every other piece between quotes is outside a string
        outside = sum(piece.count(b",") for piece in raw.split(b'"')[::2])
    if outside > limit:
        raise _too_many_values(limit)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (non-finite numbers are refused)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 parses to inf: refuse it like a literal Infinity
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def _bounded_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len(pairs) > MAX_MEMBERS:
        raise ValueError(f"an object has {len(pairs)} members; at most {MAX_MEMBERS} are allowed")
    return dict(pairs)


def parse_json_body(raw: bytes) -> Any:
    """The body as JSON, or a 400 :class:`GuardRequestError` saying what is wrong with it.

    >>> parse_json_body(b'{"a": 1}')
    {'a': 1}
    >>> try:
    ...     parse_json_body(b'{"a": NaN}')
    ... except GuardRequestError as exc:
    ...     print(exc.status, exc.message)
    400 the body is not valid JSON: NaN is not valid JSON (non-finite numbers are refused)
    >>> try:
    ...     parse_json_body(json.dumps({f"k{i}": 0 for i in range(100)}).encode())
    ... except GuardRequestError as exc:
    ...     print(exc.status, exc.message)
    400 the body is not valid JSON: an object has 100 members; at most 64 are allowed
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GuardRequestError(
            400, "invalid_encoding", f"the body is not valid UTF-8 (byte {exc.start})"
        ) from None
    if not text.strip():
        raise GuardRequestError(400, "invalid_json", "the body is empty; send a JSON object")
    try:
        return json.loads(
            text,
            parse_constant=_refuse_constant,
            parse_float=_finite_float,
            object_pairs_hook=_bounded_object,
        )
    except json.JSONDecodeError as exc:
        raise GuardRequestError(
            400,
            "invalid_json",
            f"the body is not valid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})",
        ) from None
    except ValueError as exc:
        raise GuardRequestError(400, "invalid_json", f"the body is not valid JSON: {exc}") from None
    except RecursionError:
        raise GuardRequestError(400, "invalid_json", "the body is nested too deeply") from None


def _text_error(field: str, text: str, limit: int) -> GuardRequestError | None:
    if len(text) > limit:
        return GuardRequestError(
            422,
            "limit_exceeded",
            f"{field} has {len(text)} characters; at most {limit} are allowed",
            field=field,
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # JSON can carry a lone surrogate ("\ud800"); no tokenizer can take it.
        return GuardRequestError(422, "invalid_text", f"{field} holds a lone UTF-16 surrogate", field=field)
    if not text.strip():
        return GuardRequestError(422, "empty_field", f"{field} is empty", field=field)
    return None


def check_request_limits(request: CheckRequest, limits: Limits) -> list[CheckRow]:
    """The request's rows, or the first :class:`GuardRequestError` a limit gives (422, field named).

    >>> req = CheckRequest.model_validate({"question": "Q?", "contexts": ["C."], "answer": "A."})
    >>> len(check_request_limits(req, Limits()))
    1
    >>> try:
    ...     check_request_limits(req, Limits(max_answer_chars=1))
    ... except GuardRequestError as exc:
    ...     print(exc.status, exc.field)
    422 answer
    """
    rows = request.row_list()
    batch = request.rows is not None
    if len(rows) > limits.max_rows:
        raise GuardRequestError(
            422,
            "limit_exceeded",
            f"rows has {len(rows)} rows; at most {limits.max_rows} are allowed per request",
            field="rows",
        )
    if not rows:
        raise GuardRequestError(422, "empty_field", "rows is empty", field="rows")
    for i, row in enumerate(rows):
        prefix = f"rows[{i}]." if batch else ""
        if row.id is not None and (len(row.id) > limits.max_id_chars or not row.id.isprintable()):
            raise GuardRequestError(
                422,
                "invalid_id",
                f"{prefix}id must be at most {limits.max_id_chars} printable characters",
                field=f"{prefix}id",
            )
        if len(row.contexts) > limits.max_documents:
            raise GuardRequestError(
                422,
                "limit_exceeded",
                f"{prefix}contexts has {len(row.contexts)} documents; at most {limits.max_documents} "
                "are allowed",
                field=f"{prefix}contexts",
            )
        if not row.contexts:
            raise GuardRequestError(
                422, "empty_field", f"{prefix}contexts is empty", field=f"{prefix}contexts"
            )
        checks = [
            (f"{prefix}question", row.question, limits.max_question_chars),
            (f"{prefix}answer", row.answer, limits.max_answer_chars),
        ] + [(f"{prefix}contexts[{k}]", doc, limits.max_document_chars) for k, doc in enumerate(row.contexts)]
        for field, text, limit in checks:
            error = _text_error(field, text, limit)
            if error is not None:
                raise error
    return rows


def token_violation(
    rows: Sequence[CheckRow], count_tokens: Any, limits: Limits, *, batch: bool
) -> GuardRequestError | None:
    """The first field over its token limit (422), or None. Runs in the model worker (see above)."""
    for i, row in enumerate(rows):
        prefix = f"rows[{i}]." if batch else ""
        context_tokens = sum(count_tokens(doc) for doc in row.contexts)
        for field, tokens, limit in (
            (f"{prefix}question", count_tokens(row.question), limits.max_question_tokens),
            (f"{prefix}answer", count_tokens(row.answer), limits.max_answer_tokens),
            (f"{prefix}contexts", context_tokens, limits.max_context_tokens),
        ):
            if tokens > limit:
                return GuardRequestError(
                    422,
                    "limit_exceeded",
                    f"{field} has {tokens} tokens; at most {limit} are allowed",
                    field=field,
                )
    return None


def estimate_tokens(rows: Sequence[CheckRow]) -> int:
    """A cheap token estimate (about 4 characters a token) for batch budgets, without the tokenizer."""
    return sum((len(r.question) + len(r.answer) + sum(len(c) for c in r.contexts)) // 4 + 1 for r in rows)
