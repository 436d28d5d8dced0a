"""Lexical support: which answer words the context states."""

from __future__ import annotations

import pytest

from ragsense.text import ContextVocabulary, SentenceIndex, stated_in_context, unsupported_share
from ragsense.text._support import DERIVED_WORDS


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
        # Issue 37: inflected verbs against their base form, and the other way round.
        ("succeeded", "They hope to succeed."),  # -ed on a stem ending in -ed
        ("succeed", "The attempt succeeded."),
        ("stopped", "The train stops here."),  # doubled consonant
        ("running", "They run a shop."),  # doubled consonant, three-letter lemma
        ("added", "It adds a layer."),  # three-letter lemma that is not consonant-vowel-consonant
        ("baked", "They bake bread."),  # the lost e
        ("making", "They make bread."),
        ("studied", "One study showed it."),  # -ied / -y
        ("tried", "They try again."),
        ("used", "They use it."),
        ("builds", "It was built on the original."),  # irregular past
        ("went", "They go home."),
        ("teaches", "She taught there."),
        ("boxes", "One box."),  # -es
    ],
)
def test_stated(word: str, context: str) -> None:
    assert stated_in_context([word], [context]) == [True]


@pytest.mark.parametrize(
    ("word", "context"),
    [
        ("Pasadena", "He lives in Seattle."),
        ("bee", "He went to bed."),  # short stems never match by lemma
        ("news", "A new car."),  # a consonant-vowel-consonant stem is another word or lost an e
        ("cared", "A new car."),
        ("early", "An ear."),  # three letters only from -s, -es, -ed, -ing
        ("older", "Old town."),
        ("planet", "They plan it."),  # not an inflection at all
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


def test_sentence_index_answers_as_one_vocabulary_per_sentence() -> None:
    """The learned verdict's features ask which context sentences state a word; the index must give
    exactly what one ContextVocabulary per sentence gives (hyphen parts within one sentence)."""
    from ragsense.text import SentenceIndex

    sentences = [
        "Marie Curie discovered polonium in 1898.",
        "Pierre named the element; the COVID 19 dose was two mg.",
        "Curie-Pierre studies 1,000 designs.",
        "",
    ]
    index = SentenceIndex(sentences)
    words = [
        "Curie", "Pierre", "Curie-Pierre", "COVID-19", "discovers", "2", "1000", "studied",
        "Marie-Pierre", "polonium-1898", "element's", "designed", "Paris", "two-mg",
    ]  # fmt: skip
    for word in words:
        expected = frozenset(i for i, s in enumerate(sentences) if ContextVocabulary([s]).states(word))
        assert index.where(word) == expected, word


@pytest.mark.parametrize(
    ("word", "context"),
    [
        ("deciphering", "Champollion announced his decipherment in 1822."),
        ("completion", "The tower was completed in March 1889."),
        ("announced", "The announcement came in May."),
        ("organized", "The organization of the fair took two years."),
        ("competing", "She won the competition twice."),
        ("investments", "They invested heavily."),
    ],
)
def test_a_noun_of_action_states_its_verb_and_back(word: str, context: str) -> None:
    assert ContextVocabulary([context]).states(word)  # on by default (DERIVED_WORDS)
    assert not ContextVocabulary([context], derived=False).states(word)


@pytest.mark.parametrize(
    ("word", "context"),
    [
        ("mill", "It cost a million dollars."),  # the stem must keep five letters
        ("station", "He stated it."),
        ("comment", "They came together."),
        ("general", "The next generation."),  # "-al" is not a derivation the match undoes
        ("person", "Her personal view."),
    ],
)
def test_other_derivations_stay_apart(word: str, context: str) -> None:
    assert not ContextVocabulary([context]).states(word)


def test_the_sentence_index_follows_the_same_switch() -> None:
    texts = ["Champollion announced his decipherment.", "Greek was read."]
    assert SentenceIndex(texts).where("deciphering") == frozenset({0})
    assert SentenceIndex(texts, derived=False).where("deciphering") == frozenset()
    assert DERIVED_WORDS is True
