"""Bindable spans of a text: the places a fact can be bound to, found with fixed rules and no model.

The binding check (:mod:`ragsense.text._binding`, :mod:`ragsense.consens._binding`) rebinds the spans of
an answer that its context states. Each span has a kind; only spans of one kind replace each other:

* ``number``: digits (``3``, ``1,000``, ``2.5``) and the number words zero to twenty, thirty to ninety
  and hundred/thousand; the word after it is kept as its *unit* (``5 million``, ``$3``, ``40 percent``);
* ``year``: four digits from 1000 to 2199;
* ``ordinal``: ``first`` to ``twentieth`` and ``1st``, ``2nd``, ``23rd``...;
* ``month`` and ``weekday`` names (a date is its month, day and year, each rebound alone);
* ``name``: a run of capitalised words (``Maria Lopez``, ``New York``), joined by ``of``/``de``/``van``/
  ``von``/``der``/``la``/``le``/``du``/``da``/``di``/``del`` between two capitalised words; a
  capitalised word that opens a sentence counts only when followed by another name word or written
  capitalised mid-sentence somewhere in the texts, and closed-class words never do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragsense.text._closed_class import is_closed_class
from ragsense.text._statements import split_sentences
from ragsense.text._words import Word, normalize_word, split_words

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
WORD_OF_NUMBER = {v: k for k, v in _NUMBER_WORDS.items()}
ORDINAL_WORDS = [
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
_ORDINALS: dict[str, int] = {w: i for i, w in enumerate(ORDINAL_WORDS) if i}
_ORDINAL_DIGITS = re.compile(r"^(\d+)(st|nd|rd|th)$")
_MONTHS = frozenset(
    "january february march april may june july august september october november december".split()  # noqa: SIM905
)
_WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday".split())  # noqa: SIM905
_YEAR = re.compile(r"^(1\d{3}|20\d{2}|21\d{2})$")
_DIGITS = re.compile(r"^\d[\d,]*(\.\d+)?$")
# Lowercase words that may join two capitalised words inside one name ("Bank of England").
_NAME_JOINERS = frozenset(["of", "de", "van", "von", "der", "la", "le", "du", "da", "di", "del"])
# Sentence-initial capitals that are never names even when the other text capitalises them.
_NEVER_NAMES = frozenset({"i"})


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


def number_value(norm: str) -> str | None:
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
    """Not a number, ordinal, month or weekday (those are spans of their own kinds, a possessive
    one too: "Sunday's game" holds a weekday, not a name)."""
    bare = _bare(norm)
    return not (
        bare in _MONTHS or bare in _WEEKDAYS or number_value(norm) is not None or _ordinal_value(norm)
    )


def bindable_spans(text: str, other_texts: Sequence[str] = ()) -> list[BindableSpan]:
    """The bindable spans of ``text``, in text order (see the module docstring for the kinds).

    ``other_texts`` help decide whether a capitalised sentence-initial word is a name (it is when
    ``text`` or one of them writes it capitalised mid-sentence).

    >>> [(s.kind, s.text, s.unit) for s in bindable_spans("In March 2004 the Oslo office hired 40 staff.")]
    [('month', 'March', ''), ('year', '2004', ''), ('name', 'Oslo', ''), ('number', '40', 'staff')]
    >>> [(s.kind, s.value) for s in bindable_spans("From the second day on, she was fourth.")]
    [('ordinal', '2'), ('ordinal', '4')]
    >>> [(s.kind, s.text) for s in bindable_spans("Torpedo Moscow fans sang at Sunday's game.")]
    [('name', 'Torpedo Moscow'), ('weekday', 'Sunday')]
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
            name = text[first.start : last.end]
            spans.append(BindableSpan("name", name, first.start, last.end, name_value(name)))
            i = j
            continue
        kind, value, end = "", "", w.end
        if _YEAR.match(norm):
            kind, value = "year", norm
        elif (number := number_value(norm)) is not None:
            kind, value = "number", number
        elif (ordinal := _ordinal_value(norm)) is not None:
            kind, value = "ordinal", ordinal
        elif _bare(norm) in _MONTHS or _bare(norm) in _WEEKDAYS:
            # The span stops before a possessive: "Sunday's" rebinds as "Monday's".
            kind = "month" if _bare(norm) in _MONTHS else "weekday"
            value, end = _bare(norm), w.end - (len(norm) - len(_bare(norm)))
        if kind:
            unit = ""
            if kind == "number" and i + 1 < len(words) and text[w.end : words[i + 1].start].strip() == "":
                nxt = normalize_word(words[i + 1].text)
                unit = "" if is_closed_class(nxt) else nxt
            if kind == "number" and text[max(0, w.start - 1) : w.start] in "$€£¥" and w.start > 0:
                unit = text[w.start - 1] + unit
            spans.append(BindableSpan(kind, text[w.start : end], w.start, end, value, unit))
        i += 1
    return spans


# Nationalities, peoples and languages: names of a type of their own, never a person's or a place's
# stand-in ("French" for "Macron" is a different claim in kind, not a rebinding).
_DEMONYMS = frozenset(
    """
    afghan african albanian algerian american arab arabic argentine argentinian armenian asian
    australian austrian bangladeshi belgian bolivian bosnian brazilian british bulgarian burmese
    cambodian canadian catalan chilean chinese colombian congolese croatian cuban czech danish dutch
    egyptian english eritrean estonian ethiopian european filipino finnish flemish french georgian
    german ghanaian greek haitian hebrew hindi hungarian icelandic indian indonesian iranian iraqi irish
    israeli italian jamaican japanese jewish jordanian kenyan korean kurdish latin latvian lebanese
    libyan lithuanian malaysian maltese mexican mongolian moroccan nepalese nigerian norwegian
    pakistani palestinian persian peruvian polish portuguese roman romanian russian saudi scottish
    serbian slovak slovenian somali spanish sudanese swedish swiss syrian taiwanese thai tibetan
    turkish ugandan ukrainian uzbek venezuelan vietnamese welsh yemeni zimbabwean
    """.split()  # noqa: SIM905
)
# Last words that make a name an organisation, institution or event rather than a person or place.
_ORGANISATION_HEADS = frozenset(
    """
    academy agency airlines airways association authority bank board bureau cathedral church
    club co college commission committee company corp corporation council court cup department
    festival fc foundation fund games group hospital inc institute league ltd ministry museum
    navy network observatory orchestra organisation organization parliament party press prize
    records school senate society studios team tournament trust union university
    """.split()  # noqa: SIM905
)


def name_value(text: str) -> str:
    """How a name compares with another: its normalised words without possessives.

    >>> name_value("Tate's Gallery")
    'tate gallery'
    """
    return " ".join(_bare(normalize_word(w.text)) for w in split_words(text))


def name_type(span: BindableSpan) -> str:
    """The type of a ``name`` span, from its words alone: ``demonym`` (a nationality, people or
    language), ``organisation`` (its last word names an institution, club or event, or its first
    does in a longer name: "University of Oslo") or ``name`` (a person, place or anything else);
    other kinds return their kind.

    >>> [name_type(s) for s in bindable_spans("The French team met Oxford University and Ana Ruiz.")]
    ['demonym', 'organisation', 'name']
    """
    if span.kind != "name":
        return span.kind
    words = span.value.split()
    if len(words) == 1 and (words[0] in _DEMONYMS or words[0].rstrip("s") in _DEMONYMS):
        return "demonym"
    if words[-1] in _ORGANISATION_HEADS or (len(words) > 2 and words[0] in _ORGANISATION_HEADS):
        return "organisation"
    return "name"


NUMBER_OR_ORDINAL_WORDS = frozenset(_NUMBER_WORDS) | frozenset(_ORDINALS)
"""Number and ordinal words (kept lowercase when they replace a word mid-sentence)."""
