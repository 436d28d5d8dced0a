"""``ragsense.evaluate``: every metric over every row in one pass, on one event loop."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ragsense._async import run_sync
from ragsense.consens import Bands, resolve_bands
from ragsense.contract import Metric, RunItem
from ragsense.data import RowOrError
from ragsense.errors import OutputExistsError, ParameterError
from ragsense.evaluation._evaluation import Evaluation, MetricInfo
from ragsense.evaluation._inputs import Data, rows_from
from ragsense.evaluation._outputs import check_output, output_lock, save_rows, working_file
from ragsense.evaluation._ray_engine import Engine, RayEngine, evaluate_on_ray, ray_engine_of
from ragsense.evaluation._registry import DEFAULT_METRICS, resolve_metrics
from ragsense.evaluation._runner import ChunkSink, Shape, run_rows
from ragsense.models import ModelPool, ModelSpec, shared_pool
from ragsense.runs import RunRecorder, RunStore

StoreSpec = RunStore | str | os.PathLike[str] | bool | None
"""Where ``evaluate`` records the run: a :class:`RunStore` or its path, ``True`` for the default
store (``RAGSENSE_STORE`` or the user data directory), ``None``/``False`` for none."""


def _store_of(store: StoreSpec) -> RunStore | None:
    if store is None or store is False:
        return None
    if store is True:
        return RunStore()
    return store if isinstance(store, RunStore) else RunStore(store)


def _dataset_name(data: Data) -> str:
    if isinstance(data, str | os.PathLike):
        if "://" in str(data):  # s3://..., gs://...: read by the Ray engine
            return str(data)
        return "stdin" if str(data) == "-" else str(Path(data).resolve())
    cls = type(data)
    return f"{cls.__module__.split('.')[0]}.{cls.__name__}"


BandsSpec = Bands | str | os.PathLike[str] | None
"""Verdict bands for ``evaluate``: a :class:`~ragsense.consens.Bands`, the path of a bands file
(``ragsense calibrate``), or None for each metric's defaults."""
BANDED_METRICS = ("consens", "attribution")
"""The metric names whose verdicts ``bands=`` sets."""


def _metrics_with_bands(
    metrics: str | Sequence[str | Metric] | None,
    bands: BandsSpec,
    model: ModelSpec | None,
    model_options: dict[str, Any] | None,
) -> list[Metric]:
    """The metrics resolved by name, ``bands`` (read once here) given to ConSens and attribution."""
    if bands is None:
        return resolve_metrics(metrics, model=model, model_options=model_options)
    items = metrics if metrics is not None else DEFAULT_METRICS
    names = [m.strip() for m in items.split(",")] if isinstance(items, str) else list(items)
    if not any(n in BANDED_METRICS for n in names):
        # A metric object was built with its own bands (or none); silently ignoring these would be worse.
        raise ParameterError(
            "bands apply to the metrics named 'consens' or 'attribution', and none is named here; "
            "give a ConSens object its bands with ConSens(bands=...)",
            parameter="bands",
        )
    loaded = resolve_bands(bands if isinstance(bands, Bands | str) else Path(bands))
    return resolve_metrics(
        metrics,
        model=model,
        model_options=model_options,
        per_metric={name: {"bands": loaded} for name in BANDED_METRICS},
    )


DEFAULT_CHUNK_SIZE = 16
"""Rows per chunk: the unit that is batched into model calls, saved, and resumed. The same number
means the same thing in every command."""


async def aevaluate(
    data: Data,
    metrics: str | Sequence[str | Metric] | None = None,
    *,
    model: ModelSpec | None = None,
    model_options: dict[str, Any] | None = None,
    output: str | os.PathLike[str] | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool | Literal["always"] = True,
    pool: ModelPool | None = None,
    desc: str = "evaluate",
    shape: Shape | None = None,
    store: StoreSpec = None,
    tag: str | None = None,
    command: str | None = None,
    engine: Engine = "local",
    bands: BandsSpec = None,
) -> Evaluation:
    """The async form of :func:`evaluate` (same arguments), for code already on an event loop."""
    resolved = _metrics_with_bands(metrics, bands, model, model_options)
    on_ray = ray_engine_of(engine)
    if on_ray is not None:
        # The Ray driver blocks while the cluster works; a thread keeps this event loop free.
        return await asyncio.to_thread(
            _on_ray,
            data,
            resolved,
            on_ray,
            output,
            chunk_size,
            resume,
            overwrite,
            progress,
            pool,
            shape,
            store,
            tag,
            command,
        )
    if output is not None:
        check_output(output)  # an unknown suffix is refused before anything else
    to_stdout = output is not None and str(output) == "-"
    if to_stdout and resume:
        raise ParameterError("cannot resume a run written to stdout; give an output file", parameter="output")
    target = None if output is None or to_stdout else Path(output)
    working = None if output is None else ("-" if to_stdout else working_file(output))
    # The lock is taken and the output checked before a row is read, a model loaded or the run entered
    # in the store: a refused run must cost nothing and leave no trace (issue 25).
    with output_lock(target):
        if target is not None:
            check_output_free(target, resume=resume, overwrite=overwrite)
        rows = rows_from(data)
        settings = _Settings(
            data, chunk_size, resume, overwrite, progress, pool, desc, shape, store, tag, command
        )
        return await _run_locally(rows, resolved, target, working, settings)


def check_output_free(target: Path, *, resume: bool, overwrite: bool) -> None:
    """Raise :class:`FileExistsError` unless ``target`` may be written: it does not exist, or it is
    replaced (``overwrite``), or its run is continued (``resume`` with its working file there)."""
    working = working_file(target)
    if overwrite or not target.exists():
        return
    if resume and working.exists():
        return
    if working == target:
        raise OutputExistsError(f"output file {str(target)!r} already exists")
    # A finished CSV/Parquet output can only be replaced; with its working file beside it (an
    # interrupted run), it can also be continued.
    raise OutputExistsError(f"output file {str(target)!r} already exists", can_resume=working.exists())


@dataclass(frozen=True)
class _Settings:
    """What a local run needs besides its rows, metrics and files: ``aevaluate``'s own arguments."""

    data: Data
    chunk_size: int
    resume: bool
    overwrite: bool
    progress: bool | Literal["always"]
    pool: ModelPool | None
    desc: str
    shape: Shape | None
    store: StoreSpec
    tag: str | None
    command: str | None


_RUNNER_OPTIONS = ("chunk_size", "resume", "overwrite", "progress", "desc", "shape")
"""The settings that :func:`run_rows` takes as they are."""


async def _run_locally(
    rows: Iterable[RowOrError],
    resolved: list[Metric],
    target: Path | None,
    working: str | Path | None,
    settings: _Settings,
) -> Evaluation:
    """Set the metrics up, enter the run in the store, run the rows, write the output (locked)."""
    pool = settings.pool if settings.pool is not None else shared_pool()
    run_store = _store_of(settings.store)
    recorder: RunRecorder | None = None
    try:
        for metric in resolved:
            await metric.setup(pool)
        infos = [MetricInfo.of(m) for m in resolved]
        if run_store is not None:
            recorder = run_store.start(
                metrics=[i.to_dict() for i in infos],
                tag=settings.tag,
                command=settings.command or "python",
                dataset=_dataset_name(settings.data),
            )
        sink = None if recorder is None else _sink(recorder)
        records, stats = await run_rows(
            rows,
            resolved,
            output=working,
            on_chunk=sink,
            **{name: getattr(settings, name) for name in _RUNNER_OPTIONS},
        )
    except BaseException as exc:
        if recorder is not None:  # what finished stays in the store; the run is marked incomplete
            recorder.abandon(_reason(exc))
        raise
    finally:
        for metric in resolved:
            await metric.aclose()
    evaluation = Evaluation(records, infos, stats, run_id=None if recorder is None else recorder.run_id)
    if recorder is not None:
        recorder.finish(evaluation.summary().to_dict())
    if target is not None and working is not None and working != target:
        save_rows(target, records)
        with contextlib.suppress(FileNotFoundError):
            Path(str(working)).unlink()
    return evaluation


def _on_ray(
    data: Data,
    metrics: list[Metric],
    engine: RayEngine,
    output: str | os.PathLike[str] | None,
    chunk_size: int,
    resume: bool,
    overwrite: bool,
    progress: bool | Literal["always"],
    pool: ModelPool | None,
    shape: Shape | None,
    store: StoreSpec,
    tag: str | None,
    command: str | None,
) -> Evaluation:
    if pool is not None:
        raise ParameterError(
            "the Ray engine's workers load their models in their own processes; leave pool out",
            parameter="pool",
        )
    # One run at a time per output folder, as for a file (a remote folder is not locked).
    with output_lock(None if output is None or str(output) == "-" else output):
        return evaluate_on_ray(
            data,
            metrics,
            engine,
            output=output,
            chunk_size=chunk_size,
            resume=resume,
            overwrite=overwrite,
            progress=bool(progress),
            shape=shape,
            store=_store_of(store),
            tag=tag,
            command=command or "python",
            dataset=_dataset_name(data),
        )


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt | asyncio.CancelledError):
        return "interrupted"  # Ctrl-C reaches the runner's coroutine as a cancellation
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _sink(recorder: RunRecorder) -> ChunkSink:
    def add(items: Sequence[RunItem], records: Sequence[dict[str, Any]]) -> None:
        recorder.add_rows(records, [item.to_record() for item in items])

    return add


def evaluate(
    data: Data,
    metrics: str | Sequence[str | Metric] | None = None,
    *,
    model: ModelSpec | None = None,
    model_options: dict[str, Any] | None = None,
    output: str | os.PathLike[str] | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool | Literal["always"] = True,
    pool: ModelPool | None = None,
    desc: str = "evaluate",
    shape: Shape | None = None,
    store: StoreSpec = None,
    tag: str | None = None,
    command: str | None = None,
    engine: Engine = "local",
    bands: BandsSpec = None,
) -> Evaluation:
    """Run ``metrics`` over every row of ``data`` in one pass; returns an :class:`Evaluation`.

    ``data``: a path (.jsonl, .json, .csv, .parquet, ``-``), a list of dicts (ragsense or RAGAS field
    names), a pandas DataFrame, a Hugging Face Dataset or a RAGAS EvaluationDataset. ``metrics``: metric
    objects (``ConSens(model=..., attribution=True)``, ``Vera(judge=...)``, ``Correctness(estimator=...)``,
    ``Similarity()``), or names with their defaults (``"consens,vera"`` or ``["consens", "vera"]``;
    ``model`` and ``model_options`` go to the named ones); default: ConSens. ``bands``: the verdict
    bands of the ``consens`` and ``attribution`` metrics named here (a
    :class:`~ragsense.consens.Bands` or the path of a file ``ragsense calibrate`` wrote; a metric object
    takes its own, ``ConSens(bands=...)``); the run store records them with the metric's settings.

    ``output``: also write the rows there as the run goes (.jsonl, .csv, .parquet by extension; ``-``
    for JSONL on stdout); an existing output is an error unless ``resume`` (continue it: finished chunks
    whose rows have the same ids and content as the input's now are not recomputed; rows whose input
    changed are, and the summary counts them) or ``overwrite``. While the run writes ``output`` it holds
    ``OUTPUT.lock`` beside it: a second run onto the same output raises
    :class:`~ragsense.evaluation._outputs.OutputInUseError` (a :class:`FileExistsError`). Both checks
    come before any row is read, model loaded or run recorded. ``chunk_size``: rows per batched, saved
    chunk. Models come from ``pool`` (default: the process-wide pool), so each is loaded once however
    many metrics use it.

    ``store``: record the run in a run store (``True``: the default one; a path or a
    :class:`~ragsense.runs.RunStore`), named ``tag`` (e.g. the version of the system under test), with
    ``command`` as its command line; each finished chunk is kept as it lands, and a run that fails
    or is interrupted is marked incomplete. The CLI records every run; the API only when asked.

    A row that a metric cannot score gets an entry in its ``errors`` list, and the other metrics still
    score it; nothing is raised for a bad row.

    ``engine="ray"`` (or a :class:`RayEngine` with its options) scores the rows on a Ray cluster (extra
    ``ragsense[ray]``; docs/cluster.md): ``data`` may then be a file, folder or prefix on any filesystem
    Ray reads (``s3://...``), ``output`` is a folder of Parquet (or JSONL) shards, and the rows are
    those a single-process run gives, bit for bit on CPU. Metrics travel to the workers unset-up, so
    give them model names rather than loaded models; ``pool`` is for the local engine only.

    >>> run = evaluate([{"question": "Who wrote Hamlet?", "contexts": ["Hamlet is by Shakespeare."],
    ...                  "answer": "Shakespeare wrote it."}, {"question": "Q?", "contexts": ["C."]}],
    ...                ["consens", "similarity"], model="fake", progress=False)
    >>> [sorted(e["metric"] for e in row["errors"]) for row in run.rows]
    [[], ['consens', 'similarity']]
    >>> run.summary().metrics["consens"].n
    1
    """
    on_ray = ray_engine_of(engine)
    if on_ray is not None:  # no event loop here: Ctrl-C reaches the driver loop directly
        resolved = _metrics_with_bands(metrics, bands, model, model_options)
        return _on_ray(
            data,
            resolved,
            on_ray,
            output,
            chunk_size,
            resume,
            overwrite,
            progress,
            pool,
            shape,
            store,
            tag,
            command,
        )
    return run_sync(
        aevaluate(
            data,
            metrics,
            model=model,
            model_options=model_options,
            output=output,
            chunk_size=chunk_size,
            resume=resume,
            overwrite=overwrite,
            progress=progress,
            pool=pool,
            desc=desc,
            shape=shape,
            store=store,
            tag=tag,
            command=command,
            bands=bands,
        )
    )
