"""Token counts kept per text, so a document that returns is not tokenized again.

ConSens's relevance window counts the tokens of every document of a row, and of every sentence when
one document is too long; the grounded and the ungrounded answer of a row, two systems' answers in a
``compare`` run and the rows of one corpus bring the same documents back. Counting them again is
most of the selection's CPU time, which a GPU cannot hide (benchmarks/bench_selection.py).
:class:`TokenCounts` wraps a backend's counting function with a least-recently-used memo bounded by
the characters it holds; a count is a pure function of the text, so the memo changes no result.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

# Characters of text kept with their counts (about 10 MB with the dictionary's own overhead): a
# 40-document WikiEval row's documents, sentences and whole context are about 250,000, so the counts of
# some thirty such rows are kept.
MAX_CHARS = 8_000_000


class TokenCounts:
    """``count(text)`` with a bounded memo; thread-safe (one lock around the table, counting outside it).

    >>> calls = []
    >>> counts = TokenCounts(lambda s: calls.append(s) or len(s.split()), max_chars=20)
    >>> counts("a b c"), counts("a b c"), calls
    (3, 3, ['a b c'])
    >>> counts("a text longer than the whole budget"), len(counts)  # counted, not kept
    (7, 1)
    """

    def __init__(self, count: Callable[[str], int], *, max_chars: int = MAX_CHARS) -> None:
        self._count = count
        self._max_chars = max_chars
        self._chars = 0
        self._table: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, text: str) -> int:
        with self._lock:
            hit = self._table.get(text)
            if hit is not None:
                self._table.move_to_end(text)
                return hit
        value = self._count(text)
        if len(text) <= self._max_chars:
            with self._lock:
                if text not in self._table:
                    self._table[text] = value
                    self._chars += len(text)
                    while self._chars > self._max_chars:
                        old, _ = self._table.popitem(last=False)
                        self._chars -= len(old)
        return value

    def __len__(self) -> int:
        return len(self._table)
