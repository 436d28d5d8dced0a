"""`ragsense evaluate --table`: the expected verdict of a labelled input beside ragsense's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsense.cli import main


def _table(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    code = main(
        ["evaluate", *args, "--model", "fake", "--metrics", "consens", "--no-store", "--table", "always"]
    )
    assert code == 0
    return capsys.readouterr().out.splitlines()


def test_the_sample_table_shows_the_expected_verdict_beside_ours(capsys: pytest.CaptureFixture[str]) -> None:
    lines = _table(capsys, "--sample")
    header = lines[0].split()
    assert header[-2:] == ["expected", "errors"] or header[-1] == "expected"
    assert header.index("verdict") < header.index("expected")
    rows = {line.split()[0]: line for line in lines[2:] if line.strip()}
    # The refusals are recognised by their wording whatever the (fake) model scores.
    for row_id in ("lighthouse-1", "warranty-1"):
        cells = rows[row_id].split()
        assert cells.count("refusal") == 2, rows[row_id]  # ours and the expected one


def test_an_input_without_expected_verdicts_has_no_such_column(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src = tmp_path / "rows.jsonl"
    src.write_text(
        json.dumps({"id": "a", "question": "Who?", "contexts": ["Ada wrote it."], "answer": "Ada."}) + "\n",
        encoding="utf-8",
    )
    lines = _table(capsys, str(src))
    assert "expected" not in lines[0]
