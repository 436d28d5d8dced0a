"""How a score and its verdict are shown: one rule for the table, JUnit, the guard, ``runs show`` and
the report, and the one function that explains a row's verdict in words.

The rule at a band edge: a verdict is decided on the exact score (:meth:`Bands.verdict`); an edge is
shown at every digit it has (``+0.83``, or ``+1.0000000000000002`` where a fit put it just above 1, so
that ``grounded >= +1.000`` never hides an edge no score reaches); a score is shown at two decimals,
or with as many more as it takes for the shown number, read against the shown edges, to fall in the
band the exact score fell in (``-0.2304 ungrounded`` beside ``ungrounded < -0.23``, never ``-0.23
ungrounded``).

>>> b = Bands("support", grounded_at=0.83, ungrounded_below=-0.23)
>>> score_text(-0.2304, b), score_text(-0.2296, b), score_text(0.5, b)
('-0.2304', '-0.23', '+0.50')
>>> bands_text(b.to_dict())
'grounded >= +0.83, ungrounded < -0.23 on support (default)'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ragsense.consens._binding import binding_reasons
from ragsense.consens._verdicts import Bands, weakest_words

SCORE_DIGITS = 2
"""Decimals of a score away from an edge."""
WEAKEST_EXPLAINED = 3
"""Weakest words named in a row's explanation (the table's count)."""


def edge_text(edge: float) -> str:
    """A band edge with its sign and every digit it has (at least two decimals).

    >>> edge_text(0.83), edge_text(-0.2), edge_text(math.nextafter(1.0, 2.0))
    ('+0.83', '-0.20', '+1.0000000000000002')
    """
    for digits in range(SCORE_DIGITS, 18):
        text = f"{edge:+.{digits}f}"
        if float(text) == edge:
            return text
    return f"{edge:+}"


def score_text(score: float, bands: Bands | None = None, digits: int = SCORE_DIGITS) -> str:
    """``score`` at ``digits`` decimals (two in the terminal; the report shows three), or with more where
    that would read as another band under ``bands``.

    >>> score_text(1.0, Bands("q25", grounded_at=math.nextafter(1.0, 2.0), ungrounded_below=0.0))
    '+1.00'
    >>> score_text(0.8299999, Bands("support", grounded_at=0.83, ungrounded_below=-0.23))
    '+0.8299999'
    >>> score_text(-0.2304, Bands("support", grounded_at=0.83, ungrounded_below=-0.23), digits=3)
    '-0.2304'
    """
    if not math.isfinite(score):
        return str(score)
    text = f"{score:+.{digits}f}"
    if bands is None:
        return text
    band = bands.verdict(score)
    for more in range(digits, 18):
        text = f"{score:+.{more}f}"
        if bands.verdict(float(text)) == band:
            return text
    return f"{score:+}"


def bands_text(bands: Any) -> str | None:
    """Stored bands (:meth:`Bands.to_dict`) in one line, edges shown by :func:`edge_text`; None when
    ``bands`` is not a bands mapping.

    >>> bands_text({"score": "q25", "grounded_at": 0.2, "ungrounded_below": -0.1, "origin": "default"})
    'grounded >= +0.20, ungrounded < -0.10 on q25 (default)'
    >>> bands_text(None) is None
    True
    """
    if not isinstance(bands, Mapping) or not {"grounded_at", "ungrounded_below"} <= bands.keys():
        return None
    return (
        f"grounded >= {edge_text(float(bands['grounded_at']))}, "
        f"ungrounded < {edge_text(float(bands['ungrounded_below']))} "
        f"on {bands.get('score', bands.get('aggregation', '?'))} ({bands.get('origin', 'file')})"
    )


def bands_note(a: Any, b: Any) -> str | None:
    """The note two runs' verdicts need when their bands differ (counts under different edges differ
    for that reason alone): ``ragsense compare`` prints it and a two-run report shows it; None when the
    bands are the same or a run recorded none.

    >>> one = {"score": "q25", "grounded_at": 0.2, "ungrounded_below": -0.1, "origin": "default"}
    >>> bands_note(one, {**one, "grounded_at": 0.3})  # doctest: +ELLIPSIS
    'the runs used different verdict bands: A grounded >= +0.20, ... B grounded >= +0.30, ...'
    >>> bands_note(one, dict(one)) is None
    True
    """
    text_a, text_b = bands_text(a), bands_text(b)
    if text_a is None or text_b is None or text_a == text_b:
        return None
    return f"the runs used different verdict bands: A {text_a}; B {text_b}"


def band_rule(bands: Bands, verdict: str) -> str:
    """The edge a verdict was decided by, in words (``ungrounded < -0.23``); empty for a verdict the
    bands do not decide (``refusal``).

    >>> b = Bands("support", grounded_at=0.83, ungrounded_below=-0.23)
    >>> band_rule(b, "unsure"), band_rule(b, "refusal")
    ('-0.23 <= unsure < +0.83', '')
    """
    low, high = edge_text(bands.ungrounded_below), edge_text(bands.grounded_at)
    rules = {
        "grounded": f"grounded >= {high}",
        "unsure": f"{low} <= unsure < {high}",
        "ungrounded": f"ungrounded < {low}",
    }
    return rules.get(verdict, "")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _word_note(word: Mapping[str, Any]) -> str:
    return "stated" if word["stated"] else f"{word['contrast']:+.2f}"


def explain_row(
    row: Mapping[str, Any],
    bands: Bands | None = None,
    *,
    score: str = "consens",
    verdict: str = "verdict",
    words: int = WEAKEST_EXPLAINED,
) -> str:
    """Why a row got its verdict, in one line: the verdict, the score (:func:`score_text`), the band
    edge that decided it, the binding check's findings (:func:`~ragsense.consens.binding_reasons`) and
    the answer's weakest words (:func:`weakest_words`' order). The one place a row's reason is put into
    words: JUnit row failures, the guard's ``reason``, the pytest plug-in's row lines and the framework
    integrations' feedback call it.

    >>> row = {"consens": -0.2304, "verdict": "ungrounded", "words": [
    ...     {"word": "Pasadena", "start": 0, "end": 8, "nll_empty": 1.0, "nll_context": 1.25}]}
    >>> explain_row(row, Bands("support", grounded_at=0.83, ungrounded_below=-0.23))
    'ungrounded: consens -0.2304 (ungrounded < -0.23); weakest words: Pasadena (-0.25)'
    >>> explain_row({"consens": None, "verdict": None})
    'not scored'
    >>> explain_row({"consens": -0.7, "verdict": "ungrounded", "binding": [{"kind": "substitute",
    ...     "span_kind": "ordinal", "spans": [[24, 30]], "original": "second", "replacement": "fourth",
    ...     "margin": 8.31, "lift": 6.6, "misbound": True}]})
    "ungrounded: consens -0.70; the context prefers 'fourth' to 'second' here, by 8.3 nats"
    """
    value = row.get(score)
    shown = row.get(verdict)
    parts = []
    if isinstance(value, int | float) and _is_number(value):
        rule = band_rule(bands, str(shown)) if bands is not None else ""
        parts.append(f"{score} {score_text(float(value), bands)}" + (f" ({rule})" if rule else ""))
    head = f"{shown}: " if shown is not None else ""
    parts.extend(binding_reasons(row))
    listed = [
        w
        for w in row.get("words") or []
        if isinstance(w, Mapping) and _is_number(w.get("nll_empty")) and _is_number(w.get("nll_context"))
    ]
    weakest = weakest_words(listed, words) if words else []
    if weakest:
        # A stated word is supported whatever its contrast; its number would mislead.
        named = ", ".join(f"{w['word']} ({_word_note(w)})" for w in weakest)
        parts.append(f"weakest words: {named}")
    if not parts:
        return f"{head}not scored" if head else "not scored"
    return head + "; ".join(parts)
