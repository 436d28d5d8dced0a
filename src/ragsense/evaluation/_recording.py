"""A run's life in the run store, for every engine: started once its metrics are known, each finished
chunk kept as it lands, then finished with its summary or marked incomplete with the reason.

A run refused before it starts (an existing output, a lock another run holds, a bad parameter) is
never entered: an engine starts the recording only after it has claimed its output and set its
metrics up. :meth:`Recording.finish` is also where the :class:`Evaluation` a run returns is put
together, so both engines return (and record) the same thing.

>>> import tempfile, pathlib
>>> from ragsense.runs import RunStore
>>> store = RunStore(pathlib.Path(tempfile.mkdtemp()) / "runs.db")
>>> recording = Recording(store, tag="v1", command="python", dataset="rows")
>>> info = MetricInfo("similarity", ("similarity",), ("similarity",), None, {})
>>> recording.start([info])
>>> recording.add_rows([{"_row": 0, "similarity": 0.5, "errors": []}], inputs=[])
>>> run = recording.finish([{"_row": 0, "similarity": 0.5, "errors": []}], [info], RunStats(1))
>>> store.get(run.run_id).status, store.get(run.run_id).n_rows
('complete', 1)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ragsense.contract import RunItem
from ragsense.evaluation._evaluation import Evaluation, MetricInfo
from ragsense.evaluation._runner import ChunkSink, RunStats
from ragsense.runs import RunRecorder, RunStore


def failure_reason(exc: BaseException) -> str:
    """Why a run stopped, as the run store notes it on an incomplete run.

    >>> failure_reason(KeyboardInterrupt()), failure_reason(ValueError("bad row"))
    ('interrupted', 'ValueError: bad row')
    """
    if isinstance(exc, KeyboardInterrupt | asyncio.CancelledError):
        return "interrupted"  # Ctrl-C reaches the runner's coroutine as a cancellation
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class Recording:
    """One run in ``store`` (nothing at all when ``store`` is None); see the module docstring."""

    def __init__(self, store: RunStore | None, *, tag: str | None, command: str, dataset: str) -> None:
        self._store = store
        self._tag = tag
        self._command = command
        self._dataset = dataset
        self._recorder: RunRecorder | None = None

    @property
    def run_id(self) -> str | None:
        """The run's id in the store once started; None before, or without a store."""
        return None if self._recorder is None else self._recorder.run_id

    def start(self, infos: Sequence[MetricInfo], earlier: Iterable[Sequence[Mapping[str, Any]]] = ()) -> None:
        """Enter the run in the store (once; later calls do nothing) with its metrics as set up;
        ``earlier``: the chunks an earlier run had finished and this one keeps, recorded first."""
        if self._store is None or self._recorder is not None:
            return
        self._recorder = self._store.start(
            metrics=[i.to_dict() for i in infos], tag=self._tag, command=self._command, dataset=self._dataset
        )
        for records in earlier:
            self.add_rows(records, inputs=[])

    def add_rows(
        self, records: Sequence[Mapping[str, Any]], inputs: Sequence[Mapping[str, Any]] | None
    ) -> None:
        """Keep a finished chunk's records; ``inputs``, its input rows for the input hash (``[]`` when
        the engine feeds them in input order to :meth:`finish` instead)."""
        if self._recorder is not None:
            self._recorder.add_rows(records, inputs)

    def sink(self) -> ChunkSink | None:
        """The runner's ``on_chunk`` for a started recording (None without one: nothing to keep)."""
        if self._recorder is None:
            return None

        def add(items: Sequence[RunItem], records: Sequence[dict[str, Any]]) -> None:
            self.add_rows(records, [item.to_record() for item in items])

        return add

    @contextlib.contextmanager
    def abandoned_on_failure(self) -> Iterator[None]:
        """Mark the run incomplete (what finished stays in the store) if the block raises, then re-raise."""
        try:
            yield
        except BaseException as exc:
            if self._recorder is not None:
                self._recorder.abandon(failure_reason(exc))
            raise

    def finish(
        self,
        records: list[dict[str, Any]],
        infos: Sequence[MetricInfo],
        stats: RunStats,
        inputs: Iterable[RunItem] | None = None,
    ) -> Evaluation:
        """The run's :class:`Evaluation`, its summary recorded and the run marked complete; ``inputs``:
        the input rows in order, for an engine that gave :meth:`add_rows` none."""
        evaluation = Evaluation(records, infos, stats, run_id=self.run_id)
        if self._recorder is not None:
            if inputs is not None:
                self._recorder.hasher.update(item.to_record() for item in inputs)
            self._recorder.finish(evaluation.summary().to_dict())
        return evaluation
