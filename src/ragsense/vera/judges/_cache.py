"""The judges' disk cache: a successful verdict is kept under the model's fingerprint, the prompt's
fingerprint and the rendered item, so a re-run costs nothing and gives identical results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragsense.cache import JsonCache

CACHE_FILE = "judge.sqlite3"


class VerdictCache:
    """The disk cache shared by both judges (optional)."""

    def __init__(self, cache_dir: str | Path | None) -> None:
        self.cache = JsonCache(cache_dir, CACHE_FILE) if cache_dir is not None else None
        self.hits = 0
        self.misses = 0

    def _get(self, key: str) -> Any:
        if self.cache is None:
            return None
        value = self.cache.get(key)
        if value is not None:
            self.hits += 1
        else:
            self.misses += 1
        return value

    def _put(self, key: str, value: Any) -> None:
        if self.cache is not None:
            self.cache.put(key, value)

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
