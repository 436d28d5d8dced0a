"""Tests of the kinship benchmark report: files, table shapes, validation and a deterministic plot."""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from ragsense.bench.kinship._report import read_results, write_kinship_report
from ragsense.errors import InputError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FILES = ["results.json", "table.md", "table.csv", "retrieval_recall.csv", "table.json", "accuracy_vs_k.png"]


def records() -> list[dict[str, Any]]:
    # Deliberately out of order (k descending, relation before control) to check the sorting.
    return [
        {
            "k": 15,
            "condition": "grandfather",
            "accuracy": 0.5,
            "retrieval_recall": 0.75,
            "n": 8,
            "n_errors": 1,
        },
        {"k": 15, "condition": "control", "accuracy": 0.99, "retrieval_recall": 1.0, "n": 40, "n_errors": 0},
        {"k": 15, "condition": "sibling", "accuracy": None, "retrieval_recall": None, "n": 0, "n_errors": 0},
        {
            "k": 5,
            "condition": "control",
            "accuracy": 0.95,
            "retrieval_recall": 0.9,
            "n": 40,
            "mean_hops": 1.0,
        },
        {"k": 5, "condition": "grandfather", "accuracy": 0.0, "retrieval_recall": 0.25, "n": 8},
        {"k": 5, "condition": "sibling", "accuracy": 0.125, "retrieval_recall": 0.5, "n": 8},
    ]


def write(out: Path, **kwargs: Any) -> Any:
    kwargs.setdefault("title", "Small Knowledge Source: 12 Names, 80 Relations")
    return write_kinship_report(records(), out, **kwargs)


def test_writes_every_file_and_results_round_trip(tmp_path: Path) -> None:
    report = write(tmp_path, metadata={"model": "smollm2-135m", "seed": 0})
    assert report.plot_skipped is None
    assert sorted(p.name for p in report.files) == sorted(FILES)
    assert all((tmp_path / name).is_file() for name in FILES)

    loaded = read_results(tmp_path / "results.json")
    assert [(r["k"], r["condition"]) for r in loaded] == [
        (5, "control"),
        (5, "grandfather"),
        (5, "sibling"),
        (15, "control"),
        (15, "grandfather"),
        (15, "sibling"),
    ]
    # Records come back exactly, extra keys included.
    by_key = {(r["k"], r["condition"]): r for r in records()}
    assert all(r == by_key[(r["k"], r["condition"])] for r in loaded)
    assert "NaN" not in (tmp_path / "results.json").read_text()


def test_markdown_has_paper_shape(tmp_path: Path) -> None:
    write(tmp_path, metadata={"model": "smollm2-135m"})
    text = (tmp_path / "table.md").read_text()
    assert text.startswith("# Small Knowledge Source: 12 Names, 80 Relations\n")
    assert "- **model**: smollm2-135m" in text
    for heading in ("## Accuracy", "## Retrieval recall", "## Queries per condition"):
        assert heading in text
    assert "## Failed queries per condition" in text  # n_errors was present
    lines = text.splitlines()
    assert "| # Retrieved | Control | Grandfather | Sibling |" in lines
    accuracy = text.split("## Accuracy")[1].split("## Retrieval recall")[0]
    assert "| 5           |    0.95 |        0.00 |    0.13 |" in accuracy
    assert "| 15          |    0.99 |        0.50 |       — |" in accuracy
    assert "nan" not in text.lower()


def test_terminal_table(tmp_path: Path) -> None:
    report = write(tmp_path, plot=False)
    lines = report.accuracy_table.splitlines()
    assert lines[0].split() == ["#", "Retrieved", "Control", "Grandfather", "Sibling"]
    assert lines[2].split() == ["5", "0.95", "0.00", "0.13"]
    assert lines[3].split() == ["15", "0.99", "0.50", "—"]


def test_csv_tables(tmp_path: Path) -> None:
    write(tmp_path, plot=False)
    with (tmp_path / "table.csv").open(newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["k", "control", "grandfather", "sibling"]
    assert [float(x) for x in rows[1]] == [5, 0.95, 0.0, 0.125]
    assert rows[2][:3] == ["15", "0.99", "0.5"] and rows[2][3] == ""  # no queries: empty cell
    with (tmp_path / "retrieval_recall.csv").open(newline="") as handle:
        recall = list(csv.DictReader(handle))
    assert float(recall[0]["grandfather"]) == 0.25 and recall[1]["sibling"] == ""


def test_table_json(tmp_path: Path) -> None:
    write(tmp_path, metadata={"seed": 0}, plot=False)
    table = json.loads((tmp_path / "table.json").read_text())
    assert table["title"].startswith("Small Knowledge Source")
    assert table["metadata"] == {"seed": 0}
    assert table["columns"] == ["k", "control", "grandfather", "sibling"]
    assert table["rows"] == [
        {"k": 5, "control": 0.95, "grandfather": 0.0, "sibling": 0.125},
        {"k": 15, "control": 0.99, "grandfather": 0.5, "sibling": None},
    ]
    assert table["retrieval_recall_rows"][0]["control"] == 0.9
    assert table["n_rows"][1] == {"k": 15, "control": 40, "grandfather": 8, "sibling": 0}


def test_given_conditions_fix_the_columns(tmp_path: Path) -> None:
    write(tmp_path, conditions=["sibling", "grandfather", "aunt"], plot=False)
    with (tmp_path / "table.csv").open(newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["k", "control", "sibling", "grandfather", "aunt"]
    assert rows[1][4] == ""  # a listed relation without records is an empty column
    with pytest.raises(InputError, match="row 0, field 'condition'"):
        write(tmp_path, conditions=["sibling"], plot=False)


def test_png_is_deterministic(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    write(tmp_path / "a")
    write(tmp_path / "b")
    first = (tmp_path / "a" / "accuracy_vs_k.png").read_bytes()
    assert first.startswith(PNG_SIGNATURE)
    assert first == (tmp_path / "b" / "accuracy_vs_k.png").read_bytes()


def test_plot_false_writes_no_png_and_removes_a_stale_one(tmp_path: Path) -> None:
    (tmp_path / "accuracy_vs_k.png").write_bytes(b"stale")
    report = write(tmp_path, plot=False)
    assert not (tmp_path / "accuracy_vs_k.png").exists()
    assert report.plot_skipped is None
    assert all(p.suffix != ".png" for p in report.files)


def test_missing_matplotlib_skips_the_plot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes `import matplotlib` raise ImportError.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    report = write(tmp_path)
    assert report.plot_skipped is not None and "ragsense[plot]" in report.plot_skipped
    assert not (tmp_path / "accuracy_vs_k.png").exists()
    assert (tmp_path / "table.md").is_file()


@pytest.mark.parametrize(
    ("index", "change", "field"),
    [
        (2, {"k": None}, "k"),
        (3, {"accuracy": 1.5}, "accuracy"),
        (1, {"accuracy": math.nan}, "accuracy"),
        (4, {"retrieval_recall": -0.1}, "retrieval_recall"),
        (0, {"n": -1}, "n"),
        (5, {"condition": ""}, "condition"),
        (5, {"condition": "control", "k": 5}, "condition"),  # duplicate of record 3
    ],
)
def test_bad_records_name_index_and_field(
    tmp_path: Path, index: int, change: dict[str, Any], field: str
) -> None:
    bad = records()
    bad[index].update(change)
    with pytest.raises(InputError) as info:
        write_kinship_report(bad, tmp_path, title="t")
    assert (info.value.row, info.value.field) == (index, field)
    assert f"row {index}" in str(info.value)
    assert not (tmp_path / "results.json").exists()  # nothing written


def test_missing_key_and_nan_extra(tmp_path: Path) -> None:
    bad = records()
    del bad[4]["accuracy"]
    with pytest.raises(InputError, match="row 4, field 'accuracy': missing required key 'accuracy'"):
        write_kinship_report(bad, tmp_path, title="t")
    bad = records()
    bad[2]["mean_hops"] = math.nan
    with pytest.raises(InputError, match=r"row 2.*NaN"):
        write_kinship_report(bad, tmp_path, title="t")
    with pytest.raises(InputError, match="no result records"):
        write_kinship_report([], tmp_path, title="t")


def test_read_results_rejects_bad_files(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text('[{"k": 5, "condition": "control", "accuracy": 0.9, "n": 3}, {"k": 5}]')
    with pytest.raises(InputError, match="row 1, field 'condition'"):
        read_results(path)
    path.write_text('{"k": 5}')
    with pytest.raises(InputError, match="JSON list"):
        read_results(path)
    path.write_text("[oops")
    with pytest.raises(InputError, match="not valid JSON"):
        read_results(path)


def with_intervals() -> list[dict[str, Any]]:
    return [
        {
            "k": 5,
            "condition": "control",
            "accuracy": 0.5,
            "accuracy_ci": [0.15, 0.85],
            "retrieval_recall": 1.0,
            "retrieval_recall_ci": [0.61, 1.0],
            "n": 6,
            "n_empty_answers": 2,
        },
        {
            "k": 5,
            "condition": "grandfather",
            "accuracy": 0.0,
            "accuracy_ci": [0.0, 0.39],
            "retrieval_recall": 0.5,
            "retrieval_recall_ci": [0.22, 0.78],
            "n": 4,
            "n_empty_answers": 0,
        },
    ]


def test_intervals_in_every_table(tmp_path: Path) -> None:
    write_kinship_report(with_intervals(), tmp_path, title="T", plot=False)
    markdown = (tmp_path / "table.md").read_text()
    assert "## Accuracy (95% Wilson interval)" in markdown
    assert "0.50 (0.15–0.85)" in markdown and "0.00 (0.00–0.39)" in markdown
    assert "## Retrieval recall (95% Wilson interval)" in markdown and "0.50 (0.22–0.78)" in markdown
    assert "## Empty answers per condition" in markdown
    with (tmp_path / "table.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == [
        "k",
        "control",
        "control_low",
        "control_high",
        "grandfather",
        "grandfather_low",
        "grandfather_high",
    ]
    assert [float(rows[0][c]) for c in ("control", "control_low", "control_high")] == [0.5, 0.15, 0.85]
    with (tmp_path / "retrieval_recall.csv").open(newline="") as handle:
        assert float(next(csv.DictReader(handle))["grandfather_high"]) == 0.78
    table = json.loads((tmp_path / "table.json").read_text())
    assert table["interval"] == "95% Wilson score"
    assert table["accuracy_ci_rows"] == [{"k": 5, "control": [0.15, 0.85], "grandfather": [0.0, 0.39]}]
    assert table["retrieval_recall_ci_rows"][0]["control"] == [0.61, 1.0]


def test_plot_with_error_bars_differs_from_one_without(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    bare = [{k: v for k, v in r.items() if not k.endswith("_ci")} for r in with_intervals()]
    write_kinship_report(with_intervals(), tmp_path / "ci", title="T")
    write_kinship_report(bare, tmp_path / "bare", title="T")
    with_bars = (tmp_path / "ci" / "accuracy_vs_k.png").read_bytes()
    assert with_bars.startswith(PNG_SIGNATURE)
    assert with_bars != (tmp_path / "bare" / "accuracy_vs_k.png").read_bytes()
    assert "interval" not in (tmp_path / "bare" / "table.md").read_text()


@pytest.mark.parametrize("bad", [[0.9, 0.1], [0.1], [-0.1, 0.5], [0.2, math.nan], "0.1-0.2", [0.1, 1.5]])
def test_bad_interval_names_the_record_and_field(tmp_path: Path, bad: Any) -> None:
    recs = with_intervals()
    recs[1]["accuracy_ci"] = bad
    with pytest.raises(InputError, match=r"row 1, field 'accuracy_ci'"):
        write_kinship_report(recs, tmp_path, title="T", plot=False)
