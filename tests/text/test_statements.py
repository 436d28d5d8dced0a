"""split_sentences and split_statements: boundaries on tricky inputs, offsets, forced cuts, speed."""

from __future__ import annotations

import dataclasses
import doctest
import time
from collections.abc import Callable

import pytest

import ragsense.text._statements as statements_module
from ragsense.text import Span, split_sentences, split_statements


def sentences(text: str, **kwargs: int) -> list[str]:
    return [s.text for s in split_sentences(text, **kwargs)]


def statements(text: str) -> list[str]:
    return [s.text for s in split_statements(text)]


SENTENCE_CASES: list[tuple[str, list[str]]] = [
    # Titles and prefix abbreviations never end a sentence.
    ("Dr. Smith met Mr. Jones. They talked.", ["Dr. Smith met Mr. Jones.", "They talked."]),
    ("Mrs. Brown and Prof. White agreed.", ["Mrs. Brown and Prof. White agreed."]),
    (
        "Some fruits, e.g. apples, are red. Others, i.e. limes, are green.",
        ["Some fruits, e.g. apples, are red.", "Others, i.e. limes, are green."],
    ),
    ("Ali vs. Frazier was a fight. It was long.", ["Ali vs. Frazier was a fight.", "It was long."]),
    ("See Fig. 3 for details. It shows the trend.", ["See Fig. 3 for details.", "It shows the trend."]),
    # Abbreviations that may close a sentence: split only before a frequent sentence starter.
    ("He served in the U.S. Army for years.", ["He served in the U.S. Army for years."]),
    ("He moved to the U.S. The next year he left.", ["He moved to the U.S.", "The next year he left."]),
    (
        "Apple Inc. is large. It was founded by Apple Inc. The company grew.",
        ["Apple Inc. is large.", "It was founded by Apple Inc.", "The company grew."],
    ),
    ("Martin Luther King Jr. was born in 1929.", ["Martin Luther King Jr. was born in 1929."]),
    (
        "St. Louis is a city. He lives on Main St. The house is red.",
        ["St. Louis is a city.", "He lives on Main St.", "The house is red."],
    ),
    (
        "Room No. 5 is free. Is it safe? No. It is not.",
        ["Room No. 5 is free.", "Is it safe?", "No.", "It is not."],
    ),
    ("Meet at 5 p.m. Then go home.", ["Meet at 5 p.m.", "Then go home."]),
    (
        "We bought apples, pears, etc. The rest was sold.",
        ["We bought apples, pears, etc.", "The rest was sold."],
    ),
    ("Smith et al. (2020) showed it. Others agreed.", ["Smith et al. (2020) showed it.", "Others agreed."]),
    # Initials.
    ("J. R. R. Tolkien wrote it. He was English.", ["J. R. R. Tolkien wrote it.", "He was English."]),
    ("The author is J. A. Smith. She lives here.", ["The author is J. A. Smith.", "She lives here."]),
    ("He takes vitamin C. The dose is small.", ["He takes vitamin C.", "The dose is small."]),
    # Decimals and currency.
    ("Pi is about 3.14. It is irrational.", ["Pi is about 3.14.", "It is irrational."]),
    (
        "The deal cost $2.5 million. Profit was 1,000.75 euros.",
        ["The deal cost $2.5 million.", "Profit was 1,000.75 euros."],
    ),
    ("Version 2.0.1 shipped. It works.", ["Version 2.0.1 shipped.", "It works."]),
    # Ellipses.
    ("He waited... and waited. Then he left.", ["He waited... and waited.", "Then he left."]),
    ("He waited... Then he left.", ["He waited...", "Then he left."]),
    ("She paused… Nothing happened.", ["She paused…", "Nothing happened."]),
    # Quotes and brackets after the terminator.
    ('He said "yes." Then he left.', ['He said "yes."', "Then he left."]),
    ('"Why?" she asked. Nobody knew.', ['"Why?" she asked.', "Nobody knew."]),
    ("(See the appendix.) The data follow.", ["(See the appendix.)", "The data follow."]),
    ("It is “final.” We agree.", ["It is “final.”", "We agree."]),
    # Question and exclamation marks.
    ("Is it true? Yes! It is.", ["Is it true?", "Yes!", "It is."]),
    ("Really?! No way.", ["Really?!", "No way."]),
    # Newlines, blank lines and list markers.
    ("First line\nsecond line", ["First line", "second line"]),
    ("Para one.\n\nPara two.\r\nPara three.", ["Para one.", "Para two.", "Para three."]),
    (
        "Steps:\n- Boil water.\n* Add salt\n1. Stir it. Then wait.\n2) Serve",
        ["Steps:", "Boil water.", "Add salt", "Stir it.", "Then wait.", "Serve"],
    ),
    ("  (a) first\n  b) second\n# Heading\n> quoted text", ["first", "second", "Heading", "quoted text"]),
    # No final punctuation, lowercase continuation, no space after the period.
    ("no final punctuation here", ["no final punctuation here"]),
    ("It costs 5 mg. per dose. Take it.", ["It costs 5 mg. per dose.", "Take it."]),
    ("Visit example.com today. It is free.", ["Visit example.com today.", "It is free."]),
    # Pieces with no letter or digit are dropped; CJK terminators need no space.
    ("---\n...\n***", []),
    ("東京は大きい。人が多い！本当？はい", ["東京は大きい。", "人が多い！", "本当？", "はい"]),
    # Empty and whitespace-only input.
    ("", []),
    ("   \n\t\n  ", []),
]


@pytest.mark.parametrize(("text", "expected"), SENTENCE_CASES)
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


STATEMENT_CASES: list[tuple[str, list[str]]] = [
    (
        "Paris is the capital of France, and it has 2 million inhabitants.",
        ["Paris is the capital of France", "it has 2 million inhabitants."],
    ),
    ("He bought apples, pears, and plums.", ["He bought apples, pears, and plums."]),
    (
        "She was born in 1990; she moved to Rome in 2010.",
        ["She was born in 1990", "she moved to Rome in 2010."],
    ),
    ("He visited Paris, London, and New York City.", ["He visited Paris, London, and New York City."]),
    (
        "The drug lowers blood pressure, but it causes headaches in some patients.",
        ["The drug lowers blood pressure", "it causes headaches in some patients."],
    ),
    ("He read the news, while she cooked dinner.", ["He read the news", "she cooked dinner."]),
    (
        "Cats sleep a lot, whereas the dog runs all day.",
        ["Cats sleep a lot", "the dog runs all day."],
    ),
    (
        "The trial was small, although Pfizer funded it fully.",
        ["The trial was small", "Pfizer funded it fully."],
    ),
    (
        "In 2010, he moved to Rome, and the city welcomed him warmly.",
        ["In 2010, he moved to Rome", "the city welcomed him warmly."],
    ),
    # The right side does not start with a likely subject.
    ("He stayed home all day, and then he went out.", ["He stayed home all day, and then he went out."]),
    ("The team trained hard, and won three titles.", ["The team trained hard, and won three titles."]),
    # Too short on one side.
    ("It rained, and we stayed home all day.", ["It rained, and we stayed home all day."]),
    ("She was born in Rome; she left.", ["She was born in Rome; she left."]),
    # Never inside quotes or parentheses.
    (
        'She said "Paris is the capital of France, and it is large" yesterday.',
        ['She said "Paris is the capital of France, and it is large" yesterday.'],
    ),
    (
        "The city (which is very old, and it is big) has many parks.",
        ["The city (which is very old, and it is big) has many parks."],
    ),
    (
        "He wrote “the sky is blue; the grass is green” on the wall.",
        ["He wrote “the sky is blue; the grass is green” on the wall."],
    ),
    # Semicolon-separated lists.
    ("Paris, France; Rome, Italy; Berlin, Germany.", ["Paris, France; Rome, Italy; Berlin, Germany."]),
    (
        "The board: John Smith, CEO; Mary Jones, CFO; and Bob Lee, CTO.",
        ["The board: John Smith, CEO; Mary Jones, CFO; and Bob Lee, CTO."],
    ),
    # Several sentences and several cuts.
    (
        "The sky is very blue; the grass is very green. Dr. Lee agreed, and he wrote a long report.",
        ["The sky is very blue", "the grass is very green.", "Dr. Lee agreed", "he wrote a long report."],
    ),
    (
        "- First item is here\n- The second one is here, and it is long too",
        ["First item is here", "The second one is here", "it is long too"],
    ),
    ("", []),
    ("  \n ", []),
]


@pytest.mark.parametrize(("text", "expected"), STATEMENT_CASES)
def test_split_statements(text: str, expected: list[str]) -> None:
    assert statements(text) == expected


ALL_TEXTS = [text for text, _ in SENTENCE_CASES + STATEMENT_CASES] + [
    "  Leading and trailing spaces.   Second one.  ",
    "Tabs\tinside. And\u2028separators\u2029too.",
    "a" * 50 + ", " + "b " * 40 + "; end",
]


@pytest.mark.parametrize("text", ALL_TEXTS)
@pytest.mark.parametrize("splitter", [split_sentences, split_statements])
def test_offsets_round_trip(text: str, splitter: Callable[[str], list[Span]]) -> None:
    spans = splitter(text)
    previous_end = 0
    for span in spans:
        assert isinstance(span, Span)
        assert text[span.start : span.end] == span.text
        assert span.text == span.text.strip()
        assert span.text
        assert span.start >= previous_end
        previous_end = span.end


@pytest.mark.parametrize("max_chars", [10, 13, 40, 100])
def test_offsets_round_trip_with_forced_cuts(max_chars: int) -> None:
    text = " ".join(f"word{i}," if i % 7 == 0 else f"word{i}" for i in range(200)) + ". Short one."
    spans = split_sentences(text, max_chars=max_chars)
    for span in spans:
        assert text[span.start : span.end] == span.text
        assert len(span.text) <= max_chars
    assert spans[-1].text == "Short one." and not spans[-1].forced
    assert all(span.forced for span in spans[:-1])


def test_forced_cut_prefers_comma_then_whitespace_then_hard() -> None:
    assert [(s.text, s.forced) for s in split_sentences("aaa bbb, ccc ddd eee", max_chars=10)] == [
        ("aaa bbb,", True),
        ("ccc ddd", True),
        ("eee", True),
    ]
    assert sentences("abcdefghijklmnop", max_chars=5) == ["abcde", "fghij", "klmno", "p"]
    assert split_sentences("Short.", max_chars=6) == [Span("Short.", 0, 6)]


def test_huge_unpunctuated_sentence_is_cut_fast() -> None:
    text = " ".join(f"w{i % 97}" for i in range(5000))
    t0 = time.perf_counter()
    spans = split_sentences(text)
    elapsed = time.perf_counter() - t0
    assert elapsed < 0.5
    assert len(spans) > 1
    assert all(span.forced and len(span.text) <= 2000 for span in spans)
    assert " ".join(span.text for span in spans) == text
    t0 = time.perf_counter()
    split_statements(text)
    assert time.perf_counter() - t0 < 0.5


def test_long_text_is_linear() -> None:
    text = "Dr. Smith paid $2.5 million, and he left. " * 4000 + "x." * 20000 + "..." * 20000
    t0 = time.perf_counter()
    split_statements(text)
    assert time.perf_counter() - t0 < 2.0


def test_unforced_spans_and_frozen() -> None:
    span = split_sentences("One. Two.")[0]
    assert span == Span("One.", 0, 4, forced=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        span.start = 1  # type: ignore[misc]


def test_statements_keep_forced_flag() -> None:
    text = "alpha beta gamma delta, and it is long " * 10
    spans = split_statements(text, max_chars=60)
    assert spans and all(span.forced for span in spans)


def test_max_chars_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        split_sentences("text", max_chars=0)


def test_doctests() -> None:
    result = doctest.testmod(statements_module)
    assert result.attempted > 0
    assert result.failed == 0
