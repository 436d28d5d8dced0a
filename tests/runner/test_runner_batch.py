"""run_batch: output rows, fixed chunks, error rows, per-row fallback, overwrite rules, progress."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ragsense.data import RagRow, parse_rows
from ragsense.errors import InputError
from ragsense.runner import ResultCountError, RunSummary, run_batch


def raw_rows(n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"r{i}", "question": f"Q{i}?", "contexts": [f"C{i}."], "answer": f"A{i}."} for i in range(n)
    ]


def lengths(rows: list[RagRow]) -> list[dict[str, Any]]:
    return [{"answer_len": len(row.answer)} for row in rows]


def read_out(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_output_rows_keep_input_fields_and_add_results(tmp_path: Path) -> None:
    raws: list[dict[str, Any]] = [
        {"user_input": "Q?", "retrieved_contexts": ["C."], "response": "Yes.", "tag": 1},
        {"question": "Q2?", "context": "C2.", "answer": "No.", "reference": "Ref"},
    ]
    out = tmp_path / "out.jsonl"
    summary = run_batch(parse_rows(raws), lengths, out, progress=False)
    assert read_out(out) == [
        {"id": "0", **raws[0], "answer_len": 4, "_row": 0},
        {"id": "1", **raws[1], "answer_len": 3, "_row": 1},
    ]
    assert (summary.n_rows, summary.n_ok, summary.n_errors, summary.n_skipped_resumed) == (2, 2, 0, 0)
    assert summary.seconds >= 0 and "2 rows: 2 ok, 0 errors" in str(summary)


def test_chunks_are_fixed_slices_of_the_input_and_skip_bad_rows(tmp_path: Path) -> None:
    raws = raw_rows(7)
    raws[2]["answer"] = ""  # a bad row: stays in chunk 0's slot but is not sent to the metric
    raws[4] = {"id": "r4"}
    raws[5] = {"id": "r5"}
    seen: list[list[str]] = []

    def record(rows: list[RagRow]) -> list[dict[str, Any]]:
        seen.append([row.id for row in rows])
        return lengths(rows)

    out = tmp_path / "out.jsonl"
    summary = run_batch(parse_rows(raws), record, out, chunk_size=3, progress=False)
    assert seen == [["r0", "r1"], ["r3"], ["r6"]]
    rows = read_out(out)
    assert [row["_row"] for row in rows] == list(range(7))
    assert rows[2]["error"] == {"field": "answer", "message": "'answer' is empty"}
    assert "answer_len" not in rows[2] and rows[2]["answer"] == ""
    assert rows[4] == {"id": "r4", "error": rows[4]["error"], "_row": 4}
    assert rows[4]["error"]["field"] == "question"
    assert (summary.n_rows, summary.n_ok, summary.n_errors) == (7, 4, 3)
    assert [(index, field) for index, field, _ in summary.errors] == [
        (2, "answer"),
        (4, "question"),
        (5, "question"),
    ]


def test_a_failing_chunk_is_retried_row_by_row(tmp_path: Path) -> None:
    raws = raw_rows(5)
    raws[1]["answer"] = "BOOM"
    raws[3]["answer"] = "BAD INPUT"
    calls: list[int] = []

    def fragile(rows: list[RagRow]) -> list[dict[str, Any]]:
        calls.append(len(rows))
        for row in rows:
            if row.answer == "BOOM":
                raise RuntimeError("model exploded")
            if row.answer == "BAD INPUT":
                raise InputError("too long for the model", row=row.id, field="contexts")
        return lengths(rows)

    out = tmp_path / "out.jsonl"
    summary = run_batch(parse_rows(raws), fragile, out, chunk_size=5, progress=False)
    assert calls == [5, 1, 1, 1, 1, 1]
    rows = read_out(out)
    assert rows[1]["error"] == {"field": None, "message": "RuntimeError: model exploded"}
    assert rows[3]["error"] == {"field": "contexts", "message": "too long for the model"}
    assert [row.get("answer_len") for row in rows] == [3, None, 3, None, 3]
    assert (summary.n_ok, summary.n_errors) == (3, 2)


def test_unwritable_result_marks_only_its_row(tmp_path: Path) -> None:
    def nan_for_r1(rows: list[RagRow]) -> list[dict[str, Any]]:
        return [{"score": math.nan if row.id == "r1" else 0.5} for row in rows]

    out = tmp_path / "out.jsonl"
    summary = run_batch(parse_rows(raw_rows(3)), nan_for_r1, out, progress=False)
    rows = read_out(out)
    assert [row.get("score") for row in rows] == [0.5, None, 0.5]
    assert "NaN" in rows[1]["error"]["message"] and "score" not in rows[1]
    assert summary.n_errors == 1


def test_result_fields_replace_input_fields_and_runner_owns_row_index(tmp_path: Path) -> None:
    raws = raw_rows(1)
    raws[0]["score"] = "old"
    out = tmp_path / "out.jsonl"
    run_batch(parse_rows(raws), lambda rows: [{"score": 1.0, "_row": 99}], out, progress=False)
    assert read_out(out)[0]["score"] == 1.0 and read_out(out)[0]["_row"] == 0


def test_metric_may_mark_an_error_itself(tmp_path: Path) -> None:
    def flag(rows: list[RagRow]) -> list[dict[str, Any]]:
        return [{"score": None, "error": {"field": "answer", "message": "no tokens"}} for _ in rows]

    summary = run_batch(parse_rows(raw_rows(2)), flag, tmp_path / "out.jsonl", progress=False)
    assert (summary.n_ok, summary.n_errors) == (0, 2)
    assert summary.errors == [(0, "answer", "no tokens"), (1, "answer", "no tokens")]
    summary = run_batch(
        parse_rows(raw_rows(1)), lambda rows: [{"error": "plain text"}], tmp_path / "o2.jsonl", progress=False
    )
    assert summary.errors == [(0, None, "plain text")]


def test_wrong_result_count_is_a_bug_not_a_row_error(tmp_path: Path) -> None:
    def short(rows: list[RagRow]) -> Sequence[dict[str, Any]]:
        return [{}]

    with pytest.raises(ResultCountError, match="1 results for 3 rows"):
        run_batch(parse_rows(raw_rows(3)), short, tmp_path / "out.jsonl", progress=False)


def test_existing_output_needs_resume_or_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("old\n")
    with pytest.raises(FileExistsError, match="--resume"):
        run_batch(parse_rows(raw_rows(2)), lengths, out, progress=False)
    assert out.read_text() == "old\n"
    run_batch(parse_rows(raw_rows(2)), lengths, out, overwrite=True, progress=False)
    assert len(read_out(out)) == 2


def test_empty_input_writes_empty_file(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "out.jsonl"
    summary = run_batch([], lengths, out, progress=False)
    assert out.read_text() == "" and summary == RunSummary(seconds=summary.seconds)


def test_bad_chunk_size(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        run_batch([], lengths, tmp_path / "o.jsonl", chunk_size=0)


def test_error_list_is_capped(tmp_path: Path) -> None:
    summary = run_batch(
        parse_rows([{"id": str(i)} for i in range(30)]), lengths, tmp_path / "o.jsonl", progress=False
    )
    assert summary.n_errors == 30 and len(summary.errors) == 20


def test_progress_bar_only_when_asked_or_on_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_batch(parse_rows(raw_rows(3)), lengths, tmp_path / "a.jsonl", progress=True, desc="scoring")
    assert capsys.readouterr().err == ""  # stderr is not a terminal under pytest
    run_batch(list(parse_rows(raw_rows(3))), lengths, tmp_path / "b.jsonl", progress="always", desc="scoring")
    err = capsys.readouterr().err
    assert "scoring" in err and "3/3" in err  # the total is known for a list input
    run_batch(parse_rows(raw_rows(3)), lengths, tmp_path / "c.jsonl", progress="always", desc="scoring")
    assert "3row" in capsys.readouterr().err  # a generator: a count without a total


def test_interrupt_during_row_by_row_retry_is_not_swallowed(tmp_path: Path) -> None:
    def fails_then_interrupted(rows: list[RagRow]) -> list[dict[str, Any]]:
        if len(rows) > 1:
            raise RuntimeError("batch failed")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_batch(parse_rows(raw_rows(3)), fails_then_interrupted, tmp_path / "o.jsonl", progress=False)
    assert (tmp_path / "o.jsonl").read_text() == ""
