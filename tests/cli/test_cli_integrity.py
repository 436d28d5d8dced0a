"""Issue 25, data integrity and inputs, tested the way each was found: through ``ragsense evaluate``
with the fake model on small files."""

from __future__ import annotations

import datetime
import decimal
import json
from pathlib import Path
from typing import Any

import pytest

from ragsense.cli import main

ROWS = [
    {
        "id": f"r{i}",
        "question": f"Who wrote book {i}?",
        "contexts": [f"Ada wrote book {i}."],
        "answer": "Ada.",
    }
    for i in range(5)
]


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _evaluate(*args: str) -> int:
    return main(
        ["evaluate", *args, "--model", "fake", "--metrics", "consens", "--no-store", "--table", "never"]
    )


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# ------------------------------------------------------------------------------------------- inputs


def test_parquet_extra_columns_of_any_arrow_type_pass_through(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    at = datetime.datetime(2026, 11, 25, 17, 30, tzinfo=datetime.UTC)
    table = pa.table(
        {
            "id": ["a", "b"],
            "question": ["Who wrote it?", "Who wrote it?"],
            "contexts": [["Ada wrote it."], ["Ada wrote it."]],
            "answer": ["Ada.", "Ada."],
            "logged_at": pa.array([at, None], type=pa.timestamp("us", tz="UTC")),
            "day": pa.array([datetime.date(2026, 11, 25)] * 2, type=pa.date32()),
            "blob": pa.array([b"\x00\xff", b""], type=pa.binary()),
            "cost": pa.array([decimal.Decimal("1.50"), None], type=pa.decimal128(5, 2)),
        }
    )
    src = tmp_path / "rows.parquet"
    pq.write_table(table, src)
    out = tmp_path / "out.jsonl"
    assert _evaluate(str(src), "-o", str(out)) == 0
    rows = _read_jsonl(out)
    assert [r["id"] for r in rows] == ["a", "b"] and all(r["errors"] == [] for r in rows)
    assert rows[0]["logged_at"] == "2026-11-25T17:30:00+00:00" and "logged_at" not in rows[1]
    assert rows[0]["day"] == rows[1]["day"] == "2026-11-25"
    assert (rows[0]["blob"], rows[1]["blob"]) == ("AP8=", "")
    assert rows[0]["cost"] == "1.50"
    # A needed field of a type that is not text (bytes) is each row's error, not the run's end.
    bad = tmp_path / "bad.parquet"
    pq.write_table(table.set_column(3, "answer", pa.array([b"Ada.", b"Ada."], type=pa.binary())), bad)
    out_bad = tmp_path / "bad.jsonl"
    assert _evaluate(str(bad), "-o", str(out_bad)) == 3
    rows = _read_jsonl(out_bad)
    assert [r["errors"][0]["field"] for r in rows] == ["answer", "answer"]
    assert "bytes" in rows[0]["errors"][0]["message"] and rows[0]["answer"] == "QWRhLg=="


def test_a_file_that_is_not_parquet_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "rows.parquet"
    src.write_text('{"question": "Q?"}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert _evaluate(str(src), "-o", str(out)) == 2
    assert "as Parquet" in capsys.readouterr().err
    assert not out.exists()  # refused before anything was written


# ------------------------------------------------------------------------------- refused before loading


@pytest.fixture
def no_model_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if any model is asked for: a refused run must be refused before that."""
    from ragsense.models import ModelPool

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a model was loaded for a run that should have been refused first")

    monkeypatch.setattr(ModelPool, "get", refuse)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
@pytest.mark.usefixtures("no_model_loads")
def test_an_existing_output_is_refused_before_any_model_loads_or_run_is_recorded(
    tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from ragsense.runs import RunStore

    src = _write_jsonl(tmp_path / "rows.jsonl", ROWS)
    out = tmp_path / f"out{suffix}"
    out.write_text("precious\n", encoding="utf-8")
    store = tmp_path / "runs.sqlite"
    code = main(["evaluate", str(src), "-o", str(out), "--model", "fake", "--store", str(store)])
    assert code == 2 and "already exists" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == "precious\n"
    assert not store.exists() or RunStore(store).list_runs() == []  # nothing recorded, no incomplete run


@pytest.mark.usefixtures("no_model_loads")
def test_a_bad_gate_is_refused_before_any_model_loads(tmp_path: Path) -> None:
    src = _write_jsonl(tmp_path / "rows.jsonl", ROWS)
    out = tmp_path / "out.jsonl"
    for gate in (["--max-share", "no_such_verdict=0.1"], ["--fail-under", "consens=high"]):
        with pytest.raises(SystemExit) as stopped:
            _evaluate(str(src), "-o", str(out), *gate)
        assert stopped.value.code == 2  # a usage error, not the 1 of a crash
    assert not out.exists()


# ------------------------------------------------------------------------------- one run per output


def test_a_second_run_onto_an_output_being_written_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ragsense.evaluation._outputs import acquire_output_lock, release_output_lock

    src = _write_jsonl(tmp_path / "rows.jsonl", ROWS)
    out = tmp_path / "out.jsonl"
    lock = acquire_output_lock(out)  # a live run (this process) is writing out.jsonl
    try:
        assert lock == tmp_path / "out.jsonl.lock"
        assert _evaluate(str(src), "-o", str(out)) == 2
        assert "being written by another run" in capsys.readouterr().err
        assert not out.exists()
        # --overwrite does not get past a live run either: it would interleave rows just the same.
        assert _evaluate(str(src), "-o", str(out), "--overwrite") == 2
    finally:
        release_output_lock(lock)
    assert _evaluate(str(src), "-o", str(out)) == 0
    assert len(_read_jsonl(out)) == 5 and not lock.exists()  # the lock is removed at the end


def test_two_processes_writing_one_output_at_once(tmp_path: Path) -> None:
    # Issue 25, as seen: two runs onto one output both exited 0 and rows were lost or interleaved.
    # The first run reads its rows from a pipe kept open, so it is certainly still writing when the
    # second starts.
    import subprocess
    import sys
    import time

    out = tmp_path / "out.jsonl"
    command = [sys.executable, "-m", "ragsense", "evaluate", "-", "-o", str(out), "--model", "fake"]
    command += ["--metrics", "consens", "--no-store", "--table", "never", "--chunk-size", "1"]
    first = subprocess.Popen(command, stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert first.stdin is not None
    first.stdin.write(json.dumps(ROWS[0]) + "\n")
    first.stdin.flush()
    deadline = time.monotonic() + 60
    while not (tmp_path / "out.jsonl.lock").exists():
        assert first.poll() is None and time.monotonic() < deadline, "the first run did not start"
        time.sleep(0.05)
    second = subprocess.run([*command[:4], str(_write_jsonl(tmp_path / "rows.jsonl", ROWS)), *command[5:]],
                            capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert second.returncode == 2, second.stderr
    assert "being written by another run" in second.stderr
    first.stdin.write("".join(json.dumps(r) + "\n" for r in ROWS[1:]))
    first.stdin.close()
    assert first.wait(timeout=120) == 0, first.stderr.read() if first.stderr else ""
    assert [r["id"] for r in _read_jsonl(out)] == [r["id"] for r in ROWS]  # the first run's rows, whole


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    src = _write_jsonl(tmp_path / "rows.jsonl", ROWS)
    out = tmp_path / "out.csv"
    lock = tmp_path / "out.csv.lock"
    lock.write_text(f"{int(dead.stdout)} {socket.gethostname()}\n", encoding="utf-8")
    assert _evaluate(str(src), "-o", str(out)) == 0
    assert out.exists() and not lock.exists()


# ------------------------------------------------------------------------------- resume on changed input


def test_resume_recomputes_rows_whose_input_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 25: rows-v2.jsonl (same ids, four answers changed) resumed onto out.jsonl made from
    # rows.jsonl said "5 resumed" and kept the old answers and scores.
    from ragsense.runs import RunStore

    v1 = _write_jsonl(tmp_path / "rows.jsonl", ROWS)
    v2_rows = [ROWS[0], *({**r, "answer": f"Bob wrote book {k + 1}."} for k, r in enumerate(ROWS[1:]))]
    v2 = _write_jsonl(tmp_path / "rows-v2.jsonl", v2_rows)
    out = tmp_path / "out.jsonl"
    store = tmp_path / "runs.sqlite"
    args = ["--model", "fake", "--metrics", "consens", "--table", "never", "--chunk-size", "1"]
    assert main(["evaluate", str(v1), "-o", str(out), "--store", str(store), *args]) == 0
    capsys.readouterr()
    assert (
        main(["evaluate", str(v2), "-o", str(out), "--resume", "--store", str(store), "--tag", "v2", *args])
        == 0
    )
    assert "1 resumed, 4 recomputed because their input changed" in capsys.readouterr().err
    fresh = tmp_path / "fresh.jsonl"
    assert main(["evaluate", str(v2), "-o", str(fresh), "--store", str(store), "--tag", "fresh", *args]) == 0
    # The resumed output is the fresh run's on the new input: answers, scores, fingerprints.
    assert _read_jsonl(out) == _read_jsonl(fresh)
    assert [r["answer"] for r in _read_jsonl(out)] == [r["answer"] for r in v2_rows]
    runs = RunStore(store)
    assert runs.get("v2").input_hash == runs.get("fresh").input_hash
    assert runs.rows(runs.get("v2").id) == runs.rows(runs.get("fresh").id)
    # Nothing changed since: everything resumes, nothing is recomputed.
    assert main(["evaluate", str(v2), "-o", str(out), "--resume", "--no-store", *args]) == 0
    err = capsys.readouterr().err
    assert "5 resumed" in err and "recomputed" not in err


def test_resume_of_a_csv_output_recomputes_changed_rows_from_its_working_file(tmp_path: Path) -> None:
    from ragsense import evaluate

    out = tmp_path / "out.csv"
    working = tmp_path / "out.csv.partial.jsonl"
    first = evaluate(ROWS, "consens", model="fake", output=working, chunk_size=2, progress=False)
    assert len(first) == 5  # an interrupted CSV run leaves its working file and no CSV yet
    changed = [*ROWS[:4], {**ROWS[4], "answer": "Bob."}]
    run = evaluate(changed, "consens", model="fake", output=out, chunk_size=2, resume=True, progress=False)
    assert (run.stats.n_resumed, run.stats.n_input_changed) == (4, 1)
    assert run.rows == evaluate(changed, "consens", model="fake", chunk_size=2, progress=False).rows
    assert out.exists() and not working.exists() and "_input" not in out.read_text(encoding="utf-8")


# ------------------------------------------------------------------------------- terminal and CSV


def test_control_sequences_in_ids_and_tags_are_escaped_on_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 25: an id or tag holding ESC sequences (clear screen, set title) reached the terminal raw.
    evil = "a\x1b[2J\x1b]0;pwned\x07\x9b\u202e"
    rows = [{**ROWS[0], "id": evil}, {**ROWS[1], "id": "b", "answer": ""}]
    src = _write_jsonl(tmp_path / "rows.jsonl", rows)
    store = tmp_path / "runs.sqlite"
    args = ["--model", "fake", "--metrics", "consens", "--store", str(store), "--tag", "v1" + evil]
    assert main(["evaluate", str(src), "--table", "always", *args]) == 3
    printed = capsys.readouterr()
    for stream in (printed.out, printed.err):
        assert not any(c in stream for c in "\x1b\x07\x9b\u202e")
    assert "a\\x1b[2J" in printed.out
    assert main(["runs", "--store", str(store)]) == 0
    listed = capsys.readouterr().out
    assert "v1a\\x1b[2J" in listed and "\x1b" not in listed
    # One run shown, and two compared (the compare lists the rows that got worse by id).
    assert main(["runs", "show", "latest", "--store", str(store)]) == 0
    shown = capsys.readouterr().out
    assert "v1a\\x1b[2J" in shown and not any(c in shown for c in "\x1b\x07\x9b\u202e")
    assert main(["evaluate", str(src), "--table", "never", *args[:-2], "--tag", "v2"]) == 3
    capsys.readouterr()
    assert main(["compare", "v1" + evil, "v2", "--store", str(store)]) in (0, 3)
    compared = capsys.readouterr()
    assert not any(c in compared.out + compared.err for c in "\x1b\x07\x9b\u202e")


def test_csv_outputs_guard_formula_cells_and_read_back_unchanged(tmp_path: Path) -> None:
    from ragsense.data import RagRow, read_rows

    rows = [
        {**ROWS[0], "id": '=HYPERLINK("http://evil.example","click")', "answer": "@SUM(1+1)"},
        {**ROWS[1], "id": "'=already quoted", "question": "-2+3?", "note": "\tcell"},
        {**ROWS[2], "id": "plain", "note": "'just an apostrophe"},
    ]
    out = tmp_path / "out.csv"
    assert _evaluate(str(_write_jsonl(tmp_path / "rows.jsonl", rows)), "-o", str(out)) == 0
    import csv

    with out.open(encoding="utf-8", newline="") as handle:
        cells = list(csv.DictReader(handle))
    assert cells[0]["id"] == "'" + rows[0]["id"] and cells[0]["answer"] == "'@SUM(1+1)"
    assert cells[1]["id"] == "''=already quoted" and cells[1]["note"] == "'\tcell"
    assert cells[1]["question"] == "'-2+3?"
    assert cells[2]["note"] == "'just an apostrophe"  # no formula start: left alone
    assert float(cells[0]["consens"]) == pytest.approx(float(cells[0]["consens"]))  # numbers stay numbers
    back = list(read_rows(out))
    assert all(isinstance(r, RagRow) for r in back)
    assert [r.to_record()["id"] for r in back if isinstance(r, RagRow)] == [r["id"] for r in rows]
    first, second, third = (r for r in back if isinstance(r, RagRow))
    assert first.answer == "@SUM(1+1)" and second.question == "-2+3?" and second.extra["note"] == "\tcell"
    assert third.extra["note"] == "'just an apostrophe"
