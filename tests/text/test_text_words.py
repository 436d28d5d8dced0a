"""split_words: what is and is not a word, and the spans it reports."""

from __future__ import annotations

import doctest
import itertools

import pytest

import ragsense.text._words as words_module
from ragsense.text import Word, normalize_word, split_words


def texts(text: str) -> list[str]:
    return [w.text for w in split_words(text)]


@pytest.mark.parametrize(
    "word",
    [
        "3.5",
        "1,000",
        "1,234.56",
        "COVID-19",
        "don't",
        "don’t",
        "O’Neill",
        "O'Neill",
        "three-dimensional",
        "naïve",
        "Zürich",
        "e-mail",
        "Baker's",
        "state-of-the-art",
        "東京",
        "Москва",
        "v1.2",
        "m²",
    ],
)
def test_single_words(word: str) -> None:
    assert split_words(word) == [Word(word, 0, len(word))]
    # Same word inside a sentence, flanked by punctuation.
    sentence = f"(See {word}, then.)"
    assert texts(sentence) == ["See", word, "then"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("end.", ["end"]),
        ("end.Next", ["end", "Next"]),  # "." joins digits only
        ("U.S.", ["U", "S"]),
        ("3.", ["3"]),
        ("1,2,a", ["1,2", "a"]),
        ("a,b", ["a", "b"]),
        ("a--b", ["a", "b"]),
        ("-- … ... !? — “ ”", []),
        ("well-", ["well"]),
        ("-well", ["well"]),
        ("dogs' bowls", ["dogs", "bowls"]),
        ("'tis 'quoted'", ["tis", "quoted"]),
        ("1990–2000", ["1990", "2000"]),  # en dash separates
        ("snake_case_name", ["snake", "case", "name"]),
        ("__init__", ["init"]),
        ("x' y", ["x", "y"]),
        ("price: $5 + 10% = €5.5", ["price", "5", "10", "5.5"]),
        ("🤗 hello 🤗world", ["hello", "world"]),
        ("", []),
        ("   \n\t ", []),
        ("rock'n'roll", ["rock'n'roll"]),
        ("1.5-2.0 mg/kg", ["1.5-2.0", "mg", "kg"]),
    ],
)
def test_boundaries(text: str, expected: list[str]) -> None:
    assert texts(text) == expected


def test_combining_marks_stay_inside_word() -> None:
    decomposed = "nai\u0308ve cafe\u0301"
    assert texts(decomposed) == ["nai\u0308ve", "cafe\u0301"]


def test_leading_combining_mark_is_not_a_word() -> None:
    assert texts("\u0301 ok") == ["ok"]


def test_spans_index_the_source() -> None:
    text = "  David Baker’s “naïve” 1,000-ton e-mail… 東京!  "
    result = split_words(text)
    assert [w.text for w in result] == ["David", "Baker’s", "naïve", "1,000-ton", "e-mail", "東京"]
    for word in result:
        assert text[word.start : word.end] == word.text
    starts = [w.start for w in result]
    assert starts == sorted(starts)
    assert all(a.end < b.start for a, b in itertools.pairwise(result))


def test_word_is_frozen() -> None:
    word = Word("a", 0, 1)
    with pytest.raises(AttributeError):
        word.text = "b"  # type: ignore[misc]


def test_normalize_word() -> None:
    assert normalize_word("O’NEILL") == "o'neill"
    assert normalize_word("Straße") == normalize_word("STRASSE")


def test_doctests() -> None:
    result = doctest.testmod(words_module)
    assert result.attempted > 0
    assert result.failed == 0


def test_the_regular_expression_equals_the_scanner_on_random_strings() -> None:
    """split_words runs a regular expression; the character scanner states the rules. The two must
    split alike: compared on strings drawn from the characters where the rules differ (joiners,
    number joiners, combining marks of three kinds, decimal and non-decimal digits of other scripts,
    the underscore, a spacing mark, format characters, CJK)."""
    import random

    rng = random.Random(36)
    alphabets = (
        "aZ09-'.,_ \n!",
        "aZ09-'.,_ \u0308\u0301\u093e\u0915\u0661\u00b2\u2010\u2011\u2019\u200c\u200d\u2013\u4e2d\u00e9",
    )
    for alphabet in alphabets:
        for _ in range(20_000):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
            assert split_words(text) == words_module._scan(text), ascii(text)
    for text in ("1,000.5 mg", "end.Next", "a--b", "dogs' 3.5.7 a1.5 1.a x-1 '-' O'Neill", "nai\u0308ve"):
        assert split_words(text) == words_module._scan(text), text


def test_non_ascii_text_keeps_its_marks_inside_words() -> None:
    assert texts("nai\u0308ve e\u2011mail 1,000 \u0661,\u0662") == [
        "nai\u0308ve", "e\u2011mail", "1,000", "\u0661,\u0662"
    ]  # fmt: skip
