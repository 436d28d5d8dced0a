"""The size policy of a report: how much of each text is embedded, and how floats are rounded.

A report embeds its rows' texts, but documents are long and a run can have 10,000 rows, so the page
would not stay small if everything went in. The policy (docs/report.md):

- **Documents are deduplicated**: a document that several rows (or both runs of a comparison) share
  is embedded once.
- **Each kind of text has a total budget** (characters over the whole report): documents, answers,
  questions. When the texts of a kind are longer than its budget together, the longest are cut to a
  common cap, the largest cap that fits (:func:`fair_cap`), so short texts are never cut to make room
  for long ones. Each cap also has a floor and a ceiling (:class:`ReportLimits`).
- **Every other text** (notes, error messages, VERA's reasons and corrections, other input fields)
  is cut at ``text_max`` characters.
- A cut text keeps how long it was, and the page says so where it is shown ("… N more characters;
  full text in the run store").
- **The page must fit** ``max_bytes``. If it does not, documents are cut further, then VERA's
  per-sentence context decisions, ConSens's scores under every aggregation and a digit of the word
  log-likelihoods are left out, then documents, then answers are cut shorter
  (:mod:`ragsense.report._fit` has the order). The page says what was cut; the run store keeps
  everything.
- Floats keep 4 significant digits (:func:`round4`); word log-likelihoods are kept in thousandths of
  a nat (integers). Values that are not finite become ``null``.

>>> fair_cap([10, 20, 300], budget=100, floor=5, ceiling=1000)
70
>>> cut("abcdef", 4)
('abcd', 6)
>>> cut("abc", 4)
('abc', None)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ReportLimits:
    """Budgets and caps of the embedded texts (characters), and the page's size target (bytes).

    The defaults keep a 10,000-row report under 5 MB; a small run is embedded whole (every cap at its
    ceiling). What is cut when the page is still too large is in :mod:`ragsense.report._fit`.
    """

    max_bytes: int = 4_800_000
    document_budget: int = 2_500_000
    answer_budget: int = 2_500_000
    question_budget: int = 1_500_000
    document_max: int = 20_000
    answer_max: int = 20_000
    question_max: int = 2_000
    document_floor: int = 600
    """Documents are cut down to this before VERA's per-sentence decisions are left out."""
    document_min: int = 160
    answer_min: int = 160
    question_min: int = 100
    text_max: int = 600

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_bytes": self.max_bytes,
            "document_budget": self.document_budget,
            "answer_budget": self.answer_budget,
            "question_budget": self.question_budget,
            "text_max": self.text_max,
        }


def fair_cap(lengths: Iterable[int], budget: int, floor: int, ceiling: int) -> int:
    """The largest cap ``c`` (within ``[floor, ceiling]``) with ``sum(min(n, c)) <= budget``: texts
    shorter than the cap are kept whole, longer ones are cut to it.

    >>> fair_cap([100, 100], budget=1000, floor=10, ceiling=50)
    50
    >>> fair_cap([100] * 100, budget=1000, floor=20, ceiling=500)
    20
    """
    ordered = sorted(lengths)
    total = 0
    for i, n in enumerate(ordered):
        remaining = len(ordered) - i
        if total + n * remaining > budget:
            return max(floor, min(ceiling, (budget - total) // remaining))
        total += n
    return ceiling


def cut(text: str, cap: int) -> tuple[str, int | None]:
    """``text`` cut to ``cap`` characters, and its full length when it was cut (else ``None``).

    A cut never splits a surrogate pair (Python strings count code points, so it cannot)."""
    if len(text) <= cap:
        return text, None
    return text[:cap], len(text)


def _finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite int or float (not a bool); else None."""
    kind = type(value)
    if kind is not float and (kind is bool or not isinstance(value, int | float)):
        return None
    x = float(value)
    return None if x - x != 0.0 else x  # x - x is NaN for NaN and infinity


def round4(value: Any) -> float | None:
    """A finite number to 4 significant digits; anything else (NaN, infinity, not a number) to None.

    >>> round4(0.123456), round4(1234567.0), round4(float("nan")), round4(True), round4(3)
    (0.1235, 1235000.0, None, None, 3.0)
    """
    x = _finite(value)
    return None if x is None else float(f"{x:.4g}")


def milli(value: Any) -> int | None:
    """A finite number in thousandths (word log-likelihoods: 7.95673 nats -> 7957); else None.

    >>> milli(7.956725), milli(float("inf"))
    (7957, None)
    """
    x = _finite(value)
    return None if x is None else round(x * 1000)


def short_text(value: Any, cap: int) -> list[Any]:
    """Any value as ``[text, full_length_or_None]``, cut to ``cap`` (non-strings as compact JSON).

    >>> short_text("x" * 5, 3), short_text({"a": 1}, 100)
    (['xxx', 5], ['{"a": 1}', None])
    """
    if not isinstance(value, str):
        import json

        value = json.dumps(value, ensure_ascii=False, default=str)
    text, full = cut(value, cap)
    return [text, full]
