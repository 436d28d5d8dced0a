"""CI gates on a run: verdict shares that must stay under a ceiling, score means that must reach a
floor, and a JUnit XML file for CI systems.

``--max-share ungrounded=0,errors=0`` makes one :class:`Gate` per verdict value: its share among the
rows that have the verdict must be at most the value (the name ``errors`` is the share of rows with
any error). This is the gate to use: it counts the rows that fail. ``--fail-under consens=0.1`` makes
one per score: its mean over the rows its metric scored must be at least the value. A mean can clear
its floor while most rows are bad, since a few high scores make up for them: with five rows scoring
0.95, 0.9, -0.25, -0.3 and -0.35 the mean is +0.19, over the 0.1 floor, and three of the five are
``ungrounded``. A gate with no row to judge fails: an empty run proves nothing.

Refusals follow the one refusal rule (:data:`ragsense.contract.REFUSAL`, docs/metrics.md): a
``--max-share`` gate counts them like any verdict (``--max-share refusal=0.1`` caps them), while a
``--fail-under`` mean leaves them out and a JUnit row that is a refusal passes its score floor, unless
``gate_refusals`` (``--gate-refusals``) asks to judge their scores too.

Each result carries a 95% interval, so a gate passed on five rows reads as what it is: a verdict
share's Wilson interval (``0 of 5 ungrounded`` is ``0% [0%, 43%]``), a mean's bootstrap interval.
The gate itself compares the observed share or mean with its limit.

>>> gates = parse_gates(fail_under="consens=0.1", max_share="ungrounded=0")
>>> rows = [{"consens": c, "verdict": v, "errors": []} for c, v in
...         [(0.95, "grounded"), (0.9, "grounded"), (-0.25, "ungrounded"), (-0.3, "ungrounded"),
...          (-0.35, "ungrounded")]]
>>> for r in check_gates(gates, rows, verdict_fields=["verdict"]):
...     print("passed" if r.passed else "FAILED", r.message)
passed mean consens +0.1900 [-0.3100, +0.6900] over 5 rows >= 0.1
FAILED share ungrounded 60% [23%, 88%] (3 of 5) > 0% (95% Wilson interval)
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ragsense.consens import Bands, explain_row
from ragsense.contract import is_refusal_row
from ragsense.data import write_output
from ragsense.errors import RagsenseError
from ragsense.runs._compare import score_value as _number
from ragsense.stats import format_share, mean_ci, share_ci

EXIT_GATE_FAILED = 4
"""The exit code of ``ragsense evaluate`` when a gate fails (after every result is written)."""

ERRORS = "errors"
"""The ``--max-share`` name for the share of rows with any error."""


EXAMPLES = {"mean": "consens=0.5", "share": "ungrounded=0.05 (or ungrounded=5%)"}
"""The example each flag's error shows: a score for a mean, a verdict for a share."""


class GateSpecError(RagsenseError, ValueError):
    """A ``--fail-under``/``--max-share`` value that cannot be read, or names nothing in the run."""


@dataclass(frozen=True)
class Gate:
    """``kind="mean"``: the mean of score ``name`` must be >= ``limit``; ``kind="share"``: the share
    of rows with verdict ``name`` (or with errors) must be <= ``limit``."""

    kind: Literal["mean", "share"]
    name: str
    limit: float

    def describe(self) -> str:
        if self.kind == "mean":
            return f"mean {self.name} >= {self.limit:g}"
        return f"share {self.name} <= {self.limit:g}"


@dataclass(frozen=True)
class GateResult:
    """How a gate went: the observed mean or share (``value``) over ``n`` rows, its 95% interval
    (``ci95``: bootstrap for a mean, Wilson for a share; None when no row was judged), and the message
    printed and written to JUnit."""

    gate: Gate
    passed: bool
    value: float | None
    n: int
    message: str
    ci95: tuple[float, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "gate": self.gate.describe(),
            "kind": self.gate.kind,
            "name": self.gate.name,
            "limit": self.gate.limit,
            "passed": self.passed,
            "value": self.value,
            "ci95": None if self.ci95 is None else list(self.ci95),
            "n": self.n,
            "message": self.message,
        }


def _parse(spec: str | None, kind: Literal["mean", "share"], flag: str) -> list[Gate]:
    gates: list[Gate] = []
    for part in (spec or "").split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, value = part.partition("=")
        value = value.strip()
        # A share is what users write as a percentage: `ungrounded=5%` is 0.05.
        percent = kind == "share" and value.endswith("%")
        try:
            limit = float(value[:-1]) / 100 if percent else float(value)
        except ValueError:
            limit = float("nan")
        if not sep or not name.strip() or limit != limit or limit in (float("inf"), float("-inf")):
            raise GateSpecError(f"{flag} {part!r}: write NAME=NUMBER, e.g. {flag} {EXAMPLES[kind]}")
        if kind == "share" and not 0.0 <= limit <= 1.0:
            raise GateSpecError(f"{flag} {part!r}: a share is between 0 and 1 (or 0% and 100%)")
        gates.append(Gate(kind, name.strip(), limit))
    return gates


def parse_gates(fail_under: str | None = None, max_share: str | None = None) -> list[Gate]:
    """The gates of ``--fail-under`` and ``--max-share`` (comma-separated ``NAME=NUMBER``; a share may
    be a percentage).

    >>> parse_gates(max_share="ungrounded=5%")[0].limit
    0.05
    >>> parse_gates(max_share="ungrounded=five")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ragsense.runs._gates.GateSpecError: --max-share 'ungrounded=five': ... e.g. --max-share ungrounded=0.05...
    """
    return _parse(fail_under, "mean", "--fail-under") + _parse(max_share, "share", "--max-share")


def check_gate_names(gates: Sequence[Gate], scores: Sequence[str], verdict_values: Sequence[str]) -> None:
    """Refuse, before a run starts, a gate on a score no chosen metric has. Verdict values are only
    checked when the metrics declare them (``verdict_values``), since a plug-in may not."""
    for gate in gates:
        if gate.kind == "mean" and gate.name not in scores:
            raise GateSpecError(
                f"--fail-under {gate.name}: no chosen metric has that score; scores: {', '.join(scores)}"
            )
        if gate.kind == "share" and verdict_values and gate.name not in (*verdict_values, ERRORS):
            raise GateSpecError(
                f"--max-share {gate.name}: not a verdict of the chosen metrics; verdicts: "
                f"{', '.join([*verdict_values, ERRORS])}"
            )


def _has_errors(row: Mapping[str, Any]) -> bool:
    return bool(row.get("errors")) or row.get("error") is not None


def _score_judged(row: Mapping[str, Any], verdict_fields: Sequence[str], gate_refusals: bool) -> bool:
    """Whether a score gate judges this row's scores: every row but a refusal, unless refusals are gated."""
    return gate_refusals or not is_refusal_row(row, verdict_fields)


def check_gates(
    gates: Sequence[Gate],
    rows: Sequence[Mapping[str, Any]],
    *,
    verdict_fields: Sequence[str],
    gate_refusals: bool = False,
) -> list[GateResult]:
    """Judge each gate on the run's rows; a mean leaves refusals out unless ``gate_refusals``.

    >>> rows = [{"consens": 0.9, "verdict": "grounded"}, {"consens": -0.61, "verdict": "refusal"}]
    >>> [r.value for r in check_gates([Gate("mean", "consens", 0.5)], rows, verdict_fields=["verdict"])]
    [0.9]
    """
    results: list[GateResult] = []
    for gate in gates:
        if gate.kind == "mean":
            values = [
                v
                for r in rows
                if (v := _number(r.get(gate.name))) is not None
                and _score_judged(r, verdict_fields, gate_refusals)
            ]
            if not values:
                results.append(GateResult(gate, False, None, 0, f"no row has a {gate.name} score"))
                continue
            mean, low, high = mean_ci(values)
            passed = mean >= gate.limit
            results.append(
                GateResult(
                    gate,
                    passed,
                    mean,
                    len(values),
                    f"mean {gate.name} {mean:+.4f} [{low:+.4f}, {high:+.4f}] over {len(values)} rows "
                    f"{'>=' if passed else '<'} {gate.limit:g}",
                    (low, high),
                )
            )
            continue
        if gate.name == ERRORS:
            judged = list(rows)
            hits = sum(_has_errors(r) for r in judged)
        else:
            judged = [r for r in rows if any(r.get(f) is not None for f in verdict_fields)]
            hits = sum(any(str(r.get(f)) == gate.name for f in verdict_fields) for r in judged)
        if not judged:
            results.append(GateResult(gate, False, None, 0, f"no row has a verdict to count {gate.name}"))
            continue
        share = share_ci(hits, len(judged))
        passed = share["share"] <= gate.limit
        results.append(
            GateResult(
                gate,
                passed,
                share["share"],
                len(judged),
                f"share {gate.name} {format_share(share)} {'<=' if passed else '>'} {gate.limit * 100:g}% "
                "(95% Wilson interval)",
                (share["low"], share["high"]),
            )
        )
    return results


def row_failures(
    row: Mapping[str, Any],
    gates: Sequence[Gate],
    verdict_fields: Sequence[str],
    *,
    gate_refusals: bool = False,
) -> list[str]:
    """Why one row fails the gates taken row by row (a score under its floor, a gated verdict, an
    error); empty when it passes. A refusal's score is not held to a floor unless ``gate_refusals``.

    >>> gates = parse_gates(fail_under="consens=0.5")
    >>> row_failures({"consens": -0.61, "verdict": "refusal", "errors": []}, gates, ["verdict"])
    []
    >>> row_failures({"consens": -0.61, "verdict": "refusal", "errors": []}, gates, ["verdict"],
    ...              gate_refusals=True)
    ['consens -0.6100 < 0.5']
    """
    reasons = [
        ": ".join(str(x) for x in (e.get("metric"), e.get("field"), e.get("message")) if x)
        for e in row.get("errors") or []
    ]
    judged = _score_judged(row, verdict_fields, gate_refusals)
    for gate in gates:
        if gate.kind == "mean" and not judged:
            continue
        if gate.kind == "mean":
            value = _number(row.get(gate.name))
            if value is not None and value < gate.limit:
                reasons.append(f"{gate.name} {value:.4f} < {gate.limit:g}")
        elif gate.name != ERRORS:
            reasons.extend(f"{f} is {gate.name}" for f in verdict_fields if str(row.get(f)) == gate.name)
    return reasons


_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: str) -> str:
    """XML 1.0 cannot hold control characters: a row id or message with one would break the file."""
    return _NOT_XML.sub("\ufffd", text)


def write_junit(
    path: str | os.PathLike[str],
    results: Sequence[GateResult],
    *,
    rows: Sequence[Mapping[str, Any]] | None = None,
    gates: Sequence[Gate] = (),
    verdict_fields: Sequence[str] = (),
    run_id: str | None = None,
    gate_refusals: bool = False,
    overwrite: bool = False,
    bands: Bands | None = None,
) -> Path:
    """A JUnit XML file: a ``ragsense.gates`` suite with one test case per gate, and with ``rows`` a
    ``ragsense.rows`` suite with one test case per row (failing as :func:`row_failures` says, each
    failure followed by the row's score and weakest words, :func:`ragsense.consens.explain_row` under
    ``bands``). An existing file is refused unless ``overwrite`` (:func:`ragsense.data.write_output`)."""
    root = ET.Element("testsuites", name="ragsense")
    suite = ET.SubElement(
        root,
        "testsuite",
        name="ragsense.gates",
        tests=str(len(results)),
        failures=str(sum(not r.passed for r in results)),
        errors="0",
    )
    if run_id:
        properties = ET.SubElement(suite, "properties")
        ET.SubElement(properties, "property", name="run_id", value=run_id)
    for result in results:
        case = ET.SubElement(suite, "testcase", classname="ragsense.gates", name=result.gate.describe())
        if not result.passed:
            ET.SubElement(case, "failure", message=_xml(result.message), type="GateFailed").text = _xml(
                result.message
            )
        else:
            ET.SubElement(case, "system-out").text = _xml(result.message)
    if rows is not None:
        failing = [row_failures(r, gates, verdict_fields, gate_refusals=gate_refusals) for r in rows]
        row_suite = ET.SubElement(
            root,
            "testsuite",
            name="ragsense.rows",
            tests=str(len(rows)),
            failures=str(sum(bool(f) for f in failing)),
            errors="0",
        )
        for index, (row, reasons) in enumerate(zip(rows, failing, strict=True)):
            name = _xml(f"row {row.get('id', row.get('_row', index))}")
            case = ET.SubElement(row_suite, "testcase", classname="ragsense.rows", name=name)
            if reasons:
                # "verdict is unsure" alone sends the reader to the output file: say what the score was
                # and which words the context did not support.
                told = [*reasons, explain_row(row, bands)] if "consens" in row else reasons
                ET.SubElement(case, "failure", message=_xml("; ".join(told)), type="RowFailed").text = _xml(
                    "\n".join(told)
                )
    data = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return write_output(path, data, overwrite=overwrite, what="JUnit file")
