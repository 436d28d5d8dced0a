"""Issue 37, "say why, where the user looks": the table of `evaluate --metrics consens,attribution` names
the weakest words and the top document; a labelled input's summary reports agreement; the weakest
words come in one order in the guard, the pytest plug-in, the CLI and the report; `ragsense runs`
lists every metric a run ran."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragsense.cli import main
from ragsense.cli._run import top_document_cell, weakest_cell
from ragsense.consens import default_bands, weakest_words
from ragsense.data import sample_rows_path
from ragsense.guard._check import shape_result
from ragsense.report._data import weakest_positions
from ragsense.testing._assertions import _grounding_message


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[list[str], str]:
    code = main(["evaluate", *args, "--model", "fake", "--no-store", "--table", "always"])
    assert code == 0
    captured = capsys.readouterr()
    return captured.out.splitlines(), captured.err


def test_attribution_changes_the_table_it_names_words_and_the_top_document(
    capsys: pytest.CaptureFixture[str],
) -> None:
    plain, _ = _run(capsys, "--sample", "--metrics", "consens")
    both, _ = _run(capsys, "--sample", "--metrics", "consens,attribution")
    assert plain != both  # the issue: the two tables were the same
    assert "why" in plain[0] and "top doc" not in plain[0]
    assert "why" in both[0] and "top doc" in both[0]
    rows = {line.split()[0]: line for line in both[2:] if line.strip()}
    # The invented answer names what the context lacks; a two-document row names its top document.
    assert "scent" in rows["bees-1"] and "[0] +" in rows["eiffel-1"]
    assert "errors" not in both[0]  # no row has errors: the column gives its width to the evidence


def test_a_labelled_input_reports_agreement_and_the_confusion(capsys: pytest.CaptureFixture[str]) -> None:
    _, err = _run(capsys, "--sample")
    lines = err.splitlines()
    head = next(i for i, line in enumerate(lines) if "agrees with expected" in line)
    assert "labelled rows" in lines[head] and " of 10)" in lines[head]
    table = lines[head + 1 : head + 7]
    assert table[0].split() == ["expected", "\\", "verdict", "grounded", "unsure", "ungrounded", "refusal"]
    confusion = {line.split()[0]: [int(x) for x in line.split()[1:]] for line in table[2:]}
    assert set(confusion) == {"grounded", "ungrounded", "unsure", "refusal"}
    assert sum(map(sum, confusion.values())) == 10
    assert confusion["refusal"] == [0, 0, 0, 2]  # both refusals recognised whatever the fake model scores


@pytest.mark.parametrize(
    ("grounded", "ungrounded"),
    [(1, 0), ("1", "0"), (True, False), ("true", "FALSE"), ("grounded", "ungrounded")],
)
def test_every_label_vocabulary_gives_the_same_agreement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], grounded: Any, ungrounded: Any
) -> None:
    rows = [json.loads(line) for line in sample_rows_path().read_text().splitlines() if line.strip()]
    binary = [r for r in rows if r["expected"] in ("grounded", "ungrounded")]
    for row in binary:
        row["label"] = grounded if row.pop("expected") == "grounded" else ungrounded
    src = tmp_path / "labelled.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in binary), encoding="utf-8")
    table, err = _run(capsys, str(src))
    assert "label" in table[0].split()  # the label column, read as a verdict
    assert all(line.split()[-1] in ("grounded", "ungrounded") for line in table[2:] if line.strip())
    assert "agrees with label on" in err
    assert f" of {len(binary)}) labelled rows" in err


def test_an_unreadable_label_is_counted_and_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        {"id": "a", "question": "Who?", "contexts": ["Ada wrote it."], "answer": "Ada wrote it.", "label": 1},
        {"id": "b", "question": "Who?", "contexts": ["Ada wrote it."], "answer": "Ada.", "label": "maybe"},
    ]
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    _, err = _run(capsys, str(src))
    assert "(1 of 1) labelled rows; 1 unreadable label (row 1: 'maybe')" in err


def test_an_unlabelled_input_reports_no_agreement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "rows.jsonl"
    src.write_text(json.dumps({"question": "Who?", "contexts": ["Ada wrote it."], "answer": "Ada."}) + "\n")
    table, err = _run(capsys, str(src))
    assert "agrees" not in err and "label" not in table[0] and "expected" not in table[0]


# --------------------------------------------------------------------------- one order of weakest words

# The guard's case in the issue: two stated words ("takes", "days") with a lower contrast than the
# real culprit ("fourteen", which the context does not state).
ROW: dict[str, Any] = {
    "question": "How long does a refund take?",
    "contexts": ["A refund takes three days."],
    "answer": "It takes fourteen days.",
    "consens": 0.1,
    "verdict": "unsure",
    "aggregation": "support",
    "model": "fake",
    "errors": [],
    "words": [
        {"word": "takes", "start": 3, "end": 8, "nll_empty": 2.0, "nll_context": 3.0, "stated": True},
        {"word": "fourteen", "start": 9, "end": 17, "nll_empty": 6.0, "nll_context": 5.5, "stated": False},
        {"word": "days", "start": 18, "end": 22, "nll_empty": 2.0, "nll_context": 2.8, "stated": True},
    ],
    "attribution": [{"index": 0, "drop": 0.25, "consens_without": -0.15}],
    "top_document": 0,
}
ORDER = ["fourteen", "takes", "days"]  # unstated first, then by contrast (-1.0 before -0.8)


def test_the_guard_the_plugin_the_cli_and_the_report_name_the_weakest_words_in_one_order() -> None:
    assert [w["word"] for w in weakest_words(ROW["words"], 5)] == ORDER
    guard = shape_result(ROW, "r1", 0.5, 5)["weakest_words"]
    assert [w["word"] for w in guard] == ORDER
    message = _grounding_message(ROW, 0.5, explain=True, bands=default_bands()).splitlines()
    start = next(i for i, line in enumerate(message) if "weakest words" in line) + 1
    assert [line.split()[0] for line in message[start : start + 3]] == ORDER
    assert weakest_cell(ROW) == "fourteen"  # the table names the unstated ones, in that order
    assert [ROW["words"][k]["word"] for k in weakest_positions(ROW["words"]) or []] == ORDER
    assert top_document_cell(ROW) == "[0] +0.25"


def test_runs_lists_every_metric_a_run_ran(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "runs.sqlite")
    args = ["--sample", "--model", "fake", "--store", store, "--table", "never"]
    assert main(["evaluate", *args, "--metrics", "consens,attribution", "--tag", "both"]) == 0
    assert main(["evaluate", *args, "--metrics", "consens", "--tag", "one"]) == 0
    capsys.readouterr()
    assert main(["runs", "--store", store]) == 0
    listed = {line.split()[4]: line for line in capsys.readouterr().out.splitlines()[2:] if line.strip()}
    assert "consens,attribution" in listed["both"]
    assert "consens,attribution" not in listed["one"] and "consens" in listed["one"]
