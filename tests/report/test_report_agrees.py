"""Issue 48 on the report, made by ``ragsense report`` from runs ``ragsense evaluate`` recorded with the
fake model: the histogram's mean is the summary's (refusals left out, as docs/metrics.md and
docs/report.md say), a two-run report notes bands that differ, band edges are written as everywhere
else, documents are numbered as in the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import ragsense
from ragsense.cli import main
from ragsense.consens import DEFAULT_AGGREGATION, Bands

from ._cdp import Browser
from ._decode import page_data

DOCS = Path(__file__).parents[2] / "docs"
ROWS = [
    {"id": f"r{k}", "question": "When was it built?", "contexts": ["The lighthouse was built in 1887."],
     "answer": answer}
    for k, answer in enumerate(["The lighthouse was built in 1887.", "Marie Curie studied radium.",
                                "The documents do not say when it was built."])
]  # fmt: skip
READY = "document.documentElement.dataset.ready === '1' || !!document.querySelector('.banner.bad')"


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two runs of the same rows under different bands, and the single and the two-run report."""
    tmp = tmp_path_factory.mktemp("agrees")
    src = tmp / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    Bands(DEFAULT_AGGREGATION.value, 0.5, -0.25, origin="mine").save(tmp / "bands.json")
    store = tmp / "runs.sqlite"
    base = ["evaluate", str(src), "--metrics", "attribution", "--model", "fake", "--store", str(store),
            "--table", "never"]  # fmt: skip
    assert main([*base, "--tag", "a"]) == 0
    assert main([*base, "--tag", "b", "--bands", str(tmp / "bands.json")]) == 0
    pages = {}
    for name, refs in {"single": ["a"], "pair": ["a", "b"]}.items():
        out = tmp / f"{name}.html"
        assert main(["report", *refs, "--store", str(store), "-o", str(out)]) == 0
        pages[name] = out
    return pages


def test_a_two_run_report_notes_that_the_bands_differ(reports: dict[str, Path]) -> None:
    meta = page_data(reports["pair"].read_text(encoding="utf-8"))["meta"]
    note = meta["bands_note"]
    assert note.startswith("the runs used different verdict bands: A grounded >= +0.83")
    assert "B grounded >= +0.50, ungrounded < -0.25" in note
    assert meta["runs"][1]["bands"]["text"] == "ungrounded < -0.25 ≤ unsure < +0.50 ≤ grounded"
    single = page_data(reports["single"].read_text(encoding="utf-8"))["meta"]
    assert "bands_note" not in single


def test_documents_are_numbered_from_0_as_in_the_cli(reports: dict[str, Path]) -> None:
    html = reports["single"].read_text(encoding="utf-8")
    assert '"Document [" + i + "]"' in html and '"Document " + (i + 1)' not in html


def test_the_docs_say_the_reports_means_leave_refusals_out() -> None:
    assert "the summary's means leave them out" in (DOCS / "report.md").read_text(encoding="utf-8")
    assert "the report's means" in (DOCS / "metrics.md").read_text(encoding="utf-8")


def test_the_histogram_mean_is_the_summarys_without_refusals(
    reports: dict[str, Path], browser: Browser
) -> None:
    path = reports["single"]
    meta = page_data(path.read_text(encoding="utf-8"))["meta"]
    metric = next(s["metric"] for s in meta["scores"] if s["name"] == "consens")
    summary = meta["runs"][0]["summary"][metric]
    assert summary["refusals"] == 1 and summary["scores"]["consens"]["n"] == 2
    browser.navigate(path.as_uri())
    browser.wait_for(READY, timeout=30)
    title = browser.evaluate("document.querySelector('.hist[data-score=consens] .hist-title').textContent")
    match = re.search(r"mean ([+-]?\d\.\d+) · n (\d+)", title)
    assert match, title
    assert int(match.group(2)) == 2 and "refusals left out" in title
    assert abs(float(match.group(1)) - summary["scores"]["consens"]["mean"]) < 1e-3


def test_a_score_at_an_edge_keeps_its_deciding_digits_in_the_page(tmp_path: Path, browser: Browser) -> None:
    # Bands with an edge between a row's score and its three-decimal text: the page's usual three
    # decimals would read as the other band.
    scored = ragsense.evaluate(ROWS, "consens", model="fake", progress=False).rows
    score = next(r["consens"] for r in scored if r["verdict"] == "ungrounded")
    three = float(f"{score:.3f}")
    assert three != score
    agg = DEFAULT_AGGREGATION.value
    bands = Bands(agg, 0.9, three) if three > score else Bands(agg, score, -1.0)
    bands.save(tmp_path / "edge.json")
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    store = tmp_path / "runs.sqlite"
    assert main(["evaluate", str(src), "--model", "fake", "--store", str(store), "--table", "never",
                 "--tag", "edge", "--bands", str(tmp_path / "edge.json")]) == 0  # fmt: skip
    out = tmp_path / "edge.html"
    assert main(["report", "edge", "--store", str(store), "-o", str(out)]) == 0
    browser.navigate(out.as_uri())
    browser.wait_for(READY, timeout=30)
    cells = browser.evaluate("[...document.querySelectorAll('#rows-table tbody td')].map(c => c.textContent)")
    assert f"{three:+.3f}" not in cells
    [text] = [c for c in cells if re.fullmatch(r"[+-]\d\.\d{4,}", c)]
    assert bands.verdict(float(text)) == bands.verdict(score)
