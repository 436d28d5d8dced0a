"""Prompts that share a leading part (issue 27): attribution with and without reuse, and what the
segmented prompt pass costs and changes, each in one run.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python -m benchmarks.bench_prefix_reuse --threads 1 \\
        --attribution-rows 8 --start 100 --distractors 6 --segment-rows 20 \\
        --out docs/results/speed/bench_prefix_reuse.json
    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python -m benchmarks.bench_prefix_reuse --threads 1 \\
        --crop-items 10 --segment-sizes --attribution-rows 0 --segment-rows 0 \\
        --out docs/results/speed/bench_prefix_reuse_crop.json

**Attribution** (``--attribution-rows``): HaluEval QA rows from ``--start`` on, each with a context of
``--distractors + 1`` documents: the row's own knowledge passage at position ``--position`` among the
knowledge passages of the rows that follow it. Each row is scored by ConSens with leave-one-out
attribution (the full context and one prompt per left-out document, one ``score`` call) twice on the
same weights, alternating which goes first: *reuse* (the defaults: every prompt runs in segments cut
after each document, and a leave-one-out prompt starts from the full context's state after the
documents before the one it drops) and *without* (``reuse_prompts=False``: the same segments, every
prompt from the start). Printed: both times, the ratio (total, and the median over rows), the prompt
tokens the cache spared, that every result is identical (asserted), and the cache's peak bytes against
its setting (``--prompt-cache-tokens`` times the model's KV bytes per token).

**Crop** (``--crop-items``, the question before the design): WikiEval questions whose ``context_v2``
has two or more documents; the prompt without the last document shares the full prompt's tokens up to
a point. Its answer's log-probs from one pass over its prompt are compared with those from the full
prompt's KV state cropped to the shared tokens (``DynamicCache.crop``) and extended, and, for the
design kept, a pass in two segments cut at that point against the state of a two-segment full pass
cropped there. Reaches into the backend (its kernel and ``_hf_shared.prompt_state``): it measures an
internal choice.

**Segment sizes** (``--segment-sizes``): one pass over ``--segment-tokens`` ids in segments of 256,
128, 64 and 32 tokens, each time over the pass in one piece (median of ``--repeats``).

**Segments** (``--segment-rows``): WikiEval's first rows (``context_v1``, one document, so one cut at
the context's end), grounded answers, without reuse, scored with the request's splits and with them
dropped (the prompt pass in one piece, as before issue 27), alternating: the ratio of times (what the
segmented pass costs the no-cache path) and the largest change of a ConSens score and of a word's
log-likelihood (float noise).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from benchmarks.output import emit
from ragsense.consens import GroundingResult, GroundingScorer
from ragsense.data import load_halueval, load_wikieval
from ragsense.models import DEFAULT_PROMPT_CACHE_TOKENS, ContinuationScore, ScoreRequest, load_model


class _Unsplit:
    """A model that drops every request's splits: the prompt pass in one piece."""

    def __init__(self, model: Any) -> None:
        self._model = model

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    async def score(self, requests: Sequence[ScoreRequest]) -> list[ContinuationScore]:
        return list(await self._model.score([dataclasses.replace(r, splits=()) for r in requests]))


def _score(model: Any, rows: list[Any], attribution: bool) -> tuple[float, list[GroundingResult]]:
    started = time.perf_counter()
    results = asyncio.run(GroundingScorer(model).score(rows, attribution=attribution))
    assert all(isinstance(r, GroundingResult) for r in results), results
    return time.perf_counter() - started, [r for r in results if isinstance(r, GroundingResult)]


def _halueval_rows(data: str | None, start: int, count: int, distractors: int, position: int) -> list[Any]:
    items = load_halueval(data)
    rows = []
    for i in range(start, start + count):
        others = [items[(i + 1 + k) % len(items)].knowledge for k in range(distractors)]
        docs = [*others[:position], items[i].knowledge, *others[position:]]
        rows.append((items[i].question, docs, items[i].right_answer))
    return rows


def positions(base: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Prompt tokens the body runs for the attribution rows without reuse and with it, from the
    backend's own encoding and cuts and a prompt cache of the same budget holding empty states (no
    model pass): what a cost linear in prompt positions would give. Reaches into the backend."""
    import torch

    from ragsense.models._hf_prompt_cache import PromptStateCache

    rows = _halueval_rows(
        args.data_halueval, args.start, args.attribution_rows, args.distractors, args.position
    )
    scorer = GroundingScorer(base)
    without = reuse = 0
    for row in rows:
        store = PromptStateCache(args.prompt_cache_tokens)
        plan = scorer._plan(*row, True)
        for req in [plan.empty, plan.full] + [r for r, _, _ in plan.leave_one_out]:
            e = base._scorer.encode(req)
            ids, cuts = e.prompt_key
            without += len(ids)
            if store.get(ids, cuts) is not None:
                continue
            hit = store.get_prefix(ids, cuts)
            reuse += len(ids) - (hit[0] if hit else 0)
            layer = SimpleNamespace(
                keys=torch.zeros(1, 1, len(ids), 1), values=torch.zeros(1, 1, len(ids), 1)
            )
            store.put(ids, SimpleNamespace(layers=[layer]), torch.zeros(1, 1), cuts)
    return {
        "prompt_tokens_without": without,
        "prompt_tokens_reuse": reuse,
        "ratio": round(without / reuse, 3),
    }


def attribution(base: Any, args: argparse.Namespace) -> dict[str, Any]:
    rows = _halueval_rows(
        args.data_halueval, args.start, args.attribution_rows, args.distractors, args.position
    )
    _score(base.with_settings(reuse_prompts=False), rows[:1], False)  # warm-up
    totals = {"reuse": 0.0, "without": 0.0}
    ratios: list[float] = []
    peak_bytes = peak_tokens = spared = prefix_hits = loo_prompts = 0
    bytes_per_token = 0.0
    for n, row in enumerate(rows):
        reuse = base.with_settings(prompt_cache_tokens=args.prompt_cache_tokens)
        without = base.with_settings(reuse_prompts=False)
        order = (
            [("without", without), ("reuse", reuse)]
            if n % 2 == 0
            else [("reuse", reuse), ("without", without)]
        )
        seconds: dict[str, float] = {}
        results: dict[str, list[dict[str, Any]]] = {}
        for name, model in order:
            seconds[name], res = _score(model, [row], True)
            results[name] = [r.to_dict() for r in res]
            totals[name] += seconds[name]
        assert results["reuse"] == results["without"], f"row {n}: results differ with reuse"
        loo_prompts += len(results["reuse"][0]["attribution"] or [])
        ratios.append(seconds["without"] / seconds["reuse"])
        stats = reuse.prompt_cache_stats()
        assert stats is not None
        peak_bytes, peak_tokens = max(peak_bytes, stats.nbytes), max(peak_tokens, stats.tokens)
        spared += stats.prefix_tokens
        prefix_hits += stats.prefix_hits
        if stats.tokens:
            bytes_per_token = stats.nbytes / stats.tokens
        print(
            f"attribution row {n}: without {seconds['without']:.1f} s, reuse {seconds['reuse']:.1f} s, "
            f"ratio {ratios[-1]:.2f}, prefix tokens spared {stats.prefix_tokens}",
            file=sys.stderr,
        )
    return {
        "rows": len(rows),
        "halueval_rows": f"{args.start}-{args.start + len(rows) - 1}",
        "documents": args.distractors + 1,
        "leave_one_out_prompts": loo_prompts,
        "without_s": round(totals["without"], 1),
        "reuse_s": round(totals["reuse"], 1),
        "ratio_without_over_reuse": round(totals["without"] / totals["reuse"], 3),
        "ratio_per_row_min": round(min(ratios), 3),
        "ratio_per_row_median": round(statistics.median(ratios), 3),
        "ratio_per_row_max": round(max(ratios), 3),
        "prompt_position_ratio": positions(base, args)["ratio"],
        "results_identical": True,  # asserted per row
        "prefix_hits": prefix_hits,
        "prefix_tokens_spared": spared,
        "cache_budget_tokens": args.prompt_cache_tokens,
        "cache_max_tokens_held": peak_tokens,
        "cache_max_bytes_mb": round(peak_bytes / 2**20, 1),
        "cache_budget_bytes_mb": round(args.prompt_cache_tokens * bytes_per_token / 2**20, 1),
    }


def segments(base: Any, args: argparse.Namespace) -> dict[str, Any]:
    items = load_wikieval(args.data_wikieval)[: args.segment_rows]
    rows = [(it.question, it.context_v1, it.grounded_answer) for it in items]
    without = base.with_settings(reuse_prompts=False)
    variants = {"split": without, "whole": _Unsplit(without)}
    totals = {"split": 0.0, "whole": 0.0}
    ratios: list[float] = []
    max_consens = max_word = 0.0
    for n, row in enumerate(rows):
        order = ["whole", "split"] if n % 2 == 0 else ["split", "whole"]
        seconds: dict[str, float] = {}
        results: dict[str, GroundingResult] = {}
        for name in order:
            seconds[name], (results[name],) = _score(variants[name], [row], False)
            totals[name] += seconds[name]
        ratios.append(seconds["split"] / seconds["whole"])
        a, b = results["split"], results["whole"]
        max_consens = max(max_consens, abs(a.consens - b.consens))
        for wa, wb in zip(a.words, b.words, strict=True):
            max_word = max(max_word, abs(wa.nll_context - wb.nll_context))
        print(f"segments row {n}: split / whole {ratios[-1]:.3f}", file=sys.stderr)
    return {
        "rows": len(rows),
        "whole_s": round(totals["whole"], 1),
        "split_s": round(totals["split"], 1),
        "ratio_split_over_whole": round(totals["split"] / totals["whole"], 3),
        "ratio_per_row_median": round(statistics.median(ratios), 3),
        "max_abs_consens_change": max_consens,
        "max_abs_word_nll_change": max_word,
    }


def crop(base: Any, args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from ragsense.models._hf_shared import continuations_on_state, prompt_state

    kernel = base._scorer.kernel
    template = GroundingScorer(base).template
    items = [it for it in load_wikieval(args.data_wikieval) if len(it.context_v2) > 1][: args.crop_items]

    def ids(text: str) -> list[int]:
        return list(base.tokenizer(text)["input_ids"])

    def answer(cache: Any, last: Any, n: int, cont: list[int]) -> list[float]:
        return continuations_on_state(kernel, cache, last, n, [cont], pad_id=0, kv_tokens=8192, max_rows=1)[0]

    def extend(cache: Any, tokens: list[int]) -> tuple[Any, Any]:
        states, cache = kernel.forward(torch.tensor([tokens]), cache)
        return cache, states[0, -1:]

    same_crop = same_segmented = 0
    max_crop = max_segmented = 0.0
    with torch.inference_mode():
        for it in items:
            cont = template.continuation(it.grounded_answer)
            full, short = (template.render(it.question, docs) for docs in (it.context_v2, it.context_v2[:-1]))
            full_ids, short_ids = ids(full), ids(short + cont)
            n = len(ids(short))
            prompt, tail = short_ids[:n], short_ids[n:]
            j = next(i for i, (a, b) in enumerate(zip(full_ids, prompt, strict=False)) if a != b)
            fresh = answer(*prompt_state(kernel, prompt), n, tail)
            cache, _ = prompt_state(kernel, full_ids)
            cache.crop(j - len(full_ids))
            cropped = answer(*extend(cache, prompt[j:]), n, tail)
            segmented = answer(*prompt_state(kernel, prompt, [j]), n, tail)
            cache, _ = prompt_state(kernel, full_ids, [j])
            cache.crop(j - len(full_ids))
            from_segment = answer(*extend(cache, prompt[j:]), n, tail)
            same_crop += cropped == fresh
            same_segmented += from_segment == segmented
            max_crop = max(max_crop, *(abs(a - b) for a, b in zip(cropped, fresh, strict=True)))
            max_segmented = max(
                max_segmented, *(abs(a - b) for a, b in zip(from_segment, segmented, strict=True))
            )
    return {
        "items": len(items),
        "crop_identical_to_one_pass": same_crop,
        "crop_max_abs_logprob_change": max_crop,
        "segment_crop_identical_to_segmented_pass": same_segmented,
        "segment_crop_max_abs_logprob_change": max_segmented,
    }


def segment_sizes(base: Any, args: argparse.Namespace) -> dict[str, float]:
    """Time of one prompt pass over ``--segment-tokens`` token ids in segments of each size, over the
    pass in one piece (median of ``--repeats``, sizes interleaved): what chose ``MIN_SEGMENT``."""
    import torch

    from ragsense.models._hf_shared import prompt_state

    kernel = base._scorer.kernel
    n = args.segment_tokens
    ids = list(range(1000, 1000 + n))
    sizes = [n, 256, 128, 64, 32]
    times: dict[int, list[float]] = {size: [] for size in sizes}
    with torch.inference_mode():
        prompt_state(kernel, ids[:100])  # warm-up
        for _ in range(args.repeats):
            for size in sizes:
                started = time.perf_counter()
                prompt_state(kernel, ids, list(range(size, n, size)))
                times[size].append(time.perf_counter() - started)
    whole = statistics.median(times[n])
    return {f"{size}_tokens": round(statistics.median(times[size]) / whole, 3) for size in sizes}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--attribution-rows", type=int, default=8)
    parser.add_argument("--start", type=int, default=100, help="first HaluEval row (0-99: development)")
    parser.add_argument("--distractors", type=int, default=6)
    parser.add_argument("--position", type=int, default=2, help="the row's own passage among the documents")
    parser.add_argument("--segment-rows", type=int, default=10)
    parser.add_argument("--segment-sizes", action="store_true", help="time a pass cut into segments")
    parser.add_argument("--segment-tokens", type=int, default=800)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--crop-items", type=int, default=0, help="WikiEval questions for the crop check")
    parser.add_argument("--prompt-cache-tokens", type=int, default=DEFAULT_PROMPT_CACHE_TOKENS)
    parser.add_argument("--data-halueval", default=None)
    parser.add_argument("--data-wikieval", default=None)
    parser.add_argument(
        "--positions-only",
        action="store_true",
        help="print the attribution rows' prompt tokens without and with reuse (no timing) and stop",
    )
    parser.add_argument("--out", default=None, help="also write the JSON object to this file")
    args = parser.parse_args()
    base = load_model(args.model, **({"threads": args.threads} if args.threads else {}))
    figures: dict[str, Any] = {
        "model": base.info.name,
        "cpu": platform.processor() or platform.machine(),
        "threads": args.threads,
    }
    if args.positions_only:
        print(json.dumps(positions(base, args)))
        return
    if args.segment_sizes:
        figures["segment_sizes"] = segment_sizes(base, args)
    if args.crop_items:
        figures["crop"] = crop(base, args)
    if args.attribution_rows:
        figures["attribution"] = attribution(base, args)
    if args.segment_rows:
        figures["segments"] = segments(base, args)
    for key, value in figures.items():
        print(f"{key:>12}: {value}", file=sys.stderr)
    emit(figures, args.out)


if __name__ == "__main__":
    main()
