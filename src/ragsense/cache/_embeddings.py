"""A disk store of float32 vectors keyed by (producer fingerprint, text), with an in-memory LRU.

Vectors live in one SQLite file, ``<directory>/embeddings.sqlite3``, as raw float32 bytes keyed by
``(fingerprint, sha256 of the UTF-8 text)``. SQLite gives atomic writes and safe sharing between
processes; raw bytes read back with ``numpy.frombuffer`` can never execute code (no pickle). A small
in-memory LRU sits in front of the file. :class:`ragsense.embeddings.CachedEmbedder` puts it in
front of an embedder.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

EMBEDDINGS_DB_NAME = "embeddings.sqlite3"
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

Vector = npt.NDArray[np.float32]


def text_key(text: str) -> str:
    """The cache key of a text: sha256 of its UTF-8 bytes (exact: whitespace and case count).

    >>> text_key("a")[:16]
    'ca978112ca1bbdca'
    """
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class CacheStats:
    """Keys served from memory, from disk, and not found (``misses``) since the store was opened."""

    memory_hits: int = 0
    disk_hits: int = 0
    misses: int = 0


class EmbeddingStore:
    """Float32 vectors in ``<directory>/embeddings.sqlite3``, ``memory_items`` of them also in memory.

    Safe to share between threads. A stored row of the wrong size (a foreign or damaged file) reads
    as a miss, and storing the key again rewrites it.

    >>> import tempfile
    >>> import numpy as np
    >>> with tempfile.TemporaryDirectory() as tmp, EmbeddingStore(tmp) as store:
    ...     store.put("toy@1", {text_key("hi"): np.ones(3, dtype=np.float32)})
    ...     found = store.get("toy@1", 3, [text_key("hi"), text_key("other")])
    ...     (list(found.values())[0].tolist(), store.count("toy@1"), store.stats.misses)
    ([1.0, 1.0, 1.0], 1, 1)
    """

    def __init__(self, directory: str | Path, *, memory_items: int = 10_000) -> None:
        if memory_items < 0:
            raise ValueError(f"memory_items must be >= 0, got {memory_items}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._memory: OrderedDict[tuple[str, str], Vector] = OrderedDict()
        self._memory_items = memory_items
        self._lock = threading.Lock()
        # check_same_thread=False: every use goes through self._lock.
        self._db = sqlite3.connect(self.directory / EMBEDDINGS_DB_NAME, timeout=60.0, check_same_thread=False)
        with self._db:
            self._db.execute(_SCHEMA)
        self.stats = CacheStats()

    @property
    def memory_size(self) -> int:
        """Vectors held in the in-memory LRU now."""
        with self._lock:
            return len(self._memory)

    def get(self, fingerprint: str, dim: int, keys: Iterable[str]) -> dict[str, Vector]:
        """The stored ``dim``-long vectors of ``keys`` under ``fingerprint``; absent keys are left out."""
        wanted = set(keys)
        found: dict[str, Vector] = {}
        with self._lock:
            for key in wanted:
                vector = self._memory.get((fingerprint, key))
                if vector is not None:
                    self._memory.move_to_end((fingerprint, key))
                    found[key] = vector
            self.stats.memory_hits += len(found)
            on_disk = sorted(wanted - found.keys())
            for start in range(0, len(on_disk), _QUERY_CHUNK):
                chunk = on_disk[start : start + _QUERY_CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    "SELECT text_sha256, dim, vector FROM vectors"
                    f" WHERE fingerprint = ? AND text_sha256 IN ({marks})",
                    [fingerprint, *chunk],
                ).fetchall()
                for key, stored_dim, blob in rows:
                    if stored_dim != dim or len(blob) != 4 * dim:
                        continue
                    vector = np.frombuffer(blob, dtype="<f4").astype(np.float32)
                    found[key] = vector
                    self._remember((fingerprint, key), vector)
                    self.stats.disk_hits += 1
            self.stats.misses += len(wanted) - len(found)
        return found

    def put(self, fingerprint: str, vectors: Mapping[str, Any]) -> None:
        """Store (or overwrite) 1-D vectors by key under ``fingerprint``, as float32."""
        fresh = {k: np.asarray(v, dtype=np.float32).reshape(-1) for k, v in vectors.items()}
        with self._lock:
            with self._db:
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectors (fingerprint, text_sha256, dim, vector)"
                    " VALUES (?, ?, ?, ?)",
                    [(fingerprint, k, v.size, v.astype("<f4").tobytes()) for k, v in fresh.items()],
                )
            for key, vector in fresh.items():
                self._remember((fingerprint, key), vector)

    def _remember(self, key: tuple[str, str], vector: Vector) -> None:
        if self._memory_items == 0:
            return
        self._memory[key] = vector
        self._memory.move_to_end(key)
        while len(self._memory) > self._memory_items:
            self._memory.popitem(last=False)

    def count(self, fingerprint: str) -> int:
        """Vectors stored on disk under ``fingerprint``."""
        with self._lock:
            (n,) = self._db.execute(
                "SELECT COUNT(*) FROM vectors WHERE fingerprint = ?", [fingerprint]
            ).fetchone()
        return int(n)

    def fingerprints(self) -> Iterator[str]:
        """Every fingerprint with vectors in the file (old versions included)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT DISTINCT fingerprint FROM vectors ORDER BY fingerprint"
            ).fetchall()
        return iter([str(r[0]) for r in rows])

    def clear_memory(self) -> None:
        """Empty the in-memory LRU (the disk store stays)."""
        with self._lock:
            self._memory.clear()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> EmbeddingStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EmbeddingStore({str(self.directory)!r})"
