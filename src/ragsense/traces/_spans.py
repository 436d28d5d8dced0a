"""One span shape for every trace source, and the OTLP decoders (JSON, the file and collector format,
and protobuf, the ``traces`` extra).

A :class:`Span` keeps what the row builder needs: ids, parent, name, start time, the OpenInference span
kind and the attributes as flat OpenInference keys (``retrieval.documents.0.document.content``). A span
that cannot be decoded (an attribute value of an unknown OTLP type, an attribute over the size limit)
keeps its ids and carries a ``problem`` instead, so its trace becomes a clear per-trace error.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ragsense.data import require_module
from ragsense.errors import InputError, RagsenseError

MAX_ATTRIBUTE_CHARS = 1_000_000
"""The longest attribute value read (characters); a longer one makes its trace an input error."""

KIND = "openinference.span.kind"


@dataclass(frozen=True)
class Span:
    """One span, whatever file it came from.

    >>> Span("t1", "s1", None, "retrieve", 0, {KIND: "RETRIEVER"}).kind
    'RETRIEVER'
    """

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start: int | str
    attributes: Mapping[str, Any] = field(default_factory=dict)
    problem: tuple[str | None, str] | None = None  # (field, why) when the span could not be decoded

    @property
    def kind(self) -> str | None:
        value = self.attributes.get(KIND)
        return value.upper() if isinstance(value, str) else None


class SpanProblem(RagsenseError):
    """Why one span cannot be read (internal: it becomes its trace's input error)."""

    def __init__(self, field_name: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field_name
        self.message = message


def check_size(key: str, value: Any, limit: int) -> Any:
    """``value``, or a :class:`SpanProblem` when a string in it is over ``limit`` characters."""
    if isinstance(value, str) and len(value) > limit:
        raise SpanProblem(key, f"attribute {key!r} has {len(value):,} characters; at most {limit:,} are read")
    if isinstance(value, list):
        for item in value:
            check_size(key, item, limit)
    if isinstance(value, dict):
        for item in value.values():
            check_size(key, item, limit)
    return value


# ------------------------------------------------------------------------------------------ OTLP JSON

_SCALARS = ("stringValue", "boolValue", "doubleValue")


def any_value(key: str, value: Any) -> Any:
    """An OTLP ``AnyValue`` (JSON mapping) as a plain value.

    >>> any_value("k", {"arrayValue": {"values": [{"intValue": "3"}, {"stringValue": "x"}]}})
    [3, 'x']
    """
    if not isinstance(value, Mapping) or len(value) > 1:
        raise SpanProblem(
            key, f"attribute {key!r} is not an OTLP AnyValue (one typed value): {_short(value)}"
        )
    if not value:
        return None
    ((kind, inner),) = value.items()
    if kind in _SCALARS:
        return inner
    if kind == "intValue":  # int64 is a string in the JSON mapping
        try:
            return int(inner)
        except (TypeError, ValueError):
            raise SpanProblem(key, f"attribute {key!r} has an intValue that is not an integer") from None
    if kind == "bytesValue":
        return str(inner)
    if kind == "arrayValue":
        values = inner.get("values", []) if isinstance(inner, Mapping) else None
        if not isinstance(values, list):
            raise SpanProblem(key, f"attribute {key!r}: arrayValue.values must be a list")
        return [any_value(key, v) for v in values]
    if kind == "kvlistValue":
        pairs = inner.get("values", []) if isinstance(inner, Mapping) else None
        if not isinstance(pairs, list):
            raise SpanProblem(key, f"attribute {key!r}: kvlistValue.values must be a list")
        return {str(p.get("key")): any_value(key, p.get("value")) for p in pairs if isinstance(p, Mapping)}
    raise SpanProblem(key, f"attribute {key!r} has a value of unknown OTLP type {kind!r}")


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def otlp_spans(request: Mapping[str, Any], *, max_chars: int = MAX_ATTRIBUTE_CHARS) -> Iterator[Span]:
    """The spans of one ``ExportTraceServiceRequest`` in the OTLP JSON mapping (hex ids).

    >>> req = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "ab", "spanId": "01",
    ...     "name": "llm", "attributes": [{"key": KIND, "value": {"stringValue": "LLM"}}]}]}]}]}
    >>> [(s.trace_id, s.kind) for s in otlp_spans(req)]
    [('ab', 'LLM')]
    """
    resource_spans = request.get("resourceSpans")
    if not isinstance(resource_spans, list):
        raise InputError("not an OTLP trace export: no 'resourceSpans' list", field="resourceSpans")
    for resource in resource_spans:
        for scope in _list(_object(resource, "resourceSpans").get("scopeSpans"), "scopeSpans"):
            for raw in _list(_object(scope, "scopeSpans").get("spans"), "spans"):
                yield _otlp_span(raw, max_chars)


def _object(value: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InputError(f"each of {name} must be an object, got {type(value).__name__}", field=name)
    return value


def _list(value: Any, name: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"{name} must be a list, got {type(value).__name__}", field=name)
    return value


def _otlp_span(raw: Any, max_chars: int) -> Span:
    if not isinstance(raw, Mapping):
        raise InputError(f"a span must be an object, got {type(raw).__name__}", field="spans")
    ids = [raw.get(k) for k in ("traceId", "spanId", "parentSpanId")]
    if not all(isinstance(i, str) for i in ids[:2]) or not all(ids[:2]) or not isinstance(ids[2], str | None):
        raise InputError(
            "a span needs traceId and spanId (hex strings) to be placed in a trace", field="traceId"
        )
    start = raw.get("startTimeUnixNano") or 0
    try:
        start = int(start)
    except (TypeError, ValueError):
        raise InputError(
            f"span {ids[1]}: startTimeUnixNano is not an integer", field="startTimeUnixNano"
        ) from None
    base = Span(str(ids[0]), str(ids[1]), ids[2] or None, str(raw.get("name", "")), start)
    try:
        attributes: dict[str, Any] = {}
        for pair in _list(raw.get("attributes"), "attributes"):
            key = str(pair.get("key")) if isinstance(pair, Mapping) else "?"
            attributes[key] = check_size(
                key, any_value(key, pair.get("value") if key != "?" else pair), max_chars
            )
    except SpanProblem as exc:
        return Span(**{**base.__dict__, "problem": (exc.field, exc.message)})
    return Span(**{**base.__dict__, "attributes": attributes})


def otlp_json_requests(text: str) -> Iterator[Any]:
    """The export requests of an OTLP JSON file: one object, a list of them, or one per line (the
    collector's file exporter)."""
    stripped = text.strip()
    if not stripped:
        return
    try:
        whole = json.loads(stripped)
    except json.JSONDecodeError:
        for number, line in enumerate(stripped.splitlines(), 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"line {number} is not JSON: {exc.msg}", field="resourceSpans") from None
        return
    yield from (whole if isinstance(whole, list) else [whole])


# --------------------------------------------------------------------------------------- OTLP protobuf

_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def otlp_proto_request(data: bytes) -> dict[str, Any]:
    """A protobuf ``ExportTraceServiceRequest`` as its OTLP JSON mapping (hex ids), through
    ``opentelemetry-proto`` (the ``traces`` extra)."""
    service = require_module(
        "opentelemetry.proto.collector.trace.v1.trace_service_pb2", "traces", "reading OTLP protobuf"
    )
    json_format = require_module("google.protobuf.json_format", "traces", "reading OTLP protobuf")
    decode_error = require_module("google.protobuf.message", "traces", "reading OTLP protobuf").DecodeError
    try:
        message = service.ExportTraceServiceRequest.FromString(data)
    except decode_error as exc:
        raise InputError(f"not an OTLP protobuf trace export: {exc}", field="body") from None
    request: dict[str, Any] = json_format.MessageToDict(message)
    for resource in request.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for name in _ID_FIELDS:  # the proto3 JSON mapping gives bytes as base64; OTLP JSON as hex
                    if name in span:
                        span[name] = base64.b64decode(span[name]).hex()
    return request
