"""ConSens's word filter: which answer words enter the perplexity."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ragsense.text._closed_class import is_closed_class
from ragsense.text._lemma import lemmas
from ragsense.text._words import Word, normalize_word, split_words

DropReason = Literal["closed_class", "in_question"]
Fallback = Literal["all_words", "no_words"]


@dataclass(frozen=True)
class ContentSelection:
    """The answer's words split into the ones ConSens scores (``kept``) and the rest (``dropped``).

    ``words`` holds every word of the answer in order; ``kept`` and ``dropped`` partition it, and
    ``kept_indices`` gives the positions of the kept words in ``words``. Align tokens against
    ``words`` (not ``kept``), so that a token is attributed with every word in view, then select
    ``kept_indices``. ``fallback`` is ``None`` when the filter left at least one word.
    """

    words: list[Word]
    kept: list[Word]
    kept_indices: list[int]
    dropped: list[tuple[Word, DropReason]]
    fallback: Fallback | None


def _strip_possessive(word: str) -> str:
    return word[:-2] if word.endswith("'s") and len(word) > 2 else word


def _question_keys(question: str) -> set[str]:
    # Each question word also matches with its "'s" removed, so "Baker's" in the question drops
    # "Baker" in the answer; the answer side strips its own "'s" in content_words for the converse.
    # Its lemmas ("l:" keys) drop the same word in another inflection ("build" in the question, "builds"
    # in the answer): the question primes it with and without the context alike, so its contrast is
    # near zero and, were it scored, it would count as an unsupported word the context never had to state.
    # Only the endings grammar forces: "tallest" answering "how tall" says more than the question.
    keys: set[str] = set()
    for word in split_words(question):
        norm = normalize_word(word.text)
        keys.add(norm)
        keys.add(_strip_possessive(norm))
        keys.update("l:" + lemma for lemma in lemmas(_strip_possessive(norm), degree=False))
    return keys


def _in_question(norm: str, question_keys: set[str]) -> bool:
    bare = _strip_possessive(norm)
    return (
        norm in question_keys
        or bare in question_keys
        or any("l:" + lemma in question_keys for lemma in lemmas(bare, degree=False))
    )


def content_words(answer: str, question: str | None) -> ContentSelection:
    """Select the answer words ConSens scores: neither closed-class nor repeated from the question.

    Words come from :func:`split_words`, so punctuation is never scored. A word is dropped as
    ``"closed_class"`` when :func:`is_closed_class` says so (checked first, since it does not depend
    on the question), else as ``"in_question"`` when it matches a question word: same word after
    case folding and reading ``’`` as ``'``, or the same once a trailing ``'s`` is removed from
    either side ("Baker's" matches "Baker" both ways), or a lemma in common by the rule of the lexical
    evidence, grammatical endings only (:func:`~ragsense.text._lemma.lemmas` with ``degree=False``:
    "builds" matches "build", "built" matches "builds", "tallest" does not match "tall"). Nothing
    fuzzier: inflection only, so "biologist" does not match "biology".

    Fallback, for answers the filter would empty (short answers often only repeat the question, as
    "Paris." for "Is Paris the capital of France?"): every word of the answer is kept and
    ``fallback="all_words"``. An answer with no words at all (empty, or only punctuation) keeps
    nothing and has ``fallback="no_words"``; a caller cannot score it.

    >>> sel = content_words("David Baker is a biochemist and computational biologist.",
    ...                     "What is David Baker known for?")
    >>> [w.text for w in sel.kept], sel.fallback
    (['biochemist', 'computational', 'biologist'], None)
    >>> sel = content_words("Paris.", "Is Paris the capital of France?")
    >>> [w.text for w in sel.kept], sel.fallback
    (['Paris'], 'all_words')
    """
    words = split_words(answer)
    if not words:
        return ContentSelection(words=[], kept=[], kept_indices=[], dropped=[], fallback="no_words")
    question_keys = _question_keys(question) if question else set()
    kept_indices: list[int] = []
    dropped: list[tuple[Word, DropReason]] = []
    for index, word in enumerate(words):
        norm = normalize_word(word.text)
        if is_closed_class(word.text):
            dropped.append((word, "closed_class"))
        elif _in_question(norm, question_keys):
            dropped.append((word, "in_question"))
        else:
            kept_indices.append(index)
    if not kept_indices:
        return ContentSelection(
            words=words,
            kept=list(words),
            kept_indices=list(range(len(words))),
            dropped=[],
            fallback="all_words",
        )
    return ContentSelection(
        words=words,
        kept=[words[i] for i in kept_indices],
        kept_indices=kept_indices,
        dropped=dropped,
        fallback=None,
    )
