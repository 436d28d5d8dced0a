"""parse_row: field names (ours and RAGAS), defaults, and every way a row can be unusable."""

from __future__ import annotations

from typing import Any

import pytest

from ragsense.data import RagRow, RowError, parse_row, parse_rows
from ragsense.errors import InputError


def good(**overrides: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"question": "Who?", "contexts": ["Ctx one.", "Ctx two."], "answer": "Them."}
    row.update(overrides)
    return {key: value for key, value in row.items() if value is not ...}


def test_canonical_fields_and_default_id() -> None:
    row = parse_row(good(), 7)
    assert row == RagRow(id="7", question="Who?", contexts=["Ctx one.", "Ctx two."], answer="Them.")
    assert row.reference is None and row.extra == {}


def test_ragas_aliases_and_extra_fields_round_trip() -> None:
    raw = {
        "user_input": "Q?",
        "retrieved_contexts": ["C."],
        "response": "A.",
        "ground_truth": "Ref.",
        "lang": "en",
        "meta": {"k": 1},
    }
    row = parse_row(raw, 0)
    assert (row.question, row.contexts, row.answer, row.reference) == ("Q?", ["C."], "A.", "Ref.")
    assert row.extra == {"lang": "en", "meta": {"k": 1}}
    # Output rows keep the input's own field names.
    assert row.to_record() == {"id": "0", **raw}


def test_single_context_string_is_one_passage_and_written_back_as_string() -> None:
    row = parse_row({"question": "Q?", "context": "Only passage.", "answer": "A."}, 0)
    assert row.contexts == ["Only passage."]
    assert row.to_record()["context"] == "Only passage."


def test_reference_optional_and_blank_reference_is_none() -> None:
    assert parse_row(good(reference="R"), 0).reference == "R"
    assert parse_row(good(reference=""), 0).reference is None
    assert parse_row(good(reference=None), 0).reference is None


def test_given_id_is_kept_and_integer_id_becomes_string() -> None:
    assert parse_row(good(id="abc"), 3).id == "abc"
    assert parse_row(good(id=42), 3).id == "42"
    assert parse_row(good(id=""), 3).id == "3"  # blank CSV cell: no id


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ('["a", "b"]', ["a", "b"]),
        ("['a', 'b']", ["a", "b"]),
        (repr(["it's", "q"]), ["it's", "q"]),  # Python repr mixes quote styles
        ('  ["only"]', ["only"]),
    ],
)
def test_csv_list_cells_are_parsed(cell: str, expected: list[str]) -> None:
    assert parse_row(good(contexts=cell), 0).contexts == expected


def test_list_cell_does_not_run_code() -> None:
    with pytest.raises(InputError, match="neither a JSON list nor a Python list literal"):
        parse_row(good(contexts="[__import__('os').getcwd()]"), 0)


def errors_of(raw: dict[str, Any], index: int = 4, **kwargs: Any) -> InputError:
    with pytest.raises(InputError) as info:
        parse_row(raw, index, **kwargs)
    return info.value


def test_missing_question_names_row_field_and_alias() -> None:
    exc = errors_of(good(question=...))
    assert (exc.row, exc.field) == (4, "question")
    assert "missing" in str(exc) and "user_input" in str(exc)


def test_error_names_row_by_id_when_given() -> None:
    exc = errors_of(good(id="q-9", answer="   "))
    assert exc.row == "q-9" and exc.field == "answer"
    assert str(exc).startswith("row q-9, field 'answer'") and "empty" in str(exc)


@pytest.mark.parametrize("value", [3, 2.5, None, {"text": "x"}, ["a"], True])
def test_non_string_question_is_rejected(value: Any) -> None:
    exc = errors_of(good(question=value))
    assert exc.field == "question" and "must be a string" in str(exc)


def test_whitespace_question_is_rejected() -> None:
    assert "is empty" in str(errors_of(good(question=" \n\t ")))


def test_alias_error_message_names_both_fields() -> None:
    exc = errors_of({"user_input": 5, "contexts": ["c"], "answer": "a"})
    assert exc.field == "user_input"
    assert "'user_input'" in str(exc) and "'question'" in str(exc)
    exc = errors_of({"question": "q", "retrieved_contexts": [], "answer": "a"})
    assert "'retrieved_contexts'" in str(exc) and "'contexts'" in str(exc)


def test_empty_contexts_list() -> None:
    exc = errors_of(good(contexts=[]))
    assert exc.field == "contexts" and "empty list" in str(exc)


def test_all_contexts_empty() -> None:
    exc = errors_of(good(contexts=["", "  "]))
    assert "all 2 context passage(s) are empty" in str(exc)


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("one plain passage", "got a single string"),
        ({"a": 1}, "got dict"),
        (None, "got null"),
        (["ok", 3], "item 1 is int"),
        ("[not, a list", "neither a JSON list"),
        ('{"a": 1}', "got a single string"),
    ],
)
def test_bad_contexts(value: Any, needle: str) -> None:
    exc = errors_of(good(contexts=value))
    assert exc.field == "contexts" and needle in str(exc)


def test_missing_answer_required_by_default_but_optional_on_request() -> None:
    assert errors_of(good(answer=...)).field == "answer"
    assert parse_row(good(answer=...), 0, require_answer=False).answer == ""


def test_conflicting_aliases_are_rejected_equal_ones_accepted() -> None:
    assert "differ" in str(errors_of(good(user_input="Other?")))
    assert parse_row(good(user_input="Who?"), 0).question == "Who?"


def test_bad_id_type_and_non_mapping_row() -> None:
    assert errors_of(good(id=1.5)).field == "id"
    with pytest.raises(InputError, match="must be an object"):
        parse_row(["not", "a", "row"], 0)  # type: ignore[arg-type]


def test_row_is_frozen() -> None:
    row = parse_row(good(), 0)
    with pytest.raises(ValueError, match="frozen"):
        row.question = "changed"


def test_parse_rows_flags_repeated_id_on_the_later_row() -> None:
    raws = [good(id="a"), good(id="b"), good(id="a"), good()]
    out = list(parse_rows(raws))
    assert [type(item) for item in out] == [RagRow, RagRow, RowError, RagRow]
    error = out[2]
    assert isinstance(error, RowError)
    assert (error.index, error.id, error.field) == (2, "a", "id") and "already used" in error.message


def test_default_id_colliding_with_explicit_id_is_an_error() -> None:
    out = list(parse_rows([good(id="1"), good()]))  # the second row's default id is "1"
    assert isinstance(out[1], RowError) and out[1].field == "id"


def test_a_null_alias_beside_a_given_one_is_absent_not_a_conflict() -> None:
    # Issue 25: exports that write every column sent `contexts: null` beside a `context` string, and
    # the row was refused as ambiguous; null means absent.
    row = parse_row({"question": "Q?", "context": "C.", "contexts": None, "answer": "A."}, 0)
    assert row.contexts == ["C."] and row.to_record()["context"] == "C."
    row = parse_row({"question": "Q?", "contexts": ["C."], "user_input": None, "answer": "A."}, 0)
    assert row.question == "Q?"
    # Every name null: still the null's own error, on the preferred name.
    with pytest.raises(InputError, match="null"):
        parse_row({"question": "Q?", "contexts": None, "context": None, "answer": "A."}, 0)
