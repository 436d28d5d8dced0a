"""Bindable spans of an answer and the variants that rebind them: the binding check's text side.

Lexical support counts a word the context states as supported wherever the answer puts it, so an
answer built only from stated words but bound wrongly (two founders' roles swapped, a year moved to
another office, "second" where the context says "fourth", a negation dropped) looks fully supported.
The binding check asks the reader instead: it scores the answer and a few *variants* of it under the
same prompt, and a variant the context makes more likely than the answer marks the changed span as
misbound (:mod:`ragsense.consens._binding`). This module finds the spans and builds the variants,
with fixed rules and no model.

**Spans** (:func:`bindable_spans`), each with a kind; only spans of the same kind replace each other:

* ``number``: digits (``3``, ``1,000``, ``2.5``) and the number words zero to twenty, thirty to
  ninety and hundred/thousand; the word after it is kept as its *unit* (``5 million``, ``$3``,
  ``40 percent``), and a substitute with the same unit is tried first;
* ``year``: four digits from 1000 to 2199;
* ``ordinal``: ``first`` to ``twentieth`` and ``1st``, ``2nd``, ``23rd``...;
* ``month`` and ``weekday`` names (a date is its month, day and year, each rebound alone);
* ``name``: a run of capitalised words (``Maria Lopez``, ``New York``), joined by ``of``/``de``/
  ``van``/``von``/``der``/``la``/``le``/``du``/``da``/``di`` between two capitalised words; a
  capitalised word that opens a sentence counts only when the other text also writes it
  capitalised mid-sentence (so "The" or "Yes" never does), and closed-class words never do.

**Variants** (:func:`binding_variants`), for the spans the context states (every word of the span
matches a context word, :class:`~ragsense.text.ContextVocabulary`), most informative first and at most
``limit`` (8 by default):

1. *swaps* of two answer spans of one kind with different values (roles exchanged);
2. *negation*: an answer sentence whose content words the context mostly states, with its negation
   removed (``not``, ``n't``, ``never``) or, lacking one, ``not`` added after its first auxiliary
   (``is``, ``was``, ``has``, ``can``...);
3. *substitutions* of a span by a different same-kind span the context states, the candidates of each
   span ranked by how many content words their context sentence shares with the answer's sentence (the
   fact the answer most likely drew on comes first), then by position; spans take turns, so each gets
   its best candidate before any gets a second.

A variant keeps the answer's surface forms: a number written in digits is replaced in digits, a number
word by a number word where one exists, an ordinal likewise, and a replacement at a sentence start is
capitalised. Each variant records ``start`` and ``cut``: from the start of the answer sentence holding
its first change (less the whitespace before it) to the end of the sentence holding its last. The
reader compares the answer and the variant over that stretch only, after the same answer text before
it (the rest of the answer is the same text in both).

>>> answer = "Ana Ruiz founded the firm in 2004; Ben Cole joined in 1998."
>>> context = "Ben Cole founded the firm in 1998. Ana Ruiz joined it in 2004."
>>> [(v.kind, v.original, v.replacement) for v in binding_variants(answer, [context])][:3]
[('swap', 'Ana Ruiz', 'Ben Cole'), ('swap', '2004', '1998'), ('substitute', 'Ana Ruiz', 'Ben Cole')]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragsense.text._closed_class import is_closed_class
from ragsense.text._statements import split_sentences
from ragsense.text._support import ContextVocabulary
from ragsense.text._words import Word, normalize_word, split_words

DEFAULT_MAX_VARIANTS = 8
"""Variants scored per answer at most (the cost of the check grows with it)."""

_CARDINALS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
]
_TENS = {"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_BIG = {"hundred": 100, "thousand": 1000}
_NUMBER_WORDS: dict[str, int] = {w: i for i, w in enumerate(_CARDINALS)} | _TENS | _BIG
_WORD_OF_NUMBER = {v: k for k, v in _NUMBER_WORDS.items()}
_ORDINAL_WORDS = [
    "zeroth",
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
    "thirteenth",
    "fourteenth",
    "fifteenth",
    "sixteenth",
    "seventeenth",
    "eighteenth",
    "nineteenth",
    "twentieth",
]
_ORDINALS: dict[str, int] = {w: i for i, w in enumerate(_ORDINAL_WORDS) if i}
_ORDINAL_DIGITS = re.compile(r"^(\d+)(st|nd|rd|th)$")
_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_YEAR = re.compile(r"^(1\d{3}|20\d{2}|21\d{2})$")
_DIGITS = re.compile(r"^\d[\d,]*(\.\d+)?$")
# Lowercase words that may join two capitalised words inside one name ("Bank of England").
_NAME_JOINERS = frozenset(["of", "de", "van", "von", "der", "la", "le", "du", "da", "di", "del"])
# Sentence-initial capitals that are never names even when the other text capitalises them.
_NEVER_NAMES = frozenset({"i"})
_NEGATIONS = frozenset({"not", "never"})
_AUXILIARIES = frozenset(
    [
        "is",
        "are",
        "was",
        "were",
        "am",
        "be",
        "been",
        "has",
        "have",
        "had",
        "can",
        "could",
        "will",
        "would",
        "shall",
        "should",
        "may",
        "might",
        "must",
        "does",
        "do",
        "did",
    ]
)
_NT = {"can't": "can", "won't": "will", "shan't": "shall"}
# Per-answer limits per variant kind (the rest of the budget goes to substitutions).
_MAX_SWAPS = 4
_MAX_NEGATIONS = 2
_MAX_CANDIDATES = 4  # substitutes tried per span at most
_NEGATION_MIN_STATED = 0.5  # share of a sentence's content words the context must state


@dataclass(frozen=True)
class BindableSpan:
    """A span of some text that a fact can be bound to: ``text == source[start:end]``.

    ``kind`` is one of ``number``, ``year``, ``ordinal``, ``month``, ``weekday``, ``name``; ``value``
    compares spans of a kind (a number's value, a name's normalised words); ``unit`` is the word after
    a number (``million``), empty otherwise.
    """

    kind: str
    text: str
    start: int
    end: int
    value: str
    unit: str = ""


@dataclass(frozen=True)
class BindingVariant:
    """The answer with one change: ``text`` is the whole changed answer.

    ``kind``: ``swap``, ``substitute`` or ``negation``; ``span_kind``: the kind of the spans changed
    (``negation`` for a negation). ``spans`` are the changed character spans in the *answer*
    (``original`` is the text of the first, ``replacement`` what it became). ``start`` and ``cut``
    bound the stretch compared in the answer (the sentences changed; ``start`` is before the whitespace
    that precedes them); ``variant_cut`` is ``cut``'s place in ``text`` (``start`` is the same in both).
    """

    text: str
    kind: str
    span_kind: str
    spans: tuple[tuple[int, int], ...]
    original: str
    replacement: str
    start: int
    cut: int
    variant_cut: int


def _number_value(norm: str) -> str | None:
    if norm in _NUMBER_WORDS:
        return str(_NUMBER_WORDS[norm])
    if _DIGITS.match(norm):
        plain = norm.replace(",", "")
        if "." in plain:
            plain = plain.rstrip("0").rstrip(".")
        return plain.lstrip("0") or "0"
    return None


def _ordinal_value(norm: str) -> str | None:
    if norm in _ORDINALS:
        return str(_ORDINALS[norm])
    m = _ORDINAL_DIGITS.match(norm)
    return str(int(m.group(1))) if m else None


def _capitalised(word: str) -> bool:
    return (word[:1].isupper() and not word.isupper()) or (word.isupper() and len(word) > 1)


def _sentence_starts(text: str) -> set[int]:
    """Positions where a sentence starts (its first word may be capitalised for that reason alone)."""
    return {s.start for s in split_sentences(text)}


def _name_forms(texts: Sequence[str]) -> set[str]:
    """Normalised words that some text writes capitalised away from a sentence start."""
    forms: set[str] = set()
    for text in texts:
        starts = _sentence_starts(text)
        for w in split_words(text):
            if w.start not in starts and _capitalised(w.text) and not w.text[:1].isdigit():
                forms.add(normalize_word(w.text))
    return forms


def _is_name_word(word: Word, starts: set[int], known_names: set[str]) -> bool:
    norm = normalize_word(word.text)
    if not _capitalised(word.text) or word.text[:1].isdigit() or norm in _NEVER_NAMES:
        return False
    if not _plain_word(norm) or is_closed_class(_bare(norm)):
        return False
    return word.start not in starts or norm in known_names


def _bare(norm: str) -> str:
    """A normalised word without a possessive ``'s`` ("tate's" -> "tate")."""
    return norm[:-2] if norm.endswith("'s") and len(norm) > 2 else norm


def _plain_word(norm: str) -> bool:
    """Not a number, ordinal, month or weekday (those are spans of their own kinds)."""
    return not (
        norm in _MONTHS or norm in _WEEKDAYS or _number_value(norm) is not None or _ordinal_value(norm)
    )


def bindable_spans(text: str, other_texts: Sequence[str] = ()) -> list[BindableSpan]:
    """The bindable spans of ``text``, in text order (see the module docstring for the kinds).

    ``other_texts`` help decide whether a capitalised sentence-initial word is a name (it is when
    ``text`` or one of them writes it capitalised mid-sentence).

    >>> [(s.kind, s.text, s.unit) for s in bindable_spans("In March 2004 the Oslo office hired 40 staff.")]
    [('month', 'March', ''), ('year', '2004', ''), ('name', 'Oslo', ''), ('number', '40', 'staff')]
    >>> [(s.kind, s.value) for s in bindable_spans("From the second day on, she was fourth.")]
    [('ordinal', '2'), ('ordinal', '4')]
    """
    words = split_words(text)
    starts = _sentence_starts(text)
    known_names = _name_forms([text, *other_texts])
    spans: list[BindableSpan] = []
    i = 0
    while i < len(words):
        w = words[i]
        norm = normalize_word(w.text)
        opens_name = (
            w.start in starts
            and _capitalised(w.text)
            and not is_closed_class(norm)
            and _plain_word(norm)
            and i + 1 < len(words)
            and text[w.end : words[i + 1].start] == " "
            and _is_name_word(words[i + 1], starts, known_names)
        )  # "Ana Ruiz joined": a capital that opens the sentence, followed by a name word
        if opens_name or _is_name_word(w, starts, known_names):
            j = i + 1
            while j < len(words):
                gap = text[words[j - 1].end : words[j].start]
                if gap != " ":
                    break
                if _is_name_word(words[j], starts, known_names):
                    j += 1
                elif (
                    normalize_word(words[j].text) in _NAME_JOINERS
                    and j + 1 < len(words)
                    and text[words[j].end : words[j + 1].start] == " "
                    and _is_name_word(words[j + 1], starts, known_names)
                ):
                    j += 2
                else:
                    break
            first, last = words[i], words[j - 1]
            value = " ".join(_bare(normalize_word(x.text)) for x in words[i:j])
            spans.append(BindableSpan("name", text[first.start : last.end], first.start, last.end, value))
            i = j
            continue
        kind, value = "", ""
        if _YEAR.match(norm):
            kind, value = "year", norm
        elif (number := _number_value(norm)) is not None:
            kind, value = "number", number
        elif (ordinal := _ordinal_value(norm)) is not None:
            kind, value = "ordinal", ordinal
        elif norm in _MONTHS:
            kind, value = "month", norm
        elif norm in _WEEKDAYS:
            kind, value = "weekday", norm
        if kind:
            unit = ""
            if kind == "number" and i + 1 < len(words) and text[w.end : words[i + 1].start].strip() == "":
                nxt = normalize_word(words[i + 1].text)
                unit = "" if is_closed_class(nxt) else nxt
            if kind == "number" and text[max(0, w.start - 1) : w.start] in "$€£¥" and w.start > 0:
                unit = text[w.start - 1] + unit
            spans.append(BindableSpan(kind, w.text, w.start, w.end, value, unit))
        i += 1
    return spans


def _surface(target: BindableSpan, source: BindableSpan) -> str:
    """``source``'s value written in ``target``'s form (digits for digits, words for words)."""
    if target.kind in ("number", "ordinal") and target.kind == source.kind:
        as_word = target.text[:1].isalpha()
        value = int(float(source.value)) if source.value.replace(".", "", 1).isdigit() else None
        if target.kind == "number":
            if as_word and value is not None and str(value) == source.value and value in _WORD_OF_NUMBER:
                return _WORD_OF_NUMBER[value]
            if not as_word and _number_value(normalize_word(source.text)) is not None:
                return source.value if source.text[:1].isalpha() else source.text
        else:
            if as_word and value is not None and 0 < value < len(_ORDINAL_WORDS):
                return _ORDINAL_WORDS[value]
            if not as_word and value is not None:
                suffix = {1: "st", 2: "nd", 3: "rd"}.get(value % 10 if value % 100 not in (11, 12, 13) else 0)
                return f"{value}{suffix or 'th'}"
    return source.text


def _cased(replacement: str, original: str) -> str:
    if original[:1].isupper() and replacement[:1].islower():
        return replacement[:1].upper() + replacement[1:]
    if original[:1].islower() and replacement[:1].isupper() and original[:1].isalpha():
        # A number or ordinal word mid-sentence stays lowercase; a name keeps its capital.
        return (
            replacement
            if replacement.split()[0].lower() not in _NUMBER_WORDS | _ORDINALS
            else (replacement[:1].lower() + replacement[1:])
        )
    return replacement


def _apply(answer: str, changes: Sequence[tuple[int, int, str]]) -> tuple[str, int]:
    """``answer`` with each ``(start, end, replacement)`` applied, and the length change before the
    last change's end."""
    out, pos, shift = [], 0, 0
    for start, end, replacement in sorted(changes):
        out.append(answer[pos:start])
        out.append(replacement)
        shift += len(replacement) - (end - start)
        pos = end
    out.append(answer[pos:])
    return "".join(out), shift


def _content_keys(text: str) -> set[str]:
    return {normalize_word(w.text) for w in split_words(text) if not is_closed_class(normalize_word(w.text))}


class _Sentences:
    """The sentences of a text with their ends, to find which sentence a position is in."""

    def __init__(self, text: str) -> None:
        self.spans = split_sentences(text) or []
        self.text = text

    def start_of(self, position: int) -> int:
        """Where the sentence holding ``position`` starts, less the whitespace before it."""
        start = 0
        for s in self.spans:
            if s.start <= position < s.end:
                start = s.start
                break
        while start > 0 and self.text[start - 1].isspace():
            start -= 1
        return start

    def end_of(self, position: int) -> int:
        for s in self.spans:
            if s.start <= position < s.end:
                return s.end
        return len(self.text)

    def of(self, position: int) -> str:
        for s in self.spans:
            if s.start <= position < s.end:
                return s.text
        return self.text


def _variant(
    answer: str,
    sentences: _Sentences,
    changes: Sequence[tuple[int, int, str]],
    kind: str,
    span_kind: str,
) -> BindingVariant:
    text, shift = _apply(answer, changes)
    cut = max(sentences.end_of(start) for start, _, _ in changes)
    first = min(changes)
    return BindingVariant(
        text=text,
        kind=kind,
        span_kind=span_kind,
        spans=tuple(sorted((s, e) for s, e, _ in changes)),
        original=answer[first[0] : first[1]],
        replacement=first[2],
        start=min(sentences.start_of(start) for start, _, _ in changes),
        cut=cut,
        variant_cut=cut + shift,
    )


def _negation_change(
    answer: str, offset: int, words: Sequence[Word]
) -> tuple[tuple[int, int, str], Word] | None:
    """The change that flips one sentence's negation, and the answer word it is shown on."""
    for w in words:
        norm = normalize_word(w.text)
        start, end = offset + w.start, offset + w.end
        if norm in _NEGATIONS:
            # Drop the word and the space before it ("was not built" -> "was built").
            before = start - 1 if start > 0 and answer[start - 1] == " " else start
            return (before, end, ""), w
        if norm.endswith("n't"):
            return (start, end, _cased(_NT.get(norm, norm[:-3]), w.text)), w
    for k, w in enumerate(words):
        if normalize_word(w.text) in _AUXILIARIES and k + 1 < len(words):
            end = offset + w.end
            return (end, end, " not"), w
    return None


def _negation_variants(
    answer: str, sentences: _Sentences, vocabulary: ContextVocabulary
) -> list[BindingVariant]:
    out: list[BindingVariant] = []
    for sentence in sentences.spans:
        words = split_words(sentence.text)
        content = [w for w in words if not is_closed_class(normalize_word(w.text))]
        stated = sum(vocabulary.states(w.text) for w in content)
        if not content or stated < _NEGATION_MIN_STATED * len(content):
            continue
        found = _negation_change(answer, sentence.start, words)
        if found is None:
            continue
        change, word = found
        text, shift = _apply(answer, [change])
        shown = (sentence.start + word.start, sentence.start + word.end)
        out.append(
            BindingVariant(
                text=text,
                kind="negation",
                span_kind="negation",
                spans=(shown,),
                original=word.text,
                replacement=text[shown[0] : sentence.end + shift].split(" ")[0]
                if change[2] and change[0] != change[1]
                else (word.text + change[2] if change[2] else "(no negation)"),
                start=sentences.start_of(sentence.start),
                cut=sentence.end,
                variant_cut=sentence.end + shift,
            )
        )
        if len(out) >= _MAX_NEGATIONS:
            break
    return out


def binding_variants(
    answer: str, contexts: Sequence[str], *, limit: int = DEFAULT_MAX_VARIANTS
) -> list[BindingVariant]:
    """Variants of ``answer`` that rebind its context-stated spans, most informative first (see the
    module docstring). No variant when no span the context states has an alternative.

    >>> binding_variants("The sky is blue.", ["The sky is blue today."], limit=4)[0].text
    'The sky is not blue.'
    >>> binding_variants("Paris.", ["Paris is big."])  # no alternative: nothing to rebind
    []
    """
    if limit <= 0:
        return []
    vocabulary = ContextVocabulary(contexts)
    context_text = "\n".join(contexts)
    sentences = _Sentences(answer)
    spans = [
        s
        for s in bindable_spans(answer, [context_text])
        if all(vocabulary.states(w.text) for w in split_words(s.text))
    ]
    variants: list[BindingVariant] = []
    seen: set[str] = {answer}

    def add(v: BindingVariant) -> None:
        if v.text not in seen and len(variants) < limit:
            seen.add(v.text)
            variants.append(v)

    swaps = 0
    for a_i, a in enumerate(spans):
        for b in spans[a_i + 1 :]:
            if swaps < _MAX_SWAPS and a.kind == b.kind and a.value != b.value:
                changes = [(a.start, a.end, _cased(b.text, a.text)), (b.start, b.end, _cased(a.text, b.text))]
                before = len(variants)
                add(_variant(answer, sentences, changes, "swap", a.kind))
                swaps += len(variants) - before
    for v in _negation_variants(answer, sentences, vocabulary):
        add(v)
    if not spans:
        return variants
    context_spans = bindable_spans(context_text, [answer])
    ctx_sentences = _Sentences(context_text)
    ranked: list[list[BindableSpan]] = []
    for span in spans:
        keys = _content_keys(sentences.of(span.start))
        pool: dict[str, tuple[tuple[int, int, int], BindableSpan]] = {}
        for c in context_spans:
            if c.kind != span.kind or c.value == span.value:
                continue
            if c.kind == "name" and (set(c.value.split()) & set(span.value.split())):
                continue  # "Mozart" for "Wolfgang Amadeus Mozart": the same entity, not another
            overlap = len(keys & _content_keys(ctx_sentences.of(c.start)))
            rank = (-int(c.unit == span.unit), -overlap, c.start)
            if c.value not in pool or rank < pool[c.value][0]:
                pool[c.value] = (rank, c)
        ranked.append([c for _, c in sorted(pool.values(), key=lambda x: x[0])][:_MAX_CANDIDATES])
    for turn in range(_MAX_CANDIDATES):
        for span, candidates in zip(spans, ranked, strict=True):
            if turn < len(candidates):
                replacement = _cased(_surface(span, candidates[turn]), span.text)
                add(
                    _variant(
                        answer, sentences, [(span.start, span.end, replacement)], "substitute", span.kind
                    )
                )
    return variants
