"""Lexical support: which answer words the context states, by exact, lemma and number match.

The grounding score reads each answer word's likelihood with and without the context. A small model
can fail to raise the likelihood of a word the context states verbatim (a rare name, a number), and
counting such a word against the answer is wrong: the context says it. So every scored word is also
matched against the context's words, with fixed rules and no model:

* **exact**: the same word after case folding (``’`` read as ``'``), a trailing ``'s`` ignored;
* **lemma**: a lemma in common, each word's lemmas found by undoing English inflection by rule
  (``-s``, ``-es``, ``-ies``, ``-ied``, ``-ed``, ``-ing`` with a lost ``e`` or a doubled consonant,
  ``-er``, ``-est``, ``-ly``, and the common irregular verbs, :mod:`ragsense.text._lemma`), so
  "designs" matches "designed", "succeeded" "succeed", "stopped" "stops", "built" "builds" and "studies"
  "study", but "cared"/"car", "news"/"new" and "bed"/"bee" stay apart;
* **number**: the same value once thousands separators are dropped ("1,000" is "1000", "3.50" is
  "3.5"), and the number words one to twenty as digits ("two" is "2");
* **parts**: a hyphenated word whose every part is stated ("COVID-19" in "COVID 19");
* **derived** (where ``derived`` is on; :data:`DERIVED_WORDS` says whether by default): a noun of
  action and the verb it names, ``-ment``, ``-ation``, ``-ition``, ``-ion`` removed from a stem of at
  least five letters ("decipherment" states "deciphering", "completed" states "completion";
  :func:`~ragsense.text._lemma.derived_stems`).

The same rules give the trivial *lexical support* baseline: the share of the answer's scored words
that the context does not state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache

from ragsense.text._lemma import derived_stems, lemmas
from ragsense.text._words import normalize_word, word_texts

_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        [
            *("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"),
            *("eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen"),
            *("eighteen", "nineteen", "twenty"),
        ]
    )
}


def _base(word: str) -> str:
    norm = normalize_word(word)
    return norm[:-2] if norm.endswith("'s") and len(norm) > 2 else norm


def _number(norm: str) -> str | None:
    """The canonical digits of a number word, or None."""
    if norm in _NUMBER_WORDS:
        return _NUMBER_WORDS[norm]
    plain = norm.replace(",", "")
    if not plain or not all(c.isdigit() or c == "." for c in plain) or plain.count(".") > 1:
        return None
    if not any(c.isdigit() for c in plain):
        return None
    if "." in plain:
        plain = plain.rstrip("0").rstrip(".")
    return plain.lstrip("0") or "0"


DERIVED_WORDS = True
"""Whether the lexical evidence matches a noun of action with its verb by default (the **derived**
rule above). On: by the rule of papers/consens/derived_words.py no development set's AUROC moved, and
the bundled sample's grounded Rosetta answer ("the key to deciphering" for "his decipherment") is
``grounded`` instead of ``unsure`` (docs/results.md, "Nouns of action")."""


# Memoised: a pass asks about the same context and answer words many times (every row's context,
# every sentence of it for the learned verdict's features); on a GPU this was most of a row's time.
# 32,768 words each (a few dozen contexts' vocabularies), so a long-running guard's memory stays
# bounded (some tens of MB at most for the two caches).
@lru_cache(maxsize=1 << 15)
def _keys(word: str, derived: bool = DERIVED_WORDS) -> frozenset[str]:
    """Every key under which ``word`` can be matched."""
    norm = _base(word)
    keys = {"w:" + norm}
    number = _number(norm)
    if number is not None:
        keys.add("n:" + number)
    keys.update("s:" + lemma for lemma in lemmas(norm))
    if derived:
        keys.update("s:" + stem for stem in derived_stems(norm))
    return frozenset(keys)


@lru_cache(maxsize=1 << 15)
def _word_keys(word: str, derived: bool = DERIVED_WORDS) -> frozenset[str]:
    """The keys a context word adds: its own and those of its hyphen parts."""
    keys = _keys(word, derived)
    for part in _parts(word):
        keys = keys | _keys(part, derived)
    return keys


class ContextVocabulary:
    """The match keys of a context's words, built once and asked about many answer words.

    >>> vocab = ContextVocabulary(["David Baker designed 1,000 proteins in two studies."])
    >>> [vocab.states(w) for w in ("Baker's", "designs", "1000", "2", "study", "Pauling")]
    [True, True, True, True, True, False]
    """

    def __init__(self, contexts: Iterable[str], *, derived: bool = DERIVED_WORDS) -> None:
        self.derived = derived
        self._keys: set[str] = set()
        for context in contexts:
            for word in set(word_texts(context)):
                self._keys |= _word_keys(word, derived)

    def states(self, word: str) -> bool:
        """Whether the context states ``word`` (exact, lemma or number match, or every hyphen part).

        >>> with_derived = ContextVocabulary(["Champollion announced his decipherment."], derived=True)
        >>> without = ContextVocabulary(["Champollion announced his decipherment."], derived=False)
        >>> with_derived.states("deciphering"), without.states("deciphering")
        (True, False)
        """
        if self._keys & _keys(word, self.derived):
            return True
        parts = _parts(word)
        return len(parts) > 1 and all(self._keys & _keys(p, self.derived) for p in parts)


class SentenceIndex:
    """Which of several texts (a context's sentences) state a word: for each text ``i``, exactly
    ``ContextVocabulary([texts[i]]).states(word)``, from one index of match keys instead of one
    vocabulary per text.

    >>> index = SentenceIndex(["Marie Curie discovered polonium.", "Pierre named the COVID vaccine."])
    >>> sorted(index.where("discovers")), sorted(index.where("Curie-Pierre")), sorted(index.where("COVID-19"))
    ([0], [], [])
    >>> sorted(SentenceIndex(["Curie met him.", "Pierre and Curie-Pierre."]).where("Curie-Pierre"))
    [1]
    """

    def __init__(self, texts: Sequence[str], *, derived: bool = DERIVED_WORDS) -> None:
        self.derived = derived
        self._index: dict[str, set[int]] = {}
        for i, text in enumerate(texts):
            for word in set(word_texts(text)):
                for key in _word_keys(word, derived):
                    self._index.setdefault(key, set()).add(i)

    def _stating(self, keys: frozenset[str]) -> set[int]:
        found: set[int] = set()
        for key in keys:
            found |= self._index.get(key, set())
        return found

    def where(self, word: str) -> frozenset[int]:
        """The texts that state ``word`` (exact, lemma or number match, or every hyphen part in it)."""
        found = self._stating(_keys(word, self.derived))
        parts = _parts(word)
        if len(parts) > 1:
            every = self._stating(_keys(parts[0], self.derived))
            for part in parts[1:]:
                every &= self._stating(_keys(part, self.derived))
            found |= every
        return frozenset(found)


def _parts(word: str) -> list[str]:
    return [p for p in word.replace("\u2010", "-").replace("\u2011", "-").split("-") if p]


def stated_in_context(words: Sequence[str], contexts: Iterable[str]) -> list[bool]:
    """For each of ``words``, whether the context states it (see the module docstring).

    >>> stated_in_context(["Seattle", "Pasadena", "designs"], ["Baker designed proteins in Seattle."])
    [True, False, True]
    """
    vocab = ContextVocabulary(contexts)
    return [vocab.states(w) for w in words]


def unsupported_share(words: Sequence[str], contexts: Iterable[str]) -> float:
    """The lexical-support baseline: the share of ``words`` the context does not state (0 when empty).

    >>> round(unsupported_share(["Linus", "Pauling", "Seattle"], ["Baker works in Seattle."]), 4)
    0.6667
    """
    if not words:
        return 0.0
    flags = stated_in_context(words, contexts)
    return sum(not f for f in flags) / len(flags)
