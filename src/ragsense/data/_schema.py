"""The one row schema every method reads: question, retrieved contexts, answer, optional reference.

Input rows may use ragsense's own field names or the RAGAS ones (``user_input``, ``retrieved_contexts``,
``response``, ``ground_truth``), so a RAGAS export can be scored as is. Every other input field is kept
in :attr:`RagRow.extra`, and :meth:`RagRow.to_record` gives the row back under the names it came with, so
output rows keep every input field.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ragsense.data._tabular import json_value
from ragsense.errors import InputError

# Canonical name -> accepted input names, in order of preference.
ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("id",),
    "question": ("question", "user_input"),
    "contexts": ("contexts", "context", "retrieved_contexts"),
    "answer": ("answer", "response"),
    "reference": ("reference", "ground_truth"),
}
_KNOWN = frozenset(name for names in ALIASES.values() for name in names)


class RagRow(BaseModel):
    """One evaluation row.

    ``source_names`` maps a canonical field name to the input name it was read from when that differs
    (e.g. ``{"question": "user_input"}``); :meth:`to_record` uses it to write the row back unchanged.

    >>> row = RagRow(id="q1", question="Who wrote Hamlet?", contexts=["Hamlet is by Shakespeare."],
    ...              answer="Shakespeare.")
    >>> row.to_record()["contexts"]
    ['Hamlet is by Shakespeare.']
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    question: str
    contexts: list[str]
    answer: str
    reference: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)
    source_names: dict[str, str] = Field(default_factory=dict, repr=False)

    def to_record(self) -> dict[str, Any]:
        """The row as a plain dict under its original input names, extra fields last.

        ``id`` always comes first (the row number as a string when the input had none), so output rows
        can be joined back to their input.
        """
        names = self.source_names
        record: dict[str, Any] = {"id": self.id}
        record[names.get("question", "question")] = self.question
        contexts_name = names.get("contexts", "contexts")
        # A single `context` string came in; give it back as a string, not a one-element list.
        record[contexts_name] = self.contexts[0] if contexts_name == "context" else list(self.contexts)
        record[names.get("answer", "answer")] = self.answer
        if self.reference is not None:
            record[names.get("reference", "reference")] = self.reference
        record.update(self.extra)
        return record


def _label(given: str, canonical: str) -> str:
    """How a field is named in a message: both names when an alias was used."""
    return repr(given) if given == canonical else f"{given!r} (read as {canonical!r})"


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _pick(raw: Mapping[str, Any], canonical: str, row: int | str) -> tuple[str | None, Any]:
    """The (input name, value) of a canonical field, or (None, None) when absent."""
    present = [name for name in ALIASES[canonical] if name in raw]
    if not present:
        return None, None
    # A null means "absent" (exports often write every column, null where unused): `contexts: null`
    # beside a `context` string is that string, not a conflict. Only when every name is null does the
    # null itself reach the type check.
    given = [name for name in present if raw[name] is not None]
    if given:
        present = given
    if len(present) > 1:
        values = [raw[name] for name in present]
        if any(v != values[0] for v in values[1:]):
            raise InputError(
                f"fields {', '.join(map(repr, present))} all mean {canonical!r} but differ; keep only one",
                row=row,
                field=present[0],
            )
    return present[0], raw[present[0]]


def _missing(names: Sequence[str], row: int | str) -> InputError:
    """Every absent required field in one error (a file missing two fields is one fix, not two runs);
    the error's ``field`` is the first of them."""
    wanted = []
    for canonical in names:
        aliases = ALIASES[canonical][1:]
        wanted.append(f"{canonical!r}" + (f" (or {' / '.join(map(repr, aliases))})" if aliases else ""))
    return InputError(f"missing: every row needs {' and '.join(wanted)}", row=row, field=names[0])


def _text(name: str, canonical: str, value: Any, row: int | str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InputError(
            f"{_label(name, canonical)} must be a string, got {_type_name(value)}", row=row, field=name
        )
    if not allow_empty and not value.strip():
        raise InputError(f"{_label(name, canonical)} is empty", row=row, field=name)
    return value


def _parse_list_cell(text: str) -> Any:
    """A CSV cell holding a JSON list or a Python list repr; None when it is neither."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # not JSON, nested past the parser's depth, a huge number
        pass
    try:
        # literal_eval only builds literals (no calls, no names), so a hostile cell cannot run code.
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _contexts(name: str, value: Any, row: int | str) -> list[str]:
    label = _label(name, "contexts")
    if isinstance(value, str):
        if name == "context":
            value = [value]
        elif value.lstrip().startswith("["):
            parsed = _parse_list_cell(value)
            if not isinstance(parsed, list):
                raise InputError(
                    f"{label} looks like a list but is neither a JSON list nor a Python list literal",
                    row=row,
                    field=name,
                )
            value = parsed
        else:
            raise InputError(
                f"{label} must be a list of strings, got a single string; write a JSON list "
                f'(["passage 1", "passage 2"]) or name the field \'context\' for one passage',
                row=row,
                field=name,
            )
    if not isinstance(value, list):
        raise InputError(f"{label} must be a list of strings, got {_type_name(value)}", row=row, field=name)
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise InputError(
                f"{label} must be a list of strings, but item {i} is {_type_name(item)}", row=row, field=name
            )
    if not value:
        raise InputError(
            f"{label} is an empty list; a row needs at least one context passage", row=row, field=name
        )
    if not any(item.strip() for item in value):
        raise InputError(f"{label}: all {len(value)} context passage(s) are empty", row=row, field=name)
    return list(value)


def given_id(raw: Mapping[str, Any], index: int) -> str | None:
    """The row's own id as a string, or None when it has none (absent, null or blank)."""
    value = raw.get("id")
    # A blank id (an empty CSV cell, a null) means "none given".
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InputError(
            f"'id' must be a string or an integer, got {_type_name(value)}", row=index, field="id"
        )
    return str(value)


def parse_row(raw: Mapping[str, Any], index: int, *, require_answer: bool = True) -> RagRow:
    """Validate one input row (ragsense or RAGAS field names) into a :class:`RagRow`.

    ``index`` is the 0-based data row number, used as the id when the row has none and in error
    messages. Raises :class:`~ragsense.errors.InputError` naming the row and the field.

    >>> parse_row({"user_input": "Capital of France?", "retrieved_contexts": ["Paris is the capital."],
    ...            "response": "Paris.", "lang": "en"}, 0)  # doctest: +NORMALIZE_WHITESPACE
    RagRow(id='0', question='Capital of France?', contexts=['Paris is the capital.'], answer='Paris.',
           reference=None, extra={'lang': 'en'})
    >>> parse_row({"question": "Q?", "contexts": [], "answer": "A."}, 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ragsense.errors.InputError: row 3, field 'contexts': 'contexts' is an empty list; ...
    """
    if not isinstance(raw, Mapping):
        raise InputError(f"a row must be an object with named fields, got {_type_name(raw)}", row=index)
    own_id = given_id(raw, index)
    row_id = str(index) if own_id is None else own_id
    where: int | str = index if own_id is None else own_id
    source_names: dict[str, str] = {}

    def note(canonical: str, name: str) -> None:
        if name != canonical:
            source_names[canonical] = name

    absent = [c for c in ("question", "contexts", "answer") if not any(name in raw for name in ALIASES[c])]
    if not require_answer and absent == ["answer"]:
        absent = []  # the answer is optional here: a metric that needs one says so
    if absent:
        raise _missing(absent, where)
    q_name, q_value = _pick(raw, "question", where)
    if q_name is None:
        raise _missing(["question"], where)
    question = _text(q_name, "question", q_value, where)
    note("question", q_name)

    c_name, c_value = _pick(raw, "contexts", where)
    if c_name is None:
        raise _missing(["contexts"], where)
    contexts = _contexts(c_name, c_value, where)
    note("contexts", c_name)

    a_name, a_value = _pick(raw, "answer", where)
    if a_name is None:
        if require_answer:
            raise _missing(["answer"], where)
        answer = ""
    else:
        answer = _text(a_name, "answer", a_value, where, allow_empty=not require_answer)
        note("answer", a_name)

    r_name, r_value = _pick(raw, "reference", where)
    reference: str | None = None
    if r_name is not None and r_value is not None:
        reference = _text(r_name, "reference", r_value, where, allow_empty=True)
        note("reference", r_name)
        if not reference.strip():  # an empty CSV cell: no reference
            reference = None

    # Extra fields pass through to the output whatever their type: a value JSON cannot hold (a
    # timestamp, bytes, a decimal from Parquet) becomes text here, not a crash when the row is written.
    extra = {key: json_value(value) for key, value in raw.items() if key not in _KNOWN}
    return RagRow(
        id=row_id,
        question=question,
        contexts=contexts,
        answer=answer,
        reference=reference,
        extra=extra,
        source_names=source_names,
    )


def check_unique_id(row: RagRow, index: int, seen: set[str]) -> None:
    """Raise if ``row.id`` is in ``seen``; otherwise add it."""
    if row.id in seen:
        raise InputError(
            f"id {row.id!r} was already used by an earlier row; ids must be unique", row=index, field="id"
        )
    seen.add(row.id)
