"""The guard passes a refusal: it states nothing the documents could fail to support."""

from __future__ import annotations

from ragsense.guard import check

CONTEXTS = ["The Harrowby lighthouse was built in 1872 from local granite and is 24 metres tall."]


def test_a_refusal_passes_and_an_invented_answer_does_not() -> None:
    refusal = check(
        "What colours is the lighthouse painted?",
        CONTEXTS,
        "The documents do not say what colours the lighthouse is painted.",
        model="fake",
    )
    invented = check(
        "What colours is the lighthouse painted?",
        CONTEXTS,
        "It is painted red and white stripes.",
        model="fake",
    )
    assert refusal["verdict"] == "refusal" and refusal["refusal"] is True
    assert refusal["consens"] < refusal["min_consens"]  # its score alone would have blocked it
    assert refusal["passed"] is True
    assert invented["verdict"] != "refusal" and invented["passed"] is False
