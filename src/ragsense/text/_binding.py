"""Bindable spans of an answer and the variants that rebind them: the binding check's text side.

Lexical support counts a word the context states as supported wherever the answer puts it, so an
answer built only from stated words but bound wrongly (two founders' roles swapped, a year moved to
another office, "second" where the context says "fourth", a negation dropped) looks fully supported.
The binding check asks the reader instead: it scores the answer and a few *variants* of it under the
same prompt, and a variant the context makes more likely than the answer marks the changed span as
misbound (:mod:`ragsense.consens._binding`). This module finds the spans and builds the variants,
with fixed rules and no model.

The spans come from :func:`~ragsense.text.bindable_spans` (:mod:`ragsense.text._bindable`).

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

from collections.abc import Sequence
from dataclasses import dataclass

from ragsense.text._bindable import (
    NUMBER_OR_ORDINAL_WORDS,
    ORDINAL_WORDS,
    WORD_OF_NUMBER,
    BindableSpan,
    bindable_spans,
    name_type,
    name_value,
    number_value,
)
from ragsense.text._closed_class import is_closed_class
from ragsense.text._statements import Span, split_sentences
from ragsense.text._support import ContextVocabulary
from ragsense.text._words import Word, normalize_word, split_words

DEFAULT_MAX_VARIANTS = 8
NO_NEGATION = "(no negation)"
"""The ``replacement`` of a variant that drops a negation word (there is no text to show for it)."""
"""Variants scored per answer at most (the cost of the check grows with it)."""
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


def _surface(target: BindableSpan, source: BindableSpan) -> str:
    """``source``'s value written in ``target``'s form (digits for digits, words for words)."""
    if target.kind in ("number", "ordinal") and target.kind == source.kind:
        as_word = target.text[:1].isalpha()
        value = int(float(source.value)) if source.value.replace(".", "", 1).isdigit() else None
        if target.kind == "number":
            if as_word and value is not None and str(value) == source.value and value in WORD_OF_NUMBER:
                return WORD_OF_NUMBER[value]
            if not as_word and number_value(normalize_word(source.text)) is not None:
                return source.value if source.text[:1].isalpha() else source.text
        else:
            if as_word and value is not None and 0 < value < len(ORDINAL_WORDS):
                return ORDINAL_WORDS[value]
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
            if replacement.split()[0].lower() not in NUMBER_OR_ORDINAL_WORDS
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


def _vocabulary(contexts: Sequence[str]) -> ContextVocabulary:
    """What the context states, for the binding check: inflections matched, nouns of action not.

    The check was measured with this rule (papers/consens/binding_check.py, binding_narrow.py; its
    findings are recomputed from stored rows against variants rebuilt at their ranks), so its variants
    stay what was measured when the lexical evidence's default match grows.
    """
    return ContextVocabulary(contexts, derived=False)


def _content_keys(text: str) -> set[str]:
    return {normalize_word(w.text) for w in split_words(text) if not is_closed_class(normalize_word(w.text))}


class _Sentences:
    """The sentences of a text with their ends, to find which sentence a position is in."""

    def __init__(self, text: str) -> None:
        self.spans = split_sentences(text) or []
        self.text = text

    def holding(self, position: int) -> Span | None:
        """The sentence holding ``position`` (None between sentences or past the last)."""
        for s in self.spans:
            if s.start <= position < s.end:
                return s
        return None

    def start_of(self, position: int) -> int:
        """Where the sentence holding ``position`` starts, less the whitespace before it."""
        found = self.holding(position)
        start = 0 if found is None else found.start
        while start > 0 and self.text[start - 1].isspace():
            start -= 1
        return start

    def end_of(self, position: int) -> int:
        found = self.holding(position)
        return len(self.text) if found is None else found.end

    def of(self, position: int) -> str:
        found = self.holding(position)
        return self.text if found is None else found.text


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
                else (word.text + change[2] if change[2] else NO_NEGATION),
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
    vocabulary = _vocabulary(contexts)
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


def _related(
    sentence: str, offset: int, spans: Sequence[BindableSpan], vocabulary: ContextVocabulary
) -> bool:
    """Whether a sentence states a relation for its spans: a content word the context states,
    outside every bindable span of the answer."""
    for w in split_words(sentence):
        start = offset + w.start
        if is_closed_class(normalize_word(w.text)) or any(s.start <= start < s.end for s in spans):
            continue
        if vocabulary.states(w.text):
            return True
    return False


def checkable_ranks(answer: str, contexts: Sequence[str], variants: Sequence[BindingVariant]) -> list[int]:
    """The ranks of the ``variants`` (of :func:`binding_variants`) that have something to check;
    the binding check scores only these (issue 46, amendment 2). Dropped:

    * a swap or substitution whose changed span's answer sentence has no other content word the
      context states (a bare answer, "Hillary Clinton.", holds no relation to check: rebinding it
      only asks the reader to answer the question again among the context's names);
    * a swap or substitution between names of different types (:func:`~ragsense.text.name_type`:
      a nationality, an organisation, any other name);
    * a swap of two mentions of one entity (names sharing a word: "Michael Phelps" and "Phelps").

    Negations are kept (their sentence must already be mostly stated).

    >>> ctx = ["Ana Ruiz founded Acme Bank in 2004 with French funds. Ben Cole joined in 1998."]
    >>> vs = binding_variants("Ana Ruiz.", ctx)
    >>> [v.replacement for v in vs], checkable_ranks("Ana Ruiz.", ctx, vs)
    (['Acme Bank', 'French', 'Ben Cole'], [])
    >>> answer = "Ana Ruiz founded Acme Bank in 2004."
    >>> vs = binding_variants(answer, ctx)
    >>> [(v.original, v.replacement) for v in vs][:3]
    [('Ana Ruiz', 'Acme Bank'), ('Ana Ruiz', 'Acme Bank'), ('Acme Bank', 'Ana Ruiz')]
    >>> [(vs[i].original, vs[i].replacement) for i in checkable_ranks(answer, ctx, vs)]
    [('2004', '1998'), ('Ana Ruiz', 'Ben Cole')]
    """
    if not variants:
        return []
    vocabulary = _vocabulary(contexts)
    spans = bindable_spans(answer, ["\n".join(contexts)])
    sentences = _Sentences(answer)
    related: dict[int, bool] = {}

    def sentence_related(position: int) -> bool:
        found = sentences.holding(position)
        start, text = (0, answer) if found is None else (found.start, found.text)
        if start not in related:
            related[start] = _related(text, start, spans, vocabulary)
        return related[start]

    def name_kind(text: str) -> str:
        return name_type(BindableSpan("name", text, 0, len(text), name_value(text)))

    keep = []
    for rank, v in enumerate(variants):
        if v.kind == "negation":
            keep.append(rank)
            continue
        if not all(sentence_related(start) for start, _ in v.spans):
            continue
        if v.span_kind == "name":
            texts = [answer[a:b] for a, b in v.spans]
            if v.kind == "substitute":
                texts.append(v.replacement)
            if len({name_kind(t) for t in texts}) > 1:
                continue
            if v.kind == "swap" and set(name_value(texts[0]).split()) & set(name_value(texts[1]).split()):
                continue
        keep.append(rank)
    return keep
