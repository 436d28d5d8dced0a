"""``ragsense.evaluate``: every metric over every row in one pass, on the engine asked for.

This module resolves ``evaluate``'s arguments (metrics by name with their bands, the run store, the
engine) into one :class:`~ragsense.evaluation.engines.EvaluateRequest` and hands it to the engine;
the engines (``evaluation/engines/``) do the rest.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from ragsense.consens import Bands, resolve_bands
from ragsense.contract import Metric
from ragsense.errors import ParameterError
from ragsense.evaluation._evaluation import Evaluation
from ragsense.evaluation._inputs import Data
from ragsense.evaluation._registry import DEFAULT_METRICS, resolve_metrics
from ragsense.evaluation._runner import Shape
from ragsense.evaluation.engines import (
    DEFAULT_CHUNK_SIZE,
    Engine,
    EngineSpec,
    EvaluateRequest,
    LocalEngine,
    RayEngine,
)
from ragsense.models import ModelPool, ModelSpec
from ragsense.runs import RunStore

StoreSpec = RunStore | str | os.PathLike[str] | bool | None
"""Where ``evaluate`` records the run: a :class:`RunStore` or its path, ``True`` for the default
store (``RAGSENSE_STORE`` or the user data directory), ``None``/``False`` for none."""


def _store_of(store: StoreSpec) -> RunStore | None:
    if store is None or store is False:
        return None
    if store is True:
        return RunStore()
    return store if isinstance(store, RunStore) else RunStore(store)


def engine_of(engine: EngineSpec) -> Engine:
    """The engine ``evaluate(engine=...)`` names.

    >>> engine_of("local"), engine_of("ray") == RayEngine()
    (LocalEngine(), True)
    >>> engine_of("spark")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ragsense.errors.ParameterError: engine: must be 'local', 'ray' or a RayEngine, got 'spark'
    """
    if engine == "local":
        return LocalEngine()
    if engine == "ray":
        return RayEngine()
    if isinstance(engine, Engine):
        return engine
    raise ParameterError(f"must be 'local', 'ray' or a RayEngine, got {engine!r}", parameter="engine")


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


def _request(
    data: Data,
    metrics: str | Sequence[str | Metric] | None,
    *,
    model: ModelSpec | None,
    model_options: dict[str, Any] | None,
    output: str | os.PathLike[str] | None,
    chunk_size: int,
    resume: bool,
    overwrite: bool,
    progress: bool | Literal["always"],
    pool: ModelPool | None,
    desc: str,
    shape: Shape | None,
    store: StoreSpec,
    tag: str | None,
    command: str | None,
    bands: BandsSpec,
) -> EvaluateRequest:
    """``evaluate``'s arguments resolved into the one request every engine takes."""
    return EvaluateRequest(
        data=data,
        metrics=tuple(_metrics_with_bands(metrics, bands, model, model_options)),
        output=output,
        chunk_size=chunk_size,
        resume=resume,
        overwrite=overwrite,
        progress=progress,
        pool=pool,
        desc=desc,
        shape=shape,
        store=_store_of(store),
        tag=tag,
        command=command or "python",
    )


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
    engine: EngineSpec = "local",
    bands: BandsSpec = None,
) -> Evaluation:
    """The async form of :func:`evaluate` (same arguments), for code already on an event loop."""
    runner = engine_of(engine)
    request = _request(
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
    return await runner.arun(request)


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
    engine: EngineSpec = "local",
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
    give them model names rather than loaded models; ``pool`` is for the local engine only. Any
    :class:`~ragsense.evaluation.engines.Engine` (an object with ``run`` and ``arun`` taking an
    :class:`~ragsense.evaluation.engines.EvaluateRequest`) may be given as ``engine``.

    >>> run = evaluate([{"question": "Who wrote Hamlet?", "contexts": ["Hamlet is by Shakespeare."],
    ...                  "answer": "Shakespeare wrote it."}, {"question": "Q?", "contexts": ["C."]}],
    ...                ["consens", "similarity"], model="fake", progress=False)
    >>> [sorted(e["metric"] for e in row["errors"]) for row in run.rows]
    [[], ['consens', 'similarity']]
    >>> run.summary().metrics["consens"].n
    1
    """
    runner = engine_of(engine)
    request = _request(
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
    return runner.run(request)
