"""What every framework test compares against: ``ragsense.evaluate`` on the same row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragsense import evaluate

REAL_MODEL = "smollm2-135m"
"""The bundled model of each framework's one real-model test."""

DOCUMENTS = [
    "The Eiffel Tower stands on the Champ de Mars in Paris, France.",
    "Gustave Eiffel's company designed and built the tower for the 1889 World's Fair.",
    "The Colosseum is an ancient amphitheatre in the centre of Rome.",
]
QUESTION = "Where does the Eiffel Tower stand?"
ANSWER = "The Eiffel Tower stands on the Champ de Mars in Paris."
WRONG_ANSWER = "It stands in the centre of Berlin, next to the Colosseum."


def expected(question: str | None, contexts: Sequence[str], answer: str | None, model: str) -> dict[str, Any]:
    """The row ``ragsense.evaluate`` writes with the named ConSens metric and its defaults."""
    [record] = evaluate(
        [{"question": question, "contexts": list(contexts), "answer": answer}],
        ["consens"],
        model=model,
        progress=False,
    ).rows
    return record
