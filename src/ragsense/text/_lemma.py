"""The lemmas a word may stand for: one rule for the lexical evidence and for question repeats.

No dictionary of the language, only English inflection undone by rule, so a word gets every lemma it
could have and two words match when they share one:

* the word itself ("succeed" is a lemma of "succeed", whatever it ends in);
* one suffix removed: ``-s``, ``-es``, ``-ed``, ``-ing``, ``-er``, ``-est``, ``-ly``; after ``-ed``,
  ``-ing``, ``-er``, ``-est`` and ``-es`` also with the ``e`` the suffix took ("baked" -> "bake"), and
  after a doubled final consonant also undoubled ("stopped" -> "stop", "running" -> "run");
* ``-ies`` and ``-ied`` as ``-y`` ("studies", "studied" -> "study");
* the common irregular verbs' past forms as their base ("built" -> "build", "went" -> "go").

A lemma must keep four letters, or three when the word shows it is whole: a three-letter stem of
``-s``, ``-es``, ``-ed`` or ``-ing`` that is not consonant-vowel-consonant ("add" of "added", "ask",
"aim"; "box" of "boxes"), one with its ``e`` ("use" of "used"), an undoubled one ("run" of
"running") or one from ``-ied``/``-ies`` ("try"). A consonant-vowel-consonant stem cut from a suffix
is not taken, because it usually lost an ``e`` or is another word ("cared" is not "car", "news" is
not "new"); "older" is not "old" nor "early" "ear"; "bee" and "bed" never meet.

>>> sorted(lemmas("succeeded")), sorted(lemmas("succeed"))
(['succeed', 'succeede', 'succeeded'], ['succe', 'succeed'])
>>> [bool(lemmas(a) & lemmas(b)) for a, b in [("succeeded", "succeed"), ("added", "adds"),
...     ("stopped", "stops"), ("studied", "study"), ("built", "builds"), ("used", "uses"),
...     ("running", "run"), ("cared", "car"), ("news", "new"), ("bee", "bed")]]
[True, True, True, True, True, True, True, False, False, False]
"""

from __future__ import annotations

from functools import lru_cache

_VOWELS = frozenset("aeiou")
_MIN_LEMMA = 4
_SHORT_LEMMA = 3
# (suffix, whether the stem may have lost an "e" to it), longest first so "-ies" goes before "-es".
_SUFFIXES = (
    ("ies", False),
    ("ied", False),
    ("ing", True),
    ("est", True),
    ("es", True),
    ("ed", True),
    ("er", True),
    ("ly", False),
    ("s", False),
)

# Base form, then its irregular past and past participle forms (the common verbs: those an answer
# paraphrasing a context meets; regular forms are left to the rules above). Forms that are as often a
# common noun are left out ("ground", "wound", "rose", "fell", "bit"), and so is "lay" (a verb of its own).
_IRREGULAR = """
arise arose arisen; awake awoke awoken; bear bore borne born; beat beaten; become became;
begin began begun; bend bent; bet; bind bound; bite bitten; bleed bled; blow blew blown;
break broke broken; breed bred; bring brought; build built; burn burnt; buy bought; catch caught;
choose chose chosen; cling clung; come came; cost; creep crept; cut; deal dealt; dig dug; draw drew
drawn; dream dreamt; drink drank drunk; drive drove driven; eat ate eaten; fall fallen; feed fed;
feel felt; fight fought; find found; flee fled; fly flew flown; forbid forbade forbidden; forget forgot
forgotten; forgive forgave forgiven; freeze froze frozen; get got gotten; give gave given; go went gone;
 grow grew grown; hang hung; hear heard; hide hid hidden; hit; hold held; hurt; keep kept;
kneel knelt; know knew known; lay laid; lead led; lean leant; leap leapt; learn learnt; leave left;
lend lent; let; lie lain; light lit; lose lost; make made; mean meant; meet met; pay paid; prove
proven; put; quit; read; ride rode ridden; ring rang rung; rise risen; run ran; say said; see saw
seen; seek sought; sell sold; send sent; set; shake shook shaken; shed; shine shone; shoot shot; show
shown; shrink shrank shrunk; shut; sing sang sung; sink sank sunk; sit sat; sleep slept; slide slid;
speak spoke spoken; speed sped; spend spent; spin spun; split; spread; spring sprang sprung; stand stood;
steal stole stolen; stick stuck; sting stung; strike struck stricken; strive strove striven; swear swore
sworn; sweep swept; swim swam swum; swing swung; take took taken; teach taught; tear tore torn; tell
told; think thought; throw threw thrown; undergo underwent undergone; understand understood; undertake
undertook undertaken; upset; wake woke woken; wear wore worn; weave wove woven; win won;
withdraw withdrew withdrawn; write wrote written
"""
IRREGULAR_BASE: dict[str, str] = {
    form: entry.split()[0] for entry in _IRREGULAR.replace("\n", " ").split(";") for form in entry.split()[1:]
}
"""An irregular past or participle form -> its base verb ("built" -> "build")."""


def _cvc(stem: str) -> bool:
    """Consonant, vowel, consonant: the three-letter shape of a stem that lost an "e" ("car" of "cared")."""
    return (
        len(stem) == _SHORT_LEMMA and stem[0] not in _VOWELS and stem[1] in _VOWELS and stem[2] not in _VOWELS
    )


def _strip(norm: str, suffix: str, takes_e: bool) -> set[str]:
    stem = norm[: -len(suffix)]
    if suffix in ("ies", "ied"):
        return {stem + "y"} if len(stem) + 1 >= _SHORT_LEMMA else set()
    out = set()
    # Three letters only from the verb and plural endings: "older" is not "old", "early" not "ear".
    # "-es" after a hissing sound is a plain plural, whatever the stem's shape ("boxes", "buses").
    hissing = suffix == "es" and stem.endswith(("s", "x", "z", "ch", "sh"))
    short_ok = (
        suffix in ("s", "es", "ed", "ing") and len(stem) == _SHORT_LEMMA and (hissing or not _cvc(stem))
    )
    if len(stem) >= _MIN_LEMMA or short_ok:
        out.add(stem)
    if takes_e and len(stem) + 1 >= _SHORT_LEMMA and not stem.endswith("e"):
        out.add(stem + "e")
    doubled = len(stem) >= _SHORT_LEMMA + 1 and stem[-1] == stem[-2] and stem[-1] not in _VOWELS
    if doubled and suffix in ("ed", "ing", "er", "est"):
        out.add(stem[:-1])
    return out


_DEGREE = ("er", "est", "ly")
"""Endings that make another word of the same root (a comparative, a superlative, an adverb)."""


@lru_cache(maxsize=65536)
def lemmas(norm: str, degree: bool = True) -> frozenset[str]:
    """Every lemma the normalized word ``norm`` (:func:`~ragsense.text.normalize_word`) may stand for.

    ``degree=False`` undoes only the endings grammar forces on a word (``-s``, ``-es``, ``-ed``,
    ``-ing``, irregular pasts), not ``-er``, ``-est``, ``-ly``: "tallest" answering "how tall" says more
    than the question does, while "builds" answering "what does it build on" only agrees with its subject.

    >>> sorted(lemmas("tallest")), sorted(lemmas("tallest", degree=False))
    (['tal', 'tall', 'talle', 'tallest'], ['tallest'])
    """
    if len(norm) < _SHORT_LEMMA:
        return frozenset({norm})  # itself, so "went" (lemma "go") meets "go"
    out = {norm}
    if norm in IRREGULAR_BASE:
        out.add(IRREGULAR_BASE[norm])
    for suffix, takes_e in _SUFFIXES:
        if not degree and suffix in _DEGREE:
            continue
        if norm.endswith(suffix) and len(norm) > len(suffix):
            out |= _strip(norm, suffix, takes_e)
            if suffix in ("ies", "ied"):
                break  # "-ies" is not also "-es" + "i": "studies" has no lemma "studi"
    return frozenset(out)


# Noun endings that name the act or result of a verb, longest first: "decipherment" is the act of
# deciphering, "completion" of completing. Other derivations change the meaning too often ("person" and
# "personal", "general" and "generation") and are left out.
_DERIVATIONS = (("ation", True), ("ition", True), ("ment", False), ("ion", True))
_MIN_DERIVED_STEM = 5


@lru_cache(maxsize=65536)
def derived_stems(norm: str) -> frozenset[str]:
    """The verbs a noun of action may come from: ``-ment``, ``-ation``, ``-ition``, ``-ion`` removed (a
    plural ``-s`` first), the stem keeping at least five letters, also with the ``e`` the ending took.
    Empty for any other word. The lexical evidence matches these stems with other words' lemmas
    (:mod:`ragsense.text._support`) where ``derived`` is on.

    >>> sorted(derived_stems("decipherment")), sorted(derived_stems("completions"))
    (['decipher'], ['complet', 'complete'])
    >>> sorted(lemmas("completed") & derived_stems("completion"))
    ['complet', 'complete']
    >>> derived_stems("million"), derived_stems("station"), derived_stems("comment")
    (frozenset(), frozenset(), frozenset())
    """
    word = norm[:-1] if norm.endswith("s") and not norm.endswith("ss") else norm
    for suffix, takes_e in _DERIVATIONS:
        if word.endswith(suffix):
            stem = word[: -len(suffix)]
            if len(stem) < _MIN_DERIVED_STEM or not stem.isalpha():
                return frozenset()
            return frozenset({stem, stem + "e"} if takes_e and not stem.endswith("e") else {stem})
    return frozenset()
