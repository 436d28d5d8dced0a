"""Issue 48, found as a new user finds it: what the CLI shows agrees with itself (a score at a band edge,
attribution's top document, gates, JUnit rows, empty and broken inputs, calibrate, resume), through
``ragsense`` itself on real files with the fake model."""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import ragsense.consens._metric as consens_metric
from ragsense.cli import main
from ragsense.consens import DEFAULT_AGGREGATION, Bands
from ragsense.models import ModelPool
from ragsense.runs import RunStore

AGG = DEFAULT_AGGREGATION.value
DOCS = ["David Baker designs proteins in Seattle.", "The lighthouse was built in 1887 of granite."]
ROWS: list[dict[str, Any]] = [
    {"id": "built", "question": "When was it built?", "contexts": DOCS,
     "answer": "The lighthouse was built in 1887 of granite."},
    {"id": "curie", "question": "When was it built?", "contexts": DOCS,
     "answer": "Marie Curie studied radium in Warsaw."},
    {"id": "refuses", "question": "What colour is it?", "contexts": DOCS,
     "answer": "The documents do not say what colour it is."},
    {"id": "partly", "question": "Who designs proteins?", "contexts": DOCS,
     "answer": "David Baker designs proteins in Warsaw."},
]  # fmt: skip
QUIET = ["--model", "fake", "--no-store"]
SHOWN = re.compile(r"([+-]\d+\.\d+)\s+(grounded|unsure|ungrounded|refusal)\b")


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def score_rows(tmp_path: Path) -> list[dict[str, Any]]:
    """The rows scored once (no store), as ``evaluate -o`` writes them."""
    out = tmp_path / "scored.jsonl"
    src = write_jsonl(tmp_path / "rows.jsonl", ROWS)
    assert main(["evaluate", str(src), *QUIET, "-o", str(out), "--table", "never"]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def edge_on(score: float) -> Bands:
    """Bands with an edge between ``score`` and its two-decimal text, so that two decimals would put it
    in the other band."""
    two = float(f"{score:+.2f}")
    assert two != score
    if two > score:  # the text reads above the edge: unsure; the score is below it, ungrounded
        return Bands(AGG, grounded_at=1.5, ungrounded_below=two, origin="edge test")
    return Bands(AGG, grounded_at=score, ungrounded_below=-1.5, origin="edge test")


def test_a_score_at_a_band_edge_is_shown_with_the_digits_that_decide_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scored = score_rows(tmp_path)
    row = next(
        r for r in scored if r["verdict"] != "refusal" and float(f"{r['consens']:.2f}") != r["consens"]
    )
    bands = edge_on(row["consens"])
    bands.save(tmp_path / "edge.json")
    src = write_jsonl(tmp_path / "in.jsonl", ROWS)
    capsys.readouterr()
    for command in ("evaluate", "grounding"):
        edge = str(tmp_path / "edge.json")
        assert main([command, str(src), *QUIET, "--bands", edge, "--table", "always"]) == 0
        table = capsys.readouterr().out
        shown = {}
        for line in table.splitlines():
            match = SHOWN.search(line)
            if match and line.split()[0] in {r["id"] for r in ROWS}:
                shown[line.split()[0]] = (match.group(1), match.group(2))
        assert set(shown) == {r["id"] for r in ROWS}, table
        for key, (text, verdict) in shown.items():
            # The shown number, read against the exact edges, falls in the band shown beside it.
            if verdict != "refusal":
                assert bands.verdict(float(text)) == verdict, (key, text, verdict)
        text, verdict = shown[row["id"]]
        assert len(text.split(".")[1]) > 2 and verdict == bands.verdict(row["consens"])


def test_runs_show_writes_an_edge_just_above_one_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edge = math.nextafter(1.0, 2.0)
    Bands(AGG, grounded_at=edge, ungrounded_below=-0.5, origin="hand made").save(tmp_path / "b.json")
    store = tmp_path / "runs.sqlite"
    src = write_jsonl(tmp_path / "in.jsonl", ROWS[:1])
    bands = str(tmp_path / "b.json")
    args = ["evaluate", str(src), "--model", "fake", "--store", str(store), "--bands", bands]
    assert main([*args, "--table", "always", "--tag", "edge"]) == 0
    table = capsys.readouterr().out
    assert re.search(r"\+1\.00\s+unsure", table)  # 1.0 is below an edge of 1.0000000000000002
    assert main(["runs", "show", "edge", "--store", str(store)]) == 0
    shown = capsys.readouterr().out
    assert "grounded >= +1.0000000000000002" in shown and ">= +1.000," not in shown


def test_no_top_document_when_no_removal_lowers_the_score_and_one_numbering(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", ROWS[:3])
    out = tmp_path / "out.jsonl"
    assert main(["grounding", str(src), "--attribution", "--model", "fake", "--no-store", "-o", str(out),
                 "--table", "always"]) == 0  # fmt: skip
    table = capsys.readouterr().out
    rows = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    refusal = rows["refuses"]
    assert refusal["verdict"] == "refusal" and all(d["drop"] <= 0 for d in refusal["attribution"])
    assert refusal["top_document"] is None
    assert rows["built"]["top_document"] == 1  # the document it rests on, numbered from 0
    line = next(x for x in table.splitlines() if x.startswith("built"))
    assert "[1] +" in line  # the table's numbering is the field's
    assert "[" not in next(x for x in table.splitlines() if x.startswith("refuses")).split("refusal")[-1]


def test_gates_take_a_percentage_and_name_a_verdict_in_their_example(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", ROWS)
    base = ["evaluate", str(src), "--model", "fake", "--no-store", "--table", "never"]
    assert main([*base, "--max-share", "ungrounded=100%"]) == 0
    assert "share ungrounded" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main([*base, "--max-share", "ungrounded=five"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "e.g. --max-share ungrounded=0.05" in err and "consens=" not in err


def test_junit_row_failures_carry_the_score_and_the_weakest_words(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", ROWS)
    junit = tmp_path / "junit.xml"
    code = main(["evaluate", str(src), "--model", "fake", "--no-store", "--table", "never",
                 "--max-share", "ungrounded=0", "--junit", str(junit), "--junit-rows"])  # fmt: skip
    assert code == 4
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    failure = cases["row curie"].find("failure")
    assert failure is not None
    message = failure.get("message", "")
    assert "verdict is ungrounded" in message and re.search(r"consens -\d\.\d\d", message)
    assert "(ungrounded < " in message and "weakest words: " in message and "Curie" in message


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_an_empty_input_warns_and_exits_2_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    src = tmp_path / f"empty{suffix}"
    src.write_text("" if suffix == ".jsonl" else "question,contexts,answer\n", encoding="utf-8")
    store = tmp_path / "runs.sqlite"
    base = ["evaluate", str(src), "--model", "fake", "--store", str(store)]
    with pytest.raises(SystemExit) as exit_info:
        main(base)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "has no rows" in err and "--allow-empty" in err
    assert not store.exists() or RunStore(store).list() == []
    assert main([*base, "--allow-empty"]) == 0


def test_every_missing_field_is_named_at_once(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "contexts": ["C."]}])
    out = tmp_path / "out.jsonl"
    assert main(["evaluate", str(src), *QUIET, "-o", str(out), "--table", "never"]) == 3
    [row] = map(json.loads, out.read_text().splitlines())
    message = row["errors"][0]["message"]
    assert "'question'" in message and "'answer'" in message


def test_a_broken_json_line_names_its_file_not_standard_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "broken.jsonl"
    src.write_text(json.dumps(ROWS[0]) + "\n{oops\n", encoding="utf-8")
    assert main(["evaluate", str(src), "--model", "fake", "--no-store", "--table", "never"]) == 3
    captured = capsys.readouterr()
    line = next(x for x in (captured.out + captured.err).splitlines() if x.strip().startswith("row 1:"))
    assert str(src) in line and "line 2" in line and ": -:" not in line


def test_calibrate_refuses_bands_that_never_say_grounded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Label 0 rows score low, so an ungrounded edge exists; label 1 rows are mixed with label 0 above.
    rows = [{**ROWS[0], "id": f"n{k}", "consens": -0.9 + k / 100, "label": 0} for k in range(8)]
    rows += [{**ROWS[0], "id": f"m{k}", "consens": 0.5 + k / 100, "label": k % 2} for k in range(8)]
    src = write_jsonl(tmp_path / "labelled.jsonl", rows)
    out = tmp_path / "bands.json"
    assert main(["calibrate", str(src), "-o", str(out), "--min-per-class", "3"]) == 2
    captured = capsys.readouterr()
    assert not out.exists()
    assert "would never say 'grounded'" in captured.err and "label more rows" in captured.err
    # In-sample and cross-validated cells are written the same way, counts included.
    grounded = next(line for line in captured.out.splitlines() if line.startswith("grounded "))
    assert "in-sample precision" in captured.out and "-fold CV precision" in captured.out
    assert "(calls none)" in grounded
    # Each precision cell is "- (N called)" or "P [lo, hi] (correct/called)": never a bare number.
    cells = re.findall(r"- \(\d+ called\)|\d\.\d\d \[\d\.\d\d, \d\.\d\d\] \(\d+/\d+\)", grounded)
    assert len(cells) == 2, grounded


def test_resume_under_new_bands_rederives_verdicts_without_scoring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", ROWS)
    out = tmp_path / "out.jsonl"
    base = ["evaluate", str(src), "--model", "fake", "--no-store", "-o", str(out), "--table", "never"]
    assert main(base) == 0
    before = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    Bands(AGG, grounded_at=1.5, ungrounded_below=1.5, origin="strict").save(tmp_path / "strict.json")

    async def no_scoring(self: Any, rows: Any) -> Any:
        raise AssertionError("a resume under new bands scored a row again")

    def no_model(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a resume that scores nothing loaded a model")

    monkeypatch.setattr(consens_metric.ConSens, "results", no_scoring)
    # Loading the model was most of such a resume's time (18 s for 12 rows with the bundled one).
    monkeypatch.setattr(ModelPool, "get", no_model)
    assert main([*base, "--resume", "--bands", str(tmp_path / "strict.json")]) == 0
    after = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert {k: r["consens"] for k, r in after.items()} == {k: r["consens"] for k, r in before.items()}
    assert {r["verdict"] for r in after.values()} <= {"ungrounded", "refusal"}
    # A row left to score (the output cut short) loads the model as before.
    out.write_text("".join(line + "\n" for line in out.read_text().splitlines()[:-1]), encoding="utf-8")
    capsys.readouterr()
    assert main([*base, "--resume", "--bands", str(tmp_path / "strict.json")]) != 0
    assert "loaded a model" in capsys.readouterr().err
