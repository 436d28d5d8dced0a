"""The Ray engine's worker: the actor that scores shards with the single-process runner.

Each actor sets the metrics up once (its own process-wide model pool, so a model two metrics share
is loaded once per actor), then runs :func:`~ragsense.evaluation.run_rows` over each shard's rows:
chunk by chunk, exactly as ``evaluate`` does in one process, numbered from the shard's first row.
"""

from __future__ import annotations

import asyncio
import json
import pickle
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ragsense.contract import Metric, RowOutcome
from ragsense.data import RowOrError, dumps_json, require_module
from ragsense.evaluation._evaluation import MetricInfo
from ragsense.evaluation._runner import Shape, run_rows


@dataclass(frozen=True)
class _AtOffset:
    """A shape that writes a shard's outcomes at their input positions (the runner counts from 0)."""

    shape: Shape
    offset: int

    def __call__(self, outcome: RowOutcome) -> dict[str, Any]:
        return self.shape(replace(outcome, index=outcome.index + self.offset))


def _limit_threads(threads: int) -> None:
    try:
        import torch
    except ImportError:  # a metric without a local model (an API judge, similarity) needs no torch
        return
    torch.set_num_threads(threads)


class ShardScorer:
    """A Ray Data actor: sets the metrics up once, then scores shard after shard with ``run_rows``.

    Each batch is one or more shards (``shard``, ``start``, ``items``: the parsed rows, pickled by the
    driver); each answer row is the shard's index, its output records (JSON), the metrics' infos, and
    ``error``: an exception of ragsense's own code (a metric that cannot set up, a metric's bug),
    pickled for the driver to raise as a single process would, instead of Ray retrying the actor.
    """

    def __init__(self, metrics: Sequence[Metric], chunk_size: int, shape: Shape | None, threads: int) -> None:
        from ragsense.models import shared_pool

        _limit_threads(threads)
        # One loop for the actor's life: objects the metrics make in setup stay on the loop they use.
        self._loop = asyncio.new_event_loop()
        self._metrics = list(metrics)
        self._chunk_size = chunk_size
        self._shape = shape or RowOutcome.to_record
        self._infos = "[]"
        self._error: bytes | None = None
        try:
            pool = shared_pool()
            for metric in self._metrics:
                self._loop.run_until_complete(metric.setup(pool))
            self._infos = json.dumps([MetricInfo.of(m).to_dict() for m in self._metrics], default=str)
        except Exception as exc:  # answered with every shard; the driver raises it
            self._error = _shipped(exc)

    def score(self, start: int, items: Sequence[RowOrError]) -> list[dict[str, Any]]:
        """One shard's records: the single-process runner over its rows, numbered from ``start``."""
        records, _ = self._loop.run_until_complete(
            run_rows(
                items,
                self._metrics,
                chunk_size=self._chunk_size,
                progress=False,
                shape=_AtOffset(self._shape, start),
            )
        )
        return records

    def __call__(self, batch: Any) -> Any:
        pa = require_module("pyarrow", "ray", "the Ray engine")
        out: dict[str, list[Any]] = {"shard": [], "records": [], "infos": [], "error": []}
        for shard, start, blob in zip(
            batch.column("shard").to_pylist(),
            batch.column("start").to_pylist(),
            batch.column("items").to_pylist(),
            strict=True,
        ):
            records, error = "[]", self._error
            if error is None:
                try:
                    # The driver pickled these rows for this job: data of our own, not a user's file.
                    records = dumps_json(self.score(int(start), pickle.loads(blob)))
                except Exception as exc:
                    error = _shipped(exc)
            out["shard"].append(int(shard))
            out["records"].append(records)
            out["infos"].append(self._infos)
            out["error"].append(error)
        return pa.table({**out, "error": pa.array(out["error"], type=pa.binary())})


def _shipped(exc: Exception) -> bytes:
    """``exc`` pickled for the driver (with the worker's traceback as a note), or a RuntimeError that
    carries its text when it does not survive pickling."""
    exc.add_note("on a Ray worker:\n" + "".join(traceback.format_exception(exc)))
    try:
        data = pickle.dumps(exc)
        pickle.loads(data)
    except Exception:
        data = pickle.dumps(RuntimeError(f"{type(exc).__name__}: {exc}"))
    return data
