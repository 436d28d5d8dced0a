"""The bundled sample file behind the README's first command."""

from __future__ import annotations

import json
from collections import Counter

from ragsense.consens import VERDICTS
from ragsense.data import RagRow, read_rows, sample_rows_path
from ragsense.text import is_refusal


def test_sample_rows_are_valid_and_varied() -> None:
    path = sample_rows_path()
    assert path.is_file()
    rows = list(read_rows(path))
    assert 6 <= len(rows) <= 12
    assert all(isinstance(row, RagRow) for row in rows)
    # Clear grounded, invented, partial and refusal cases, each with the verdict a reader expects.
    cases = Counter(row.extra["case"] for row in rows if isinstance(row, RagRow))
    assert set(cases) == {"grounded", "invented", "partial", "refusal"}
    expected = {"grounded": "grounded", "invented": "ungrounded", "partial": "unsure", "refusal": "refusal"}
    for row in rows:
        assert isinstance(row, RagRow)
        assert row.extra["expected"] == expected[row.extra["case"]]
        assert row.extra["expected"] in VERDICTS
        assert is_refusal(row.answer) == (row.extra["case"] == "refusal")
    for row in rows:
        assert isinstance(row, RagRow)
        assert 1 <= len(row.contexts) <= 3
        assert all(len(context.split()) < 120 for context in row.contexts)
        assert row.id and row.reference


def test_sample_ids_are_unique_and_file_is_plain_jsonl() -> None:
    lines = sample_rows_path().read_text(encoding="utf-8").splitlines()
    ids = [json.loads(line)["id"] for line in lines]
    assert len(ids) == len(set(ids))
