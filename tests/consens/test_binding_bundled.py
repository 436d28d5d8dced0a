"""The binding check on the bundled SmolLM2-135M (marked `model`; part of the default suite): recombined
answers of the issue-46 trial kind are kept out of `grounded` with a reason that names the rebinding,
and their right answers stay `grounded`. The full hand-written set (33 recombined rows and their
paraphrase twins, every span kind) is scored by ``python -m papers.consens.binding_check score --sets
hand`` and reported in docs/results.md, misses included."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from benchmarks.compare_binding_rows import compare, load_rows
from papers.consens.binding_check import LOOSEST_8, hand_rows

from ragsense import evaluate
from ragsense.consens import DEFAULT_BINDING, ConSens, GroundingScorer, binding_reasons
from ragsense.models import SupportsGroupScoring

pytestmark = pytest.mark.model

HANDBOOK = (
    "Northwind Ltd was founded in 2009 by Maria Lopez, who serves as chief executive, and Tom Becker, who "
    "is the chair of the board. The Berlin office opened in 2012 and the Lisbon office opened in 2016. "
    "Sick pay is paid from the fourth consecutive day of illness. The second office to open was Lisbon."
)
BRIDGE = "Work on the bridge began in 1931 and it was completed in 1937."
CASES = [
    (
        HANDBOOK,
        "Who is the chief executive?",
        "Maria Lopez is the chief executive and Tom Becker chairs the board.",
        "Tom Becker is the chief executive and Maria Lopez chairs the board.",
        "'Tom Becker' and 'Maria Lopez' swapped",
    ),
    (
        HANDBOOK,
        "When is sick pay paid?",
        "Sick pay is paid from the fourth consecutive day of illness.",
        "Sick pay is paid from the second consecutive day of illness.",
        "prefers 'fourth' to 'second'",
    ),
    (
        BRIDGE,
        "When was the bridge completed?",
        "The bridge was completed in 1937.",
        "The bridge was completed in 1931.",
        "prefers '1937' to '1931'",
    ),
]


def test_recombined_answers_are_not_grounded_and_say_why(smollm2) -> None:  # type: ignore[no-untyped-def]
    rows = [
        {"id": f"{k}-{tag}", "question": q, "contexts": [context], "answer": a}
        for k, (context, q, right, wrong, _) in enumerate(CASES)
        for tag, a in (("right", right), ("wrong", wrong))
    ]
    run = evaluate(rows, [ConSens(smollm2, binding=True)], progress=False)
    by_id = {r["id"]: r for r in run.rows}
    for k, (*_, reason) in enumerate(CASES):
        right, wrong = by_id[f"{k}-right"], by_id[f"{k}-wrong"]
        assert right["verdict"] == "grounded" and right["binding"] == [], right
        assert wrong["verdict"] == "ungrounded", wrong
        finding = wrong["binding"][0]
        assert finding["misbound"] and finding["margin"] > 1.0 and finding["lift"] >= 1.0
        assert reason in binding_reasons(wrong)[0]
    # Without the check (the default: docs/results.md), the blind spot: every word stated, +1.00 grounded.
    wrong_rows = [r for r in rows if r["id"].endswith("wrong")]
    off = evaluate(wrong_rows, [ConSens(smollm2)], progress=False)
    assert all(r["verdict"] == "grounded" and r["consens"] == 1.0 and r["binding"] is None for r in off.rows)


class _OneRequestAtATime:
    """The bundled model behind ``score`` only (no ``score_groups``): the route every backend without
    group scoring takes, each variant and each original stretch its own request."""

    def __init__(self, model) -> None:  # type: ignore[no-untyped-def]
        self._model = model
        self.info = model.info

    async def score(self, requests):  # type: ignore[no-untyped-def]
        return await self._model.score(requests)

    def count_tokens(self, text: str) -> int:
        return int(self._model.count_tokens(text))

    async def aclose(self) -> None:
        return None


def test_grouped_and_one_at_a_time_find_the_same(smollm2) -> None:  # type: ignore[no-untyped-def]
    """One pass per row (the variants packed, the answer's stretches read off its own scores) finds what
    scoring every variant and stretch as its own request finds, margins within 1e-3 nats."""
    rows = [(q, [c], a) for c, q, right, wrong, _ in CASES for a in (right, wrong)]
    slow = _OneRequestAtATime(smollm2)
    assert not isinstance(slow, SupportsGroupScoring)
    grouped = asyncio.run(GroundingScorer(smollm2, binding=DEFAULT_BINDING).score(rows))
    alone = asyncio.run(GroundingScorer(slow, binding=DEFAULT_BINDING).score(rows))  # type: ignore[arg-type]
    for g, a in zip(grouped, alone, strict=True):
        assert g.binding_variants == a.binding_variants > 0  # type: ignore[union-attr]
        assert g.verdict == a.verdict  # type: ignore[union-attr]
        assert [(f.original, f.replacement) for f in g.binding] == [  # type: ignore[union-attr]
            (f.original, f.replacement)
            for f in a.binding  # type: ignore[union-attr]
        ]
        for f, h in zip(g.binding, a.binding, strict=True):  # type: ignore[union-attr]
            assert abs(f.margin - h.margin) < 1e-3 and abs(f.lift - h.lift) < 1e-3
        assert abs(g.consens - a.consens) < 1e-3  # type: ignore[union-attr]


def test_the_committed_hand_rows_come_out_of_the_packed_pass(smollm2) -> None:  # type: ignore[no-untyped-def]
    """The first 12 hand-written rows, rescored as their committed per-row file was (the loosest
    8-variant check), give the same findings and verdicts; margins and lifts within 1e-3 nats (the
    file was written by the one-request-at-a-time route: the summation order differs)."""
    rows = hand_rows()[:12]
    records = [
        {"id": r.id, "question": r.question, "contexts": list(r.contexts), "answer": r.answer} for r in rows
    ]
    run = evaluate(records, [ConSens(smollm2, binding=LOOSEST_8)], progress=False)
    after = {rec["id"]: {"id": rec["id"], "result": rec} for rec in run.rows}
    folder = Path(__file__).parents[2] / "docs" / "results" / "consens" / "binding"
    result = compare(load_rows(folder / "binding-hand.jsonl.gz"), after)
    assert result["rows"] == 12 and result["findings_compared"] > 0, json.dumps(result)
    assert result["rows_with_other_findings"] == result["rows_with_other_verdicts"] == 0, json.dumps(result)
    assert result["max_finding_change_nats"] < 1e-3 and result["max_consens_change"] < 1e-3, json.dumps(
        result
    )
