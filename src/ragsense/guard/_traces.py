"""``POST /v1/traces``: the guard as an OTLP/HTTP trace receiver that scores the RAG traces it gets.

An OpenTelemetry exporter (``OTLPSpanExporter(endpoint="http://127.0.0.1:8000/v1/traces")``) sends
``ExportTraceServiceRequest`` bodies as protobuf (``application/x-protobuf``) or JSON
(``application/json``). The request goes through the same intake as ``/v1/check``: Host/Origin (403),
API key (401), media type (415), body size and time (413, 408), the per-key slot (429); then, in a
thread, the body is decoded into spans. An exporter sends a trace's spans as they end, across requests,
so spans wait until their trace's root span is in (it ends last), or :data:`TRACE_WAIT_S` after the
first; whole traces are made rows exactly as ``ragsense evaluate --from otlp`` does
(:func:`ragsense.traces.trace_rows`), each row checked against the request limits. The export is
answered as soon as its traces are accepted (an OTLP exporter waits only seconds); the rows are then
scored through the same micro-batcher as ``/v1/check``, at most ``max_rows`` a job, and each result is
appended to the JSONL sink (``--trace-sink``) and counted on ``/metrics``. Accepted but unscored rows
are bounded (:data:`BACKLOG_FACTOR` x ``max_queue_rows``): over that, 429 with Retry-After, which OTLP
exporters honour. Malformed traces are answered in the OTLP ``partialSuccess`` and written to the sink
as errors; traces that are not RAG traces are counted (``not_rag``) and written to the sink too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from ragsense.data import RowError, require_module
from ragsense.errors import InputError
from ragsense.guard._batcher import NotAccepting, QueueFull
from ragsense.guard._check import Options
from ragsense.guard._intake import is_json_media_type, json_response
from ragsense.guard._limits import (
    GuardRequestError,
    Limits,
    check_request_limits,
    estimate_tokens,
    parse_json_body,
)
from ragsense.guard._schema import CheckRequest, CheckRow
from ragsense.traces import SkippedTrace, Span, otlp_proto_request, otlp_spans, trace_rows

logger = logging.getLogger("ragsense.guard")

PROTOBUF = "application/x-protobuf"
TRACE_WAIT_S = 30.0
"""How long spans wait for their trace's root span before the trace is read as it is."""
MAX_PENDING_SPANS = 10_000
"""Spans waiting for their root at most; over that, 429."""
BACKLOG_FACTOR = 16
"""Accepted but unscored trace rows are bounded by this many times ``max_queue_rows``."""
WEAKEST = 3


@dataclass(frozen=True)
class _Traces:
    rows: list[CheckRow]  # id: the trace id
    spans: dict[str, str]  # trace id -> the scored (LLM) span id
    errors: list[RowError]
    skipped: list[SkippedTrace]


def _media(content_type: str | None) -> str:
    if is_json_media_type(content_type):
        return "json"
    if content_type is not None and content_type.partition(";")[0].strip().lower() == PROTOBUF:
        return "protobuf"
    raise GuardRequestError(
        415, "unsupported_media_type", f"send OTLP as {PROTOBUF} or application/json", field="body"
    )


def parse_spans(raw: bytes, media: str) -> list[Span]:
    """The body's spans (in a thread); a 400 for a body that is not an OTLP export."""
    try:
        request = otlp_proto_request(raw) if media == "protobuf" else parse_json_body(raw)
        if not isinstance(request, dict):
            raise InputError("the body must be a JSON object", field="body")
        return list(otlp_spans(request))
    except InputError as exc:
        raise GuardRequestError(400, "invalid_otlp", str(exc), field=exc.field or "body") from None


def rows_of(spans: list[Span], limits: Limits) -> _Traces:
    """Whole traces' spans as rows within the request limits (an over-limit trace is an error)."""
    made = trace_rows(spans)
    rows: list[CheckRow] = []
    ids: dict[str, str] = {}
    errors = [r for r in made if isinstance(r, RowError)]
    for row in made:
        if isinstance(row, RowError):
            continue
        check = CheckRow(id=row.id, question=row.question, contexts=list(row.contexts), answer=row.answer)
        try:
            check_request_limits(CheckRequest(rows=[check]), limits)
        except GuardRequestError as exc:
            field = (exc.field or "").removeprefix("rows[0].") or None
            errors.append(RowError(len(rows), row.id, field, exc.message, {"trace_id": row.id}))
            continue
        rows.append(check)
        ids[row.id] = str(row.extra["span_id"])
    return _Traces(rows, ids, errors, made.skipped)


class TraceReceiver:
    """The ``/v1/traces`` handler, its backlog of accepted rows and its JSONL sink."""

    def __init__(self, service: Any) -> None:
        # service: the GuardService (guard/_app.py) that owns this receiver; not imported, so the two
        # modules do not import each other.
        self.service = service
        self.backlog = 0
        # Spans wait here until their trace's root span arrives (an exporter sends a trace's spans as
        # they end, across requests; the root ends last), or TRACE_WAIT_S has passed since the first.
        self.pending: dict[str, list[Span]] = {}
        self.first_seen: dict[str, float] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.sink = Path(service.config.trace_sink) if service.config.trace_sink else None

    def _write(self, records: Sequence[dict[str, Any]]) -> None:
        if self.sink is None or not records:
            return
        text = "".join(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in records)
        with self.sink.open("a", encoding="utf-8") as out:
            out.write(text)

    async def receive(self, request: Request) -> Response:
        service = self.service
        started = time.perf_counter()
        status, key_id, holding, proto = 500, None, False, False
        try:
            key_id = service.authenticate(request)
            media = _media(request.headers.get("content-type"))
            proto = media == "protobuf"
            raw = await service.read_body(request, count_values=False)
            spans = await asyncio.to_thread(parse_spans, raw, media)
            service._take_slot(key_id)
            holding = True
            self._check_room(len(spans))
            traces = rows_of(self._complete(spans), service.config.limits)
            self._accept(traces)
            status = 200
            return self._answer(traces, proto)
        except GuardRequestError as exc:
            status = exc.status
            if status in (400, 413, 415, 422):
                service.metrics.reject("invalid")
            return json_response(exc.body(), status, exc.headers)
        except Exception as exc:  # a bug, never input: answer in JSON and keep serving
            logger.error("guard: trace export failed: %s", type(exc).__name__)
            return json_response(GuardRequestError(500, "internal_error", "internal error").body(), 500)
        finally:
            if holding and key_id is not None:
                service.limiter.release(key_id)
            service.metrics.request("/v1/traces", status, time.perf_counter() - started)

    def _check_room(self, spans: int) -> None:
        """503 while the model loads or the server drains; 429 when too much waits already."""
        service = self.service
        if service.draining or not service.batcher.ready:
            raise GuardRequestError(
                503, "unavailable", "the model is not ready", headers={"Retry-After": "5"}
            )
        waiting = sum(len(v) for v in self.pending.values())
        limit = BACKLOG_FACTOR * service.config.max_queue_rows
        if self.backlog > limit or waiting + spans > MAX_PENDING_SPANS:
            service.metrics.reject("queue_full")
            raise GuardRequestError(
                429, "queue_full", "too many trace rows or spans wait", headers={"Retry-After": "5"}
            )

    def _complete(self, spans: list[Span], *, flush: bool = False) -> list[Span]:
        """The spans of every trace now whole (its root span is in), or waiting too long, or all."""
        now = time.monotonic()
        for span in spans:
            self.pending.setdefault(span.trace_id, []).append(span)
            self.first_seen.setdefault(span.trace_id, now)
        done = [
            t
            for t, members in self.pending.items()
            if flush or now - self.first_seen[t] > TRACE_WAIT_S or any(s.parent_id is None for s in members)
        ]
        out: list[Span] = []
        for trace_id in done:
            out.extend(self.pending.pop(trace_id))
            del self.first_seen[trace_id]
        return out

    def _accept(self, traces: _Traces) -> None:
        service = self.service
        metrics = service.metrics.traces
        metrics.labels(outcome="error").inc(len(traces.errors))
        metrics.labels(outcome="not_rag").inc(len(traces.skipped))
        self._write(
            [{"trace_id": e.id, "error": {"field": e.field, "message": e.message}} for e in traces.errors]
            + [{"trace_id": s.trace_id, "not_rag": str(s)} for s in traces.skipped]
        )
        if traces.rows:
            self.backlog += len(traces.rows)
            task = asyncio.get_running_loop().create_task(self._score(traces))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    def _answer(self, traces: _Traces, proto: bool) -> Response:
        partial: dict[str, Any] = {}
        if traces.errors:
            first = traces.errors[0]
            partial = {
                "rejectedSpans": len(traces.errors),
                "errorMessage": f"{len(traces.errors)} traces not scored; first: trace {first.id}: "
                f"{first.field}: {first.message}"[:500],
            }
        if not proto:
            return json_response({"partialSuccess": partial} if partial else {})
        service = require_module(
            "opentelemetry.proto.collector.trace.v1.trace_service_pb2", "traces", "answering OTLP protobuf"
        )
        message = service.ExportTraceServiceResponse()
        if partial:
            message.partial_success.rejected_spans = partial["rejectedSpans"]
            message.partial_success.error_message = partial["errorMessage"]
        return Response(message.SerializeToString(), media_type=PROTOBUF)

    async def _score(self, traces: _Traces) -> None:
        service = self.service
        threshold = service.guard.policy.threshold(None)
        size = service.config.limits.max_rows
        try:
            for start in range(0, len(traces.rows), size):
                chunk = traces.rows[start : start + size]
                payload = service.payload(chunk, Options(), threshold, WEAKEST)
                result = await self._submit(payload, chunk)
                self.backlog -= len(chunk)
                self._record(chunk, result, traces.spans)
        except NotAccepting:
            logger.warning("guard: trace rows dropped at shutdown")
        except Exception as exc:  # a bug: keep serving, say so
            logger.error("guard: scoring traces failed: %s", type(exc).__name__)
        finally:
            self.backlog = max(0, self.backlog)

    async def _submit(self, payload: Any, chunk: list[CheckRow]) -> Any:
        while True:  # the export was accepted: wait for room rather than drop its rows
            try:
                return await self.service.batcher.submit(
                    payload, rows=len(chunk), tokens=estimate_tokens(chunk)
                )
            except QueueFull as exc:
                await asyncio.sleep(exc.retry_after)

    def _record(self, chunk: list[CheckRow], result: Any, spans: dict[str, str]) -> None:
        metrics = self.service.metrics
        records: list[dict[str, Any]] = []
        if isinstance(result, GuardRequestError):  # over the token limits: every row of the job
            metrics.traces.labels(outcome="error").inc(len(chunk))
            error = {"field": result.field, "message": result.message}
            records = [{"trace_id": r.id, "span_id": spans[str(r.id)], "error": error} for r in chunk]
        else:
            for row, shaped in zip(chunk, result, strict=True):
                metrics.traces.labels(outcome="scored").inc()
                metrics.trace_verdicts.labels(
                    verdict=str(shaped.get("verdict")), passed=str(shaped["passed"])
                ).inc()
                keep = ("passed", "min_consens", "consens", "verdict", "weakest_words", "model", "errors")
                records.append(
                    {"trace_id": row.id, "span_id": spans[str(row.id)], **{k: shaped.get(k) for k in keep}}
                )
        self._write(records)

    async def drain(self) -> None:
        """Score what waits for its root span, then wait for every accepted trace (shutdown: before
        the worker stops)."""
        waiting = self._complete([], flush=True)
        if waiting:
            self._accept(rows_of(waiting, self.service.config.limits))
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
