"""run_rows: output records, fixed chunks, error records, row-by-row retry, several steps, resume.

The steps here are tiny plain classes (name, needs, fields, async score), the way a benchmark or a
plug-in writes its own."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from ragsense.data import RagRow, RowOrError, parse_rows
from ragsense.errors import InputError
from ragsense.evaluation import (
    MetricInfo,
    Needs,
    ResultCountError,
    RunStats,
    Step,
    run_rows,
    summarize,
)

NO_NEEDS = Needs(())

Scorer = Callable[[Sequence[RagRow]], Sequence[dict[str, Any] | Exception]]


class FnStep:
    """A step that records the row ids of each call and scores them with ``fn``."""

    def __init__(
        self,
        fn: Scorer,
        *,
        name: str = "length",
        fields: tuple[str, ...] = ("answer_len",),
        needs: Needs = NO_NEEDS,
    ) -> None:
        self.fn = fn
        self.name = name
        self.fields = fields
        self.needs = needs
        self.calls: list[list[str]] = []

    async def score(self, rows: Sequence[RagRow]) -> Sequence[dict[str, Any] | Exception]:
        self.calls.append([row.id for row in rows])
        return self.fn(rows)


def lengths(rows: Sequence[RagRow]) -> list[dict[str, Any] | Exception]:
    return [{"answer_len": len(row.answer)} for row in rows]


def raw_rows(n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"r{i}", "question": f"Q{i}?", "contexts": [f"C{i}."], "answer": f"A{i}."} for i in range(n)
    ]


def run(
    rows: Any, steps: Sequence[Step], output: Path | None = None, **options: Any
) -> tuple[list[dict[str, Any]], RunStats]:
    options.setdefault("progress", False)
    return asyncio.run(run_rows(rows, steps, output=output, **options))


def read_out(path: Path) -> list[dict[str, Any]]:
    """The output file's rows as the run returns them: without the input fingerprint each line keeps
    for a resume (checked present here)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert all(isinstance(r.pop("_input"), str) for r in rows)
    return rows


def test_step_objects_satisfy_the_protocol() -> None:
    assert isinstance(FnStep(lengths), Step)


# ------------------------------------------------------------------------------------- one run


def test_output_records_keep_input_fields_and_add_results(tmp_path: Path) -> None:
    raws: list[dict[str, Any]] = [
        {"user_input": "Q?", "retrieved_contexts": ["C."], "response": "Yes.", "tag": 1},
        {"question": "Q2?", "context": "C2.", "answer": "No.", "reference": "Ref"},
    ]
    out = tmp_path / "out.jsonl"
    records, stats = run(parse_rows(raws), [FnStep(lengths)], out)
    assert records == [
        {"id": "0", **raws[0], "answer_len": 4, "errors": [], "_row": 0},
        {"id": "1", **raws[1], "answer_len": 3, "errors": [], "_row": 1},
    ]
    assert read_out(out) == records
    assert (stats.n_rows, stats.n_resumed) == (2, 0) and stats.seconds >= 0


def test_without_output_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    records, stats = run(parse_rows(raw_rows(3)), [FnStep(lengths)])
    assert [r["answer_len"] for r in records] == [3, 3, 3] and stats.n_rows == 3
    assert list(tmp_path.iterdir()) == []


def test_chunks_are_fixed_slices_of_the_input_and_skip_bad_rows(tmp_path: Path) -> None:
    raws = raw_rows(7)
    raws[2]["answer"] = ""  # a bad row: stays in chunk 0's slot but is not sent to the step
    raws[4] = {"id": "r4"}
    raws[5] = {"id": "r5"}
    step = FnStep(lengths)
    out = tmp_path / "out.jsonl"
    records, stats = run(parse_rows(raws), [step], out, chunk_size=3)
    assert step.calls == [["r0", "r1"], ["r3"], ["r6"]]
    assert read_out(out) == records
    assert [r["_row"] for r in records] == list(range(7))
    assert records[2]["errors"] == [{"metric": "input", "field": "answer", "message": "'answer' is empty"}]
    assert records[2]["answer"] == "" and records[2]["answer_len"] is None
    # An unreadable row keeps its input fields, null step fields (every row has the same step columns).
    assert records[4] == {"id": "r4", "answer_len": None, "errors": records[4]["errors"], "_row": 4}
    assert [(e["metric"], e["field"]) for e in records[4]["errors"]] == [("input", "question")]
    assert [r["answer_len"] for r in records] == [3, 3, None, 3, None, None, 3]
    assert stats.n_rows == 7


def test_a_failing_chunk_is_retried_row_by_row(tmp_path: Path) -> None:
    raws = raw_rows(5)
    raws[1]["answer"] = "BOOM"
    raws[3]["answer"] = "BAD INPUT"

    def fragile(rows: Sequence[RagRow]) -> list[dict[str, Any] | Exception]:
        for row in rows:
            if row.answer == "BOOM":
                raise RuntimeError("model exploded")
            if row.answer == "BAD INPUT":
                raise InputError("too long for the model", row=row.id, field="contexts")
        return lengths(rows)

    step = FnStep(fragile)
    records, _ = run(parse_rows(raws), [step], tmp_path / "out.jsonl", chunk_size=5)
    assert [len(call) for call in step.calls] == [5, 1, 1, 1, 1, 1]
    assert records[1]["errors"] == [
        {"metric": "length", "field": None, "message": "RuntimeError: model exploded"}
    ]
    assert records[3]["errors"] == [
        {"metric": "length", "field": "contexts", "message": "too long for the model"}
    ]
    # The step's fields are there (null) on the rows it could not score.
    assert [r["answer_len"] for r in records] == [3, None, 3, None, 3]
    assert [bool(r["errors"]) for r in records] == [False, True, False, True, False]


def test_a_single_row_chunk_that_fails_is_not_retried(tmp_path: Path) -> None:
    def boom(rows: Sequence[RagRow]) -> list[dict[str, Any] | Exception]:
        raise RuntimeError("down")

    step = FnStep(boom)
    records, _ = run(parse_rows(raw_rows(2)), [step], chunk_size=1)
    assert step.calls == [["r0"], ["r1"]]
    assert [r["errors"][0]["message"] for r in records] == ["RuntimeError: down"] * 2


def test_a_step_may_mark_a_row_with_an_exception(tmp_path: Path) -> None:
    def flag(rows: Sequence[RagRow]) -> list[dict[str, Any] | Exception]:
        return [
            InputError("no tokens", field="answer") if row.id == "r0" else {"answer_len": 1} for row in rows
        ]

    step = FnStep(flag)
    records, _ = run(parse_rows(raw_rows(2)), [step])
    assert step.calls == [["r0", "r1"]]  # a returned exception is not a failed call: no retry
    assert records[0]["errors"] == [{"metric": "length", "field": "answer", "message": "no tokens"}]
    assert (records[0]["answer_len"], records[1]["answer_len"], records[1]["errors"]) == (None, 1, [])


def test_unwritable_result_marks_only_its_row(tmp_path: Path) -> None:
    def nan_for_r1(rows: Sequence[RagRow]) -> list[dict[str, Any] | Exception]:
        return [{"score": math.nan if row.id == "r1" else 0.5} for row in rows]

    out = tmp_path / "out.jsonl"
    records, _ = run(parse_rows(raw_rows(3)), [FnStep(nan_for_r1, name="nan", fields=("score",))], out)
    assert read_out(out) == records
    assert [r["score"] for r in records] == [0.5, None, 0.5]
    [error] = records[1]["errors"]
    assert "NaN" in error["message"] and error["metric"] == "nan"
    assert records[0]["errors"] == records[2]["errors"] == []


def test_an_unwritable_result_leaves_the_other_steps_fields() -> None:
    def nan_for_r1(rows: Sequence[RagRow]) -> list[dict[str, Any] | Exception]:
        return [{"score": math.nan if row.id == "r1" else 0.5} for row in rows]

    records, _ = run(
        parse_rows(raw_rows(2)), [FnStep(nan_for_r1, name="nan", fields=("score",)), FnStep(lengths)]
    )
    assert [(r["score"], r["answer_len"]) for r in records] == [(0.5, 3), (None, 3)]
    assert [[e["metric"] for e in r["errors"]] for r in records] == [[], ["nan"]]


def test_result_fields_replace_input_fields_and_the_runner_owns_the_rest(tmp_path: Path) -> None:
    raws = raw_rows(1)
    raws[0]["score"] = "old"
    step = FnStep(
        lambda rows: [{"score": 1.0, "_row": 99, "errors": ["x"], "undeclared": 1}],
        name="s",
        fields=("score", "missing"),
    )
    [record], _ = run(parse_rows(raws), [step])
    # Only the declared fields are kept (a declared one the step left out is null).
    assert record == {**raws[0], "score": 1.0, "missing": None, "errors": [], "_row": 0}


def test_wrong_result_count_is_a_bug_not_a_row_error(tmp_path: Path) -> None:
    step = FnStep(lambda rows: [{}])
    with pytest.raises(ResultCountError, match="'length' returned 1 results for 3 rows"):
        run(parse_rows(raw_rows(3)), [step], tmp_path / "out.jsonl")
    assert (tmp_path / "out.jsonl").read_text() == ""


def test_wrong_result_count_in_the_row_by_row_retry_is_a_bug_too() -> None:
    def fails_then_short(rows: Sequence[RagRow]) -> list[dict[str, Any] | Exception]:
        if len(rows) > 1:
            raise RuntimeError("batch failed")
        return []

    with pytest.raises(ResultCountError, match="0 results for 1 rows"):
        run(parse_rows(raw_rows(3)), [FnStep(fails_then_short)])


def test_existing_output_needs_resume_or_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("old\n")
    with pytest.raises(FileExistsError, match="resume=True") as info:  # Python's wording in Python
        run(parse_rows(raw_rows(2)), [FnStep(lengths)], out)
    assert "--resume" not in str(info.value) and "--resume" in info.value.for_cli()  # type: ignore[attr-defined]
    assert out.read_text() == "old\n"
    run(parse_rows(raw_rows(2)), [FnStep(lengths)], out, overwrite=True)
    assert [r["_row"] for r in read_out(out)] == [0, 1]


def test_empty_input_writes_an_empty_file(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "out.jsonl"
    step = FnStep(lengths)
    records, stats = run([], [step], out)
    assert out.read_text() == "" and records == [] and step.calls == []
    assert (stats.n_rows, stats.n_resumed) == (0, 0)


def test_bad_chunk_size(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        run([], [FnStep(lengths)], tmp_path / "o.jsonl", chunk_size=0)
    assert not (tmp_path / "o.jsonl").exists()


def test_summary_lists_at_most_20_errors() -> None:
    records, stats = run(parse_rows([{"id": str(i)} for i in range(30)]), [FnStep(lengths)])
    info = MetricInfo("length", ("answer_len",), ("answer_len",), None, {})
    summary = summarize(records, [info], stats)
    assert summary.rows_with_errors == 30 and len(summary.errors) == 20
    assert summary.metrics["length"].n == 0 and summary.metrics["length"].errors == 30


def test_progress_bar_only_when_asked_or_on_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(parse_rows(raw_rows(3)), [FnStep(lengths)], progress=True, desc="scoring")
    assert capsys.readouterr().err == ""  # stderr is not a terminal under pytest
    run(list(parse_rows(raw_rows(3))), [FnStep(lengths)], progress="always", desc="scoring")
    err = capsys.readouterr().err
    assert "scoring" in err and "3/3" in err  # the total is known for a list input
    run(parse_rows(raw_rows(3)), [FnStep(lengths)], progress="always", desc="scoring")
    assert "3row" in capsys.readouterr().err  # a generator: a count without a total


def test_interrupt_during_row_by_row_retry_is_not_swallowed(tmp_path: Path) -> None:
    def fails_then_interrupted(rows: Sequence[RagRow]) -> list[dict[str, Any] | Exception]:
        if len(rows) > 1:
            raise RuntimeError("batch failed")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(parse_rows(raw_rows(3)), [FnStep(fails_then_interrupted)], tmp_path / "o.jsonl")
    assert (tmp_path / "o.jsonl").read_text() == ""


# ----------------------------------------------------------------------------------- several steps


def test_two_steps_one_fails_on_a_row_and_the_other_still_scores_it(tmp_path: Path) -> None:
    raws = raw_rows(4)
    raws[2]["answer"] = "FAIL"

    def picky(rows: Sequence[RagRow]) -> list[dict[str, Any] | Exception]:
        if any(row.answer == "FAIL" for row in rows):
            raise RuntimeError("cannot score FAIL")
        return [{"shout": row.answer.upper(), "words": len(row.answer.split())} for row in rows]

    first = FnStep(lengths)
    second = FnStep(picky, name="picky", fields=("shout", "words"))
    out = tmp_path / "out.jsonl"
    records, _ = run(parse_rows(raws), [first, second], out, chunk_size=4)
    assert read_out(out) == records
    assert first.calls == [["r0", "r1", "r2", "r3"]]
    assert second.calls == [["r0", "r1", "r2", "r3"], ["r0"], ["r1"], ["r2"], ["r3"]]
    assert [r["answer_len"] for r in records] == [3, 3, 4, 3]  # the other step scored row 2
    assert [r["shout"] for r in records] == ["A0.", "A1.", None, "A3."]
    assert records[2]["words"] is None
    assert records[2]["errors"] == [
        {"metric": "picky", "field": None, "message": "RuntimeError: cannot score FAIL"}
    ]
    assert all(r["errors"] == [] for k, r in enumerate(records) if k != 2)
    # Field order: input, then each step's fields in step order, then errors and _row.
    assert list(records[2]) == [*raws[0], "answer_len", "shout", "words", "errors", "_row"]


def test_a_missing_needed_field_marks_only_the_step_that_needs_it(tmp_path: Path) -> None:
    raws = raw_rows(3)
    del raws[1]["answer"]  # readable without an answer, as evaluate reads rows
    needs_answer = FnStep(lengths, name="needs_answer", needs=Needs(("answer",)))
    needs_reference = FnStep(
        lambda rows: [{"ref_len": len(row.reference or "")} for row in rows],
        name="needs_reference",
        fields=("ref_len",),
        needs=Needs(("reference",)),
    )
    question_only = FnStep(
        lambda rows: [{"q": row.question} for row in rows], name="question_only", fields=("q",)
    )
    records, _ = run(
        parse_rows(raws, require_answer=False), [needs_answer, needs_reference, question_only], chunk_size=8
    )
    assert needs_answer.calls == [["r0", "r2"]]  # the row without an answer was never sent
    assert needs_reference.calls == []  # no row has a reference: the step is not called at all
    assert question_only.calls == [["r0", "r1", "r2"]]
    assert [r["answer_len"] for r in records] == [3, None, 3]
    assert [r["ref_len"] for r in records] == [None, None, None]
    assert [r["q"] for r in records] == ["Q0?", "Q1?", "Q2?"]
    assert records[1]["errors"] == [
        {
            "metric": "needs_answer",
            "field": "answer",
            "message": "'answer' is missing or empty (needs_answer needs it)",
        },
        {"metric": "needs_reference", "field": "reference", "message": records[1]["errors"][1]["message"]},
    ]
    assert [[e["metric"] for e in r["errors"]] for r in records] == [
        ["needs_reference"],
        ["needs_answer", "needs_reference"],
        ["needs_reference"],
    ]


def test_needs_checks_blank_strings() -> None:
    row = RagRow(id="1", question="Q?", contexts=["C."], answer="  ")
    assert Needs(("question", "answer")).missing(row) == "answer"
    assert Needs(("question", "contexts")).missing(row) is None
    assert Needs(()).missing(row) is None


# ------------------------------------------------------------------------------------------- resume

N_ROWS = 23
CHUNK = 4  # 6 chunks; the last one has 3 rows


def make_rows() -> list[RowOrError]:
    raws: list[dict[str, Any]] = [
        {"id": f"r{i}", "question": f"Question {i}?", "contexts": [f"Context {i}."], "answer": "x" * (i + 1)}
        for i in range(N_ROWS)
    ]
    raws[5]["answer"] = ""  # one bad input row
    raws[14]["answer"] = "FAIL"  # one row the step rejects
    return list(parse_rows(raws))


class BatchDependent:
    """A step whose floats depend on batch composition, as a real model's padded batches can."""

    name = "batchy"
    needs = Needs(("answer",))
    fields = ("score", "batch")

    def __init__(self, interrupt_at_call: int | None = None) -> None:
        self.calls: list[list[str]] = []
        self.interrupt_at_call = interrupt_at_call

    async def score(self, rows: Sequence[RagRow]) -> list[dict[str, Any] | Exception]:
        if self.interrupt_at_call is not None and len(self.calls) == self.interrupt_at_call:
            raise KeyboardInterrupt
        self.calls.append([row.id for row in rows])
        if any(row.answer == "FAIL" for row in rows):
            raise RuntimeError("cannot score FAIL")
        mean = sum(len(row.answer) for row in rows) / 3.0 / len(rows)
        return [{"score": len(row.answer) / 7.0 + mean, "batch": len(rows)} for row in rows]


def resume_run(path: Path, step: Step | None = None, rows: Any = None, **options: Any) -> RunStats:
    _, stats = run(
        make_rows() if rows is None else rows,
        [step or BatchDependent()],
        path,
        chunk_size=CHUNK,
        resume=True,
        **options,
    )
    return stats


def fresh_run(path: Path) -> str:
    run(make_rows(), [BatchDependent()], path, chunk_size=CHUNK)
    return path.read_text(encoding="utf-8")


def test_interrupted_run_resumes_to_the_fresh_result(tmp_path: Path) -> None:
    expected = fresh_run(tmp_path / "fresh.jsonl")
    out = tmp_path / "out.jsonl"
    interrupted = BatchDependent(interrupt_at_call=3)  # dies when asked for chunk 3
    with pytest.raises(KeyboardInterrupt):
        run(make_rows(), [interrupted], out, chunk_size=CHUNK)
    assert interrupted.calls == [["r0", "r1", "r2", "r3"], ["r4", "r6", "r7"], ["r8", "r9", "r10", "r11"]]
    assert [r["_row"] for r in read_out(out)] == list(range(12))  # finished chunks survived

    resumed = BatchDependent()
    records, stats = run(make_rows(), [resumed], out, chunk_size=CHUNK, resume=True)
    assert resumed.calls[0] == ["r12", "r13", "r14", "r15"]  # finished chunks were not recomputed
    assert all(int(row_id[1:]) >= 12 for call in resumed.calls for row_id in call)
    assert out.read_text(encoding="utf-8") == expected  # byte for byte
    assert records == read_out(out)  # resumed rows are returned too
    assert (stats.n_rows, stats.n_resumed) == (N_ROWS, 12)
    assert [r["_row"] for r in records if r["errors"]] == [5, 14]
    assert records[5]["errors"][0]["metric"] == "input" and records[14]["errors"][0]["metric"] == "batchy"


def test_truncated_last_line_and_partial_chunk_are_recomputed_once(tmp_path: Path) -> None:
    expected = fresh_run(tmp_path / "fresh.jsonl")
    lines = expected.splitlines(keepends=True)
    out = tmp_path / "out.jsonl"
    # A crash in the middle of writing chunk 2 (rows 8-11): two rows whole, the third cut off.
    out.write_text("".join(lines[:10]) + lines[10][:25], encoding="utf-8")
    step = BatchDependent()
    stats = resume_run(out, step)
    assert step.calls[0] == ["r8", "r9", "r10", "r11"]
    assert out.read_text(encoding="utf-8") == expected
    assert stats.n_resumed == 8
    assert [r["_row"] for r in read_out(out)] == list(range(N_ROWS))  # no duplicates


def test_truncated_line_inside_the_first_chunk(tmp_path: Path) -> None:
    expected = fresh_run(tmp_path / "fresh.jsonl")
    out = tmp_path / "out.jsonl"
    out.write_text(expected.splitlines(keepends=True)[0][:10], encoding="utf-8")
    assert resume_run(out).n_resumed == 0
    assert out.read_text(encoding="utf-8") == expected


def test_duplicate_and_blank_lines_are_cut_back(tmp_path: Path) -> None:
    expected = fresh_run(tmp_path / "fresh.jsonl")
    lines = expected.splitlines(keepends=True)
    out = tmp_path / "out.jsonl"
    # Rows 0-5 with row 2 written twice and a blank line: chunk 0 is done, chunk 1 is partial.
    out.write_text("".join([*lines[:3], lines[2], "\n", *lines[3:6]]), encoding="utf-8")
    step = BatchDependent()
    stats = resume_run(out, step)
    assert step.calls[0] == ["r4", "r6", "r7"] and stats.n_resumed == 4
    assert out.read_text(encoding="utf-8") == expected


def test_finished_file_with_duplicates_is_tidied_without_recomputing(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    expected = fresh_run(out)
    lines = expected.splitlines(keepends=True)
    out.write_text("".join([*lines, lines[-1], "\n"]), encoding="utf-8")
    step = BatchDependent()
    assert resume_run(out, step).n_resumed == N_ROWS
    assert step.calls == [] and out.read_text(encoding="utf-8") == expected


def test_resuming_a_finished_run_computes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    expected = fresh_run(out)
    step = BatchDependent()
    stats = resume_run(out, step)
    assert step.calls == []
    assert out.read_text(encoding="utf-8") == expected
    assert (stats.n_rows, stats.n_resumed) == (N_ROWS, N_ROWS)


def test_finished_file_without_final_newline_is_tidied(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    expected = fresh_run(out)
    out.write_text(expected.rstrip("\n"), encoding="utf-8")
    step = BatchDependent()
    resume_run(out, step)
    assert step.calls == [] and out.read_text(encoding="utf-8") == expected


def test_resume_without_an_output_file_is_a_fresh_run(tmp_path: Path) -> None:
    expected = fresh_run(tmp_path / "fresh.jsonl")
    out = tmp_path / "out.jsonl"
    assert resume_run(out).n_resumed == 0
    assert out.read_text(encoding="utf-8") == expected


def test_resume_refuses_an_output_of_another_input(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    expected = fresh_run(out)
    other = list(
        parse_rows([{"id": f"x{i}", "question": "Q?", "context": "C.", "answer": "A."} for i in range(8)])
    )
    with pytest.raises(ValueError, match=r"row 0 has id 'r0' but the input's has 'x0'.*different input"):
        resume_run(out, rows=other)
    with pytest.raises(ValueError, match="rows up to 22 but the input has only 8 rows"):
        resume_run(out, rows=make_rows()[:8])
    assert out.read_text(encoding="utf-8") == expected  # a refused resume leaves the file alone


def test_resume_refuses_an_output_written_without_a_step(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    fresh_run(out)
    other = FnStep(lengths)
    with pytest.raises(ValueError, match=r"no 'answer_len' field.*without the metric 'length'"):
        run(make_rows(), [BatchDependent(), other], out, chunk_size=CHUNK, resume=True)
    assert other.calls == []


def test_resume_refuses_a_corrupt_middle_line(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    lines = fresh_run(out).splitlines(keepends=True)
    out.write_text("".join([*lines[:3], "garbage\n", *lines[4:]]), encoding="utf-8")
    with pytest.raises(ValueError, match="line 4 is not a ragsense output row"):
        resume_run(out)
    out.write_text("".join([*lines[:3], '{"no_row": 1}\n', *lines[4:]]), encoding="utf-8")
    with pytest.raises(ValueError, match="line 4 is not a ragsense output row"):
        resume_run(out)


def _edited(rows: list[RowOrError], index: int, answer: str) -> list[RowOrError]:
    row = rows[index]
    assert isinstance(row, RagRow)
    return [*rows[:index], row.model_copy(update={"answer": answer}), *rows[index + 1 :]]


def test_resume_recomputes_the_chunks_whose_input_changed_and_keeps_the_others(tmp_path: Path) -> None:
    # Issue 25: same ids, changed answers; resume kept the old rows. Row 1 (chunk 0) and row 9 (chunk 2)
    # change: those chunks are computed again, every other chunk is taken from the file, the later
    # ones too (after the file was cut back at chunk 0).
    out = tmp_path / "out.jsonl"
    fresh_run(out)
    changed = _edited(_edited(make_rows(), 1, "edited one"), 9, "edited nine")
    expected = tmp_path / "expected.jsonl"
    run(changed, [BatchDependent()], expected, chunk_size=CHUNK)
    step = BatchDependent()
    records, stats = run(changed, [step], out, chunk_size=CHUNK, resume=True)
    assert step.calls == [["r0", "r1", "r2", "r3"], ["r8", "r9", "r10", "r11"]]
    assert (stats.n_resumed, stats.n_input_changed) == (N_ROWS - 8, 2)
    assert out.read_text(encoding="utf-8") == expected.read_text(encoding="utf-8")  # byte for byte
    assert records == read_out(expected)
    # A record written without a fingerprint (an older ragsense) cannot be trusted: recomputed.
    lines = out.read_text(encoding="utf-8").splitlines(keepends=True)
    old = json.loads(lines[20])
    del old["_input"]
    out.write_text("".join([*lines[:20], json.dumps(old) + "\n", *lines[21:]]), encoding="utf-8")
    step = BatchDependent()
    stats = resume_run(out, step, rows=changed)
    assert step.calls == [["r20", "r21", "r22"]] and stats.n_input_changed == 1
    assert out.read_text(encoding="utf-8") == expected.read_text(encoding="utf-8")
