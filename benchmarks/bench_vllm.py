"""The vLLM backend on a GPU: ConSens scores against the transformers backend, and throughput against the
raw forward pass of the same model over the same tokens (run on a GPU machine; not a timed test).

    python -m benchmarks.bench_vllm --model smollm2-135m --items 50 --dtype bfloat16 --out vllm.json

Rows: WikiEval items, each answer (grounded and ungrounded) against ``context_v1``. It prints, with the
GPU's name: (1) agreement: the largest and mean absolute difference of the ConSens score and of the
per-token log-probs between ``vllm:MODEL`` and the transformers backend on CUDA, both in ``--dtype``
(and float32 on both for the tightest comparison with ``--dtype float32``); (2) throughput: ConSens rows/s
and scored tokens/s through each backend, and the raw forward pass (the transformers model's body + head
over exactly the token sequences ConSens scores, batched, no log-softmax) as the limit, with each rate's
ratio to it. Needs ``pip install 'ragsense[vllm]'`` and a CUDA GPU; without one it stops with the
backend's own error; ``--backends transformers`` measures (2) for the transformers backend alone, where vLLM
is not installed. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

# A sibling module (scripts run with python -m from the repo root): rows as bench_consens builds them.
from benchmarks.bench_consens import _rows, _unique_requests
from benchmarks.output import emit
from ragsense.consens import GroundingScorer
from ragsense.models import ScoreRequest, load_model


def _consens(model: Any, rows: list[tuple[str, list[str], str]]) -> tuple[list[float], float]:
    scorer = GroundingScorer(model)
    started = time.perf_counter()
    results = asyncio.run(scorer.score(rows))
    scores = [r.consens if not isinstance(r, Exception) else float("nan") for r in results]
    return scores, time.perf_counter() - started


def _raw_forward(hf: Any, requests: list[ScoreRequest], batch: int) -> tuple[float, int]:
    import torch

    device = hf.torch_device
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    tok = hf.tokenizer
    seqs = [tok(r.prompt + r.continuation)["input_ids"] for r in requests]
    seqs.sort(key=len, reverse=True)
    sync()
    started = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(seqs), batch):
            group = seqs[i : i + batch]
            width = max(len(s) for s in group)
            ids = torch.zeros((len(group), width), dtype=torch.long, device=device)
            mask = torch.zeros_like(ids)
            for row, s in enumerate(group):
                ids[row, : len(s)] = torch.tensor(s, device=device)
                mask[row, : len(s)] = 1
            states, _ = hf.forward_hidden(ids)  # body
            hf.lm_head(states[mask.bool()])  # head on every real position
    sync()
    return time.perf_counter() - started, sum(len(s) for s in seqs)


def _profile(models: dict[str, Any], rows: list[tuple[str, list[str], str]], path: Path) -> None:
    """torch.profiler's operators by their own CPU time, per model, over ConSens on ``rows``."""
    from torch.profiler import ProfilerActivity, profile

    parts = []
    for name, model in models.items():
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            _consens(model, rows)
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25)
        parts.append(f"== {name}, {len(rows)} rows\n{table}")
    path.write_text("\n".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    parser.add_argument("--batch", type=int, default=32, help="rows per raw forward batch")
    parser.add_argument(
        "--backends",
        default="vllm,transformers",
        help="'transformers' alone measures the transformers backend against the raw forward pass "
        "where vLLM is not installed (default: vllm,transformers)",
    )
    parser.add_argument(
        "--device", default="cuda", help="the transformers backend's device (cpu: a check of the script)"
    )
    parser.add_argument(
        "--compare-cudnn",
        action="store_true",
        help="also time the transformers backend with cuDNN attention allowed (cudnn_attention=True)",
    )
    parser.add_argument(
        "--profile", type=Path, help="write torch.profiler's busiest operators on 6 rows here"
    )
    parser.add_argument("--data", default=None)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    backends = {b.strip() for b in args.backends.split(",") if b.strip()}
    if "transformers" not in backends or not backends <= {"vllm", "transformers"}:
        parser.error("--backends: 'vllm,transformers' or 'transformers'")

    import torch

    rows = _rows(args.data, args.items)
    models: dict[str, Any] = {}
    if "vllm" in backends:
        # The no-GPU error comes from here.
        models["vllm"] = load_model(f"vllm:{args.model}", dtype=args.dtype)
    hf = models["transformers"] = load_model(args.model, device=args.device, dtype=args.dtype)
    if args.compare_cudnn:
        models["transformers_cudnn_attention"] = hf.with_settings(cudnn_attention=True)
    requests = _unique_requests(GroundingScorer(hf), rows)
    for model in models.values():
        _consens(model, rows[:2])  # warm-up (CUDA graphs, allocator)
    scores: dict[str, list[float]] = {}
    seconds: dict[str, float] = {}
    for name, model in models.items():
        scores[name], seconds[name] = _consens(model, rows)
    raw_s, tokens = _raw_forward(hf, requests, args.batch)
    if args.profile:
        _profile(models, rows[-6:], args.profile)
    report: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
        "device": args.device,
        "model": args.model,
        "dtype": args.dtype,
        "backends": sorted(models),
        "rows": len(rows),
        "scored_tokens": tokens,
        "rows_per_s": {name: len(rows) / s for name, s in seconds.items()},
        "tokens_per_s": {**{name: tokens / s for name, s in seconds.items()}, "raw_forward": tokens / raw_s},
        "ratio_to_raw_forward": {name: raw_s / s for name, s in seconds.items()},
        "command": " ".join(sys.argv),
    }
    if "vllm" in models:
        vllm_lp = asyncio.run(models["vllm"].score(requests))
        hf_lp = asyncio.run(hf.score(requests))
        token_diffs = [
            abs(a - b)
            for v, h in zip(vllm_lp, hf_lp, strict=True)
            for a, b in zip(v.logprobs, h.logprobs, strict=True)
        ]
        score_diffs = [abs(a - b) for a, b in zip(scores["vllm"], scores["transformers"], strict=True)]
        report["agreement"] = {
            "consens_max_abs_diff": max(score_diffs),
            "consens_mean_abs_diff": sum(score_diffs) / len(score_diffs),
            "token_logprob_max_abs_diff": max(token_diffs),
            "token_logprob_mean_abs_diff": sum(token_diffs) / len(token_diffs),
        }
    for key in ("agreement", "rows_per_s", "tokens_per_s", "ratio_to_raw_forward"):
        if key in report:
            print(f"{key}: {report[key]}", file=sys.stderr)
    emit(report, args.out)


if __name__ == "__main__":
    main()
