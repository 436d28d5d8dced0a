"""Intervals for a proportion."""

from __future__ import annotations

import math
import statistics


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
