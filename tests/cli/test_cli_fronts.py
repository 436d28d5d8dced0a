"""The short commands write what ``ragsense evaluate --metrics ...`` writes: ``ragsense grounding`` is
``evaluate --metrics consens`` (or ``attribution``), ``ragsense vera evaluate`` is ``evaluate --metrics
vera``; one record schema, with every error in the ``errors`` list (no single ``error`` field)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragsense.cli import main

GOOD = {
    "question": "Who designed the Orvel bridge?",
    "contexts": ["Slate is grey.", "The Orvel bridge was designed by Mara Quint."],
    "answer": "Mara Quint designed it.",
}


def _input(tmp_path: Path) -> Path:
    src = tmp_path / "in.jsonl"
    lines = [
        json.dumps({**GOOD, "id": "good"}),
        json.dumps({**GOOD, "id": "no-answer", "answer": " "}),
        "{not json",
        json.dumps({**GOOD, "id": "no-contexts", "contexts": []}),
    ]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return src


def _run(tmp_path: Path, name: str, *args: str) -> list[dict[str, Any]]:
    out = tmp_path / f"{name}.jsonl"
    assert main([*args, "-o", str(out), "--model", "fake", "--no-store", "--table", "never"]) == 3
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_grounding_writes_the_records_of_evaluate_metrics_consens(tmp_path: Path) -> None:
    src = str(_input(tmp_path))
    for extra, metric in (([], "consens"), (["--attribution"], "attribution")):
        short = _run(tmp_path, f"grounding-{metric}", "grounding", src, *extra)
        full = _run(tmp_path, f"evaluate-{metric}", "evaluate", src, "--metrics", metric)
        assert short == full
        assert [bool(r["errors"]) for r in short] == [False, True, True, True]
        assert all("error" not in r for r in short)
        assert [e["field"] for r in short[1:] for e in r["errors"]] == ["answer", None, "contexts"]
        assert short[0]["verdict"] in ("grounded", "weak", "ungrounded", "refusal")
        assert ("top_document" in short[0]) == (metric == "attribution")


def test_vera_evaluate_writes_the_records_of_evaluate_metrics_vera(tmp_path: Path) -> None:
    src = str(_input(tmp_path))
    short = _run(tmp_path, "vera", "vera", "evaluate", src, "--no-cache")
    full = _run(tmp_path, "evaluate-vera", "evaluate", src, "--metrics", "vera", "--no-judge-cache")
    assert short == full
    assert [bool(r["errors"]) for r in short] == [False, True, True, True]
    assert all("error" not in r for r in short)
    assert short[0]["response_adherence"] is not None and short[1]["errors"][0]["metric"] == "vera"
