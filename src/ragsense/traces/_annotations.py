"""Scores out, onto the spans they score: Phoenix span annotations and OTLP span events.

``.jsonl``: one Phoenix span annotation per scored span, the shape ``phoenix.client``'s
``log_span_annotations`` takes: ``{"name", "span_id", "annotator_kind", "result": {"label", "score",
"explanation"}, "metadata"}``; label is the verdict, score the ConSens score, explanation the weakest
words. ``.json``: an OTLP JSON trace export with one span per scored span, carrying the scored span's
``traceId``/``spanId`` and one ``ragsense.consens`` event whose attributes hold the same fields, for a
collector or backend that merges events onto spans. :func:`read_annotations` reads either back.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragsense.consens import binding_reasons, weakest_words
from ragsense.data import dumps_json, write_output
from ragsense.errors import InputError, ParameterError
from ragsense.traces._spans import otlp_json_requests, otlp_spans

NAME = "ragsense.consens"
"""The annotation's and the span event's name."""
WEAKEST = 3


@dataclass(frozen=True)
class Annotation:
    """One scored span: where it is and what ragsense said of it."""

    trace_id: str
    span_id: str
    label: str | None
    score: float | None
    explanation: str


def explanation(record: Mapping[str, Any], n: int = WEAKEST) -> str:
    """The weakest words of a scored row, or its first error.

    >>> explanation({"words": [{"word": "1843", "start": 0, "end": 4, "nll_empty": 1.0, "nll_context": 1.0}]})
    'weakest words: 1843 (not stated, contrast +0.00)'
    """
    errors = record.get("errors") or []
    if errors:
        first = errors[0]
        return f"not scored: {first.get('field') or first.get('metric')}: {first.get('message', '')}"
    words = weakest_words(record.get("words") or [], n)
    if not words:
        return "no scored words"
    parts = [
        f"{w['word']} ({'stated' if w['stated'] else 'not stated'}, contrast {w['contrast']:+.2f})"
        for w in words
    ]
    # The binding check's findings first: a stated word bound where the context prefers another.
    return "; ".join([*binding_reasons(record), "weakest words: " + ", ".join(parts)])


def span_annotations(records: Iterable[Mapping[str, Any]]) -> list[Annotation]:
    """One annotation per output row that came from a span (has ``trace_id`` and ``span_id``)."""
    out = []
    for record in records:
        trace_id, span_id = record.get("trace_id"), record.get("span_id")
        if not isinstance(trace_id, str) or not isinstance(span_id, str):
            continue
        score = record.get("consens")
        out.append(
            Annotation(
                trace_id,
                span_id,
                record.get("verdict"),
                score if isinstance(score, float) else None,
                explanation(record),
            )
        )
    return out


def _phoenix(a: Annotation) -> dict[str, Any]:
    result = {"label": a.label, "score": a.score, "explanation": a.explanation}
    return {
        "name": NAME,
        "span_id": a.span_id,
        "annotator_kind": "CODE",
        "result": {k: v for k, v in result.items() if v is not None},
        "metadata": {"trace_id": a.trace_id},
    }


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": str(value)}


def _otlp(items: list[Annotation]) -> dict[str, Any]:
    spans = []
    for a in items:
        fields = {"label": a.label, "score": a.score, "explanation": a.explanation}
        attributes = [{"key": f"{NAME}.{k}", "value": _value(v)} for k, v in fields.items() if v is not None]
        spans.append(
            {
                "traceId": a.trace_id,
                "spanId": a.span_id,
                "name": NAME,
                "events": [{"name": NAME, "attributes": attributes}],
            }
        )
    scope = {"scope": {"name": "ragsense"}, "spans": spans}
    return {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [scope]}]}


def write_annotations(path: str | os.PathLike[str], records: Iterable[Mapping[str, Any]]) -> int:
    """Write the annotations of scored rows: ``.jsonl`` Phoenix span annotations, ``.json`` OTLP span
    events. Returns how many were written."""
    file = Path(path)
    items = span_annotations(records)
    suffix = file.suffix.lower()
    if suffix == ".jsonl":
        text = "".join(dumps_json(_phoenix(a)) + "\n" for a in items)
    elif suffix == ".json":
        text = dumps_json(_otlp(items)) + "\n"
    else:
        raise ParameterError(
            f"annotations file {str(file)!r}: use .jsonl (Phoenix span annotations) "
            "or .json (OTLP span events)",
            parameter="annotations",
        )
    # Claimed before the run (evaluate's FinalFile): replaced here, whole, never through a link.
    write_output(file, text, overwrite=True, what="annotations file")
    return len(items)


def read_annotations(path: str | os.PathLike[str]) -> list[Annotation]:
    """The annotations of a file :func:`write_annotations` wrote (either format)."""
    file = Path(path)
    text = file.read_text(encoding="utf-8")
    if file.suffix.lower() == ".jsonl":
        out = []
        for line in text.splitlines():
            if not line.strip():
                continue
            obj = json.loads(line)
            result = obj.get("result", {})
            out.append(
                Annotation(
                    str(obj.get("metadata", {}).get("trace_id", "")),
                    str(obj["span_id"]),
                    result.get("label"),
                    result.get("score"),
                    str(result.get("explanation", "")),
                )
            )
        return out
    out = []
    for request in otlp_json_requests(text):
        for raw in request.get("resourceSpans", []):
            for scope in raw.get("scopeSpans", []):
                for span_raw in scope.get("spans", []):
                    # The event's attributes decode as span attributes do (the same AnyValue mapping).
                    event = next((e for e in span_raw.get("events", []) if e.get("name") == NAME), None)
                    if event is None:
                        continue
                    holder = {"traceId": span_raw["traceId"], "spanId": span_raw["spanId"], **event}
                    [span] = otlp_spans({"resourceSpans": [{"scopeSpans": [{"spans": [holder]}]}]})
                    if span.problem is not None:
                        raise InputError(span.problem[1], field=span.problem[0])
                    values = {k.removeprefix(NAME + "."): v for k, v in span.attributes.items()}
                    out.append(
                        Annotation(
                            span.trace_id,
                            span.span_id,
                            values.get("label"),
                            values.get("score"),
                            str(values.get("explanation", "")),
                        )
                    )
    return out
