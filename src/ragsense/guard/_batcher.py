"""Dynamic micro-batching in front of one model worker thread.

Why a thread: the local model computes inside its ``async`` methods (the forward pass blocks), so on the
server's event loop it would stall every connection, health check and 429 while it runs. The model gets
one worker thread with its own event loop instead; torch releases the GIL while it computes, so the
HTTP loop stays responsive. One worker means one set of torch threads: no oversubscription.

How a batch forms: the worker takes the oldest waiting job and then waits at most ``max_wait_s`` from
that job's arrival for more, stopping early when ``max_batch_rows`` rows or ``max_batch_tokens``
(estimated) tokens are waiting. Jobs (requests) are never split. While a batch runs, new jobs queue,
so under load the next batch is whatever arrived meanwhile, with no extra wait.

Back-pressure: at most ``max_queue_rows`` rows may wait; :meth:`MicroBatcher.submit` raises
:class:`QueueFull` at once beyond that (the service answers 429 with ``Retry-After``) instead of letting
latency grow without bound.

A caller that goes away (client disconnect, timeout) cancels its future: a job not yet started is then
skipped; a job already in a batch is scored with its batch and its result dropped, so the other rows
of the batch are not disturbed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragsense.errors import RagsenseError

logger = logging.getLogger("ragsense.guard")

ScoreBatch = Callable[[Sequence[Any]], Awaitable[Sequence[Any]]]
"""Scores the payloads of one batch on the worker's loop: one result (or exception) per payload."""


class QueueFull(RagsenseError):
    """Too many rows are waiting; try again after :attr:`retry_after` seconds."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"the queue is full; retry after {retry_after} s")
        self.retry_after = retry_after


class NotAccepting(RagsenseError):
    """The batcher is not ready yet (model loading) or is shutting down."""


@dataclass
class _Job:
    payload: Any
    rows: int
    tokens: int
    future: concurrent.futures.Future[Any] = field(default_factory=concurrent.futures.Future)
    enqueued: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class BatchStats:
    """One finished batch, for the metrics: rows and jobs in it, seconds it took, rows that failed."""

    rows: int
    jobs: int
    seconds: float
    failed_rows: int


class MicroBatcher:
    """A bounded queue of jobs and one worker thread that scores them in micro-batches.

    >>> import asyncio
    >>> async def double(payloads):
    ...     return [2 * p for p in payloads]
    >>> batcher = MicroBatcher(double)
    >>> batcher.start()
    >>> batcher.wait_ready(5)
    True
    >>> asyncio.run(batcher.submit(21, rows=1))
    42
    >>> batcher.close()
    """

    def __init__(
        self,
        score: ScoreBatch,
        *,
        setup: Callable[[], Awaitable[None]] | None = None,
        teardown: Callable[[], Awaitable[None]] | None = None,
        max_batch_rows: int = 16,
        max_batch_tokens: int = 32_768,
        max_wait_s: float = 0.010,
        max_queue_rows: int = 64,
        on_batch: Callable[[BatchStats], None] | None = None,
        failed_rows: Callable[[Any], int] | None = None,
    ) -> None:
        if max_batch_rows < 1 or max_queue_rows < 1 or max_wait_s < 0:
            raise ValueError("max_batch_rows and max_queue_rows must be >= 1 and max_wait_s >= 0")
        self._score = score
        self._setup = setup
        self._teardown = teardown
        self.max_batch_rows = max_batch_rows
        self.max_batch_tokens = max_batch_tokens
        self.max_wait_s = max_wait_s
        self.max_queue_rows = max_queue_rows
        self._on_batch = on_batch
        self._failed_rows = failed_rows or (lambda result: 0)
        self._jobs: deque[_Job] = deque()
        self._queued_rows = 0
        self._cond = threading.Condition()
        self._closing = False
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self.setup_error: BaseException | None = None
        # Seconds per row, smoothed: what Retry-After is estimated from.
        self._row_seconds = 0.1

    # -- state ---------------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        """Set up (model loaded and warmed) and not shutting down."""
        return self._ready.is_set() and not self._closing and self.setup_error is None

    @property
    def queued_rows(self) -> int:
        """Rows waiting for a batch (not counting the batch being scored)."""
        return self._queued_rows

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until set up; False on timeout or when setup failed (see :attr:`setup_error`)."""
        return self._ready.wait(timeout) and self.setup_error is None

    # -- life ----------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the worker thread (it runs ``setup`` first)."""
        self._thread = threading.Thread(target=self._run, name="ragsense-guard-worker", daemon=True)
        self._thread.start()

    def close(self, timeout: float | None = None) -> None:
        """Stop accepting, finish every queued job, run ``teardown``, and join the worker."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- submitting ----------------------------------------------------------------------------
    async def submit(self, payload: Any, *, rows: int, tokens: int = 0) -> Any:
        """Queue one job and wait for its result; raises :class:`QueueFull` or :class:`NotAccepting` at once.

        Cancelling the awaiting task cancels a job that has not started (see the module docstring).
        """
        job = _Job(payload, rows, tokens)
        with self._cond:
            if not self._ready.is_set() or self._closing or self.setup_error is not None:
                raise NotAccepting("the model worker is not accepting jobs (starting or shutting down)")
            if self._queued_rows and self._queued_rows + rows > self.max_queue_rows:
                raise QueueFull(self._retry_after_locked())
            self._jobs.append(job)
            self._queued_rows += rows
            self._cond.notify_all()
        return await asyncio.wrap_future(job.future)

    def _retry_after_locked(self) -> int:
        # The time to work off what is waiting, at the recent pace; at least a second.
        return max(1, math.ceil(self._queued_rows * self._row_seconds))

    # -- the worker ----------------------------------------------------------------------------
    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            if self._setup is not None:
                try:
                    loop.run_until_complete(self._setup())
                except BaseException as exc:  # reported by /ready and the CLI, not raised in a thread
                    logger.exception("guard: model setup failed")
                    self.setup_error = exc
                    self._ready.set()
                    return
            self._ready.set()
            while (jobs := self._next_batch()) is not None:
                self._process(loop, jobs)
            if self._teardown is not None:
                loop.run_until_complete(self._teardown())
        finally:
            loop.close()

    def _next_batch(self) -> list[_Job] | None:
        with self._cond:
            while not self._jobs:
                if self._closing:
                    return None
                self._cond.wait()
            deadline = self._jobs[0].enqueued + self.max_wait_s
            while not self._closing and not self._full_locked():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            jobs = [self._jobs.popleft()]
            rows, tokens = jobs[0].rows, jobs[0].tokens
            while self._jobs:
                nxt = self._jobs[0]
                if rows + nxt.rows > self.max_batch_rows or tokens + nxt.tokens > self.max_batch_tokens:
                    break
                jobs.append(self._jobs.popleft())
                rows += nxt.rows
                tokens += nxt.tokens
            self._queued_rows -= rows
            return jobs

    def _full_locked(self) -> bool:
        rows = sum(j.rows for j in self._jobs)
        tokens = sum(j.tokens for j in self._jobs)
        return rows >= self.max_batch_rows or tokens >= self.max_batch_tokens

    def _process(self, loop: asyncio.AbstractEventLoop, jobs: list[_Job]) -> None:
        # A job whose caller is gone before it started is skipped; once running it can no longer be
        # cancelled, so its result is set (and dropped by the caller's side).
        live = [job for job in jobs if job.future.set_running_or_notify_cancel()]
        if not live:
            return
        started = time.perf_counter()
        try:
            results: Sequence[Any] = loop.run_until_complete(self._score([job.payload for job in live]))
            if len(results) != len(live):
                raise RuntimeError(f"the scorer returned {len(results)} results for {len(live)} jobs")
        except Exception as exc:  # every job of the batch gets the error, the worker lives on
            logger.error("guard: a batch of %d job(s) failed: %s", len(live), type(exc).__name__)
            for job in live:
                job.future.set_exception(exc)
            results = [exc] * len(live)
        else:
            for job, result in zip(live, results, strict=True):
                if isinstance(result, BaseException):
                    job.future.set_exception(result)
                else:
                    job.future.set_result(result)
        seconds = time.perf_counter() - started
        rows = sum(job.rows for job in live)
        self._row_seconds = 0.8 * self._row_seconds + 0.2 * (seconds / max(rows, 1))
        if self._on_batch is not None:
            failed = sum(
                job.rows if isinstance(r, BaseException) else self._failed_rows(r)
                for job, r in zip(live, results, strict=True)
            )
            self._on_batch(BatchStats(rows=rows, jobs=len(live), seconds=seconds, failed_rows=failed))
