"""The run store's SQLite schema, its version, and the check that refuses what it cannot read.

Version 1 (docs/runs.md has the same, for people and other tools):

``meta(key, value)``
    ``schema_version`` (``"1"``) and ``created_by`` (the ragsense version that made the file).
``runs``
    one per ``evaluate`` run: ``id`` (12 hex digits), ``created`` and ``finished`` (ISO 8601, UTC),
    ``status`` (``running``, ``complete`` or ``incomplete``), ``tag``, ``command`` (the command line,
    or ``python`` for the API), ``version`` (ragsense's), ``dataset`` (the input path or kind),
    ``input_hash`` (SHA-256 over the input rows, see :func:`ragsense.runs.input_hash`), ``n_rows``
    (rows recorded so far), ``metrics`` (JSON: each metric's name, fields, scores, verdict field,
    settings and model fingerprints), ``summary`` (JSON: ``Summary.to_dict()``, at the end),
    ``host`` and ``pid`` (of the process that ran it), ``note`` (why it is incomplete).
``rows``
    one per output row: ``run_id``, ``position`` (the input position, ``_row``), ``row_id`` (the row's
    ``id``) and ``record`` (the output row as JSON, every field ``docs/metrics.md`` lists).

A file with a newer version is refused (upgrade ragsense); an older one is migrated by the steps in
:data:`MIGRATIONS`, inside one transaction, or refused when no step exists. A SQLite file that is not
a run store is refused, never written to.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from ragsense.errors import RagsenseError

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    created TEXT NOT NULL,
    finished TEXT,
    status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'incomplete')),
    tag TEXT,
    command TEXT,
    version TEXT NOT NULL,
    dataset TEXT,
    input_hash TEXT,
    n_rows INTEGER NOT NULL DEFAULT 0,
    metrics TEXT NOT NULL,
    summary TEXT,
    host TEXT,
    pid INTEGER,
    note TEXT
);
CREATE INDEX runs_by_tag ON runs (tag, created);
CREATE INDEX runs_by_created ON runs (created);
CREATE TABLE rows (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    row_id TEXT,
    record TEXT NOT NULL,
    PRIMARY KEY (run_id, position)
);
"""

Migration = Callable[[sqlite3.Connection], None]

MIGRATIONS: dict[int, Migration] = {}
"""``MIGRATIONS[v]`` turns a version-``v`` store into version ``v + 1`` (none yet: 1 is the first)."""


class StoreVersionError(RagsenseError, RuntimeError):
    """The file is not a run store this ragsense can read (newer, unmigratable, or something else)."""


def create(connection: sqlite3.Connection, ragsense_version: str) -> None:
    """Lay the current schema into an empty database."""
    # Statement by statement (not executescript, which commits): the caller holds the transaction.
    for statement in SCHEMA.split(";"):
        if statement.strip():
            connection.execute(statement)
    connection.executemany(
        "INSERT INTO meta (key, value) VALUES (?, ?)",
        [("schema_version", str(SCHEMA_VERSION)), ("created_by", ragsense_version)],
    )


def stored_version(connection: sqlite3.Connection, where: str) -> int | None:
    """The file's schema version; None for an empty database. Raises for anything else."""
    tables = {r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables:
        return None
    if "meta" not in tables:
        raise StoreVersionError(
            f"{where} is a SQLite database but not a ragsense run store (no 'meta' table); "
            "give another --store path"
        )
    row = connection.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    try:
        return int(row[0])
    except (TypeError, ValueError):
        raise StoreVersionError(
            f"{where} has no readable schema_version; it is not a ragsense run store"
        ) from None


def upgrade(connection: sqlite3.Connection, version: int, where: str) -> None:
    """Bring a version-``version`` store to :data:`SCHEMA_VERSION`, or refuse with the reason."""
    if version > SCHEMA_VERSION:
        raise StoreVersionError(
            f"{where} is a version {version} run store, written by a newer ragsense; this one reads "
            f"version {SCHEMA_VERSION}. Upgrade ragsense, or give another --store path"
        )
    missing = [v for v in range(version, SCHEMA_VERSION) if v not in MIGRATIONS]
    if missing:
        raise StoreVersionError(
            f"{where} is a version {version} run store and this ragsense cannot migrate it to version "
            f"{SCHEMA_VERSION} (no step from version {missing[0]}); give another --store path"
        )
    with connection:  # one transaction: a failed step leaves the file as it was
        for v in range(version, SCHEMA_VERSION):
            MIGRATIONS[v](connection)
        connection.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
