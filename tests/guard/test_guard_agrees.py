"""Issue 48 on the guard, over HTTP on 127.0.0.1 with the fake model: a single row's id is the
response's, ``evaluate``'s field names are taken, and docs/guard.md's example request is answered by a
guard started as documented."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ragsense.consens import default_bands, explain_row
from ragsense.guard import RunningGuard

from ._helpers import ROW, post

GUARD_DOC = Path(__file__).parents[2] / "docs" / "guard.md"


def test_a_single_row_without_an_id_carries_the_response_id(open_guard: RunningGuard) -> None:
    body = post(open_guard.url, ROW).json()
    [result] = body["results"]
    assert body["id"] and result["id"] == body["id"] and result["id"] != "0"
    given = post(open_guard.url, ROW, headers={"X-Request-ID": "trace-7"}).json()
    assert given["id"] == given["results"][0]["id"] == "trace-7"
    batch = post(open_guard.url, {"rows": [ROW, ROW]}).json()  # a batch's rows keep their positions
    assert [r["id"] for r in batch["results"]] == ["0", "1"]


def test_evaluates_field_names_are_taken(open_guard: RunningGuard) -> None:
    plain = post(open_guard.url, ROW).json()["results"][0]
    one = {"question": ROW["question"], "context": ROW["contexts"][0], "answer": ROW["answer"]}
    reply = post(open_guard.url, one)
    assert reply.status_code == 200, reply.text
    assert reply.json()["results"][0]["consens"] == plain["consens"]
    ragas = {"user_input": ROW["question"], "retrieved_contexts": ROW["contexts"], "response": ROW["answer"]}
    batch = post(open_guard.url, {"rows": [ragas]})
    assert batch.status_code == 200 and batch.json()["results"][0]["consens"] == plain["consens"]
    clash = post(open_guard.url, {**ROW, "context": "Another passage."})
    assert clash.status_code == 422 and "keep one" in clash.text


def test_the_documented_request_is_answered_and_its_single_row_carries_its_id(
    open_guard: RunningGuard,
) -> None:
    # The first JSON block of docs/guard.md, sent as written to a guard with the documented defaults.
    text = GUARD_DOC.read_text(encoding="utf-8")
    example = json.loads(re.findall(r"```json\n(.*?)```", text, re.S)[0])
    reply = post(open_guard.url, example)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["id"] == example["id"] == body["results"][0]["id"]
    assert "a single row's result carries it" in text


def test_each_result_says_why_in_the_words_junit_uses(open_guard: RunningGuard) -> None:
    wrong = {**ROW, "answer": "Marie Curie studied radium in Warsaw."}
    result = post(open_guard.url, wrong).json()["results"][0]
    assert result["reason"] == explain_row(result, default_bands())  # the guard runs the default bands
    assert result["reason"].startswith(f"{result['verdict']}: consens ")
    assert "weakest words: " in result["reason"]
