"""A disk cache in front of an embedder, so a text is embedded once per embedder version.

The vectors live in a :class:`ragsense.cache.EmbeddingStore` (one SQLite file of raw float32 bytes,
``<cache_dir>/embeddings.sqlite3``, keyed by embedder fingerprint and text sha256, with an in-memory
LRU in front); this module only decides what to embed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType

import numpy as np

from ragsense.cache import CacheStats, EmbeddingStore, cache_dir, text_key
from ragsense.embeddings._interface import Embedder, Vectors, check_texts


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
        directory = Path(cache_dir) if cache_dir is not None else _default_dir()
        self.inner = embedder
        self.store = EmbeddingStore(directory, memory_items=memory_items)
        self.cache_dir = self.store.directory
        # Held across look-up, embedding and storing, so concurrent callers embed a text once.
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def fingerprint(self) -> str:
        return self.inner.fingerprint

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def stats(self) -> CacheStats:
        """Texts served from memory, from disk, and embedded (``misses``) since the cache was opened."""
        return self.store.stats

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Like the wrapped embedder's ``embed``; only texts never seen before reach the model."""
        items = check_texts(texts)
        keys = [text_key(t) for t in items]
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        with self._lock:
            found = self.store.get(self.fingerprint, self.dim, keys)
            missing = list(dict.fromkeys(k for k in keys if k not in found))
            if missing:
                text_of = dict(zip(keys, items, strict=True))
                vectors = self.inner.embed([text_of[k] for k in missing])
                if vectors.shape != (len(missing), self.dim):
                    raise ValueError(
                        f"{self.name} returned shape {vectors.shape}, expected ({len(missing)}, {self.dim})"
                    )
                fresh = {k: np.array(v, dtype=np.float32) for k, v in zip(missing, vectors, strict=True)}
                self.store.put(self.fingerprint, fresh)
                found.update(fresh)
        for i, key in enumerate(keys):
            out[i] = found[key]
        return out

    def __len__(self) -> int:
        """Vectors stored on disk for this embedder's fingerprint."""
        return self.store.count(self.fingerprint)

    def fingerprints(self) -> Iterator[str]:
        """Every embedder fingerprint with vectors in this cache file (old versions included)."""
        return self.store.fingerprints()

    def clear_memory(self) -> None:
        """Empty the in-memory LRU (the disk cache stays)."""
        self.store.clear_memory()

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> CachedEmbedder:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, {str(self.cache_dir)!r})"


def _default_dir() -> Path:
    return cache_dir() / "embeddings"
