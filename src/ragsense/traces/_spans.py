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
from collections.abc import Callable, Iterator, Mapping
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


def otlp_spans(
    request: Mapping[str, Any],
    *,
    max_chars: int = MAX_ATTRIBUTE_CHARS,
    keep: Callable[[str], bool] | None = None,
) -> Iterator[Span]:
    """The spans of one ``ExportTraceServiceRequest`` in the OTLP JSON mapping (hex ids).

    ``keep``: which attribute keys to read (default: all); the others are dropped undecoded, so a
    receiver holding spans keeps only what it will use.

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
                yield _otlp_span(raw, max_chars, keep)


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


def _otlp_span(raw: Any, max_chars: int, keep: Callable[[str], bool] | None = None) -> Span:
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
            if keep is not None and key != "?" and not keep(key):
                continue
            attributes[key] = check_size(
                key, any_value(key, pair.get("value") if key != "?" else pair), max_chars
            )
    except SpanProblem as exc:
        return Span(**{**base.__dict__, "problem": (exc.field, exc.message)})
    return Span(**{**base.__dict__, "attributes": attributes})


def otlp_json_requests(text: str, name: str = "the JSON") -> Iterator[Any]:
    """The export requests of an OTLP JSON file: one object, a list of them, or one per line (the
    collector's file exporter). ``name``: the file, as errors name it."""
    stripped = text.strip()
    if not stripped:
        return
    try:
        whole = json.loads(stripped)
    except json.JSONDecodeError:
        # Lines end at "\n" only: str.splitlines() would also split at U+0085, U+2028 and U+2029, which
        # JSON allows raw inside a string, and cut a valid line in two.
        for number, line in enumerate(stripped.split("\n"), 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"{name}: line {number} is not JSON: {exc.msg}") from None
                except RecursionError:
                    raise InputError(f"{name}: line {number} is nested too deeply") from None
                except ValueError:  # an integer of more than 4,300 digits
                    raise InputError(f"{name}: line {number} holds a JSON number too long to read") from None
        return
    except RecursionError:
        raise InputError(f"{name} is nested too deeply") from None
    except ValueError:  # valid JSON that Python will not read: an integer of more than 4,300 digits
        raise InputError(f"{name} holds a JSON number too long to read") from None
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
    for resource in message.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                # No row reads a span's events or links: dropped before the (pure Python) conversion
                # to the JSON mapping, where 500,000 empty events cost 0.7 s of CPU per megabyte.
                span.ClearField("events")
                span.ClearField("links")
    request: dict[str, Any] = json_format.MessageToDict(message)
    for resource in request.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for name in _ID_FIELDS:  # the proto3 JSON mapping gives bytes as base64; OTLP JSON as hex
                    if name in span:
                        span[name] = base64.b64decode(span[name]).hex()
    return request


def count_otlp_spans(request: Mapping[str, Any]) -> int:
    """The spans of an export in the OTLP JSON mapping, counted without decoding any (shapes that are
    not lists count nothing here: :func:`otlp_spans` names them).

    >>> count_otlp_spans({"resourceSpans": [{"scopeSpans": [{"spans": [{}, {}]}, {"spans": [{}]}]}]})
    3
    """
    total = 0
    for resource in _counted(request, "resourceSpans"):
        for scope in _counted(resource, "scopeSpans"):
            total += len(_counted(scope, "spans"))
    return total


def _counted(node: Any, name: str) -> list[Any]:
    value = node.get(name) if isinstance(node, Mapping) else None
    return value if isinstance(value, list) else []


def count_proto_spans(data: bytes, limit: int) -> int:
    """The spans of a protobuf ``ExportTraceServiceRequest``, counted from the wire format without
    decoding it, stopping once over ``limit``: what refusing an export of too many spans costs.

    ``resource_spans`` is field 1 of the request, ``scope_spans`` field 2 of each, ``spans`` field 2 of
    each scope; everything else is skipped by its length. A body whose lengths do not add up is an
    :class:`~ragsense.errors.InputError`.

    >>> span = b"\\x12\\x00"  # spans (field 2), an empty message
    >>> scope = b"\\x12" + bytes([len(span * 3)]) + span * 3
    >>> request = b"\\x0a" + bytes([len(scope)]) + scope  # resource_spans (field 1)
    >>> count_proto_spans(request, 10), count_proto_spans(request, 1)
    (3, 2)
    """
    total = 0
    for start, end in _fields(data, 0, len(data), 1):
        for scope_start, scope_end in _fields(data, start, end, 2):
            for _ in _fields(data, scope_start, scope_end, 2):
                total += 1
                if total > limit:
                    return total
    return total


def _fields(data: bytes, pos: int, end: int, number: int) -> Iterator[tuple[int, int]]:
    """The (start, end) of each length-delimited field ``number`` between ``pos`` and ``end``."""
    while pos < end:
        key, pos = _varint(data, pos, end)
        wire = key & 7
        if wire == 0:
            _, pos = _varint(data, pos, end)
            continue
        if wire in (1, 5):
            pos += 8 if wire == 1 else 4
        elif wire == 2:
            length, pos = _varint(data, pos, end)
            if key >> 3 == number and pos + length <= end:
                yield pos, pos + length
            pos += length
        else:
            raise InputError(
                f"not an OTLP protobuf trace export: wire type {wire} at byte {pos}", field="body"
            )
        if pos > end:
            raise InputError("not an OTLP protobuf trace export: a field runs past its message", field="body")


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while pos < end and shift < 64:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise InputError(f"not an OTLP protobuf trace export: a broken varint before byte {pos}", field="body")
