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
    {
        "id": f"r{i}",
        "question": f"Who wrote book {i}?",
        "contexts": [f"Ada wrote book {i}."],
        "answer": "Ada.",
    }
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
        {**ROWS[1], "answer": "Ada.\n@SUM(1)", "note": "\r=cmd", '=HYPERLINK("x")': "\n+1"},
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
    assert '\'=HYPERLINK("x")' in records[0] and "'\r=cmd" in records[2]
    back = [r for r in read_rows(out) if isinstance(r, RagRow)]
    assert [r.answer for r in back] == [hostile, "Ada.\n@SUM(1)"]
    assert back[1].extra["note"] == "\r=cmd" and back[1].extra['=HYPERLINK("x")'] == "\n+1"
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


# ------------------------------------------------------------------------- escape sequences printed


def _assert_escaped(text: str) -> None:
    assert not any(c in text for c in ESCAPES), repr(text)
    assert "\\x1b]0;PWNED\\x07" in text, text


def test_an_otlp_span_id_in_an_error_is_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Issue 38, as seen: report_error printed an OTLP span id holding an OSC sequence raw.
    span = {"traceId": "ab", "spanId": EVIL, "name": "llm", "startTimeUnixNano": "soon"}
    export = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    (tmp_path / "traces.json").write_text(json.dumps(export), encoding="utf-8")
    code = main(["evaluate", str(tmp_path / "traces.json"), "--from", "otlp", "--model", "fake",
                 "--metrics", "consens", "--no-store", "--table", "never"])  # fmt: skip
    assert code == 2
    _assert_escaped(capsys.readouterr().err)


def test_a_langfuse_trace_id_in_an_error_is_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "traces.json").write_text(json.dumps([{"id": EVIL, "observations": "x"}]), encoding="utf-8")
    code = main(["evaluate", str(tmp_path / "traces.json"), "--from", "langfuse", "--model", "fake",
                 "--metrics", "consens", "--no-store", "--table", "never"])  # fmt: skip
    assert code == 2
    _assert_escaped(capsys.readouterr().err)


def _bands_file(path: Path, **fields: Any) -> Path:
    from ragsense.consens import default_bands

    data = {**default_bands().to_dict(), **fields}
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_a_bands_file_field_in_an_error_is_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bands = _bands_file(tmp_path / "bands.json", score=EVIL)
    src = _write_jsonl(tmp_path / "rows.jsonl", ROWS)
    code = main(["evaluate", str(src), "--bands", str(bands), "--model", "fake", "--metrics", "consens",
                 "--no-store", "--table", "never"])  # fmt: skip
    assert code == 2
    _assert_escaped(capsys.readouterr().err)


def test_the_bands_note_of_compare_is_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "runs.sqlite"
    src = _write_jsonl(tmp_path / "rows.jsonl", ROWS)
    bands = _bands_file(tmp_path / "bands.json", origin=EVIL, grounded_at=0.5)
    args = ["--model", "fake", "--metrics", "consens", "--store", str(store), "--table", "never"]
    assert main(["evaluate", str(src), *args, "--tag", "a"]) == 0
    assert main(["evaluate", str(src), *args, "--tag", "b", "--bands", str(bands)]) == 0
    capsys.readouterr()
    assert main(["compare", "a", "b", "--store", str(store)]) == 0
    printed = capsys.readouterr()
    assert "different verdict bands" in printed.err
    _assert_escaped(printed.out + printed.err)


def test_calibrate_row_errors_are_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        {"id": f"{label}-{k}", "question": "Q?", "contexts": ["C."], "answer": "A.", "label": label,
         "consens": (k / 20 if label else -k / 20), "aggregation": "support"}
        for k in range(12) for label in (0, 1)
    ]  # fmt: skip
    rows.append({**rows[0], "id": EVIL, "label": "maybe"})
    src = _write_jsonl(tmp_path / "labelled.jsonl", rows)
    code = main(["calibrate", str(src), "-o", str(tmp_path / "bands.json"), "--min-per-class", "5",
                 "--folds", "2", "--model", "fake"])  # fmt: skip
    printed = capsys.readouterr()
    assert code == 3, printed.err
    assert "row error" in printed.err
    _assert_escaped(printed.err)


# ------------------------------------------------------------------------------- --annotations FILE


def _rag_trace_file(path: Path) -> Path:
    def attr(key: str, value: str) -> dict[str, Any]:
        return {"key": key, "value": {"stringValue": value}}

    kind, trace = "openinference.span.kind", "a" * 32
    spans = [
        {"traceId": trace, "spanId": "a" * 15 + "0", "name": "query", "startTimeUnixNano": "1",
         "attributes": [attr(kind, "CHAIN"), attr("input.value", "Who designs proteins?")]},
        {"traceId": trace, "spanId": "a" * 15 + "1", "parentSpanId": "a" * 15 + "0", "name": "retrieve",
         "startTimeUnixNano": "2", "attributes": [
             attr(kind, "RETRIEVER"), attr("input.value", "Who designs proteins?"),
             attr("retrieval.documents.0.document.content", "David Baker designs proteins.")]},
        {"traceId": trace, "spanId": "a" * 15 + "2", "parentSpanId": "a" * 15 + "0", "name": "llm",
         "startTimeUnixNano": "3", "attributes": [attr(kind, "LLM"), attr("output.value", "David Baker.")]},
    ]  # fmt: skip
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}), encoding="utf-8")
    return path


def test_annotations_never_replace_an_existing_file_unless_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 38, as seen: --annotations FILE overwrote any file, the input trace file included.
    from ragsense.traces import read_annotations

    source = _rag_trace_file(tmp_path / "traces.json")
    original = source.read_bytes()
    args = ["evaluate", str(source), "--from", "otlp", "--model", "fake", "--metrics", "consens",
            "--no-store", "--table", "never"]  # fmt: skip
    for flags in ([], ["--overwrite"]):  # the input itself: refused, --overwrite or not
        with pytest.raises(SystemExit) as stopped:
            main([*args, "--annotations", str(source), *flags])
        assert stopped.value.code == 2 and "is the INPUT file" in capsys.readouterr().err
    assert source.read_bytes() == original
    precious = tmp_path / "precious.json"
    precious.write_text("keep me\n", encoding="utf-8")
    assert main([*args, "--annotations", str(precious)]) == 2
    err = capsys.readouterr().err
    assert "annotations file" in err and "already exists" in err and "--overwrite" in err
    assert precious.read_text(encoding="utf-8") == "keep me\n"
    out = tmp_path / "out.jsonl"
    with pytest.raises(SystemExit) as stopped:
        main([*args, "-o", str(out), "--annotations", str(out), "--overwrite"])
    assert stopped.value.code == 2 and "is the --output file" in capsys.readouterr().err
    assert not out.exists()
    assert main([*args, "--annotations", str(precious), "--overwrite"]) == 0
    assert len(read_annotations(precious)) == 1
    assert source.read_bytes() == original


# ------------------------------------------------------------------------------- hostile --bands files


def _hostile_bands(tmp_path: Path, kind: str) -> tuple[Path, str]:
    from ragsense.consens import default_bands

    fields = default_bands().to_dict()
    path = tmp_path / f"{kind}.json"
    if kind == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
        return path, "nested deeper than"
    if kind == "deep-fit":
        fit: dict[str, Any] = {}
        for _ in range(900):
            fit = {"a": fit}
        path.write_text(json.dumps({**fields, "fit": fit}), encoding="utf-8")
        return path, "nested deeper than"
    if kind == "huge-number":
        text = json.dumps({**fields, "grounded_at": 0})
        path.write_text(text.replace('"grounded_at": 0', '"grounded_at": 1' + "0" * 400), encoding="utf-8")
        return path, "finite number"
    if kind == "too-many-digits":
        path.write_text(json.dumps({**fields, "grounded_at": 0}).replace(" 0,", " 1" + "0" * 5000 + ","))
        return path, "is not JSON"
    path.write_bytes(json.dumps({**fields, "origin": "x"}).replace('"x"', '"caf\xe9"').encode("latin-1"))
    return path, "is not UTF-8 text"


@pytest.mark.parametrize("kind", ["deep", "deep-fit", "huge-number", "too-many-digits", "latin-1"])
def test_hostile_bands_files_are_bad_input(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 38, as seen: deep nesting, a 400-digit number and non-UTF-8 exited 1 ("internal error").
    bands, reason = _hostile_bands(tmp_path, kind)
    src = _write_jsonl(tmp_path / "rows.jsonl", ROWS)
    code = main(["evaluate", str(src), "--bands", str(bands), "--model", "fake", "--metrics", "consens",
                 "--store", str(tmp_path / "runs.sqlite"), "--table", "never"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert str(bands) in err and reason in err and "internal error" not in err


# ------------------------------------------------------------------------------- one lock per file


def test_every_name_of_an_output_shares_its_lock(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Issue 38, as seen: the lock was keyed by the path as given, so `-o link.jsonl` (a symlink to
    # same.jsonl) took a lock of its own while another run wrote same.jsonl.
    from ragsense.evaluation._outputs import acquire_output_lock, release_output_lock

    src = _write_jsonl(tmp_path / "rows.jsonl", ROWS)
    same = tmp_path / "same.jsonl"
    (tmp_path / "link.jsonl").symlink_to(same)
    (tmp_path / "sub").mkdir()
    lock = acquire_output_lock(same)  # a live run (this process) is writing same.jsonl
    args = ["--model", "fake", "--metrics", "consens", "--no-store", "--table", "never"]
    try:
        for name in ("link.jsonl", "sub/../same.jsonl"):
            assert main(["evaluate", str(src), "-o", str(tmp_path / name), *args]) == 2
            assert "being written by another run" in capsys.readouterr().err
        assert not same.exists()
    finally:
        release_output_lock(lock)
    # Issue 47: a link named as the output is never written through (nor its dangling target made).
    assert main(["evaluate", str(src), "-o", str(tmp_path / "link.jsonl"), *args]) == 2
    assert not same.exists() and not lock.exists()


def test_log_lines_are_escaped(tmp_path: Path) -> None:
    # A log line quotes what the user gave (here an output name holding an OSC sequence, logged by
    # --resume with -v): the same writer escapes it. A subprocess: pytest's own log handlers would
    # keep the command line's from being installed.
    src = _write_jsonl(tmp_path / "rows.jsonl", ROWS)
    out = tmp_path / f"out{EVIL}.jsonl"
    out.write_text('{"_row": 0, "trunc', encoding="utf-8")  # a run killed while writing its first line
    done = _ragsense("-v", "evaluate", str(src), "-o", str(out), "--resume", "--model", "fake",
                     "--metrics", "consens", "--no-store", "--table", "never")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "dropping the truncated last line" in done.stderr
    _assert_escaped(done.stderr)
