"""CPU time of the relevance window's selection per row, with the model's token-count memo and without.

    .venv/bin/python -m benchmarks.bench_selection --pairs 25 --out docs/results/speed/bench_selection.json

The selection (BM25 ranking, token costs of every document, or of every sentence when one document is
over the budget) runs on the CPU before the model, so on a GPU it is a large share of a many-document
row. On the report pairs of ``consens-distractors`` (WikiEval and HaluEval-dev, the same split and
distractors), each pair's grounded and ungrounded answer with k other documents shuffled in, as
``evaluate`` scores them one after the other: the first window of ``relevance_windows`` (the relevance
window ConSens reads) with the model's ``count_tokens`` (a fresh model object per cell, so its memo
starts empty and fills only within the cell) against the tokenizer called for every count. Both give
the same windows (asserted). Not a timed test; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.output import emit
from ragsense.consens import relevance_windows
from ragsense.experiments import load_pairs, split_parts, with_distractors
from ragsense.models import load_model


def _cell(
    rows: list[tuple[list[str], str]], count: Callable[[str], int], budget: int
) -> tuple[float, list[Any]]:
    started = time.perf_counter()
    windows = [relevance_windows(docs, query, budget, count, 1)[0] for docs, query in rows]
    return (time.perf_counter() - started) / len(rows), windows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--pairs", type=int, default=25)
    parser.add_argument("--budget", type=int, default=128)
    parser.add_argument("--ks", default="5,40")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    model = load_model(args.model, device="cpu", threads=1)
    tokenizer = model.tokenizer  # type: ignore[attr-defined]

    def plain(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    report: dict[str, Any] = {"model": args.model, "budget": args.budget, "pairs": args.pairs, "cells": []}
    for name in ("wikieval", "halueval"):
        pool = split_parts(load_pairs(name), 0)["report"]
        for k in (int(x) for x in args.ks.split(",")):
            rows = []
            for pair in pool[: args.pairs]:
                docs, _ = with_distractors(pair, pool, k, 0)
                rows += [(docs, f"{pair.question}\n{pair.pos}"), (docs, f"{pair.question}\n{pair.neg}")]
            fresh = model.with_settings()  # type: ignore[attr-defined]  # its own, empty memo
            memo_s, memo_windows = _cell(rows, fresh.count_tokens, args.budget)
            plain_s, plain_windows = _cell(rows, plain, args.budget)
            assert memo_windows == plain_windows, f"{name} k={k}: the memo changed a window"
            cell = {
                "set": name,
                "k": k,
                "rows": len(rows),
                "ms_per_row_tokenizer_each_time": round(plain_s * 1000, 2),
                "ms_per_row_memo": round(memo_s * 1000, 2),
                "ratio": round(plain_s / memo_s, 2),
            }
            report["cells"].append(cell)
            print(cell)
    emit(report, args.out, sort_keys=True)


if __name__ == "__main__":
    main()
