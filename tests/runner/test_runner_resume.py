"""Resuming a run: interrupted for real, truncated files, partial chunks, mismatched inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragsense.data import RagRow, RowOrError, parse_rows
from ragsense.runner import run_batch

N_ROWS = 23
CHUNK = 4  # 6 chunks; the last one has 3 rows


def make_rows() -> list[RowOrError]:
    raws: list[dict[str, Any]] = [
        {"id": f"r{i}", "question": f"Question {i}?", "contexts": [f"Context {i}."], "answer": "x" * (i + 1)}
        for i in range(N_ROWS)
    ]
    raws[5]["answer"] = ""  # one bad input row
    raws[14]["answer"] = "FAIL"  # one row the metric rejects
    return list(parse_rows(raws))


class Metric:
    """A stand-in whose floats depend on batch composition, as a real model's padded batches can."""

    def __init__(self, interrupt_at_call: int | None = None) -> None:
        self.calls: list[list[str]] = []
        self.interrupt_at_call = interrupt_at_call

    def __call__(self, rows: list[RagRow]) -> list[dict[str, Any]]:
        if self.interrupt_at_call is not None and len(self.calls) == self.interrupt_at_call:
            raise KeyboardInterrupt
        self.calls.append([row.id for row in rows])
        if any(row.answer == "FAIL" for row in rows):
            raise RuntimeError("cannot score FAIL")
        mean = sum(len(row.answer) for row in rows) / 3.0 / len(rows)
        return [{"score": len(row.answer) / 7.0 + mean, "batch": len(rows)} for row in rows]


def fresh_run(path: Path) -> str:
    run_batch(make_rows(), Metric(), path, chunk_size=CHUNK, progress=False)
    return path.read_text(encoding="utf-8")


def test_interrupted_run_resumes_to_the_fresh_result(tmp_path: Path) -> None:
    expected = fresh_run(tmp_path / "fresh.jsonl")
    out = tmp_path / "out.jsonl"
    interrupted = Metric(interrupt_at_call=3)  # dies when asked for chunk 3
    with pytest.raises(KeyboardInterrupt):
        run_batch(make_rows(), interrupted, out, chunk_size=CHUNK, progress=False)
    assert interrupted.calls == [["r0", "r1", "r2", "r3"], ["r4", "r6", "r7"], ["r8", "r9", "r10", "r11"]]
    done = [json.loads(line)["_row"] for line in out.read_text().splitlines()]
    assert done == list(range(12))  # every finished chunk survived the interrupt

    resumed = Metric()
    summary = run_batch(make_rows(), resumed, out, chunk_size=CHUNK, resume=True, progress=False)
    assert resumed.calls[0] == ["r12", "r13", "r14", "r15"]  # finished chunks were not recomputed
    assert all(int(row_id[1:]) >= 12 for call in resumed.calls for row_id in call)
    assert out.read_text(encoding="utf-8") == expected  # byte for byte
    assert (summary.n_rows, summary.n_skipped_resumed) == (N_ROWS, 12)
    assert (summary.n_ok, summary.n_errors) == (N_ROWS - 2, 2)
    assert [index for index, _, _ in summary.errors] == [5, 14]


def test_truncated_last_line_and_partial_chunk_are_recomputed_once(tmp_path: Path) -> None:
    expected = fresh_run(tmp_path / "fresh.jsonl")
    lines = expected.splitlines(keepends=True)
    out = tmp_path / "out.jsonl"
    # A crash in the middle of writing chunk 2 (rows 8-11): two rows whole, the third cut off.
    out.write_text("".join(lines[:10]) + lines[10][:25], encoding="utf-8")
    metric = Metric()
    summary = run_batch(make_rows(), metric, out, chunk_size=CHUNK, resume=True, progress=False)
    assert metric.calls[0] == ["r8", "r9", "r10", "r11"]
    assert out.read_text(encoding="utf-8") == expected
    assert summary.n_skipped_resumed == 8
    rows = [json.loads(line)["_row"] for line in out.read_text().splitlines()]
    assert rows == list(range(N_ROWS))  # no duplicates


def test_truncated_line_inside_the_first_chunk(tmp_path: Path) -> None:
    expected = fresh_run(tmp_path / "fresh.jsonl")
    out = tmp_path / "out.jsonl"
    out.write_text(expected.splitlines(keepends=True)[0][:10], encoding="utf-8")
    run_batch(make_rows(), Metric(), out, chunk_size=CHUNK, resume=True, progress=False)
    assert out.read_text(encoding="utf-8") == expected


def test_resuming_a_finished_run_computes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    expected = fresh_run(out)
    metric = Metric()
    summary = run_batch(make_rows(), metric, out, chunk_size=CHUNK, resume=True, progress=False)
    assert metric.calls == []
    assert out.read_text(encoding="utf-8") == expected
    assert (summary.n_rows, summary.n_skipped_resumed, summary.n_errors) == (N_ROWS, N_ROWS, 2)


def test_finished_file_without_final_newline_is_tidied(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    expected = fresh_run(out)
    out.write_text(expected.rstrip("\n"), encoding="utf-8")
    metric = Metric()
    run_batch(make_rows(), metric, out, chunk_size=CHUNK, resume=True, progress=False)
    assert metric.calls == [] and out.read_text(encoding="utf-8") == expected


def test_resume_without_an_output_file_is_a_fresh_run(tmp_path: Path) -> None:
    expected = fresh_run(tmp_path / "fresh.jsonl")
    out = tmp_path / "out.jsonl"
    run_batch(make_rows(), Metric(), out, chunk_size=CHUNK, resume=True, progress=False)
    assert out.read_text(encoding="utf-8") == expected


def test_resume_refuses_an_output_of_another_input(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    fresh_run(out)
    other = list(
        parse_rows([{"id": f"x{i}", "question": "Q?", "context": "C.", "answer": "A."} for i in range(8)])
    )
    with pytest.raises(ValueError, match="different input"):
        run_batch(other, Metric(), out, chunk_size=CHUNK, resume=True, progress=False)
    with pytest.raises(ValueError, match="only 8 rows"):
        run_batch(make_rows()[:8], Metric(), out, chunk_size=CHUNK, resume=True, progress=False)


def test_resume_refuses_a_corrupt_middle_line(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    lines = fresh_run(out).splitlines(keepends=True)
    out.write_text("".join([*lines[:3], "garbage\n", *lines[4:]]), encoding="utf-8")
    with pytest.raises(ValueError, match="line 4 is not a ragsense output row"):
        run_batch(make_rows(), Metric(), out, chunk_size=CHUNK, resume=True, progress=False)
