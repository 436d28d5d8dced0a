"""The Ray engine on this machine: rows/s with 1 and 2 workers, the scaling ratio, and what the engine
costs against a single-process ``evaluate`` of the same rows.

    .venv/bin/python -m benchmarks.bench_ray --items 20 --out docs/results/ray/bench_ray.json

Rows: the first ``--items`` WikiEval questions, each with its grounded and its ungrounded answer against
``context_v1`` (``2 x items`` rows), scored with ConSens on SmolLM2-135M, ``--chunk-size`` rows per chunk
and one chunk per shard. A local Ray (``--cpus`` CPUs) is started once; every Ray run is a full
``evaluate(..., engine=RayEngine(workers=W))``: Ray Data reads the JSONL file, the actors start and load
the model, score, and the driver writes Parquet shards.

* ``single_process_1_thread``: ``evaluate`` in this process on one torch thread, the model already
  loaded (a Ray worker also scores on one thread); ``single_process_2_threads`` for comparison.
* ``ray_W_workers``: wall seconds and rows/s of the whole run, W actors of one thread each.
* ``fixed_cost_s``: after one warm-up run (that starts Ray's worker processes), a Ray run of one shard
  (``--chunk-size`` rows) minus those rows' single-process time: the read job, starting an actor,
  loading the model, writing the shard.
* ``per_row_overhead_ms``: (1-worker wall - fixed cost) / rows - single-process seconds per row: what
  the engine adds per row once it runs (shipping rows and records, writing shards).
* ``scaling``: rows/s with 2 workers / rows/s with 1, whole runs and with the fixed cost taken off.

Every Ray run's rows are checked to equal the single-process rows bit for bit. The last line printed
is the JSON object (also written to ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ray
import torch

from ragsense import RayEngine, evaluate
from ragsense.consens import ConSens
from ragsense.data import load_wikieval
from ragsense.models import ModelPool

MODEL = "smollm2-135m"


def _rows(data: str | None, items: int) -> list[dict[str, Any]]:
    rows = []
    for it in load_wikieval(data)[:items]:
        for kind, answer in (("grounded", it.grounded_answer), ("ungrounded", it.ungrounded_answer)):
            rows.append(
                {
                    "id": f"{it.id}-{kind}",
                    "question": it.question,
                    "contexts": it.context_v1,
                    "answer": answer,
                }
            )
    return rows


def _local(
    source: Path, chunk_size: int, threads: int, pool: ModelPool
) -> tuple[float, list[dict[str, Any]]]:
    torch.set_num_threads(threads)
    started = time.perf_counter()
    run = evaluate(source, [ConSens(model=MODEL)], chunk_size=chunk_size, pool=pool, progress=False)
    return time.perf_counter() - started, run.rows


def _on_ray(source: Path, out: Path, chunk_size: int, workers: int) -> tuple[float, list[dict[str, Any]]]:
    started = time.perf_counter()
    run = evaluate(
        source,
        [ConSens(model=MODEL)],
        chunk_size=chunk_size,
        output=out,
        overwrite=True,
        engine=RayEngine(workers=workers, shard_chunks=1),
        progress=False,
    )
    return time.perf_counter() - started, run.rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=20, help="WikiEval items (two rows each)")
    parser.add_argument("--chunk-size", type=int, default=4)
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray")
    parser.add_argument("--data", default=None, help="WikiEval file or folder (default: the shared data)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    rows = _rows(args.data, args.items)
    n, chunk = len(rows), args.chunk_size
    result: dict[str, Any] = {
        "model": MODEL,
        "rows": n,
        "chunk_size": chunk,
        "shards": -(-n // chunk),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "ray": ray.__version__,
        # The machine is shared: its load around the run says how far to trust the figures.
        "load_avg_1min_before": round(os.getloadavg()[0], 2),
    }
    with tempfile.TemporaryDirectory(prefix="rs-bench-", dir="/tmp") as tmp:
        source = Path(tmp) / "rows.jsonl"
        source.write_text("".join(json.dumps(r) + "\n" for r in rows))
        one = Path(tmp) / "one.jsonl"
        one.write_text("".join(json.dumps(r) + "\n" for r in rows[:chunk]))

        pool = ModelPool()
        torch.set_num_threads(1)
        loaded = time.perf_counter()
        pool.get(MODEL)
        load_s = time.perf_counter() - loaded
        local1_s, reference = _local(source, chunk, 1, pool)
        local2_s, again = _local(source, chunk, 2, pool)
        assert again == reference
        result["model_load_s"] = round(load_s, 2)
        result["single_process_1_thread"] = {
            "seconds": round(local1_s, 2),
            "rows_per_s": round(n / local1_s, 3),
        }
        result["single_process_2_threads"] = {
            "seconds": round(local2_s, 2),
            "rows_per_s": round(n / local2_s, 3),
        }
        print(
            f"single process: {n / local1_s:.3f} rows/s (1 thread), {n / local2_s:.3f} (2)", file=sys.stderr
        )

        ray.init(address="local", num_cpus=args.cpus, include_dashboard=False, _temp_dir=f"{tmp}/ray")
        try:
            # Ray's first job starts its worker processes: a warm-up, so no measured run pays that alone.
            _on_ray(one, Path(tmp) / "out-warm", chunk, 1)
            # One shard: what a run costs beyond its rows (read job, actor start, model load, write).
            tiny_s, tiny_rows = _on_ray(one, Path(tmp) / "out-one", chunk, 1)
            assert tiny_rows == reference[:chunk]
            fixed_s = tiny_s - local1_s * chunk / n
            result["fixed_cost_s"] = round(fixed_s, 2)
            walls: dict[int, float] = {}
            for workers in (1, 2):
                wall, scored = _on_ray(source, Path(tmp) / f"out-{workers}", chunk, workers)
                assert scored == reference, f"{workers} workers: rows differ from the single process"
                walls[workers] = wall
                result[f"ray_{workers}_worker{'s' if workers > 1 else ''}"] = {
                    "seconds": round(wall, 2),
                    "rows_per_s": round(n / wall, 3),
                    "rows_per_s_without_fixed_cost": round(n / (wall - fixed_s), 3),
                }
                print(f"ray, {workers} worker(s): {n / wall:.3f} rows/s ({wall:.1f} s)", file=sys.stderr)
        finally:
            ray.shutdown()
    result["per_row_overhead_ms"] = round(1000 * ((walls[1] - fixed_s) / n - local1_s / n), 1)
    result["scaling_2_vs_1"] = round(walls[1] / walls[2], 3)
    result["scaling_2_vs_1_without_fixed_cost"] = round((walls[1] - fixed_s) / (walls[2] - fixed_s), 3)
    result["identical_rows"] = True  # asserted above for every Ray run
    result["load_avg_1min_after"] = round(os.getloadavg()[0], 2)
    text = json.dumps(result, indent=1)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
