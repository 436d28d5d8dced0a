"""``ragsense.grounding``: the ConSens score of one answer, a one-row convenience over ``evaluate``.

It sits above the spine (it calls :func:`ragsense.evaluation.evaluate`), beside the package's top-level
names, so the ``consens`` method itself never imports the evaluation layer. Many rows go through
``ragsense.evaluate(rows, ["consens"])``, which writes every row's fields and its ``errors``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragsense.consens import (
    DEFAULT_AGGREGATION,
    Aggregation,
    Bands,
    BindingCheck,
    ConSens,
    GroundingResult,
    PromptTemplate,
)
from ragsense.errors import InputError, ModelCallError
from ragsense.evaluation import evaluate
from ragsense.models import ModelSpec


def grounding(
    question: str,
    contexts: str | Sequence[str],
    answer: str,
    *,
    model: ModelSpec | None = None,
    attribution: bool = False,
    aggregation: Aggregation | str = DEFAULT_AGGREGATION,
    template: PromptTemplate | None = None,
    bands: Bands | str | None = None,
    binding: BindingCheck | bool | None = None,
) -> GroundingResult:
    """ConSens grounding score of ``answer`` to ``question`` given ``contexts`` (a string or documents).

    The row runs through ``evaluate`` with one :class:`~ragsense.consens.ConSens` metric (so it is scored
    exactly as a file of rows would be) and comes back as a :class:`~ragsense.consens.GroundingResult`.
    ``bands``: verdict bands (a :class:`~ragsense.consens.Bands` or a bands file), and ``binding``: the
    binding check (``True`` to run it), as for ``ConSens``.
    Raises :class:`~ragsense.errors.InputError` (naming the field) for unusable input and
    :class:`~ragsense.errors.ModelCallError` when the model fails.

    >>> r = grounding("Where is the Eiffel Tower?", "The Eiffel Tower stands in Paris, France.",
    ...               "It stands in Paris, France.", model="fake")
    >>> r.consens > 0, r.verdict
    (True, 'grounded')
    >>> grounding("Where?", "Paris.", "   ", model="fake")
    Traceback (most recent call last):
    ...
    ragsense.errors.InputError: field 'answer': ...
    """
    docs = [contexts] if isinstance(contexts, str) else list(contexts)
    metric = ConSens(
        model,
        attribution=attribution,
        aggregation=aggregation,
        template=template,
        bands=bands,
        binding=binding,
    )
    row = {"question": question, "contexts": docs, "answer": answer}
    [record] = evaluate([row], [metric], progress=False, desc="grounding").rows
    errors = record["errors"]
    if not errors:
        return GroundingResult.from_dict(record)
    first = errors[0]
    # An error without a field that the metric reported is the model failing, not the input.
    if first["field"] is None and first["metric"] == metric.name:
        raise ModelCallError(first["message"])
    raise InputError(first["message"], field=first["field"])
