"""Lexical support: which answer words the context states."""

from __future__ import annotations

import pytest

from ragsense.text import ContextVocabulary, stated_in_context, unsupported_share


@pytest.mark.parametrize(
    ("word", "context"),
    [
        ("Seattle", "He lives in seattle."),  # case
        ("Baker's", "Baker designs proteins."),  # possessive
        ("designed", "She designs proteins."),  # lemma
        ("studies", "One study showed it."),  # -ies / -y
        ("1000", "It cost 1,000 dollars."),  # thousands separator
        ("3.50", "The fee is 3.5 euros."),  # trailing zero
        ("two", "There were 2 of them."),  # number word
        ("12", "Twelve people came."),
        ("COVID-19", "The COVID 19 pandemic."),  # hyphen parts
        ("O’Neill", "O'Neill said so."),  # apostrophe forms
    ],
)
def test_stated(word: str, context: str) -> None:
    assert stated_in_context([word], [context]) == [True]


@pytest.mark.parametrize(
    ("word", "context"),
    [
        ("Pasadena", "He lives in Seattle."),
        ("bee", "He went to bed."),  # short stems never match by lemma
        ("news", "A new car."),  # a stem under four letters is never matched by lemma
        ("1001", "It cost 1,000 dollars."),
        ("COVID-20", "The COVID 19 pandemic."),
    ],
)
def test_not_stated(word: str, context: str) -> None:
    assert stated_in_context([word], [context]) == [False]


def test_every_document_counts_and_the_share_is_of_scored_words() -> None:
    vocab = ContextVocabulary(["Ada Lovelace wrote notes.", "Babbage built the engine."])
    assert vocab.states("Babbage") and vocab.states("Lovelace")
    assert unsupported_share(["Ada", "Babbage", "Turing", "Church"], ["Ada met Babbage."]) == 0.5
    assert unsupported_share([], ["anything"]) == 0.0
