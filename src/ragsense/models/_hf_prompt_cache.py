"""Prompt KV states kept across scoring calls: read each context once, even when it returns a chunk later.

Within one ``score`` call, requests with the same prompt tokens already share one prompt pass
(:mod:`~ragsense.models._hf_shared`). Rows that share a context but fall in different calls (two
systems' answers to the same documents in one file, the guard's successive batches, a VERA answer's
statements after its row's ConSens pass) would each run it again. :class:`PromptStateCache` keeps the
``(KV cache, last state)`` of recent prompts, keyed by their exact token ids, and hands back a copy.

* **Exact.** The key is the whole tuple of prompt token ids, compared for equality (not a hash of it),
  so a state is never served for another prefix. The stored state is the one the prompt pass computed
  and is never changed (callers extend a deep copy), so a hit gives the same tensors a fresh pass
  gives: log-probs are bit-identical with and without the cache.
* **Bounded by tokens.** The entries hold at most ``max_tokens`` prompt tokens in all; the least
  recently used go first, and a prompt longer than the whole budget is not kept. Memory is that many
  tokens times the model's KV bytes per token (layers x KV heads x head size x 2 x 4 bytes in float32:
  46 KB for SmolLM2-135M, 36 KB for Gemma 3 270M), reported exactly by :attr:`PromptStateCache.nbytes`.
* **Thread-safe.** One lock guards the table, so one model may serve several threads (the guard's
  worker, an application's own threads); copies are made outside it.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ragsense.errors import ParameterError

# Default prompt tokens kept (the ``prompt_cache_tokens`` model option). WikiEval's prompts average 950
# tokens (84 to 2,001), so 16,384 tokens hold one default chunk's worth (16 rows) of distinct contexts:
# the contexts of a chunk are still there when the next chunk returns to them. It costs up to 720 MiB
# for SmolLM2-135M (46 KB a token), less than the process itself (about 950 MB after loading).
DEFAULT_PROMPT_CACHE_TOKENS = 16_384


@dataclass(frozen=True)
class PromptCacheStats:
    """What a :class:`PromptStateCache` holds and did: entries, prompt tokens, bytes, hits, misses,
    evictions, and its token budget."""

    entries: int
    tokens: int
    nbytes: int
    max_tokens: int
    hits: int
    misses: int
    evictions: int


@dataclass(frozen=True)
class _Entry:
    cache: Any
    last: Any
    tokens: int
    nbytes: int


def state_nbytes(cache: Any, last: Any) -> int:
    """Bytes of a KV cache's tensors plus the last state (transformers' ``DynamicCache`` layers)."""
    total = int(last.nbytes)
    for layer in getattr(cache, "layers", ()):
        for name in ("keys", "values"):
            tensor = getattr(layer, name, None)
            if tensor is not None:
                total += int(tensor.nbytes)
    return total


class PromptStateCache:
    """An LRU of prompt KV states keyed by their exact token ids, at most ``max_tokens`` tokens in all.

    >>> cache = PromptStateCache(max_tokens=4)
    >>> cache.get((1, 2, 3)) is None
    True
    >>> cache.stats().misses
    1
    """

    def __init__(self, max_tokens: int = DEFAULT_PROMPT_CACHE_TOKENS) -> None:
        if max_tokens < 0:
            raise ParameterError(
                f"must be 0 (off) or more, got {max_tokens}", parameter="prompt_cache_tokens"
            )
        self.max_tokens = max_tokens
        self._entries: OrderedDict[tuple[int, ...], _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._tokens = 0
        self._nbytes = 0
        self._hits = 0
        self._misses = 0
        self._evictions = 0

    def get(self, key: tuple[int, ...]) -> tuple[Any, Any] | None:
        """A private copy of ``(KV cache, last state)`` for exactly these prompt ids, or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self._misses += 1
                return None
            self._entries.move_to_end(key)
            self._hits += 1
        # The stored entry is never mutated, so copying it outside the lock is safe.
        return copy.deepcopy(entry.cache), entry.last

    def put(self, key: tuple[int, ...], cache: Any, last: Any) -> None:
        """Keep ``cache`` and ``last`` for ``key`` (the caller must not change them afterwards)."""
        tokens = len(key)
        if tokens > self.max_tokens:
            return
        entry = _Entry(cache, last, tokens, state_nbytes(cache, last))
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._tokens -= old.tokens
                self._nbytes -= old.nbytes
            self._entries[key] = entry
            self._tokens += tokens
            self._nbytes += entry.nbytes
            while self._tokens > self.max_tokens:
                _, evicted = self._entries.popitem(last=False)
                self._tokens -= evicted.tokens
                self._nbytes -= evicted.nbytes
                self._evictions += 1

    def clear(self) -> None:
        """Drop every entry (the counters stay)."""
        with self._lock:
            self._entries.clear()
            self._tokens = 0
            self._nbytes = 0

    @property
    def nbytes(self) -> int:
        """Bytes of the tensors the entries hold."""
        return self._nbytes

    def stats(self) -> PromptCacheStats:
        with self._lock:
            return PromptCacheStats(
                entries=len(self._entries),
                tokens=self._tokens,
                nbytes=self._nbytes,
                max_tokens=self.max_tokens,
                hits=self._hits,
                misses=self._misses,
                evictions=self._evictions,
            )
