"""A disk cache in front of an embedder, so a text is embedded once per embedder version.

Vectors live in one SQLite file, ``<cache_dir>/embeddings.sqlite3``, as raw float32 bytes keyed by
``(embedder fingerprint, sha256 of the UTF-8 text)``. SQLite gives atomic writes and safe sharing
between processes; raw bytes read back with ``numpy.frombuffer`` can never execute code (no pickle).
A small in-memory LRU sits in front of the file.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import numpy as np

from ragsense.embeddings._interface import Embedder, Vectors, check_texts

DB_NAME = "embeddings.sqlite3"
# SQLite's default limit on host parameters is 999 in old builds; stay below it.
_QUERY_CHUNK = 500

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    fingerprint TEXT NOT NULL,
    text_sha256 TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (fingerprint, text_sha256)
) WITHOUT ROWID
"""


def text_key(text: str) -> str:
    """The cache key of a text: sha256 of its UTF-8 bytes (exact: whitespace and case count)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class CacheStats:
    """Texts served from memory, from disk, and embedded (``misses``) since the cache was opened."""

    memory_hits: int = 0
    disk_hits: int = 0
    misses: int = 0


class CachedEmbedder:
    """Wraps an :class:`Embedder` with a disk cache and an in-memory LRU of ``memory_items`` vectors.

    ``cache_dir`` defaults to ``<ragsense cache dir>/embeddings`` (``RAGSENSE_CACHE_DIR`` overrides
    the base). Repeated texts, within a call or across calls and processes, are embedded once; a
    cached vector is returned bit for bit as it was computed.

    >>> import tempfile
    >>> from ragsense.embeddings import MiniLMEmbedder
    >>> with tempfile.TemporaryDirectory() as tmp, CachedEmbedder(MiniLMEmbedder(), tmp) as cached:
    ...     first = cached.embed(["Paris is in France.", "Paris is in France."])
    ...     again = cached.embed(["Paris is in France."])
    ...     (cached.stats.misses, bool((first[0] == again[0]).all()))
    (1, True)
    """

    def __init__(
        self, embedder: Embedder, cache_dir: str | Path | None = None, *, memory_items: int = 10_000
    ) -> None:
        if memory_items < 0:
            raise ValueError(f"memory_items must be >= 0, got {memory_items}")
        if cache_dir is None:
            from ragsense.models import cache_dir as base_cache_dir

            cache_dir = base_cache_dir() / "embeddings"
        self.inner = embedder
        self.cache_dir = Path(cache_dir)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self._memory: OrderedDict[str, Vectors] = OrderedDict()
        self._memory_items = memory_items
        self._lock = threading.Lock()
        # check_same_thread=False: every use goes through self._lock.
        self._db = sqlite3.connect(self.cache_dir / DB_NAME, timeout=60.0, check_same_thread=False)
        with self._db:
            self._db.execute(_SCHEMA)
        self.stats = CacheStats()

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def fingerprint(self) -> str:
        return self.inner.fingerprint

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Like the wrapped embedder's ``embed``; only texts never seen before reach the model."""
        items = check_texts(texts)
        keys = [text_key(t) for t in items]
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        with self._lock:
            found = self._lookup(set(keys))
            missing = list(dict.fromkeys(k for k in keys if k not in found))
            if missing:
                text_of = dict(zip(keys, items, strict=True))
                vectors = self.inner.embed([text_of[k] for k in missing])
                if vectors.shape != (len(missing), self.dim):
                    raise ValueError(
                        f"{self.name} returned shape {vectors.shape}, expected ({len(missing)}, {self.dim})"
                    )
                fresh = {k: np.array(v, dtype=np.float32) for k, v in zip(missing, vectors, strict=True)}
                self._store(fresh)
                found.update(fresh)
                self.stats.misses += len(missing)
        for i, key in enumerate(keys):
            out[i] = found[key]
        return out

    def _lookup(self, keys: set[str]) -> dict[str, Vectors]:
        found: dict[str, Vectors] = {}
        for key in keys:
            vector = self._memory.get(key)
            if vector is not None:
                self._memory.move_to_end(key)
                found[key] = vector
        self.stats.memory_hits += len(found)
        on_disk = sorted(keys - found.keys())
        for start in range(0, len(on_disk), _QUERY_CHUNK):
            chunk = on_disk[start : start + _QUERY_CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                "SELECT text_sha256, dim, vector FROM vectors"
                f" WHERE fingerprint = ? AND text_sha256 IN ({marks})",
                [self.fingerprint, *chunk],
            ).fetchall()
            for key, dim, blob in rows:
                # A row of the wrong size (a foreign or damaged file) is treated as a miss and rewritten.
                if dim != self.dim or len(blob) != 4 * self.dim:
                    continue
                vector = np.frombuffer(blob, dtype="<f4").astype(np.float32)
                found[key] = vector
                self._remember(key, vector)
                self.stats.disk_hits += 1
        return found

    def _store(self, fresh: dict[str, Vectors]) -> None:
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO vectors (fingerprint, text_sha256, dim, vector) VALUES (?, ?, ?, ?)",
                [(self.fingerprint, k, self.dim, v.astype("<f4").tobytes()) for k, v in fresh.items()],
            )
        for key, vector in fresh.items():
            self._remember(key, vector)

    def _remember(self, key: str, vector: Vectors) -> None:
        if self._memory_items == 0:
            return
        self._memory[key] = vector
        self._memory.move_to_end(key)
        while len(self._memory) > self._memory_items:
            self._memory.popitem(last=False)

    def __len__(self) -> int:
        """Vectors stored on disk for this embedder's fingerprint."""
        with self._lock:
            (count,) = self._db.execute(
                "SELECT COUNT(*) FROM vectors WHERE fingerprint = ?", [self.fingerprint]
            ).fetchone()
        return int(count)

    def fingerprints(self) -> Iterator[str]:
        """Every embedder fingerprint with vectors in this cache file (old versions included)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT DISTINCT fingerprint FROM vectors ORDER BY fingerprint"
            ).fetchall()
        return iter([str(r[0]) for r in rows])

    def clear_memory(self) -> None:
        """Empty the in-memory LRU (the disk cache stays)."""
        with self._lock:
            self._memory.clear()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> CachedEmbedder:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, {str(self.cache_dir)!r})"
