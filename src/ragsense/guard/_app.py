"""The FastAPI application: ``POST /v1/check``, ``GET /health``, ``/ready``, ``/metrics``, ``/docs``.

A ``/v1/check`` request goes: API key (401) -> per-key slot (429) -> body read under its size limit
(413) -> strict UTF-8 JSON without NaN/Infinity (400) -> the pydantic request model (422) -> counts and
characters per field (422) -> the micro-batcher's bounded queue (429 when full) -> the model worker
(tokens per field, 422; then ConSens on the evaluation runner) -> the policy -> 200. Every refusal is
JSON naming its field; no path answers 500 for bad input. The body is read by hand rather than by
FastAPI's parameter binding so that each of those steps answers with its own status.
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
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from pydantic import ValidationError

from ragsense.errors import ParameterError
from ragsense.guard._auth import ANONYMOUS, KeyLimiter
from ragsense.guard._batcher import MicroBatcher, NotAccepting, QueueFull
from ragsense.guard._check import Guard, Options, shape_result
from ragsense.guard._config import GuardConfig
from ragsense.guard._limits import (
    GuardRequestError,
    check_request_limits,
    estimate_tokens,
    parse_json_body,
    token_violation,
)
from ragsense.guard._memory import release_free_memory, resident_bytes
from ragsense.guard._metrics import GuardMetrics
from ragsense.guard._schema import CheckRequest, CheckResponse, CheckRow

logger = logging.getLogger("ragsense.guard")

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


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    data = json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
    return Response(data, status_code=status, media_type="application/json", headers=headers)


def _field_path(loc: Sequence[int | str]) -> str | None:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or None


def _validation_error(exc: ValidationError) -> GuardRequestError:
    details = [{"field": _field_path(e["loc"]), "message": e["msg"], "type": e["type"]} for e in exc.errors()]
    first = details[0]
    where = f"{first['field']}: " if first["field"] else ""
    return GuardRequestError(
        422, "invalid_request", where + str(first["message"]), field=first["field"], details=details
    )


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
                    rec, row.id if row.id is not None else str(k), payload.min_consens, payload.weakest
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
        presented = request.headers.get("x-api-key")
        auth = request.headers.get("authorization")
        if presented is None and auth is not None and auth[:7].lower() == "bearer ":
            presented = auth[7:].strip()
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

    async def read_body(self, request: Request) -> bytes:
        limit = self.config.limits.max_body_bytes
        declared = request.headers.get("content-length")
        too_big = GuardRequestError(413, "body_too_large", f"the body is over {limit} bytes", field="body")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise too_big  # refused before a byte of it is read
        chunks: list[bytes] = []
        total = 0
        async for chunk in request.stream():
            total += len(chunk)
            if total > limit:
                raise too_big
            chunks.append(chunk)
        return b"".join(chunks)

    def payload(self, request: Request, obj: Any) -> tuple[str, _Payload]:
        """The request id and the worker's payload, or a 422 naming the field."""
        if not isinstance(obj, dict):
            raise GuardRequestError(422, "invalid_request", "the body must be a JSON object", field="body")
        try:
            parsed = CheckRequest.model_validate(obj)
        except ValidationError as exc:
            raise _validation_error(exc) from None
        rows = check_request_limits(parsed, self.config.limits)
        request_id = parsed.id or request.headers.get("x-request-id") or uuid.uuid4().hex
        if len(request_id) > self.config.limits.max_id_chars or not request_id.isprintable():
            field = "id" if parsed.id else "X-Request-ID"
            raise GuardRequestError(
                422, "invalid_id", f"{field} must be at most 128 printable characters", field=field
            )
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
        return request_id, _Payload(rows, options, threshold, parsed.weakest, parsed.rows is not None)

    async def check(self, request: Request) -> Response:
        started = time.perf_counter()
        request_id, status, rows = "-", 500, 0
        key_id: str | None = None
        try:
            key_id = self.authenticate(request)
            wait = self.limiter.acquire(key_id)
            if wait is not None:
                key_id_refused, key_id = key_id, None  # nothing to release
                self.metrics.reject("key_limit")
                raise GuardRequestError(
                    429,
                    "too_many_requests",
                    f"too many requests for key {key_id_refused}",
                    headers={"Retry-After": str(wait)},
                )
            ctype = request.headers.get("content-type")
            if ctype is not None and "json" not in ctype.lower():
                raise GuardRequestError(
                    415, "unsupported_media_type", "send the body as application/json", field="body"
                )
            obj = parse_json_body(await self.read_body(request))
            request_id, payload = self.payload(request, obj)
            rows = len(payload.rows)
            response = await self._submit(request_id, payload)
            status = 200
            return response
        except GuardRequestError as exc:
            status = exc.status
            if status in (413, 415, 422, 400):
                self.metrics.reject("invalid")
            headers = {**exc.headers, "X-Request-ID": request_id} if request_id != "-" else exc.headers
            return _json(exc.body(), status, headers)
        except Exception as exc:  # a bug, never input: answer in JSON and keep serving
            logger.error("guard: request %s failed: %s", request_id, type(exc).__name__)
            return _json(GuardRequestError(500, "internal_error", "internal error").body(), 500)
        finally:
            if key_id is not None:
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
        return _json(body, 200, {"X-Request-ID": request_id})


def create_app(config: GuardConfig) -> FastAPI:
    """The guard's FastAPI app; its lifespan starts the model worker and drains it on shutdown."""
    service = GuardService(config)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service.batcher.start()
        yield
        service.draining = True
        await asyncio.to_thread(service.batcher.close)  # finishes what is queued

    app = FastAPI(title="ragsense guard", summary="ConSens grounding checks", lifespan=lifespan)
    app.state.service = service
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

    @app.get("/health")
    async def health() -> dict[str, str]:
        """Alive: the process answers."""
        return {"status": "ok"}

    @app.get("/ready")
    async def ready() -> Response:
        """Ready: the model is loaded and warmed, and the server is not shutting down (else 503)."""
        if service.batcher.ready and not service.draining:
            return _json({"status": "ready", "model": service.model_name})
        state = "failed" if service.batcher.setup_error else ("draining" if service.draining else "loading")
        return _json({"status": state}, 503)

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        """Prometheus metrics (behind the API key when keys are configured)."""
        try:
            service.authenticate(request)
        except GuardRequestError as exc:
            return _json(exc.body(), exc.status, exc.headers)
        return Response(service.metrics.exposition(), media_type=GuardMetrics.content_type)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version="1", routes=app.routes, summary=app.summary)
            request_schema = CheckRequest.model_json_schema(ref_template="#/components/schemas/{model}")
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components.update(request_schema.pop("$defs", {}))
            components["CheckRequest"] = request_schema
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


_ERROR_CODES = {
    400: "malformed body: not UTF-8, not JSON, NaN/Infinity, a number out of range",
    401: "API key missing or not valid",
    413: "body over the size limit",
    415: "body not sent as JSON",
    422: "a field of the wrong type, missing, empty, or over its limit (the error names it)",
    429: "queue full or per-key limit reached (see Retry-After)",
    503: "model not loaded yet, or shutting down",
    504: "not scored within the request timeout",
}
