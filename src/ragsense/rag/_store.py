"""What a vector store is (:class:`VectorStore`), and :func:`open_vector_store` to get one by kind.

Two implementations share the contract: :class:`InMemoryVectorIndex` (embeds on construction, keeps
nothing) and :class:`FaissVectorStore` (on disk, embedded once and reused across runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from ragsense.embeddings import Embedder
from ragsense.errors import ParameterError
from ragsense.rag._faiss import FaissVectorStore
from ragsense.rag._index import Hit, InMemoryVectorIndex

VectorStoreKind = Literal["faiss", "memory"]
VECTOR_STORE_KINDS: tuple[VectorStoreKind, ...] = ("faiss", "memory")


@runtime_checkable
class VectorStore(Protocol):
    """Documents (with unique ids) searchable by cosine similarity to a query.

    ``search(queries, k)`` returns, for each query, the ``k`` best :class:`Hit` objects, best
    first; equal scores come in document order. ``k`` outside ``1..len(store)`` raises
    :class:`~ragsense.errors.ParameterError` (``parameter="k"``) naming the store size.
    """

    @property
    def documents(self) -> Sequence[str]: ...

    @property
    def ids(self) -> Sequence[str]: ...

    def __len__(self) -> int: ...

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]: ...


def open_vector_store(
    kind: VectorStoreKind,
    embedder: Embedder,
    documents: Sequence[str],
    *,
    ids: Sequence[str] | None = None,
    path: str | Path | None = None,
) -> VectorStore:
    """A vector store of ``documents`` of the given ``kind``.

    ``"memory"``: an :class:`InMemoryVectorIndex` (``path`` must be ``None``). ``"faiss"``: without
    ``path``, :meth:`FaissVectorStore.build_cached` (embedded once, reused from the cache dir); with
    ``path``, the store there if it holds exactly these documents, else a new one created there (a
    store of other documents at ``path`` is an error, never overwritten).

    >>> import numpy as np
    >>> class Toy:
    ...     name = fingerprint = "toy"; dim = 2
    ...     def embed(self, texts):
    ...         return np.array([[1.0, 0.0] if "cat" in t else [0.0, 1.0] for t in texts], dtype=np.float32)
    >>> store = open_vector_store("memory", Toy(), ["a dog", "a cat"])
    >>> isinstance(store, VectorStore), store.search(["cat?"], k=1)[0][0].index
    (True, 1)
    """
    if kind == "memory":
        if path is not None:
            raise ParameterError("an in-memory store is not saved; leave path out", parameter="path")
        return InMemoryVectorIndex(embedder, documents, ids)
    if kind == "faiss":
        if path is None:
            return FaissVectorStore.build_cached(embedder, documents, ids=ids)
        store = FaissVectorStore.open_matching(path, embedder, documents, ids=ids)
        return store if store is not None else FaissVectorStore.create(path, embedder, documents, ids=ids)
    raise ParameterError(
        f"unknown vector store {kind!r}; known: {', '.join(VECTOR_STORE_KINDS)}", parameter="kind"
    )
