"""Hybrid retrieval: a dense vector store fused with BM25 keyword scores by reciprocal rank fusion.

A small sentence embedder ranks "Oliver is the husband of Eleanor." below other sentences about
Eleanor for "Who is the husband of Eleanor?": it weighs the name more than the relation word. Exact
keyword scoring does not, and fusing the two rankings (RRF, Cormack et al. 2009; LangChain's
EnsembleRetriever does the same) keeps what each does well. It is a general retrieval technique, not
specific to any benchmark.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from ragsense.rag._index import Hit, check_k
from ragsense.rag._store import VectorStore

_WORD = re.compile(r"\w+")
RRF_K = 60  # the constant of reciprocal rank fusion: 1 / (RRF_K + rank)


def _terms(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


class BM25:
    """Okapi BM25 over a fixed list of documents (k1=1.2, b=0.75; idf with the +1 smoothing of Lucene).

    >>> bm25 = BM25(["Oliver is the husband of Eleanor.", "Eleanor is the sister of George."])
    >>> [round(s, 3) for s in bm25.scores("Who is the husband of Eleanor?")]
    [1.422, 0.729]
    """

    def __init__(self, documents: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self._docs = [Counter(_terms(d)) for d in documents]
        self._lengths = np.array([sum(c.values()) for c in self._docs], dtype=np.float64)
        self._avg = float(self._lengths.mean()) if len(self._docs) else 0.0
        df: Counter[str] = Counter()
        for counts in self._docs:
            df.update(counts.keys())
        n = len(self._docs)
        self._idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        # Terms in every document score about zero; terms in most documents carry little.

    def scores(self, query: str) -> list[float]:
        out = np.zeros(len(self._docs))
        norm = self.k1 * (1 - self.b + self.b * self._lengths / (self._avg or 1.0))
        for term in set(_terms(query)):
            idf = self._idf.get(term)
            if idf is None:
                continue
            tf = np.array([c.get(term, 0) for c in self._docs], dtype=np.float64)
            out += idf * tf * (self.k1 + 1) / (tf + norm)
        return [float(s) for s in out]


class HybridStore:
    """A :class:`VectorStore` whose ranking fuses the dense store's with BM25's (reciprocal rank fusion).

    Each document's fused score is ``1/(60 + dense rank) + 1/(60 + BM25 rank)`` (ranks from 1; ties in
    store order), so neither score scale dominates. Deterministic: ties follow store order.

    >>> import numpy as np
    >>> from ragsense.rag import InMemoryVectorIndex
    >>> def vec(t):  # a dense model that misses the relation word of a statement
    ...     if "husband" in t and "Who" not in t:
    ...         return [0.1, 1.0]
    ...     return [1.0, 0.1] if "Eleanor" in t else [0.5, 0.5]
    >>> class Toy:
    ...     name = fingerprint = "toy"; dim = 2
    ...     def embed(self, texts):
    ...         return np.array([vec(t) for t in texts], dtype=np.float32)
    >>> docs = ["Eleanor is the sister of George.", "Oliver is the husband of Eleanor.", "A river."]
    >>> dense = InMemoryVectorIndex(Toy(), docs)
    >>> [h.index for h in dense.search(["Who is the husband of Eleanor?"], k=2)[0]]
    [0, 2]
    >>> [h.index for h in HybridStore(dense).search(["Who is the husband of Eleanor?"], k=2)[0]]
    [0, 1]
    """

    def __init__(self, dense: VectorStore) -> None:
        self.dense = dense
        self._bm25 = BM25(dense.documents)

    @property
    def documents(self) -> Sequence[str]:
        return self.dense.documents

    @property
    def ids(self) -> Sequence[str]:
        return self.dense.ids

    def __len__(self) -> int:
        return len(self.dense)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        n = len(self.dense)
        check_k(k, n)
        dense_hits = self.dense.search(list(queries), n)  # full ranking: stores here are small
        out = []
        for query, hits in zip(queries, dense_hits, strict=True):
            fused = np.zeros(n)
            for rank, hit in enumerate(hits, start=1):
                fused[hit.index] += 1.0 / (RRF_K + rank)
            lexical = np.asarray(self._bm25.scores(query))
            order = np.lexsort((np.arange(n), -lexical))
            fused[order] += 1.0 / (RRF_K + np.arange(1, n + 1))
            best = np.lexsort((np.arange(n), -fused))[:k]
            out.append([Hit(int(i), float(fused[i])) for i in best])
        return out
