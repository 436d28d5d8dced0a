"""Exact cosine-similarity search over embedded documents (in memory).

The retrieval side of ragsense's RAG pipeline; a persistent vector store implements the same
``search`` contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ragsense.embeddings import Embedder


@dataclass(frozen=True)
class Hit:
    index: int
    score: float


class InMemoryVectorIndex:
    """Brute-force cosine search: exact, deterministic (ties broken by document order).

    >>> import numpy as np
    >>> class Toy:
    ...     name = fingerprint = "toy"; dim = 2
    ...     def embed(self, texts):
    ...         return np.array([[1.0, 0.0] if "cat" in t else [0.0, 1.0] for t in texts], dtype=np.float32)
    >>> index = InMemoryVectorIndex(Toy(), ["a cat", "a dog"])
    >>> [h.index for h in index.search(["cat?"], k=1)[0]]
    [0]
    """

    def __init__(self, embedder: Embedder, documents: Sequence[str]) -> None:
        self.embedder = embedder
        self.documents = list(documents)
        self._vectors = np.asarray(embedder.embed(self.documents), dtype=np.float32)

    def __len__(self) -> int:
        return len(self.documents)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        if not 1 <= k <= len(self.documents):
            raise ValueError(
                f"k must be between 1 and the number of documents ({len(self.documents)}), got {k}"
            )
        q = np.asarray(self.embedder.embed(list(queries)), dtype=np.float32)
        sims = q @ self._vectors.T
        out = []
        for row in sims:
            order = np.lexsort((np.arange(len(row)), -row))[:k]
            out.append([Hit(int(i), float(row[i])) for i in order])
        return out
