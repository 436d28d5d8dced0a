"""The bundled model behind the guard: micro-batched results equal single-row results and evaluate's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ragsense.evaluation import evaluate
from ragsense.guard import GuardConfig

from ._helpers import running

pytestmark = pytest.mark.model

ROWS = [
    {
        "id": "baker",
        "question": "Who designs proteins?",
        "contexts": ["David Baker designs proteins at the University of Washington in Seattle."],
        "answer": "David Baker designs proteins in Seattle.",
    },
    {
        "id": "curie",
        "question": "What did Marie Curie study?",
        "contexts": ["Marie Curie studied radioactivity.", "She was born in Warsaw."],
        "answer": "Marie Curie studied radioactivity.",
    },
    {
        "id": "ungrounded",
        "question": "Where is the Eiffel Tower?",
        "contexts": ["The Colosseum is an amphitheatre in Rome."],
        "answer": "The Eiffel Tower is in Berlin, next to the river.",
    },
]


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_batched_equals_single_row_and_evaluate(smollm2: Any, one_thread: None) -> None:
    config = GuardConfig(model=smollm2, max_wait_ms=200, max_batch_rows=16)
    with running(config) as guard:
        single = [httpx.post(guard.url + "/v1/check", json=row, timeout=300).json() for row in ROWS]

        async def together() -> list[dict[str, Any]]:
            async with httpx.AsyncClient(base_url=guard.url, timeout=300) as client:
                replies = await asyncio.gather(*(client.post("/v1/check", json=row) for row in ROWS))
                return [r.json() for r in replies]

        concurrent = asyncio.run(together())
        batch = httpx.post(guard.url + "/v1/check", json={"rows": ROWS}, timeout=300).json()
        batches = httpx.get(guard.url + "/metrics").text
    offline = evaluate(ROWS, "consens", model=smollm2, progress=False).rows
    assert 'ragsense_guard_batch_rows_bucket{le="2.0"}' in batches
    for k, row in enumerate(ROWS):
        one = single[k]["results"][0]
        for other in (concurrent[k]["results"][0], batch["results"][k]):
            assert other["id"] == row["id"]
            assert other["consens"] == pytest.approx(one["consens"], abs=1e-4)
            assert other["verdict"] == one["verdict"]
            assert [w["word"] for w in other["weakest_words"]] == [w["word"] for w in one["weakest_words"]]
        assert one["consens"] == pytest.approx(offline[k]["consens"], abs=1e-4)
        assert one["verdict"] == offline[k]["verdict"] and one["model"] == offline[k]["model"]
    assert single[0]["results"][0]["passed"] is True
    for reply in single:
        result = reply["results"][0]
        assert result["passed"] == (result["consens"] >= result["min_consens"])
