"""How far a GPU run of ``consens-distractors`` lands from the CPU float32 run: per cell and per item.

    G=docs/results/consens/distractors/gpu
    python -m papers.consens.distractor_agreement $G/h200-bfloat16-halueval \
        --out $G/agreement-h200-bfloat16-halueval.json

Both folders hold the experiment's per-item ``report-<set>-k<k>.jsonl.gz`` files for the same report
pairs (same seed, ``--limit`` and ``--context-budget``). For every (set, k, condition) cell present in
both, it gives the AUROC of each run with its paired bootstrap interval, the largest and mean absolute
difference of the ConSens score over the rows, the share of rows with the same verdict, and whether the
same documents were kept (the relevance window is chosen before the model runs, so it must match
exactly). Cells the CPU run lacks (the full pass at large k, say) are listed with the GPU run's AUROC
alone, beside the lexical-support baseline on the same rows. A GPU run's rows/s per cell come from
its ``consens-distractors*.json``. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from papers.consens.distractor_tables import pair_scores, read_records
from ragsense.experiments import contrast


def _records(folder: Path) -> dict[tuple[str, int, str], dict[str, dict[str, Any]]]:
    """``{(set, k, condition): {row id: record}}`` from a folder's report files."""
    cells: dict[tuple[str, int, str], dict[str, dict[str, Any]]] = {}
    for path in sorted(folder.glob("report-*-k*.jsonl.gz")):
        name = path.name.split("-")[1]
        for rec in read_records(path):
            cells.setdefault((name, rec["k"], rec["condition"]), {})[rec["id"]] = rec
    return cells


def _auroc(rows: dict[str, dict[str, Any]]) -> tuple[float, list[float]]:
    figures = contrast(*pair_scores({i: r["consens"] for i, r in rows.items()}))
    return figures["auroc"], figures["auroc_ci95"]


def _lexical(rows: dict[str, dict[str, Any]]) -> float:
    """The trivial baseline on the same rows: lexical support of the answer's words in the context."""
    return float(contrast(*pair_scores({i: r["lexical_support"] for i, r in rows.items()}))["auroc"])


def _rates(folder: Path) -> dict[tuple[str, int, str], float]:
    """rows/s per (set, k, condition) from the run's figures files."""
    rates: dict[tuple[str, int, str], float] = {}
    for path in sorted(folder.glob("consens-distractors*.json")):
        text = path.read_text()
        if not text.strip():
            continue  # a run stopped before its figures (its per-item files are complete per k)
        figures = json.loads(text)
        for name, table in figures.items():
            if not isinstance(table, dict) or name in ("dev",):
                continue
            for key, row in table.items():
                if not key.startswith("k=") or not isinstance(row, dict):
                    continue
                for condition, cell in row.items():
                    if isinstance(cell, dict) and "rows_per_s" in cell:
                        rates[(name, int(key[2:]), condition)] = cell["rows_per_s"]
    return rates


def agreement(gpu: Path, cpu: Path) -> dict[str, Any]:
    """The comparison (module docstring) of the runs in ``gpu`` and ``cpu``."""
    theirs, ours = _records(gpu), _records(cpu)
    rates = _rates(gpu)
    cells: list[dict[str, Any]] = []
    all_diffs: list[float] = []
    same_verdicts = same_windows = compared = 0
    for key in sorted(set(theirs) & set(ours)):
        g, c = theirs[key], ours[key]
        ids = sorted(set(g) & set(c))
        if not ids:
            continue
        diffs = [abs(g[i]["consens"] - c[i]["consens"]) for i in ids]
        verdicts = sum(g[i]["verdict"] == c[i]["verdict"] for i in ids)
        windows = sum(g[i]["kept_documents"] == c[i]["kept_documents"] for i in ids)
        all_diffs += diffs
        same_verdicts += verdicts
        same_windows += windows
        compared += len(ids)
        gpu_auroc, gpu_ci = _auroc({i: g[i] for i in ids})
        cpu_auroc, cpu_ci = _auroc({i: c[i] for i in ids})
        name, k, condition = key
        cells.append(
            {
                "set": name,
                "k": k,
                "condition": condition,
                "rows": len(ids),
                "auroc_gpu": gpu_auroc,
                "auroc_gpu_ci95": gpu_ci,
                "auroc_cpu_float32": cpu_auroc,
                "auroc_cpu_float32_ci95": cpu_ci,
                "consens_max_abs_diff": round(max(diffs), 6),
                "consens_mean_abs_diff": round(sum(diffs) / len(diffs), 6),
                "same_verdict": round(verdicts / len(ids), 4),
                "same_kept_documents": round(windows / len(ids), 4),
                "gpu_rows_per_s": rates.get(key),
            }
        )
    if not compared:
        raise SystemExit(f"no cell of {gpu} matches one of {cpu}: same --limit, seed and budget?")
    gpu_only = []
    for key in sorted(set(theirs) - set(ours)):
        auroc, ci = _auroc(theirs[key])
        name, k, condition = key
        gpu_only.append(
            {
                "set": name,
                "k": k,
                "condition": condition,
                "rows": len(theirs[key]),
                "auroc_gpu": auroc,
                "auroc_gpu_ci95": ci,
                "baseline_lexical_support": _lexical(theirs[key]),
                "gpu_rows_per_s": rates.get(key),
            }
        )
    return {
        "gpu_run": str(gpu),
        "cpu_run": str(cpu),
        "rows_compared": compared,
        "consens_max_abs_diff": round(max(all_diffs), 6),
        "consens_mean_abs_diff": round(sum(all_diffs) / len(all_diffs), 6),
        "same_verdict": round(same_verdicts / compared, 4),
        "same_kept_documents": round(same_windows / compared, 4),
        "cells": cells,
        "gpu_only_cells": gpu_only,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gpu", type=Path, help="folder of the GPU run's per-item files")
    parser.add_argument("--cpu", type=Path, default=Path("docs/results/consens/distractors"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report = agreement(args.gpu, args.cpu)
    for cell in report["cells"]:
        print(
            f"{cell['set']:9} k={cell['k']:<3} {cell['condition']:7} AUROC gpu {cell['auroc_gpu']:.3f} "
            f"cpu {cell['auroc_cpu_float32']:.3f}  |diff| max {cell['consens_max_abs_diff']:.4f} "
            f"mean {cell['consens_mean_abs_diff']:.4f}  verdicts {cell['same_verdict']:.2f}  "
            f"rows/s {cell['gpu_rows_per_s']}"
        )
    for cell in report["gpu_only_cells"]:
        lo, hi = cell["auroc_gpu_ci95"]
        print(
            f"{cell['set']:9} k={cell['k']:<3} {cell['condition']:7} AUROC gpu {cell['auroc_gpu']:.3f} "
            f"[{lo:.3f}, {hi:.3f}] (no CPU run)  lexical support {cell['baseline_lexical_support']:.3f}  "
            f"rows/s {cell['gpu_rows_per_s']}"
        )
    text = json.dumps(report, sort_keys=True, allow_nan=False)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
