"""Issue 47, files from a hostile sender and outputs in a hostile folder, tested the way the review
found each: real files, the real command line (``ragsense.cli.main``) with the fake model."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ragsense.cli import main

ROW = {"question": "Who wrote the book?", "contexts": ["Ada wrote the book."], "answer": "Ada."}


def _good(i: int) -> bytes:
    return json.dumps({**ROW, "id": f"r{i}"}).encode() + b"\n"


def _evaluate(path: Path, out: Path, *extra: str) -> int:
    return main(
        ["evaluate", str(path), "--model", "fake", "-o", str(out), "--no-store", "--table", "never", *extra]
    )


def test_odd_rows_of_a_json_lines_file_are_their_rows_errors(tmp_path: Path) -> None:
    """Each of these ended the run with exit 1 ("a bug in ragsense"); NaN only after scoring."""
    path = tmp_path / "rows.jsonl"
    lines = [
        _good(0),
        b"[" * 100_000 + b"]" * 100_000 + b"\n",  # nested 100,000 deep
        b'{"id": "bytes", "question": "Q\xff\xfe?", "context": "C.", "answer": "A."}\n',  # not UTF-8
        b'{"id": "digits", "question": "Q?", "context": "C.", "answer": "A.", "n": ' + b"9" * 5_000 + b"}\n",
        b'{"id": "nan", "question": "Q?", "context": "C.", "answer": "A.", "extra": {"x": NaN}}\n',
        _good(1),
    ]
    path.write_bytes(b"".join(lines))
    out = tmp_path / "out.jsonl"
    assert _evaluate(path, out) == 3  # rows with errors; the good ones scored
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [isinstance(r.get("consens"), float) for r in records] == [True, False, False, False, False, True]
    messages = [r["errors"][0]["message"] for r in records[1:5]]
    assert "line 2" in messages[0] and "nested too deeply" in messages[0]
    assert "line 3 is not UTF-8" in messages[1] and "0xff" in messages[1]
    assert "line 4" in messages[2] and "number too long" in messages[2]
    assert records[4]["errors"][0]["field"] == "extra.x" and records[4]["extra"] == {"x": None}


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("rows.csv", b"question,context,answer\nQ?,C.,A.\nQ\xff?,C.,A.\n", "line 3 is not UTF-8"),
        ("rows.json", b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        ("rows.json", b'[{"n": ' + b"9" * 5_000 + b"}]", "number too long"),
        ("rows.json", b'[{"question": "Q\xff"}]', "not UTF-8"),
    ],
)
def test_a_file_that_cannot_be_split_into_rows_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: bytes, expected: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    assert _evaluate(path, tmp_path / "out.jsonl") == 2
    err = capsys.readouterr().err
    assert str(path) in err and expected in err and "bug" not in err


def _stored_run(tmp_path: Path) -> Path:
    rows = tmp_path / "rows.jsonl"
    rows.write_bytes(_good(0) + _good(1))
    store = tmp_path / "runs.sqlite"
    assert main(["grounding", str(rows), "--model", "fake", "--store", str(store), "--table", "never"]) == 0
    return store


def test_report_never_writes_through_a_planted_link_and_refuses_an_existing_file(tmp_path: Path) -> None:
    """A planted ``x.html.tmp`` link made ``report -o x.html`` overwrite its target; a dangling link as
    ``-o`` was written through; an existing report was replaced unasked."""
    store = _stored_run(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = tmp_path / "x.html"
    (tmp_path / "x.html.tmp").symlink_to(victim)
    report = ["report", "latest", "--store", str(store), "-o", str(out)]
    assert main(report) == 0
    assert victim.read_text() == "keep me" and "<html" in out.read_text().lower()
    assert main(report) == 2  # an existing report: --overwrite replaces it
    assert main([*report, "--overwrite"]) == 0
    dangling = tmp_path / "dangling.html"
    dangling.symlink_to(tmp_path / "created-elsewhere.html")
    assert main(["report", "latest", "--store", str(store), "-o", str(dangling)]) == 2
    assert not (tmp_path / "created-elsewhere.html").exists()
    assert main(["report", "latest", "--store", str(store), "-o", str(dangling), "--overwrite"]) == 0
    assert not dangling.is_symlink() and not (tmp_path / "created-elsewhere.html").exists()
    assert victim.read_text() == "keep me"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".x.html")]  # no temporary left


def test_junit_and_results_refuse_an_existing_file_or_a_link_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_bytes(_good(0))
    junit = tmp_path / "gates.xml"
    junit.write_text("old")
    out = tmp_path / "out.jsonl"
    assert _evaluate(rows, out, "--junit", str(junit)) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert junit.read_text() == "old" and not out.exists()  # refused before a row was scored
    assert _evaluate(rows, out, "--junit", str(junit), "--overwrite") == 0
    assert "<testsuites" in junit.read_text()
    link = tmp_path / "link.jsonl"
    link.symlink_to(tmp_path / "elsewhere.jsonl")
    assert _evaluate(rows, link) == 2 and not (tmp_path / "elsewhere.jsonl").exists()
    assert _evaluate(rows, link, "--overwrite") == 2 and not (tmp_path / "elsewhere.jsonl").exists()
    assert os.path.islink(link)


def test_calibrate_escapes_its_input_path_and_row_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The input path (stdout) and, on the failure path, row ids (stderr) were printed raw."""
    evil = "\x1b]0;PWNED\x07"
    scores = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0]
    labels = [1, 0, 1, 1, 1, 0, 1, 0, 0, 0]
    base = {**ROW, "aggregation": "arithmetic", "verdict": "unsure"}
    rows = [
        {**base, "id": f"r{k}", "consens": s, "label": y}
        for k, (s, y) in enumerate(zip(scores, labels, strict=True))
    ]
    rows.append({**base, "id": f"bad{evil}", "consens": 0.5, "label": "maybe?"})
    src = tmp_path / f"rows{evil}.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "bands.json"
    argv = ["calibrate", str(src), "-o", str(out), "--min-per-class", "5", "--aggregation", "arithmetic"]
    assert main(argv) == 2  # no band at the default target: the failure path lists the row errors
    stdout, stderr = capsys.readouterr()
    assert "\x1b" not in stdout + stderr and "\\x1b]0;PWNED" in stderr
    assert main([*argv, "--target-precision", "0.8"]) == 3  # bands written; a row error
    stdout, stderr = capsys.readouterr()
    assert "\x1b" not in stdout + stderr and "\\x1b]0;PWNED" in stdout
