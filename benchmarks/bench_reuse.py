"""Read each context once: two answers per context with prompt reuse on and off, in one run.

    .venv/bin/python -m benchmarks.bench_reuse --items 50 --group 10 --threads 1 \\
        --out docs/results/speed/bench_reuse.json

The compare workflow in one file: WikiEval's first ``--items`` questions (``context_v1``), each with
two answers (the grounded one as system A, the ungrounded one as system B), so ``2 x items`` rows over
``items`` contexts. The questions are cut into groups of ``--group``; each group is one file of A's
rows followed by B's rows (two runs' outputs concatenated), scored by ``ragsense.evaluate`` with
ConSens at ``--chunk-size`` rows a chunk, so B's rows come back to their contexts in later chunks.

Each group is scored twice on the same loaded weights, the two settings alternating which goes
first (the shared CPU's load drifts; alternating cancels it):

* **reuse** (the defaults): requests with the same prompt share one prompt pass within a call, and
  prompt KV states are kept across calls in the LRU of ``--prompt-cache-tokens`` prompt tokens;
* **without**: ``reuse_prompts=False``, every request runs its own prompt pass on the same route.

Printed: the time of each, the ratio without / reuse (total, and the range and median over groups),
beside the ratio of token positions the body computes without and with reuse (what a cost linear in
positions would give; ``--positions-only`` prints just those, per group, and times nothing), that every
ConSens score and word is identical (asserted), the cache's hits, entries, prompt tokens and bytes
(at most its budget times the model's KV bytes per token), and the process's peak RSS. The last line
is one JSON object; ``--out`` also writes it.
"""

from __future__ import annotations

import argparse
import platform
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.output import emit
from ragsense import evaluate
from ragsense.consens import ConSens, GroundingScorer
from ragsense.data import load_wikieval
from ragsense.models import DEFAULT_PROMPT_CACHE_TOKENS, load_model


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _group_rows(items: list[Any]) -> list[dict[str, Any]]:
    """System A's rows (grounded answers), then system B's (ungrounded), over the same contexts."""
    rows = []
    for system, field in (("A", "grounded_answer"), ("B", "ungrounded_answer")):
        for it in items:
            rows.append(
                {
                    "id": f"{it.id}-{system}",
                    "question": it.question,
                    "contexts": it.context_v1,
                    "answer": getattr(it, field),
                }
            )
    return rows


def _positions(model: Any, items: list[Any]) -> tuple[int, int]:
    """Token positions the body computes without reuse and with it (each distinct prompt once): the
    speed-up a cost linear in positions would give is their ratio."""
    template = GroundingScorer(model).template

    def n(text: str) -> int:
        return len(model.tokenizer(text)["input_ids"])

    without = reuse = 0
    for it in items:
        prompts = (template.render(it.question, it.context_v1), template.render_context(it.question, ""))
        for prompt in prompts:
            p = n(prompt)
            reuse += p
            for answer in (it.grounded_answer, it.ungrounded_answer):
                c = n(prompt + template.continuation(answer)) - p
                without += p + c
                reuse += c
    return without, reuse


def _timed(model: Any, rows: list[dict[str, Any]], chunk_size: int) -> tuple[float, list[Any]]:
    started = time.perf_counter()
    result = evaluate(rows, [ConSens(model)], chunk_size=chunk_size, progress=False, store=False).rows
    return time.perf_counter() - started, [(r["consens"], r["words"]) for r in result]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--items", type=int, default=50, help="WikiEval questions (contexts)")
    parser.add_argument("--group", type=int, default=10, help="questions per timed file")
    parser.add_argument("--chunk-size", type=int, default=4)
    parser.add_argument("--prompt-cache-tokens", type=int, default=DEFAULT_PROMPT_CACHE_TOKENS)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--data", default=None)
    parser.add_argument("--out", default=None, help="also write the JSON object to this file")
    parser.add_argument(
        "--positions-only",
        action="store_true",
        help="print each group's token positions without and with reuse (no timing) and stop",
    )
    args = parser.parse_args()
    options: dict[str, Any] = {"threads": args.threads} if args.threads else {}
    base = load_model(args.model, **options)
    items = load_wikieval(args.data)[: args.items]
    groups = [items[i : i + args.group] for i in range(0, len(items), args.group)]
    positions = [_positions(base, group) for group in groups]
    if args.positions_only:
        for n, (without_p, reuse_p) in enumerate(positions):
            print(
                f"group {n}: positions without {without_p}, reuse {reuse_p}, ratio {without_p / reuse_p:.3f}"
            )
        total_without, total_reuse = (sum(p[i] for p in positions) for i in (0, 1))
        print(
            f"all: positions without {total_without}, reuse {total_reuse}, "
            f"ratio {total_without / total_reuse:.3f}"
        )
        return
    rss_loaded = _rss_mb()
    # Warm-up outside the timings: one short row through each route.
    warm = _group_rows(items[:1])[:1]
    _timed(base.with_settings(reuse_prompts=False), warm, 1)
    _timed(base.with_settings(), warm, 1)

    total = {"reuse": 0.0, "without": 0.0}
    per_group: list[dict[str, float]] = []
    ratios: list[float] = []
    hits = misses = evictions = 0
    max_bytes = max_tokens_held = 0
    bytes_per_token = 0.0
    rows_n = 0
    for n, group in enumerate(groups):
        rows = _group_rows(group)
        rows_n += len(rows)
        # Fresh models on the same weights: nothing a group kept helps the next one.
        reuse = base.with_settings(prompt_cache_tokens=args.prompt_cache_tokens)
        without = base.with_settings(reuse_prompts=False)
        order = [("without", without), ("reuse", reuse)]
        if n % 2:
            order.reverse()
        seconds: dict[str, float] = {}
        results: dict[str, list[Any]] = {}
        for name, model in order:
            seconds[name], results[name] = _timed(model, rows, args.chunk_size)
            total[name] += seconds[name]
        assert results["reuse"] == results["without"], f"group {n}: scores differ with reuse"
        ratios.append(seconds["without"] / seconds["reuse"])
        without_p, reuse_p = positions[n]
        per_group.append(
            {
                "without_s": round(seconds["without"], 1),
                "reuse_s": round(seconds["reuse"], 1),
                "ratio": round(ratios[-1], 3),
                "position_ratio": round(without_p / reuse_p, 3),
                "first": "without" if n % 2 == 0 else "reuse",
            }
        )
        stats = reuse.prompt_cache_stats()
        if stats is not None:
            hits, misses, evictions = hits + stats.hits, misses + stats.misses, evictions + stats.evictions
            max_bytes = max(max_bytes, stats.nbytes)
            max_tokens_held = max(max_tokens_held, stats.tokens)
            if stats.tokens:
                bytes_per_token = stats.nbytes / stats.tokens
        print(
            f"group {n}: {len(rows)} rows, without {seconds['without']:.1f} s, "
            f"reuse {seconds['reuse']:.1f} s, ratio {ratios[-1]:.2f}",
            file=sys.stderr,
        )
        del reuse, without

    figures: dict[str, Any] = {
        "model": base.info.name,
        "cpu": platform.processor() or platform.machine(),
        "threads": args.threads,
        "rows": rows_n,
        "contexts": len(items),
        "group": args.group,
        "chunk_size": args.chunk_size,
        "without_s": round(total["without"], 1),
        "reuse_s": round(total["reuse"], 1),
        "ratio_without_over_reuse": round(total["without"] / total["reuse"], 3),
        "ratio_per_group_min": round(min(ratios), 3),
        "ratio_per_group_median": round(statistics.median(ratios), 3),
        "ratio_per_group_max": round(max(ratios), 3),
        "position_ratio": round(sum(p[0] for p in positions) / sum(p[1] for p in positions), 3),
        "groups": per_group,
        "scores_identical": True,  # asserted per group above
        "cache_budget_tokens": args.prompt_cache_tokens,
        "cache_hits": hits,
        "cache_misses": misses,
        "cache_evictions": evictions,
        "cache_max_tokens_held": max_tokens_held,
        "cache_max_bytes_mb": round(max_bytes / 2**20, 1),
        "cache_bytes_per_token": round(bytes_per_token),
        "cache_budget_bytes_mb": round(args.prompt_cache_tokens * bytes_per_token / 2**20, 1),
        "rss_after_load_mb": round(rss_loaded, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    assert figures["cache_max_tokens_held"] <= args.prompt_cache_tokens
    for key, value in figures.items():
        print(f"{key:>28}: {value}", file=sys.stderr)
    emit(figures, args.out)


if __name__ == "__main__":
    main()
