"""A disk cache of computed conditions and perturbations, so feature extraction is resumable.

One SQLite file holds JSON values keyed by the sha256 of everything that determines them (model
fingerprint, prompt, settings, text). An interrupted run that starts again recomputes nothing it
already finished; a changed setting changes the key, so stale values are never read. JSON only: a
cache file can never execute code when read.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from types import TracebackType
from typing import Any

DB_NAME = "correctness.sqlite3"


def cache_key(*parts: Any) -> str:
    """sha256 of the parts' canonical JSON."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class FeatureCache:
    """Key-value store of JSON records in ``<directory>/correctness.sqlite3``.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp, FeatureCache(tmp) as cache:
    ...     cache.put("k", {"a": 1})
    ...     cache.get("k"), cache.get("missing")
    ({'a': 1}, None)
    """

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / DB_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path)
        self._db.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._db.commit()

    def get(self, key: str) -> Any:
        row = self._db.execute("SELECT value FROM entries WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, value: Any) -> None:
        # Committed at once: a run killed a moment later keeps everything it finished.
        self._db.execute(
            "INSERT OR REPLACE INTO entries (key, value) VALUES (?, ?)",
            (key, json.dumps(value, ensure_ascii=False, allow_nan=False)),
        )
        self._db.commit()

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM entries").fetchone()[0])

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> FeatureCache:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
