"""The verdict bands a run used, end to end: a bands file given to ``evaluate`` (API and CLI) or to
``ConSens`` -> the stored run's settings -> the report page's histogram bands."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import ragsense
from ragsense.cli import main
from ragsense.consens import DEFAULT_AGGREGATION, Bands, ConSens, default_bands
from ragsense.errors import ParameterError
from ragsense.runs import RunStore

from ._decode import page_data

ROWS: list[dict[str, Any]] = [
    {
        "id": f"r{k}",
        "question": "Who designs proteins?",
        "contexts": [f"David Baker designs proteins in Seattle {k}."],
        "answer": answer,
    }
    for k, answer in enumerate(["David Baker, in Seattle.", "Marie Curie in Warsaw.", "I don't know."])
]


@pytest.fixture
def bands_file(tmp_path: Path) -> Path:
    path = tmp_path / "bands.json"
    Bands(
        DEFAULT_AGGREGATION.value,
        grounded_at=0.8125,
        ungrounded_below=-0.4375,
        origin="ragsense calibrate mine.jsonl (240 rows)",
        fit={"target_precision": 0.9, "n": 240},
    ).save(path)
    return path


def report_bands(store: Path, ref: str, tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / f"{ref}.html"
    assert main(["report", ref, "--store", str(store), "-o", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    bands: dict[str, Any] = page_data(html)["meta"]["runs"][0]["bands"]
    return bands


def test_api_bands_reach_the_store_and_the_report(tmp_path: Path, bands_file: Path) -> None:
    store = tmp_path / "runs.sqlite"
    run = ragsense.evaluate(
        ROWS, "attribution", model="fake", bands=bands_file, store=store, tag="api", progress=False
    )
    expected = Bands.load(bands_file)
    assert [r["verdict"] for r in run.rows] == [
        "refusal" if r["refusal"] else expected.verdict(r["consens"]) for r in run.rows
    ]
    stored = RunStore(store).get("api")
    assert stored.metrics[0]["settings"]["bands"] == expected.to_dict()
    assert report_bands(store, "api", tmp_path) == {
        "aggregation": DEFAULT_AGGREGATION.value,
        "grounded_at": 0.8125,
        "ungrounded_below": -0.4375,
        "origin": "ragsense calibrate mine.jsonl (240 rows)",
        "text": "ungrounded < -0.4375 ≤ unsure < +0.8125 ≤ grounded",  # every digit, as everywhere
    }


def test_cli_bands_reach_the_report_and_a_default_run_shows_the_defaults(
    tmp_path: Path, bands_file: Path
) -> None:
    src = tmp_path / "rows.jsonl"
    ragsense.evaluate(ROWS, "similarity", output=src, progress=False)  # a JSONL file of the rows
    store = tmp_path / "runs.sqlite"
    base = ["evaluate", str(src), "--model", "fake", "--store", str(store), "--table", "never"]
    assert main([*base, "--bands", str(bands_file), "--tag", "cli"]) == 0
    assert main([*base, "--tag", "default"]) == 0
    banded = report_bands(store, "cli", tmp_path)
    assert (banded["grounded_at"], banded["ungrounded_below"]) == (0.8125, -0.4375)
    plain = report_bands(store, "default", tmp_path)
    defaults = default_bands()
    assert (plain["grounded_at"], plain["ungrounded_below"], plain["origin"]) == (
        defaults.grounded_at,
        defaults.ungrounded_below,
        "default",
    )


def test_a_consens_object_takes_its_bands_directly(tmp_path: Path, bands_file: Path) -> None:
    store = tmp_path / "runs.sqlite"
    metric = ConSens(model="fake", bands=Bands.load(bands_file))
    ragsense.evaluate(ROWS, [metric], store=store, tag="object", progress=False)
    stored = RunStore(store).get("object").metrics[0]["settings"]["bands"]
    assert stored["origin"] == "ragsense calibrate mine.jsonl (240 rows)"
    # bands= is for metrics made by name; a metric object is never silently given other bands.
    with pytest.raises(ParameterError, match=re.escape("ConSens(bands=...)")) as caught:
        ragsense.evaluate(ROWS, [ConSens(model="fake")], bands=bands_file, progress=False)
    assert caught.value.parameter == "bands"
