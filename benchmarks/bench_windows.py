"""Rows/s of the windows study against the single relevance window, back to back on the same rows.

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.bench_windows --pairs 6 --budget 128 \\
        --out docs/results/speed/bench_windows.json

On the report half of each set (the split and the distractors of ``ragsense experiment
consens-distractors``), k = 20: a warm-up pair, then the relevance window (``score_cell``,
``budget``) and the windows study (``score_windows_cell``: up to ``--max-windows`` windows, each
word's best evidence) twice each, alternating, so a load that changes during the run falls on both.
The cost is the ratio of the rows/s summed over the two repeats. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

from benchmarks.output import emit
from ragsense.experiments import load_pairs, score_cell, score_windows_cell, split_parts
from ragsense.models import load_model


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--budget", type=int, default=128)
    parser.add_argument("--max-windows", type=int, default=4)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", help="write the JSON here too")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model(args.model)
    started = time.perf_counter()
    sets = {}
    for name in ("wikieval", "halueval"):
        pool = split_parts(load_pairs(name), args.seed)["report"]
        pairs = pool[: args.pairs]
        score_cell(model, pool[-1:], pool, args.k, "budget", args.budget, args.seed)  # warm-up
        seconds = {"window": 0.0, "windows": 0.0}
        windows_per_row = 0.0
        for _ in range(2):
            cell = score_cell(model, pairs, pool, args.k, "budget", args.budget, args.seed)[0]
            seconds["window"] += 2 * len(pairs) / cell["rows_per_s"]
            cell = score_windows_cell(model, pairs, pool, args.k, args.budget, args.seed, args.max_windows)[0]
            seconds["windows"] += 2 * len(pairs) / cell["rows_per_s"]
            windows_per_row = cell["windows_per_row"]
        rows = 4 * len(pairs)
        sets[name] = {
            "rows_per_s_window": round(rows / seconds["window"], 3),
            "rows_per_s_windows": round(rows / seconds["windows"], 3),
            "windows_per_row": windows_per_row,
            "cost_windows_vs_window": round(seconds["windows"] / seconds["window"], 2),
        }
        print(name, sets[name])
    result = {
        "benchmark": "bench_windows",
        "model": args.model,
        "pairs": args.pairs,
        "k": args.k,
        "budget": args.budget,
        "max_windows": args.max_windows,
        "threads": args.threads,
        "machine": platform.processor() or platform.machine(),
        "sets": sets,
        "seconds": round(time.perf_counter() - started, 1),
    }
    emit(result, args.out, sort_keys=True)


if __name__ == "__main__":
    main()
