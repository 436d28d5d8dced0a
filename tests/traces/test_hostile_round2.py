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
