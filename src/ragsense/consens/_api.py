"""The one-call API: ``ragsense.consens`` and ``ragsense.grounding_batch``."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from ragsense._async import run_sync
from ragsense.consens._math import Aggregation
from ragsense.consens._prompt import PromptTemplate
from ragsense.consens._scorer import DEFAULT_AGGREGATION, GroundingResult, GroundingScorer
from ragsense.data import RagRow, RowError, parse_rows
from ragsense.errors import InputError
from ragsense.models import DEFAULT_MODEL, LanguageModel, load_model

T = TypeVar("T")
_MODELS: dict[str, LanguageModel] = {}
_LOCK = threading.Lock()


def get_model(model: str | LanguageModel) -> LanguageModel:
    """A model object for ``model``; names are loaded once per process and reused."""
    if not isinstance(model, str):
        return model
    with _LOCK:
        if model not in _MODELS:
            _MODELS[model] = load_model(model)
        return _MODELS[model]


def grounding(
    question: str,
    contexts: str | Sequence[str],
    answer: str,
    *,
    model: str | LanguageModel = DEFAULT_MODEL,
    attribution: bool = False,
    aggregation: Aggregation | str = DEFAULT_AGGREGATION,
    template: PromptTemplate | None = None,
) -> GroundingResult:
    """ConSens grounding score of ``answer`` to ``question`` given ``contexts`` (a string or documents).

    Raises :class:`~ragsense.errors.InputError` for unusable input.

    >>> r = grounding("Where is the Eiffel Tower?", "The Eiffel Tower stands in Paris, France.",
    ...               "It stands in Paris, France.", model="fake")
    >>> r.consens > 0
    True
    """
    docs = [contexts] if isinstance(contexts, str) else list(contexts)
    scorer = GroundingScorer(get_model(model), template=template, aggregation=aggregation)
    [result] = run_sync(scorer.score([(question, docs, answer)], attribution=attribution))
    if isinstance(result, InputError):
        raise result
    assert isinstance(result, GroundingResult)
    return result


def grounding_batch(
    rows: Iterable[RagRow | Mapping[str, Any]],
    *,
    model: str | LanguageModel = DEFAULT_MODEL,
    attribution: bool = False,
    aggregation: Aggregation | str = DEFAULT_AGGREGATION,
    template: PromptTemplate | None = None,
    batch_size: int = 16,
) -> list[GroundingResult | InputError]:
    """Score many rows (``RagRow`` objects or dicts with the usual or RAGAS field names).

    One result per row, in order: a :class:`GroundingResult`, or the :class:`InputError` that names the
    row and field of a row that could not be scored. Good rows are never lost to a bad one.

    >>> out = grounding_batch([{"question": "Q?", "context": "Cats purr.", "answer": "Cats purr."},
    ...                        {"question": "Q?", "context": "Cats purr.", "answer": ""}], model="fake")
    >>> [type(o).__name__ for o in out]
    ['GroundingResult', 'InputError']
    """
    items: list[RagRow | InputError] = []
    raw: list[Mapping[str, Any]] = []
    order: list[tuple[str, int]] = []
    for row in rows:
        if isinstance(row, RagRow):
            order.append(("row", len(items)))
            items.append(row)
        else:
            order.append(("raw", len(raw)))
            raw.append(row)
    parsed = list(parse_rows(raw))
    merged: list[RagRow | InputError] = []
    for kind, k in order:
        if kind == "row":
            merged.append(items[k])
        else:
            item = parsed[k]
            merged.append(
                InputError(item.message, row=item.id or item.index, field=item.field)
                if isinstance(item, RowError)
                else item
            )
    scorer = GroundingScorer(get_model(model), template=template, aggregation=aggregation)
    return run_sync(score_rows(scorer, merged, attribution=attribution, batch_size=batch_size))


async def score_rows(
    scorer: GroundingScorer,
    rows: Sequence[RagRow | InputError],
    *,
    attribution: bool,
    batch_size: int,
) -> list[GroundingResult | InputError]:
    """Score parsed rows in fixed batches; errors pass through in place."""
    out: list[GroundingResult | InputError] = []
    for start in range(0, len(rows), batch_size):
        batch = rows[start : start + batch_size]
        good = [r for r in batch if isinstance(r, RagRow)]
        scored = iter(
            await scorer.score([(r.question, r.contexts, r.answer) for r in good], attribution=attribution)
        )
        for r in batch:
            if isinstance(r, InputError):
                out.append(r)
                continue
            res = next(scored)
            out.append(
                InputError(res.reason, row=r.id, field=res.field) if isinstance(res, InputError) else res
            )
    return out
