"""Prompt KV states kept across scoring calls: read each context once, even when it returns a chunk later.

Within one ``score`` call, requests with the same prompt tokens already share one prompt pass
(:mod:`~ragsense.models._hf_shared`). Rows that share a context but fall in different calls (two
systems' answers to the same documents in one file, the guard's successive batches, a VERA answer's
statements after its row's ConSens pass) would each run it again. :class:`PromptStateCache` keeps the
``(KV cache, last state)`` of recent prompts, keyed by their exact token ids, and hands back a copy.

* **Exact.** The key is the whole tuple of prompt token ids (with its segment cuts, below), compared
  for equality (not a hash of it), so a whole state is never served for another prompt. The stored
  state is the one the prompt pass computed and is never changed (callers extend a
  :func:`private_copy`: for transformers' ``DynamicLayer`` caches a new cache object over the same
  tensors, which that layer never writes into; else a deep copy), so a hit gives the same tensors a
  fresh pass gives: log-probs are bit-identical with and without the cache.
* **Bounded by tokens.** The entries hold at most ``max_tokens`` prompt tokens in all; the least
  recently used go first, and a prompt longer than the whole budget is not kept. Memory is that many
  tokens times the model's KV bytes per token (layers x KV heads x head size x 2 x 4 bytes in float32:
  46 KB for SmolLM2-135M, 36 KB for Gemma 3 270M), reported exactly by :attr:`PromptStateCache.nbytes`.
  (The prefix index adds a tuple of ids per segment end, 8 bytes a token, not counted.)
* **Shared leading parts.** A prompt may be declared in segments (:attr:`ScoreRequest.splits
  <ragsense.models.ScoreRequest.splits>`: ConSens cuts after each context document), and its pass
  always runs segment by segment, cache or not, so the keys and values of its first ``j`` segments
  depend only on those segments' tokens. An entry is kept under its ids *and* its cut positions; a
  prompt that is not held whole but whose first ``j`` segments (same ids, same cuts) are the start
  of a kept prompt gets that prompt's state cut to those segments (:meth:`PromptStateCache.get_prefix`)
  and runs only the rest: the same computation as without the cache, so still bit-identical
  (attribution's leave-one-out prompts share the documents before the one they drop with the full
  context's prompt). Only states whose layers all hold every position can be cut (not a sliding-window
  layer: the caller says so with ``prefixes=False``). A cut that is not a kept segment end is never
  served: a state cropped at an arbitrary token and extended differs from one pass over the prompt in
  the last bits (up to 1.3e-5 in a log-probability, measured on WikiEval rows with SmolLM2-135M).
* **Thread-safe.** One lock guards the table and its prefix index, so one model may serve several
  threads (the guard's worker, an application's own threads); copies are made outside it.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Callable
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
    """What a :class:`PromptStateCache` holds and did: entries, prompt tokens, bytes, its token budget,
    hits (a prompt held whole), misses (not held whole), evictions, and of the misses those that
    started from a kept prefix (``prefix_hits``) with the prompt tokens they did not run again
    (``prefix_tokens``)."""

    entries: int
    tokens: int
    nbytes: int
    max_tokens: int
    hits: int
    misses: int
    evictions: int
    prefix_hits: int = 0
    prefix_tokens: int = 0


Key = tuple[tuple[int, ...], tuple[int, ...]]
"""An entry's key: the prompt's token ids and its segment cuts (token positions)."""


@dataclass(frozen=True)
class _Entry:
    cache: Any
    last: Any
    tokens: int
    nbytes: int
    prefixes: tuple[Key, ...]  # the keys of its first segments in the prefix index


def state_nbytes(cache: Any, last: Any) -> int:
    """Bytes of a KV cache's tensors plus the last state (transformers' ``DynamicCache`` layers)."""
    total = int(last.nbytes)
    for layer in getattr(cache, "layers", ()):
        for name in ("keys", "values"):
            tensor = getattr(layer, name, None)
            if tensor is not None:
                total += int(tensor.nbytes)
    return total


def copy_layers(cache: Any, cut: Callable[[Any], Any]) -> Any:
    """A deep copy of ``cache`` whose layers' keys and values are ``cut(tensor)`` (a new tensor: a
    slice of positions, a choice of batch rows); the original stays whole."""
    memo: dict[int, Any] = {}
    for layer in getattr(cache, "layers", ()):
        for name in ("keys", "values"):
            tensor = getattr(layer, name, None)
            if tensor is not None:
                memo[id(tensor)] = cut(tensor)
    return copy.deepcopy(cache, memo)


def cropped_copy(cache: Any, length: int) -> Any:
    """A deep copy of ``cache`` holding only its first ``length`` positions (each layer's keys and
    values cut on their position axis, the second last; the kept positions' values unchanged)."""
    return copy_layers(cache, lambda tensor: tensor[..., :length, :].clone())


def croppable(cache: Any) -> bool:
    """Whether every layer of ``cache`` keeps all positions (transformers' plain ``DynamicLayer``), so
    a cut of it to its first positions (or to some of its batch rows) is their state; a sliding-window
    layer keeps only the last ones."""
    from transformers.cache_utils import DynamicLayer

    layers: list[Any] = list(getattr(cache, "layers", None) or ())
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


def private_copy(cache: Any) -> Any:
    """A copy of ``cache`` its holder may extend, crop or batch-expand while ``cache`` stays as it was.

    For a :func:`croppable` cache it is a new cache object whose layers hold the *same* key and value
    tensors, nothing copied: ``DynamicLayer`` binds a new tensor on every change (``update`` concatenates,
    ``crop`` slices, the batch operations index or repeat) and never writes into the old one (checked in
    tests/models/test_prompt_cache.py). Any other cache (a sliding window, a static layer writing in
    place) is deep-copied. Issue 49: a deep copy of a 950-token SmolLM2 state is 44 MB, and the binding
    check's stretches took one per changed sentence."""
    if croppable(cache):
        return copy_layers(cache, lambda tensor: tensor)
    return copy.deepcopy(cache)


def _prefix_key(ids: tuple[int, ...], cuts: tuple[int, ...], end: int) -> Key:
    return ids[:end], tuple(c for c in cuts if c < end)


class PromptStateCache:
    """An LRU of prompt KV states keyed by their exact token ids and segment cuts, at most
    ``max_tokens`` tokens in all; a kept prompt's first segments serve other prompts that start with
    them.

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
        self._entries: OrderedDict[Key, _Entry] = OrderedDict()
        # Prefix key (first segments' ids and cuts) -> the kept entries that start with it, in order.
        self._prefixes: dict[Key, dict[Key, None]] = {}
        self._lock = threading.Lock()
        self._tokens = 0
        self._nbytes = 0
        self._hits = 0
        self._misses = 0
        self._evictions = 0
        self._prefix_hits = 0
        self._prefix_tokens = 0

    def get(self, ids: tuple[int, ...], cuts: tuple[int, ...] = ()) -> tuple[Any, Any] | None:
        """A private copy of ``(KV cache, last state)`` for exactly these prompt ids and cuts, or None."""
        with self._lock:
            entry = self._entries.get((ids, cuts))
            if entry is None:
                self._misses += 1
                return None
            self._entries.move_to_end((ids, cuts))
            self._hits += 1
        # The stored entry is never mutated, so copying it outside the lock is safe.
        return private_copy(entry.cache), entry.last

    def holds(self, ids: tuple[int, ...], cuts: tuple[int, ...] = ()) -> bool:
        """Whether exactly these prompt ids and cuts are kept (no copy made); a prompt not kept counts
        as a miss, as :meth:`get` would count it (the batched route computes it without asking)."""
        with self._lock:
            if (ids, cuts) in self._entries:
                return True
            self._misses += 1
            return False

    def get_prefix(self, ids: tuple[int, ...], cuts: tuple[int, ...]) -> tuple[int, Any] | None:
        """``(j, KV cache)``: a private copy of a kept state cut to the first ``j`` tokens of ``ids``,
        where ``j`` is the last of ``cuts`` such that a kept prompt has the same ids and cuts before
        ``j`` and a cut at ``j``; None when there is none."""
        found = self._longest(ids, cuts, whole=False)
        return None if found is None else (found[0], cropped_copy(found[1].cache, found[0]))

    def get_extended(self, ids: tuple[int, ...], cuts: tuple[int, ...]) -> tuple[int, Any] | None:
        """``(j, KV cache)``: a private copy of a prompt kept whole that is exactly the first segments of
        ``ids`` (its ids before ``j``, ``j`` one of ``cuts``), the longest such; None when none is kept.

        A prompt that extends a kept one (the binding check's answer stretches after a row's prompt)
        runs only its own last segments on that state: the same passes as from the start, so the same
        bits. Its own state is one-off, so the caller does not keep it (it would evict the prompts
        it extends).
        """
        found = self._longest(ids, cuts, whole=True)
        return None if found is None else (found[0], private_copy(found[1].cache))

    def _longest(
        self, ids: tuple[int, ...], cuts: tuple[int, ...], *, whole: bool
    ) -> tuple[int, _Entry] | None:
        """The kept entry whose state serves the longest run of ``ids``' first segments: an entry that
        starts with them (``whole=False``, to be cut) or one that is exactly them (``whole=True``)."""
        with self._lock:
            for end in sorted(cuts, reverse=True):
                prefix = _prefix_key(ids, cuts, end)
                if whole:
                    key: Key | None = prefix if prefix in self._entries else None
                else:
                    holders = self._prefixes.get(prefix)
                    key = next(reversed(holders)) if holders else None
                if key is not None:
                    self._entries.move_to_end(key)
                    self._prefix_hits += 1
                    self._prefix_tokens += end
                    return end, self._entries[key]
        return None

    def put(
        self,
        ids: tuple[int, ...],
        cache: Any,
        last: Any,
        cuts: tuple[int, ...] = (),
        *,
        prefixes: bool = True,
    ) -> None:
        """Keep ``cache`` and ``last`` for ``ids`` run in segments cut at ``cuts`` (the caller must not
        change them afterwards); with ``prefixes``, its first segments serve :meth:`get_prefix`."""
        tokens = len(ids)
        if tokens > self.max_tokens:
            return
        key = (ids, cuts)
        own = tuple(_prefix_key(ids, cuts, end) for end in cuts if 0 < end < tokens) if prefixes else ()
        entry = _Entry(cache, last, tokens, state_nbytes(cache, last), own)
        with self._lock:
            self._drop(key)
            self._entries[key] = entry
            for prefix in own:
                self._prefixes.setdefault(prefix, {})[key] = None
            self._tokens += tokens
            self._nbytes += entry.nbytes
            while self._tokens > self.max_tokens:
                self._drop(next(iter(self._entries)))
                self._evictions += 1

    def _drop(self, key: Key) -> None:
        """Remove ``key``'s entry and its prefixes (call under the lock)."""
        old = self._entries.pop(key, None)
        if old is None:
            return
        self._tokens -= old.tokens
        self._nbytes -= old.nbytes
        for prefix in old.prefixes:
            holders = self._prefixes[prefix]
            del holders[key]
            if not holders:
                del self._prefixes[prefix]

    def clear(self) -> None:
        """Drop every entry (the counters stay)."""
        with self._lock:
            self._entries.clear()
            self._prefixes.clear()
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
                prefix_hits=self._prefix_hits,
                prefix_tokens=self._prefix_tokens,
            )
