"""The Ray engine: ``evaluate(..., engine="ray")`` on a Ray cluster, with a single process's results.

The driver (the process that calls ``evaluate``) and the workers split the work so that no metric runs
anywhere but in the spine's runner:

0. **Claim.** The output folder is locked and checked as a local run's file is
   (:func:`~ragsense.evaluation._outputs.claim_output`) before Ray starts or a row is read.
1. **Ray.** Connect to ``address`` (``auto``, ``HOST:PORT``, ``ray://HOST:10001``), or start a local Ray
   on this machine (``ray.init(address="local")``, never someone else's running cluster).
2. **Read.** Ray Data reads the input files (a file, a folder or a prefix, on any filesystem Ray reads:
   local, ``s3://``, ``gs://``, ...); the driver parses their bytes with ragsense's own readers, so a
   bad line is the same error record as in a single-process run and ids are numbered and checked across
   the whole input. In-memory data (a list of dicts, a DataFrame) is parsed as ``evaluate`` parses it.
3. **Plan.** Shards of whole runner chunks (``_shards.py``); the manifest in the output folder is checked
   on ``resume`` and shards already there are read back, not recomputed, when every row still matches
   its input (:func:`~ragsense.evaluation._runner.finished_row_matches`, the local runner's rule); a
   shard with a changed row is scored again.
4. **Score.** A Ray Data ``map_batches`` over the pending shards with a fixed pool of actors
   (``_ray_worker.ShardScorer``): each sets the metrics up once from its own process-wide model pool
   and scores each shard with :func:`~ragsense.evaluation.run_rows`, the single-process runner, at the
   shard's row offset; so a failing row is an error record in its row, as ever, and never fails its
   shard. Ray Data's actor pool restarts an actor that dies and retries its shard
   (``max_restarts=-1``, ``max_task_retries=-1``: its defaults).
5. **Write.** The driver writes each shard file as its result arrives (aside, then moved into place) and
   adds its rows to the run store; a shard that arrived twice (a retry) is written once.
6. **Finish.** Every row in input order, an :class:`Evaluation`, the summary in the run store: the
   run is kept there by :class:`~ragsense.evaluation._recording.Recording`, as a local run is.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import pickle
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ragsense.contract import Metric
from ragsense.data import RowOrError, require_module
from ragsense.errors import ParameterError
from ragsense.evaluation._evaluation import Evaluation, MetricInfo
from ragsense.evaluation._inputs import Data, rows_from
from ragsense.evaluation._outputs import check_free, claim_output
from ragsense.evaluation._runner import (
    RunStats,
    Shape,
    finished_row_matches,
    with_fingerprint,
    without_fingerprint,
)
from ragsense.evaluation.engines._base import EvaluateRequest
from ragsense.evaluation.engines._ray_worker import ShardScorer
from ragsense.evaluation.engines._shards import (
    METRICS_FILE,
    SHARD_FORMATS,
    Manifest,
    Shard,
    ShardFolder,
    ShardFormat,
    ShardPlan,
    auto_shard_chunks,
    check_shard,
    decode_shard,
    encode_shard,
    input_files,
    input_fingerprint,
    metric_settings,
    parse_files,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RayEngine:
    """How ``evaluate(..., engine=RayEngine(...))`` runs on Ray (``engine="ray"``: these defaults).

    ``address``: the cluster (``auto``, ``HOST:6379``, ``ray://HOST:10001``); None starts a local Ray on
    this machine. ``workers``: actors, each with its own copy of the models (default: as many as the
    cluster's CPUs, or GPUs with ``gpus_per_worker``, allow, and no more than there are shards).
    ``threads_per_worker``: torch threads per actor, also the CPUs each reserves (keep threads x
    workers per node at or below its cores). ``gpus_per_worker``: GPUs each actor reserves (the model's
    device ``auto`` then picks the GPU Ray gives it). ``shard_chunks``: runner chunks per shard
    (default: :func:`~ragsense.evaluation.engines._shards.auto_shard_chunks`). ``shard_format``:
    ``parquet`` or ``jsonl`` shard files.

    >>> RayEngine(workers=2).cpus_per_worker
    1
    >>> RayEngine(workers=0)
    Traceback (most recent call last):
    ...
    ragsense.errors.ParameterError: workers: must be at least 1, got 0
    """

    address: str | None = None
    workers: int | None = None
    gpus_per_worker: float = 0.0
    threads_per_worker: int = 1
    shard_chunks: int | None = None
    shard_format: ShardFormat = "parquet"

    def __post_init__(self) -> None:
        for name in ("workers", "shard_chunks"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ParameterError(f"must be at least 1, got {value}", parameter=name)
        if self.threads_per_worker < 1:
            raise ParameterError(
                f"must be at least 1, got {self.threads_per_worker}", parameter="threads_per_worker"
            )
        if self.gpus_per_worker < 0:
            raise ParameterError(
                f"must be 0 or more, got {self.gpus_per_worker}", parameter="gpus_per_worker"
            )
        if self.shard_format not in SHARD_FORMATS:
            raise ParameterError(
                f"must be one of {', '.join(SHARD_FORMATS)}, got {self.shard_format!r}",
                parameter="shard_format",
            )

    @property
    def cpus_per_worker(self) -> int:
        return self.threads_per_worker

    def run(self, request: EvaluateRequest) -> Evaluation:
        """``evaluate`` on Ray (see the module docstring); ``request.output`` is a folder of shards."""
        if request.pool is not None:
            raise ParameterError(
                "the Ray engine's workers load their models in their own processes; leave pool out",
                parameter="pool",
            )
        ray = require_ray()
        output = request.output
        if output is not None and str(output) == "-":
            raise ParameterError(
                "the Ray engine writes a folder of shards; give a folder", parameter="output"
            )
        if request.resume and output is None:
            raise ParameterError("cannot resume a run without an output folder", parameter="output")
        folder = None if output is None else ShardFolder(output)
        # One run at a time per output folder, as for a file (a remote folder is not locked).
        with claim_output(folder, resume=request.resume, overwrite=request.overwrite):
            return _drive(ray, self, request, folder)

    async def arun(self, request: EvaluateRequest) -> Evaluation:
        # The Ray driver blocks while the cluster works; a thread keeps the caller's event loop free.
        return await asyncio.to_thread(self.run, request)


RAY_USAGE_STATS_ENV = "RAY_USAGE_STATS_ENABLED"
"""Ray's switch for its usage statistics; set to 0 for every local Ray ragsense starts."""
LOCAL_NODE_IP = "127.0.0.1"
"""The address a local Ray started by ragsense binds its processes to."""


def require_ray() -> Any:
    """``ray`` with Ray Data, or :class:`~ragsense.errors.BackendUnavailableError` naming the extra."""
    require_module("ray.data", "ray", "the Ray engine (engine='ray', --engine ray)")
    return require_module("ray", "ray", "the Ray engine (engine='ray', --engine ray)")


# ---------------------------------------------------------------------------------------------- driver


@contextlib.contextmanager
def _session(ray: Any, engine: RayEngine, progress: bool) -> Iterator[None]:
    """Ray connected (or started) for the run; a Ray this run started is shut down after it."""
    owned = not ray.is_initialized()
    if owned:
        try:
            if engine.address is None:
                # "local" always starts a new Ray, even where another one runs on this machine. Ray
                # collects usage statistics by default and ragsense promises no telemetry: off for every
                # Ray it starts (a user who sets RAY_USAGE_STATS_ENABLED=1 keeps their choice). The
                # processes listen on loopback only, as the project's test cluster does.
                os.environ.setdefault(RAY_USAGE_STATS_ENV, "0")
                ray.init(address="local", include_dashboard=False, _node_ip_address=LOCAL_NODE_IP)
            else:
                ray.init(address=engine.address)
        except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
            where = engine.address or "a local Ray"
            raise ParameterError(f"cannot start or reach {where}: {exc}", parameter="address") from exc
    context = ray.data.DataContext.get_current()
    saved = context.enable_progress_bars
    data_logger = logging.getLogger("ray.data")
    saved_level = data_logger.level
    context.enable_progress_bars = progress
    if not progress:
        data_logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        context.enable_progress_bars = saved
        data_logger.setLevel(saved_level)
        if owned:
            ray.shutdown()


def _read_items(ray: Any, data: Data) -> list[RowOrError]:
    """The parsed rows of ``data``: files through Ray Data, anything else as ``evaluate`` reads it."""
    if not isinstance(data, str | os.PathLike) or str(data) == "-":
        return list(rows_from(data))
    files = input_files(data)
    contents: dict[str, bytes] = {}
    for row in ray.data.read_binary_files(files, include_paths=True).iter_rows():
        contents[_bare(str(row["path"]))] = bytes(row["bytes"])
    # Parse in the listing's order (paths sorted), whatever order the reads finished in.
    return parse_files((path, contents[_bare(path)]) for path in files)


def _bare(path: str) -> str:
    return path.split("://", 1)[1] if "://" in path else path


def _workers(ray: Any, engine: RayEngine, n_pending: int) -> int:
    """The actor pool's size: as asked, or what the cluster holds now; never more than the shards."""
    resources = ray.cluster_resources()
    if engine.gpus_per_worker > 0:
        fits = int(resources.get("GPU", 0) // engine.gpus_per_worker)
    else:
        fits = int(resources.get("CPU", 1) // engine.cpus_per_worker)
    if engine.workers is not None and engine.workers > fits:
        # An autoscaling cluster may add nodes for them; a fixed one runs the actors that fit.
        logger.warning(
            "%d workers asked for, but the cluster has room for %d now (%s per worker)",
            engine.workers,
            fits,
            f"{engine.gpus_per_worker} GPU" if engine.gpus_per_worker else f"{engine.cpus_per_worker} CPU",
        )
    return max(1, min(engine.workers or fits, n_pending))


def _score(
    ray: Any,
    items: list[RowOrError],
    pending: list[Shard],
    metrics: Sequence[Metric],
    engine: RayEngine,
    *,
    chunk_size: int,
    shape: Shape | None,
) -> Iterator[tuple[int, list[dict[str, Any]], list[dict[str, Any]]]]:
    """(shard index, records, metric infos) for each pending shard, as the actors finish them."""
    if not pending:
        return
    payload = [
        {"shard": s.index, "start": s.start, "items": pickle.dumps(items[s.start : s.stop], protocol=5)}
        for s in pending
    ]
    workers = _workers(ray, engine, len(pending))
    # One block per shard, one shard per batch: a shard is the unit of work, retry and output.
    scored = ray.data.from_items(payload, override_num_blocks=len(payload)).map_batches(
        ShardScorer,
        batch_size=1,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=engine.cpus_per_worker,
        num_gpus=engine.gpus_per_worker or None,
        fn_constructor_kwargs={
            "metrics": list(metrics),
            "chunk_size": chunk_size,
            "shape": shape,
            "threads": engine.threads_per_worker,
        },
    )
    for row in scored.iter_rows():
        if row["error"] is not None:
            raise pickle.loads(row["error"])  # from our own worker: see ShardScorer
        yield int(row["shard"]), json.loads(row["records"]), json.loads(row["infos"])


def _prepare(
    folder: ShardFolder,
    manifest: Manifest,
    plan: ShardPlan,
    items: Sequence[RowOrError],
    *,
    resume: bool,
    overwrite: bool,
) -> tuple[dict[int, list[dict[str, Any]]], int]:
    """Check (resume) or start (fresh) the folder; returns the rows of shards already written that
    still match their input, and how many finished rows are recomputed because their input changed.

    A shard is kept only when every row passes :func:`finished_row_matches`, the rule the local runner
    resumes by; a shard with a changed row is scored again (its file replaced)."""
    done: dict[int, list[dict[str, Any]]] = {}
    previous = folder.read_manifest() if resume else None
    if previous is None:
        # Nothing to resume (none asked, or no manifest): a folder holding a run is refused as any
        # output is, or cleared when it is replaced.
        check_free(folder, resume=False, overwrite=overwrite)
        if folder.holds_run():
            folder.clear()
        folder.write_manifest(manifest)
        return done, 0
    previous.check(manifest, folder.location)
    present = folder.shard_names()
    changed = 0
    for shard in plan.shards:
        name = shard.name(plan.n_shards, manifest.shard_format)
        if name in present:
            records = decode_shard(folder.read(name), manifest.shard_format)
            check_shard(records, shard, name)
            stale = sum(
                not finished_row_matches(record, items[shard.start + k], shard.start + k, folder.location)
                for k, record in enumerate(records)
            )
            if stale:
                changed += stale
                continue
            done[shard.index] = [without_fingerprint(r) for r in records]
    if previous.input != manifest.input:
        folder.write_manifest(manifest)  # the folder now belongs to this input
    return done, changed


def _drive(ray: Any, engine: RayEngine, request: EvaluateRequest, folder: ShardFolder | None) -> Evaluation:
    """Steps 1 to 6 of the module docstring, with the output folder claimed."""
    started = time.perf_counter()
    recording = request.recording()
    done: dict[int, list[dict[str, Any]]] = {}
    changed = 0
    infos: list[MetricInfo] | None = None

    def start_recording(known: list[MetricInfo]) -> None:
        # Shards from an earlier run are recorded first, as the local runner records them.
        recording.start(known, earlier=(done[index] for index in sorted(done)))

    with _session(ray, engine, bool(request.progress)):
        items = _read_items(ray, request.data)
        chunk_size = request.chunk_size
        plan = ShardPlan(
            len(items), chunk_size, engine.shard_chunks or auto_shard_chunks(len(items), chunk_size)
        )
        manifest = Manifest(
            n_rows=plan.n_rows,
            chunk_size=chunk_size,
            shard_chunks=plan.shard_chunks,
            n_shards=plan.n_shards,
            shard_format=engine.shard_format,
            input=input_fingerprint(items),
            metrics=metric_settings(request.metrics),
        )
        if folder is not None:
            done, changed = _prepare(
                folder, manifest, plan, items, resume=request.resume, overwrite=request.overwrite
            )
            if done and folder.has(METRICS_FILE):
                infos = [MetricInfo.from_dict(i) for i in json.loads(folder.read(METRICS_FILE))]
        resumed = sum(len(r) for r in done.values())
        pending = [s for s in plan.shards if s.index not in done]
        # What finished stays in the store and in the folder.
        with recording.abandoned_on_failure():
            if infos is not None:
                start_recording(infos)
            for index, records, raw_infos in _score(
                ray, items, pending, request.metrics, engine, chunk_size=chunk_size, shape=request.shape
            ):
                if index in done:
                    continue  # a retried shard answered twice: the first answer was kept
                shard = plan.shards[index]
                name = shard.name(plan.n_shards, engine.shard_format)
                check_shard(records, shard, name)
                if infos is None:
                    infos = [MetricInfo.from_dict(i) for i in raw_infos]
                    if folder is not None:
                        folder.write(METRICS_FILE, json.dumps(raw_infos, default=str).encode("utf-8"))
                    start_recording(infos)
                if folder is not None:
                    rows_in = items[shard.start : shard.stop]
                    written = [with_fingerprint(r, item) for r, item in zip(records, rows_in, strict=True)]
                    folder.write(name, encode_shard(written, engine.shard_format))
                done[index] = records
                # The input hash is fed in input order at the end: shards arrive in any order.
                recording.add_rows(records, inputs=[])
            missing = [s.index for s in plan.shards if s.index not in done]
            if missing:
                raise RuntimeError(f"Ray returned no result for shard(s) {missing}; run again with resume")
    if infos is None:  # nothing was scored here (an empty input, or every shard from an earlier run)
        infos = [MetricInfo.of(m) for m in request.metrics]
    start_recording(infos)
    rows = [r for index in sorted(done) for r in done[index]]
    stats = RunStats(
        n_rows=len(rows), n_resumed=resumed, seconds=time.perf_counter() - started, n_input_changed=changed
    )
    return recording.finish(rows, infos, stats, inputs=items)
