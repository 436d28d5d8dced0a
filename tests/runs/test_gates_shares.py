"""Share gates against mean gates on the run that misled users: 3 of 5 rows ``ungrounded``."""

from __future__ import annotations

import doctest
import importlib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ragsense.consens import default_bands
from ragsense.runs import check_gates, parse_gates, write_junit
from ragsense.stats import share_ci

# A mean of +0.19 over five rows, three of them ungrounded: a few high scores carry the mean.
SCORES = [0.95, 0.9, -0.25, -0.3, -0.35]
VERDICTS = ["grounded"] * 2 + ["ungrounded"] * 3
THREE_OF_FIVE = [
    {"id": f"r{i}", "consens": c, "verdict": v, "errors": []}
    for i, (c, v) in enumerate(zip(SCORES, VERDICTS, strict=True))
]
MEAN_FLOOR = 0.1  # a floor their mean clears


def test_the_verdicts_are_those_of_the_default_bands() -> None:
    assert [default_bands().verdict(c) for c in SCORES] == VERDICTS


def test_three_of_five_ungrounded_passes_a_mean_gate_and_fails_the_share_gate() -> None:
    mean_gate, share_gate = check_gates(
        parse_gates(fail_under=f"consens={MEAN_FLOOR}", max_share="ungrounded=0"),
        THREE_OF_FIVE,
        verdict_fields=["verdict"],
    )
    assert mean_gate.passed and mean_gate.value is not None and mean_gate.value > MEAN_FLOOR
    assert not share_gate.passed and share_gate.value == 0.6 and share_gate.n == 5
    assert share_gate.ci95 == (share_ci(3, 5)["low"], share_ci(3, 5)["high"])
    assert share_gate.message == "share ungrounded 60% [23%, 88%] (3 of 5) > 0% (95% Wilson interval)"
    # The mean's interval is a bootstrap one: inside the scores, unlike the t interval it replaced.
    assert mean_gate.ci95 is not None and min(SCORES) <= mean_gate.ci95[0] < mean_gate.value < mean_gate.ci95[
        1
    ] <= max(SCORES)
    assert "[" in mean_gate.message and mean_gate.to_dict()["ci95"] == list(mean_gate.ci95)


def test_share_gate_limits_and_small_runs() -> None:
    grounded = [dict(r, verdict="grounded") for r in THREE_OF_FIVE]
    [clean] = check_gates(parse_gates(max_share="ungrounded=0"), grounded, verdict_fields=["verdict"])
    # Passing on five rows still says how little five rows rule out.
    assert (
        clean.passed and clean.message == "share ungrounded 0% [0%, 43%] (0 of 5) <= 0% (95% Wilson interval)"
    )
    [loose] = check_gates(parse_gates(max_share="ungrounded=0.6"), THREE_OF_FIVE, verdict_fields=["verdict"])
    assert loose.passed and loose.message.endswith("<= 60% (95% Wilson interval)")
    [half] = check_gates(parse_gates(max_share="ungrounded=0.025"), THREE_OF_FIVE, verdict_fields=["verdict"])
    assert "> 2.5% " in half.message  # a limit is printed as given, not rounded
    [empty] = check_gates(parse_gates(max_share="ungrounded=0.5"), [], verdict_fields=["verdict"])
    assert not empty.passed and empty.ci95 is None and empty.value is None


def test_junit_failure_message_has_the_share_interval(tmp_path: Path) -> None:
    gates = parse_gates(max_share="ungrounded=0.2")
    results = check_gates(gates, THREE_OF_FIVE, verdict_fields=["verdict"])
    path = write_junit(
        tmp_path / "gates.xml", results, rows=THREE_OF_FIVE, gates=gates, verdict_fields=["verdict"]
    )
    root = ET.parse(path).getroot()
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None and "60% [23%, 88%] (3 of 5)" in (failure.get("message") or "")
    row_failures = [
        c.get("name")
        for c in root.findall("testsuite[@name='ragsense.rows']/testcase")
        if c.find("failure") is not None
    ]
    assert row_failures == ["row r2", "row r3", "row r4"]


@pytest.mark.parametrize("module", ["ragsense.runs", "ragsense.runs._gates", "ragsense.runs._compare"])
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted >= 1 and result.failed == 0
