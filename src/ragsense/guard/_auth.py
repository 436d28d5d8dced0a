"""API keys and per-key limits of the guard.

The keys themselves (hashed, compared in constant time) are :class:`ragsense._access.ApiKeys`, shared
with ``ragsense serve``. Here: the guard's key variable and per-key limits: at most ``concurrency``
requests in flight per key and, optionally, ``rate`` requests per second (a token bucket of ``burst``
requests). Without keys every caller shares one ``anonymous`` key.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from ragsense._access import ApiKeys
from ragsense.errors import ParameterError

ANONYMOUS = "anonymous"
DEFAULT_KEY_ENV = "RAGSENSE_GUARD_API_KEYS"

__all__ = ["ANONYMOUS", "DEFAULT_KEY_ENV", "ApiKeys", "KeyLimiter"]


@dataclass
class _Bucket:
    tokens: float
    stamp: float = field(default_factory=time.monotonic)
    in_flight: int = 0


class KeyLimiter:
    """Per-key concurrency and rate. Used on the event loop only, so it needs no lock.

    >>> limiter = KeyLimiter(concurrency=1)
    >>> limiter.acquire("k"), limiter.acquire("k")
    (None, 1)
    >>> limiter.release("k"); limiter.acquire("k")
    """

    def __init__(self, *, concurrency: int = 32, rate: float | None = None, burst: int | None = None) -> None:
        if concurrency < 1:
            raise ParameterError(f"must be at least 1, got {concurrency}", parameter="concurrency")
        if rate is not None and not rate > 0:
            raise ParameterError(f"must be above 0, got {rate}", parameter="rate")
        self.concurrency = concurrency
        self.rate = rate
        self.burst = float(burst if burst is not None else max(1, math.ceil(rate or 1)))
        self._buckets: dict[str, _Bucket] = {}

    def acquire(self, key_id: str) -> int | None:
        """Take a slot for ``key_id``: None when granted, else the seconds to wait (for Retry-After)."""
        bucket = self._buckets.setdefault(key_id, _Bucket(tokens=self.burst))
        if bucket.in_flight >= self.concurrency:
            return 1
        if self.rate is not None:
            now = time.monotonic()
            bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.stamp) * self.rate)
            bucket.stamp = now
            if bucket.tokens < 1:
                return max(1, math.ceil((1 - bucket.tokens) / self.rate))
            bucket.tokens -= 1
        bucket.in_flight += 1
        return None

    def release(self, key_id: str) -> None:
        """Give back the slot :meth:`acquire` granted."""
        bucket = self._buckets.get(key_id)
        if bucket is not None and bucket.in_flight > 0:
            bucket.in_flight -= 1
