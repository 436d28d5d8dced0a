"""Everything ``ragsense guard`` is configured with, in one frozen object the CLI and tests build."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ragsense.consens import Bands
from ragsense.errors import ParameterError
from ragsense.guard._auth import ApiKeys
from ragsense.guard._check import Policy
from ragsense.guard._limits import Limits
from ragsense.models import ModelPool, ModelSpec

BACKLOG_FACTOR = 16
"""Accepted but unscored trace rows (``POST /v1/traces``) are bounded by this many times
``max_queue_rows``."""


@dataclass(frozen=True)
class GuardConfig:
    """The service's settings. Defaults are the safe ones: no content in logs, bounded everything.

    ``model``/``model_options``: the scoring model; ``judge``/``judge_options``: a VERA judge (enables
    ``adherence``). ``bands``: verdict bands (``ragsense calibrate``; default: the score's default
    bands). ``policy``: the pass threshold and the range a request may choose (default: from the
    bands' ``grounded_at``, 0.02 with the default bands). ``limits``: what
    a request may hold. Micro-batching: up to ``max_batch_rows`` rows or ``max_batch_tokens`` estimated
    tokens, waiting at most ``max_wait_ms`` for more; at most ``max_queue_rows`` rows wait (then 429).
    ``timeout_s``: a request's limit from arrival to answer (then 504). ``body_timeout_s``: the longest
    a client may take to send its body (then 408): a slow upload holds no slot while it lasts, and this
    bounds how long it holds its connection. ``hostile_delay_s``: how long the refusal of a body with
    more JSON values than any valid request waits (no client sends one by mistake; a client looping
    them is slowed to one per delay per connection). ``api_keys``: accepted keys
    (none: open, loopback only unless the server is started insecure). ``concurrency_per_key``,
    ``rate_per_key`` (requests a second), ``burst``: per-key limits (then 429). ``log_content``: also
    log questions, contexts and answers. ``warmup``: score one row before reporting ready.
    ``release_memory``: give freed native memory back to the system after each batch (glibc
    ``malloc_trim``; without it resident memory creeps up under varying batch shapes, see
    docs/guard.md). ``docs``: serve ``/docs``, ``/redoc`` and ``/openapi.json`` (off by default: the
    pages load their scripts from public CDNs; behind the API key when keys are configured).
    ``trace_sink``: a JSONL file each scored trace of ``POST /v1/traces`` is appended to (docs/traces.md).
    ``trace_wait_s``: how long spans wait for their trace's root span; a trace waiting longer is read as
    it is, on the receiver's own clock (whether or not exports arrive or are refused).
    ``max_export_rows``: RAG traces one OTLP export may have scored (the others are rejected in its
    answer); at most the trace backlog, :data:`BACKLOG_FACTOR` x ``max_queue_rows`` (None: 256, or
    the backlog when smaller; see :attr:`export_rows`).
    Connections: ``header_timeout_s``, the longest a client may take to send a request's headers (then
    the connection is closed: a trickled header holds no file descriptor for long);
    ``keep_alive_s``, how long an idle connection stays open; ``max_connections``, the most open at
    once (None: from the process's file limit), past which a new one closes the oldest connection
    still sending its headers.

    >>> GuardConfig(model="fake").max_wait_ms
    10.0
    """

    model: ModelSpec | None = None
    model_options: Mapping[str, Any] = field(default_factory=dict)
    judge: ModelSpec | None = None
    judge_options: Mapping[str, Any] = field(default_factory=dict)
    bands: Bands | None = None
    policy: Policy | None = None
    limits: Limits = field(default_factory=Limits)
    max_batch_rows: int = 16
    max_batch_tokens: int = 32_768
    max_wait_ms: float = 10.0
    max_queue_rows: int = 64
    timeout_s: float = 30.0
    body_timeout_s: float = 10.0
    hostile_delay_s: float = 1.0
    api_keys: ApiKeys = field(default_factory=lambda: ApiKeys([]))
    concurrency_per_key: int = 32
    rate_per_key: float | None = None
    burst: int | None = None
    log_content: bool = False
    warmup: bool = True
    release_memory: bool = True
    docs: bool = False
    pool: ModelPool | None = None
    trace_sink: str | None = None
    max_export_rows: int | None = None
    trace_wait_s: float = 30.0
    header_timeout_s: float = 10.0
    keep_alive_s: int = 5
    max_connections: int | None = None

    @property
    def export_rows(self) -> int:
        """RAG traces one OTLP export may have scored: ``max_export_rows``, else 256 or the backlog.

        >>> small = GuardConfig(model="fake", max_queue_rows=4, limits=Limits(max_rows=4))
        >>> GuardConfig(model="fake").export_rows, small.export_rows
        (256, 64)
        """
        if self.max_export_rows is not None:
            return self.max_export_rows
        return min(256, BACKLOG_FACTOR * self.max_queue_rows)

    def __post_init__(self) -> None:
        at_least_one = {
            "max_batch_rows": self.max_batch_rows,
            "max_batch_tokens": self.max_batch_tokens,
            "max_queue_rows": self.max_queue_rows,
            "concurrency_per_key": self.concurrency_per_key,
            "burst": 1 if self.burst is None else self.burst,
            "max_export_rows": 1 if self.max_export_rows is None else self.max_export_rows,
            "keep_alive_s": self.keep_alive_s,
            "max_connections": 1 if self.max_connections is None else self.max_connections,
        }
        for name, count in at_least_one.items():
            if count < 1:
                raise ParameterError(f"must be at least 1, got {count}", parameter=name)
        above_zero = {
            "timeout_s": self.timeout_s,
            "body_timeout_s": self.body_timeout_s,
            "header_timeout_s": self.header_timeout_s,
            "trace_wait_s": self.trace_wait_s,
            "rate_per_key": 1.0 if self.rate_per_key is None else self.rate_per_key,
        }
        for name, seconds in above_zero.items():
            if not seconds > 0 or not math.isfinite(seconds):
                raise ParameterError(f"must be a finite number above 0, got {seconds}", parameter=name)
        for name, seconds in (("max_wait_ms", self.max_wait_ms), ("hostile_delay_s", self.hostile_delay_s)):
            if not seconds >= 0 or not math.isfinite(seconds):
                raise ParameterError(f"must be a finite number >= 0, got {seconds}", parameter=name)
        if self.export_rows > BACKLOG_FACTOR * self.max_queue_rows:
            # An export the trace backlog could never hold would be refused (429) forever.
            raise ParameterError(
                f"max_export_rows ({self.max_export_rows}) must not exceed {BACKLOG_FACTOR} x "
                f"max_queue_rows ({BACKLOG_FACTOR * self.max_queue_rows})",
                parameter="max_export_rows",
            )
        if self.limits.max_rows > self.max_queue_rows:
            # A request larger than the queue could never be accepted.
            raise ParameterError(
                f"max_rows ({self.limits.max_rows}) must not exceed max_queue_rows ({self.max_queue_rows})",
                parameter="max_rows",
            )
