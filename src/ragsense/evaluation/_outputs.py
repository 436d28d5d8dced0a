"""Writing an evaluation's rows by the output's extension: ``.jsonl``, ``.csv``, ``.parquet``, ``-``.

During a run, chunks are appended to JSONL as they finish (durable, resumable). For a CSV or Parquet
output that JSONL is a working file beside it, ``OUT.partial.jsonl``; when the run ends the final
file is written in one piece and the working file removed. ``--resume`` continues from the working
file.

While a run writes an output it holds ``OUT.lock`` beside it (:func:`output_lock`), so a second run
onto the same output is refused instead of interleaving its rows with the first one's.

:func:`claim_output` is the one place where a run takes its output: the lock, then the check that an
existing output is resumed or replaced only when asked (:func:`check_free`), for a local run's file
(:class:`OutputFile`) and a Ray run's shard folder alike.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ragsense.data import write_csv, write_jsonl, write_parquet
from ragsense.errors import OutputExistsError, ParameterError, RagsenseError

OUTPUT_SUFFIXES = (".jsonl", ".csv", ".parquet")


def check_output(path: str | os.PathLike[str]) -> str:
    """The output format of ``path`` (``jsonl``, ``csv``, ``parquet``), or a clear error.

    >>> check_output("scores.parquet"), check_output("-")
    ('parquet', 'jsonl')
    """
    if str(path) == "-":
        return "jsonl"
    suffix = Path(path).suffix.lower()
    if suffix not in OUTPUT_SUFFIXES:
        raise ParameterError(
            f"cannot write {str(path)!r}: use a .jsonl, .csv or .parquet output (or - for JSONL on stdout)",
            parameter="output",
        )
    return suffix[1:]


def working_file(path: str | os.PathLike[str]) -> Path:
    """Where a run appends its chunks: the output itself for JSONL, else a ``.partial.jsonl`` beside it."""
    target = Path(path)
    return target if check_output(path) == "jsonl" else target.with_name(target.name + ".partial.jsonl")


def save_rows(path: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]]) -> Path:
    """Write ``rows`` to ``path`` in the format its extension names; returns the path."""
    kind = check_output(path)
    if kind == "csv":
        write_csv(path, rows)
    elif kind == "parquet":
        write_parquet(path, rows)
    else:
        write_jsonl(path, rows)
    return Path(path)


class OutputInUseError(RagsenseError, FileExistsError):
    """Another run holds the output's lock file: two runs writing one output would lose or interleave
    rows, so the second is refused (a usage error, exit 2)."""


LOCK_SUFFIX = ".lock"
_UNREADABLE_GRACE_S = 10.0
"""A lock whose owner cannot be read yet (it is being written) counts as held for this long."""


def lock_path(path: str | os.PathLike[str]) -> Path:
    """The lock file of an output: ``OUT.lock`` beside the file it is, links resolved, so every name
    of one file (``link.jsonl`` pointing at ``same.jsonl``, ``./out.jsonl``, ``dir/../out.jsonl``)
    has one lock."""
    target = Path(os.path.realpath(path))
    return target.with_name(target.name + LOCK_SUFFIX)


def _owner_text() -> str:
    return f"{os.getpid()} {socket.gethostname()}\n"


def _is_stale(text: str, age_s: float) -> bool:
    """Whether a lock with this content was left by a process that is gone (on this host)."""
    parts = text.split()
    if len(parts) < 2 or not parts[0].isdigit():
        return age_s > _UNREADABLE_GRACE_S  # half-written by its owner, or not ours: wait, then take
    pid, host = int(parts[0]), parts[1]
    if host != socket.gethostname():
        return False  # another machine's process: we cannot tell whether it lives
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, owned by another user
    return False


def _try_create(lock: Path) -> bool:
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(_owner_text())
    return True


def _read_lock(lock: Path) -> tuple[str, float] | None:
    try:
        return lock.read_text(encoding="utf-8"), time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return None


def acquire_output_lock(path: str | os.PathLike[str]) -> Path:
    """Create ``OUT.lock`` for this process, or raise :class:`OutputInUseError` when a live run holds
    it. A lock left by a process that died (its pid is gone on this host) is taken over.

    The lock is created with ``O_CREAT | O_EXCL``, so of two runs that start together exactly one gets
    it. Taking over a stale lock renames it aside first (one rename wins) and checks that what was
    renamed is still the stale lock it judged, so two runs cannot both take it over.

    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "out.jsonl"
    >>> lock = acquire_output_lock(out)
    >>> acquire_output_lock(out)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ragsense.evaluation._outputs.OutputInUseError: output file '...out.jsonl' is being written by ...
    >>> release_output_lock(lock)
    """
    lock = lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(5):
        if _try_create(lock):
            return lock
        seen = _read_lock(lock)
        if seen is None:
            continue  # released meanwhile: try again
        text, age = seen
        if not _is_stale(text, age):
            owner = text.split()[0] if text.split() else "unknown"
            raise OutputInUseError(
                f"output file {str(path)!r} is being written by another run (process {owner}, lock "
                f"{str(lock)!r}); wait for it to finish, or write to another output. If no run is "
                "writing it, remove the lock file"
            )
        aside = lock.with_name(f"{lock.name}.stale-{os.getpid()}")
        try:
            os.rename(lock, aside)
        except FileNotFoundError:
            continue  # another run took it over first
        taken = aside.read_text(encoding="utf-8")
        if taken != text:
            # What was renamed is a fresh lock another run had just created: give it back.
            with contextlib.suppress(FileExistsError):
                os.link(aside, lock)
            aside.unlink()
            continue
        aside.unlink()
    raise OutputInUseError(f"output file {str(path)!r}: could not take its lock {str(lock)!r}; try again")


def release_output_lock(lock: Path) -> None:
    """Remove a lock this process holds (one another process holds is left alone)."""
    seen = _read_lock(lock)
    if seen is not None and seen[0] == _owner_text():
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()


@contextlib.contextmanager
def output_lock(path: str | os.PathLike[str] | None) -> Iterator[None]:
    """Hold the output's lock for the block; nothing for no output, stdout or a remote location."""
    if path is None or str(path) == "-" or "://" in str(path):
        yield
        return
    lock = acquire_output_lock(path)
    try:
        yield
    finally:
        release_output_lock(lock)


# ------------------------------------------------------------------------------ claiming an output


class RunOutput(Protocol):
    """What a run writes to, as the output check sees it: a local run's :class:`OutputFile` or the Ray
    engine's shard folder."""

    @property
    def lock_location(self) -> str | os.PathLike[str] | None:
        """The path whose ``.lock`` the run holds (None, stdout or a remote location: no lock)."""
        ...

    def existing(self) -> tuple[str, bool] | None:
        """None when nothing is there yet; else what is there (``"output file 'x' already exists"``)
        and whether a resume may continue it."""
        ...


def check_free(output: RunOutput, *, resume: bool, overwrite: bool) -> None:
    """The one rule by which every engine refuses an existing output: raise
    :class:`~ragsense.errors.OutputExistsError` unless nothing is there, or it is replaced
    (``overwrite``), or it is continued (``resume``, where it can be)."""
    if overwrite:
        return
    found = output.existing()
    if found is None:
        return
    described, resumable = found
    if resume and resumable:
        return
    raise OutputExistsError(described, can_resume=resumable)


@contextlib.contextmanager
def claim_output(output: RunOutput | None, *, resume: bool, overwrite: bool) -> Iterator[None]:
    """Hold the output's lock and check it is free (:func:`check_free`) for the block: what both
    engines do before a row is read, a model loaded or the run entered in the store, so a refused run
    costs nothing and leaves no trace (issue 25).

    >>> import tempfile, pathlib
    >>> out = OutputFile.of(pathlib.Path(tempfile.mkdtemp()) / "out.jsonl")
    >>> with claim_output(out, resume=False, overwrite=False):
    ...     _ = out.path.write_text("")
    >>> with claim_output(out, resume=False, overwrite=False):  # doctest: +ELLIPSIS
    ...     pass
    Traceback (most recent call last):
    ...
    ragsense.errors.OutputExistsError: output file '...out.jsonl' already exists; continue it with ...
    """
    with output_lock(None if output is None else output.lock_location):
        if output is not None:
            check_free(output, resume=resume, overwrite=overwrite)
        yield


@dataclass(frozen=True)
class FinalFile:
    """A file a command writes when its run ends, beside the run's output (``evaluate --annotations``),
    claimed with :func:`claim_output` like the output itself: locked, and an existing one refused
    unless replaced (``overwrite``) or continued (``resume``: it is written again from the whole run).

    >>> import tempfile, pathlib
    >>> notes = FinalFile(pathlib.Path(tempfile.mkdtemp()) / "notes.jsonl", "annotations file")
    >>> _ = notes.path.write_text("")
    >>> with claim_output(notes, resume=False, overwrite=False):  # doctest: +ELLIPSIS
    ...     pass
    Traceback (most recent call last):
    ...
    ragsense.errors.OutputExistsError: annotations file '...notes.jsonl' already exists; continue it ...
    """

    path: Path
    what: str

    @property
    def lock_location(self) -> Path:
        return self.path

    def existing(self) -> tuple[str, bool] | None:
        if not os.path.lexists(self.path):  # a dangling link is there too: never written through
            return None
        return f"{self.what} {str(self.path)!r} already exists", True


@dataclass(frozen=True)
class OutputFile:
    """A local run's output: a file (``path``; chunks are appended to its :func:`working_file` as they
    finish) or stdout (``path`` None)."""

    path: Path | None

    @classmethod
    def of(cls, output: str | os.PathLike[str]) -> OutputFile:
        """The output ``evaluate(output=...)`` names; an unknown suffix is refused here.

        >>> OutputFile.of("-").working, OutputFile.of("out.csv").working.name
        ('-', 'out.csv.partial.jsonl')
        """
        check_output(output)
        return cls(None if str(output) == "-" else Path(output))

    @property
    def working(self) -> str | Path:
        """What the runner appends to: the working file, or ``-`` for stdout."""
        return "-" if self.path is None else working_file(self.path)

    @property
    def lock_location(self) -> Path | None:
        return self.path

    def existing(self) -> tuple[str, bool] | None:
        if self.path is None or not os.path.lexists(self.path):  # a dangling link counts
            return None
        # A finished CSV/Parquet output can only be replaced; with its working file beside it (an
        # interrupted run), it can also be continued. A JSONL output is its own working file.
        return f"output file {str(self.path)!r} already exists", working_file(self.path).exists()

    def finish(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Write the final file in one piece from the finished run's records (CSV, Parquet) and remove
        the working file; a JSONL output is already complete."""
        working = self.working
        if self.path is None or working == self.path:
            return
        save_rows(self.path, records)
        with contextlib.suppress(FileNotFoundError):
            Path(working).unlink()
