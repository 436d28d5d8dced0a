"""ConSens's default settings on retrieved-looking contexts: clean rows against the same rows with other
documents mixed in, AUROC and time in one run (issue 40).

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.bench_default_window --set wikieval --first 12 --k 10 \\
        --out docs/results/speed/bench_default_window_wikieval.json

The first ``--first`` WikiEval questions (grounded vs ungrounded answer), each scored against its own
document (clean) and against it with ``--k`` documents of other questions shuffled in (seeded, as
``ragsense experiment consens-distractors`` draws them), through ``evaluate`` with ``ConSens()`` and
nothing else set: whatever the library's default reads. The rows go in chunks of ``--chunk`` pairs,
clean and padded alternating which goes first, each chunk in a fresh model pool (its own no-context
cache, as a user's run has), so a load that changes during the run falls on both. The last line is one
JSON object: each condition's AUROC with its paired bootstrap interval, the padded minus clean AUROC
with a paired interval, the seconds of each and their ratio, what the padded rows kept.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable
from typing import Any

import torch

from benchmarks.output import emit
from ragsense import evaluate
from ragsense.consens import ConSens, GroundingResult
from ragsense.experiments import auroc_difference, contrast, load_pairs, with_distractors
from ragsense.models import ModelPool, load_model


def _records(pairs: list[Any], pool: list[Any], k: int, seed: int) -> list[dict[str, Any]]:
    records = []
    for p in pairs:
        docs = with_distractors(p, pool, k, seed)[0] if k else list(p.documents)
        for label, answer in (("pos", p.pos), ("neg", p.neg)):
            records.append(
                {"id": f"{p.id}:{label}", "question": p.question, "contexts": docs, "answer": answer}
            )
    return records


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--set", default="wikieval", choices=("wikieval", "halueval"))
    parser.add_argument("--first", type=int, default=12)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--chunk", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--budgets",
        default="",
        help="comma-separated: padded rows also read ConSens(context_budget=B) for each B, the "
        "default's reading of several documents when B is its budget (one run, both candidates)",
    )
    parser.add_argument("--out", help="write the JSON here too")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model(args.model)
    every = load_pairs(args.set)
    pairs = every[: args.first]
    # Warm-up on a pair outside the sample, both conditions.
    for k in (0, args.k):
        evaluate(
            _records(every[-1:], every, k, args.seed), [ConSens(model)], progress=False, pool=ModelPool()
        )
    budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    metrics: dict[str, Callable[[], ConSens]] = {"clean": lambda: ConSens(model)}
    if not budgets:
        metrics["padded"] = lambda: ConSens(model)
    for b in budgets:
        metrics[f"padded-{b}"] = lambda b=b: ConSens(model, context_budget=b)  # type: ignore[misc]
    seconds = dict.fromkeys(metrics, 0.0)
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in metrics}
    started = time.perf_counter()
    for c, start in enumerate(range(0, len(pairs), args.chunk)):
        chunk = pairs[start : start + args.chunk]
        order = list(metrics) if c % 2 == 0 else list(reversed(metrics))
        for condition in order:
            records = _records(chunk, every, 0 if condition == "clean" else args.k, args.seed)
            t = time.perf_counter()
            run = evaluate(records, [metrics[condition]()], progress=False, pool=ModelPool())
            seconds[condition] += time.perf_counter() - t
            rows[condition] += run.rows
    results = {name: [GroundingResult.from_dict(r) for r in got] for name, got in rows.items()}
    scores = {
        name: ([r.consens for r in got[0::2]], [r.consens for r in got[1::2]])
        for name, got in results.items()
    }
    figures = {name: contrast(*s) for name, s in scores.items()}
    result = {
        "benchmark": "bench_default_window",
        "model": args.model,
        "set": args.set,
        "pairs": len(pairs),
        "k": args.k,
        "threads": args.threads,
        "machine": platform.processor() or platform.machine(),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "auroc": {name: [f["auroc"], f["auroc_ci95"]] for name, f in figures.items()},
        "minus_clean": {n: auroc_difference(scores[n], scores["clean"]) for n in metrics if n != "clean"},
        "seconds": {name: round(s, 1) for name, s in seconds.items()},
        "time_ratio_vs_clean": {n: round(seconds[n] / seconds["clean"], 2) for n in metrics if n != "clean"},
        "context_selection": {n: sorted({r.context_selection for r in got}) for n, got in results.items()},
        "documents_kept_mean": {
            n: round(sum(len(r.kept_documents) for r in got) / len(got), 2) for n, got in results.items()
        },
        "verdicts": {n: [r.verdict for r in got] for n, got in results.items()},
        "seconds_total": round(time.perf_counter() - started, 1),
    }
    emit(result, args.out, sort_keys=True)
    print(f"AUROC {result['auroc']}; time / clean {result['time_ratio_vs_clean']}")


if __name__ == "__main__":
    main()
