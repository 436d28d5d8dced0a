"""The one scoring path of every framework evaluator: rows -> ``ragsense.evaluate`` -> :class:`Judgement`.

Each ``ragsense.integrations.<framework>`` module only translates its framework's inputs into rows and a
:class:`Judgement` into the framework's own result type; the score itself is always the one
``ragsense.evaluate`` writes for the same row with the same :class:`~ragsense.consens.ConSens` metric.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from ragsense.consens import DEFAULT_AGGREGATION, Aggregation, Bands, ConSens, explain_row, weakest_words
from ragsense.contract import REFUSAL, is_refusal_row
from ragsense.errors import BackendUnavailableError
from ragsense.evaluation import aevaluate, evaluate
from ragsense.models import ModelSpec

WEAKEST = 5
"""How many answer words a judgement's feedback names (those the context helped least)."""
PASSING_VERDICTS = frozenset({"grounded", REFUSAL})
"""Verdicts that pass when no ``min_consens`` is given: a refusal states nothing the context could fail
to support (the one refusal rule, :data:`ragsense.contract.REFUSAL`, as in ``ragsense guard``)."""

# Frameworks' own usage reporting, switched off before they are imported: ragsense runs offline, and
# DeepEval's and Haystack's are on by default (docs/integrations.md lists them).
TELEMETRY_OFF: Mapping[str, str] = {
    "DEEPEVAL_TELEMETRY_OPT_OUT": "1",
    "HAYSTACK_TELEMETRY_ENABLED": "False",
    "RAGAS_DO_NOT_TRACK": "true",
    "LANGSMITH_TRACING": "false",
}


def require(module: str, extra: str) -> ModuleType:
    """Import a framework with its telemetry off, or say which extra installs it.

    >>> require("json", "none").__name__
    'json'
    >>> require("no_such_framework_xyz", "llamaindex")
    Traceback (most recent call last):
    ...
    ragsense.errors.BackendUnavailableError: ... pip install 'ragsense[llamaindex]'
    """
    for name, value in TELEMETRY_OFF.items():
        os.environ.setdefault(name, value)
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise BackendUnavailableError(
            f"this integration needs {module.split('.')[0]!r} ({error}): pip install 'ragsense[{extra}]'"
        ) from error


@dataclass(frozen=True)
class Judgement:
    """One row's ConSens result as a framework evaluator reports it.

    ``score``: the ``consens`` field ``ragsense.evaluate`` wrote (None when the row could not be scored,
    ``error`` then says why, naming the field); ``passing``: the verdict is ``grounded`` or ``refusal``
    (or the score is at least ``min_consens`` when one was given); ``weakest``: the words the context
    helped least; ``feedback``: all of it in one line; ``record``: the whole output row.
    """

    score: float | None
    verdict: str | None
    passing: bool
    weakest: list[dict[str, Any]]
    feedback: str
    record: dict[str, Any] = field(repr=False)
    error: str | None = None


def feedback_of(record: Mapping[str, Any], bands: Bands | None = None, words: int = WEAKEST) -> str:
    """The one-line feedback of a scored row: :func:`ragsense.consens.explain_row`, the words JUnit rows,
    the guard's ``reason`` and ``assert_grounded`` use (verdict, score, the band edge that decided it,
    weakest words with their contrast in nats).

    >>> row = {"consens": -0.5, "verdict": "ungrounded", "words": [
    ...     {"word": "Pasadena", "start": 0, "end": 8, "nll_empty": 1.0, "nll_context": 1.25}]}
    >>> feedback_of(row, Bands("support", grounded_at=0.83, ungrounded_below=-0.23))
    'ungrounded: consens -0.50 (ungrounded < -0.23); weakest words: Pasadena (-0.25)'
    """
    return explain_row(record, bands, words=words)


class Scorer:
    """Scores rows through ``ragsense.evaluate`` with one :class:`~ragsense.consens.ConSens` metric.

    ``model``, ``aggregation`` and ``bands`` are ConSens's; the model is loaded once per process.

    >>> scorer = Scorer(model="fake")
    >>> [j] = scorer.score([{"question": "Where is it?", "contexts": ["It is in Paris."],
    ...                      "answer": "It is in Paris."}])
    >>> j.verdict, j.passing, j.score == j.record["consens"]
    ('grounded', True, True)
    """

    def __init__(
        self,
        model: ModelSpec | None = None,
        *,
        aggregation: Aggregation | str = DEFAULT_AGGREGATION,
        bands: Bands | str | None = None,
        min_consens: float | None = None,
        weakest: int = WEAKEST,
    ) -> None:
        self.metric = ConSens(model, aggregation=aggregation, bands=bands)
        self.min_consens = min_consens
        self.weakest = weakest

    def score(self, rows: Sequence[Mapping[str, Any]], desc: str = "integration") -> list[Judgement]:
        """Score ``rows`` (question, contexts, answer) in one ``evaluate`` call."""
        result = evaluate([dict(r) for r in rows], [self.metric], progress=False, desc=desc)
        return [self.judge(record) for record in result.rows]

    async def ascore(self, rows: Sequence[Mapping[str, Any]], desc: str = "integration") -> list[Judgement]:
        """The async form of :meth:`score`, for frameworks that evaluate on an event loop."""
        result = await aevaluate([dict(r) for r in rows], [self.metric], progress=False, desc=desc)
        return [self.judge(record) for record in result.rows]

    def judge(self, record: Mapping[str, Any]) -> Judgement:
        """One output row as a :class:`Judgement`."""
        score = record.get("consens")
        score = float(score) if isinstance(score, float | int) else None
        verdict = record.get("verdict")
        errors = record.get("errors") or []
        weakest = weakest_words(record.get("words") or [], self.weakest)
        if score is None or errors:
            message = "; ".join(str(e.get("message")) for e in errors) or "not scored"
            return Judgement(None, verdict, False, weakest, f"not scored: {message}", dict(record), message)
        if self.min_consens is None:
            passing = verdict in PASSING_VERDICTS
        else:
            passing = is_refusal_row(record) or score >= self.min_consens
        feedback = feedback_of(record, self.metric.bands, self.weakest)
        return Judgement(score, verdict, passing, weakest, feedback, dict(record))


def row(question: str | None, contexts: Sequence[str] | str | None, answer: str | None) -> dict[str, Any]:
    """A ragsense row from a framework's three inputs (a missing one is left for ``evaluate`` to report).

    >>> row("Q?", "one document", "A.")
    {'question': 'Q?', 'contexts': ['one document'], 'answer': 'A.'}
    """
    docs = [contexts] if isinstance(contexts, str) else list(contexts or [])
    return {"question": question, "contexts": docs, "answer": answer}
