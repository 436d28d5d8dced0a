"""Hybrid retrieval: BM25 arithmetic and reciprocal rank fusion over a dense store."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from ragsense.errors import ParameterError
from ragsense.rag import BM25, HybridStore, InMemoryVectorIndex
from ragsense.rag._hybrid import RRF_K


class Constant:
    """Every text gets the same vector: the dense ranking is pure store order."""

    name = fingerprint = "constant"
    dim = 2

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.tile(np.array([[0.6, 0.8]], dtype=np.float32), (len(texts), 1))


def test_bm25_matches_the_formula() -> None:
    docs = ["a b", "a c c", "d"]
    bm25 = BM25(docs, k1=1.2, b=0.75)
    avg = (2 + 3 + 1) / 3
    idf_c = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    tf = 2
    expected = idf_c * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * 3 / avg))
    assert bm25.scores("c")[1] == pytest.approx(expected)
    assert bm25.scores("c")[0] == 0.0 and bm25.scores("zzz") == [0.0, 0.0, 0.0]
    assert bm25.scores("C!")[1] == pytest.approx(expected)  # case and punctuation ignored


def test_fusion_scores_and_tie_order() -> None:
    docs = ["river", "Oliver is the husband of Eleanor.", "lake"]
    store = HybridStore(InMemoryVectorIndex(Constant(), docs))
    [hits] = store.search(["husband of Eleanor"], k=3)
    # Dense: store order (ranks 1, 2, 3). BM25: doc 1 first, then docs 0 and 2 tied in store order.
    # Docs 0 and 1 swap ranks between the two rankers, so their fused scores tie: store order decides.
    assert [h.index for h in hits] == [0, 1, 2]
    assert hits[0].score == hits[1].score == pytest.approx(1 / (RRF_K + 1) + 1 / (RRF_K + 2))
    assert hits[2].score == pytest.approx(2 / (RRF_K + 3))
    assert store.ids == ["0", "1", "2"] and list(store.documents) == docs and len(store) == 3
    with pytest.raises(ParameterError, match="k"):
        store.search(["x"], k=4)


def test_hybrid_is_deterministic_with_many_queries() -> None:
    docs = [f"Person{i} is the brother of Person{i + 1}." for i in range(50)]
    store = HybridStore(InMemoryVectorIndex(Constant(), docs))
    queries = [f"Who is the brother of Person{i}?" for i in range(1, 40)]
    first = store.search(queries, k=5)
    assert first == store.search(queries, k=5)
    # Dense ranks doc i at position i (store order); the keyword match lifts the statements about
    # Person{i+1} above that wherever there was room to rise.
    full = store.search(queries, k=50)
    for i, hits in enumerate(full):
        order = [h.index for h in hits]
        assert order.index(i) <= i and order.index(i + 1) <= i + 1
