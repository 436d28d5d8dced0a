"""read_rows over JSONL / JSON / CSV / stdin, and the JSONL / CSV writers."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragsense.data import JsonlWriter, RagRow, RowError, read_rows, write_csv, write_jsonl
from ragsense.errors import InputError

ROW = {"question": "Q?", "contexts": ["C1.", "C2."], "answer": "A."}


def test_jsonl_bad_lines_do_not_stop_reading(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps({**ROW, "id": "a"}),
                "{this is not json",
                "",  # blank lines are not data rows
                json.dumps([1, 2]),
                json.dumps({**ROW, "answer": None}),
                json.dumps({**ROW, "id": "a"}),
                json.dumps({**ROW, "id": "z"}),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    out = list(read_rows(path))
    assert len(out) == 6
    assert isinstance(out[0], RagRow) and out[0].id == "a"
    bad_json = out[1]
    assert isinstance(bad_json, RowError) and bad_json.index == 1 and "not valid JSON" in bad_json.message
    assert bad_json.raw == "{this is not json" and bad_json.to_record() == {}
    assert isinstance(out[2], RowError) and "JSON object" in out[2].message
    null_answer = out[3]
    assert isinstance(null_answer, RowError)
    assert (null_answer.index, null_answer.field) == (3, "answer") and "null" in null_answer.message
    assert null_answer.to_record() == {**ROW, "answer": None}
    duplicate = out[4]
    assert isinstance(duplicate, RowError) and duplicate.field == "id" and duplicate.id == "a"
    assert str(duplicate).startswith("row a, field 'id'")
    assert isinstance(out[5], RagRow) and out[5].id == "z"


def test_jsonl_with_bom_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf" + json.dumps(ROW).encode() + b"\r\n" + json.dumps(ROW).encode() + b"\r\n"
    )
    assert [type(r) for r in read_rows(path)] == [RagRow, RagRow]


def test_json_list(tmp_path: Path) -> None:
    path = tmp_path / "in.json"
    path.write_text(json.dumps([ROW, "oops", {**ROW, "contexts": []}]), encoding="utf-8")
    out = list(read_rows(path))
    assert isinstance(out[0], RagRow)
    assert isinstance(out[1], RowError) and out[1].index == 1
    assert isinstance(out[2], RowError) and out[2].field == "contexts"


def test_json_not_a_list_or_invalid(tmp_path: Path) -> None:
    path = tmp_path / "in.json"
    path.write_text(json.dumps({"rows": [ROW]}), encoding="utf-8")
    with pytest.raises(InputError, match="JSON list"):
        list(read_rows(path))
    path.write_text("[{", encoding="utf-8")
    with pytest.raises(InputError, match="not valid JSON"):
        list(read_rows(path))


def test_csv_with_list_cells_extra_columns_and_bad_rows(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text(
        "id,question,contexts,answer,reference,lang\n"
        'r1,Q1?,"[""c1"", ""c2""]",A1.,,en\n'
        "r2,Q2?,\"['c3', 'c4']\",A2.,Ref,fr\n"
        "r3,Q3?,plain text,A3.,,en\n"
        "r4,Q4?,\"['c']\",A4.,,en,surplus\n"
        "r5,Q5?\n"
        ',Q6?,"[""c""]",A6.,,de\n',
        encoding="utf-8",
    )
    out = list(read_rows(path))
    assert len(out) == 6
    first, second = out[0], out[1]
    assert isinstance(first, RagRow) and first.contexts == ["c1", "c2"] and first.reference is None
    assert first.extra == {"lang": "en"}
    assert isinstance(second, RagRow) and second.contexts == ["c3", "c4"] and second.reference == "Ref"
    assert isinstance(out[2], RowError) and out[2].field == "contexts" and out[2].id == "r3"
    assert isinstance(out[3], RowError) and "more cells" in out[3].message
    assert isinstance(out[4], RowError) and out[4].field == "contexts" and "missing" in out[4].message
    last = out[5]
    assert isinstance(last, RagRow) and last.id == "5"  # blank id cell: the row number


def test_csv_large_cell(tmp_path: Path) -> None:
    big = "word " * 60_000  # beyond csv's default 128 KiB field limit
    path = tmp_path / "in.csv"
    write_csv(path, [{"question": "Q?", "context": big, "answer": "A."}])
    (row,) = list(read_rows(path))
    assert isinstance(row, RagRow) and row.contexts == [big]


def test_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(ROW) + "\nnope\n"))
    assert [type(r) for r in read_rows("-")] == [RagRow, RowError]


def test_unsupported_suffix_and_missing_file_fail_at_once(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"unsupported file type '\.txt'"):
        read_rows(tmp_path / "rows.txt")
    with pytest.raises(FileNotFoundError, match="not found"):
        read_rows(tmp_path / "missing.jsonl")


def test_require_answer_false(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"question": "Q?", "context": "C."}) + "\n", encoding="utf-8")
    assert isinstance(next(read_rows(path)), RowError)
    row = next(read_rows(path, require_answer=False))
    assert isinstance(row, RagRow) and row.answer == ""


def test_write_jsonl_round_trip_with_numpy_and_unicode(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "out.jsonl"
    rows: list[dict[str, Any]] = [
        {"id": "é", "score": np.float32(0.25), "scores": np.array([1.0, 2.0]), "n": np.int64(3)},
        {"id": "b", "score": None},
    ]
    assert write_jsonl(path, rows) == 2
    text = path.read_text(encoding="utf-8")
    assert "é" in text  # not \\u-escaped
    assert [json.loads(line) for line in text.splitlines()] == [
        {"id": "é", "score": 0.25, "scores": [1.0, 2.0], "n": 3},
        {"id": "b", "score": None},
    ]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, np.float32("nan"), np.array([1.0, np.nan])])
def test_writers_refuse_nan_and_infinity(tmp_path: Path, bad: Any) -> None:
    path = tmp_path / "out.jsonl"
    with pytest.raises(ValueError, match=r"NaN or infinite float at 'metrics\.score"):
        write_jsonl(path, [{"id": "ok"}, {"id": "x", "metrics": {"score": bad}}])
    with pytest.raises(ValueError, match="NaN or infinite"):
        write_csv(tmp_path / "out.csv", [{"id": "x", "score": bad}])


def test_jsonl_writer_appends_whole_batches(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    with JsonlWriter(path) as writer:
        writer.write_batch([{"i": 0}, {"i": 1}])
        with pytest.raises(ValueError, match="NaN"):
            writer.write_batch([{"i": 2}, {"i": math.nan}])
        # The failed batch left nothing behind, and the first one is already on disk.
        assert path.read_text() == '{"i": 0}\n{"i": 1}\n'
    with JsonlWriter(path, append=True) as writer:
        writer.write({"i": 3})
    assert [json.loads(line)["i"] for line in path.read_text().splitlines()] == [0, 1, 3]


def test_write_jsonl_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    write_jsonl("-", [{"a": 1}])
    assert capsys.readouterr().out == '{"a": 1}\n'


def test_write_csv_round_trips_through_read_rows(tmp_path: Path) -> None:
    path = tmp_path / "out.csv"
    rows: list[dict[str, Any]] = [
        {"id": "a", "question": "Q, with comma?", "contexts": ['say "hi"', "line\nbreak"], "answer": "A."},
        {"id": "b", "question": "Q2?", "contexts": ["c"], "answer": "B.", "score": 0.5, "ok": True},
    ]
    assert write_csv(path, rows) == 2
    header = path.read_text(encoding="utf-8").splitlines()[0]
    assert header == "id,question,contexts,answer,score,ok"
    back = list(read_rows(path))
    assert all(isinstance(row, RagRow) for row in back)
    assert [row.contexts for row in back if isinstance(row, RagRow)] == [['say "hi"', "line\nbreak"], ["c"]]
    assert back[1].extra == {"score": "0.5", "ok": "true"}  # type: ignore[union-attr]


def test_a_broken_json_line_is_named_by_its_1_based_line(tmp_path: Path) -> None:
    # Issue 25: the fifth line of a file (after a blank line) was reported as "row 4" with no id.
    path = tmp_path / "in.jsonl"
    lines = [json.dumps({**ROW, "id": str(i)}) for i in range(3)] + ["", '{"question": "Q?", oops']
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    bad = list(read_rows(path))[3]
    assert isinstance(bad, RowError) and (bad.index, bad.line) == (3, 5)
    assert str(bad).startswith("line 5: not valid JSON")
    assert "at line 5, column" in bad.message  # the output's errors entry names the line too
    not_object = tmp_path / "list.jsonl"
    not_object.write_text("\n[1, 2]\n", encoding="utf-8")
    (item,) = read_rows(not_object)
    assert isinstance(item, RowError) and str(item).startswith("line 2: ")
