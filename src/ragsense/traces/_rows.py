"""Traces to rows: each trace with a retriever and an LLM span becomes one evaluation row.

The row's id is the trace id; it keeps ``trace_id``, ``span_id`` (the LLM span, the one scored) and
``retriever_span_id``. The question is the retriever's ``input.value`` (else the root span's), the
contexts the retrievers' ``retrieval.documents.{i}.document.content`` in span order, the answer the
last LLM span's last ``llm.output_messages`` content (else its ``output.value``). Attribute keys come
from ``openinference-semantic-conventions`` (the ``traces`` extra). A trace without both spans is not
a row: it is listed in :attr:`TraceRows.skipped`. A trace whose spans are malformed (no output,
documents as a string, an unknown document attribute, an attribute over the size limit) is a
:class:`~ragsense.data.RowError` naming the trace, the span and the attribute.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ragsense.data import RowError, RowOrError, parquet_rows, parse_rows, require_module
from ragsense.errors import InputError, ParameterError
from ragsense.traces._exports import langfuse_spans, langfuse_traces, phoenix_span
from ragsense.traces._spans import (
    KIND,
    MAX_ATTRIBUTE_CHARS,
    Span,
    SpanProblem,
    otlp_json_requests,
    otlp_proto_request,
    otlp_spans,
)

TraceSource = Literal["otlp", "phoenix", "langfuse"]
SOURCES: tuple[str, ...] = ("otlp", "phoenix", "langfuse")
PROTOBUF_SUFFIXES = (".pb", ".binpb", ".protobuf")


@dataclass(frozen=True)
class SkippedTrace:
    """A trace that is not a RAG trace: it lacks a retriever span or an LLM span."""

    trace_id: str
    spans: int
    kinds: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.trace_id} ({self.spans} spans: {', '.join(self.kinds) or 'no OpenInference kind'})"


class TraceRows(list[RowOrError]):
    """The rows of a trace export (``evaluate`` takes it as data), with the traces that were not rows."""

    def __init__(self, rows: Iterable[RowOrError], skipped: Iterable[SkippedTrace] = ()) -> None:
        super().__init__(rows)
        self.skipped = list(skipped)

    def report(self, limit: int = 10) -> str | None:
        """One line on the skipped traces (counted, the first ``limit`` listed), or None for none."""
        if not self.skipped:
            return None
        listed = "; ".join(str(s) for s in self.skipped[:limit])
        more = f"; and {len(self.skipped) - limit} more" if len(self.skipped) > limit else ""
        return (
            f"{len(self.skipped)} traces without a retriever and an LLM span were not scored: {listed}{more}"
        )


# A list index inside an attribute key: at most 9 digits, so that int() of a key of thousands of digits
# (which Python refuses with a ValueError) is never tried; such a key is an unknown attribute.
_INDEX = r"\.(\d{1,9})\."


def _semconv() -> Any:
    return require_module("openinference.semconv.trace", "traces", "reading traces")


@functools.cache
def _row_keys() -> tuple[frozenset[str], tuple[str, ...]]:
    attrs = _semconv().SpanAttributes
    exact = frozenset({KIND, attrs.INPUT_VALUE, attrs.OUTPUT_VALUE})
    return exact, (attrs.LLM_OUTPUT_MESSAGES, attrs.RETRIEVAL_DOCUMENTS)


def row_attribute(key: str) -> bool:
    """Whether a row is made from span attribute ``key`` (what a receiver keeps while spans wait).

    >>> keys = ("output.value", "retrieval.documents.0.document.content", "llm.token_count.total")
    >>> [row_attribute(k) for k in keys]
    [True, True, False]
    """
    exact, lists = _row_keys()
    return key in exact or any(key == name or key.startswith(name + ".") for name in lists)


def _messages_content(attributes: Mapping[str, Any], prefix: str, content: str) -> str | None:
    """The content of the last message under ``prefix`` (flat ``prefix.{i}.message.content`` keys)."""
    pattern = re.compile(re.escape(prefix) + _INDEX + re.escape(content) + "$")
    found = {int(m.group(1)): v for k, v in attributes.items() if (m := pattern.match(k))}
    if not found:
        listed = attributes.get(prefix)
        if isinstance(listed, list) and listed and isinstance(listed[-1], Mapping):
            # Every level is the sender's: a "message" that is a string, not an object, is no message.
            message = listed[-1].get("message")
            value = listed[-1].get(content)
            if not value and isinstance(message, Mapping):
                value = message.get("content")
            return value if isinstance(value, str) else None
        return None
    value = found[max(found)]
    return value if isinstance(value, str) else None


def _documents(span: Span, keys: Any) -> list[str]:
    """The retriever span's document texts, or a :class:`SpanProblem`."""
    documents_key = keys.SpanAttributes.RETRIEVAL_DOCUMENTS
    content = keys.DocumentAttributes.DOCUMENT_CONTENT
    known = {v for k, v in vars(keys.DocumentAttributes).items() if k.isupper() and isinstance(v, str)}
    listed = span.attributes.get(documents_key)
    if listed is not None:  # Phoenix's dataframe: one column holding a list of document objects
        if isinstance(listed, str):
            try:
                listed = json.loads(listed)
            except json.JSONDecodeError:
                listed = None
            except RecursionError:  # thousands of nested brackets: the sender's string, not a bug
                raise SpanProblem(documents_key, "documents are nested too deeply") from None
            if not isinstance(listed, list):
                raise SpanProblem(documents_key, "documents are a string, not a list of document objects")
        if not isinstance(listed, list):
            raise SpanProblem(documents_key, f"documents must be a list, got {type(listed).__name__}")
        flat = {
            f"{documents_key}.{i}.{k}": v
            for i, doc in enumerate(listed)
            for k, v in (doc.items() if isinstance(doc, Mapping) else [("?", doc)])
        }
    else:
        flat = {k: v for k, v in span.attributes.items() if k.startswith(documents_key + ".")}
    pattern = re.compile(re.escape(documents_key) + _INDEX + "(.+)$")
    texts: dict[int, str] = {}
    for key, value in flat.items():
        match = pattern.match(key)
        if match is None or (
            match.group(2) not in known and not match.group(2).startswith("document.metadata")
        ):
            raise SpanProblem(key, f"unknown document attribute {key!r}; known: {', '.join(sorted(known))}")
        if match.group(2) == content:
            if not isinstance(value, str):
                raise SpanProblem(key, f"{key} must be a string, got {type(value).__name__}")
            texts[int(match.group(1))] = value
    return [texts[i] for i in sorted(texts)]


def _row(spans: list[Span], keys: Any) -> dict[str, Any] | SkippedTrace:
    attrs = keys.SpanAttributes
    retrievers = [s for s in spans if s.kind == "RETRIEVER"]
    llms = [s for s in spans if s.kind == "LLM"]
    trace_id = spans[0].trace_id
    for span in spans:
        if span.problem is not None:
            raise SpanProblem(span.problem[0], f"span {span.span_id}: {span.problem[1]}")
    if not retrievers or not llms:
        kinds = tuple(sorted({s.kind for s in spans if s.kind}))
        return SkippedTrace(trace_id, len(spans), kinds)
    llm = llms[-1]
    answer = _messages_content(
        llm.attributes, attrs.LLM_OUTPUT_MESSAGES, keys.MessageAttributes.MESSAGE_CONTENT
    ) or llm.attributes.get(attrs.OUTPUT_VALUE)
    if not isinstance(answer, str) or not answer.strip():
        raise SpanProblem(attrs.OUTPUT_VALUE, f"LLM span {llm.span_id} has no output (output.value)")
    contexts: list[str] = []
    for retriever in retrievers:
        try:
            contexts.extend(_documents(retriever, keys))
        except SpanProblem as exc:
            raise SpanProblem(exc.field, f"retriever span {retriever.span_id}: {exc.message}") from None
    if not contexts:
        raise SpanProblem(
            attrs.RETRIEVAL_DOCUMENTS, f"retriever span {retrievers[0].span_id} has no documents"
        )
    roots = [s for s in spans if s.parent_id is None]
    question = next(
        (s.attributes[attrs.INPUT_VALUE] for s in [*retrievers, *roots] if attrs.INPUT_VALUE in s.attributes),
        None,
    )
    if not isinstance(question, str) or not question.strip():
        raise SpanProblem(attrs.INPUT_VALUE, f"retriever span {retrievers[0].span_id} has no input.value")
    return {
        "id": trace_id,
        "question": question,
        "contexts": contexts,
        "answer": answer,
        "trace_id": trace_id,
        "span_id": llm.span_id,
        "retriever_span_id": retrievers[0].span_id,
    }


def trace_rows(spans: Iterable[Span]) -> TraceRows:
    """Group spans by trace (first appearance order, spans by start time) and make each trace a row.

    >>> from ragsense.traces._spans import KIND
    >>> spans = [Span("t", "r", None, "retrieve", 1, {KIND: "RETRIEVER", "input.value": "Who?",
    ...                "retrieval.documents.0.document.content": "Ada wrote it."}),
    ...          Span("t", "l", None, "llm", 2, {KIND: "LLM", "output.value": "Ada."}),
    ...          Span("u", "x", None, "health", 1, {})]
    >>> rows = trace_rows(spans)
    >>> rows[0].extra["span_id"], rows.report()
    ('l', '1 traces without a retriever and an LLM span were not scored: u (1 spans: no OpenInference kind)')
    """
    keys = _semconv()
    traces: dict[str, list[Span]] = {}
    for span in spans:
        traces.setdefault(span.trace_id, []).append(span)
    raws: list[dict[str, Any]] = []
    problems: dict[int, RowError] = {}
    skipped: list[SkippedTrace] = []
    for trace_id, members in traces.items():
        members.sort(key=lambda s: (str(type(s.start)), s.start))
        try:
            made = _row(members, keys)
        except (SpanProblem, RecursionError) as exc:
            # RecursionError: a value nested too deeply for any reader; whatever one span holds, it
            # is its own trace's error, never the export's (or the receiver's) failure.
            field_name, message = (
                (exc.field, exc.message)
                if isinstance(exc, SpanProblem)
                else (None, "a span is nested too deeply")
            )
            index = len(raws) + len(problems)
            raw = {"id": trace_id, "trace_id": trace_id}
            problems[index] = RowError(index, trace_id, field_name, message, raw)
            continue
        if isinstance(made, SkippedTrace):
            skipped.append(made)
        else:
            raws.append(made)
    parsed = iter(parse_rows(raws, require_answer=False))
    total = len(raws) + len(problems)
    rows = [problems[i] if i in problems else next(parsed) for i in range(total)]
    return TraceRows(_renumber(rows), skipped)


def _renumber(rows: list[RowOrError]) -> list[RowOrError]:
    """Row errors from parsing carry the index among good rows; give every error its place."""
    return [
        RowError(i, r.id, r.field, r.message, r.raw) if isinstance(r, RowError) and r.index != i else r
        for i, r in enumerate(rows)
    ]


def read_spans(
    path: str | os.PathLike[str], source: str, *, max_chars: int = MAX_ATTRIBUTE_CHARS
) -> list[Span]:
    """The spans of a trace file: ``otlp`` (``.json``/``.jsonl``, or protobuf ``.pb``), ``phoenix``
    (``.jsonl``/``.json``/``.parquet``) or ``langfuse`` (``.json``/``.jsonl``).

    A file that is not an export of ``source`` is an :class:`~ragsense.errors.InputError`.
    """
    if source not in SOURCES:
        raise ParameterError(
            f"unknown trace source {source!r}; use one of {', '.join(SOURCES)}", parameter="from"
        )
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"trace file not found: {str(file)!r}")
    try:
        return _spans_of(file, source, max_chars)
    except RecursionError:
        # Values nested thousands deep (arrays of arrays, objects in objects) exhaust the parser or
        # the readers that walk them: bad input, not a bug.
        raise InputError(f"{str(file)!r} is not a {source} export: it is nested too deeply") from None


def _spans_of(file: Path, source: str, max_chars: int) -> list[Span]:
    suffix = file.suffix.lower()
    if source == "otlp":
        if suffix in PROTOBUF_SUFFIXES:
            return list(otlp_spans(otlp_proto_request(file.read_bytes()), max_chars=max_chars))
        return [
            s
            for r in otlp_json_requests(_text(file), repr(str(file)))
            for s in otlp_spans(_object(r), max_chars=max_chars)
        ]
    if source == "phoenix":
        if suffix == ".parquet":
            records: Iterable[Any] = parquet_rows(file)
        else:
            records = otlp_json_requests(_text(file), repr(str(file)))
        return [phoenix_span(_object(r), max_chars=max_chars) for r in records]
    return [
        s
        for obj in otlp_json_requests(_text(file), repr(str(file)))
        for trace in langfuse_traces(obj)
        for s in langfuse_spans(trace, max_chars=max_chars)
    ]


def _text(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{str(file)!r} is not UTF-8 text ({exc.reason})") from None


def _object(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InputError(f"expected a JSON object, got {type(value).__name__}")
    return value


def read_traces(
    path: str | os.PathLike[str], source: str = "otlp", *, max_chars: int = MAX_ATTRIBUTE_CHARS
) -> TraceRows:
    """The evaluation rows of a trace file (see the module docstring); pass the result to ``evaluate``."""
    return trace_rows(read_spans(path, source, max_chars=max_chars))
