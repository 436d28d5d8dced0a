"""ragsense's own work per ConSens row, with the model's time taken out: what a GPU cannot hide.

    .venv/bin/python -m benchmarks.bench_row_overhead --items 50 --repeats 3

On a GPU the forward passes of a row take a few milliseconds, so the Python around them (planning the
context window, word splitting and alignment, lexical support, the learned verdict's features) sets
the rate. This scores WikiEval's first ``--items`` items (both answers, against ``context_v1``, as
``bench_vllm.py`` does) through ``GroundingScorer`` on the ``fake`` backend, whose own scoring is
timed apart (``model_s``) and subtracted: ``overhead_ms_per_row`` is the rest, the best of
``--repeats`` runs in one process (a fresh scorer each; caches keyed by text stay warm after the
first, as they do in a long-running guard). The first run's figure is reported too
(``first_run_overhead_ms_per_row``): a batch job sees that one.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from benchmarks.bench_consens import _rows
from benchmarks.output import emit
from ragsense.consens import GroundingScorer
from ragsense.models import load_model


class _Timed:
    """The fake model with the time of its ``score`` calls added up."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    async def score(self, requests: Any) -> Any:
        started = time.perf_counter()
        result = await self._model.score(requests)
        self.seconds += time.perf_counter() - started
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data", default=None)
    parser.add_argument("--out")
    args = parser.parse_args()
    rows = _rows(args.data, args.items)
    runs = []
    for _ in range(args.repeats):
        model = _Timed(load_model("fake"))
        started = time.perf_counter()
        results = asyncio.run(GroundingScorer(model).score(rows))  # type: ignore[arg-type]
        total = time.perf_counter() - started
        failed = sum(isinstance(r, Exception) for r in results)
        runs.append({"total_s": total, "model_s": model.seconds, "failed": failed})
    per_row = [1000 * (r["total_s"] - r["model_s"]) / len(rows) for r in runs]
    emit(
        {
            "rows": len(rows),
            "repeats": args.repeats,
            "overhead_ms_per_row": round(min(per_row), 2),
            "first_run_overhead_ms_per_row": round(per_row[0], 2),
            "runs": [{k: round(v, 4) for k, v in r.items()} for r in runs],
        },
        args.out,
    )


if __name__ == "__main__":
    main()
