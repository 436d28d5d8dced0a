"""``POST /v1/traces``: the guard as an OTLP/HTTP trace receiver that scores the RAG traces it gets.

An OpenTelemetry exporter (``OTLPSpanExporter(endpoint="http://127.0.0.1:8000/v1/traces")``) sends
``ExportTraceServiceRequest`` bodies as protobuf (``application/x-protobuf``) or JSON
(``application/json``), plain or gzip-compressed (``Content-Encoding: gzip``, the Collector's default).
The request goes through the same intake as ``/v1/check``: Host/Origin (403), API key (401), media type
and encoding (415), body size, inflated size and time (413, 408), the per-key slot (429). Then, one
export at a time and in a thread: the spans are counted from the body without decoding it, and an
export of more than :data:`MAX_EXPORT_SPANS` is refused with 413 (it can never be accepted: a 429
would have the exporter retry it forever), late by ``hostile_delay_s`` as ``/v1/check`` answers a
body no client sends by mistake; the rest is decoded, keeping only the attributes a row is made from.

An exporter sends a trace's spans as they end, across requests, so spans wait until their trace's
root span is in (it ends last), or ``trace_wait_s`` (default 30 s) after the first: a task of the
receiver's own expires them, whether or not exports arrive or are refused. The waiting spans are
bounded in number (:data:`MAX_PENDING_SPANS`) and in characters (:data:`MAX_PENDING_CHARS`, counting
every string a span keeps: ids, name, attributes). Whole traces are
made rows exactly as ``ragsense evaluate --from otlp`` does (:func:`ragsense.traces.trace_rows`), each
row checked against the request limits, at most ``max_export_rows`` an export (the others are
rejected in the answer). Accepted but unscored rows are bounded (:data:`BACKLOG_FACTOR` x
``max_queue_rows``), counting the export's own rows: over that, 429 with Retry-After, which OTLP
exporters honour, and nothing of the export is kept. The export is answered as soon as its traces are
accepted (an OTLP exporter waits only seconds); the rows are then scored through the same
micro-batcher as ``/v1/check``, one job of at most ``max_rows`` at a time and only when no
``/v1/check`` rows wait, so that ``/v1/check`` never queues behind more than one trace job; each
result is appended to the JSONL sink (``--trace-sink``) and
counted on ``/metrics``. Malformed traces (whatever one of their spans holds, nesting included) are
answered in the OTLP ``partialSuccess`` and written to the sink as errors; traces that are not RAG
traces are counted (``not_rag``) and written to the sink. A sink write that fails is logged and
counted (``ragsense_guard_trace_sink_errors``); scoring goes on and the backlog is released.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from ragsense.data import RowError, require_module
from ragsense.errors import InputError
from ragsense.guard._batcher import NotAccepting, QueueFull
from ragsense.guard._check import Options
from ragsense.guard._config import BACKLOG_FACTOR
from ragsense.guard._intake import inflater_for, is_json_media_type, json_response
from ragsense.guard._limits import (
    GuardRequestError,
    Limits,
    check_request_limits,
    estimate_tokens,
    parse_json_body,
)
from ragsense.guard._schema import CheckRequest, CheckRow
from ragsense.traces import (
    SkippedTrace,
    Span,
    count_otlp_spans,
    count_proto_spans,
    otlp_proto_request,
    otlp_spans,
    row_attribute,
    trace_rows,
)

logger = logging.getLogger("ragsense.guard")

PROTOBUF = "application/x-protobuf"
MAX_EXPORT_SPANS = 10_000
"""Spans one export may hold; over that, 413 (the OTel SDK sends 512 at most; set a Collector's
``send_batch_max_size`` at or below this)."""
MAX_PENDING_SPANS = 10_000
"""Spans waiting for their root at most; over that, 429."""
MAX_PENDING_CHARS = 32 * 1024 * 1024
"""Characters of the waiting spans' kept attributes at most (about their memory); over that, 429."""
WEAKEST = 3
IDLE_POLL_S = 0.005
"""How often waiting trace rows look whether the batcher's queue is empty (``/v1/check`` goes first)."""
HOSTILE = frozenset({"too_many_spans", "inflated_too_large"})
"""Refusals no exporter earns by mistake: answered after ``hostile_delay_s``, as ``/v1/check`` does."""


@dataclass(frozen=True)
class _Traces:
    rows: list[CheckRow]  # id: the trace id
    spans: dict[str, str]  # trace id -> the scored (LLM) span id
    errors: list[RowError]
    skipped: list[SkippedTrace]
    rejected_spans: int = 0  # the spans of the traces in errors (OTLP's partialSuccess counts spans)


def _media(content_type: str | None) -> str:
    if is_json_media_type(content_type):
        return "json"
    if content_type is not None and content_type.partition(";")[0].strip().lower() == PROTOBUF:
        return "protobuf"
    raise GuardRequestError(
        415, "unsupported_media_type", f"send OTLP as {PROTOBUF} or application/json", field="body"
    )


def _too_many(count: int) -> GuardRequestError:
    return GuardRequestError(
        413,
        "too_many_spans",
        f"the export holds more than {MAX_EXPORT_SPANS} spans ({count:,} counted before stopping); "
        "send smaller batches",
        field="body",
    )


def parse_spans(raw: bytes, media: str, max_chars: int) -> list[Span]:
    """The body's spans (in a thread), keeping only the attributes rows are made from; 413 for an
    export of too many spans (counted first, without decoding), 400 for one that is not OTLP.

    ``max_chars``: the longest attribute kept; a longer one makes its trace an error at once (no row
    could take it), so a waiting span holds no more than that per attribute.
    """
    try:
        if media == "protobuf":
            count = count_proto_spans(raw, MAX_EXPORT_SPANS)
            if count > MAX_EXPORT_SPANS:
                raise _too_many(count)
            request: Any = otlp_proto_request(raw)
        else:
            request = parse_json_body(raw)
            if not isinstance(request, dict):
                raise InputError("the body must be a JSON object", field="body")
            count = count_otlp_spans(request)
            if count > MAX_EXPORT_SPANS:
                raise _too_many(count)
        return list(otlp_spans(request, max_chars=max_chars, keep=row_attribute))
    except InputError as exc:
        raise GuardRequestError(400, "invalid_otlp", str(exc), field=exc.field or "body") from None
    except RecursionError:
        raise GuardRequestError(
            400, "invalid_otlp", "the export is nested too deeply", field="body"
        ) from None


def span_chars(span: Span) -> int:
    """About how much a waiting span holds: every string it keeps (ids, name, attribute keys and
    values; a sender may make any of them long), plus a fixed overhead for the span itself."""
    ids = len(span.trace_id) + len(span.span_id) + len(span.parent_id or "")
    return 128 + ids + len(span.name) + sum(len(k) + _chars(v) for k, v in span.attributes.items())


def _chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, Mapping):
        return sum(len(str(k)) + _chars(v) for k, v in value.items())
    if isinstance(value, list):
        return sum(_chars(v) for v in value)
    return 8


def rows_of(spans: list[Span], limits: Limits, max_rows: int, over: str | None = None) -> _Traces:
    """Whole traces' spans as rows within the request limits (an over-limit trace is an error), at
    most ``max_rows`` of them (the traces after those are errors too, saying ``over``)."""
    made = trace_rows(spans)
    rows: list[CheckRow] = []
    ids: dict[str, str] = {}
    errors = [r for r in made if isinstance(r, RowError)]
    for row in made:
        if isinstance(row, RowError):
            continue
        if len(rows) == max_rows:
            message = (
                over or f"the export holds more than {max_rows} RAG traces (max_export_rows); send fewer"
            )
            errors.append(RowError(len(rows), row.id, None, message, {"trace_id": row.id}))
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
    members = Counter(s.trace_id for s in spans)
    return _Traces(rows, ids, errors, made.skipped, sum(members[str(e.id)] for e in errors))


class TraceReceiver:
    """The ``/v1/traces`` handler, its backlog of accepted rows and its JSONL sink."""

    def __init__(self, service: Any) -> None:
        # service: the GuardService (guard/_app.py) that owns this receiver; not imported, so the two
        # modules do not import each other.
        self.service = service
        self.backlog = 0
        # Spans wait here until their trace's root span arrives (an exporter sends a trace's spans as
        # they end, across requests; the root ends last), or trace_wait_s has passed since the first.
        self.pending: dict[str, list[Span]] = {}
        self.first_seen: dict[str, float] = {}
        self.pending_spans = 0
        self.pending_chars = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.expiry: asyncio.Task[None] | None = None
        self.sink = Path(service.config.trace_sink) if service.config.trace_sink else None
        # One export is decoded and made rows at a time: its decoding thread is the only one competing
        # with the event loop, and the waiting spans change only between its checks and its commit.
        self.intake = asyncio.Lock()
        # One job of trace rows in the batcher's queue at a time: /v1/check keeps the rest of it.
        self.scoring = asyncio.Lock()
        limits = service.config.limits
        self.max_chars = max(limits.max_question_chars, limits.max_answer_chars, limits.max_document_chars)

    def _write(self, records: Sequence[dict[str, Any]]) -> None:
        """Append to the sink; a failed write (a full disk, a removed directory) is logged and counted,
        never raised: it must not stop the scoring of the rows after it nor keep them in the backlog."""
        if self.sink is None or not records:
            return
        text = "".join(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in records)
        try:
            with self.sink.open("a", encoding="utf-8") as out:
                out.write(text)
        except OSError as exc:
            self.service.metrics.trace_sink_errors.inc(len(records))
            logger.error(
                "guard: %d trace records not written to the trace sink: %s",
                len(records),
                exc.strerror or type(exc).__name__,
            )

    async def receive(self, request: Request) -> Response:
        service = self.service
        started = time.perf_counter()
        status, key_id, holding, proto = 500, None, False, False
        try:
            key_id = service.authenticate(request)
            media = _media(request.headers.get("content-type"))
            proto = media == "protobuf"
            limit = service.config.limits.max_body_bytes
            inflate = inflater_for(request.headers.get("content-encoding"), limit)
            raw = await service.read_body(request, count_values=False, inflate=inflate)
            service._take_slot(key_id)
            holding = True
            self._check_room(spans=1, rows=1)  # before any decoding: a full receiver refuses cheaply
            async with self.intake:
                spans = await asyncio.to_thread(parse_spans, raw, media, self.max_chars)
                traces = await self._take(spans)
            self._accept(traces)
            status = 200
            return self._answer(traces, proto)
        except GuardRequestError as exc:
            status = exc.status
            if status in (400, 413, 415, 422):
                service.metrics.reject("invalid")
            if exc.kind in HOSTILE:
                if holding and key_id is not None:  # the delay holds no slot
                    service.limiter.release(key_id)
                    holding = False
                await asyncio.sleep(service.config.hostile_delay_s)
            return json_response(exc.body(), status, exc.headers)
        except Exception as exc:  # a bug, never input: answer in JSON and keep serving
            logger.error("guard: trace export failed: %s", type(exc).__name__)
            return json_response(GuardRequestError(500, "internal_error", "internal error").body(), 500)
        finally:
            if holding and key_id is not None:
                service.limiter.release(key_id)
            service.metrics.request("/v1/traces", status, time.perf_counter() - started)

    def _check_room(self, spans: int = 0, chars: int = 0, rows: int = 0) -> None:
        """503 while the model loads or the server drains; 429 when the backlog, counting ``rows``
        more, or the waiting spans, counting ``spans`` and ``chars`` more, would pass their bounds."""
        service = self.service
        if service.draining or not service.batcher.ready:
            raise GuardRequestError(
                503, "unavailable", "the model is not ready", headers={"Retry-After": "5"}
            )
        backlog = self.backlog + rows > BACKLOG_FACTOR * service.config.max_queue_rows
        waiting = (
            self.pending_spans + spans > MAX_PENDING_SPANS or self.pending_chars + chars > MAX_PENDING_CHARS
        )
        if backlog or waiting:
            service.metrics.reject("queue_full")
            what = "trace rows wait to be scored" if backlog else "spans wait for their traces' root span"
            raise GuardRequestError(
                429, "queue_full", f"too many {what}; retry later", headers={"Retry-After": "5"}
            )

    async def _take(self, spans: list[Span], *, expire: bool = False, flush: bool = False) -> _Traces:
        """The rows of every trace the export makes whole (its root span is in); the export's other
        spans wait, and nothing changes on a refusal (429). ``expire``: also the traces that waited
        over ``trace_wait_s``; ``flush``: every waiting trace (shutdown). These are never refused:
        traces past the backlog's room become errors instead, so that waiting spans always leave."""
        now = time.monotonic()
        wait_s = self.service.config.trace_wait_s
        arrived: dict[str, list[Span]] = {}
        for span in spans:
            arrived.setdefault(span.trace_id, []).append(span)
        sizes = {t: sum(span_chars(s) for s in members) for t, members in arrived.items()}

        def whole(trace_id: str) -> bool:
            if flush or (expire and now - self.first_seen.get(trace_id, now) > wait_s):
                return True
            members = [*self.pending.get(trace_id, ()), *arrived.get(trace_id, ())]
            return any(s.parent_id is None for s in members)

        done = [t for t in {**self.pending, **arrived} if whole(t)]
        waiting = [t for t in arrived if t not in done]
        leaving = [s for t in done for s in self.pending.get(t, ())]
        export = not (expire or flush)
        if export:
            self._check_room(
                spans=sum(len(arrived[t]) for t in waiting) - len(leaving),
                chars=sum(sizes[t] for t in waiting) - sum(span_chars(s) for s in leaving),
            )
        complete = [s for t in done for s in (*self.pending.get(t, ()), *arrived.get(t, ()))]
        config = self.service.config
        if export:
            traces = await asyncio.to_thread(rows_of, complete, config.limits, config.export_rows)
            self._check_room(rows=len(traces.rows))
        else:
            room = max(0, BACKLOG_FACTOR * config.max_queue_rows - self.backlog)
            over = "the trace's root span never came and the trace backlog was full; not scored"
            traces = await asyncio.to_thread(rows_of, complete, config.limits, room, over)
        self._release(done)  # commit: nothing awaited since the checks
        for trace_id in waiting:
            self.pending.setdefault(trace_id, []).extend(arrived[trace_id])
            self.first_seen.setdefault(trace_id, now)
            self.pending_spans += len(arrived[trace_id])
            self.pending_chars += sizes[trace_id]
        return traces

    def _release(self, trace_ids: Sequence[str]) -> None:
        """Forget these waiting traces and give back what they counted."""
        for trace_id in trace_ids:
            members = self.pending.pop(trace_id, [])
            self.first_seen.pop(trace_id, None)
            self.pending_spans -= len(members)
            self.pending_chars -= sum(span_chars(s) for s in members)

    def start(self) -> None:
        """Start expiring waiting traces on the receiver's own clock (from the app's lifespan)."""
        self.expiry = asyncio.get_running_loop().create_task(self._expire_loop())

    async def _expire_loop(self) -> None:
        """Every fraction of ``trace_wait_s``, read the traces that waited longer as they are. This
        runs whatever exports do: a full receiver refuses exports (429) and would otherwise never
        reach the step that lets its waiting spans go."""
        wait_s = self.service.config.trace_wait_s
        while True:
            await asyncio.sleep(min(1.0, wait_s / 4))
            now = time.monotonic()
            expired = [t for t, seen in self.first_seen.items() if now - seen > wait_s]
            if not expired:
                continue
            async with self.intake:
                try:
                    self._accept(await self._take([], expire=True))
                except Exception as exc:  # a bug: the expired traces still leave, as errors
                    self._give_up(expired, "expiring waiting traces", exc)

    def _give_up(self, trace_ids: list[str], doing: str, exc: Exception) -> None:
        """Waiting traces that could not be read (a bug, never input): they leave all the same, counted
        as errors, so that they cannot fail every later export or the shutdown."""
        logger.error("guard: %s failed: %s", doing, type(exc).__name__)
        self.service.metrics.traces.labels(outcome="error").inc(len(trace_ids))
        self._release(trace_ids)

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
                "rejectedSpans": traces.rejected_spans,
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
        scored = 0
        try:
            for start in range(0, len(traces.rows), size):
                chunk = traces.rows[start : start + size]
                payload = service.payload(chunk, Options(), threshold, WEAKEST)
                async with self.scoring:
                    result = await self._submit(payload, chunk)
                self.backlog -= len(chunk)
                scored += len(chunk)
                self._record(chunk, result, traces.spans)
        except NotAccepting:
            logger.warning("guard: trace rows dropped at shutdown")
        except Exception as exc:  # a bug: keep serving, say so
            logger.error("guard: scoring traces failed: %s", type(exc).__name__)
        finally:
            # Rows that will never be scored leave the backlog (else it fills and refuses for good).
            lost = len(traces.rows) - scored
            if lost:
                service.metrics.traces.labels(outcome="error").inc(lost)
            self.backlog = max(0, self.backlog - lost)

    async def _submit(self, payload: Any, chunk: list[CheckRow]) -> Any:
        batcher = self.service.batcher
        while True:  # the export was accepted: wait for room rather than drop its rows
            while batcher.queued_rows:  # /v1/check first: trace rows take the queue when it is idle
                await asyncio.sleep(IDLE_POLL_S)
            try:
                return await batcher.submit(payload, rows=len(chunk), tokens=estimate_tokens(chunk))
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
        if self.expiry is not None:
            self.expiry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.expiry
        async with self.intake:
            try:
                self._accept(await self._take([], flush=True))
            except Exception as exc:  # a bug: shutdown still goes on, and the scored traces drain
                self._give_up(list(self.pending), "reading the waiting traces at shutdown", exc)
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
