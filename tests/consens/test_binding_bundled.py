"""The binding check on the bundled SmolLM2-135M (marked `model`; part of the default suite): recombined
answers of the issue-46 trial kind are kept out of `grounded` with a reason that names the rebinding,
and their right answers stay `grounded`. The full hand-written set (33 recombined rows and their
paraphrase twins, every span kind) is scored by ``python -m papers.consens.binding_check score --sets
hand`` and reported in docs/results.md, misses included."""

from __future__ import annotations

import pytest

from ragsense import evaluate
from ragsense.consens import ConSens, binding_reasons

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
