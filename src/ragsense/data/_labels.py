"""The user's own label on a row, read in every vocabulary users write it in.

A row may carry the verdict its author expects, in ``label`` or ``expected`` (``label`` first when a
row has both). ``ragsense evaluate`` compares it with its verdict (accuracy and a confusion table in the
summary), and ``ragsense calibrate`` fits its bands on it. One reading serves both:

==================  ==========================================================
label               read as
==================  ==========================================================
``grounded``        ``1``, ``1.0``, ``true``, JSON ``true``, ``grounded``
``ungrounded``      ``0``, ``0.0``, ``false``, JSON ``false``, ``ungrounded``
``unsure``          ``unsure``
``refusal``         ``refusal``
==================  ==========================================================

Words are read without regard to case or surrounding spaces; an empty cell or ``null`` is no label.

>>> [label_verdict(v) for v in (1, "0", "True", False, " Grounded ", "refusal", None, "")]
['grounded', 'ungrounded', 'grounded', 'ungrounded', 'grounded', 'refusal', None, None]
>>> label_verdict("maybe", row="r7")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ragsense.errors.InputError: row r7, field 'label': expected grounded/1/true, ... got 'maybe'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragsense.errors import InputError

LABEL_FIELDS = ("label", "expected")
"""Where a row carries its author's verdict, in the order they are looked at."""
LABEL_VALUES = ("grounded", "ungrounded", "unsure", "refusal")
"""What a label reads as: the ConSens verdicts."""
ACCEPTED = "grounded/1/true, ungrounded/0/false, unsure or refusal"
"""The accepted spellings, as error messages and docs name them."""

_WORDS = {
    "grounded": "grounded",
    "1": "grounded",
    "true": "grounded",
    "ungrounded": "ungrounded",
    "0": "ungrounded",
    "false": "ungrounded",
    "unsure": "unsure",
    "refusal": "refusal",
}


def label_verdict(value: Any, *, row: int | str | None = None, field: str = "label") -> str | None:
    """The verdict ``value`` labels (one of :data:`LABEL_VALUES`), None for no label; anything else is
    an :class:`~ragsense.errors.InputError` naming ``row`` and ``field``."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        return "grounded" if value else "ungrounded"
    key: str | None = None
    if isinstance(value, int | float):
        key = "1" if value == 1 else "0" if value == 0 else None
    elif isinstance(value, str):
        key = value.strip().lower()
        # A CSV written by pandas holds 1.0 and 0.0 for a numeric column.
        key = {"1.0": "1", "0.0": "0"}.get(key, key)
    verdict = _WORDS.get(key) if key is not None else None
    if verdict is None:
        raise InputError(f"expected {ACCEPTED}, got {value!r}", row=row, field=field)
    return verdict


def label_field(record: Mapping[str, Any]) -> str | None:
    """The field holding the row's label (the first of :data:`LABEL_FIELDS` it has, not empty)."""
    for name in LABEL_FIELDS:
        value = record.get(name)
        if value is not None and not (isinstance(value, str) and not value.strip()):
            return name
    return None


def shown_label(record: Mapping[str, Any]) -> str | None:
    """The row's label as tables show it: read as a verdict (``1`` is ``grounded``), or as written
    when it cannot be read; None for an unlabelled row.

    >>> shown_label({"expected": 1}), shown_label({"label": "maybe"}), shown_label({})
    ('grounded', 'maybe', None)
    """
    name = label_field(record)
    if name is None:
        return None
    try:
        return label_verdict(record[name])
    except InputError:
        return str(record[name])
