"""Rows/s of ConSens on many-document rows: the relevance window against today's full-context pass.

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.bench_rows --pairs 6 --budget 128 \\
        --out docs/results/speed/bench_rows.json

On the report half of HaluEval-dev (``--set``; the split and the distractors of
``ragsense experiment consens-distractors``), each pair's document with k other documents shuffled
in, scored through ``evaluate`` with the same model in one run:

* **k = 20, budget vs full:** ``ConSens(context_budget=B)`` against ``ConSens(context_policy="tail")``
  with no budget (today's pass: the whole context, cut at the model window); the ratio of rows/s
  (target >= 3) and the AUROC of each (target: within 0.02);
* **k = 40 vs k = 5, budget:** the cost of more documents, rows/s(k=5) / rows/s(k=40) (target <= 1.5).

Ratios are measured in the same process on the same rows, so the machine's load cancels (not its
changes during the run: the order is full, budget, k=5, k=40). The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

from benchmarks.output import emit
from ragsense.experiments import load_pairs, score_cell, split_parts
from ragsense.models import load_model


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--set", default="halueval", choices=("halueval", "wikieval"))
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--budget", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", help="write the JSON here too")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model(args.model)
    pool = split_parts(load_pairs(args.set), args.seed)["report"]
    pairs = pool[: args.pairs]
    started = time.perf_counter()
    cells = {
        "k20_full": score_cell(model, pairs, pool, 20, "full", args.budget, args.seed)[0],
        "k20_budget": score_cell(model, pairs, pool, 20, "budget", args.budget, args.seed)[0],
        "k5_budget": score_cell(model, pairs, pool, 5, "budget", args.budget, args.seed)[0],
        "k40_budget": score_cell(model, pairs, pool, 40, "budget", args.budget, args.seed)[0],
    }
    for name, cell in cells.items():
        print(f"{name:11s} rows/s {cell['rows_per_s']:7.3f}  AUROC {cell['auroc']:.3f} {cell['auroc_ci95']}")
    result = {
        "benchmark": "bench_rows",
        "model": args.model,
        "set": args.set,
        "pairs": len(pairs),
        "rows_per_cell": 2 * len(pairs),
        "budget": args.budget,
        "threads": args.threads,
        "machine": platform.processor() or platform.machine(),
        "cells": cells,
        "speedup_k20_budget_vs_full": round(
            cells["k20_budget"]["rows_per_s"] / cells["k20_full"]["rows_per_s"], 2
        ),
        "auroc_k20_budget_minus_full": round(cells["k20_budget"]["auroc"] - cells["k20_full"]["auroc"], 4),
        "cost_k40_vs_k5": round(cells["k5_budget"]["rows_per_s"] / cells["k40_budget"]["rows_per_s"], 2),
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(
        f"k=20: budget {result['speedup_k20_budget_vs_full']}x the rows/s of the full pass "
        f"(AUROC difference {result['auroc_k20_budget_minus_full']:+.3f}); "
        f"k=40 costs {result['cost_k40_vs_k5']}x k=5"
    )
    emit(result, args.out, sort_keys=True)


if __name__ == "__main__":
    main()
