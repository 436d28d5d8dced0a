"""Hostile clients (issue 25): slow uploads, amplification bodies, cross-site requests, open docs,
and clients that hang up. Each test sends what was found to break the guard, over real sockets."""

from __future__ import annotations

import concurrent.futures
import json
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from ragsense.guard import ApiKeys, GuardConfig, RunningGuard

from ._helpers import ROW, SlowFake, metric_value, post, running

KEY = "guard-hostile-key-0123456789"


def _connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return socket.create_connection((parts.hostname, parts.port), timeout=30)


def _start_upload(url: str, declared: int, first: bytes, headers: str = "") -> socket.socket:
    """A POST /v1/check that declares ``declared`` bytes and has sent only ``first`` so far."""
    sock = _connect(url)
    host = urlsplit(url).netloc
    head = (
        f"POST /v1/check HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {declared}\r\n{headers}\r\n"
    )
    sock.sendall(head.encode() + first)
    return sock


def _status_line(sock: socket.socket) -> str:
    return sock.recv(4096).split(b"\r\n", 1)[0].decode()


# -- 1. slow uploads ---------------------------------------------------------------------------------
def test_slow_uploads_hold_no_slot_and_are_cut_off_with_408() -> None:
    """Found: uploads declaring 100 kB and trickling a byte held every per-key slot; all else got 429."""
    config = GuardConfig(model="fake", concurrency_per_key=2, body_timeout_s=1.5)
    with running(config) as guard:
        slow = [_start_upload(guard.url, 100_000, b"{") for _ in range(3)]  # more than the slots
        try:
            time.sleep(0.3)
            # Each upload is in its body read; without the fix each held a slot, so this got 429.
            assert post(guard.url, ROW).status_code == 200
            started = time.monotonic()
            statuses = [_status_line(sock) for sock in slow]
            assert all(" 408 " in line for line in statuses), statuses
            assert time.monotonic() - started < 5  # cut off by the body timeout, not by the client
        finally:
            for sock in slow:
                sock.close()
        assert metric_value(guard.url, 'ragsense_guard_rejected_total{reason="body_timeout"}') == 3
        assert post(guard.url, ROW).status_code == 200


# -- 2. amplification --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "body",
    [
        b'{"rows": [' + b"0," * 499_999 + b"0]}",
        b'{"question": "Q?", "answer": "A.", "contexts": [' + b"0," * 499_999 + b"0]}",
        b'{"rows": [{"question": "Q?", "answer": "A.", "contexts": [' + b"0," * 400_000 + b"0]}]}",
        json.dumps({f"k{i}": 0 for i in range(80_000)}).encode(),
        json.dumps({"rows": [{f"k{i}": 0 for i in range(60)} for _ in range(1_500)]}).encode(),
    ],
    ids=["rows", "contexts", "nested-contexts", "members", "row-members"],
)
def test_a_one_megabyte_body_gets_a_small_refusal(open_guard: RunningGuard, body: bytes) -> None:
    """Found: ``{"rows": [0, 0, ...]}`` (1 MB) was answered with every element's error: 61 MB."""
    assert len(body) < 1_048_576
    reply = post(open_guard.url, body)
    assert reply.status_code == 400
    assert len(reply.content) < 1_000, len(reply.content)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"rows": [0] * 1_000}, "rows"),
        ({**ROW, "contexts": [0] * 1_000}, "contexts"),
        ({"rows": [{**ROW, "contexts": [0] * 1_000}]}, "rows[0].contexts"),
    ],
)
def test_list_caps_are_in_the_schema(open_guard: RunningGuard, body: dict, field: str) -> None:
    """Under the value count, a list over its cap is refused by its length, not element by element."""
    reply = post(open_guard.url, body)
    assert reply.status_code == 422
    error = reply.json()["error"]
    assert error["field"] == field and len(error["details"]) == 1 and "at most 16" in error["message"]


def test_health_answers_while_amplification_bodies_are_refused(open_guard: RunningGuard) -> None:
    """Found: four such bodies at once stalled ``/health`` for 8.5 s (validation on the event loop)."""
    body = b'{"rows": [' + b"0," * 499_999 + b"0]}"
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        attacks = [pool.submit(post, open_guard.url, body) for _ in range(4)]
        time.sleep(0.05)
        started = time.monotonic()
        assert httpx.get(open_guard.url + "/health", timeout=30).status_code == 200
        health_s = time.monotonic() - started
        assert [f.result().status_code for f in attacks] == [400] * 4
    assert health_s < 2.0, health_s


def test_many_validation_errors_are_capped_in_the_reply(open_guard: RunningGuard) -> None:
    rows = [{"question": i, "contexts": [i], "answer": i, "id": i} for i in range(16)]
    error = post(open_guard.url, {"rows": rows}).json()["error"]
    assert len(error["details"]) == 10 and "more errors" in error["message"]


# -- 3. cross-site requests --------------------------------------------------------------------------
@pytest.mark.parametrize("content_type", [None, "text/plain; charset=json", "application/json-seq"])
def test_only_application_json_is_accepted(open_guard: RunningGuard, content_type: str | None) -> None:
    """Found: no Content-Type, or ``text/plain; charset=json`` (a browser's no-cors POST), passed."""
    headers = {} if content_type is None else {"content-type": content_type}
    reply = httpx.post(open_guard.url + "/v1/check", content=json.dumps(ROW).encode(), headers=headers)
    assert reply.status_code == 415, reply.text
    ok = httpx.post(
        open_guard.url + "/v1/check",
        content=json.dumps(ROW).encode(),
        headers={"content-type": "application/json; charset=utf-8"},
    )
    assert ok.status_code == 200


def test_a_foreign_host_or_origin_is_refused_on_loopback(open_guard: RunningGuard) -> None:
    """DNS rebinding (a foreign Host on 127.0.0.1) and cross-site pages (a foreign Origin): 403."""
    port = urlsplit(open_guard.url).port
    for headers in (
        {"host": f"evil.example:{port}"},
        {"host": "127.0.0.1:1"},
        {"origin": "http://evil.example"},
        {"origin": "null"},
    ):
        reply = post(open_guard.url, ROW, headers=headers)
        assert reply.status_code == 403, headers
        assert reply.json()["error"]["field"] in ("host", "origin")
        assert httpx.get(open_guard.url + "/ready", headers=headers).status_code == 403
    for headers in ({"host": f"localhost:{port}"}, {"origin": f"http://127.0.0.1:{port}"}):
        assert post(open_guard.url, ROW, headers=headers).status_code == 200, headers


# -- 4. documentation pages --------------------------------------------------------------------------
def test_docs_are_off_by_default(open_guard: RunningGuard) -> None:
    """Found: /docs and /redoc were open and pulled scripts from public CDNs."""
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert httpx.get(open_guard.url + path).status_code == 404, path


@pytest.fixture(scope="module")
def docs_guard() -> Iterator[RunningGuard]:
    with running(GuardConfig(model="fake", docs=True, api_keys=ApiKeys([KEY]))) as guard:
        yield guard


def test_docs_on_request_are_behind_the_key(docs_guard: RunningGuard) -> None:
    auth = {"X-API-Key": KEY}
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert httpx.get(docs_guard.url + path).status_code == 401, path
        assert httpx.get(docs_guard.url + path, headers=auth).status_code == 200, path
    schema = httpx.get(docs_guard.url + "/openapi.json", headers=auth).json()
    rows = schema["components"]["schemas"]["CheckRequest"]["properties"]["rows"]
    assert rows["anyOf"][0]["maxItems"] == 16  # the cap is in the schema clients see


# -- 5. clients that hang up -------------------------------------------------------------------------
def test_client_disconnects_are_not_counted_as_server_errors() -> None:
    """Found: a client that hung up was counted as ``status="500"`` in /metrics."""
    with running(GuardConfig(model=SlowFake(0.5))) as guard:
        # Hang up while sending the body...
        sock = _start_upload(guard.url, 1_000, b'{"question": ')
        time.sleep(0.2)
        sock.close()
        # ... and while the request is being scored.
        body = json.dumps(ROW).encode()
        sock = _start_upload(guard.url, len(body), body)
        time.sleep(0.2)
        sock.close()
        line = 'ragsense_guard_requests_total{endpoint="/v1/check",status="%s"}'
        deadline = time.monotonic() + 10
        while metric_value(guard.url, line % "499") < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert metric_value(guard.url, line % "499") == 2
        assert metric_value(guard.url, line % "500") == 0


def test_commas_inside_texts_do_not_count_as_values(open_guard: RunningGuard) -> None:
    """The value count looks only outside strings: documents full of commas (and escapes) pass."""
    document = "Baker, a biochemist, designs proteins, " * 480  # about 2,400 commas
    rows = [{**ROW, "contexts": [document, 'a "quoted", \\ text, ' * 40]} for _ in range(4)]
    assert post(open_guard.url, {"rows": rows}).status_code == 200
    assert post(open_guard.url, {**ROW, "contexts": [document]}).status_code == 200


def test_a_hostile_body_is_refused_late_and_holds_no_slot() -> None:
    """A client looping amplification bodies gets one refusal per delay, not hundreds a second."""
    body = b'{"rows": [' + b"0," * 100_000 + b"0]}"
    config = GuardConfig(model="fake", hostile_delay_s=0.8, concurrency_per_key=1)
    with running(config) as guard, concurrent.futures.ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        refused = pool.submit(post, guard.url, body)
        time.sleep(0.2)
        assert post(guard.url, ROW).status_code == 200  # the one slot is free meanwhile
        assert refused.result().status_code == 400
        assert time.monotonic() - started >= 0.8
