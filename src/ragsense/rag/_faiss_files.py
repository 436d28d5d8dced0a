"""The on-disk format of :class:`FaissVectorStore`: reading and checking its three files, writing them.

See :mod:`ragsense.rag._faiss` for the layout. Readers refuse, naming the file, anything missing,
unreadable, of another format version, or disagreeing with the manifest.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ragsense.embeddings import Embedder
from ragsense.errors import BackendUnavailableError, ParameterError

FORMAT = "ragsense.faiss-vector-store"
FORMAT_VERSION = 1
INDEX_FILE = "index.faiss"
DOCUMENTS_FILE = "documents.sqlite"
MANIFEST_FILE = "manifest.json"
FILES = (INDEX_FILE, DOCUMENTS_FILE, MANIFEST_FILE)

SCHEMA = """
CREATE TABLE documents (
    position INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL
)
"""


def import_faiss() -> Any:
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise BackendUnavailableError(
            "the FAISS vector store needs faiss-cpu: pip install 'ragsense[rag]'"
        ) from exc
    return faiss


def content_digest(ids: Sequence[str], texts: Sequence[str], *, salt: str = "") -> str:
    """sha256 (hex) over ``salt`` and the ``(id, text)`` pairs, each part length-prefixed (unambiguous).

    >>> content_digest(["a"], ["bc"]) == content_digest(["ab"], ["c"])
    False
    """
    h = hashlib.sha256()
    for part in (salt, *(p for pair in zip(ids, texts, strict=True) for p in pair)):
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()


def corrupt(file: Path, problem: str) -> ParameterError:
    return ParameterError(f"{file} {problem}; rebuild the store", parameter="path")


@contextlib.contextmanager
def temp_file(directory: Path, name: str) -> Iterator[Path]:
    """A fresh temporary path next to ``name`` in ``directory``, removed unless it was moved away."""
    # Not mkstemp: its files are mode 0600, and the store's files should get the user's usual mode.
    tmp = directory / f".{name}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
    try:
        yield tmp
    finally:
        tmp.unlink(missing_ok=True)


def read_manifest(path: Path) -> dict[str, Any]:
    file = path / MANIFEST_FILE
    if not path.exists():
        raise ParameterError(f"no vector store at {path}: the directory does not exist", parameter="path")
    if not path.is_dir():
        raise ParameterError(f"no vector store at {path}: not a directory", parameter="path")
    if not file.is_file():
        raise ParameterError(
            f"{file} not found: {path} is not a vector store, or its creation was interrupted",
            parameter="path",
        )
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise corrupt(file, f"is not valid JSON ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise corrupt(file, f"is not a {FORMAT} manifest")
    if manifest.get("version") != FORMAT_VERSION:
        raise ParameterError(
            f"{file} has format version {manifest.get('version')!r}; this ragsense reads version "
            f"{FORMAT_VERSION} (upgrade ragsense or rebuild the store)",
            parameter="path",
        )
    embedder = manifest.get("embedder")
    fields = {"dim": int, "count": int, "content_sha256": str}
    if (
        not isinstance(embedder, dict)
        or not all(isinstance(embedder.get(key), str) for key in ("name", "fingerprint"))
        or not all(isinstance(manifest.get(key), kind) for key, kind in fields.items())
    ):
        raise corrupt(file, "lacks a field (embedder name/fingerprint, dim, count, content_sha256)")
    return manifest


def read_index(file: Path, dim: int, count: int) -> Any:
    faiss = import_faiss()
    if not file.is_file():
        raise corrupt(file, "not found")
    try:
        index = faiss.read_index(str(file))
    except RuntimeError as exc:
        raise corrupt(file, f"is not a readable FAISS index ({str(exc).splitlines()[-1]})") from exc
    if type(index).__name__ != "IndexFlatIP":
        raise corrupt(file, f"holds a {type(index).__name__}, expected IndexFlatIP")
    if index.d != dim or index.ntotal != count:
        raise corrupt(file, f"holds {index.ntotal} vectors of dim {index.d}; manifest says {count} of {dim}")
    return index


def read_rows(file: Path) -> tuple[list[str], list[str], list[str]]:
    if not file.is_file():
        raise corrupt(file, "not found")
    try:
        # Read-only URI: a missing file must not be created empty.
        with contextlib.closing(sqlite3.connect(file.resolve().as_uri() + "?mode=ro", uri=True)) as conn:
            rows = conn.execute(
                "SELECT position, id, text, metadata FROM documents ORDER BY position"
            ).fetchall()
    except sqlite3.DatabaseError as exc:
        raise corrupt(file, f"is not a readable documents database ({exc})") from exc
    if any(row[0] != i for i, row in enumerate(rows)):
        raise corrupt(file, "has gaps in its positions")
    return [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows]


def write_store(
    path: Path,
    embedder: Embedder,
    index: Any,
    rows: tuple[list[str], list[str], list[str]],
    *,
    first_new: int,
) -> None:
    """Write ``rows`` (ids, texts, metadata JSON) from ``first_new`` on, the index and the manifest,
    each to a temp file that then replaces the old one, the manifest last."""
    faiss = import_faiss()
    ids, texts, metadata = rows
    manifest = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "index": "IndexFlatIP",
        "embedder": {"name": embedder.name, "fingerprint": embedder.fingerprint},
        "dim": int(index.d),
        "count": len(ids),
        "content_sha256": content_digest(ids, texts),
    }
    with (
        temp_file(path, DOCUMENTS_FILE) as tmp_db,
        temp_file(path, INDEX_FILE) as tmp_index,
        temp_file(path, MANIFEST_FILE) as tmp_manifest,
    ):
        if first_new > 0:
            # Appending to a copy keeps the live database intact should this write fail.
            shutil.copyfile(path / DOCUMENTS_FILE, tmp_db)
        with contextlib.closing(sqlite3.connect(tmp_db)) as conn, conn:
            if first_new == 0:
                conn.execute(SCHEMA)
            conn.executemany(
                "INSERT INTO documents (position, id, text, metadata) VALUES (?, ?, ?, ?)",
                zip(
                    range(first_new, len(ids)),
                    ids[first_new:],
                    texts[first_new:],
                    metadata[first_new:],
                    strict=True,
                ),
            )
        faiss.write_index(index, str(tmp_index))
        tmp_manifest.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp_db, path / DOCUMENTS_FILE)
        os.replace(tmp_index, path / INDEX_FILE)
        os.replace(tmp_manifest, path / MANIFEST_FILE)
