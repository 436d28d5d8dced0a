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
backend's own error. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

# A sibling module (scripts run with python -m from the repo root): rows as bench_consens builds them.
from benchmarks.bench_consens import _rows, _unique_requests
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

    tok = hf.tokenizer
    seqs = [tok(r.prompt + r.continuation)["input_ids"] for r in requests]
    seqs.sort(key=len, reverse=True)
    torch.cuda.synchronize()
    started = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(seqs), batch):
            group = seqs[i : i + batch]
            width = max(len(s) for s in group)
            ids = torch.zeros((len(group), width), dtype=torch.long, device="cuda")
            mask = torch.zeros_like(ids)
            for row, s in enumerate(group):
                ids[row, : len(s)] = torch.tensor(s, device="cuda")
                mask[row, : len(s)] = 1
            states, _ = hf.forward_hidden(ids)  # body
            hf.lm_head(states[mask.bool()])  # head on every real position
    torch.cuda.synchronize()
    return time.perf_counter() - started, sum(len(s) for s in seqs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    parser.add_argument("--batch", type=int, default=32, help="rows per raw forward batch")
    parser.add_argument("--data", default=None)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import torch

    rows = _rows(args.data, args.items)
    vllm_model = load_model(f"vllm:{args.model}", dtype=args.dtype)  # the no-GPU error comes from here
    hf = load_model(args.model, device="cuda", dtype=args.dtype)
    requests = _unique_requests(GroundingScorer(hf), rows)
    _consens(vllm_model, rows[:2])  # warm-up (CUDA graphs, allocator)
    _consens(hf, rows[:2])
    vllm_scores, vllm_s = _consens(vllm_model, rows)
    hf_scores, hf_s = _consens(hf, rows)
    vllm_lp = asyncio.run(vllm_model.score(requests))  # type: ignore[attr-defined]
    hf_lp = asyncio.run(hf.score(requests))  # type: ignore[attr-defined]
    token_diffs = [
        abs(a - b)
        for v, h in zip(vllm_lp, hf_lp, strict=True)
        for a, b in zip(v.logprobs, h.logprobs, strict=True)
    ]
    score_diffs = [abs(a - b) for a, b in zip(vllm_scores, hf_scores, strict=True)]
    raw_s, tokens = _raw_forward(hf, requests, args.batch)
    report = {
        "gpu": torch.cuda.get_device_name(0),
        "model": args.model,
        "dtype": args.dtype,
        "rows": len(rows),
        "scored_tokens": tokens,
        "agreement": {
            "consens_max_abs_diff": max(score_diffs),
            "consens_mean_abs_diff": sum(score_diffs) / len(score_diffs),
            "token_logprob_max_abs_diff": max(token_diffs),
            "token_logprob_mean_abs_diff": sum(token_diffs) / len(token_diffs),
        },
        "rows_per_s": {"vllm": len(rows) / vllm_s, "transformers": len(rows) / hf_s},
        "tokens_per_s": {
            "vllm": tokens / vllm_s,
            "transformers": tokens / hf_s,
            "raw_forward": tokens / raw_s,
        },
        "ratio_to_raw_forward": {"vllm": raw_s / vllm_s, "transformers": raw_s / hf_s},
        "command": " ".join(sys.argv),
    }
    for key in ("agreement", "rows_per_s", "tokens_per_s", "ratio_to_raw_forward"):
        print(f"{key}: {report[key]}", file=sys.stderr)
    text = json.dumps(report)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
