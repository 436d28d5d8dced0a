"""Splitting text into words with character spans.

A hand-written scanner instead of a regular expression: the stdlib ``re`` has no ``\\p{M}``, and
combining marks (a decomposed "naïve" is ``nai`` + U+0308 + ``ve``) must stay inside their word.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

# Characters that join two word characters into one word ("e-mail", "don't", "O’Neill"). U+2010 and
# U+2011 are the typographic and non-breaking hyphens; ZWNJ/ZWJ occur inside Persian and Indic words.
# En and em dashes are deliberately absent: "1990–2000" and "word—word" are two words.
_JOINERS = frozenset("-'’\u2010\u2011\u200c\u200d")
# Characters that join only digits to digits ("3.5", "1,000"), so that "end.Next" is two words.
_NUMBER_JOINERS = frozenset(".,")
# The same rules as one regular expression: the scanner below is pure Python, and splitting contexts
# was most of a row's time on a GPU. ``[^\W_]`` is exactly ``str.isalnum`` and ``\d`` exactly
# ``str.isdecimal`` (both as CPython's ``re`` defines them on ``str``); the combining marks a word may
# hold are the ones the text contains, found per distinct character. tests/text/test_text_words.py
# compares the two on random strings.
_JOINER_CLASS = "".join(re.escape(c) for c in sorted(_JOINERS))


@lru_cache(maxsize=256)
def _pattern(marks: frozenset[str]) -> re.Pattern[str]:
    inner = "[^\\W_]" if not marks else "(?:[^\\W_]|[" + "".join(re.escape(m) for m in sorted(marks)) + "])"
    run = f"[^\\W_]{inner}*"
    return re.compile(f"{run}(?:(?:[{_JOINER_CLASS}]|(?<=\\d)[.,](?=\\d)){run})*")


@dataclass(frozen=True)
class Word:
    """A word of some text: ``text == source[start:end]``."""

    text: str
    start: int
    end: int


def _is_core(char: str) -> bool:
    # str.isalnum covers letters and digits of every script (and excludes "_", unlike re's \w).
    return char.isalnum()


def _is_mark(char: str) -> bool:
    return unicodedata.category(char)[0] == "M"


def split_words(text: str) -> list[Word]:
    """Split ``text`` into words, each with its character span in ``text``.

    A word is a maximal run of letters and digits of any script (combining marks included), which may
    contain, between two such characters, a hyphen or an apostrophe (``'`` or ``’``), and, between two
    digits, a ``.`` or ``,``. Punctuation, symbols, emoji and underscores are never part of a word.
    Scripts written without spaces (Chinese, Japanese, Thai) are not segmented: a run of such
    characters is one word.

    >>> [w.text for w in split_words("Baker's COVID-19 dose: 1,000.5 mg -- naïve e-mail...")]
    ["Baker's", 'COVID-19', 'dose', '1,000.5', 'mg', 'naïve', 'e-mail']
    >>> split_words("Hi, you.")
    [Word(text='Hi', start=0, end=2), Word(text='you', start=4, end=7)]
    """
    return [Word(m.group(), m.start(), m.end()) for m in _pattern(_marks(text)).finditer(text)]


def _marks(text: str) -> frozenset[str]:
    return frozenset() if text.isascii() else frozenset(c for c in set(text) if _is_mark(c))


# A context is split by the plan (its vocabulary) and again by the learned verdict's features:
# the few most recent texts are kept (a tuple, so no caller can change the cached value).
@lru_cache(maxsize=64)
def word_texts(text: str) -> tuple[str, ...]:
    """The texts of :func:`split_words` (``[w.text for w in split_words(text)]``), without spans.

    >>> word_texts("Baker's COVID-19 dose: 1,000.5 mg")
    ("Baker's", 'COVID-19', 'dose', '1,000.5', 'mg')
    """
    return tuple(_pattern(_marks(text)).findall(text))


def _scan(text: str) -> list[Word]:
    """:func:`split_words` one character at a time: the rules' reference, checked against the
    regular expression in the tests."""
    words: list[Word] = []
    n = len(text)
    i = 0
    while i < n:
        if not _is_core(text[i]):
            i += 1
            continue
        start = i
        i += 1
        while True:
            while i < n and (_is_core(text[i]) or _is_mark(text[i])):
                i += 1
            # A joiner continues the word only when a word character follows it, so "end." and
            # "dogs'" end before the punctuation and "a--b" is two words.
            if i + 1 < n and _is_core(text[i + 1]):
                joiner = text[i]
                if joiner in _JOINERS or (
                    joiner in _NUMBER_JOINERS and text[i - 1].isdecimal() and text[i + 1].isdecimal()
                ):
                    i += 1
                    continue
            break
        words.append(Word(text[start:i], start, i))
    return words


def normalize_word(word: str) -> str:
    """The form in which words are compared: case-folded, with ``’`` replaced by ``'``.

    >>> normalize_word("O’Neill")
    "o'neill"
    """
    return word.replace("’", "'").casefold()
