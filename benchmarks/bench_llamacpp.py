"""The same GGUF through llama.cpp and through torch float32: ConSens's speed, memory and scores.

    .venv/bin/python -m benchmarks.bench_llamacpp --model qwen2.5-coder-0.5b --items 20 \\
        --out docs/results/speed/bench_llamacpp_qwen05.json

Rows: HaluEval-dev's report-half items (rows 100 on, the capable readers' rows in docs/results.md),
the right and the hallucinated answer of each against its knowledge. Each backend runs in its own
process (one thread), so its peak memory is its own: ``llamacpp:MODEL`` reads the quantized GGUF,
``MODEL`` the float32 copy torch de-quantized from it. Each prints ConSens rows per wall second and per
CPU second, and the ratio of ConSens's time to its own raw forward pass over the same unique token
sequences (llama.cpp's ``eval``, torch's model body); then the two backends' agreement on the same
rows: the mean and largest difference in ``consens``, verdict agreement, and each AUROC (right vs
hallucinated) beside lexical support's. The last line is one JSON object, with every row's scores.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import resource
import sys
import time
from typing import Any

from benchmarks.output import emit
from ragsense.consens import GroundingResult, GroundingScorer
from ragsense.data import load_halueval
from ragsense.models import ScoreRequest, load_model
from ragsense.stats import roc_auc
from ragsense.text import unsupported_share

FIRST_REPORT_ROW = 100


def _rows(items: int) -> list[tuple[str, list[str], str]]:
    rows = []
    for it in load_halueval()[FIRST_REPORT_ROW : FIRST_REPORT_ROW + items]:
        rows.append((it.question, [it.knowledge], it.right_answer))
        rows.append((it.question, [it.knowledge], it.hallucinated_answer))
    return rows


def _raw_llama(model: Any, requests: list[ScoreRequest]) -> tuple[float, int]:
    llm, tokens = model._llm, 0
    started = time.perf_counter()
    for r in requests:
        ids = llm.tokenize((r.prompt + r.continuation).encode("utf-8"), add_bos=True, special=False)
        llm.reset()
        llm.eval(ids)
        tokens += len(ids)
    return time.perf_counter() - started, tokens


def _run(name: str, items: int, threads: int, queue: Any) -> None:
    started = time.perf_counter()
    model = load_model(name, threads=threads)
    load_s = time.perf_counter() - started
    rows = _rows(items)
    scorer = GroundingScorer(model)
    cpu, wall = time.process_time(), time.perf_counter()
    results = asyncio.run(scorer.score(rows))
    consens_s, consens_cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t = scorer.template
    requests = list(
        dict.fromkeys(
            r
            for q, docs, a in rows
            for r in (
                ScoreRequest(t.render_context(q, ""), t.continuation(a)),
                ScoreRequest(t.render(q, docs), t.continuation(a)),
            )
        )
    )
    if name.startswith("llamacpp:"):
        raw_s, tokens = _raw_llama(model, requests)
    else:
        from benchmarks.bench_consens import _raw_forward

        raw_s, tokens = _raw_forward(model, requests, with_full_logits=False)
    scored = [r for r in results if isinstance(r, GroundingResult)]
    assert len(scored) == len(rows), "a benchmark row failed"
    queue.put(
        {
            "model": name,
            "load_s": round(load_s, 1),
            "rows": len(rows),
            "consens_s": round(consens_s, 2),
            "rows_per_s": round(len(rows) / consens_s, 3),
            "rows_per_cpu_s": round(len(rows) / consens_cpu, 3),
            "raw_forward_s": round(raw_s, 2),
            "raw_tokens": tokens,
            "ratio_vs_raw_forward": round(raw_s / consens_s, 3),
            "peak_rss_mib": round(peak),
            "consens": [r.consens for r in scored],
            "verdicts": [r.verdict for r in scored],
            "lexical_support": [
                -unsupported_share([w.word for w in r.words], docs)
                for r, (_, docs, _) in zip(scored, rows, strict=True)
            ],
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="a bundled model name")
    parser.add_argument("--items", type=int, default=20, help="HaluEval-dev report items (2 rows each)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out")
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    runs = {}
    for name in (f"llamacpp:{args.model}", args.model):
        queue = context.Queue()
        process = context.Process(target=_run, args=(name, args.items, args.threads, queue))
        process.start()
        runs[name] = queue.get()
        process.join()
        print({k: v for k, v in runs[name].items() if k not in ("consens", "verdicts")}, file=sys.stderr)
    ours, theirs = runs[f"llamacpp:{args.model}"], runs[args.model]
    diffs = [abs(a - b) for a, b in zip(ours["consens"], theirs["consens"], strict=True)]
    lexical = theirs["lexical_support"]

    def auroc(values: list[float]) -> float:
        return round(roc_auc(values[0::2], values[1::2]), 4)

    figures = {
        "model": args.model,
        "items": args.items,
        "threads": args.threads,
        "llamacpp_speedup_rows_per_cpu_s": round(ours["rows_per_cpu_s"] / theirs["rows_per_cpu_s"], 2),
        "consens_mean_abs_diff": round(sum(diffs) / len(diffs), 4),
        "consens_max_abs_diff": round(max(diffs), 4),
        "verdict_agreement": round(
            sum(a == b for a, b in zip(ours["verdicts"], theirs["verdicts"], strict=True)) / len(diffs), 4
        ),
        "auroc_llamacpp": auroc(ours["consens"]),
        "auroc_torch": auroc(theirs["consens"]),
        "auroc_lexical_support": auroc(lexical),
        "runs": runs,
    }
    emit(figures, args.out)


if __name__ == "__main__":
    main()
