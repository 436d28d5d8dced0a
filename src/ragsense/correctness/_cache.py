"""A disk cache of computed conditions and perturbations, so feature extraction is resumable.

One SQLite file holds JSON values keyed by the sha256 of everything that determines them (model
fingerprint, prompt, settings, text). An interrupted run that starts again recomputes nothing it
already finished; a changed setting changes the key, so stale values are never read. JSON only: a
cache file can never execute code when read.
"""

from __future__ import annotations

from pathlib import Path

from ragsense.cache import JsonCache, cache_key

DB_NAME = "correctness.sqlite3"

__all__ = ["DB_NAME", "FeatureCache", "cache_key"]


class FeatureCache(JsonCache):
    """Key-value store of JSON records in ``<directory>/correctness.sqlite3``.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp, FeatureCache(tmp) as cache:
    ...     cache.put("k", {"a": 1})
    ...     cache.get("k"), cache.get("missing")
    ({'a': 1}, None)
    """

    def __init__(self, directory: str | Path) -> None:
        super().__init__(directory, DB_NAME)
