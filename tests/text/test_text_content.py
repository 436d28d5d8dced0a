"""content_words: ConSens's filter and its fallback."""

from __future__ import annotations

import doctest

import pytest

import ragsense.text._content as content_module
from ragsense.text import ContentSelection, content_words


def kept(selection: ContentSelection) -> list[str]:
    return [w.text for w in selection.kept]


def check_invariants(selection: ContentSelection) -> None:
    # kept and dropped partition words; kept_indices point at the kept words in order.
    assert [selection.words[i] for i in selection.kept_indices] == selection.kept
    assert selection.kept_indices == sorted(selection.kept_indices)
    dropped_words = [w for w, _ in selection.dropped]
    assert sorted(selection.kept + dropped_words, key=lambda w: w.start) == selection.words


def test_paper_table_1() -> None:
    selection = content_words(
        "David Baker is a biochemist and computational biologist.", "What is David Baker known for?"
    )
    assert kept(selection) == ["biochemist", "computational", "biologist"]
    assert selection.fallback is None
    assert [(w.text, reason) for w, reason in selection.dropped] == [
        ("David", "in_question"),
        ("Baker", "in_question"),
        ("is", "closed_class"),  # closed class is checked before the question
        ("a", "closed_class"),
        ("and", "closed_class"),
    ]
    check_invariants(selection)


def test_fallback_all_words() -> None:
    selection = content_words("Paris.", "Is Paris the capital of France?")
    assert kept(selection) == ["Paris"]
    assert selection.fallback == "all_words"
    assert selection.dropped == []
    check_invariants(selection)


def test_fallback_keeps_closed_class_words_too() -> None:
    selection = content_words("It is, it is.", "Is it?")
    assert kept(selection) == ["It", "is", "it", "is"]
    assert selection.fallback == "all_words"
    check_invariants(selection)
    # "Yes" is not closed-class (it is the answer), so no fallback is needed.
    selection = content_words("Yes, it is.", "Is it?")
    assert kept(selection) == ["Yes"]
    assert selection.fallback is None


@pytest.mark.parametrize("answer", ["", "   ", "...", "— ?!", "🤗"])
def test_no_words(answer: str) -> None:
    selection = content_words(answer, "What?")
    assert selection.kept == [] and selection.words == [] and selection.kept_indices == []
    assert selection.fallback == "no_words"


@pytest.mark.parametrize("question", [None, ""])
def test_without_question_only_closed_class_is_dropped(question: str | None) -> None:
    selection = content_words("David Baker is a biochemist.", question)
    assert kept(selection) == ["David", "Baker", "biochemist"]
    assert all(reason == "closed_class" for _, reason in selection.dropped)
    check_invariants(selection)


def test_question_match_is_case_insensitive_and_exact() -> None:
    selection = content_words("PARIS hosts the Biology museum.", "Where is paris? What about biologists?")
    assert kept(selection) == ["hosts", "Biology", "museum"]  # no stemming: biology != biologists


def test_curly_and_straight_apostrophes_match() -> None:
    selection = content_words("O’Neill lost.", "Did O'Neill win?")
    assert kept(selection) == ["lost"]


@pytest.mark.parametrize(
    ("answer", "question", "scored"),
    [
        # Issue 37: "builds" scored beside the question's "build" read as an unstated word and pulled a
        # grounded answer to unsure; the question's word in another inflection is a repeat.
        (
            "AlphaFold 2 builds on the original system.",
            "What does AlphaFold 2 build on?",
            ["original", "system"],
        ),
        ("It was completed in 1889.", "When did they complete it?", ["1889"]),
        ("O’Neill won the seat.", "Did O'Neill win?", ["seat"]),  # an irregular past
        ("They studied proteins.", "What does the lab study?", ["proteins"]),
        ("The Biology museum.", "What about biologists?", ["Biology", "museum"]),  # no derivation
        ("It was the tallest tower.", "How tall was it?", ["tallest", "tower"]),  # a degree says more
    ],
)
def test_a_question_word_in_another_inflection_is_a_repeat(
    answer: str, question: str, scored: list[str]
) -> None:
    assert kept(content_words(answer, question)) == scored


@pytest.mark.parametrize(
    ("answer", "question"),
    [
        ("Baker's lab", "Who is Baker?"),
        ("Baker lab", "What is Baker's field?"),
        ("Baker’s lab", "What is Baker's field?"),
    ],
)
def test_possessive_matches_both_ways(answer: str, question: str) -> None:
    selection = content_words(answer, question)
    assert kept(selection) == ["lab"]
    assert selection.dropped[0][1] == "in_question"


def test_question_words_do_not_match_substrings() -> None:
    selection = content_words("Bakersfield is in California.", "Where does Baker live?")
    assert kept(selection) == ["Bakersfield", "California"]


def test_negation_and_numbers_are_kept() -> None:
    selection = content_words("It was not 1,000 but 3.5 tons.", "How heavy was it?")
    assert kept(selection) == ["not", "1,000", "3.5", "tons"]


def test_doctests() -> None:
    result = doctest.testmod(content_module)
    assert result.attempted > 0
    assert result.failed == 0
