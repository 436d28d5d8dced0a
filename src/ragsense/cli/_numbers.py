"""Argument types for the command line's numeric flags: a value out of range is refused by argparse
(exit 2, naming the flag) before any model loads or any server binds, instead of reaching code that
treats it as a bug or, worse, accepts it (a negative body limit once started the guard).

Every int or float flag uses one of these (``tests/cli/test_numeric_flags.py`` checks it).

>>> positive_int("3"), non_negative_int("0"), unit_interval("0.5"), port("0")
(3, 0, 0.5, 0)
>>> positive_int("0")
Traceback (most recent call last):
argparse.ArgumentTypeError: must be a whole number >= 1, got '0'
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def _number(kind: type[int] | type[float], text: str, what: str) -> int | float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
    return value


def _at_least(kind: type[int] | type[float], low: float, strict: bool) -> Callable[[str], int | float]:
    noun = "a whole number" if kind is int else "a number"
    what = f"{noun} {'>' if strict else '>='} {low:g}"

    def parse(text: str) -> int | float:
        value = _number(kind, text, what)
        if value < low or (strict and value == low):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value

    parse.__name__ = f"{kind.__name__}_{'above' if strict else 'from'}_{low:g}"
    return parse


def positive_int(text: str) -> int:
    """A count that must be at least one (rows, chunks, workers, threads, limits)."""
    return int(_at_least(int, 1, strict=False)(text))


def non_negative_int(text: str) -> int:
    """A count or seed that may be zero."""
    return int(_at_least(int, 0, strict=False)(text))


def positive_float(text: str) -> float:
    """A duration or rate that must be above zero."""
    return float(_at_least(float, 0.0, strict=True)(text))


def non_negative_float(text: str) -> float:
    """A duration or share that may be zero."""
    return float(_at_least(float, 0.0, strict=False)(text))


def unit_interval(text: str) -> float:
    """A share or probability in [0, 1]."""
    value = non_negative_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1], got {text!r}")
    return value


def score(text: str) -> float:
    """A score threshold: any finite number (ConSens scores lie in [-1, 1], others in [0, 1])."""
    return float(_number(float, text, "a finite number"))


def port(text: str) -> int:
    """A TCP port; 0 lets the system choose a free one."""
    value = non_negative_int(text)
    if value > 65_535:
        raise argparse.ArgumentTypeError(f"must be a port number in [0, 65535], got {text!r}")
    return value


def context_budget(text: str) -> int | str:
    """``--context-budget``: a positive number of tokens, ``auto`` or ``window``.

    >>> context_budget("auto"), context_budget("window"), context_budget("128")
    ('auto', 'window', 128)
    """
    if text in ("auto", "window"):
        return "auto" if text == "auto" else "window"
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"a positive number of tokens, 'auto' or 'window', got {text!r}"
        ) from None


CHECKED_TYPES: frozenset[Callable[[str], object]] = frozenset(
    {
        positive_int,
        non_negative_int,
        positive_float,
        non_negative_float,
        unit_interval,
        score,
        port,
        context_budget,
    }
)
"""The only types a numeric flag may have."""
