"""Graceful shutdown: SIGTERM with requests in flight; every accepted request is answered, then exit 0."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from ._helpers import ROW

SERVER = Path(__file__).with_name("_slow_server.py")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(predicate, timeout: float) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_sigterm_finishes_requests_in_flight_then_exits(tmp_path: Path) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log.open("w") as stderr:
        process = subprocess.Popen([sys.executable, str(SERVER), str(port), "0.7"], stderr=stderr, env=env)
    try:

        def ready() -> bool:
            try:
                return httpx.get(url + "/ready", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        _wait_for(ready, 60)
        ids = [f"inflight-{i}" for i in range(6)]

        async def main() -> tuple[list[httpx.Response], list[float], float]:
            finished: list[float] = []
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:

                async def one(request_id: str) -> httpx.Response:
                    reply = await client.post("/v1/check", json={**ROW, "id": request_id})
                    finished.append(time.monotonic())
                    return reply

                tasks = [asyncio.ensure_future(one(i)) for i in ids]
                # SIGTERM once the server has accepted every request (its log says so, ids only).
                while log.read_text().count(" accepted rows=") < len(ids):
                    await asyncio.sleep(0.02)
                sent = time.monotonic()
                process.send_signal(signal.SIGTERM)
                return list(await asyncio.gather(*tasks)), finished, sent

        replies, finished, sigterm_at = asyncio.run(main())
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
    assert [r.status_code for r in replies] == [200] * len(ids)
    assert sorted(r.json()["id"] for r in replies) == sorted(ids)  # each answered once, to its own id
    assert any(t > sigterm_at for t in finished), "no request was still in flight at SIGTERM"
    text = log.read_text()
    assert all(text.count(f"request {i} key=anonymous rows=1 -> 200") == 1 for i in ids)
    try:
        httpx.get(url + "/health", timeout=2)
        raise AssertionError("the server still answers after exiting")
    except httpx.TransportError:
        pass
