"""Exact cosine-similarity search over embedded documents (in memory).

The retrieval side of ragsense's RAG pipeline; a persistent vector store implements the same
``search`` contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ragsense.embeddings import Embedder
from ragsense.errors import ParameterError


@dataclass(frozen=True)
class Hit:
    """A retrieved document: its position in the store and its cosine similarity to the query."""

    index: int
    score: float


def check_k(k: int, size: int) -> None:
    """Refuse a ``k`` outside ``1..size`` (shared by every vector store, so the message is the same).

    >>> check_k(3, 2)
    Traceback (most recent call last):
    ...
    ragsense.errors.ParameterError: k: must be between 1 and the number of documents (2), got 3
    """
    if not 1 <= k <= size:
        raise ParameterError(
            f"must be between 1 and the number of documents ({size}), got {k}", parameter="k"
        )


def resolve_ids(ids: Sequence[str] | None, count: int, *, start: int = 0) -> list[str]:
    """``ids`` as a checked list, or the positions ``start..start+count-1`` as strings when ``None``.

    >>> resolve_ids(None, 2, start=5)
    ['5', '6']
    """
    if ids is None:
        return [str(start + i) for i in range(count)]
    if isinstance(ids, str):
        raise ParameterError("ids must be a sequence of str, not a single str", parameter="ids")
    out = list(ids)
    if len(out) != count:
        raise ParameterError(f"got {len(out)} ids for {count} documents", parameter="ids")
    seen: set[str] = set()
    for i, doc_id in enumerate(out):
        if not isinstance(doc_id, str):
            raise ParameterError(f"id {i} is {type(doc_id).__name__}, not str", parameter="ids")
        if doc_id in seen:
            raise ParameterError(f"duplicate id {doc_id!r}", parameter="ids")
        seen.add(doc_id)
    return out


class InMemoryVectorIndex:
    """Brute-force cosine search: exact, deterministic (ties broken by document order).

    ``ids`` name the documents (default: their positions as strings); they must be unique.

    >>> import numpy as np
    >>> class Toy:
    ...     name = fingerprint = "toy"; dim = 2
    ...     def embed(self, texts):
    ...         return np.array([[1.0, 0.0] if "cat" in t else [0.0, 1.0] for t in texts], dtype=np.float32)
    >>> index = InMemoryVectorIndex(Toy(), ["a cat", "a dog"])
    >>> [h.index for h in index.search(["cat?"], k=1)[0]]
    [0]
    """

    def __init__(
        self, embedder: Embedder, documents: Sequence[str], ids: Sequence[str] | None = None
    ) -> None:
        self.embedder = embedder
        self.documents = list(documents)
        self.ids = resolve_ids(ids, len(self.documents))
        self._vectors = np.asarray(embedder.embed(self.documents), dtype=np.float32)

    def __len__(self) -> int:
        return len(self.documents)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        check_k(k, len(self.documents))
        q = np.asarray(self.embedder.embed(list(queries)), dtype=np.float32)
        sims = q @ self._vectors.T
        out = []
        for row in sims:
            order = np.lexsort((np.arange(len(row)), -row))[:k]
            out.append([Hit(int(i), float(row[i])) for i in order])
        return out
