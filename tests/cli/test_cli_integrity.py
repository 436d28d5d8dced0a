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
