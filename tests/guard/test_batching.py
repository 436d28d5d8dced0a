"""Micro-batching: batches form, a full queue answers 429 at once, a timeout is 504, a client that
disconnects does not break its batch, and a failing batch does not kill the worker."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import httpx
import pytest

from ragsense.guard import GuardConfig, Limits, MicroBatcher, QueueFull

from ._helpers import ROW, SlowFake, metric_value, post, running


def _batcher(delay: float, **options: object) -> tuple[MicroBatcher, list[list[int]]]:
    seen: list[list[int]] = []

    async def score(payloads: Sequence[int]) -> list[int]:
        seen.append(list(payloads))
        time.sleep(delay)  # blocks like a forward pass
        return [p * 10 for p in payloads]

    batcher = MicroBatcher(score, **options)  # type: ignore[arg-type]
    batcher.start()
    assert batcher.wait_ready(5)
    return batcher, seen


def test_jobs_arriving_together_are_scored_together() -> None:
    batcher, seen = _batcher(0.0, max_wait_s=0.2, max_batch_rows=8)

    async def main() -> list[int]:
        return list(await asyncio.gather(*(batcher.submit(i, rows=1) for i in range(5))))

    try:
        assert asyncio.run(main()) == [0, 10, 20, 30, 40]
        assert seen == [[0, 1, 2, 3, 4]]  # one batch, in arrival order
    finally:
        batcher.close()


def test_a_batch_stops_at_max_rows_and_a_full_queue_refuses_at_once() -> None:
    batcher, seen = _batcher(0.3, max_wait_s=0.0, max_batch_rows=2, max_queue_rows=4)

    async def main() -> tuple[list[object], float]:
        first = asyncio.ensure_future(batcher.submit(0, rows=1))
        await asyncio.sleep(0.1)  # the worker takes it: the queue is empty again
        waiting = [asyncio.ensure_future(batcher.submit(i, rows=1)) for i in range(1, 5)]
        await asyncio.sleep(0)
        started = time.perf_counter()
        with pytest.raises(QueueFull) as refused:
            await batcher.submit(99, rows=1)
        assert refused.value.retry_after >= 1
        refused_after = time.perf_counter() - started
        return list(await asyncio.gather(first, *waiting)), refused_after

    try:
        results, refused_after = asyncio.run(main())
        assert results == [0, 10, 20, 30, 40]
        assert refused_after < 0.1  # not after waiting for a slot
        assert [len(b) for b in seen] == [1, 2, 2]
    finally:
        batcher.close()


def test_a_failing_batch_fails_its_jobs_and_the_worker_lives_on() -> None:
    calls = []

    async def score(payloads: Sequence[int]) -> list[int]:
        calls.append(payloads)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return list(payloads)

    batcher = MicroBatcher(score)
    batcher.start()
    batcher.wait_ready(5)
    try:
        with pytest.raises(RuntimeError, match="boom"):
            asyncio.run(batcher.submit(1, rows=1))
        assert asyncio.run(batcher.submit(2, rows=1)) == 2
    finally:
        batcher.close()


def test_a_cancelled_job_that_has_not_started_is_skipped() -> None:
    batcher, seen = _batcher(0.3, max_wait_s=0.0, max_batch_rows=1)

    async def main() -> None:
        running_job = asyncio.ensure_future(batcher.submit(1, rows=1))
        await asyncio.sleep(0.1)
        queued = asyncio.ensure_future(batcher.submit(2, rows=1))
        await asyncio.sleep(0.05)
        queued.cancel()
        assert await running_job == 10
        assert await batcher.submit(3, rows=1) == 30

    try:
        asyncio.run(main())
        assert seen == [[1], [3]]
    finally:
        batcher.close()


def test_full_queue_over_http_is_429_with_retry_after_at_once() -> None:
    config = GuardConfig(
        model=SlowFake(0.8), max_batch_rows=1, max_wait_ms=0, max_queue_rows=2, limits=Limits(max_rows=2)
    )
    with running(config) as guard:

        async def main() -> list[tuple[int, float, str | None]]:
            async with httpx.AsyncClient(base_url=guard.url, timeout=30) as client:

                async def one(i: int) -> tuple[int, float, str | None]:
                    started = time.perf_counter()
                    reply = await client.post("/v1/check", json={**ROW, "id": f"r{i}"})
                    return reply.status_code, time.perf_counter() - started, reply.headers.get("retry-after")

                return list(await asyncio.gather(*(one(i) for i in range(6))))

        outcomes = asyncio.run(main())
        refused = [o for o in outcomes if o[0] == 429]
        served = [o for o in outcomes if o[0] == 200]
        assert refused and len(served) >= 2 and len(refused) + len(served) == 6
        assert all(int(o[2] or 0) >= 1 for o in refused)
        assert max(o[1] for o in refused) < min(o[1] for o in served)  # refused before any was scored
        assert metric_value(guard.url, 'ragsense_guard_rejected_total{reason="queue_full"}') == len(refused)


def test_a_request_past_its_timeout_is_504() -> None:
    with running(GuardConfig(model=SlowFake(1.0), timeout_s=0.3)) as guard:
        reply = post(guard.url, ROW)
        assert reply.status_code == 504 and reply.json()["error"]["type"] == "timeout"


def test_a_client_that_disconnects_does_not_break_its_batch() -> None:
    expected = post_fresh_expected()
    config = GuardConfig(model=SlowFake(1.0), max_wait_ms=300, max_batch_rows=8)
    with running(config) as guard:

        async def main() -> list[httpx.Response | None]:
            async with (
                httpx.AsyncClient(base_url=guard.url, timeout=30) as patient,
                httpx.AsyncClient(base_url=guard.url, timeout=0.8) as impatient,
            ):

                async def leaver() -> None:
                    with pytest.raises(httpx.TimeoutException):
                        await impatient.post("/v1/check", json={**ROW, "id": "leaver"})

                replies = await asyncio.gather(
                    patient.post("/v1/check", json={**ROW, "id": "a"}),
                    leaver(),
                    patient.post("/v1/check", json={**ROW, "id": "b"}),
                )
                return [r for r in replies if r is not None]

        replies = asyncio.run(main())
        assert [r.status_code for r in replies] == [200, 200]  # type: ignore[union-attr]
        for reply in replies:
            assert reply.json()["results"][0]["consens"] == pytest.approx(expected, abs=1e-12)  # type: ignore[union-attr]
        assert metric_value(guard.url, "ragsense_guard_batch_rows_sum") == 3  # the leaver was in the batch
        assert metric_value(guard.url, "ragsense_guard_batch_rows_count") == 1
        assert post(guard.url, ROW).status_code == 200  # and the server goes on


def post_fresh_expected() -> float:
    with running(GuardConfig(model=SlowFake(0.0))) as guard:
        return float(post(guard.url, ROW).json()["results"][0]["consens"])
