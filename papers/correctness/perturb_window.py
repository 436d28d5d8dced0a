"""How far the iterative perturbation's re-score window can shrink and still pick what exact mode picks.

    nice -n 5 .venv/bin/python -m papers.correctness.perturb_window --part train --contexts 40 \
        --out docs/results/speed/perturb_window_train.jsonl
    nice -n 5 .venv/bin/python -m papers.correctness.perturb_window --part eval --contexts 40 \
        --out docs/results/speed/perturb_window_eval.jsonl

The iterative, entropy-based perturbation (the paper's standard setting) re-ranks the context after
each replacement. Exact mode (``rescore_window=None``) re-scores every token to the right of the change;
a window of W re-scores only the next W tokens and keeps the earlier NLL further right. Each step is
one model call over about W + 1 tokens, and on a CPU a call's time grows with W, so the window sets most
of the iterative mode's cost. This script perturbs distinct SQuAD paragraphs (``--part train``: the
correctness experiment's training paragraphs, where a window is chosen; ``--part eval``: its evaluation
paragraphs, where the choice is reported) with each window, and with single shot as the trivial
baseline (no re-ranking at all), and compares each with exact mode: the
share of the K picked positions that exact mode also picks (mean over contexts with a 95% bootstrap
interval over contexts), the share of contexts whose perturbed text is identical, and the PM's body
calls and tokens per context. The per-context records go to ``--out``. Speeds on a busy machine are not
figures: time the chosen window with ``benchmarks/bench_correctness.py --default-only``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from ragsense.correctness import PerturbationSettings, Perturber
from ragsense.experiments import squad_split
from ragsense.models import load_model

WINDOWS: tuple[int | None, ...] = (None, 16, 8, 4)


def _contexts(part: str, n: int, data: str | None) -> list[str]:
    train, evaluation = squad_split(data, None, 0)
    seen: dict[str, None] = {}
    for sample in train if part == "train" else evaluation:
        seen.setdefault(sample.context, None)
    return list(seen)[:n]


def _interval(values: list[float], draws: int = 2000) -> tuple[float, float, float]:
    rng = random.Random(0)
    means = sorted(sum(rng.choices(values, k=len(values))) / len(values) for _ in range(draws))
    return sum(values) / len(values), means[int(0.025 * draws)], means[int(0.975 * draws) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--part", choices=("train", "eval"), default="train")
    parser.add_argument("--contexts", type=int, default=40)
    parser.add_argument("--k", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data", default=None)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    model: Any = load_model(args.model)
    contexts = _contexts(args.part, args.contexts, args.data)
    calls = {"n": 0, "tokens": 0}
    forward = model.forward_hidden

    def counted(ids: Any, *rest: Any, **kw: Any) -> Any:
        calls["n"] += 1
        calls["tokens"] += int(ids.numel())
        return forward(ids, *rest, **kw)

    model.forward_hidden = counted
    perturbers = {str(w): Perturber(model, PerturbationSettings(k=args.k, rescore_window=w)) for w in WINDOWS}
    # Without the catch-up pass to a pick right of the window: one short call per step.
    for w in (16, 4):
        perturbers[f"{w} no catch-up"] = Perturber(
            model, PerturbationSettings(k=args.k, rescore_window=w, catch_up=False)
        )
    # The trivial baseline: no re-ranking at all (all K picks from the first pass).
    perturbers["single_shot"] = Perturber(model, PerturbationSettings(k=args.k, how="single_shot"))
    records: list[dict[str, Any]] = []
    for i, context in enumerate(contexts):
        record: dict[str, Any] = {"context": i, "part": args.part, "windows": {}}
        for window, perturber in perturbers.items():
            calls.update(n=0, tokens=0)
            started = time.perf_counter()
            result = perturber.perturb(context)
            record["windows"][window] = {
                "picks": sorted(r.position for r in result.replacements),
                "text": result.text,
                "seconds": round(time.perf_counter() - started, 3),
                "body_calls": calls["n"],
                "body_tokens": calls["tokens"],
            }
            record["n_tokens"] = result.n_tokens
        records.append(record)
        print(f"context {i + 1}/{len(contexts)}: {record['n_tokens']} tokens", file=sys.stderr)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w") as f:
            for record in records:
                f.write(json.dumps(record) + "\n")
    summary: dict[str, Any] = {"model": args.model, "part": args.part, "contexts": len(records), "k": args.k}
    exact = [r["windows"]["None"] for r in records]
    for window in perturbers:
        rows = [r["windows"][window] for r in records]
        overlap = [len(set(a["picks"]) & set(b["picks"])) / args.k for a, b in zip(rows, exact, strict=True)]
        same = [float(a["text"] == b["text"]) for a, b in zip(rows, exact, strict=True)]
        mean, low, high = _interval(overlap)
        tokens = sum(r["body_tokens"] for r in rows) / sum(r["n_tokens"] for r in records)
        summary[window] = {
            "picks_shared_with_exact": [round(mean, 3), round(low, 3), round(high, 3)],
            "same_text_as_exact": round(sum(same) / len(same), 3),
            "body_calls_per_context": round(sum(r["body_calls"] for r in rows) / len(rows), 2),
            "body_tokens_per_context_token": round(tokens, 3),
            "seconds_per_context_busy_machine": round(sum(r["seconds"] for r in rows) / len(rows), 3),
        }
        print(f"{window}: {summary[window]}", file=sys.stderr)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
