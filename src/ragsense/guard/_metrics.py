"""Prometheus metrics of the guard, in a registry of its own (two services in one process stay apart).

``ragsense_guard_requests_total{endpoint,status}``, ``ragsense_guard_request_seconds{endpoint}``,
``ragsense_guard_batch_rows``, ``ragsense_guard_batch_seconds``, ``ragsense_guard_queue_rows``,
``ragsense_guard_rows_scored_total{outcome}``, ``ragsense_guard_rejected_total{reason}``,
``ragsense_guard_resident_bytes_after_batch`` (the process's resident memory right after a batch and
the release of freed memory: the floor a leak would raise, without the in-flight batch's tensors), and
the standard ``process_*`` metrics (CPU seconds, resident and virtual memory, open files).
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, generate_latest

from ragsense.guard._batcher import BatchStats

# Latency buckets from a fast fake model (ms) to a long batch on a loaded CPU (tens of seconds).
_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_ROWS = (1, 2, 4, 8, 16, 32, 64)


class GuardMetrics:
    """The guard's counters, histograms and gauges, and their text exposition.

    >>> m = GuardMetrics(queue_rows=lambda: 0)
    >>> m.request("/v1/check", 200, 0.02)
    >>> b'ragsense_guard_requests_total{endpoint="/v1/check",status="200"} 1.0' in m.exposition()
    True
    """

    content_type = "text/plain; version=0.0.4; charset=utf-8"

    def __init__(self, queue_rows: Callable[[], int]) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "ragsense_guard_requests",
            "HTTP requests answered, by endpoint and status",
            ["endpoint", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "ragsense_guard_request_seconds",
            "Request latency, from the first byte read to the response",
            ["endpoint"],
            buckets=_SECONDS,
            registry=self.registry,
        )
        self.batch_rows = Histogram(
            "ragsense_guard_batch_rows", "Rows per micro-batch", buckets=_ROWS, registry=self.registry
        )
        self.batch_seconds = Histogram(
            "ragsense_guard_batch_seconds",
            "Seconds to score one micro-batch",
            buckets=_SECONDS,
            registry=self.registry,
        )
        self.queue = Gauge("ragsense_guard_queue_rows", "Rows waiting for a batch", registry=self.registry)
        self.queue.set_function(lambda: float(queue_rows()))
        self.rows = Counter(
            "ragsense_guard_rows_scored",
            "Rows scored by the model worker, by outcome (ok, error)",
            ["outcome"],
            registry=self.registry,
        )
        self.rejected = Counter(
            "ragsense_guard_rejected",
            "Requests refused before scoring, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.resident_after_batch = Gauge(
            "ragsense_guard_resident_bytes_after_batch",
            "Resident memory right after the last micro-batch (and the release of freed memory)",
            registry=self.registry,
        )
        self.traces = Counter(
            "ragsense_guard_traces",
            "Traces received on /v1/traces, by outcome (scored, error, not_rag)",
            ["outcome"],
            registry=self.registry,
        )
        self.trace_sink_errors = Counter(
            "ragsense_guard_trace_sink_errors",
            "Trace records that could not be written to the trace sink (--trace-sink)",
            registry=self.registry,
        )
        self.trace_verdicts = Counter(
            "ragsense_guard_trace_verdicts",
            "Scored traces by ConSens verdict and pass/fail",
            ["verdict", "passed"],
            registry=self.registry,
        )
        ProcessCollector(registry=self.registry)

    def request(self, endpoint: str, status: int, seconds: float) -> None:
        """Count one answered request and its latency."""
        self.requests.labels(endpoint=endpoint, status=str(status)).inc()
        self.latency.labels(endpoint=endpoint).observe(seconds)

    def batch(self, stats: BatchStats) -> None:
        """Record one finished micro-batch (called from the model worker; prometheus_client locks)."""
        self.batch_rows.observe(stats.rows)
        self.batch_seconds.observe(stats.seconds)
        self.rows.labels(outcome="ok").inc(stats.rows - stats.failed_rows)
        if stats.failed_rows:
            self.rows.labels(outcome="error").inc(stats.failed_rows)

    def reject(self, reason: str) -> None:
        """Count one request refused before scoring (``queue_full``, ``auth``, ``limit``, ...)."""
        self.rejected.labels(reason=reason).inc()

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric."""
        return generate_latest(self.registry)
