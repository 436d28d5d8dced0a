"""What one short model call costs on this CPU: the body over M new tokens after a cached prefix.

    .venv/bin/python -m benchmarks.bench_call_cost --threads 2 --prefix 100 --repeats 5

The iterative perturbation (docs/correctness.md) makes K = 15 sequential calls of a few tokens each
(the changed token and the re-score window), so its cost is set by how a call's time grows with M, not
by the full pass. For M in 1 ... 150 new tokens after a ``--prefix``-token KV cache (random token ids:
the arithmetic does not depend on them), the script prints the median time over ``--repeats`` (the
lengths interleaved in each repeat, so that all see the same machine), the time per token, and the
time as a share of a full pass over ``--prefix`` + 50 tokens. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from ragsense.models import load_model

LENGTHS = (1, 2, 5, 9, 17, 33, 65, 150)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prefix", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    import torch
    from transformers import DynamicCache

    torch.set_num_threads(args.threads)
    model: Any = load_model(args.model)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(100, 20000, (1, args.prefix + max(LENGTHS)), generator=generator)
    full_length = args.prefix + 50
    times: dict[int, list[float]] = {m: [] for m in LENGTHS}
    full: list[float] = []
    with torch.inference_mode():
        _, cache = model.forward_hidden(ids[:, : args.prefix], DynamicCache())
        kv = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
        for _ in range(args.repeats):
            started = time.perf_counter()
            model.forward_hidden(ids[:, :full_length], DynamicCache())
            full.append(time.perf_counter() - started)
            for m in LENGTHS:
                prefix = DynamicCache(ddp_cache_data=[(k.clone(), v.clone()) for k, v in kv])
                started = time.perf_counter()
                model.forward_hidden(ids[:, args.prefix : args.prefix + m], prefix)
                times[m].append(time.perf_counter() - started)
    full_s = statistics.median(full)
    print(f"full pass over {full_length} tokens: {1000 * full_s:.1f} ms")
    rows = {}
    for m in LENGTHS:
        t = statistics.median(times[m])
        rows[m] = {
            "ms": round(1000 * t, 2),
            "per_token_ms": round(1000 * t / m, 2),
            "of_full": round(t / full_s, 3),
        }
        print(
            f"M = {m:>3}: {1000 * t:7.1f} ms, {1000 * t / m:6.2f} ms/token, {t / full_s:5.2f} of a full pass"
        )
    report = {"model": args.model, "threads": args.threads, "prefix": args.prefix}
    report |= {"full_pass_ms": round(1000 * full_s, 2), "full_tokens": full_length, "calls": rows}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
