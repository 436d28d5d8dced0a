"""The run store: every ``evaluate`` run, its settings and its rows, in one SQLite file.

A run is written as it goes: its ``runs`` entry (status ``running``) when the metrics are set up,
each finished chunk of rows in its own transaction, and the summary with status ``complete`` at the
end. A run that raises (or is interrupted) is marked ``incomplete`` with the reason; one whose process
was killed outright keeps ``running`` in the file and is shown as ``incomplete`` once its process is
gone (same host, pid no longer alive). In every case the rows that finished are kept.

>>> import tempfile, pathlib
>>> store = RunStore(pathlib.Path(tempfile.mkdtemp()) / "runs.sqlite")
>>> recorder = store.start(metrics=[{"name": "consens", "scores": ["consens"]}], tag="v1", dataset="demo")
>>> recorder.add_rows([{"id": "a", "_row": 0, "consens": 0.4, "errors": []}])
>>> recorder.finish({"n_rows": 1})
>>> run = store.get("v1")
>>> run.status, run.n_rows, store.rows(run.id)[0]["consens"]
('complete', 1, 0.4)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import sqlite3
import sys
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ragsense._access import without_credentials
from ragsense._version import __version__
from ragsense.errors import RagsenseError
from ragsense.runs._schema import SCHEMA_VERSION, StoreVersionError, create, stored_version, upgrade

STORE_ENV = "RAGSENSE_STORE"
"""Environment variable naming the run store file (``--store`` overrides it)."""

RUNNING, COMPLETE, INCOMPLETE = "running", "complete", "incomplete"

MIN_PREFIX = 4
"""The shortest run id prefix that refers to a run (like git's abbreviated commits)."""

RUN_ID = re.compile(r"[0-9a-f]{12}")
"""What a run id is: 12 lowercase hexadecimal digits, the start of a random UUID (:func:`new_run_id`,
the one place ids are made). Ids name files (a report's default name), so an id read back from a
store is checked against this (:func:`check_run_id`): a crafted store cannot name a path."""


def new_run_id() -> str:
    """A fresh run id (:data:`RUN_ID`)."""
    return uuid.uuid4().hex[:12]


class RunIdError(RagsenseError, ValueError):
    """A run id that is not one (:data:`RUN_ID`): a store holding one was not written by ragsense."""


def check_run_id(run_id: object, where: str = "run store") -> str:
    """``run_id`` when it is a run id (:data:`RUN_ID`), else :class:`RunIdError` naming ``where``.

    >>> check_run_id("0123456789ab")
    '0123456789ab'
    >>> check_run_id("/../../../x", "run store 'runs.sqlite'")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ragsense.runs._store.RunIdError: run store 'runs.sqlite': '/../../../x' is not a run id ...
    """
    if isinstance(run_id, str) and RUN_ID.fullmatch(run_id):
        return run_id
    shown = repr(run_id[:40]) + "..." if isinstance(run_id, str) and len(run_id) > 40 else repr(run_id)
    raise RunIdError(f"{where}: {shown} is not a run id (12 hexadecimal digits, as ragsense makes them)")


def default_store_path() -> Path:
    """``RAGSENSE_STORE`` or ``runs.sqlite`` in the user data directory (platformdirs).

    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {"RAGSENSE_STORE": "/tmp/my-runs.sqlite"}):
    ...     default_store_path().as_posix()
    '/tmp/my-runs.sqlite'
    """
    env = os.environ.get(STORE_ENV)
    if env:
        return Path(env)
    from platformdirs import user_data_dir

    return Path(user_data_dir("ragsense")) / "runs.sqlite"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _canonical(record: Mapping[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str).encode()


class InputHasher:
    """SHA-256 over the input rows in order (each row's fields as canonical JSON, one per line), so
    two runs on the same rows have the same hash whatever the file format or field order.

    >>> h = InputHasher(); h.update([{"b": 1, "a": "x"}]); g = InputHasher(); g.update([{"a": "x", "b": 1}])
    >>> h.hexdigest() == g.hexdigest()
    True
    """

    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def update(self, records: Iterable[Mapping[str, Any]]) -> None:
        for record in records:
            self._hash.update(_canonical(record) + b"\n")

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


@dataclass(frozen=True)
class StoredRun:
    """One run's entry in the store (its rows are read separately with :meth:`RunStore.rows`)."""

    id: str
    created: str
    finished: str | None
    status: str
    tag: str | None
    command: str | None
    version: str
    dataset: str | None
    input_hash: str | None
    n_rows: int
    metrics: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] | None = None
    host: str | None = None
    pid: int | None = None
    note: str | None = None

    @property
    def metric_names(self) -> list[str]:
        return [str(m.get("name")) for m in self.metrics]

    @property
    def metrics_run(self) -> list[str]:
        """The metrics as a user names them: ConSens run with attribution is ``consens`` and
        ``attribution`` (one metric object computes both; ``--metrics consens,attribution``)."""
        out: list[str] = []
        for m in self.metrics:
            out.append(str(m.get("name")))
            if (m.get("settings") or {}).get("attribution") is True:
                out.append("attribution")
        return out

    def score_fields(self) -> list[str]:
        """Every numeric score field of the run's metrics, in metric order."""
        return [str(s) for m in self.metrics for s in m.get("scores", [])]

    def verdict_fields(self) -> list[str]:
        return [str(m["verdict"]) for m in self.metrics if m.get("verdict")]

    def means(self) -> dict[str, float]:
        """Each score's mean from the summary (empty for a run that did not finish)."""
        out: dict[str, float] = {}
        for metric in (self.summary or {}).get("metrics", {}).values():
            for key, score in metric.get("scores", {}).items():
                out[key] = float(score["mean"])
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created": self.created,
            "finished": self.finished,
            "status": self.status,
            "tag": self.tag,
            "command": self.command,
            "version": self.version,
            "dataset": self.dataset,
            "input_hash": self.input_hash,
            "n_rows": self.n_rows,
            "metrics": self.metrics,
            "summary": self.summary,
            "host": self.host,
            "pid": self.pid,
            "note": self.note,
        }


class RunNotFoundError(RagsenseError, LookupError):
    """No run (or more than one) answers to the reference given."""


_COLUMNS = (
    "id, created, finished, status, tag, command, version, dataset, input_hash, n_rows, metrics, "
    "summary, host, pid, note"
)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunStore:
    """One SQLite run store file (created on first use, with its parent folder).

    Every method opens its own short connection, so a store can be shared by processes (SQLite's
    write-ahead log and a busy timeout let one run write while others read).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_store_path()
        self._checked = False

    def __repr__(self) -> str:
        return f"RunStore({str(self.path)!r})"

    def _connect(self) -> sqlite3.Connection:
        if self.path.is_dir():
            raise StoreVersionError(f"run store {str(self.path)!r} is a folder; give a file path")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            connection = sqlite3.connect(self.path, timeout=30.0)
            connection.execute("PRAGMA foreign_keys = ON")
            # With the write-ahead log, NORMAL syncs at checkpoints rather than at every chunk's commit:
            # a crash of ragsense loses nothing committed; a power cut may lose the last chunks.
            connection.execute("PRAGMA synchronous = NORMAL")
            if not self._checked:
                self._check(connection)
        except sqlite3.DatabaseError as exc:
            raise StoreVersionError(f"{str(self.path)!r} is not a readable run store: {exc}") from None
        return connection

    def _check(self, connection: sqlite3.Connection) -> None:
        where = f"run store {str(self.path)!r}"
        version = stored_version(connection, where)
        if version is None:
            # Two processes may create the same new store at once: the write lock decides who does,
            # and the other finds the tables made when it gets the lock.
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("BEGIN IMMEDIATE")
            try:
                if stored_version(connection, where) is None:
                    create(connection, __version__)
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            version = stored_version(connection, where)
        if version is not None and version != SCHEMA_VERSION:
            upgrade(connection, version, where)
        self._checked = True

    # ---------------------------------------------------------------------------------- writing

    def start(
        self,
        *,
        metrics: Sequence[Mapping[str, Any]],
        tag: str | None = None,
        command: str | None = None,
        dataset: str | None = None,
    ) -> RunRecorder:
        """Record a new run (status ``running``) and return the recorder that adds its rows."""
        run_id = new_run_id()
        with self._connect() as connection:
            connection.execute(
                "INSERT INTO runs (id, created, status, tag, command, version, dataset, metrics, host, pid) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    _now(),
                    RUNNING,
                    tag,
                    # A URL's user:password (--base-url http://user:password@host/v1) is never stored.
                    None if command is None else without_credentials(command),
                    __version__,
                    dataset,
                    without_credentials(json.dumps(list(metrics), default=str)),
                    socket.gethostname(),
                    os.getpid(),
                ),
            )
        return RunRecorder(self, run_id)

    # ---------------------------------------------------------------------------------- reading

    def _run_of(self, row: Sequence[Any]) -> StoredRun:
        status, host, pid = row[3], row[12], row[13]
        note = row[14]
        if status == RUNNING and host == socket.gethostname() and pid is not None and not _pid_alive(pid):
            status, note = INCOMPLETE, note or "its process ended before the run finished (killed?)"
        return StoredRun(
            id=check_run_id(row[0], f"run store {str(self.path)!r}"),
            created=row[1],
            finished=row[2],
            status=status,
            tag=row[4],
            # Read without credentials too: a store written before they were taken out keeps them.
            command=None if row[5] is None else without_credentials(row[5]),
            version=row[6],
            dataset=row[7],
            input_hash=row[8],
            n_rows=int(row[9]),
            metrics=json.loads(without_credentials(row[10])),
            summary=None if row[11] is None else json.loads(row[11]),
            host=host,
            pid=pid,
            note=note,
        )

    def list_runs(self, *, tag: str | None = None, limit: int | None = None) -> list[StoredRun]:
        """Runs, newest first (``tag``: only those with that tag)."""
        sql = f"SELECT {_COLUMNS} FROM runs"
        params: list[Any] = []
        if tag is not None:
            sql += " WHERE tag = ?"
            params.append(tag)
        sql += " ORDER BY created DESC, rowid DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._connect() as connection:
            return [self._run_of(r) for r in connection.execute(sql, params)]

    def get(self, ref: str) -> StoredRun:
        """The run ``ref`` names: its id, ``latest``, a tag (its newest run), or an id prefix of at
        least four characters that only one run has."""
        ref = ref.strip()
        with self._connect() as connection:
            if ref == "latest":
                row = connection.execute(
                    f"SELECT {_COLUMNS} FROM runs ORDER BY created DESC, rowid DESC LIMIT 1"
                ).fetchone()
                if row is None:
                    raise RunNotFoundError(f"the run store {str(self.path)!r} has no runs yet")
                return self._run_of(row)
            row = connection.execute(f"SELECT {_COLUMNS} FROM runs WHERE id = ?", (ref,)).fetchone()
            if row is None:
                row = connection.execute(
                    f"SELECT {_COLUMNS} FROM runs WHERE tag = ? ORDER BY created DESC, rowid DESC LIMIT 1",
                    (ref,),
                ).fetchone()
            if row is None and len(ref) >= MIN_PREFIX:
                found = connection.execute(
                    f"SELECT {_COLUMNS} FROM runs WHERE id LIKE ? ESCAPE '\\' LIMIT 2",
                    (ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",),
                ).fetchall()
                if len(found) > 1:
                    raise RunNotFoundError(f"{ref!r} is the start of more than one run id; give more of it")
                row = found[0] if found else None
        if row is None:
            raise RunNotFoundError(
                f"no run {ref!r} in {str(self.path)!r} (give a run id, an id prefix, a tag or 'latest'; "
                "'ragsense runs' lists them)"
            )
        return self._run_of(row)

    def rows(self, run_id: str) -> list[dict[str, Any]]:
        """The run's output rows, in input order."""
        with self._connect() as connection:
            return [
                json.loads(r[0])
                for r in connection.execute(
                    "SELECT record FROM rows WHERE run_id = ? ORDER BY position", (run_id,)
                )
            ]

    def delete(self, run_id: str) -> None:
        """Remove a run and its rows."""
        with self._connect() as connection:
            connection.execute("DELETE FROM rows WHERE run_id = ?", (run_id,))
            connection.execute("DELETE FROM runs WHERE id = ?", (run_id,))


class RunRecorder:
    """Adds one run's rows as its chunks finish, then its summary; see :meth:`RunStore.start`."""

    def __init__(self, store: RunStore, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.hasher = InputHasher()

    def add_rows(
        self, records: Sequence[Mapping[str, Any]], inputs: Sequence[Mapping[str, Any]] | None = None
    ) -> None:
        """Keep a finished chunk's output rows (one transaction); ``inputs`` are its input rows, for
        the input hash (default: the output rows themselves)."""
        self.hasher.update(inputs if inputs is not None else records)
        payload = [
            (
                self.run_id,
                int(r.get("_row", 0)),
                None if r.get("id") is None else str(r.get("id")),
                json.dumps(r, ensure_ascii=False, allow_nan=False, default=str),
            )
            for r in records
        ]
        with self.store._connect() as connection:
            connection.executemany(
                "INSERT OR REPLACE INTO rows (run_id, position, row_id, record) VALUES (?, ?, ?, ?)", payload
            )
            connection.execute(
                "UPDATE runs SET n_rows = (SELECT COUNT(*) FROM rows WHERE run_id = ?) WHERE id = ?",
                (self.run_id, self.run_id),
            )

    def finish(self, summary: Mapping[str, Any]) -> None:
        """Mark the run complete with its summary and input hash."""
        with self.store._connect() as connection:
            connection.execute(
                "UPDATE runs SET status = ?, finished = ?, summary = ?, input_hash = ? WHERE id = ?",
                (
                    COMPLETE,
                    _now(),
                    json.dumps(dict(summary), default=str),
                    self.hasher.hexdigest(),
                    self.run_id,
                ),
            )

    def abandon(self, reason: str) -> None:
        """Mark the run incomplete (its finished rows stay)."""
        try:
            with self.store._connect() as connection:
                connection.execute(
                    "UPDATE runs SET status = ?, finished = ?, note = ? WHERE id = ?",
                    (INCOMPLETE, _now(), reason, self.run_id),
                )
        except sqlite3.Error as exc:  # the run's own error matters more than this one
            print(f"ragsense: could not mark run {self.run_id} incomplete: {exc}", file=sys.stderr)
