"""Token counts kept per text, so a document that returns is not tokenized again.

ConSens's relevance window counts the tokens of every document of a row, and of every sentence when
one document is too long; the grounded and the ungrounded answer of a row, two systems' answers in a
``compare`` run and the rows of one corpus bring the same documents back. Counting them again is
most of the selection's CPU time, which a GPU cannot hide (benchmarks/bench_selection.py).
:class:`TokenCounts` wraps a backend's counting function with a least-recently-used memo bounded by
its entries and by the bytes they take; a count is a pure function of the text, so the memo changes
no result.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable

MAX_BYTES = 10_000_000
"""The memo's memory: each entry's text (``sys.getsizeof``) plus :data:`ENTRY_OVERHEAD`. A 40-document
WikiEval row's documents, sentences and whole context are about 250,000 characters, so the counts of
some thirty-five such rows are kept."""

MAX_ENTRIES = 40_000
"""The memo's entries, whatever their size: 40,000 of the shortest texts take the whole
:data:`MAX_BYTES` with the overhead below (a bound on characters alone let two million four-character
texts take 274 MB, issue 38)."""

ENTRY_OVERHEAD = 200
"""Bytes an entry takes beyond its text: its slots in the ordered dictionary's tables, its link node
and the count's int object. Traced with ``tracemalloc`` (and ``sys.getsizeof``, within 2%): 98 to 132
bytes an entry while a memo fills, up to 183 once it is full and evicting, whose deleted slots keep the
table at the size the dictionary's growth rule gives (up to six slots a live entry, 28 bytes a slot
on 64-bit CPython); 200 bounds them all (tests/models/test_token_counts.py checks it)."""


class TokenCounts:
    """``count(text)`` with a bounded memo; thread-safe (one lock around the table, counting outside it).

    >>> calls = []
    >>> counts = TokenCounts(lambda s: calls.append(s) or len(s.split()), max_bytes=1_000)
    >>> counts("a b c"), counts("a b c"), calls
    (3, 3, ['a b c'])
    >>> counts("a text longer than the whole budget " * 30), len(counts)  # counted, not kept
    (210, 1)
    >>> few = TokenCounts(len, max_entries=2)
    >>> [few(t) for t in ("a", "bb", "ccc")], len(few)  # the least recently used goes first
    ([1, 2, 3], 2)
    """

    def __init__(
        self, count: Callable[[str], int], *, max_bytes: int = MAX_BYTES, max_entries: int = MAX_ENTRIES
    ) -> None:
        self._count = count
        self._max_bytes = max_bytes
        self._max_entries = max_entries
        self._bytes = 0
        self._table: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, text: str) -> int:
        with self._lock:
            hit = self._table.get(text)
            if hit is not None:
                self._table.move_to_end(text)
                return hit
        value = self._count(text)
        size = _entry_bytes(text)
        if size <= self._max_bytes and self._max_entries > 0:
            with self._lock:
                if text not in self._table:
                    self._table[text] = value
                    self._bytes += size
                    while self._bytes > self._max_bytes or len(self._table) > self._max_entries:
                        old, _ = self._table.popitem(last=False)
                        self._bytes -= _entry_bytes(old)
        return value

    def __len__(self) -> int:
        return len(self._table)

    @property
    def bytes(self) -> int:
        """The memory the memo's entries take by its measure (:data:`ENTRY_OVERHEAD`)."""
        return self._bytes


def _entry_bytes(text: str) -> int:
    return sys.getsizeof(text) + ENTRY_OVERHEAD
