"""Phoenix span exports and Langfuse trace exports as :class:`~ragsense.traces._spans.Span` objects.

Phoenix: the records of ``get_spans_dataframe()`` saved as JSONL, JSON or Parquet (columns
``context.trace_id``, ``context.span_id``, ``parent_id``, ``span_kind``, ``attributes.input.value``,
``attributes.retrieval.documents`` ...), or the REST client's spans (``context: {trace_id, span_id}``
and an ``attributes`` object). Langfuse: traces with their observations (``GET /api/public/traces/{id}``
or the UI export), one JSON object, a list, ``{"data": [...]}`` or one per line; a ``RETRIEVER``
observation (or a span named like a retriever) gives the documents, a ``GENERATION`` the answer.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ragsense.errors import InputError
from ragsense.traces._spans import KIND, MAX_ATTRIBUTE_CHARS, Span, SpanProblem, check_size

DOCUMENTS = "retrieval.documents"
CONTENT = "document.content"


def flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested objects as dotted keys; lists stay values (``retrieval.documents`` as a list of objects).

    >>> flatten({"input": {"value": "Q?"}, "retrieval": {"documents": [{"document.content": "C."}]}})
    {'input.value': 'Q?', 'retrieval.documents': [{'document.content': 'C.'}]}
    """
    flat: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, Mapping):
            flat.update(flatten(item, name + "."))
        else:
            flat[name] = item
    return flat


def _first(record: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        value = record.get(name)
        if value is not None:
            return value
    return None


def phoenix_span(record: Mapping[str, Any], *, max_chars: int = MAX_ATTRIBUTE_CHARS) -> Span:
    """One exported Phoenix span.

    >>> s = phoenix_span({"context.trace_id": "t", "context.span_id": "s", "span_kind": "LLM",
    ...                   "attributes.output.value": "A."})
    >>> s.kind, s.attributes["output.value"]
    ('LLM', 'A.')
    """
    if not isinstance(record, Mapping):
        raise InputError(f"a Phoenix span must be an object, got {type(record).__name__}", field="context")
    flat = flatten(record)
    trace_id = _first(flat, "context.trace_id", "trace_id")
    span_id = _first(flat, "context.span_id", "span_id")
    if not trace_id or not span_id:
        raise InputError("a Phoenix span needs context.trace_id and context.span_id", field="context.span_id")
    attributes = {k[len("attributes.") :]: v for k, v in flat.items() if k.startswith("attributes.")}
    kind = _first(flat, "span_kind") or attributes.get(KIND)
    if kind is not None:
        attributes[KIND] = kind
    start = _first(flat, "start_time") or ""
    base = Span(str(trace_id), str(span_id), _first(flat, "parent_id"), str(flat.get("name", "")), str(start))
    try:
        for key, value in attributes.items():
            check_size(key, value, max_chars)
    except SpanProblem as exc:
        return Span(**{**base.__dict__, "problem": (exc.field, exc.message)})
    return Span(**{**base.__dict__, "attributes": attributes})


# --------------------------------------------------------------------------------------------- Langfuse

_LANGFUSE_KINDS = {"GENERATION": "LLM", "RETRIEVER": "RETRIEVER", "EMBEDDING": "EMBEDDING", "EVENT": None}
_TEXT_KEYS = ("query", "query_str", "question", "input", "content", "text", "output", "answer")
_DOC_KEYS = ("page_content", "pageContent", "content", "text", CONTENT)
_DOC_LISTS = ("documents", "nodes", "docs", "source_nodes", "context")


def langfuse_traces(obj: Any) -> Iterator[Mapping[str, Any]]:
    """The traces of a Langfuse export: a trace, a list of them, or the API's ``{"data": [...]}``."""
    if isinstance(obj, Mapping) and isinstance(obj.get("data"), list):
        obj = obj["data"]
    for item in obj if isinstance(obj, list) else [obj]:
        if not isinstance(item, Mapping):
            raise InputError(f"a Langfuse trace must be an object, got {type(item).__name__}", field="id")
        yield item


def text_of(value: Any) -> str | None:
    """The text of a Langfuse input or output: a string, a message list's last content, or a field.

    >>> text_of([{"role": "user", "content": "Q?"}]), text_of({"query_str": "Q?"}), text_of(3)
    ('Q?', 'Q?', None)
    """
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value:
        return text_of(value[-1])
    if isinstance(value, Mapping):
        if isinstance(value.get("choices"), list):
            return text_of(value["choices"])
        if isinstance(value.get("message"), Mapping):
            return text_of(value["message"])
        for key in _TEXT_KEYS:
            if key in value:
                return text_of(value[key])
    return None


def documents_of(value: Any, key: str) -> list[str]:
    """The document texts of a retriever's output, or a :class:`SpanProblem` naming what is wrong."""
    if isinstance(value, Mapping):
        for name in _DOC_LISTS:
            if name in value:
                return documents_of(value[name], f"{key}.{name}")
    if isinstance(value, str):
        raise SpanProblem(key, f"{key} is a string; documents must be a list of texts or objects")
    if not isinstance(value, list):
        raise SpanProblem(key, f"{key} must be a list of documents, got {type(value).__name__}")
    texts = []
    for i, doc in enumerate(value):
        if isinstance(doc, Mapping):
            doc = _first(doc, *_DOC_KEYS) if _first(doc, *_DOC_KEYS) is not None else text_of(doc.get("node"))
        if not isinstance(doc, str):
            raise SpanProblem(f"{key}[{i}]", f"document {i} has no text ({', '.join(_DOC_KEYS)})")
        texts.append(doc)
    return texts


def langfuse_spans(trace: Mapping[str, Any], *, max_chars: int = MAX_ATTRIBUTE_CHARS) -> Iterator[Span]:
    """The observations of one Langfuse trace as spans; the trace itself is the root span.

    >>> t = {"id": "t1", "input": "Q?", "observations": [
    ...     {"id": "r", "type": "RETRIEVER", "input": "Q?", "output": [{"page_content": "C."}]},
    ...     {"id": "g", "type": "GENERATION", "output": {"role": "assistant", "content": "A."}}]}
    >>> [(s.span_id, s.kind) for s in langfuse_spans(t)]
    [('t1', 'CHAIN'), ('r', 'RETRIEVER'), ('g', 'LLM')]
    """
    trace_id = trace.get("id")
    if not isinstance(trace_id, str) or not trace_id:
        raise InputError("a Langfuse trace needs its 'id'", field="id")
    observations = trace.get("observations") or []
    if not isinstance(observations, list):
        raise InputError(f"trace {trace_id}: observations must be a list", field="observations")
    yield _langfuse_span(trace_id, {**trace, "type": "CHAIN", "observations": None}, max_chars)
    for i, observation in enumerate(observations):
        if not isinstance(observation, Mapping):
            problem = (
                f"observations[{i}]",
                "observations must be objects (export the trace with its details)",
            )
            yield Span(trace_id, f"observations[{i}]", trace_id, "", "", problem=problem)
            continue
        yield _langfuse_span(trace_id, observation, max_chars)


def _langfuse_span(trace_id: str, obs: Mapping[str, Any], max_chars: int) -> Span:
    obs_type = str(obs.get("type") or "SPAN").upper()
    name = str(obs.get("name") or "")
    kind = _LANGFUSE_KINDS.get(obs_type, obs_type)
    if obs_type == "SPAN":
        kind = "RETRIEVER" if "retriev" in name.lower() else "CHAIN"
    span_id = str(obs.get("id") or trace_id)
    parent = obs.get("parentObservationId") or (None if span_id == trace_id else trace_id)
    base = Span(trace_id, span_id, parent, name, str(obs.get("startTime") or obs.get("timestamp") or ""))
    attributes: dict[str, Any] = {KIND: kind} if kind else {}
    try:
        check_size("input", obs.get("input"), max_chars)
        check_size("output", obs.get("output"), max_chars)
        question = text_of(obs.get("input"))
        if question is not None:
            attributes["input.value"] = question
        if kind == "RETRIEVER" and obs.get("output") is not None:
            for i, doc in enumerate(documents_of(obs["output"], "output")):
                attributes[f"{DOCUMENTS}.{i}.{CONTENT}"] = doc
        elif obs.get("output") is not None:
            answer = text_of(obs["output"])
            if answer is None:
                raise SpanProblem("output", f"the {obs_type.lower()} output has no text")
            attributes["output.value"] = answer
        if obs.get("model"):
            attributes["llm.model_name"] = obs["model"]
    except SpanProblem as exc:
        return Span(**{**base.__dict__, "problem": (exc.field, exc.message)})
    return Span(**{**base.__dict__, "attributes": attributes})
