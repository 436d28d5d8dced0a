"""What the VERA experiments share: their run on ragsense's one runner, and the mean they report.

Both experiments run on ragsense's one runner (:func:`ragsense.evaluation.run_rows`): each question is
an item, the loop body of the experiment is its one step, and the per-item JSONL in ``out`` is the
runner's output. So fixed chunks (``batch_size``) are appended as they finish, ``resume=True``
continues an interrupted run computing exactly what a fresh run computes, and a step call that fails
for a whole chunk is retried item by item so that only the failing items are marked (``errors``).

A record keeps the keys it has always had, which depend on what happened to the item (``error_with``
instead of the ``*_with`` scores, ...): the step lists every key a record can have as its fields and
names the keys one item has in :data:`KEYS`; the shape drops the others. A part of an item that
failed (an ``error_*`` / ``*_error`` key) is also listed in ``errors``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from ragsense.evaluation import ErrorRecord, RowOutcome, RunItem, Step, run_rows
from ragsense.vera import VeraEvaluator

KEYS = "_keys"


def mean(values: list[float | None]) -> float | None:
    """The mean of the values given (None when there are none), to 4 decimals."""
    kept = [v for v in values if v is not None]
    return round(sum(kept) / len(kept), 4) if kept else None


def with_keys(fields: dict[str, Any]) -> dict[str, Any]:
    """An item's fields, naming the keys its record keeps."""
    return {**fields, KEYS: list(fields)}


class KeepKeys:
    """What the vera steps share: the shape that writes their records."""

    name: str
    error_keys: tuple[str, ...]

    def shape(self, outcome: RowOutcome) -> dict[str, Any]:
        """The item's record with only the keys the step gave it; its failed parts listed in ``errors``."""
        present = outcome.fields.pop(KEYS, None) or ()
        outcome.fields = {k: v for k, v in outcome.fields.items() if k in present}
        for key in self.error_keys:
            if key in outcome.fields:
                outcome.errors.append(ErrorRecord(self.name, None, f"{key}: {outcome.fields[key]}"))
        return outcome.to_record()


class VeraStep(Step, Protocol):
    """A vera experiment's step: a runner step with its evaluator and its record shape."""

    @property
    def vera(self) -> VeraEvaluator: ...

    def shape(self, outcome: RowOutcome) -> dict[str, Any]: ...


async def run_steps(
    items: Sequence[RunItem],
    step: VeraStep,
    out: str | None,
    filename: str,
    batch_size: int,
    resume: bool,
) -> list[dict[str, Any]]:
    """The step over every item (chunks of ``batch_size``), its records appended to ``out/filename``."""
    output = None
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        output = Path(out) / filename
    try:
        records, _ = await run_rows(
            items,
            [step],
            output=output,
            chunk_size=batch_size,
            resume=resume,
            overwrite=not resume,
            desc=filename.removesuffix(".jsonl"),
            shape=step.shape,
        )
    finally:
        await step.vera.aclose()
    return records
