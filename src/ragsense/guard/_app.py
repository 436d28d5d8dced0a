"""The FastAPI application: ``POST /v1/check``, ``GET /health``, ``/ready``, ``/metrics``, ``/docs`` (opt-in).

A ``/v1/check`` request goes: Host/Origin (403, every endpoint) -> API key (401) -> media type
``application/json`` (415) -> body read under its size limit (413) and its time limit (408) -> in a
thread: no more JSON values than a valid request can hold, counted before parsing (400), strict
UTF-8 JSON without NaN/Infinity or oversized objects (400), the pydantic request model
with its list caps (422), counts and characters per field (422) -> per-key slot (429) -> the
micro-batcher's bounded queue (429 when full) -> the model worker (tokens per field, 422; then ConSens
on the evaluation runner) -> the policy -> 200. Every refusal is JSON naming its field; no path
answers 500 for bad input. The body is read by hand rather than by FastAPI's parameter binding so that
each of those steps answers with its own status.

Why this order: the per-key slot is taken only once the whole body is in, so a client that uploads
slowly holds a connection (for at most the body timeout) but never a slot that other callers of its
key need; and parsing and validation run off the event loop, so a body built to be expensive to refuse
does not stall ``/health`` or other clients.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.requests import ClientDisconnect

from ragsense._access import allowed_hosts, presented_key
from ragsense.errors import ParameterError
from ragsense.guard._auth import ANONYMOUS, KeyLimiter
from ragsense.guard._batcher import MicroBatcher, NotAccepting, QueueFull
from ragsense.guard._check import Guard, Options, shape_result
from ragsense.guard._config import GuardConfig
from ragsense.guard._intake import HostCheck, Inflater, is_json_media_type, json_response, validation_error
from ragsense.guard._limits import (
    GuardRequestError,
    ValueCounter,
    check_request_limits,
    check_value_count,
    estimate_tokens,
    max_values,
    parse_json_body,
    token_violation,
)
from ragsense.guard._memory import release_free_memory, resident_bytes
from ragsense.guard._metrics import GuardMetrics
from ragsense.guard._schema import CheckResponse, CheckRow, request_model
from ragsense.guard._traces import TraceReceiver

logger = logging.getLogger("ragsense.guard")

# Not an HTTP status a client sees: nginx's code for "the client closed the connection", so that
# disconnects are counted apart from the server's own failures (500) in /metrics and the log.
CLIENT_CLOSED = 499

_WARMUP = CheckRow(
    question="Who wrote it?", contexts=["Ada Lovelace wrote it."], answer="Ada Lovelace wrote it."
)


@dataclass(frozen=True)
class _Payload:
    """One request's work for the model worker."""

    rows: list[CheckRow]
    options: Options
    min_consens: float
    weakest: int
    batch: bool


class GuardService:
    """The service behind the app: the guard, its model worker, the limiter, the metrics."""

    def __init__(self, config: GuardConfig) -> None:
        self.config = config
        self.guard = Guard(
            config.model,
            model_options=config.model_options,
            judge=config.judge,
            judge_options=config.judge_options,
            policy=config.policy,
            pool=config.pool,
            bands=config.bands,
        )
        self.batcher = MicroBatcher(
            self._score,
            setup=self._setup,
            teardown=self.guard.aclose,
            max_batch_rows=config.max_batch_rows,
            max_batch_tokens=config.max_batch_tokens,
            max_wait_s=config.max_wait_ms / 1000,
            max_queue_rows=config.max_queue_rows,
            on_batch=self._on_batch,
            failed_rows=lambda result: sum(1 for r in result if r.get("consens") is None),
        )
        self.metrics = GuardMetrics(queue_rows=lambda: self.batcher.queued_rows)
        self.limiter = KeyLimiter(
            concurrency=config.concurrency_per_key, rate=config.rate_per_key, burst=config.burst
        )
        self.draining = False
        self.model_name: str | None = None
        # The request model with this server's list caps in its schema (see request_model).
        self.request_model = request_model(config.limits.max_rows, config.limits.max_documents)
        self.traces = TraceReceiver(self)

    # -- the model worker's side ---------------------------------------------------------------
    async def _setup(self) -> None:
        await self.guard.setup()
        self.model_name = self.guard.model.info.name
        if self.config.warmup:  # the first pass allocates; /ready waits for it
            await self.guard.acheck([_WARMUP])
        logger.info("guard: model %s ready", self.model_name)

    async def _score(self, payloads: Sequence[_Payload]) -> list[list[dict[str, Any]] | GuardRequestError]:
        out: list[list[dict[str, Any]] | GuardRequestError] = []
        groups: list[tuple[list[CheckRow], Options]] = []
        places: list[int] = []
        count = self.guard.model.count_tokens
        for payload in payloads:
            error = token_violation(payload.rows, count, self.config.limits, batch=payload.batch)
            if error is None:
                places.append(len(out))
                groups.append((payload.rows, payload.options))
            out.append(error if error is not None else [])
        records = await self.guard.records(groups) if groups else []
        if self.config.release_memory:
            # Each batch frees tensors of new shapes; without this the allocator keeps them, fragmented,
            # and resident memory grows over hours although nothing is kept (docs/guard.md, "Memory").
            release_free_memory()
        resident = resident_bytes()
        if resident is not None:
            self.metrics.resident_after_batch.set(resident)
        for place, group_records in zip(places, records, strict=True):
            payload = payloads[place]
            out[place] = [
                shape_result(
                    rec,
                    row.id if row.id is not None else str(k),
                    payload.min_consens,
                    payload.weakest,
                    self.guard.bands,
                )
                for k, (row, rec) in enumerate(zip(payload.rows, group_records, strict=True))
            ]
        return out

    def _on_batch(self, stats: Any) -> None:
        self.metrics.batch(stats)

    # -- the event loop's side -----------------------------------------------------------------
    def authenticate(self, request: Request) -> str:
        """The caller's key id (``anonymous`` without configured keys); 401 otherwise."""
        keys = self.config.api_keys
        if not keys:
            return ANONYMOUS
        presented = presented_key(request.headers.get)
        challenge = {"WWW-Authenticate": 'Bearer realm="ragsense-guard"'}
        if presented is None:
            self.metrics.reject("auth")
            raise GuardRequestError(
                401,
                "unauthorized",
                "an API key is required (Authorization: Bearer KEY or X-API-Key)",
                field="authorization",
                headers=challenge,
            )
        key_id = keys.identify(presented)
        if key_id is None:
            self.metrics.reject("auth")
            raise GuardRequestError(
                401, "unauthorized", "the API key is not valid", field="authorization", headers=challenge
            )
        return key_id

    async def read_body(
        self, request: Request, *, count_values: bool = True, inflate: Inflater | None = None
    ) -> bytes:
        """The body, within its size (413), its time limit (408: a trickled upload is cut off) and a
        count of its values (400: a body built to be expensive to parse is refused as it arrives; not
        for OTLP, whose protobuf has no commas to count and whose JSON is bounded by its size).
        ``inflate``: a gzip body's inflater; the inflated body keeps the same size limit."""
        limit = self.config.limits.max_body_bytes
        declared = request.headers.get("content-length")
        too_big = GuardRequestError(413, "body_too_large", f"the body is over {limit} bytes", field="body")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise too_big  # refused before a byte of it is read
        chunks: list[bytes] = []
        total = 0
        values = ValueCounter(max_values(self.config.limits))
        try:
            async with asyncio.timeout(self.config.body_timeout_s):
                async for chunk in request.stream():
                    total += len(chunk)
                    if total > limit:
                        raise too_big
                    if inflate is not None:
                        chunk = inflate.feed(chunk)
                    if count_values:
                        values.feed(chunk)
                    chunks.append(chunk)
            if inflate is not None:
                inflate.finish()
        except TimeoutError:
            self.metrics.reject("body_timeout")
            raise GuardRequestError(
                408,
                "body_timeout",
                f"the body was not received within {self.config.body_timeout_s:g} s",
                field="body",
                headers={"Connection": "close"},  # the rest of the body is not read: drop the connection
            ) from None
        return b"".join(chunks)

    def parse(self, raw: bytes, header_id: str | None) -> tuple[str, _Payload]:
        """The request id and the worker's payload from a body, or a 400/422 naming the field.

        Runs in a thread (see the module docstring): it touches nothing shared but read-only settings.
        """
        check_value_count(raw, max_values(self.config.limits))
        obj = parse_json_body(raw)
        if not isinstance(obj, dict):
            raise GuardRequestError(422, "invalid_request", "the body must be a JSON object", field="body")
        try:
            parsed = self.request_model.model_validate(obj)
        except ValidationError as exc:
            raise validation_error(exc) from None
        rows = check_request_limits(parsed, self.config.limits)
        request_id = parsed.id or header_id or uuid.uuid4().hex
        if len(request_id) > self.config.limits.max_id_chars or not request_id.isprintable():
            field = "id" if parsed.id else "X-Request-ID"
            raise GuardRequestError(
                422, "invalid_id", f"{field} must be at most 128 printable characters", field=field
            )
        if parsed.rows is None and rows[0].id is None:
            # A single row is named by the request's id, however it was given (X-Request-ID, or made
            # here), so its result and the response carry the same id (docs/guard.md).
            rows = [rows[0].model_copy(update={"id": request_id})]
        try:
            threshold = self.guard.policy.threshold(parsed.min_consens)
        except ParameterError as exc:
            raise GuardRequestError(422, "out_of_bounds", str(exc), field="min_consens") from None
        if parsed.adherence and not self.guard.has_judge:
            raise GuardRequestError(
                422,
                "no_judge",
                "adherence needs a VERA judge; start the guard with --judge",
                field="adherence",
            )
        options = Options(attribution=parsed.attribution, adherence=parsed.adherence)
        return request_id, self.payload(rows, options, threshold, parsed.weakest, parsed.rows is not None)

    @staticmethod
    def payload(
        rows: list[CheckRow], options: Options, threshold: float, weakest: int, batch: bool = True
    ) -> _Payload:
        """One job for the model worker (``/v1/check`` and ``/v1/traces`` alike)."""
        return _Payload(rows, options, threshold, weakest, batch)

    def _take_slot(self, key_id: str) -> None:
        """Take one of the key's slots, or 429: only once the body is in, so an upload holds none."""
        wait = self.limiter.acquire(key_id)
        if wait is not None:
            self.metrics.reject("key_limit")
            raise GuardRequestError(
                429,
                "too_many_requests",
                f"too many requests for key {key_id}",
                headers={"Retry-After": str(wait)},
            )

    async def check(self, request: Request) -> Response:
        started = time.perf_counter()
        request_id, status, rows = "-", 500, 0
        key_id: str | None = None
        holding = False  # whether a slot of key_id must be given back
        try:
            key_id = self.authenticate(request)
            if not is_json_media_type(request.headers.get("content-type")):
                raise GuardRequestError(
                    415, "unsupported_media_type", "send the body as application/json", field="body"
                )
            if (request.headers.get("content-encoding") or "identity").strip().lower() != "identity":
                # Only /v1/traces inflates (OTLP exporters compress); a compressed check is refused as
                # a media problem (415), not read as broken JSON (400).
                raise GuardRequestError(
                    415,
                    "unsupported_encoding",
                    "send /v1/check bodies as they are, without a Content-Encoding",
                    field="content-encoding",
                )
            raw = await self.read_body(request)
            request_id, payload = await asyncio.to_thread(
                self.parse, raw, request.headers.get("x-request-id")
            )
            rows = len(payload.rows)
            self._take_slot(key_id)
            holding = True
            response = await self._submit(request_id, payload)
            # The batch was scored whole; a client gone meanwhile gets nothing, and is counted apart.
            status = CLIENT_CLOSED if await request.is_disconnected() else 200
            return response
        except GuardRequestError as exc:
            status = exc.status
            if status in (413, 415, 422, 400):
                self.metrics.reject("invalid")
            if exc.kind == "too_many_values":
                # No client sends that by mistake: answer it late, so that a connection looping such
                # bodies sends one a second rather than hundreds (holding no slot meanwhile).
                await asyncio.sleep(self.config.hostile_delay_s)
            headers = {**exc.headers, "X-Request-ID": request_id} if request_id != "-" else exc.headers
            return json_response(exc.body(), status, headers)
        except ClientDisconnect:  # gone while sending its body: no one to answer
            status = CLIENT_CLOSED
            return Response(status_code=CLIENT_CLOSED)
        except asyncio.CancelledError:  # the server cancelled the request (its connection was lost)
            status = CLIENT_CLOSED
            raise
        except Exception as exc:  # a bug, never input: answer in JSON and keep serving
            logger.error("guard: request %s failed: %s", request_id, type(exc).__name__)
            return json_response(GuardRequestError(500, "internal_error", "internal error").body(), 500)
        finally:
            if holding and key_id is not None:
                self.limiter.release(key_id)
            seconds = time.perf_counter() - started
            self.metrics.request("/v1/check", status, seconds)
            logger.info(
                "request %s key=%s rows=%d -> %d in %.1f ms", request_id, key_id, rows, status, seconds * 1000
            )

    async def _submit(self, request_id: str, payload: _Payload) -> Response:
        if self.draining:
            raise GuardRequestError(
                503, "unavailable", "the server is shutting down", headers={"Retry-After": "1"}
            )
        logger.info("request %s accepted rows=%d", request_id, len(payload.rows))
        if self.config.log_content:
            content = [row.model_dump() for row in payload.rows]
            logger.info("request %s content %s", request_id, json.dumps(content, ensure_ascii=False))
        try:
            submitted = self.batcher.submit(
                payload, rows=len(payload.rows), tokens=estimate_tokens(payload.rows)
            )
            results = await asyncio.wait_for(submitted, self.config.timeout_s)
        except QueueFull as exc:
            self.metrics.reject("queue_full")
            raise GuardRequestError(
                429, "queue_full", str(exc), headers={"Retry-After": str(exc.retry_after)}
            ) from None
        except NotAccepting as exc:
            raise GuardRequestError(503, "unavailable", str(exc), headers={"Retry-After": "5"}) from None
        except TimeoutError:
            raise GuardRequestError(504, "timeout", f"not scored within {self.config.timeout_s} s") from None
        body = {
            "id": request_id,
            "passed": all(r["passed"] for r in results),
            "model": self.model_name,
            "results": results,
        }
        return json_response(body, 200, {"X-Request-ID": request_id})


def create_app(config: GuardConfig, *, bind: tuple[str, int] | None = None) -> FastAPI:
    """The guard's FastAPI app; its lifespan starts the model worker and drains it on shutdown.

    ``bind``: the address and port the server listens on; on a loopback address only a Host header
    naming it is served (the DNS-rebinding defence). Without it, only the Origin is checked.
    """
    service = GuardService(config)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service.batcher.start()
        service.traces.start()
        yield
        service.draining = True
        await service.traces.drain()  # accepted traces are scored before the worker stops
        await asyncio.to_thread(service.batcher.close)  # finishes what is queued

    # FastAPI's own documentation routes are off: they load scripts from public CDNs and are not
    # behind the key. With config.docs they are added below, behind it.
    app = FastAPI(
        title="ragsense guard",
        summary="ConSens grounding checks",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.service = service
    app.add_middleware(
        HostCheck,
        reject=service.metrics.reject,
        allowed=None if bind is None else allowed_hosts(bind[0], bind[1]),
    )
    errors = {code: {"description": text} for code, text in _ERROR_CODES.items()}
    body = {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/CheckRequest"}}},
        }
    }

    @app.post("/v1/check", response_model=CheckResponse, responses=errors, openapi_extra=body)  # type: ignore[arg-type]
    async def check(request: Request) -> Response:
        """Score one row or a batch with ConSens and judge each against the pass threshold."""
        return await service.check(request)

    @app.post("/v1/traces", responses=errors)  # type: ignore[arg-type]
    async def traces(request: Request) -> Response:
        """OTLP/HTTP traces (protobuf or JSON): RAG traces are scored; results on /metrics and the sink."""
        return await service.traces.receive(request)

    @app.get("/health")
    async def health() -> dict[str, str]:
        """Alive: the process answers."""
        return {"status": "ok"}

    @app.get("/ready")
    async def ready(request: Request) -> Response:
        """Ready: the model is loaded and warmed, and the server is not shutting down (else 503).

        Answered without a key on purpose: load balancers and orchestrators probe it without one. The
        model's name is told only to a caller with a valid key (or on a server without keys)."""
        if service.batcher.ready and not service.draining:
            answer = {"status": "ready"}
            if authorized(request) is None:
                answer["model"] = str(service.model_name)
            return json_response(answer)
        state = "failed" if service.batcher.setup_error else ("draining" if service.draining else "loading")
        return json_response({"status": state}, 503)

    def authorized(request: Request) -> Response | None:
        """None when the request may go on, else the 401 to answer (keys configured, none valid)."""
        try:
            service.authenticate(request)
        except GuardRequestError as exc:
            return json_response(exc.body(), exc.status, exc.headers)
        return None

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        """Prometheus metrics (behind the API key when keys are configured)."""
        refused = authorized(request)
        if refused is not None:
            return refused
        return Response(service.metrics.exposition(), media_type=GuardMetrics.content_type)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version="1", routes=app.routes, summary=app.summary)
            model = service.request_model
            request_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components.update(request_schema.pop("$defs", {}))
            components["CheckRequest"] = request_schema
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    if config.docs:

        @app.get("/openapi.json", include_in_schema=False)
        async def openapijson_response(request: Request) -> Response:
            return authorized(request) or json_response(openapi())

        @app.get("/docs", include_in_schema=False)
        async def docs(request: Request) -> Response:
            return authorized(request) or get_swagger_ui_html(openapi_url="/openapi.json", title=app.title)

        @app.get("/redoc", include_in_schema=False)
        async def redoc(request: Request) -> Response:
            return authorized(request) or get_redoc_html(openapi_url="/openapi.json", title=app.title)

    return app


_ERROR_CODES = {
    400: "malformed body: not UTF-8, not JSON, NaN/Infinity, a number out of range, an oversized object",
    401: "API key missing or not valid",
    403: "Host not this server's loopback address, or a cross-origin Origin",
    408: "body not received within the body timeout",
    413: "body over the size limit",
    415: "body not sent as application/json (/v1/traces: or application/x-protobuf)",
    422: "a field of the wrong type, missing, empty, or over its limit (the error names it)",
    429: "queue full or per-key limit reached (see Retry-After)",
    503: "model not loaded yet, or shutting down",
    504: "not scored within the request timeout",
}
