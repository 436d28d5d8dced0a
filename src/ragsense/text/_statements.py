r"""Splitting text into sentences and an answer into atomic statements, by fixed rules.

VERA (validation and enhancement for retrieval-augmented systems) judges a retrieved context sentence by
sentence and an answer statement by statement: every atomic statement is marked relevant or not, and
grounded in the context or not. The paper lets an LLM do the splitting, which makes it vary between
runs; this module does it with deterministic rules, no model and no third-party package, so that the
same answer always yields the same statements. Every piece is a :class:`Span` with character offsets
into the original text (``text[span.start:span.end] == span.text``), stripped of surrounding whitespace.

Sentences (:func:`split_sentences`)
    * Every line break (``\n``, ``\r\n``, ``\r``, and the other separators of :meth:`str.splitlines`)
      is a hard boundary, so blank lines separate paragraphs and each line of a list is its own unit.
    * A list or layout marker at the start of a line is not part of the span: bullets ``-``, ``*``,
      ``+``, ``•``, ``‣``, ``◦``, ``–``, ``—``, numbers ``1.``, ``1)``, ``(1)``, letters ``a)``, ``(a)``,
      Markdown headings ``#`` and quote markers ``>``, each followed by whitespace.
    * Inside a line, a sentence ends after a run of ``.``, ``?``, ``!``, ``…`` plus any closing quotes
      or brackets (``He said "yes." Then`` ends after the quote), provided whitespace or the end of the
      line follows. ``。``, ``！`` and ``？`` end a sentence even with no space after them.
    * Never before a word that starts with a lowercase letter (``"Why?" she asked.`` is one sentence).
    * An ellipsis (``...`` or ``…``) ends a sentence only before an uppercase letter.
    * A period after a title or a prefix abbreviation (``Dr.``, ``Mr.``, ``Prof.``, ``e.g.``, ``i.e.``,
      ``vs.``, ``cf.``, ``Fig.``, ``approx.``, ...) never ends a sentence.
    * A period after an abbreviation that may also close a sentence (``Inc.``, ``Ltd.``, ``Co.``, ``Jr.``,
      ``St.``, ``No.``, month names, dotted acronyms such as ``U.S.`` or ``a.m.``), or after a single
      capital initial (``J. R. R. Tolkien``), ends it only when the next word is a frequent sentence
      starter (``The``, ``It``, ``He``, ``This``, ``In``, ``However``, ...), as Punkt-style splitters do:
      ``the U.S. Army`` stays whole while ``in the U.S. The`` is split. ``etc.`` and ``et al.`` end a
      sentence before any capitalised word.
    * A period inside a number (``3.14``, ``$2.5 million``) is never followed by whitespace, so never
      ends a sentence.
    * A sentence longer than ``max_chars`` is cut into pieces of at most ``max_chars`` characters, each
      marked ``forced=True``: at the last comma or semicolon before the limit, else at the last
      whitespace, else hard at the limit. Only the second half of each window is searched, so every
      piece is at least ``max_chars // 2`` long and the whole split stays linear in the text length.
    * Pieces with no letter or digit at all (a Markdown rule ``---``, a lone ``...``) are dropped.

Statements (:func:`split_statements`)
    Each sentence is split further where it joins two independent claims, and only there:

    * at a semicolon, when the clauses on both sides have at least 3 words and the right one does not
      start with ``and``/``or`` (the last item of a semicolon-separated list);
    * at ``, and`` / ``, but`` / ``, while`` / ``, whereas`` / ``, although``, when the clauses on both
      sides have at least 3 words and the right one starts with a likely subject: a pronoun (``he``,
      ``she``, ``it``, ``they``, ``we``, ``I``, ``you``, ``this``, ``these``, ``those``, ``there``), a
      determiner or possessive followed by a word (``the``, ``a``, ``an``, ``his``, ``its``, ``their``,
      ``our``, ``my``), or a capitalised word;
    * a clause is counted only up to the nearest comma, candidate separator or sentence edge, so the
      ``, and`` closing a series (``apples, pears, and plums``; ``Paris, London, and New York City``)
      and the items of a list (``John Smith, CEO; Mary Jones, CFO``) are never boundaries;
    * never inside double quotes (``"``, ``“…”``, ``«…»``) or brackets (``()``, ``[]``, ``{}``).

    The separator (``;`` or the comma and the conjunction) belongs to neither statement.

    The rules are conservative on purpose. Telling a clause with its own subject and verb from a
    coordinated phrase needs a parser; a wrong split produces a fragment with no subject (``"pears, and
    plums"``, ``"moved to Rome"``) that a judge cannot check against the context and therefore marks
    unsupported, which lowers a grounded answer's score. A missed split only leaves two claims in one
    statement, which is judged as a whole.

Known limits: single quotes are not tracked (they double as apostrophes); a line break inside a
sentence (hard-wrapped text) splits it; quotes and brackets are not tracked by the sentence splitter,
so a quotation holding several sentences is split inside.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass

from ragsense.text._words import Word, split_words


@dataclass(frozen=True)
class Span:
    """A piece of some text: ``source[start:end] == text``.

    ``forced`` is true for the pieces of a sentence longer than ``max_chars`` that was cut at a comma or
    a space instead of at a sentence boundary.
    """

    text: str
    start: int
    end: int
    forced: bool = False


# --- sentence rules -------------------------------------------------------------------------------------

# A run of terminators; a single character class with "+" never backtracks, so finditer is linear.
_TERMINATOR_RE = re.compile(r"[.?!…。！？]+")
# Terminators that end a sentence with no space after them (CJK full-width punctuation).
_HARD_TERMINATORS = frozenset("。！？")
# Characters that may follow a terminator and still belong to the sentence it ends.
_CLOSERS = frozenset("\"'”’»)]}」』》")
# Characters that may precede the first word of a sentence or the abbreviation before a period.
_OPENERS = frozenset("\"'“‘«([{「『《")
# A list, heading or quote marker at the start of a line (after indentation), then whitespace.
_MARKER_RE = re.compile(r"\s*(?:[-*+•‣◦–—]|\d{1,3}[.)]|\(\d{1,3}\)|[a-z]\)|\([a-zA-Z]\)|#{1,6}|>)\s+")
# "U.S", "e.g", "a.m", "Ph.D", "U.S.A": letters separated by periods (the final period excluded).
_DOTTED_RE = re.compile(r"(?:[A-Za-z]{1,2}\.)+[A-Za-z]{1,2}")


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


# Abbreviations (lowercase, without the final period) that never end a sentence: titles before a name and
# prefixes before what they introduce.
_NEVER_FINAL = _word_set(
    """mr mrs ms mx dr prof rev hon gen sen rep gov pres capt lt col sgt cmdr adm maj messrs mme mlle mt ft
    e.g i.e cf vs viz approx ca fig figs eq eqs vol vols pp p ch art ed eds"""
)
# Abbreviations that can close a sentence: the period ends it only before a frequent sentence starter.
_GATED = _word_set(
    """inc ltd co corp llc plc jr sr bros st no nos dept univ assn est sec min max
    jan feb mar apr jun jul aug sep sept oct nov dec"""
)
# Abbreviations that end a sentence before any capitalised word.
_FINAL_BEFORE_CAPITAL = frozenset({"etc", "al"})
# Words that frequently start a sentence (lowercase); they decide the ambiguous abbreviations above.
_SENTENCE_STARTERS = _word_set(
    """the a an this that these those there it its he she they we i you his her their our my
    in on at for from by with to of as if when while after before during since although though because
    but however yet so thus then therefore moreover furthermore also still today finally meanwhile
    what who which how why where some many most all each both one no not"""
)


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _has_alnum(text: str, start: int, end: int) -> bool:
    return any(text[i].isalnum() for i in range(start, end))


def _next_word(text: str, pos: int, end: int) -> tuple[str, bool]:
    """The word after ``pos`` (past whitespace and opening quotes/brackets), and whether it is an initial."""
    while pos < end and text[pos].isspace():
        pos += 1
    while pos < end and text[pos] in _OPENERS:
        pos += 1
    start = pos
    while pos < end and text[pos].isalpha() and pos - start < 32:
        pos += 1
    word = text[start:pos]
    is_initial = len(word) == 1 and word.isupper() and pos < end and text[pos] == "."
    if not word and start < end:
        word = text[start]  # a digit or a symbol: only its first character matters
    return word, is_initial


def _ends_sentence(text: str, line_start: int, run_start: int, run: str, after: int, end: int) -> bool:
    """Whether the terminator run ``text[run_start:...]`` (closers up to ``after``) ends a sentence."""
    next_word, next_is_initial = _next_word(text, after, end)
    if not next_word:
        return True
    first = next_word[0]
    if first.islower():
        return False
    if "?" in run or "!" in run:
        return True
    if len(run) > 1 or "…" in run:  # an ellipsis
        return first.isupper()
    # A single period: look at the token before it.
    k = run_start
    while k > line_start and not text[k - 1].isspace():
        k -= 1
    while k < run_start and text[k] in _OPENERS:
        k += 1
    token = text[k:run_start]
    if not token:
        return True
    norm = token.lower()
    if norm in _NEVER_FINAL:
        return False
    if norm in _FINAL_BEFORE_CAPITAL:
        return first.isupper()
    starter = next_word.lower() in _SENTENCE_STARTERS and not next_is_initial
    if len(token) == 1 and token.isupper():  # a capital initial, "J." of "J. R. R. Tolkien"
        return starter
    if norm in _GATED or _DOTTED_RE.fullmatch(token):
        return starter
    return True


def _line_sentences(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Raw (unstripped) sentence ranges of the line ``text[start:end]`` (which holds no line break)."""
    marker = _MARKER_RE.match(text, start, end)
    if marker is not None:
        start = marker.end()
    segment_start = start
    for match in _TERMINATOR_RE.finditer(text, start, end):
        run = match.group()
        after = match.end()
        while after < end and text[after] in _CLOSERS:
            after += 1
        if any(c in _HARD_TERMINATORS for c in run) or (
            (after == end or text[after].isspace())
            and _ends_sentence(text, start, match.start(), run, after, end)
        ):
            yield segment_start, after
            segment_start = after
    yield segment_start, end


def _force_cut(text: str, start: int, end: int, max_chars: int) -> Iterator[Span]:
    """Cut the stripped range ``text[start:end]`` into pieces of at most ``max_chars`` characters."""
    half = max(1, max_chars // 2)
    pos = start
    while end - pos > max_chars:
        limit = pos + max_chars
        floor = pos + half
        punct = max(text.rfind(",", floor, limit), text.rfind(";", floor, limit))
        if punct >= 0:
            cut = punct + 1
        else:
            cut = limit
            w = limit
            while w >= floor and not text[w].isspace():
                w -= 1
            if w >= floor:
                cut = w
        piece_start, piece_end = _trimmed(text, pos, cut)
        yield Span(text[piece_start:piece_end], piece_start, piece_end, forced=True)
        pos, _ = _trimmed(text, cut, end)
    yield Span(text[pos:end], pos, end, forced=True)


def split_sentences(text: str, *, max_chars: int = 2000) -> list[Span]:
    r"""Split ``text`` into sentences, each with its character offsets in ``text``.

    See the module docstring for the rules. Runs in time linear in ``len(text)``.

    >>> [s.text for s in split_sentences("Dr. Smith paid $2.5 million. He said \"yes.\" Then he left")]
    ['Dr. Smith paid $2.5 million.', 'He said "yes."', 'Then he left']
    >>> [s.text for s in split_sentences("Steps:\n1. Boil water.\n- Add J. R. R. Tolkien's salt")]
    ['Steps:', 'Boil water.', "Add J. R. R. Tolkien's salt"]
    >>> split_sentences("  Hi there.  Bye ")
    [Span(text='Hi there.', start=2, end=11, forced=False), Span(text='Bye', start=13, end=16, forced=False)]
    >>> [(s.text, s.forced) for s in split_sentences("one two, three four five", max_chars=12)]
    [('one two,', True), ('three four', True), ('five', True)]
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, got {max_chars}")
    spans: list[Span] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        line_end = offset + len(line.rstrip("\r\n\v\f\x1c\x1d\x1e\x85\u2028\u2029"))
        for raw_start, raw_end in _line_sentences(text, offset, line_end):
            start, end = _trimmed(text, raw_start, raw_end)
            if not _has_alnum(text, start, end):
                continue
            if end - start > max_chars:
                spans.extend(_force_cut(text, start, end, max_chars))
            else:
                spans.append(Span(text[start:end], start, end))
        offset += len(line)
    return spans


# --- statement rules ------------------------------------------------------------------------------------

_CONJUNCTION_RE = re.compile(r",\s+(?:and|but|while|whereas|although)\s+", re.IGNORECASE)
_SUBJECT_PRONOUNS = _word_set("he she it they we i you this these those there")
_DETERMINERS = _word_set("the a an his its their our my")
_MIN_CLAUSE_WORDS = 3


def _likely_subject(words: list[Word]) -> bool:
    first = words[0].text
    lower = first.lower()
    if lower in _SUBJECT_PRONOUNS:
        return True
    if lower in _DETERMINERS:
        return len(words) >= 2
    return first[0].isupper()


def _clause_markers(text: str, start: int, end: int) -> tuple[list[tuple[bool, int, int]], list[int]]:
    """Candidate boundaries outside quotes and brackets, as (is_semicolon, separator, right_start), and
    the positions of the commas outside quotes and brackets."""
    markers: list[tuple[bool, int, int]] = []
    commas: list[int] = []
    brackets = 0
    curly = 0
    straight = False
    for i in range(start, end):
        char = text[i]
        if char == '"':
            straight = not straight
        elif char in "“«":
            curly += 1
        elif char in "”»":
            curly = max(0, curly - 1)
        elif char in "([{":
            brackets += 1
        elif char in ")]}":
            brackets = max(0, brackets - 1)
        elif brackets or curly or straight:
            continue
        elif char == ",":
            commas.append(i)
            match = _CONJUNCTION_RE.match(text, i, end)
            if match is not None:
                markers.append((False, i, match.end()))
        elif char == ";":
            right = i + 1
            while right < end and text[right].isspace():
                right += 1
            markers.append((True, i, right))
    return markers, commas


def _sentence_statements(text: str, sentence: Span) -> Iterator[Span]:
    markers, commas = _clause_markers(text, sentence.start, sentence.end)
    cut_start = sentence.start
    for index, (is_semicolon, separator, right_start) in enumerate(markers):
        # Each side is counted up to the nearest comma, candidate separator or sentence edge, so that the
        # ", and" closing a series ("A, B, and C") or a list item ("Mary Jones, CFO") never passes.
        right_end = markers[index + 1][1] if index + 1 < len(markers) else sentence.end
        following = bisect.bisect_left(commas, right_start)
        if following < len(commas):
            right_end = min(right_end, commas[following])
        right_words = split_words(text[right_start:right_end])
        if len(right_words) < _MIN_CLAUSE_WORDS:
            continue
        if is_semicolon:
            if right_words[0].text.lower() in ("and", "or"):
                continue
        elif not _likely_subject(right_words):
            continue
        previous = bisect.bisect_left(commas, separator) - 1
        left_start = max(cut_start, commas[previous] + 1) if previous >= 0 else cut_start
        if len(split_words(text[left_start:separator])) < _MIN_CLAUSE_WORDS:
            continue
        piece_start, piece_end = _trimmed(text, cut_start, separator)
        yield Span(text[piece_start:piece_end], piece_start, piece_end, sentence.forced)
        cut_start = right_start
    piece_start, piece_end = _trimmed(text, cut_start, sentence.end)
    yield Span(text[piece_start:piece_end], piece_start, piece_end, sentence.forced)


def split_statements(text: str, *, max_chars: int = 2000) -> list[Span]:
    """Split an answer into atomic statements: sentences, cut again where they join independent clauses.

    See the module docstring for the rules; ``max_chars`` is passed to :func:`split_sentences`.

    >>> answer = "Paris is the capital of France, and it has 2 million inhabitants."
    >>> [s.text for s in split_statements(answer)]
    ['Paris is the capital of France', 'it has 2 million inhabitants.']
    >>> [s.text for s in split_statements("He bought apples, pears, and plums. It rained; we stayed home.")]
    ['He bought apples, pears, and plums.', 'It rained; we stayed home.']
    >>> [s.text for s in split_statements("She was born in 1990; she moved to Rome in 2010.")]
    ['She was born in 1990', 'she moved to Rome in 2010.']
    """
    statements: list[Span] = []
    for sentence in split_sentences(text, max_chars=max_chars):
        statements.extend(_sentence_statements(text, sentence))
    return statements
