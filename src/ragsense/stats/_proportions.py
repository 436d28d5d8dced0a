"""Intervals for a proportion, and verdict shares with them."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TypedDict


def wilson_ci(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval for ``successes`` out of ``n``.

    Unlike the normal ("Wald") interval it stays inside [0, 1] and does not collapse to a point at
    0 or n successes, which is what small benchmark cells (6 of 6, 0 of 12) need.

    >>> lo, hi = wilson_ci(6, 6)
    >>> round(lo, 3), hi
    (0.61, 1.0)
    >>> wilson_ci(0, 0)
    (0.0, 1.0)
    """
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if n == 0:
        return 0.0, 1.0  # no observation: every proportion is possible
    z = statistics.NormalDist().inv_cdf((1.0 + level) / 2.0)
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n)) / denom
    # Clamp rounding at the edges: at 0 or n successes one end is exactly 0 or 1.
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi


class Share(TypedDict):
    """``count`` of ``n`` as ``share`` with its Wilson interval ``[low, high]``."""

    share: float
    low: float
    high: float
    n: int
    count: int


def share_ci(count: int, n: int, level: float = 0.95) -> Share:
    """``count`` of ``n`` as a :class:`Share`: the share and its Wilson interval (0 of 0 is share 0 in
    [0, 1]: no observation rules nothing out).

    >>> s = share_ci(3, 5)
    >>> s["share"], round(s["low"], 3), round(s["high"], 3)
    (0.6, 0.231, 0.882)
    """
    low, high = wilson_ci(count, n, level)
    return {"share": count / n if n else 0.0, "low": low, "high": high, "n": n, "count": count}


def shares_of(values: Iterable[str], order: Sequence[str] = (), level: float = 0.95) -> dict[str, Share]:
    """The share of each value among ``values``: those in ``order`` first and in that order (with a
    zero count when absent: "0 of 5 ungrounded, at most 43%" is a finding), then any other, sorted.

    >>> {k: s["count"] for k, s in shares_of(["b", "a", "b"], order=["b", "c"]).items()}
    {'b': 2, 'c': 0, 'a': 1}
    """
    counts = Counter(values)
    n = sum(counts.values())
    keys = [*dict.fromkeys(order), *sorted(k for k in counts if k not in order)]
    return {k: share_ci(counts.get(k, 0), n, level) for k in keys}


def format_share(share: Share) -> str:
    """A share as printed by summaries, gates and assertions: ``60% [23%, 88%] (3 of 5)``.

    >>> format_share(share_ci(0, 4))
    '0% [0%, 49%] (0 of 4)'
    """
    return (
        f"{share['share']:.0%} [{share['low']:.0%}, {share['high']:.0%}] ({share['count']} of {share['n']})"
    )
