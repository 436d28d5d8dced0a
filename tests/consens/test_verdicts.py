"""Verdict bands: the four verdicts, the bands file, and bands through the ConSens metric."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsense.consens import (
    BANDS_FORMAT,
    DEFAULT_AGGREGATION,
    VERDICTS,
    Bands,
    ConSens,
    default_bands,
    verdict,
)
from ragsense.errors import ParameterError
from ragsense.evaluation import evaluate

ROW = {
    "question": "Who designs proteins?",
    "contexts": ["David Baker designs proteins in Seattle."],
    "answer": "David Baker, in Seattle.",
}
REFUSAL = dict(ROW, answer="The documents do not say who designs proteins.")


def test_the_verdicts_and_their_order() -> None:
    assert VERDICTS == ("grounded", "unsure", "ungrounded", "refusal")
    b = default_bands()
    assert b.score == DEFAULT_AGGREGATION.value and b.ungrounded_below <= b.grounded_at
    assert verdict(b.grounded_at) == "grounded"
    assert verdict(b.ungrounded_below - 1e-9) == "ungrounded"


def test_bands_file_round_trip(tmp_path: Path) -> None:
    b = Bands("q25", 0.3, -0.2, origin="calibrated on x.jsonl (40 rows)", fit={"precision": 0.93})
    path = tmp_path / "bands.json"
    b.save(path)
    assert json.loads(path.read_text())["format"] == BANDS_FORMAT
    assert Bands.load(path) == b


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "is not JSON"),
        ("[1, 2]", "expected a JSON object"),
        (
            '{"format": "other", "score": "q25", "grounded_at": 0, "ungrounded_below": 0}',
            "not a ragsense bands",
        ),
        (
            json.dumps({"format": BANDS_FORMAT, "score": "q25", "grounded_at": 0.1}),
            "missing field(s) ungrounded_below",
        ),
        (
            json.dumps({"format": BANDS_FORMAT, "score": "q25", "grounded_at": 0.1, "ungrounded_below": 0.5}),
            "is above grounded_at",
        ),
        (
            json.dumps(
                {"format": BANDS_FORMAT, "score": "q25", "grounded_at": "high", "ungrounded_below": 0}
            ),
            "finite number",
        ),
    ],
)
def test_a_bad_bands_file_is_a_clear_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bands.json"
    path.write_text(content)
    with pytest.raises(ParameterError, match="bands") as info:
        Bands.load(path)
    assert message in str(info.value)


def test_a_missing_bands_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match=r"cannot read bands file .*nope\.json"):
        Bands.load(tmp_path / "nope.json")


def test_bands_of_another_score_are_refused() -> None:
    other = "geometric" if DEFAULT_AGGREGATION.value != "geometric" else "q25"
    with pytest.raises(ParameterError, match=f"fitted on {other} scores"):
        ConSens(model="fake", bands=Bands(other, 0.5, 0.1))


def test_bands_change_the_verdict_and_are_recorded(tmp_path: Path) -> None:
    agg = DEFAULT_AGGREGATION.value
    strict, lenient = Bands(agg, 1.5, 1.4), Bands(agg, -0.999, -0.9995)
    path = tmp_path / "lenient.json"
    lenient.save(path)
    run_strict = evaluate([ROW], [ConSens(model="fake", bands=strict)], progress=False)
    run_lenient = evaluate([ROW], [ConSens(model="fake", bands=str(path))], progress=False)
    assert run_strict.rows[0]["consens"] == run_lenient.rows[0]["consens"]
    assert run_strict.rows[0]["verdict"] == "ungrounded"
    assert run_lenient.rows[0]["verdict"] == "grounded"
    assert ConSens(model="fake", bands=str(path)).settings()["bands"]["grounded_at"] == -0.999


def test_a_refusal_is_its_own_verdict_whatever_the_score() -> None:
    run = evaluate([ROW, REFUSAL], [ConSens(model="fake")], progress=False)
    assert [r["refusal"] for r in run.rows] == [False, True]
    assert run.rows[1]["verdict"] == "refusal"
    assert run.rows[0]["verdict"] != "refusal"


def test_stated_words_are_flagged() -> None:
    run = evaluate([dict(ROW, answer="David Baker, in Pasadena.")], [ConSens(model="fake")], progress=False)
    stated = {w["word"]: w["stated"] for w in run.rows[0]["words"]}
    assert stated.get("Pasadena") is False
    assert all(v for k, v in stated.items() if k != "Pasadena")
