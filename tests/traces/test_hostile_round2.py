"""Trace files against a hostile sender, round 2 (issue 47): whatever one span holds, it is its own
trace's error and ``evaluate`` keeps the other rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("openinference.semconv.trace")

from ragsense.cli import main

from .test_traces import DOCUMENTS, attr, otlp_file, rag_trace


@pytest.mark.parametrize("source", ["otlp", "phoenix"])
def test_documents_nested_thousands_deep_are_their_traces_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str
) -> None:
    """``retrieval.documents`` as a string of 5,000 nested brackets: RecursionError, exit 1."""
    bad = rag_trace("b" * 32, docs=[attr(DOCUMENTS, "[" * 5_000 + "]" * 5_000)])
    spans = [*rag_trace("a" * 32), *bad]
    if source == "otlp":
        path = otlp_file(tmp_path / "t.json", spans)
    else:  # Phoenix's span records: flat attributes, one object a line
        path = tmp_path / "t.jsonl"
        records = [
            {
                "context.trace_id": s["traceId"],
                "context.span_id": s["spanId"],
                "parent_id": s.get("parentSpanId"),
                "name": s["name"],
                "start_time": s["startTimeUnixNano"],
                "attributes": {a["key"]: a["value"]["stringValue"] for a in s["attributes"]},
            }
            for s in spans
        ]
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out.jsonl"
    code = main(["evaluate", str(path), "--from", source, "--model", "fake", "-o", str(out), "--no-store"])
    assert code == 3, capsys.readouterr().err  # rows with errors; the good row is scored
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert isinstance(records[0]["consens"], float)
    assert "nested too deeply" in records[1]["errors"][0]["message"]


@pytest.mark.parametrize("lines", [1, 2])
def test_a_number_of_thousands_of_digits_exits_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: int
) -> None:
    """A 5,000-digit integer raised Python's ValueError for long int strings: exit 1, "a bug"."""
    export = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "ab", "spanId": "01"}]}]}]}
    line = json.dumps(export).replace('"01"}', '"01", "startTimeUnixNano": ' + "9" * 5_000 + "}")
    path = tmp_path / "t.jsonl"
    path.write_text((json.dumps(export) + "\n") * (lines - 1) + line + "\n")
    code = main(["evaluate", str(path), "--from", "otlp", "--model", "fake", "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and str(path) in err and "number too long" in err
    assert (f"line {lines}" in err) == (lines == 2)
