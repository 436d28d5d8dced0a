"""Helpers of the guard tests: real uvicorn servers on 127.0.0.1 (in a thread), a slow fake model."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")
httpx = pytest.importorskip("httpx")

from ragsense.guard import GuardConfig, RunningGuard, start_in_thread  # noqa: E402
from ragsense.models import ContinuationScore, ScoreRequest  # noqa: E402
from ragsense.models._fake import FakeModel  # noqa: E402

ROW = {
    "question": "Who designs proteins?",
    "contexts": ["David Baker designs proteins at the University of Washington."],
    "answer": "David Baker designs proteins.",
}


class SlowFake(FakeModel):
    """The fake model, blocking ``delay`` seconds per score call as a real forward pass blocks."""

    def __init__(self, delay: float) -> None:
        super().__init__("slow-fake")
        self.delay = delay

    async def score(self, requests: Sequence[ScoreRequest]) -> list[ContinuationScore]:
        time.sleep(self.delay)
        return await super().score(requests)


@contextmanager
def running(config: GuardConfig) -> Iterator[RunningGuard]:
    guard = start_in_thread(config)
    try:
        yield guard
    finally:
        guard.stop()


def post(url: str, body: Any, headers: dict[str, str] | None = None, timeout: float = 30.0) -> Any:
    """POST ``body`` (bytes as they are, anything else as JSON) to ``url``/v1/check."""
    head = {"content-type": "application/json", **(headers or {})}
    if isinstance(body, bytes):
        return httpx.post(url + "/v1/check", content=body, headers=head, timeout=timeout)
    return httpx.post(url + "/v1/check", json=body, headers=head, timeout=timeout)


def metric_value(url: str, line_start: str, headers: dict[str, str] | None = None) -> float:
    """The value of the exposition line starting with ``line_start`` (0 when absent)."""
    text = httpx.get(url + "/metrics", headers=headers or {}).text
    for line in text.splitlines():
        if line.startswith(line_start + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def sink_records(path: Path, n: int) -> list[dict[str, Any]]:
    """The JSONL sink's records once it has at least ``n`` (waits up to 20 s: traces are scored after
    their export is answered)."""
    deadline = time.monotonic() + 20
    lines: list[str] = []
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= n:
            return [json.loads(line) for line in lines]
        time.sleep(0.05)
    raise AssertionError(f"the sink has {len(lines)} of {n} lines")
