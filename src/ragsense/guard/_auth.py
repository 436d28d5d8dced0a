"""API keys and per-key limits.

Keys are kept only as SHA-256 digests, so a memory dump or a log line never shows one, and a
presented key is compared with every stored digest by :func:`hmac.compare_digest` without stopping at
the first match, so the time taken does not tell how close a guess was. Keys come from a file (one per
line, ``#`` comments) and/or an environment variable (comma-separated).

Per-key limits: at most ``concurrency`` requests in flight per key and, optionally, ``rate`` requests per
second (a token bucket of ``burst`` requests). Without keys every caller shares one ``anonymous`` key.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

ANONYMOUS = "anonymous"
DEFAULT_KEY_ENV = "RAGSENSE_GUARD_API_KEYS"
_MIN_KEY_CHARS = 16


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


class ApiKeys:
    """The accepted keys, hashed. ``identify`` gives a key's short id (for metrics and logs) or None.

    >>> keys = ApiKeys(["correct-horse-battery-staple"])
    >>> keys.identify("correct-horse-battery-staple") == keys.ids[0], keys.identify("guess")
    (True, None)
    """

    def __init__(self, keys: list[str]) -> None:
        bad = [k for k in keys if len(k) < _MIN_KEY_CHARS]
        if bad:
            raise ValueError(f"an API key must have at least {_MIN_KEY_CHARS} characters")
        self._digests = [_digest(k) for k in dict.fromkeys(keys)]
        # The id is a prefix of the digest's hex: it names a key in metrics and logs without revealing it.
        self.ids = [d.hex()[:8] for d in self._digests]

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None, env: str | None = DEFAULT_KEY_ENV) -> ApiKeys:
        """Keys from ``path`` (one a line, ``#`` comments, blank lines ignored) and the variable ``env``."""
        keys: list[str] = []
        if path is not None:
            for line in Path(path).read_text(encoding="utf-8").splitlines():
                line = line.split("#", 1)[0].strip()
                if line:
                    keys.append(line)
        if env is not None:
            keys.extend(k.strip() for k in os.environ.get(env, "").split(",") if k.strip())
        return cls(keys)

    def __bool__(self) -> bool:
        return bool(self._digests)

    def identify(self, presented: str | None) -> str | None:
        """The id of the key ``presented`` is, or None. Constant time in what matches."""
        if presented is None:
            return None
        candidate = _digest(presented)
        found: str | None = None
        for key_id, digest in zip(self.ids, self._digests, strict=True):
            if hmac.compare_digest(candidate, digest) and found is None:
                found = key_id  # no early exit: every key is compared
        return found


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
        if concurrency < 1 or (rate is not None and rate <= 0):
            raise ValueError("concurrency must be >= 1 and rate > 0")
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
