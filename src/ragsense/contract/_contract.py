"""The one ``Metric`` contract every method implements, and the records a run is made of.

A metric is an object with its options. The runner asks it three things:

* what it needs (:class:`Needs`): row fields that must be present and non-empty (``answer``,
  ``reference``, ...), checked per row before the metric sees the row, so a row that lacks a field one
  metric needs is still scored by the others;
* to set itself up once per run from a :class:`~ragsense.models.ModelPool` (models are loaded once per
  process, whoever asks), checking the model capabilities it needs there;
* to score a batch of rows: ``await metric.score(rows)`` returns, per row and in order, a mapping of
  its output fields or the exception that marks that row.

Output fields are flat, stable names listed in :attr:`Metric.fields` (docs/metrics.md has the table);
``scores`` names the numeric fields a summary averages and ``verdict`` the categorical one it counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ragsense.data import RagRow
from ragsense.errors import InputError
from ragsense.models import ModelPool

ROW_FIELDS = ("question", "contexts", "answer", "reference")
INPUT = "input"
"""The ``metric`` of an error that no metric caused: the row itself could not be read."""

REFUSAL = "refusal"
"""The verdict of an answer that declines to answer from its context ("the documents do not say").

**The one refusal rule** (docs/metrics.md, "Refusals"), which every consumer follows through
:func:`is_refusal_row`: a refusal is its own class. It is counted in the verdict shares (so
``--max-share refusal=0.1`` gates how often the system declines) but states nothing the context could
fail to support, so its score says nothing about grounding: it is left out of every score mean (the
summary, ``--fail-under``, the report's means) and passes every per-row score threshold (JUnit rows,
the guard's ``passed``, ``assert_grounded``, the framework evaluators), unless the user asks to gate
refusals too (``--gate-refusals``, ``gate_refusals=True``). The report lists refusals in their own table,
not among the worst rows."""


def is_refusal_row(row: Mapping[str, Any], verdict_fields: Sequence[str] = ("verdict",)) -> bool:
    """Whether ``row`` is a refusal: one of its ``verdict_fields`` is :data:`REFUSAL`.

    >>> is_refusal_row({"consens": -0.61, "verdict": "refusal"}), is_refusal_row({"verdict": "unsure"})
    (True, False)
    """
    return any(row.get(f) == REFUSAL for f in verdict_fields)


@dataclass(frozen=True)
class Needs:
    """What a metric needs from each row (a subset of :data:`ROW_FIELDS`; question and contexts are
    always checked when rows are read).

    >>> Needs(fields=("answer", "reference")).missing(
    ...     RagRow(id="1", question="Q?", contexts=["C."], answer="A."))
    'reference'
    """

    fields: tuple[str, ...] = ("question", "contexts", "answer")

    def missing(self, row: Any) -> str | None:
        """The first needed field the row lacks (absent or blank), or None."""
        for name in self.fields:
            value = getattr(row, name, None)
            if value is None or (isinstance(value, str) and not value.strip()):
                return name
        return None


@runtime_checkable
class RunItem(Protocol):
    """What the runner needs of an input item: an id (None when it has none) and its fields to keep
    in the output. :class:`~ragsense.data.RagRow` and :class:`~ragsense.data.RowError` are items; so
    are the kinship benchmark's questions."""

    @property
    def id(self) -> str | None: ...

    def to_record(self) -> dict[str, Any]: ...


@runtime_checkable
class Step(Protocol):
    """What the runner calls: a :class:`Metric` without setup, over any kind of item. Metrics are
    steps over :class:`~ragsense.data.RagRow`; a benchmark can run its own steps on the same runner."""

    @property
    def name(self) -> str: ...

    @property
    def needs(self) -> Needs: ...

    @property
    def fields(self) -> tuple[str, ...]: ...

    async def score(self, rows: Sequence[Any]) -> Sequence[Mapping[str, Any] | Exception]: ...


@runtime_checkable
class Metric(Step, Protocol):
    """A :class:`Step` over :class:`~ragsense.data.RagRow` that evaluates: built-ins and plug-ins alike.

    ``name``: the metric's name in ``--metrics`` and in error records. ``fields``: every output field,
    in order. ``scores``: numeric fields summarised as a mean with its 95% interval. ``verdict``: the
    categorical field whose values are counted (or None).
    """

    # Read-only members (a plain class attribute satisfies them).
    @property
    def scores(self) -> tuple[str, ...]: ...

    @property
    def verdict(self) -> str | None: ...

    def settings(self) -> dict[str, Any]:
        """The options that decide its output (JSON-ready): recorded with a run."""
        ...

    async def setup(self, pool: ModelPool) -> None:
        """Load or fetch what it needs (from ``pool``) and check model capabilities. Called once."""
        ...

    async def score(self, rows: Sequence[RagRow]) -> Sequence[Mapping[str, Any] | Exception]:
        """One result per row, in order: its output fields, or the exception that marks the row."""
        ...

    async def aclose(self) -> None:
        """Release what :meth:`setup` opened that the pool does not own (judge caches, files)."""
        ...


REDERIVE_HOOK = "rederive"
"""The optional capability a metric may add: ``rederive(record, row) -> {field: value}``, the fields of
a finished ``record`` that follow from its stored values and the metric's current settings without a
model (ConSens: the verdict from the stored score under the current bands and refusal rule). A resumed
run calls it on every row it takes from the earlier output, so a resume with other bands gives the
verdicts a fresh run would, and scores nothing again."""


@dataclass(frozen=True)
class ErrorRecord:
    """Why one metric could not score one row. ``metric`` is :data:`INPUT` for an unreadable row.

    >>> ErrorRecord("consens", "answer", "the answer is empty").to_dict()
    {'metric': 'consens', 'field': 'answer', 'message': 'the answer is empty'}
    """

    metric: str
    field: str | None
    message: str

    @classmethod
    def from_exception(cls, metric: str, exc: BaseException) -> ErrorRecord:
        """An input error keeps its field and reason; anything else is a model or metric failure."""
        if isinstance(exc, InputError):
            return cls(metric, exc.field, exc.reason)
        return cls(metric, None, f"{type(exc).__name__}: {exc}")

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "field": self.field, "message": self.message}


@dataclass
class RowOutcome:
    """One row after every metric: its input record, each metric's fields, and the errors."""

    index: int
    record: dict[str, Any]
    fields: dict[str, Any] = field(default_factory=dict)
    errors: list[ErrorRecord] = field(default_factory=list)

    def to_record(self) -> dict[str, Any]:
        """Input fields, then metric fields (a metric field replaces an input field of the same name),
        then ``errors`` (always a list) and ``_row``: the row's 0-based position in the input."""
        return {
            **self.record,
            **self.fields,
            "errors": [e.to_dict() for e in self.errors],
            "_row": self.index,
        }
