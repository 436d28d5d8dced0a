"""``ragsense report``: a stored run (or two) written as a page; an unknown run is a usage error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsense.cli import main
from ragsense.consens import default_bands
from ragsense.data import sample_rows_path
from ragsense.runs import RunStore

from ._decode import page_data
from ._rows import store_run, synthetic_rows


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "runs.sqlite"
    rows = synthetic_rows(12, seed=4)
    store_run(path, rows, tag="before")
    store_run(path, [{**r, "consens": r["consens"] - 0.1} for r in rows], tag="after")
    return path


def test_report_of_a_stored_run_is_written(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "pages" / "before.html"
    assert main(["report", "before", "--store", str(store), "-o", str(out)]) == 0
    run = RunStore(store).get("before")
    data = page_data(out.read_text(encoding="utf-8"))
    assert data["meta"]["runs"][0]["id"] == run.id and len(data["rows"]) == 12
    assert str(out) in capsys.readouterr().err


def test_default_output_is_named_after_the_run_in_the_working_directory(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGSENSE_STORE", str(store))  # the store from the environment, as evaluate uses it
    assert main(["report", "latest"]) == 0
    latest = RunStore(store).get("latest")
    assert (tmp_path / f"ragsense-report-{latest.id}.html").is_file()


def test_two_runs_make_a_comparison(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["report", "before", "after", "--store", str(store)]) == 0
    a, b = RunStore(store).get("before"), RunStore(store).get("after")
    page = (tmp_path / f"ragsense-report-{a.id}-vs-{b.id}.html").read_text(encoding="utf-8")
    comparison = page_data(page)["meta"]["comparison"]
    [consens] = [s for s in comparison["scores"] if s["score"] == "consens"]
    assert (
        consens["n"] == 12
        and consens["worse"] == 12
        and consens["difference"] == pytest.approx(-0.1, abs=1e-3)
    )


def test_unknown_run_exits_2_with_a_clear_message(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "never.html"
    assert main(["report", "no-such-run", "--store", str(store), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no run 'no-such-run'" in err and "ragsense runs" in err
    assert not out.exists()
    assert main(["report", "before", "no-such-run", "--store", str(store), "-o", str(out)]) == 2


def test_report_of_a_real_evaluate_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end on ragsense's own output: the bundled sample rows scored by the fake model."""
    store = tmp_path / "runs.sqlite"
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    code = main(
        [
            "evaluate",
            "--sample",
            "--metrics",
            "attribution,vera",
            "--model",
            "fake",
            "--store",
            str(store),
            "--tag",
            "sample",
        ]
    )
    assert code in (0, 3)
    out = tmp_path / "sample.html"
    assert main(["report", "sample", "--store", str(store), "-o", str(out)]) == 0
    data = page_data(out.read_text(encoding="utf-8"))
    views = [entry[1] for entry in data["rows"]]
    sample = [json.loads(line) for line in sample_rows_path().read_text(encoding="utf-8").splitlines()]
    assert len(views) == len(sample) and all(v["w"] and "t" in v and v["ve"]["st"] for v in views)
    # Attribution for the rows with more than one document.
    assert sum(bool(v["t"]) for v in views) == sum(len(r["contexts"]) > 1 for r in sample)
    assert [s["name"] for s in data["meta"]["scores"]] == [
        "consens",
        "context_relevance",
        "response_relevance",
        "response_adherence",
    ]
    defaults = default_bands()  # never the numbers themselves: the defaults are chosen on data and move
    bands = dict(data["meta"]["runs"][0]["bands"])
    assert bands.pop("text").endswith("grounded")  # the edges as every view writes them (score_text)
    assert bands == {
        "aggregation": defaults.score,
        "grounded_at": defaults.grounded_at,
        "ungrounded_below": defaults.ungrounded_below,
        "origin": "default",
    }
