"""The JSON of ``POST /v1/check``: the request (one row or a batch) and the response, as pydantic models.

The models are strict (a number is not a string, a string is not a list) and refuse unknown fields, so
a typo in a field name is an error that names it rather than an option silently ignored. They also give
the OpenAPI schema at ``/docs``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from ragsense.data import ALIASES


def evaluate_names(data: Any) -> Any:
    """A request object with ``evaluate``'s other field names read as the guard's: ``context`` (one
    passage, or a list), ``retrieved_contexts``, ``user_input``, ``response`` (:data:`ragsense.data.ALIASES`),
    so a row ``evaluate`` scores is one the guard takes. Two names for one field with different values
    are refused.

    >>> evaluate_names({"user_input": "Q?", "context": "C.", "response": "A."})
    {'question': 'Q?', 'contexts': ['C.'], 'answer': 'A.'}
    """
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for canonical in ("question", "contexts", "answer"):
        for name in ALIASES[canonical][1:]:
            if name not in out:
                continue
            value = out.pop(name)
            if name == "context" and isinstance(value, str):
                value = [value]
            if out.get(canonical) is not None and out[canonical] != value:
                raise ValueError(f"fields {canonical!r} and {name!r} mean the same but differ; keep one")
            out[canonical] = value
    return out


class CheckRow(BaseModel):
    """One answer to check: the question, the documents it was given, the answer."""

    model_config = ConfigDict(strict=True, extra="forbid")

    _names = model_validator(mode="before")(evaluate_names)

    id: str | None = Field(default=None, description="your id of the row, echoed in its result")
    question: str
    contexts: list[str] = Field(description="the retrieved documents, in the order the generator saw them")
    answer: str


class CheckRequest(BaseModel):
    """One row (``question``, ``contexts``, ``answer`` at the top level) or a batch (``rows``).

    >>> request = CheckRequest.model_validate({"question": "Q?", "contexts": ["C."], "answer": "A."})
    >>> request.row_list()[0].answer
    'A.'
    """

    model_config = ConfigDict(strict=True, extra="forbid")

    id: str | None = Field(default=None, description="request id (else X-Request-ID, else generated)")
    question: str | None = None
    contexts: list[str] | None = None
    answer: str | None = None
    rows: list[CheckRow] | None = Field(default=None, description="a batch of rows instead of one row")
    attribution: bool = Field(default=False, description="per-document leave-one-out attribution")
    adherence: bool = Field(default=False, description="VERA response adherence (needs a judge)")
    min_consens: float | None = Field(
        default=None,
        allow_inf_nan=False,
        description="the pass threshold for this request, within the server's allowed bounds",
    )
    weakest: int = Field(default=5, ge=0, le=50, description="how many weakest words to return")

    _names = model_validator(mode="before")(evaluate_names)

    @model_validator(mode="after")
    def _one_form(self) -> CheckRequest:
        single = [name for name in ("question", "contexts", "answer") if getattr(self, name) is not None]
        if self.rows is not None and single:
            raise ValueError(f"give either rows or question/contexts/answer, not both (got {single[0]})")
        if self.rows is None and len(single) < 3:
            missing = [n for n in ("question", "contexts", "answer") if getattr(self, n) is None]
            raise ValueError(f"missing field(s) {', '.join(missing)} (or give a batch in rows)")
        return self

    def row_list(self) -> list[CheckRow]:
        """The rows to score: ``rows``, or the one top-level row (its id the request's)."""
        if self.rows is not None:
            return list(self.rows)
        assert self.question is not None and self.contexts is not None and self.answer is not None
        # The one row of a single-row request is named by the request's id.
        return [CheckRow(id=self.id, question=self.question, contexts=self.contexts, answer=self.answer)]


@lru_cache(maxsize=8)
def request_model(max_rows: int, max_documents: int) -> type[CheckRequest]:
    """:class:`CheckRequest` with its lists capped in the schema (``max_length``), for one server's limits.

    The caps must be in the schema, not only checked after it: pydantic validates every element of a
    list before any later check runs, and reports each bad one, so ``{"rows": [0, 0, ...]}`` in a 1 MB
    body gave 500,000 errors (a 61 MB reply). With ``max_length`` the list is refused by its length
    alone, before its elements are looked at.

    >>> from pydantic import ValidationError
    >>> try:
    ...     request_model(2, 3).model_validate({"rows": [0] * 100_000})
    ... except ValidationError as exc:
    ...     print(exc.error_count(), exc.errors()[0]["type"])
    1 too_long
    """
    contexts_doc = CheckRow.model_fields["contexts"].description
    row = create_model(
        "CheckRow",
        __base__=CheckRow,
        contexts=(list[str], Field(max_length=max_documents, description=contexts_doc)),
    )
    rows_type: Any = list[row]  # type: ignore[valid-type]  # a class made at run time
    request = create_model(
        "CheckRequest",
        __base__=CheckRequest,
        contexts=(list[str] | None, Field(default=None, max_length=max_documents)),
        rows=(
            rows_type | None,
            Field(
                default=None, max_length=max_rows, description=CheckRequest.model_fields["rows"].description
            ),
        ),
    )
    return request


class WeakWord(BaseModel):
    """An answer word the context did least for: ``contrast = nll_empty - nll_context`` (<= 0: no help)."""

    word: str
    start: int
    end: int
    contrast: float


class CheckResult(BaseModel):
    """One row's result: ConSens's fields as ``ragsense evaluate`` writes them, plus the policy's."""

    model_config = ConfigDict(extra="allow")

    id: str
    passed: bool = Field(description="consens >= min_consens and no error (fails closed)")
    min_consens: float
    consens: float | None
    verdict: str | None
    weakest_words: list[WeakWord]
    reason: str = Field(
        description="the verdict in words: score, the band edge that decided it, weakest words"
    )
    errors: list[dict[str, Any]]


class CheckResponse(BaseModel):
    """The answer to one request: its id, whether every row passed, and each row's result."""

    id: str
    passed: bool
    model: str
    results: list[CheckResult]
