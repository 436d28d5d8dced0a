"""``POST /v1/traces`` against a hostile sender, round 2 (issue 47): one span must not break the
receiver, waiting traces leave on the receiver's own clock, every kept byte is counted and a sink that
cannot be written loses nothing but the records; and a connection trickling its body can be closed to
make room. Real guards on 127.0.0.1, bounded in time."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openinference.semconv.trace")

from ragsense.guard import ApiKeys, GuardConfig, Limits
from ragsense.guard import _traces as receiver

from ._helpers import ROW, httpx, metric_value, post, running, sink_records
from .test_traces_hostile import JSON, attr, export, rag_trace

NESTED = "[" * 5_000 + "]" * 5_000


def nested_documents(trace: str) -> list[dict[str, Any]]:
    """A RAG trace whose retriever's ``retrieval.documents`` is a string of 5,000 nested brackets."""
    spans = rag_trace(trace)
    retriever = spans[0]["attributes"]
    spans[0]["attributes"] = [*retriever[:2], attr("retrieval.documents", NESTED)]
    return spans


def orphan(trace: str, span: dict[str, Any] | None = None) -> dict[str, Any]:
    """A span of ``trace`` whose parent (the root) never comes."""
    base = span if span is not None else rag_trace(trace)[1]
    return {**base, "traceId": trace, "parentSpanId": "f" * 16}


def until(condition: Any, seconds: float) -> bool:
    """Whether ``condition()`` holds within ``seconds`` (polled)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


def test_a_span_nested_thousands_deep_is_its_traces_error_complete_or_waiting(tmp_path: Path) -> None:
    """Documents as 5,000 nested brackets raised a RecursionError nothing caught: a complete trace made
    its export 500; a waiting one made every export 500 once it expired, and shutdown failed."""
    sink = tmp_path / "scores.jsonl"
    config = GuardConfig(model="fake", trace_sink=str(sink), trace_wait_s=0.5)
    with running(config) as guard:
        url = guard.url + "/v1/traces"
        reply = httpx.post(
            url, content=export([*rag_trace("a" * 32), *nested_documents("b" * 32)]), headers=JSON
        )
        assert reply.status_code == 200, reply.text
        assert "nested too deeply" in reply.json()["partialSuccess"]["errorMessage"]
        # Without its root: the trace waits, expires on its own, and is an error like any other.
        lone = [orphan("c" * 32, span) for span in nested_documents("c" * 32)]
        assert httpx.post(url, content=export(lone), headers=JSON).status_code == 200
        assert until(lambda: not guard.service.traces.pending, 5)
        after = httpx.post(url, content=export(rag_trace("d" * 32)), headers=JSON)
        assert after.status_code == 200, after.text
        # A good trace still waiting at shutdown is drained into the sink.
        assert httpx.post(url, content=export([orphan("e" * 32)]), headers=JSON).status_code == 200
    records = {r["trace_id"]: r for r in sink_records(sink, 5)}
    assert isinstance(records["a" * 32]["consens"], float) and isinstance(records["d" * 32]["consens"], float)
    assert "nested too deeply" in records["b" * 32]["error"]["message"]
    assert "nested too deeply" in records["c" * 32]["error"]["message"]
    assert "e" * 32 in records  # read as it is at shutdown (its root never came: not a RAG trace)


def test_a_full_receiver_lets_its_waiting_traces_go_on_its_own_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """An export that exactly filled the waiting spans made every later export 429 for good: waiting
    traces were let go only inside the step the room check refused first."""
    monkeypatch.setattr(receiver, "MAX_PENDING_SPANS", 40)
    with running(GuardConfig(model="fake", trace_wait_s=0.5)) as guard:
        url = guard.url + "/v1/traces"
        full = export([orphan(f"{i:032x}") for i in range(40)])
        assert httpx.post(url, content=full, headers=JSON).status_code == 200
        assert httpx.post(url, content=export(rag_trace("a" * 32)), headers=JSON).status_code == 429
        assert until(lambda: guard.service.traces.pending_spans == 0, 5)
        assert httpx.post(url, content=export(rag_trace("a" * 32)), headers=JSON).status_code == 200


def test_waiting_spans_count_their_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """One-span exports with 300 KB trace and span ids: the ids were not counted (100 of them added
    114 MB to the guard within its 32 M character bound)."""
    monkeypatch.setattr(receiver, "MAX_PENDING_CHARS", 2_000_000)
    statuses = []
    with running(GuardConfig(model="fake")) as guard:
        traces = guard.service.traces
        for i in range(6):
            span = {**orphan("x"), "traceId": f"{i}" + "a" * 300_000, "spanId": f"{i}" + "b" * 300_000}
            reply = httpx.post(guard.url + "/v1/traces", content=export([span]), headers=JSON)
            statuses.append(reply.status_code)
            kept = sum(len(t) + len(s.span_id) for t, spans in traces.pending.items() for s in spans)
            assert kept <= traces.pending_chars <= 2_000_000
    assert statuses == [200, 200, 200, 429, 429, 429]


def test_a_sink_that_cannot_be_written_loses_only_its_records() -> None:
    """``--trace-sink /dev/full``: of a large export only the first job was scored, the rest dropped
    silently and left counted in the backlog, so later exports got 429."""
    config = GuardConfig(
        model="fake", trace_sink="/dev/full", max_queue_rows=4, limits=Limits(max_rows=4), max_wait_ms=0
    )
    with running(config) as guard:
        traces = guard.service.traces
        url = guard.url + "/v1/traces"
        body = export([s for i in range(40) for s in rag_trace(f"{i:032x}")])
        for _ in range(3):  # 120 rows through a backlog of 64: each export's rows must leave it
            assert httpx.post(url, content=body, headers=JSON, timeout=30).status_code == 200
            assert until(lambda: traces.backlog == 0 and not traces.tasks, 20)
        scored = metric_value(guard.url, 'ragsense_guard_traces_total{outcome="scored"}')
        lost = metric_value(guard.url, "ragsense_guard_trace_sink_errors_total")
    assert scored == 120 and lost == 120


def test_connections_sending_their_body_are_evicted_for_new_ones() -> None:
    """45 authenticated trickling bodies under ``--max-connections 40`` reset 41 of 44 normal requests:
    a connection past its headers could not be closed to make room."""
    keys = ApiKeys(["k" * 32])
    config = GuardConfig(model="fake", api_keys=keys, max_connections=40, body_timeout_s=30)
    with running(config) as guard:
        port = int(guard.url.rsplit(":", 1)[1])
        head = (
            f"POST /v1/check HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {'k' * 32}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
        )
        slow = []
        try:
            for _ in range(45):
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                sock.sendall(head.encode())
                slow.append(sock)
            time.sleep(0.3)  # every one is past its headers, waiting for its body
            answered = [
                post(guard.url, ROW, {"authorization": "Bearer " + "k" * 32}, timeout=5) for _ in range(10)
            ]
            assert [r.status_code for r in answered] == [200] * 10
        finally:
            for sock in slow:
                sock.close()


def test_a_waiting_trace_that_cannot_be_read_still_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defence behind the fix: should reading a waiting trace ever fail (a bug, not input), the trace
    leaves as an error instead of failing every later export and the shutdown."""
    real = receiver.rows_of

    def broken(spans: list[Any], *args: Any) -> Any:
        if any(s.trace_id == "b" * 32 for s in spans):
            raise RuntimeError("a bug")
        return real(spans, *args)

    monkeypatch.setattr(receiver, "rows_of", broken)
    with running(GuardConfig(model="fake", trace_wait_s=0.5)) as guard:
        url = guard.url + "/v1/traces"
        assert httpx.post(url, content=export([orphan("b" * 32)]), headers=JSON).status_code == 200
        assert until(lambda: not guard.service.traces.pending, 5)
        assert metric_value(guard.url, 'ragsense_guard_traces_total{outcome="error"}') == 1
        assert httpx.post(url, content=export(rag_trace("a" * 32)), headers=JSON).status_code == 200
        assert httpx.post(url, content=export([orphan("b" * 32)]), headers=JSON).status_code == 200
    assert not guard.service.traces.pending  # the shutdown let it go too
