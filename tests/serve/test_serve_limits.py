"""``ragsense serve``'s limits (issue 47): a body deadline, connections evictable while they send
their body, a per-request work cap, each with a flag. Real servers on 127.0.0.1, bounded in time."""

from __future__ import annotations

import contextlib
import socket
import time

import pytest

httpx = pytest.importorskip("httpx")

from ragsense.cli._main import build_parser  # noqa: E402
from ragsense.cli._serve import limits_from_args  # noqa: E402
from ragsense.models._fake import FakeModel  # noqa: E402
from ragsense.serve import ServeLimits, start_in_thread  # noqa: E402


def trickle(port: int) -> socket.socket:
    """A connection whose headers are whole and whose body has 10 of its 1,000 bytes."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 1000\r\n\r\n"
    sock.sendall(head.encode() + b'{"prompt":')
    return sock


def test_a_trickled_body_is_408_at_its_deadline() -> None:
    """A body was read under a 30 s per-read timeout only: a client sending a byte now and then held
    its connection and thread (45 s seen)."""
    server, url = start_in_thread(FakeModel(), log_requests=False, limits=ServeLimits(body_timeout_s=1.0))
    try:
        sock = trickle(server.server_address[1])
        started = time.monotonic()
        time.sleep(0.5)
        sock.sendall(b' "a')  # still trickling: each byte is in time, the body is not
        answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:80]
        assert time.monotonic() - started < 3
        sock.close()
        assert httpx.post(url + "/completions", json={"prompt": "a", "max_tokens": 1}).status_code == 200
    finally:
        server.close()


def test_connections_sending_their_body_are_evicted_for_new_ones() -> None:
    """260 trickling bodies (past their headers, so never evicted) made 40 of 40 normal requests fail."""
    limits = ServeLimits(max_connections=20, body_timeout_s=30.0)
    server, url = start_in_thread(FakeModel(), log_requests=False, limits=limits)
    with contextlib.ExitStack() as held:  # the server closes last, after the trickling sockets
        held.callback(server.close)
        for _ in range(30):
            held.enter_context(trickle(server.server_address[1]))
        time.sleep(0.2)  # their headers are read: they are all sending bodies
        started = time.monotonic()
        for _ in range(10):
            reply = httpx.post(url + "/completions", json={"prompt": "a", "max_tokens": 1}, timeout=5)
            assert reply.status_code == 200
        assert time.monotonic() - started < 5
        assert server._open <= 21


def test_prompts_and_characters_a_request_asks_for_are_capped() -> None:
    """A ``prompt`` list was bounded only by the 32 MB body: 8 MB in, 122 MB out, 768 MB peak."""
    limits = ServeLimits(max_prompts=4, max_chars=100)
    server, url = start_in_thread(FakeModel(), log_requests=False, limits=limits)
    try:
        many = httpx.post(url + "/completions", json={"prompt": ["a"] * 5, "max_tokens": 1})
        assert many.status_code == 413 and many.json()["error"]["param"] == "prompt"
        long = httpx.post(url + "/completions", json={"prompt": ["a" * 60, "b" * 41], "max_tokens": 1})
        assert long.status_code == 413 and "--max-prompt-chars" in long.json()["error"]["message"]
        chat = [{"role": "user", "content": "c" * 101}]
        refused = httpx.post(url + "/chat/completions", json={"messages": chat, "max_tokens": 1})
        assert refused.status_code == 413 and refused.json()["error"]["param"] == "messages"
        token = httpx.post(url.removesuffix("/v1") + "/tokenize", json={"prompt": "t" * 101})
        assert token.status_code == 413
        ok = httpx.post(url + "/completions", json={"prompt": ["a"] * 4, "max_tokens": 1})
        assert ok.status_code == 200 and len(ok.json()["choices"]) == 4
        big = httpx.post(url + "/completions", content=b" " * (8 * 1024 * 1024 + 1))
        assert big.status_code == 413
    finally:
        server.close()


def test_the_limits_are_flags_of_serve() -> None:
    argv = ["serve", "--model", "fake", "--max-prompts", "3", "--body-timeout", "2.5"]
    argv += ["--max-connections", "9", "--max-prompt-chars", "50", "--max-body-bytes", "4096"]
    limits = limits_from_args(build_parser().parse_args(argv))
    assert limits == ServeLimits(
        body_timeout_s=2.5, max_connections=9, max_prompts=3, max_chars=50, max_body_bytes=4096
    )
    assert limits_from_args(build_parser().parse_args(["serve", "--model", "fake"])) == ServeLimits()
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--model", "fake", "--max-prompts", "0"])
