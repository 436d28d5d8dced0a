"""A persistent vector store: a FAISS flat inner-product index plus the documents in SQLite.

Why FAISS: it is maintained by Meta and ships as a single 19 MB wheel that depends only on numpy
(LanceDB's wheel is 75 MB plus pyarrow; Chroma pulls onnxruntime and a server stack). Exact flat
inner-product search is deterministic, and the index file and the SQLite database are plain files a
user can inspect, copy and move.

A store is a directory of three files:

* ``index.faiss``: a ``faiss.IndexFlatIP`` over the embedder's L2-normalized float32 vectors, so the
  inner product is the cosine similarity and the search is exact (``faiss.write_index`` format).
* ``documents.sqlite``: ``documents(position INTEGER PRIMARY KEY, id TEXT UNIQUE, text TEXT,
  metadata TEXT)``, the metadata a JSON object per document.
* ``manifest.json``: format version, embedder name and fingerprint, dimension, document count, and a
  sha256 digest over the ids and texts.

Nothing is pickled. Every write goes to temporary files that ``os.replace`` moves over the old ones,
the manifest last; :meth:`FaissVectorStore.open` checks that the three files agree (dimension,
counts, digest), so an interrupted write is reported instead of silently read. One writer at a time.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragsense.embeddings import Embedder, Vectors
from ragsense.errors import ParameterError
from ragsense.rag._faiss_files import (
    DOCUMENTS_FILE,
    FILES,
    FORMAT_VERSION,
    INDEX_FILE,
    MANIFEST_FILE,
    content_digest,
    corrupt,
    import_faiss,
    read_index,
    read_manifest,
    read_rows,
    write_store,
)
from ragsense.rag._index import Hit, check_k, resolve_ids

# FAISS orders equal scores arbitrarily; fetching a few more than k lets the re-sort by position
# pick the first documents of a tie. A tie that fills the whole margin widens the search.
_TIE_MARGIN = 16


def _cache_name(embedder: Embedder, ids: Sequence[str], texts: Sequence[str]) -> str:
    # The format version is part of the name so that a new format builds a new store.
    return content_digest(ids, texts, salt=f"v{FORMAT_VERSION}\0{embedder.fingerprint}")[:16]


def _check_texts(texts: Sequence[str], parameter: str = "documents") -> list[str]:
    # A bare str is a Sequence[str] of characters: refuse it rather than store one text per letter.
    if isinstance(texts, str):
        raise ParameterError("must be a sequence of str, not a single str", parameter=parameter)
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise ParameterError(f"item {i} is {type(text).__name__}, not str", parameter=parameter)
    return out


def _metadata_json(metadata: Sequence[Mapping[str, Any] | None] | None, count: int) -> list[str]:
    if metadata is None:
        return ["{}"] * count
    items = list(metadata)
    if len(items) != count:
        raise ParameterError(f"got {len(items)} metadata entries for {count} documents", parameter="metadata")
    out = []
    for i, item in enumerate(items):
        if item is not None and not isinstance(item, Mapping):
            raise ParameterError(f"entry {i} is {type(item).__name__}, not a mapping", parameter="metadata")
        try:
            out.append(json.dumps(dict(item or {}), ensure_ascii=False, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise ParameterError(f"entry {i} is not JSON-serializable: {exc}", parameter="metadata") from exc
    return out


def _embed(embedder: Embedder, texts: Sequence[str], dim: int) -> Vectors:
    if not texts:
        return np.zeros((0, dim), dtype=np.float32)
    vectors = np.ascontiguousarray(embedder.embed(list(texts)), dtype=np.float32)
    if vectors.shape != (len(texts), dim):
        raise ParameterError(
            f"{embedder.name} returned vectors of shape {vectors.shape}, expected {(len(texts), dim)}",
            parameter="embedder",
        )
    return vectors


class FaissVectorStore:
    """An on-disk vector store with exact cosine search. Build it with :meth:`create`,
    :meth:`build_cached` or :meth:`open`; same ``search`` contract as :class:`InMemoryVectorIndex`.
    ``path`` is its directory; ``reused`` tells whether it was read from disk rather than built.

    >>> import tempfile
    >>> import numpy as np
    >>> class Toy:
    ...     name = fingerprint = "toy"; dim = 2
    ...     def embed(self, texts):
    ...         return np.array([[1.0, 0.0] if "cat" in t else [0.0, 1.0] for t in texts], dtype=np.float32)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = FaissVectorStore.create(tmp, Toy(), ["a dog", "a cat"], ids=["d", "c"])
    ...     store = FaissVectorStore.open(tmp, Toy())
    ...     [(store.ids[h.index], h.score) for h in store.search(["cat?"], k=2)[0]]
    [('c', 1.0), ('d', 0.0)]
    """

    def __init__(
        self,
        path: Path,
        embedder: Embedder,
        index: Any,
        ids: list[str],
        texts: list[str],
        metadata: list[str],
        *,
        reused: bool,
    ) -> None:
        # Not public: the classmethods check the arguments and the files.
        self.path = path
        self.embedder = embedder
        self.reused = reused
        self._index = index
        self._dim = int(index.d)
        self._ids = ids
        self._texts = texts
        self._metadata = metadata

    @classmethod
    def create(
        cls,
        path: str | Path,
        embedder: Embedder,
        documents: Sequence[str],
        *,
        ids: Sequence[str] | None = None,
        metadata: Sequence[Mapping[str, Any] | None] | None = None,
        overwrite: bool = False,
    ) -> FaissVectorStore:
        """Embed ``documents`` and write a new store at ``path`` (a directory, created if needed).

        ``ids`` default to the positions as strings; ``metadata`` holds one JSON-serializable mapping
        (or ``None``) per document. An existing store at ``path`` is replaced only with ``overwrite``.
        """
        faiss = import_faiss()
        path = Path(path)
        texts = _check_texts(documents)
        doc_ids = resolve_ids(ids, len(texts))
        metas = _metadata_json(metadata, len(texts))
        if path.exists() and not path.is_dir():
            raise ParameterError(f"{path} exists and is not a directory", parameter="path")
        existing = [name for name in FILES if (path / name).exists()]
        if existing and not overwrite:
            raise ParameterError(
                f"{path} already holds a vector store ({', '.join(existing)}); open it with "
                "FaissVectorStore.open or pass overwrite=True",
                parameter="path",
            )
        index = faiss.IndexFlatIP(embedder.dim)
        index.add(_embed(embedder, texts, embedder.dim))
        path.mkdir(parents=True, exist_ok=True)
        # The old manifest goes first: an interrupted overwrite then reads as "no store", not a mix.
        (path / MANIFEST_FILE).unlink(missing_ok=True)
        store = cls(path, embedder, index, doc_ids, texts, metas, reused=False)
        store._persist(first_new=0)
        return store

    @classmethod
    def open(cls, path: str | Path, embedder: Embedder) -> FaissVectorStore:
        """Open the store at ``path``, checking that ``embedder`` is the one it was built with and
        that its files are complete and agree with each other."""
        path = Path(path)
        manifest = read_manifest(path)
        built = manifest["embedder"]
        if built["fingerprint"] != embedder.fingerprint:
            raise ParameterError(
                f"the store at {path} was built with the embedder {built['name']!r} (fingerprint "
                f"{built['fingerprint']}), not {embedder.name!r} (fingerprint {embedder.fingerprint}); "
                "open it with that embedder or rebuild the store",
                parameter="embedder",
            )
        if manifest["dim"] != embedder.dim:
            raise ParameterError(
                f"the store at {path} holds vectors of dim {manifest['dim']}, "
                f"the embedder makes {embedder.dim}",
                parameter="embedder",
            )
        index = read_index(path / INDEX_FILE, manifest["dim"], manifest["count"])
        ids, texts, metas = read_rows(path / DOCUMENTS_FILE)
        if len(ids) != manifest["count"] or content_digest(ids, texts) != manifest["content_sha256"]:
            raise corrupt(path / DOCUMENTS_FILE, "does not match the manifest (count or content digest)")
        return cls(path, embedder, index, ids, texts, metas, reused=True)

    @classmethod
    def build_cached(
        cls,
        embedder: Embedder,
        documents: Sequence[str],
        *,
        ids: Sequence[str] | None = None,
        root: str | Path | None = None,
    ) -> FaissVectorStore:
        """The store of exactly these documents under ``root`` (default ``<ragsense cache dir>/stores``),
        built on the first call and reused (``.reused``) afterwards: a knowledge source is embedded once.

        The directory name is a digest of the embedder fingerprint, ids and texts. A damaged entry, or
        one changed since with :meth:`add`, is rebuilt.
        """
        texts = _check_texts(documents)
        doc_ids = resolve_ids(ids, len(texts))
        if root is None:
            from ragsense.cache import cache_dir

            root = cache_dir() / "stores"
        path = Path(root) / _cache_name(embedder, doc_ids, texts)
        with contextlib.suppress(ParameterError):  # a damaged cache entry is rebuilt, not reported
            store = cls.open_matching(path, embedder, texts, ids=doc_ids)
            if store is not None:
                return store
        return cls.create(path, embedder, texts, ids=doc_ids, overwrite=True)

    @classmethod
    def open_matching(
        cls,
        path: str | Path,
        embedder: Embedder,
        documents: Sequence[str],
        *,
        ids: Sequence[str] | None = None,
    ) -> FaissVectorStore | None:
        """The store at ``path`` if it holds exactly ``documents`` (and ``ids``), ``None`` if there is
        none; a store of other documents is an error (it is not overwritten)."""
        path = Path(path)
        if not (path / MANIFEST_FILE).exists():
            return None
        texts = _check_texts(documents)
        doc_ids = resolve_ids(ids, len(texts))
        store = cls.open(path, embedder)
        if store._ids != doc_ids or store._texts != texts:
            raise ParameterError(
                f"{path} holds a vector store of other documents ({len(store)} documents); "
                "delete it or choose another path",
                parameter="path",
            )
        return store

    @property
    def documents(self) -> Sequence[str]:
        """The document texts, by position."""
        return self._texts

    @property
    def ids(self) -> Sequence[str]:
        """The document ids, by position."""
        return self._ids

    def metadata(self, i: int) -> dict[str, Any]:
        """The metadata of the document at position ``i`` (a fresh dict; ``{}`` when none was given)."""
        value: dict[str, Any] = json.loads(self._metadata[i])
        return value

    def __len__(self) -> int:
        return len(self._ids)

    def __repr__(self) -> str:
        return f"FaissVectorStore({str(self.path)!r}, {len(self)} documents, embedder={self.embedder.name!r})"

    def add(
        self,
        documents: Sequence[str],
        ids: Sequence[str] | None = None,
        metadata: Sequence[Mapping[str, Any] | None] | None = None,
    ) -> None:
        """Append ``documents`` (positions ``len(self)`` onwards) and write the store back to disk.

        ``ids`` default to the new positions as strings; an id already in the store is refused.
        """
        texts = _check_texts(documents)
        start = len(self)
        new_ids = resolve_ids(ids, len(texts), start=start)
        metas = _metadata_json(metadata, len(texts))
        taken = set(self._ids).intersection(new_ids)
        if taken:
            raise ParameterError(f"ids already in the store: {sorted(taken)[:5]}", parameter="ids")
        if not texts:
            return
        vectors = _embed(self.embedder, texts, self._dim)
        self._index.add(vectors)
        self._ids.extend(new_ids)
        self._texts.extend(texts)
        self._metadata.extend(metas)
        try:
            self._persist(first_new=start)
        except BaseException:
            # Keep memory equal to disk: undo the append when the files could not be written.
            faiss = import_faiss()
            self._index.remove_ids(faiss.IDSelectorRange(start, len(self)))
            del self._ids[start:], self._texts[start:], self._metadata[start:]
            raise

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """The ``k`` most similar documents for each query, best first; equal scores in document order.

        ``k`` must be between 1 and ``len(self)``. The queries are embedded in one call.
        """
        faiss = import_faiss()
        n = len(self)
        check_k(k, n)
        texts = _check_texts(queries, "queries")
        if not texts:
            return []
        q = _embed(self.embedder, texts, self._dim)
        # One thread (process-wide for FAISS): OpenMP threads would compete with torch's for the two
        # shared cores, and a flat scan of a RAG-sized corpus is too short to gain from them.
        faiss.omp_set_num_threads(1)
        fetch = min(n, k + _TIE_MARGIN)
        while True:
            scores, positions = self._index.search(q, fetch)
            # A tie at the k-th score that reaches the last fetched hit may hide earlier documents.
            if fetch == n or not np.any(scores[:, fetch - 1] >= scores[:, k - 1]):
                break
            fetch = min(n, 2 * fetch)
        out = []
        for row_scores, row_positions in zip(scores, positions, strict=True):
            order = np.lexsort((row_positions, -row_scores))[:k]
            out.append([Hit(int(row_positions[i]), float(row_scores[i])) for i in order])
        return out

    def _persist(self, first_new: int) -> None:
        write_store(
            self.path,
            self.embedder,
            self._index,
            (self._ids, self._texts, self._metadata),
            first_new=first_new,
        )
