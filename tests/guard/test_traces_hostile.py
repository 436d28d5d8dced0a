"""``POST /v1/traces`` and the guard's connections against a hostile sender (issue 38), each the way the
review found it: a real guard on 127.0.0.1, real bodies, bounded in count and time."""

from __future__ import annotations

import gzip
import json
import os
import resource
import socket
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openinference.semconv.trace")
trace_service = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")

from ragsense.guard import GuardConfig  # noqa: E402
from ragsense.guard import _traces as receiver  # noqa: E402

from ._helpers import ROW, SlowFake, httpx, post, running, sink_records  # noqa: E402

JSON = {"content-type": "application/json"}


def attr(key: str, value: Any) -> dict[str, Any]:
    typed = {"stringValue": value} if isinstance(value, str) else value
    return {"key": key, "value": typed}


def rag_trace(trace: str, llm: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """A RETRIEVER root span and an LLM child: one RAG trace (``llm`` replaces the LLM's attributes)."""
    outputs = llm if llm is not None else [attr("output.value", ROW["answer"])]
    retriever = [
        attr("openinference.span.kind", "RETRIEVER"),
        attr("input.value", ROW["question"]),
        attr("retrieval.documents.0.document.content", ROW["contexts"][0]),
    ]
    return [
        {"traceId": trace, "spanId": trace[:16], "name": "retrieve", "attributes": retriever},
        {
            "traceId": trace,
            "spanId": trace[16:],
            "parentSpanId": trace[:16],
            "name": "llm",
            "attributes": [attr("openinference.span.kind", "LLM"), *outputs],
        },
    ]


def export(spans: list[dict[str, Any]]) -> bytes:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()


def tiny_spans(n: int) -> bytes:
    """A protobuf export of ``n`` spans of 9 bytes each (a two-byte trace id, a one-byte span id)."""
    request = trace_service.ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for i in range(n):
        span = scope.spans.add()
        span.trace_id, span.span_id = (i % 65_536).to_bytes(2, "big"), b"\x05"
    return bytes(request.SerializeToString())


def test_an_export_that_can_never_be_accepted_is_413_at_once_and_cheap() -> None:
    """100,000 tiny spans in one protobuf export: it cost 1.9 s of CPU to decode and ended in 429,
    which an exporter retries forever. Now the spans are counted from the wire format first."""
    body = tiny_spans(100_000)
    head = {"content-type": "application/x-protobuf"}
    with running(GuardConfig(model="fake", hostile_delay_s=0.3)) as guard:
        cpu, wall = time.process_time(), time.monotonic()
        reply = httpx.post(guard.url + "/v1/traces", content=body, headers=head, timeout=30)
        cpu, wall = time.process_time() - cpu, time.monotonic() - wall
        assert reply.status_code == 413, reply.text
        assert reply.json()["error"]["type"] == "too_many_spans" and "Retry-After" not in reply.headers
        assert wall >= 0.3  # answered late, as /v1/check answers a body no client sends by mistake
        assert cpu < 0.5  # this process is client and server: 1.9 s before
        assert post(guard.url, ROW).status_code == 200


def test_waiting_spans_are_bounded_in_characters_and_keep_only_row_attributes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Exports of one orphan span (its root never comes) of about 1 MB each: the waiting spans were
    bounded by count only (150 such exports: resident memory 173 -> 316 MB)."""
    monkeypatch.setattr(receiver, "MAX_PENDING_CHARS", 3_000_000)
    docs = [attr(f"retrieval.documents.{i}.document.content", "d" * 19_000) for i in range(48)]
    noise = attr("llm.prompts.0", "n" * 100_000)  # not read by any row: not kept
    statuses = []
    with running(GuardConfig(model="fake")) as guard:
        traces = guard.service.traces
        for i in range(6):
            span = {
                "traceId": f"{i:032x}",
                "spanId": "1" * 16,
                "parentSpanId": "2" * 16,
                "name": "retrieve",
                "attributes": [attr("openinference.span.kind", "RETRIEVER"), *docs, noise],
            }
            reply = httpx.post(guard.url + "/v1/traces", content=export([span]), headers=JSON)
            statuses.append(reply.status_code)
            assert traces.pending_chars <= 3_000_000
        assert statuses == [200, 200, 200, 429, 429, 429]
        assert "Retry-After" in reply.headers
        kept = {k for spans in traces.pending.values() for s in spans for k in s.attributes}
        assert "llm.prompts.0" not in kept and "retrieval.documents.0.document.content" in kept
        # A root span completes its trace: the waiting characters are given back.
        root = {**rag_trace("0" * 32)[0], "spanId": "2" * 16}
        assert httpx.post(guard.url + "/v1/traces", content=export([root]), headers=JSON).status_code == 200
        assert traces.pending_spans == 2 and traces.pending_chars < 2_000_000


def test_an_export_queues_at_most_max_export_rows_and_v1_check_stays_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One export of thousands of RAG traces was queued whole (4,999 rows against a backlog of 1,024)
    and its jobs filled the queue /v1/check shares."""
    monkeypatch.setattr(receiver, "BACKLOG_FACTOR", 1)  # a backlog of 16 rows: a short test
    sink = tmp_path / "scores.jsonl"
    config = GuardConfig(
        model=SlowFake(1.0), max_queue_rows=16, max_export_rows=8, trace_sink=str(sink), max_wait_ms=0
    )
    body = export([s for i in range(30) for s in rag_trace(f"{i:032x}")])
    with running(config) as guard:
        traces = guard.service.traces
        first = httpx.post(guard.url + "/v1/traces", content=body, headers=JSON, timeout=30)
        partial = first.json()["partialSuccess"]
        assert partial["rejectedSpans"] == 44 and "more than 8 RAG traces" in partial["errorMessage"]
        assert 0 < traces.backlog <= 8
        statuses = [first.status_code]
        for _ in range(2):
            statuses.append(httpx.post(guard.url + "/v1/traces", content=body, headers=JSON).status_code)
            assert traces.backlog <= 16
        assert statuses == [200, 200, 429]  # the export's own rows count against the backlog
        started = time.monotonic()
        check = post(guard.url, ROW)
        assert check.status_code == 200 and time.monotonic() - started < 3.5  # one trace job ahead at most
    scored = [r for r in sink_records(sink, 1) if "consens" in r]
    assert len(scored) == 16


def test_a_malformed_span_is_its_traces_error_and_the_good_traces_are_scored(tmp_path: Path) -> None:
    """``llm.output_messages`` whose ``message`` is a string: AttributeError, 500, every trace lost."""
    sink = tmp_path / "scores.jsonl"
    messages = {"arrayValue": {"values": [{"kvlistValue": {"values": [attr("message", "not an object")]}}]}}
    bad = rag_trace("b" * 32, llm=[attr("llm.output_messages", messages)])
    digits = rag_trace("c" * 32, llm=[attr("llm.output_messages." + "9" * 5000 + ".message.content", "A.")])
    with running(GuardConfig(model="fake", trace_sink=str(sink))) as guard:
        reply = httpx.post(
            guard.url + "/v1/traces", content=export([*rag_trace("a" * 32), *bad, *digits]), headers=JSON
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["partialSuccess"]["rejectedSpans"] == 4  # spans, not traces (issue 47)
        records = {r["trace_id"]: r for r in sink_records(sink, 3)}
    assert isinstance(records["a" * 32]["consens"], float)
    assert records["b" * 32]["error"]["field"] == "output.value"


def gzip_bomb(megabytes: int) -> bytes:
    """One gzip member inflating to ``megabytes`` MB of zeros, built without compressing them all: after
    a full flush each megabyte compresses to the same bytes, so one block is repeated."""
    zeros = bytes(1 << 20)
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    head = packer.compress(zeros) + packer.flush(zlib.Z_FULL_FLUSH)
    block = packer.compress(zeros) + packer.flush(zlib.Z_FULL_FLUSH)
    end = packer.flush()[:-8]  # the last block; the trailer is the whole stream's
    crc = 0
    for _ in range(megabytes):
        crc = zlib.crc32(zeros, crc)
    return head + block * (megabytes - 1) + end + struct.pack("<II", crc, (megabytes << 20) & 0xFFFFFFFF)


def test_gzip_bodies_are_inflated_and_a_gzip_bomb_costs_almost_nothing(tmp_path: Path) -> None:
    sink = tmp_path / "scores.jsonl"
    bomb = gzip_bomb(200)
    assert len(bomb) < 300_000
    zipped = {**JSON, "content-encoding": "gzip"}
    url_of = "/v1/traces"
    with running(GuardConfig(model="fake", trace_sink=str(sink), hostile_delay_s=0.2)) as guard:
        url = guard.url + url_of
        good = httpx.post(url, content=gzip.compress(export(rag_trace("a" * 32))), headers=zipped)
        assert good.status_code == 200, good.text
        assert isinstance(sink_records(sink, 1)[0]["consens"], float)
        cpu = time.process_time()
        refused = httpx.post(url, content=bomb, headers=zipped, timeout=30)
        assert refused.status_code == 413 and refused.json()["error"]["type"] == "inflated_too_large"
        assert time.process_time() - cpu < 0.3
        broken = httpx.post(url, content=b"\x1f\x8b not gzip", headers=zipped)
        assert broken.status_code == 400 and broken.json()["error"]["field"] == "content-encoding"
        cut = httpx.post(url, content=gzip.compress(export(rag_trace("d" * 32)))[:-12], headers=zipped)
        assert cut.status_code == 400
        other = httpx.post(url, content=b"{}", headers={**JSON, "content-encoding": "br"})
        assert other.status_code == 415 and other.json()["error"]["field"] == "content-encoding"
        assert post(guard.url, ROW).status_code == 200


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _trickle(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    return sock


def test_slow_headers_are_cut_off_and_cannot_exhaust_file_descriptors(tmp_path: Path) -> None:
    """A connection trickling header bytes stayed open past 70 s before any key check; under a 128-file
    limit, 120 of them left every client unanswered (EMFILE). The guard runs in its own process with
    that limit and a 1 s header timeout."""
    port = _port()
    url = f"http://127.0.0.1:{port}"

    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))

    command = [sys.executable, "-m", "ragsense", "guard", "--model", "fake", "--port", str(port)]
    command += ["--header-timeout", "1", "--log-level", "warning"]
    log = tmp_path / "guard.log"
    with log.open("w") as stderr:
        server = subprocess.Popen(command, stderr=stderr, preexec_fn=limit_files, env={**os.environ})
    slow: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            try:
                if httpx.get(url + "/ready", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        opened = time.monotonic()
        slow = [_trickle(port) for _ in range(120)]
        for sock in slow[-10:]:  # a byte a second: each is still sending its headers
            sock.sendall(b"x")
        assert httpx.get(url + "/health", timeout=5).status_code == 200
        assert post(url, ROW, timeout=5).status_code == 200
        last = slow[-1]
        while time.monotonic() - opened < 8:
            try:
                last.sendall(b"x")
                if last.recv(1, socket.MSG_DONTWAIT) == b"":
                    break
            except BlockingIOError:
                pass
            except OSError:
                break
            time.sleep(0.5)
        closed_after = time.monotonic() - opened
        assert closed_after < 4, closed_after  # cut off at the 1 s header timeout, not left open
        assert httpx.get(url + "/health", timeout=5).status_code == 200
    finally:
        for sock in slow:
            sock.close()
        server.terminate()
        server.wait(30)
