"""What every engine takes and gives: one :class:`EvaluateRequest` in, one :class:`Evaluation` out."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from ragsense.contract import Metric
from ragsense.evaluation._evaluation import Evaluation
from ragsense.evaluation._inputs import Data
from ragsense.evaluation._recording import Recording
from ragsense.evaluation._runner import Shape
from ragsense.models import ModelPool
from ragsense.runs import RunStore

DEFAULT_CHUNK_SIZE = 16
"""Rows per chunk: the unit that is batched into model calls, saved, and resumed. The same number
means the same thing in every command."""


def dataset_name(data: Data) -> str:
    """How the run store names the input: a file's absolute path, ``stdin``, a remote location as
    given, or the type of an in-memory dataset.

    >>> dataset_name([{"question": "Q?"}]), dataset_name("s3://bucket/rows/")
    ('builtins.list', 's3://bucket/rows/')
    """
    if isinstance(data, str | os.PathLike):
        if "://" in str(data):  # s3://..., gs://...: read by the Ray engine
            return str(data)
        return "stdin" if str(data) == "-" else str(Path(data).resolve())
    cls = type(data)
    return f"{cls.__module__.split('.')[0]}.{cls.__name__}"


@dataclass(frozen=True)
class EvaluateRequest:
    """One evaluation with every argument resolved: what ``evaluate`` and ``aevaluate`` hand an engine.

    ``metrics`` are built (by name, with their bands) but not set up: each engine sets them up where
    they run. ``store`` is the run store itself (or None), ``command`` the command line it records.
    The other fields are ``evaluate``'s arguments of the same names.

    >>> request = EvaluateRequest(data=[], metrics=())
    >>> request.chunk_size, request.command, request.dataset
    (16, 'python', 'builtins.list')
    """

    data: Data
    metrics: tuple[Metric, ...]
    output: str | os.PathLike[str] | None = None
    chunk_size: int = DEFAULT_CHUNK_SIZE
    resume: bool = False
    overwrite: bool = False
    progress: bool | Literal["always"] = True
    pool: ModelPool | None = None
    desc: str = "evaluate"
    shape: Shape | None = None
    store: RunStore | None = None
    tag: str | None = None
    command: str = "python"

    @property
    def dataset(self) -> str:
        """The input's name in the run store (:func:`dataset_name`)."""
        return dataset_name(self.data)

    def recording(self) -> Recording:
        """The run's recording in ``store`` (nothing is entered until an engine starts it)."""
        return Recording(self.store, tag=self.tag, command=self.command, dataset=self.dataset)


@runtime_checkable
class Engine(Protocol):
    """Where an evaluation runs: :class:`~ragsense.evaluation.engines.LocalEngine` (this process) or
    :class:`~ragsense.evaluation.engines.RayEngine` (a Ray cluster).

    Both forms run the same evaluation and give the same rows: ``run`` blocks (for ``evaluate``),
    ``arun`` awaits (for ``aevaluate``, keeping the caller's event loop free).
    """

    def run(self, request: EvaluateRequest) -> Evaluation:
        """The evaluation ``request`` asks for, from code with no running event loop."""
        ...

    async def arun(self, request: EvaluateRequest) -> Evaluation:
        """The same, awaited on the caller's event loop."""
        ...


EngineSpec = Literal["local", "ray"] | Engine
"""What ``evaluate(engine=...)`` takes: ``"local"`` (this process), ``"ray"`` (a :class:`RayEngine`
with its defaults), or an :class:`Engine` such as ``RayEngine(workers=4)``."""
