"""Shared prompts: ConSens and VERA's ConSens signal with and without the shared prompt pass.

    .venv/bin/python -m benchmarks.bench_shared_prompt --items 10 --threads 2

Two workloads on the first ``--items`` WikiEval questions (``context_v1``), both on the bundled model:

* **Pairs:** the grounded and the ungrounded answer of each question scored by ConSens (one call),
  so each context is the prompt of two requests, as when two systems' answers are compared.
* **VERA signal:** each grounded answer split into statements (``split_statements``, as VERA does)
  and every statement scored by ConSens against the question and context, as VERA's default
  adherence signal does; its cost is printed as a ratio to one ConSens pass over the whole row.

Each is timed with the shared route on (the default) and off (the model option ``min_shared_prompt``
set out of reach, which is the code before it), both without the cross-call prompt cache, and against
the raw forward pass: the model body over the same unique token sequences the scorer would compute
without sharing. Ratios are time(raw body) / time(x): higher
is faster. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import resource
import sys
import time
from typing import Any

from ragsense.consens import GroundingScorer
from ragsense.data import load_wikieval
from ragsense.models import ScoreRequest, load_model
from ragsense.text import split_statements

Row = tuple[str, list[str], str]


def _timed_score(model: Any, rows: list[Row], *, shared: bool) -> tuple[float, list[Any]]:
    """Seconds and results of ConSens over ``rows`` in one call, with a fresh no-context cache. Both
    settings run on the model's weights without the cross-call prompt cache (each call reads its
    prompts); "off" sets ``min_shared_prompt`` out of reach."""
    variant = model.with_settings(prompt_cache_tokens=0, min_shared_prompt=32 if shared else 10**9)
    started = time.perf_counter()
    results = asyncio.run(GroundingScorer(variant).score(rows))
    return time.perf_counter() - started, results


def _raw_body(model: Any, rows: list[Row]) -> tuple[float, int]:
    """The body over the unique sequences ConSens scores without sharing, one row per pass."""
    torch = model._torch
    template = GroundingScorer(model).template
    wanted: dict[ScoreRequest, None] = {}
    for q, docs, a in rows:
        wanted[ScoreRequest(template.render_context(q, ""), template.continuation(a))] = None
        wanted[ScoreRequest(template.render(q, docs), template.continuation(a))] = None
    encoded = [model._tokenizer(r.prompt + r.continuation)["input_ids"] for r in wanted]
    started = time.perf_counter()
    with torch.inference_mode():
        for ids in encoded:
            tensor = torch.tensor([ids], dtype=torch.long)
            model._model.base_model(input_ids=tensor, attention_mask=torch.ones_like(tensor))
    return time.perf_counter() - started, sum(len(e) for e in encoded)


def _max_diff(a: list[Any], b: list[Any]) -> float:
    return max(abs(float(x.consens) - float(y.consens)) for x, y in zip(a, b, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--items", type=int, default=10)
    parser.add_argument("--data", default=None)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    options: dict[str, Any] = {"threads": args.threads} if args.threads else {}
    model = load_model(args.model, **options)
    items = load_wikieval(args.data)[: args.items]
    pairs: list[Row] = []
    for it in items:
        pairs += [
            (it.question, it.context_v1, it.grounded_answer),
            (it.question, it.context_v1, it.ungrounded_answer),
        ]
    whole: list[Row] = [(it.question, it.context_v1, it.grounded_answer) for it in items]
    statements: list[Row] = [
        (it.question, it.context_v1, s.text) for it in items for s in split_statements(it.grounded_answer)
    ]
    _timed_score(model, pairs[:2], shared=True)  # warm-up, outside the timings

    figures: dict[str, Any] = {
        "model": model.info.name,
        "cpu": platform.processor() or platform.machine(),
        "threads": model._torch.get_num_threads(),
        "items": len(items),
        "statements": len(statements),
    }
    body_pairs, tokens_pairs = _raw_body(model, pairs)
    on_s, on = _timed_score(model, pairs, shared=True)
    off_s, off = _timed_score(model, pairs, shared=False)
    figures |= {
        "pairs_tokens": tokens_pairs,
        "pairs_raw_body_s": round(body_pairs, 2),
        "pairs_shared_s": round(on_s, 2),
        "pairs_unshared_s": round(off_s, 2),
        "pairs_ratio_vs_raw_body_shared": round(body_pairs / on_s, 3),
        "pairs_ratio_vs_raw_body_unshared": round(body_pairs / off_s, 3),
        "pairs_max_consens_diff": _max_diff(on, off),
    }
    one_pass_s, _ = _timed_score(model, whole, shared=True)
    sig_on_s, sig_on = _timed_score(model, statements, shared=True)
    sig_off_s, sig_off = _timed_score(model, statements, shared=False)
    figures |= {
        "consens_one_pass_per_row_s": round(one_pass_s / len(whole), 3),
        "vera_signal_per_row_shared_s": round(sig_on_s / len(whole), 3),
        "vera_signal_per_row_unshared_s": round(sig_off_s / len(whole), 3),
        "vera_signal_cost_vs_one_pass_shared": round(sig_on_s / one_pass_s, 3),
        "vera_signal_cost_vs_one_pass_unshared": round(sig_off_s / one_pass_s, 3),
        "vera_signal_max_consens_diff": _max_diff(sig_on, sig_off),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    for key, value in figures.items():
        print(f"{key:>40}: {value}", file=sys.stderr)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
