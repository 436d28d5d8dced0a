"""The Ray engine's ground: shard plans, the manifest that makes a run resumable, shard files, input files.

Nothing here imports Ray, so the rules are checked (and unit-tested) without it.

**Plan.** A shard is ``shard_chunks`` whole runner chunks: shard ``s`` holds input rows
``s*shard_chunks*chunk_size ... (s+1)*shard_chunks*chunk_size - 1``. Its chunks are therefore exactly the
chunks a single-process run cuts (chunk ``k`` is rows ``k*chunk_size ...``), which is what makes the
engine's results bit-identical to ``evaluate``'s. The plan depends only on the row count and the two
sizes, never on the number of workers, so a run can be resumed with more or fewer workers.

>>> plan = ShardPlan(n_rows=70, chunk_size=16, shard_chunks=2)
>>> [(s.start, s.stop) for s in plan.shards], plan.shards[1].name(plan.n_shards, "parquet")
([(0, 32), (32, 64), (64, 70)], 'part-00001-of-00003.parquet')

**Output folder.** ``part-SSSSS-of-NNNNN.parquet`` (or ``.jsonl``) per shard, each written aside and
moved into place, so a shard file that exists is whole; and ``_ragsense_manifest.json`` (the plan, the
input's fingerprint, the metrics' settings), written before the first shard. The leading underscore
makes pyarrow, pandas and Ray Data skip the manifest when they read the folder as a dataset.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal, cast

from ragsense._version import __version__
from ragsense.data import SUFFIXES, RowError, RowOrError, arrow_column, dumps_json, read_files, require_module
from ragsense.errors import InputError, ParameterError, ResumeError
from ragsense.evaluation._runner import without_fingerprint
from ragsense.runs import InputHasher

ShardFormat = Literal["parquet", "jsonl"]
SHARD_FORMATS: tuple[ShardFormat, ...] = ("parquet", "jsonl")
MANIFEST = "_ragsense_manifest.json"
METRICS_FILE = "_ragsense_metrics.json"
"""Beside the manifest: the metrics as the workers set them up (with model fingerprints), so a run
resumed with nothing left to score still records them."""
_OURS = (MANIFEST, METRICS_FILE)
MANIFEST_VERSION = 1
_SHARD_NAME = re.compile(r"^part-(\d{5,})-of-(\d{5,})\.(parquet|jsonl)$")
_META_KEY = b"ragsense.shard"

# ------------------------------------------------------------------------------------------------ plan


@dataclass(frozen=True)
class Shard:
    """Input rows ``start ... stop - 1`` of a plan, scored and written as one file."""

    index: int
    start: int
    stop: int

    def __len__(self) -> int:
        return self.stop - self.start

    def name(self, n_shards: int, shard_format: ShardFormat) -> str:
        """``part-00003-of-00010.parquet``: the same shard always has the same name."""
        return f"part-{self.index:05d}-of-{n_shards:05d}.{shard_format}"


def auto_shard_chunks(n_rows: int, chunk_size: int) -> int:
    """Chunks per shard when none is given: about 32 shards, from 1 to 64 chunks each.

    A function of the row count and chunk size only (not of the workers), so a resumed run plans the
    same shards. Small inputs get one chunk per shard (every worker has work); large ones at most 64
    chunks per shard, so an interrupted shard costs little and the folder has ``n_rows / 1024`` files
    at the default chunk size.

    >>> auto_shard_chunks(100, 16), auto_shard_chunks(10_000, 16), auto_shard_chunks(10**6, 16)
    (1, 20, 64)
    """
    n_chunks = max(1, math.ceil(n_rows / chunk_size))
    return min(64, max(1, math.ceil(n_chunks / 32)))


@dataclass(frozen=True)
class ShardPlan:
    """Every shard of an input of ``n_rows`` rows; see the module docstring."""

    n_rows: int
    chunk_size: int
    shard_chunks: int

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ParameterError(f"must be at least 1, got {self.chunk_size}", parameter="chunk_size")
        if self.shard_chunks < 1:
            raise ParameterError(f"must be at least 1, got {self.shard_chunks}", parameter="shard_chunks")

    @property
    def rows_per_shard(self) -> int:
        return self.chunk_size * self.shard_chunks

    @property
    def n_shards(self) -> int:
        return math.ceil(self.n_rows / self.rows_per_shard)

    @property
    def shards(self) -> list[Shard]:
        size = self.rows_per_shard
        return [Shard(s, s * size, min(self.n_rows, (s + 1) * size)) for s in range(self.n_shards)]


# -------------------------------------------------------------------------------------------- manifest


def input_fingerprint(items: Iterable[RowOrError]) -> str:
    """SHA-256 of the parsed input in order, bad rows included (their reason and raw text): what the
    manifest records the folder was written for (a resume matches rows one by one, not by this).

    >>> from ragsense.data import parse_rows
    >>> a = input_fingerprint(parse_rows([{"question": "Q?", "context": "C.", "answer": "A."}]))
    >>> b = input_fingerprint(parse_rows([{"question": "Q?", "context": "C.", "answer": "B."}]))
    >>> a == b
    False
    """
    hasher = InputHasher()
    for item in items:
        if isinstance(item, RowError):
            raw = item.raw if isinstance(item.raw, dict | str) else None
            hasher.update([{"error": [item.field, item.message], "raw": raw}])
        else:
            hasher.update([{"row": item.to_record()}])
    return hasher.hexdigest()


@dataclass(frozen=True)
class Manifest:
    """What a shard folder was written for; a resume must match it field for field (``checked``)."""

    n_rows: int
    chunk_size: int
    shard_chunks: int
    n_shards: int
    shard_format: ShardFormat
    input: str
    metrics: list[dict[str, Any]]
    version: int = MANIFEST_VERSION
    ragsense: str = __version__

    # Not `input`: a resume onto changed rows recomputes the shards whose rows changed (row by row,
    # the rule the local runner resumes by); `input` only records what the folder was last written for.
    _CHECKED = ("n_rows", "chunk_size", "shard_chunks", "shard_format", "metrics")

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, ensure_ascii=False, default=str) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str) -> Manifest:
        try:
            raw = json.loads(text)
            if raw.get("version") != MANIFEST_VERSION:
                raise ValueError(f"manifest version {raw.get('version')!r}, expected {MANIFEST_VERSION}")
            return cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k in raw})
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ResumeError(
                f"cannot resume {where!r}: its {MANIFEST} is not readable ({exc}); "
                "use overwrite=True (--overwrite) to start over"
            ) from None

    def check(self, current: Manifest, where: str) -> None:
        """Raise unless ``current`` (this run) plans and scores exactly what this manifest did.

        >>> m = Manifest(10, 16, 1, 1, "parquet", "abc", [{"name": "consens", "settings": {}}])
        >>> m.check(Manifest(10, 8, 1, 2, "parquet", "abc", m.metrics), "out")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ragsense.errors.ResumeError: cannot resume 'out': it was written with chunk_size 16, this run has 8...
        """
        for name in self._CHECKED:
            old, new = getattr(self, name), getattr(current, name)
            if old != new:
                raise ResumeError(
                    f"cannot resume {where!r}: it was written with {name} {old!r}, this run has {new!r}; "
                    "resume with the same settings, "
                    "or use overwrite=True (--overwrite) to start over"
                )


def metric_settings(metrics: Sequence[Any]) -> list[dict[str, Any]]:
    """Each metric's name and output-deciding settings, as JSON values (what a manifest compares)."""
    out = [{"name": m.name, "settings": m.settings()} for m in metrics]
    return list(json.loads(json.dumps(out, default=str)))


# ------------------------------------------------------------------------------------------ shard files


def encode_shard(records: Sequence[Mapping[str, Any]], shard_format: ShardFormat) -> bytes:
    """One shard's records as file bytes; :func:`decode_shard` gives back equal records.

    Parquet columns are written as by ``evaluate -o out.parquet`` (nested values as JSON text); the
    schema metadata says which columns hold JSON and which rows lack a key, so nothing is lost.

    >>> rows = [{"id": "a", "score": 0.5, "detail": {"k": [1, 2]}}, {"id": "b", "score": None}]
    >>> decode_shard(encode_shard(rows, "parquet"), "parquet") == rows
    True
    """
    if shard_format == "jsonl":
        return "".join(dumps_json(dict(r)) + "\n" for r in records).encode("utf-8")
    pa = require_module("pyarrow", "parquet", "writing Parquet shards")
    pq = require_module("pyarrow.parquet", "parquet", "writing Parquet shards")
    names: dict[str, None] = {}
    for record in records:
        names.update(dict.fromkeys(record))
    arrays: dict[str, Any] = {}
    json_columns: list[str] = []
    absent: dict[str, list[int]] = {}
    for name in names:
        values = [r.get(name) for r in records]
        array = arrow_column(values)
        if pa.types.is_floating(array.type) and any(type(v) is int for v in values):
            # Arrow would store 1 as 1.0; JSON text keeps the int an int.
            array = pa.array([None if v is None else json.dumps(v) for v in values])
        if pa.types.is_string(array.type) and any(v is not None and not isinstance(v, str) for v in values):
            json_columns.append(name)
        missing = [i for i, r in enumerate(records) if name not in r]
        if missing:
            absent[name] = missing
        arrays[name] = array
    meta = json.dumps({"json_columns": json_columns, "absent": absent}).encode()
    table = pa.table(arrays).replace_schema_metadata({_META_KEY: meta})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


def decode_shard(data: bytes, shard_format: ShardFormat) -> list[dict[str, Any]]:
    """The records :func:`encode_shard` wrote."""
    if shard_format == "jsonl":
        return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    pa = require_module("pyarrow", "parquet", "reading Parquet shards")
    pq = require_module("pyarrow.parquet", "parquet", "reading Parquet shards")
    table = pq.read_table(pa.BufferReader(data))
    meta = json.loads((table.schema.metadata or {}).get(_META_KEY, b"{}"))
    json_columns = set(meta.get("json_columns", []))
    absent = {name: set(rows) for name, rows in meta.get("absent", {}).items()}
    records: list[dict[str, Any]] = table.to_pylist()
    for position, record in enumerate(records):
        for name in list(record):
            if position in absent.get(name, ()):
                del record[name]
            elif name in json_columns and record[name] is not None:
                record[name] = json.loads(record[name])
    return records


def check_shard(records: Sequence[Mapping[str, Any]], shard: Shard, name: str) -> None:
    """Raise unless ``records`` are the shard's rows in order (by their ``_row`` index)."""
    rows = [r.get("_row") for r in records]
    if len(records) != len(shard) or any(r is not None and r != shard.start + k for k, r in enumerate(rows)):
        raise ResumeError(
            f"shard {name} holds {len(records)} rows that are not input rows "
            f"{shard.start}..{shard.stop - 1}; was the folder changed by hand? Use overwrite=True "
            "(--overwrite) to start over"
        )


# ----------------------------------------------------------------------------------- the output folder


def filesystem_of(location: str | os.PathLike[str]) -> tuple[Any, str]:
    """A pyarrow filesystem and the path on it: ``s3://``, ``gs://``, ``abfs://``, ``hdfs://`` (what
    pyarrow reads), ``file://``, or a local path (made absolute)."""
    pafs = require_module("pyarrow.fs", "parquet", "reading and writing shard folders")
    text = str(location)
    if "://" in text:
        filesystem, path = pafs.FileSystem.from_uri(text)
        return filesystem, str(path).rstrip("/")
    return pafs.LocalFileSystem(), str(Path(text).resolve())


class ShardFolder:
    """The output folder of a Ray run, on any pyarrow filesystem; a
    :class:`~ragsense.evaluation._outputs.RunOutput`."""

    def __init__(self, location: str | os.PathLike[str]) -> None:
        self.location = str(location)
        self._fs, self._path = filesystem_of(location)

    def _join(self, name: str) -> str:
        return f"{self._path}/{name}"

    def names(self) -> list[str]:
        """The files directly in the folder (none when it does not exist yet)."""
        pafs = require_module("pyarrow.fs", "parquet", "reading shard folders")
        info = self._fs.get_file_info(self._path)
        if info.type == pafs.FileType.NotFound:
            return []
        if info.type != pafs.FileType.Directory:
            raise ParameterError(
                f"{self.location!r} is a file; the Ray engine writes a folder of shards", parameter="output"
            )
        selector = pafs.FileSelector(self._path, recursive=False)
        return sorted(Path(i.path).name for i in self._fs.get_file_info(selector) if i.is_file)

    def shard_names(self) -> set[str]:
        """Names of the shard files present (whole: each was moved into place after writing)."""
        return {n for n in self.names() if _SHARD_NAME.match(n)}

    def _ours(self) -> list[str]:
        names = self.names()
        return [n for n in names if n in _OURS or _SHARD_NAME.match(n) or n.startswith(".tmp-")]

    def has(self, name: str) -> bool:
        return name in self.names()

    def holds_run(self) -> bool:
        return bool(self._ours())

    @property
    def lock_location(self) -> str:
        """Where the run's lock goes (a remote folder is not locked)."""
        return self.location

    def existing(self) -> tuple[str, bool] | None:
        """What is already there, for :func:`~ragsense.evaluation._outputs.check_free`: a folder that
        holds a run may be resumed (its manifest is checked when the input is read)."""
        if not self.holds_run():
            return None
        return f"output folder {self.location!r} already holds a ragsense run", True

    def clear(self) -> None:
        """Remove the manifest, the shard files and leftover temporary files (nothing else)."""
        for name in self._ours():
            self._fs.delete_file(self._join(name))

    def read(self, name: str) -> bytes:
        with self._fs.open_input_stream(self._join(name)) as handle:
            return bytes(handle.read())

    def write(self, name: str, data: bytes) -> None:
        """Write aside, then move into place: a reader never sees half a file."""
        self._fs.create_dir(self._path, recursive=True)
        temporary = self._join(f".tmp-{os.getpid()}-{name}")
        with self._fs.open_output_stream(temporary) as handle:
            handle.write(data)
        self._fs.move(temporary, self._join(name))

    def read_manifest(self) -> Manifest | None:
        if MANIFEST not in self.names():
            return None
        return Manifest.from_json(self.read(MANIFEST).decode("utf-8"), self.location)

    def write_manifest(self, manifest: Manifest) -> None:
        self.write(MANIFEST, manifest.to_json().encode("utf-8"))


def read_shards(location: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every row of a finished (or partial) Ray run's output folder, in input order.

    >>> folder = tempfile.mkdtemp()
    >>> ShardFolder(folder).write("part-00000-of-00001.jsonl", encode_shard([{"_row": 0}], "jsonl"))
    >>> read_shards(folder)
    [{'_row': 0}]
    """
    folder = ShardFolder(location)
    records: list[dict[str, Any]] = []
    for name in sorted(folder.shard_names()):
        match = _SHARD_NAME.match(name)
        assert match is not None
        decoded = decode_shard(folder.read(name), cast(ShardFormat, match.group(3)))
        # The rows as ``evaluate`` returns them: without the input fingerprint kept for a resume.
        records.extend(without_fingerprint(r) for r in decoded)
    return records


# ------------------------------------------------------------------------------------------ input files


def input_files(location: str | os.PathLike[str]) -> list[str]:
    """The input's files as the Ray engine reads them: the file itself, or a folder's (or prefix's)
    ``.jsonl``/``.json``/``.csv``/``.parquet`` files in path order (names starting with ``.`` or ``_``
    skipped, as Ray Data does). Errors as ``read_rows``: a missing file, an unsupported type."""
    pafs = require_module("pyarrow.fs", "parquet", "listing input files")
    filesystem, path = filesystem_of(location)
    info = filesystem.get_file_info(path)
    prefix = str(location).split("://", 1)[0] + "://" if "://" in str(location) else ""
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(f"input file not found: {str(location)!r}")
    if info.type == pafs.FileType.Directory:
        selector = pafs.FileSelector(path, recursive=True)
        found = []
        for entry in filesystem.get_file_info(selector):
            relative = entry.path[len(path) :].lstrip("/")
            hidden = any(part.startswith((".", "_")) for part in relative.split("/"))
            if entry.is_file and not hidden and Path(entry.path).suffix.lower() in SUFFIXES:
                found.append(entry.path)
        if not found:
            raise InputError(f"no .jsonl, .json, .csv or .parquet files in {str(location)!r}")
        return [prefix + p if prefix else p for p in sorted(found)]
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        raise InputError(
            f"cannot read {str(location)!r}: unsupported file type {suffix or '(none)'!r}; "
            "use .jsonl, .json, .csv or .parquet"
        )
    return [str(location) if prefix else path]


def parse_files(files: Iterable[tuple[str, bytes]]) -> list[RowOrError]:
    """The rows of the input files, in order, numbered and id-checked across all of them: for one file,
    exactly ``read_rows(file, require_answer=False)``.

    >>> rows = parse_files([("a.jsonl", b'{"question": "Q?", "context": "C.", "answer": "A."}\\n{bad\\n')])
    >>> [type(r).__name__ for r in rows], rows[1].index
    (['RagRow', 'RowError'], 1)
    """

    # ragsense's own readers take paths: each file's bytes are written aside locally first, so a bad
    # line or cell becomes the same error record it is in a single-process run.
    with tempfile.TemporaryDirectory(prefix="ragsense-ray-") as folder:
        local = []
        names: dict[str, str] = {}
        for i, (name, data) in enumerate(files):
            path = Path(folder) / f"{i:05d}{Path(name).suffix.lower()}"
            path.write_bytes(data)
            local.append(path)
            names[repr(str(path))] = repr(str(name))
        rows = list(read_files(local, require_answer=False))
    # A row error names its file as the user gave it, not the copy aside (whose folder is random: the
    # run's input fingerprint would change from one run to the next).
    out: list[RowOrError] = []
    for row in rows:
        if isinstance(row, RowError):
            message = row.message
            for local_name, name in names.items():
                message = message.replace(local_name, name)
            row = replace(row, message=message)
        out.append(row)
    return out
