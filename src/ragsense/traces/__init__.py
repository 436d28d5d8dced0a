"""Traces in, scores out: OpenTelemetry (OTLP), Phoenix and Langfuse trace exports as evaluation rows,
and scores written back onto the spans as Phoenix span annotations or OTLP span events (docs/traces.md).

Reading traces needs the ``traces`` extra (``openinference-semantic-conventions`` for the attribute
keys, ``opentelemetry-proto`` for protobuf): ``pip install 'ragsense[traces]'``.

>>> import json, pathlib, tempfile
>>> from ragsense.traces._spans import KIND
>>> def attr(k, v): return {"key": k, "value": {"stringValue": v}}
>>> spans = [{"traceId": "aa", "spanId": "01", "name": "retrieve", "startTimeUnixNano": "1", "attributes": [
...     attr(KIND, "RETRIEVER"), attr("input.value", "Who wrote it?"),
...     attr("retrieval.documents.0.document.content", "Ada Lovelace wrote it.")]},
...     {"traceId": "aa", "spanId": "02", "name": "llm", "startTimeUnixNano": "2",
...      "attributes": [attr(KIND, "LLM"), attr("output.value", "Ada Lovelace.")]}]
>>> path = pathlib.Path(tempfile.mkdtemp()) / "traces.json"
>>> _ = path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
>>> [row] = read_traces(path, "otlp")
>>> row.question, row.extra["span_id"]
('Who wrote it?', '02')
"""

from ragsense.traces._annotations import (
    Annotation,
    explanation,
    read_annotations,
    span_annotations,
    write_annotations,
)
from ragsense.traces._rows import (
    SOURCES,
    SkippedTrace,
    TraceRows,
    read_spans,
    read_traces,
    row_attribute,
    trace_rows,
)
from ragsense.traces._spans import (
    MAX_ATTRIBUTE_CHARS,
    Span,
    count_otlp_spans,
    count_proto_spans,
    otlp_proto_request,
    otlp_spans,
)

__all__ = [
    "MAX_ATTRIBUTE_CHARS",
    "SOURCES",
    "Annotation",
    "SkippedTrace",
    "Span",
    "TraceRows",
    "count_otlp_spans",
    "count_proto_spans",
    "explanation",
    "otlp_proto_request",
    "otlp_spans",
    "read_annotations",
    "read_spans",
    "read_traces",
    "row_attribute",
    "span_annotations",
    "trace_rows",
    "write_annotations",
]
