"""The one ``Metric`` contract every method implements, and the records a run is made of.

It sits on its own floor, above the model layer (a metric sets itself up from a
:class:`~ragsense.models.ModelPool`) and below the methods, so each method (``consens``, ``vera``,
``correctness``, ``similarity``) can own its metric next to its math while the spine
(:mod:`ragsense.evaluation`) runs them all. :mod:`ragsense.evaluation` re-exports these names for users.

>>> from ragsense.contract import Needs
>>> Needs(("question", "answer")).fields
('question', 'answer')
"""

from ragsense.contract._contract import (
    INPUT,
    REDERIVE_HOOK,
    REFUSAL,
    ROW_FIELDS,
    ErrorRecord,
    Metric,
    Needs,
    RowOutcome,
    RunItem,
    Step,
    is_refusal_row,
)

__all__ = [
    "INPUT",
    "REDERIVE_HOOK",
    "REFUSAL",
    "ROW_FIELDS",
    "ErrorRecord",
    "Metric",
    "Needs",
    "RowOutcome",
    "RunItem",
    "Step",
    "is_refusal_row",
]
