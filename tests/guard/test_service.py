"""The guard over HTTP with the fake model: results, every limit, hostile inputs, policy, metrics, logs."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from ragsense.evaluation import evaluate
from ragsense.guard import GuardConfig, Limits, Policy, RunningGuard

from ._helpers import ROW, metric_value, post, running


def test_one_row_carries_evaluates_fields_and_the_policy(open_guard: RunningGuard) -> None:
    reply = post(open_guard.url, {**ROW, "id": "req-1"})
    assert reply.status_code == 200
    assert reply.headers["x-request-id"] == "req-1"
    body = reply.json()
    assert body["id"] == "req-1" and body["model"] == "fake" and body["passed"] is True
    [result] = body["results"]
    offline = evaluate([ROW], "consens", model="fake", progress=False).rows[0]
    for field in (
        "consens",
        "consens_raw",
        "verdict",
        "words",
        "aggregation",
        "consens_by_aggregation",
        "model",
    ):
        assert result[field] == offline[field], field
    assert result["passed"] is True and result["min_consens"] == Policy().min_consens
    contrasts = [w["contrast"] for w in result["weakest_words"]]
    assert contrasts == sorted(contrasts) and len(contrasts) <= 5
    assert "answer" not in result and "question" not in result  # the texts are not echoed


def test_a_batch_answers_each_row_with_its_id_and_attribution_on_request(open_guard: RunningGuard) -> None:
    rows = [
        {**ROW, "id": "a", "contexts": ["David Baker designs proteins.", "Seattle is rainy."]},
        {**ROW, "id": "b", "answer": "Marie Curie studied radium in Paris."},
    ]
    body = post(open_guard.url, {"rows": rows, "attribution": True, "weakest": 2}).json()
    assert [r["id"] for r in body["results"]] == ["a", "b"]
    first, second = body["results"]
    assert first["top_document"] == 0 and len(first["attribution"]) == 2
    assert second["verdict"] != "grounded" and second["passed"] is False and body["passed"] is False
    assert all(len(r["weakest_words"]) <= 2 for r in body["results"])


def test_min_consens_may_be_tightened_not_loosened(open_guard: RunningGuard) -> None:
    row = {**ROW, "answer": "David Baker designs proteins in Seattle."}  # a score below 1 by any default
    score = post(open_guard.url, row).json()["results"][0]["consens"]
    threshold = max(Policy().min_consens, (score + 1) / 2)  # within the bounds, above the score
    strict = post(open_guard.url, {**row, "min_consens": threshold}).json()["results"][0]
    assert strict["min_consens"] == threshold and strict["passed"] is False
    loose = post(open_guard.url, {**ROW, "min_consens": -0.5})
    assert loose.status_code == 422 and loose.json()["error"]["field"] == "min_consens"


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        (b'{"question": "Q?", "contexts": ["C."], "answer": NaN}', 400, None),
        (b'{"question": "Q?", "contexts": ["C."], "answer": "A.", "min_consens": Infinity}', 400, None),
        (b'{"question": "Q?", "contexts": ["C."], "answer": "A.", "min_consens": 1e999}', 400, None),
        (b'{"question": "Q?", "contexts": ["C."], "answer": "A.\xff"}', 400, None),
        (b'{"question": "Q?", "contexts": ["C."]', 400, None),
        (b"", 400, None),
        (b"[" * 100_000 + b"]" * 100_000, 400, None),
        (b'["not", "an", "object"]', 422, "body"),
        (b'{"question": 5, "contexts": ["C."], "answer": "A."}', 422, "question"),
        (b'{"question": "Q?", "contexts": "C.", "answer": "A."}', 422, "contexts"),
        (b'{"question": "Q?", "contexts": [1], "answer": "A."}', 422, "contexts[0]"),
        (b'{"rows": [{"question": "Q?", "contexts": ["C."], "answer": 1}]}', 422, "rows[0].answer"),
        (b'{"question": "Q?", "contexts": ["C."], "answer": "A.", "attribution": "yes"}', 422, "attribution"),
        (b'{"question": "Q?", "contexts": ["C."], "answer": "A.", "colour": "red"}', 422, "colour"),
        (b'{"question": "Q?", "contexts": ["C."]}', 422, None),
        (b'{"question": "Q?", "contexts": ["C."], "answer": "\\ud800"}', 422, "answer"),
        (b'{"question": "Q?", "contexts": ["C."], "answer": "   "}', 422, "answer"),
        (b'{"question": "Q?", "contexts": [], "answer": "A."}', 422, "contexts"),
        (b'{"question": "Q?", "contexts": ["C."], "answer": "A.", "adherence": true}', 422, "adherence"),
        (b'{"question": "Q?", "contexts": ["C."], "answer": "A.", "id": "a\\nb"}', 422, "id"),
    ],
)
def test_hostile_inputs_are_4xx_naming_the_field(
    open_guard: RunningGuard, body: bytes, status: int, field: str | None
) -> None:
    reply = post(open_guard.url, body)
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["status"] == status and error["message"]
    assert error["field"] == field


def test_a_non_json_content_type_is_415(open_guard: RunningGuard) -> None:
    reply = post(open_guard.url, json.dumps(ROW).encode(), headers={"content-type": "text/plain"})
    assert reply.status_code == 415


_SMALL = Limits(
    max_body_bytes=2_000,
    max_rows=2,
    max_documents=2,
    max_question_chars=60,
    max_answer_chars=120,
    max_document_chars=400,
    max_question_tokens=8,
    max_answer_tokens=12,
    max_context_tokens=30,
)


@pytest.fixture(scope="module")
def small_guard() -> RunningGuard:
    with running(GuardConfig(model="fake", limits=_SMALL)) as guard:
        yield guard  # type: ignore[misc]


@pytest.mark.parametrize(
    ("change", "status", "field"),
    [
        ({"contexts": ["word " * 500]}, 413, "body"),
        ({"rows": [ROW, ROW, ROW]}, 422, "rows"),
        ({"contexts": ["a.", "b.", "c."]}, 422, "contexts"),
        ({"question": "Q" * 61}, 422, "question"),
        ({"answer": "A" * 121}, 422, "answer"),
        ({"contexts": ["C" * 401]}, 422, "contexts[0]"),
        ({"question": "who " * 9 + "?"}, 422, "question"),
        ({"answer": "yes " * 13}, 422, "answer"),
        ({"contexts": ["one two three four five six seven eight", "x " * 25]}, 422, "contexts"),
        ({"rows": [ROW, {**ROW, "answer": "yes " * 13}]}, 422, "rows[1].answer"),
    ],
)
def test_every_limit_is_a_clear_4xx(small_guard: RunningGuard, change: dict, status: int, field: str) -> None:
    body = {k: v for k, v in ROW.items() if "rows" not in change} | change
    reply = post(small_guard.url, body)
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["field"] == field and ("at most" in error["message"] or "over" in error["message"])


def test_within_the_limits_is_scored(small_guard: RunningGuard) -> None:
    assert post(small_guard.url, ROW).status_code == 200


def test_metrics_count_what_happened() -> None:
    with running(GuardConfig(model="fake")) as guard:
        assert post(guard.url, ROW).status_code == 200
        assert post(guard.url, {"rows": [ROW, {**ROW, "answer": "Paris."}]}).status_code == 200
        assert post(guard.url, b"{").status_code == 400
        assert post(guard.url, {**ROW, "answer": 3}).status_code == 422
        assert httpx.get(guard.url + "/health").status_code == 200
        url = guard.url
        assert metric_value(url, 'ragsense_guard_requests_total{endpoint="/v1/check",status="200"}') == 2
        assert metric_value(url, 'ragsense_guard_requests_total{endpoint="/v1/check",status="400"}') == 1
        assert metric_value(url, 'ragsense_guard_requests_total{endpoint="/v1/check",status="422"}') == 1
        assert metric_value(url, 'ragsense_guard_rows_scored_total{outcome="ok"}') == 3
        assert metric_value(url, "ragsense_guard_batch_rows_count") == 2
        assert metric_value(url, "ragsense_guard_batch_rows_sum") == 3
        assert metric_value(url, 'ragsense_guard_request_seconds_count{endpoint="/v1/check"}') == 4
        assert metric_value(url, 'ragsense_guard_rejected_total{reason="invalid"}') == 2
        assert metric_value(url, "ragsense_guard_queue_rows") == 0
        # Memory: the floor after a batch (what a leak would raise) and the process's own gauges.
        after_batch = metric_value(url, "ragsense_guard_resident_bytes_after_batch")
        assert 10e6 < after_batch <= metric_value(url, "process_resident_memory_bytes") * 2


def test_health_ready_and_openapi(open_guard: RunningGuard) -> None:
    assert httpx.get(open_guard.url + "/health").json() == {"status": "ok"}
    assert httpx.get(open_guard.url + "/ready").json() == {"status": "ready", "model": "fake"}
    with running(GuardConfig(model="fake", docs=True)) as guard:  # the schema is served on request
        schema = httpx.get(guard.url + "/openapi.json").json()
        assert httpx.get(guard.url + "/docs").status_code == 200
    assert {"/v1/check", "/health", "/ready", "/metrics"} <= set(schema["paths"])
    assert "rows" in schema["components"]["schemas"]["CheckRequest"]["properties"]


def test_no_content_in_the_logs_unless_asked(caplog: pytest.LogCaptureFixture) -> None:
    marker = "Zanzibarian"
    row = {**ROW, "answer": f"{marker} designs proteins."}
    caplog.set_level(logging.INFO, logger="ragsense.guard")
    with running(GuardConfig(model="fake")) as guard:
        assert post(guard.url, {**row, "id": "quiet"}).status_code == 200
    assert "request quiet accepted" in caplog.text and marker not in caplog.text
    caplog.clear()
    with running(GuardConfig(model="fake", log_content=True)) as guard:
        assert post(guard.url, row).status_code == 200
    assert marker in caplog.text


def test_vera_adherence_when_a_judge_is_configured() -> None:
    with running(GuardConfig(model="fake", judge="fake")) as guard:
        plain = post(guard.url, ROW).json()["results"][0]
        judged = post(guard.url, {**ROW, "adherence": True}).json()["results"][0]
    assert "response_adherence" not in plain
    assert isinstance(judged["response_adherence"], float) and judged["errors"] == []
    assert judged["consens"] == plain["consens"]
