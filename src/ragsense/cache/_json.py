"""A small on-disk key-value store of JSON values (SQLite), shared by the disk caches.

Values are JSON only, so reading a cache file can never execute code. Keys are the sha256 of
everything that determines a value (:func:`cache_key`): a changed setting gives a new key, and a stale
value is never read. Every write is committed at once, so a run killed a moment later keeps all it
finished.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from types import TracebackType
from typing import Any


def cache_key(*parts: Any) -> str:
    """sha256 of the parts' canonical JSON.

    >>> cache_key("a", 1) == cache_key("a", 1) != cache_key("a", 2)
    True
    """
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class JsonCache:
    """Key-value store of JSON records in ``<directory>/<filename>``; safe to share between threads.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp, JsonCache(tmp, "demo.sqlite3") as cache:
    ...     cache.put("k", {"a": 1})
    ...     cache.get("k"), cache.get("missing"), len(cache)
    ({'a': 1}, None, 1)
    """

    def __init__(self, directory: str | Path, filename: str) -> None:
        self.path = Path(directory) / filename
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Model calls may run in a helper thread (run_sync inside a running event loop).
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._db.commit()

    def get(self, key: str) -> Any:
        with self._lock:
            row = self._db.execute("SELECT value FROM entries WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, value: Any) -> None:
        blob = json.dumps(value, ensure_ascii=False, allow_nan=False)
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO entries (key, value) VALUES (?, ?)", (key, blob))
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM entries").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> JsonCache:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
