"""The learned verdict on the bundled reader (marked `model`): facts the context states, recombined
wrongly, score lower than their right combination, where `support` scores both 1.0. A hand-made check
of the blind spot issue 36 names (who did what; which date goes with which event), not evidence of
accuracy: the figures are in docs/results.md, "A learned verdict (issue 36)"."""

import pytest

from ragsense import evaluate
from ragsense.consens import ConSens

pytestmark = pytest.mark.model

CONTEXT = "The comet was discovered by Pierre Méchain in 1786. Johann Encke computed its orbit in 1819."
WHO = "Who discovered the comet, and who computed its orbit?"
WHEN = "When was the comet discovered?"
PAIRS = [
    (
        WHO,
        "Pierre Méchain discovered the comet in 1786. Johann Encke computed its orbit in 1819.",
        "Johann Encke discovered the comet in 1786. Pierre Méchain computed its orbit in 1819.",
    ),
    (WHEN, "Pierre Méchain discovered the comet in 1786.", "Pierre Méchain discovered the comet in 1819."),
]


def test_a_swapped_relation_scores_lower_than_the_right_one(smollm2) -> None:  # type: ignore[no-untyped-def]
    rows = [
        {"question": q, "contexts": [CONTEXT], "answer": a}
        for q, right, wrong in PAIRS
        for a in (right, wrong)
    ]
    scored = evaluate(rows, [ConSens(smollm2, aggregation="learned")], progress=False).rows
    for right, wrong in zip(scored[0::2], scored[1::2], strict=True):
        # Every word of both answers is stated: lexical support and `support` cannot tell them apart.
        assert right["consens_by_aggregation"]["support"] == wrong["consens_by_aggregation"]["support"] == 1.0
        assert wrong["consens"] < right["consens"]
        assert not any("fitted on" in n for n in right["notes"])  # the reader the weights were fitted on
