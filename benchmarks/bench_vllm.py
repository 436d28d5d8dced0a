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
is not installed. ``--scores FILE`` saves the transformers backend's per-row ConSens and verdict;
``--reference FILE`` (such a file from a CPU float32 run: ``--device cpu --dtype float32 --no-raw``)
adds the agreement with it (mean and max difference, share of equal verdicts). The last line is one
JSON object.
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
from benchmarks.output import emit
from ragsense.consens import GroundingScorer
from ragsense.models import ScoreRequest, load_model


def _consens(model: Any, rows: list[tuple[str, list[str], str]]) -> tuple[list[dict[str, Any]], float]:
    """Per row ``{"consens", "verdict"}`` (None for a row that failed) and the seconds it took."""
    scorer = GroundingScorer(model)
    started = time.perf_counter()
    results = asyncio.run(scorer.score(rows))
    seconds = time.perf_counter() - started
    scores = [
        {"consens": None, "verdict": None}
        if isinstance(r, Exception)
        else {"consens": r.consens, "verdict": r.verdict}
        for r in results
    ]
    return scores, seconds


def _agreement(mine: list[dict[str, Any]], reference: list[dict[str, Any]]) -> dict[str, Any]:
    """ConSens mean and max absolute difference and the share of equal verdicts over the rows both
    scored (a --scores file of another run, e.g. CPU float32)."""
    pairs = [(m, r) for m, r in zip(mine, reference, strict=True) if None not in (m["consens"], r["consens"])]
    diffs = [abs(m["consens"] - r["consens"]) for m, r in pairs]
    same = sum(m["verdict"] == r["verdict"] for m, r in pairs)
    return {
        "rows": len(pairs),
        "consens_mean_abs_diff": sum(diffs) / len(diffs) if diffs else None,
        "consens_max_abs_diff": max(diffs, default=None),
        "same_verdict": same / len(pairs) if pairs else None,
    }


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
        if hasattr(model, "clear_prompt_cache"):
            model.clear_prompt_cache()  # as in the timed run: these rows' prompts not yet kept
        started = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            _consens(model, rows)
        wall = time.perf_counter() - started
        averages = prof.key_averages()
        table = averages.table(sort_by="self_cpu_time_total", row_limit=25)
        parts.append(f"== {name}, {len(rows)} rows, {wall:.2f} s under the profiler\n{table}")
        if any(a.device_time_total for a in averages):
            by_device = averages.table(sort_by="self_device_time_total", row_limit=15)
            parts.append(f"== {name}, by GPU time\n{by_device}")
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
        "--profile", type=Path, help="write torch.profiler's busiest operators on --profile-rows rows here"
    )
    parser.add_argument(
        "--profile-rows", type=int, default=6, help="the last N rows, profiled (default 6; 0: all)"
    )
    parser.add_argument("--data", default=None)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--scores", type=Path, help="write the transformers backend's per-row scores here")
    parser.add_argument(
        "--reference", type=Path, help="a --scores file of another run (CPU float32): report agreement"
    )
    parser.add_argument("--no-raw", action="store_true", help="skip the raw forward pass (a reference run)")
    parser.add_argument(
        "--also-batch",
        action="append",
        default=[],
        metavar="ROWSxTOKENS",
        help="also time the transformers backend with max_batch_size=ROWS and max_batch_tokens=TOKENS "
        "(same weights, its own prompt cache; repeatable), e.g. 64x131072",
    )
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
    for setting in args.also_batch:
        size, tokens = (int(x) for x in setting.lower().split("x"))
        models[f"transformers_batch_{size}x{tokens}"] = hf.with_settings(
            max_batch_size=size, max_batch_tokens=tokens
        )
    requests = _unique_requests(GroundingScorer(hf), rows)
    for model in models.values():
        _consens(model, rows[:2])  # warm-up (CUDA graphs, allocator)
    scores: dict[str, list[dict[str, Any]]] = {}
    seconds: dict[str, float] = {}
    for name, model in models.items():
        scores[name], seconds[name] = _consens(model, rows)
    if args.no_raw:
        raw_s, tokens = None, sum(len(hf.tokenizer(r.prompt + r.continuation)["input_ids"]) for r in requests)
    else:
        raw_s, tokens = _raw_forward(hf, requests, args.batch)
    if args.profile:
        _profile(models, rows[-args.profile_rows :] if args.profile_rows else rows, args.profile)
    report: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
        "device": args.device,
        "model": args.model,
        "dtype": args.dtype,
        "backends": sorted(models),
        "rows": len(rows),
        "scored_tokens": tokens,
        "rows_per_s": {name: len(rows) / s for name, s in seconds.items()},
        "tokens_per_s": {
            **{name: tokens / s for name, s in seconds.items()},
            "raw_forward": None if raw_s is None else tokens / raw_s,
        },
        "ratio_to_raw_forward": {name: None if raw_s is None else raw_s / s for name, s in seconds.items()},
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
        report["agreement"] = {
            **_agreement(scores["vllm"], scores["transformers"]),
            "token_logprob_max_abs_diff": max(token_diffs),
            "token_logprob_mean_abs_diff": sum(token_diffs) / len(token_diffs),
        }
    if args.scores:
        args.scores.parent.mkdir(parents=True, exist_ok=True)
        meta = {"device": args.device, "dtype": args.dtype, "model": args.model, "items": args.items}
        args.scores.write_text(json.dumps({**meta, "rows": scores["transformers"]}) + "\n")
    if args.reference:
        reference = json.loads(args.reference.read_text())
        report["agreement_with_reference"] = {
            "reference": {k: reference.get(k) for k in ("device", "dtype", "model", "items")},
            **_agreement(scores["transformers"], reference["rows"][: len(rows)]),
        }
        for name in models:
            if name.startswith("transformers_batch_"):
                report.setdefault("agreement_of_settings_with_reference", {})[name] = _agreement(
                    scores[name], reference["rows"][: len(rows)]
                )
    for key in (
        "agreement",
        "agreement_with_reference",
        "rows_per_s",
        "tokens_per_s",
        "ratio_to_raw_forward",
    ):
        if key in report:
            print(f"{key}: {report[key]}", file=sys.stderr)
    emit(report, args.out)


if __name__ == "__main__":
    main()
