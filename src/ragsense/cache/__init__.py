"""Caches on disk: where they live, a JSON key-value store, and a float32 embedding store.

Ground floor: nothing here imports a model, an embedder or a method.

>>> import tempfile
>>> from ragsense.cache import JsonCache, cache_key
>>> with tempfile.TemporaryDirectory() as tmp, JsonCache(tmp, "demo.sqlite3") as cache:
...     cache.put(cache_key("question", 1), {"score": 0.5})
...     cache.get(cache_key("question", 1))
{'score': 0.5}
"""

from ragsense.cache._embeddings import EMBEDDINGS_DB_NAME, CacheStats, EmbeddingStore, text_key
from ragsense.cache._json import JsonCache, cache_key
from ragsense.cache._locations import cache_dir

__all__ = [
    "EMBEDDINGS_DB_NAME",
    "CacheStats",
    "EmbeddingStore",
    "JsonCache",
    "cache_dir",
    "cache_key",
    "text_key",
]
