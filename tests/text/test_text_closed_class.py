"""The closed-class word list and is_closed_class."""

from __future__ import annotations

import doctest

import pytest

import ragsense.text._closed_class as closed_module
from ragsense.text import CLOSED_CLASS_WORDS, is_closed_class, split_words


@pytest.mark.parametrize(
    "word",
    [
        # pronouns: personal, possessive, reflexive, demonstrative, wh, indefinite
        "I", "me", "she", "them", "its", "theirs", "ourselves", "themselves", "this", "those",
        "who", "whom", "which", "whatever", "someone", "everything",
        # articles and quantifier determiners
        "a", "an", "The", "some", "any", "each", "every", "all", "both", "many", "several",
        # conjunctions
        "and", "but", "or", "because", "although", "if", "whether", "while", "than",
        # prepositions, including multi-purpose ones
        "to", "of", "as", "in", "on", "between", "during", "towards", "via",
        # auxiliaries and modals
        "be", "is", "are", "was", "were", "been", "being", "am", "have", "has", "had", "having",
        "do", "does", "did", "will", "would", "shall", "should", "can", "could", "may", "might", "must",
        # pronoun + auxiliary contractions, both apostrophes
        "it's", "it’s", "they're", "They’re", "I'm", "we've", "she'll", "that's", "there's", "could've",
    ],
)  # fmt: skip
def test_closed_class(word: str) -> None:
    assert is_closed_class(word)


@pytest.mark.parametrize(
    "word",
    [
        # negation carries meaning for grounding
        "not", "no", "never", "none", "nothing", "nobody", "neither", "nor", "without", "except",
        "don't", "doesn’t", "isn't", "aren't", "wasn't", "won't", "can't", "cannot", "shouldn't",
        # numerals
        "one", "two", "first", "1,000", "3.5",
        # content words, including ones that look functional
        "biochemist", "computational", "known", "also", "very", "only", "doing", "done", "Paris",
        # acronyms that spell a closed-class word
        "US", "WHO", "IT", "AM",
        # not words at all
        "", "'s",
    ],
)  # fmt: skip
def test_not_closed_class(word: str) -> None:
    assert not is_closed_class(word)


def test_case_insensitive_except_acronyms() -> None:
    assert is_closed_class("THE") is False  # all caps reads as an acronym
    assert is_closed_class("The") and is_closed_class("the") and is_closed_class("tHe")
    assert is_closed_class("I")  # a single capital letter is not an acronym


def test_list_is_thorough() -> None:
    assert len(CLOSED_CLASS_WORDS) >= 250


def test_entries_are_normalized_single_words() -> None:
    for entry in CLOSED_CLASS_WORDS:
        assert entry == entry.lower(), entry
        assert "’" not in entry, entry
        # Every entry must be something split_words can produce, or it could never match.
        assert [w.text for w in split_words(entry)] == [entry], entry


def test_doctests() -> None:
    result = doctest.testmod(closed_module)
    assert result.attempted > 0
    assert result.failed == 0
