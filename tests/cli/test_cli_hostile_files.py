"""Issue 38, files and names from input, tested the way the review found each: real files, the real
command line (``ragsense.cli.main`` or a subprocess) with the fake model."""

from __future__ import annotations

import csv
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ragsense.cli import main

ROWS = [
    {"id": f"r{i}", "question": f"Who wrote book {i}?", "contexts": [f"Ada wrote book {i}."], "answer": "Ada."}
    for i in range(3)
]
ESCAPES = "\x1b\x07\x9b"
EVIL = "\x1b]0;PWNED\x07"


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _ragsense(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-m", "ragsense", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
        env=env,
    )


# ------------------------------------------------------------------------ run ids that are not ids


def _store_with_run_id(path: Path, run_id: str) -> Path:
    """A store holding one recorded run whose id was then rewritten to ``run_id`` (a crafted file)."""
    from ragsense.runs import RunStore

    recorder = RunStore(path).start(metrics=[{"name": "consens", "scores": ["consens"]}], tag="t")
    recorder.add_rows([{"id": "a", "_row": 0, "consens": 0.4, "errors": []}])
    recorder.finish({"n_rows": 1})
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA foreign_keys = OFF")
        connection.execute("UPDATE rows SET run_id = ?", (run_id,))
        connection.execute("UPDATE runs SET id = ?", (run_id,))
    return path


@pytest.mark.parametrize("run_id", ["/../../../x", "ab\0cdef01234", "a" * 5000, "0123456789AB"])
def test_a_crafted_run_id_never_names_a_file(
    tmp_path: Path, run_id: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 38, as seen: id '/../../../x' made `ragsense report latest` write ../../x.html outside the
    # working folder (and leave an empty folder); ids with NUL or 5,000 characters exited 1.
    work = tmp_path / "a" / "b" / "c"
    work.mkdir(parents=True)
    store = _store_with_run_id(work / "runs.sqlite", run_id)
    monkeypatch.chdir(work)
    for ref in ("latest", "t"):
        assert main(["report", ref, "--store", str(store)]) == 2
        assert "is not a run id" in capsys.readouterr().err
    written = sorted(p.name for p in tmp_path.rglob("*") if not p.name.startswith("runs.sqlite"))
    assert written == ["a", "b", "c"]  # no page anywhere, no folder left behind
    assert main(["runs", "--store", str(store)]) == 2
    assert "is not a run id" in capsys.readouterr().err


def test_report_names_are_built_from_run_ids_only() -> None:
    from ragsense.report import default_output
    from ragsense.runs import RunIdError

    assert default_output("0123456789ab").name == "ragsense-report-0123456789ab.html"
    for bad in ("/../../../x", "../0123456789", "0123456789ab/..", ""):
        with pytest.raises(RunIdError):
            default_output(bad)
        with pytest.raises(RunIdError):
            default_output("0123456789ab", bad)


# ------------------------------------------------------------------------------------- CSV output


def test_a_line_break_in_a_cell_cannot_start_an_unguarded_record(tmp_path: Path) -> None:
    # Issue 38, as seen: the answer "Ada.\r=cmd|' /C calc'!A0" written with -o x.csv kept the bare CR
    # unquoted, so the record split there and a new record began with an unguarded =cmd; reading the
    # file back gave 2 rows from 1.
    from ragsense.data import RagRow, read_rows

    hostile = "Ada.\r=cmd|' /C calc'!A0"
    rows = [
        {**ROWS[0], "answer": hostile},
        {**ROWS[1], "answer": "Ada.\n@SUM(1)", "note": "\r=cmd", "=HYPERLINK(\"x\")": "\n+1"},
    ]
    src = _write_jsonl(tmp_path / "rows.jsonl", rows)
    out = tmp_path / "x.csv"
    done = _ragsense("evaluate", str(src), "-o", str(out), "--model", "fake", "--metrics", "consens",
                     "--no-store", "--table", "never")  # fmt: skip
    assert done.returncode == 0, done.stderr
    with out.open(encoding="utf-8", newline="") as handle:
        records = list(csv.reader(handle))
    assert len(records) == 3  # the header and two rows, whatever the cells hold
    starts = ("=", "+", "-", "@", "\t", "\r")
    cells = [cell for record in records for cell in record if not _is_number(cell)]
    assert not [cell for cell in cells if cell.startswith(starts)]  # no cell a spreadsheet would run
    assert records[1][records[0].index("answer")] == hostile  # one cell, quoted, as it was
    assert "'=HYPERLINK(\"x\")" in records[0] and "'\r=cmd" in records[2]
    back = [r for r in read_rows(out) if isinstance(r, RagRow)]
    assert [r.answer for r in back] == [hostile, "Ada.\n@SUM(1)"]
    assert back[1].extra["note"] == "\r=cmd" and back[1].extra["=HYPERLINK(\"x\")"] == "\n+1"
    # And the file is an input again: two rows, as written.
    again = tmp_path / "again.jsonl"
    done = _ragsense("evaluate", str(out), "-o", str(again), "--model", "fake", "--metrics", "consens",
                     "--no-store", "--table", "never")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["answer"] for line in again.read_text("utf-8").splitlines()] == [
        hostile,
        "Ada.\n@SUM(1)",
    ]


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True
