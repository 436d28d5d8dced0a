"""Issue 37, the way it was found: the bundled sample has two refusals (lighthouse-1, warranty-1).
Through the real CLI (the fake model: scores are arbitrary, refusals are found by their wording), a
refusal counts in the verdict shares and nowhere else: not in the summary's mean, not in a
``--fail-under`` mean, not as a failing JUnit row, and the report lists it apart. ``--gate-refusals``
puts it back. A resume with other bands re-reads every verdict and scores nothing again."""

from __future__ import annotations

import base64
import gzip
import json
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from ragsense.cli import main
from ragsense.consens import Bands
from ragsense.runs import RunStore, compare_runs

REFUSALS = {"lighthouse-1", "warranty-1"}


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _junit_failures(path: Path) -> dict[str, bool]:
    suite = next(s for s in ET.parse(path).getroot() if s.get("name") == "ragsense.rows")
    return {case.get("name", "")[4:]: case.find("failure") is not None for case in suite}


def _embedded_rows(page: str) -> list[Any]:
    """The report's embedded rows, decoded as the page's script does."""
    match = re.search(r'id="ragsense-rows"(?: data-encoding="([a-z0-9-]+)")?>(.*?)</script>', page, re.S)
    assert match is not None
    text = match.group(2)
    if match.group(1) == "gzip-base64":
        text = gzip.decompress(base64.b64decode(text)).decode("utf-8")
    return list(json.loads(text))


def _evaluate(tmp_path: Path, *extra: str) -> int:
    store = str(tmp_path / "runs.sqlite")
    return main(["evaluate", "--sample", "--model", "fake", "--store", store, "--table", "never", *extra])


def test_a_refusal_is_left_out_of_means_and_row_gates_and_counted_in_shares(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, ci = tmp_path / "out.jsonl", tmp_path / "ci.xml"
    gates = ["--fail-under", "consens=0.5", "--junit", str(ci), "--junit-rows"]
    code = _evaluate(tmp_path, "-o", str(out), *gates, "--tag", "a")
    err = capsys.readouterr().err
    rows = _rows(out)
    assert {r["id"] for r in rows if r["verdict"] == "refusal"} == REFUSALS
    assert all(r["consens"] < 0.5 for r in rows if r["id"] in REFUSALS)
    # The summary's mean and the gate's mean are over the eight answers, not the ten rows.
    answers = [r["consens"] for r in rows if r["id"] not in REFUSALS]
    mean = math.fsum(answers) / len(answers)
    stored = RunStore(tmp_path / "runs.sqlite").get("a").summary["metrics"]["consens"]
    assert stored["scores"]["consens"]["n"] == 8 and stored["scores"]["consens"]["mean"] == pytest.approx(
        mean
    )
    assert stored["refusals"] == 2 and stored["verdict_shares"]["refusal"]["count"] == 2
    assert f"mean consens {mean:+.4f}" in err and "over 8 rows" in err
    assert "2 refusal(s) left out of the means" in err
    assert code == 4  # the mean of the eight answers is under 0.5: the gate itself still fails
    # Row by row, a refusal passes its score floor; the answers under it fail.
    failures = _junit_failures(ci)
    below = {r["id"] for r in rows if r["id"] not in REFUSALS and r["consens"] < 0.5}
    assert {k for k, failed in failures.items() if failed} == below
    assert not any(failures[k] for k in REFUSALS)
    # The report lists them apart (marked rows, their own section), not among the worst.
    html = tmp_path / "report.html"
    assert main(["report", "a", "--store", str(tmp_path / "runs.sqlite"), "-o", str(html)]) == 0
    page = html.read_text(encoding="utf-8")
    assert {entry[0] for entry in _embedded_rows(page) if entry[1].get("rf")} == REFUSALS
    assert '<section id="refusals"' in page


def test_gate_refusals_holds_them_to_the_floor_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ci = tmp_path / "ci.xml"
    gates = ["--fail-under", "consens=0.5", "--junit", str(ci), "--junit-rows", "--gate-refusals"]
    assert _evaluate(tmp_path, *gates) == 4
    assert "over 10 rows" in capsys.readouterr().err
    failures = _junit_failures(ci)
    assert all(failures[k] for k in REFUSALS)


def test_a_resume_with_other_bands_rereads_every_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, bands = tmp_path / "scored.jsonl", tmp_path / "bands.json"
    assert _evaluate(tmp_path, "-o", str(out), "--tag", "old") == 0
    before = _rows(out)
    # Bands under which every answer of the fake model is grounded.
    Bands("support", grounded_at=-0.9, ungrounded_below=-0.95, origin="test").save(bands)
    capsys.readouterr()
    assert _evaluate(tmp_path, "-o", str(out), "--resume", "--bands", str(bands), "--tag", "new") == 0
    assert "10 resumed" in capsys.readouterr().err  # nothing scored again
    after = _rows(out)  # the file says what the run returned
    assert [r["consens"] for r in after] == [r["consens"] for r in before]
    expected = {r["id"]: "refusal" if r["id"] in REFUSALS else "grounded" for r in before}
    assert {r["id"]: r["verdict"] for r in after} == expected
    store = RunStore(tmp_path / "runs.sqlite")
    new = store.get("new")
    assert [r["verdict"] for r in store.rows(new.id)] == [r["verdict"] for r in after]
    changed = sum(a["verdict"] != b["verdict"] for a, b in zip(before, after, strict=True))
    # Every row whose old verdict is not the new bands' one changed (most of the eight non-refusals).
    assert changed == sum(b["verdict"] != expected[b["id"]] for b in before) and changed >= 6
    [verdicts] = compare_runs(store, "old", "new").verdicts
    assert verdicts.n_changed == changed


def test_a_resume_under_another_aggregation_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "scored.jsonl"
    assert _evaluate(tmp_path, "-o", str(out)) == 0
    capsys.readouterr()
    assert _evaluate(tmp_path, "-o", str(out), "--resume", "--aggregation", "q25") == 2
    assert "scored with" in capsys.readouterr().err
