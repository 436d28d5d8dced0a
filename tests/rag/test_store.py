"""The vector stores: FaissVectorStore on disk, InMemoryVectorIndex, and the shared contract."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ragsense.errors import ParameterError
from ragsense.rag._faiss import FaissVectorStore
from ragsense.rag._index import Hit, InMemoryVectorIndex
from ragsense.rag._store import VectorStore, open_vector_store


class RandomEmbedder:
    """Maps each text to a random unit vector seeded by the text (deterministic); counts its calls."""

    dim = 16

    def __init__(self, fingerprint: str = "random-v1") -> None:
        self.name = "random"
        self.fingerprint = fingerprint
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
            v = np.random.default_rng(seed).standard_normal(self.dim)
            rows.append(v / np.linalg.norm(v))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)


DOCS = [f"document number {i}" for i in range(200)]
QUERIES = [f"query {i}" for i in range(10)]


def hits_close(a: list[list[Hit]], b: list[list[Hit]]) -> None:
    assert [[h.index for h in row] for row in a] == [[h.index for h in row] for row in b]
    for row_a, row_b in zip(a, b, strict=True):
        np.testing.assert_allclose([h.score for h in row_a], [h.score for h in row_b], atol=1e-6)


def test_create_open_round_trip(tmp_path: Path) -> None:
    emb = RandomEmbedder()
    meta = [{"source": f"s{i}", "n": i} for i in range(len(DOCS))]
    store = FaissVectorStore.create(
        tmp_path / "s", emb, DOCS, ids=[f"d{i}" for i in range(200)], metadata=meta
    )
    assert not store.reused
    assert {p.name for p in (tmp_path / "s").iterdir()} == {
        "index.faiss",
        "documents.sqlite",
        "manifest.json",
    }
    again = FaissVectorStore.open(tmp_path / "s", RandomEmbedder())  # a new object, as in a new run
    assert again.reused
    assert list(again.documents) == DOCS
    assert list(again.ids) == [f"d{i}" for i in range(200)]
    assert again.metadata(7) == {"source": "s7", "n": 7}
    assert len(again) == 200
    assert again.search(QUERIES, k=5) == store.search(QUERIES, k=5)
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert manifest["embedder"] == {"name": "random", "fingerprint": "random-v1"}
    assert (manifest["dim"], manifest["count"], manifest["version"]) == (16, 200, 1)
    # The documents are plain SQLite: a user can read them without ragsense.
    with contextlib.closing(sqlite3.connect(tmp_path / "s" / "documents.sqlite")) as conn:
        assert conn.execute("SELECT id, text FROM documents WHERE position = 3").fetchone() == ("d3", DOCS[3])


@pytest.mark.parametrize("k", [1, 5, 50])
def test_faiss_matches_in_memory(tmp_path: Path, k: int) -> None:
    emb = RandomEmbedder()
    faiss_hits = FaissVectorStore.create(tmp_path, emb, DOCS).search(QUERIES, k=k)
    memory_hits = InMemoryVectorIndex(emb, DOCS).search(QUERIES, k=k)
    assert all(len(row) == k for row in faiss_hits)
    hits_close(faiss_hits, memory_hits)


def test_ties_follow_document_order(tmp_path: Path) -> None:
    # 40 copies of one text among others: identical vectors, identical scores. More copies than
    # k + the tie margin, so the search must widen to find the first ones.
    docs = [f"filler {i}" for i in range(30)] + ["same"] * 40 + [f"more {i}" for i in range(30)]
    ids = [str(i) for i in range(len(docs))]
    store = FaissVectorStore.create(tmp_path, RandomEmbedder(), docs, ids=ids)
    for k in (1, 3, 10):
        [hits] = store.search(["same"], k=k)
        assert [h.index for h in hits] == list(range(30, 30 + k))
        assert hits[0].score == pytest.approx(1.0, abs=1e-6)
    memory = InMemoryVectorIndex(RandomEmbedder(), docs)
    assert store.search(["same"], k=10) == memory.search(["same"], k=10)
    # 25 queries take FAISS's BLAS path; duplicates must still tie exactly.
    assert all([h.index for h in row] == [30, 31, 32] for row in store.search(["same"] * 25, k=3))


@pytest.mark.parametrize("k", [0, 4, -1])
@pytest.mark.parametrize("kind", ["faiss", "memory"])
def test_bad_k(tmp_path: Path, k: int, kind: str) -> None:
    path = tmp_path / "s" if kind == "faiss" else None
    store = open_vector_store(kind, RandomEmbedder(), ["a", "b", "c"], path=path)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match=r"number of documents \(3\), got") as info:
        store.search(["q"], k=k)
    assert info.value.parameter == "k"


def test_other_embedder_refused(tmp_path: Path) -> None:
    FaissVectorStore.create(tmp_path, RandomEmbedder("random-v1"), DOCS[:5])
    with pytest.raises(ParameterError, match=r"built with the embedder 'random'.*random-v1") as info:
        FaissVectorStore.open(tmp_path, RandomEmbedder("random-v2"))
    assert info.value.parameter == "embedder"


def test_corrupt_or_missing_files(tmp_path: Path) -> None:
    emb = RandomEmbedder()
    FaissVectorStore.create(tmp_path, emb, DOCS[:5])
    manifest = tmp_path / "manifest.json"
    good = manifest.read_text()
    manifest.write_text("{not json")
    with pytest.raises(ParameterError, match=r"manifest\.json is not valid JSON"):
        FaissVectorStore.open(tmp_path, emb)
    manifest.write_text(good.replace('"version": 1', '"version": 99'))
    with pytest.raises(ParameterError, match="format version 99"):
        FaissVectorStore.open(tmp_path, emb)
    manifest.write_text(good)
    (tmp_path / "index.faiss").write_bytes(b"garbage")
    with pytest.raises(ParameterError, match=r"index\.faiss is not a readable FAISS index"):
        FaissVectorStore.open(tmp_path, emb)
    (tmp_path / "index.faiss").unlink()
    with pytest.raises(ParameterError, match=r"index\.faiss not found"):
        FaissVectorStore.open(tmp_path, emb)
    with pytest.raises(ParameterError, match="directory does not exist"):
        FaissVectorStore.open(tmp_path / "elsewhere", emb)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ParameterError, match=r"manifest\.json not found: .* is not a vector store"):
        FaissVectorStore.open(tmp_path / "empty", emb)


def test_tampered_documents_detected(tmp_path: Path) -> None:
    emb = RandomEmbedder()
    FaissVectorStore.create(tmp_path, emb, DOCS[:5])
    with contextlib.closing(sqlite3.connect(tmp_path / "documents.sqlite")) as conn, conn:
        conn.execute("UPDATE documents SET text = 'changed' WHERE position = 2")
    with pytest.raises(ParameterError, match=r"documents\.sqlite does not match the manifest"):
        FaissVectorStore.open(tmp_path, emb)
    (tmp_path / "documents.sqlite").write_bytes(b"not a database at all, just some bytes" * 100)
    with pytest.raises(ParameterError, match=r"documents\.sqlite is not a readable documents database"):
        FaissVectorStore.open(tmp_path, emb)


def test_create_refuses_existing_store(tmp_path: Path) -> None:
    emb = RandomEmbedder()
    FaissVectorStore.create(tmp_path, emb, ["a"])
    with pytest.raises(ParameterError, match="already holds a vector store"):
        FaissVectorStore.create(tmp_path, emb, ["b"])
    assert list(FaissVectorStore.create(tmp_path, emb, ["b"], overwrite=True).documents) == ["b"]
    assert list(FaissVectorStore.open(tmp_path, emb).documents) == ["b"]


def test_build_cached_reuses(tmp_path: Path) -> None:
    emb = RandomEmbedder()
    first = FaissVectorStore.build_cached(emb, DOCS, root=tmp_path)
    assert not first.reused
    assert len(emb.calls) == 1
    second = FaissVectorStore.build_cached(emb, DOCS, root=tmp_path)
    assert second.reused and second.path == first.path
    assert len(emb.calls) == 1  # the documents were not embedded again
    assert second.search(QUERIES, k=3) == first.search(QUERIES, k=3)
    other = FaissVectorStore.build_cached(emb, DOCS[:-1], root=tmp_path)
    assert other.path != first.path and not other.reused
    # A damaged cache entry is rebuilt, not reported.
    (first.path / "index.faiss").write_bytes(b"garbage")
    rebuilt = FaissVectorStore.build_cached(emb, DOCS, root=tmp_path)
    assert not rebuilt.reused and rebuilt.path == first.path


def test_add_appends_and_persists(tmp_path: Path) -> None:
    emb = RandomEmbedder()
    store = FaissVectorStore.create(tmp_path, emb, DOCS[:100])
    store.add(DOCS[100:], metadata=[{"late": True}] * 100)
    assert list(store.ids[98:102]) == ["98", "99", "100", "101"]
    reopened = FaissVectorStore.open(tmp_path, emb)
    assert list(reopened.documents) == DOCS
    assert reopened.metadata(150) == {"late": True} and reopened.metadata(5) == {}
    hits_close(reopened.search(QUERIES, k=20), InMemoryVectorIndex(emb, DOCS).search(QUERIES, k=20))
    assert not list(tmp_path.glob("*.tmp"))


def test_duplicate_ids_rejected(tmp_path: Path) -> None:
    emb = RandomEmbedder()
    with pytest.raises(ParameterError, match="duplicate id 'x'"):
        FaissVectorStore.create(tmp_path, emb, ["a", "b"], ids=["x", "x"])
    with pytest.raises(ParameterError, match="duplicate id 'x'"):
        InMemoryVectorIndex(emb, ["a", "b"], ids=["x", "x"])
    store = FaissVectorStore.create(tmp_path, emb, ["a", "b"], ids=["x", "y"])
    with pytest.raises(ParameterError, match=r"already in the store: \['y'\]"):
        store.add(["c"], ids=["y"])
    assert len(FaissVectorStore.open(tmp_path, emb)) == 2


def test_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    emb = RandomEmbedder()
    monkeypatch.setenv("RAGSENSE_CACHE_DIR", str(tmp_path / "cache"))
    cached = open_vector_store("faiss", emb, DOCS[:10])
    assert isinstance(cached, FaissVectorStore) and cached.path.parent == tmp_path / "cache" / "stores"
    memory = open_vector_store("memory", emb, DOCS[:10])
    on_disk = open_vector_store("faiss", emb, DOCS[:10], path=tmp_path / "s")
    assert isinstance(memory, VectorStore) and isinstance(on_disk, VectorStore)
    assert isinstance(on_disk, FaissVectorStore) and not on_disk.reused
    reopened = open_vector_store("faiss", emb, DOCS[:10], path=tmp_path / "s")
    assert isinstance(reopened, FaissVectorStore) and reopened.reused
    hits_close(reopened.search(QUERIES, k=4), memory.search(QUERIES, k=4))
    with pytest.raises(ParameterError, match="other documents"):
        open_vector_store("faiss", emb, DOCS[:11], path=tmp_path / "s")
    with pytest.raises(ParameterError, match="unknown vector store 'chroma'"):
        open_vector_store("chroma", emb, DOCS)  # type: ignore[arg-type]


def test_minilm_retrieves_the_kinship_fact(tmp_path: Path) -> None:
    from ragsense.embeddings import load_embedder

    docs = [
        "Oliver plays the violin in the school orchestra.",
        "Henry is the father of Oliver.",
        "Margaret is the mother of Henry.",
        "Oliver has a younger sister called Ada.",
        "Henry works as a carpenter in Leeds.",
        "The father of Ada's best friend is a pilot.",
        "Paris is the capital of France.",
        "Water boils at 100 degrees Celsius at sea level.",
        "Oliver's uncle lives in Manchester.",
        "The orchestra rehearses every Tuesday.",
    ]
    store = FaissVectorStore.create(tmp_path, load_embedder("minilm"), docs)
    [hits] = store.search(["Who is the father of Oliver?"], k=3)
    assert store.documents[hits[0].index] == "Henry is the father of Oliver."
