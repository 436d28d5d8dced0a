"""The learned verdict (issue 36): features of one ConSens pass, and a small logistic model over them.

Every feature is read from what a ConSens pass already returns (each scored answer word's NLL with and
without the context and whether the context states it) and from the texts the pass read (the answer,
the context as kept); no model runs here. Every feature is a share, a mean, a minimum or a maximum,
never a count or a length, so the model cannot learn "short answers are right" from one data set:

* the reader's **per-word contrast** ``d = nll_empty - nll_context``: its mean and 25th percentile,
  the mean and minimum of the floored contrast (a stated word never counts against the answer), the
  support score's ``r``, and the mean contrast of the stated and of the unstated words;
* **lexical support**: the share of scored words the context states (exact, lemma or number match),
  and the share it states by exact match alone;
* **entity and number consistency**: the share of the answer's *key* words (a capitalised word that
  does not open its sentence, or a word with a digit) the context states, overall and in the weakest
  answer sentence;
* the **weakest answer sentence**'s support score;
* **attribution concentration**: one minus the normalised entropy of where in the context (which
  sentences) the answer's stated words are stated;
* **co-occurrence**, aimed at facts recombined wrongly (who did what, which date goes with which
  event): per answer sentence, the share of pairs of its stated words that one context sentence
  states together, the same for pairs that hold a key word, and the largest share of its stated words
  that one window of three consecutive context sentences states (mean and minimum over sentences).

The model (:class:`LearnedVerdict`) is a logistic regression on standardised features; its weights
ship as ``learned_verdict.json`` beside this module, fitted on the development halves of the labelled
sets of docs/results.md ("A learned verdict (issue 36)") by ``papers/consens/learned_verdict.py``.
Its score is ``tanh(z / 2)`` (= ``2 sigmoid(z) - 1``), in (-1, 1); ``r = z``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from itertools import combinations
from typing import Any, Protocol

from ragsense.consens._math import _quantile as sorted_quantile
from ragsense.consens._math import support_r
from ragsense.errors import ParameterError
from ragsense.text import SentenceIndex, normalize_word, split_sentences, word_texts

LEARNED_FORMAT = "ragsense.learned_verdict/1"
"""The ``format`` tag of a learned-verdict file; another tag is refused."""

FEATURES = (
    "mean_contrast",
    "q25_contrast",
    "mean_floored",
    "min_floored",
    "support_r",
    "stated_contrast",
    "unstated_contrast",
    "stated_share",
    "exact_share",
    "key_stated",
    "weakest_key_sentence",
    "weakest_sentence",
    "concentration",
    "pairs_mean",
    "pairs_min",
    "key_pairs_mean",
    "window_mean",
    "window_min",
)
"""The features, in the order :func:`learned_features` returns them (larger = more grounded, each)."""

# Pairs are counted within the first words of a long sentence only: the pair count grows with the
# square of the sentence, and 40 words already give 780 pairs.
_MAX_SENTENCE_WORDS = 40
_WINDOW = 1  # a window is a context sentence and this many sentences on each side


class ScoredWord(Protocol):
    """What a feature reads of a scored word (``WordDetail`` has it); offsets are into the answer."""

    @property
    def word(self) -> str: ...
    @property
    def start(self) -> int: ...
    @property
    def nll_empty(self) -> float: ...
    @property
    def nll_context(self) -> float: ...
    @property
    def stated(self) -> bool: ...


def _is_key(text: str, opens_sentence: bool) -> bool:
    """A number (a word with a digit) or a name (capitalised where it does not open a sentence)."""
    return any(c.isdigit() for c in text) or (not opens_sentence and text[:1].isupper())


@dataclass(frozen=True)
class _Context:
    """The context as sentences (one index of which sentence states which word) and the whole
    context's exact words. Read-only: one is shared by every answer to the same context."""

    sentences: SentenceIndex
    n_sentences: int
    exact: frozenset[str]

    @classmethod
    def of(cls, contexts: Sequence[str]) -> _Context:
        return _context_of(tuple(contexts))

    def where(self, word: str) -> frozenset[int]:
        """The context sentences that state ``word``."""
        return self.sentences.where(word)


# Two answers to one context (a pair, a guard's retries, a leave-one-out over the same documents) share
# its index instead of building it again.
@lru_cache(maxsize=32)
def _context_of(contexts: tuple[str, ...]) -> _Context:
    texts = [s.text for c in contexts for s in split_sentences(c)]
    exact = frozenset(normalize_word(w) for c in contexts for w in set(word_texts(c)))
    return _Context(SentenceIndex(texts), len(texts), exact)


def _pair_share(where: Sequence[frozenset[int]], keep: Sequence[bool]) -> float | None:
    """Share of the pairs (at least one of them kept) whose two words one context sentence states."""
    hits = total = 0
    for (a, ka), (b, kb) in combinations(list(zip(where, keep, strict=True))[:_MAX_SENTENCE_WORDS], 2):
        if ka or kb:
            total += 1
            hits += bool(a & b)
    return hits / total if total else None


def _window_share(where: Sequence[frozenset[int]]) -> float:
    """The largest share of the words one window of consecutive context sentences states."""
    centres = set().union(*where)
    best = 0
    for c in centres:
        window = range(c - _WINDOW, c + _WINDOW + 1)
        best = max(best, sum(1 for w in where if any(i in w for i in window)))
    return best / len(where)


def _concentration(where: Sequence[frozenset[int]], n_sentences: int) -> float:
    """1 - normalised entropy of the stated words' mass over context sentences (1 with one sentence)."""
    mass: dict[int, float] = {}
    for w in where:
        for i in w:
            mass[i] = mass.get(i, 0.0) + 1.0 / len(w)
    total = math.fsum(mass.values())
    if n_sentences < 2 or total == 0.0:
        return 1.0
    entropy = -math.fsum((m / total) * math.log(m / total) for m in mass.values())
    return 1.0 - entropy / math.log(n_sentences)


def _mean(values: Sequence[float], empty: float = 0.0) -> float:
    return math.fsum(values) / len(values) if values else empty


def learned_features(words: Sequence[ScoredWord], answer: str, contexts: Sequence[str]) -> list[float]:
    """The :data:`FEATURES` of one answer: its scored words (as a ConSens pass returns them, offsets
    into ``answer``) and the context documents the pass read.

    >>> from ragsense.consens._result import WordDetail
    >>> def w(text, start, d, stated):
    ...     return WordDetail(text, start, start + len(text), None, None, 1.0, 1.0 + d, stated)
    >>> ctx = ["Marie Curie discovered polonium in 1898. Pierre named the element."]
    >>> right = [w("Curie", 6, 2.0, True), w("discovered", 12, 1.0, True), w("polonium", 23, 3.0, True)]
    >>> swapped = [w("Pierre", 0, 2.0, True), w("discovered", 7, 1.0, True), w("polonium", 18, 3.0, True)]
    >>> f = dict(zip(FEATURES, learned_features(right, "Marie Curie discovered polonium.", ctx)))
    >>> g = dict(zip(FEATURES, learned_features(swapped, "Pierre discovered polonium.", ctx)))
    >>> f["stated_share"] == g["stated_share"] == 1.0, f["pairs_mean"], round(g["pairs_mean"], 3)
    (True, 1.0, 0.333)
    """
    if not words:
        raise ValueError("no words to aggregate")
    d = [w.nll_empty - w.nll_context for w in words]
    if any(not math.isfinite(x) for x in d):
        raise ValueError("word contrasts must be finite")
    stated = [bool(w.stated) for w in words]
    floored = [max(x, 0.0) if s else x for x, s in zip(d, stated, strict=True)]
    context = _Context.of(contexts)
    sentences = split_sentences(answer) or []
    # Each word to the answer sentence it starts in (the last one starting at or before it).
    by_sentence: dict[int, list[int]] = {}
    for k, w in enumerate(words):
        s = max((j for j, span in enumerate(sentences) if span.start <= w.start), default=0)
        by_sentence.setdefault(s, []).append(k)
    opens = {min(ks, key=lambda k: words[k].start) for ks in by_sentence.values()}
    key = [_is_key(w.word, k in opens) for k, w in enumerate(words)]
    where = [context.where(w.word) if s else frozenset() for w, s in zip(words, stated, strict=True)]

    weakest_support, weakest_key, pairs, key_pairs, windows = [], [], [], [], []
    for ks in by_sentence.values():
        weakest_support.append(2.0 * math.exp(support_r([d[k] for k in ks], [stated[k] for k in ks])) - 1.0)
        keys = [k for k in ks if key[k]]
        weakest_key.append(_mean([float(stated[k]) for k in keys], 1.0))
        # Distinct stated words of the sentence (a repeated word is not a relation with itself).
        seen: dict[str, int] = {}
        for k in ks:
            if stated[k] and where[k]:
                seen.setdefault(normalize_word(words[k].word), k)
        ws = list(seen.values())
        share = _pair_share([where[k] for k in ws], [True] * len(ws))
        pairs.append(1.0 if share is None else share)
        share = _pair_share([where[k] for k in ws], [key[k] for k in ws])
        key_pairs.append(1.0 if share is None else share)
        windows.append(_window_share([where[k] for k in ws]) if ws else 1.0)

    stated_d = [x for x, s in zip(d, stated, strict=True) if s]
    unstated_d = [x for x, s in zip(d, stated, strict=True) if not s]
    keys_all = [s for s, k in zip(stated, key, strict=True) if k]
    return [
        _mean(d),
        sorted_quantile(sorted(d), 0.25),
        _mean(floored),
        min(floored),
        support_r(d, stated),
        _mean(stated_d),
        _mean(unstated_d),
        _mean([float(s) for s in stated]),
        _mean([float(normalize_word(w.word) in context.exact) for w in words]),
        _mean([float(s) for s in keys_all], 1.0),
        min(weakest_key),
        min(weakest_support),
        _concentration([w for w in where if w], context.n_sentences),
        _mean(pairs),
        min(pairs),
        _mean(key_pairs),
        _mean(windows),
        min(windows),
    ]


def _numbers(data: Mapping[str, Any], name: str, n: int, where: str) -> list[float]:
    values = data.get(name)
    if not isinstance(values, list) or len(values) != n:
        raise ParameterError(f"{where}: {name!r} must be a list of {n} numbers", parameter="learned")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise ParameterError(f"{where}: {name!r} holds {v!r}, not a finite number", parameter="learned")
    return [float(v) for v in values]


@dataclass(frozen=True)
class LearnedVerdict:
    """A logistic model over :data:`FEATURES`: ``z = b + sum(coef * (orientation * x - mean) / scale)``.

    ``reader`` names the model whose evidence it was fitted on; ``fit`` keeps the fit's provenance.

    >>> m = LearnedVerdict([1.0] * 18, [0.0] * 18, [1.0] * 18, [0.0] * 17 + [2.0], -1.0, "fake")
    >>> round(m.score([0.0] * 17 + [1.0]), 4)  # tanh((2 * 1 - 1) / 2)
    0.4621
    >>> LearnedVerdict.from_dict(m.to_dict()) == m
    True
    """

    orientation: Sequence[float]
    mean: Sequence[float]
    scale: Sequence[float]
    coef: Sequence[float]
    intercept: float
    reader: str
    fit: Mapping[str, Any] = field(default_factory=dict)

    def r(self, features: Sequence[float]) -> float:
        """The logit ``z`` of ``features`` (in :data:`FEATURES` order)."""
        if len(features) != len(FEATURES):
            raise ValueError(f"expected {len(FEATURES)} features, got {len(features)}")
        terms = [
            c * (o * x - m) / s
            for x, o, m, s, c in zip(
                features, self.orientation, self.mean, self.scale, self.coef, strict=True
            )
        ]
        return self.intercept + math.fsum(terms)

    def score(self, features: Sequence[float]) -> float:
        """``tanh(z / 2)``, in (-1, 1)."""
        return math.tanh(self.r(features) / 2.0)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (with the ``format`` tag and the feature names)."""
        return {
            "format": LEARNED_FORMAT,
            "features": list(FEATURES),
            "orientation": list(self.orientation),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "coef": list(self.coef),
            "intercept": self.intercept,
            "reader": self.reader,
            "fit": dict(self.fit),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "learned verdict") -> LearnedVerdict:
        """Validated: the format tag, the same feature names in the same order, finite numbers, scales > 0."""
        if not isinstance(data, Mapping) or data.get("format") != LEARNED_FORMAT:
            tag = data.get("format") if isinstance(data, Mapping) else type(data).__name__
            raise ParameterError(f"{where}: format {tag!r}, expected {LEARNED_FORMAT!r}", parameter="learned")
        if data.get("features") != list(FEATURES):
            raise ParameterError(f"{where}: its features are not {', '.join(FEATURES)}", parameter="learned")
        n = len(FEATURES)
        scale = _numbers(data, "scale", n, where)
        if any(s <= 0.0 for s in scale):
            raise ParameterError(f"{where}: every scale must be > 0", parameter="learned")
        [intercept] = _numbers({"intercept": [data.get("intercept")]}, "intercept", 1, where)
        fit = data.get("fit")
        return cls(
            orientation=_numbers(data, "orientation", n, where),
            mean=_numbers(data, "mean", n, where),
            scale=scale,
            coef=_numbers(data, "coef", n, where),
            intercept=intercept,
            reader=str(data.get("reader", "")),
            fit=dict(fit) if isinstance(fit, Mapping) else {},
        )


LEARNED_FILE = "learned_verdict.json"


@cache
def learned_verdict() -> LearnedVerdict:
    """The shipped model (``ragsense/consens/learned_verdict.json``), read and validated once."""
    text = resources.files("ragsense.consens").joinpath(LEARNED_FILE).read_text(encoding="utf-8")
    return LearnedVerdict.from_dict(json.loads(text), where=f"ragsense/consens/{LEARNED_FILE}")


def learned_score(words: Sequence[ScoredWord], answer: str, contexts: Sequence[str]) -> tuple[float, float]:
    """``(score, r)`` of the shipped learned verdict for one scored answer (``--aggregation learned``)."""
    model = learned_verdict()
    features = learned_features(words, answer, contexts)
    return model.score(features), model.r(features)


@dataclass(frozen=True)
class _Rescored:
    word: str
    start: int
    nll_empty: float
    nll_context: float
    stated: bool


def learned_score_without(
    words: Sequence[ScoredWord],
    nll_context: Sequence[float],
    stated: Sequence[bool],
    answer: str,
    contexts: Sequence[str],
) -> float:
    """The learned score of ``words`` read against another context (leave-one-document-out): their
    NLLs under it and whether it states them."""
    moved = [
        _Rescored(w.word, w.start, w.nll_empty, c, s)
        for w, c, s in zip(words, nll_context, stated, strict=True)
    ]
    return learned_score(moved, answer, contexts)[0]
