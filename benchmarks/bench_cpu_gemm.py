"""How close the model body runs to this CPU's fp32 matrix-multiply rate, for the model's own shapes.

    .venv/bin/python -m benchmarks.bench_cpu_gemm --model smollm2-135m --tokens 512 --threads 2

For every linear layer shape of the model (``[tokens, in] x [in, out]``), the best of five
``torch.matmul`` timings gives the fp32 GEMM rate (GFLOP/s) this machine reaches for it. The body's
linear layers need ``2 x tokens x parameters`` floating-point operations; run at the GEMM rates just
measured they would take ``gemm_bound_s``. The body itself (one pass over ``--tokens`` tokens of real
text, best of three) takes ``body_s``; ``body_vs_gemm_bound`` is their ratio (1.0: the body costs no
more than its matrix products; the rest is attention, norms, activations and framework overhead).
The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

from ragsense.data import load_wikieval
from ragsense.models import load_model


def _best(fn: Any, repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--data", default=None)
    args = parser.parse_args()
    options: dict[str, Any] = {"device": "cpu"}
    if args.threads:
        options["threads"] = args.threads
    model = load_model(args.model, **options)
    torch = model._torch
    body = model._model.base_model
    text = " ".join(" ".join(it.context_v1) for it in load_wikieval(args.data))
    ids = model._tokenizer(text)["input_ids"][: args.tokens]
    if len(ids) < args.tokens:
        raise SystemExit(f"only {len(ids)} tokens of WikiEval text; ask for fewer --tokens")
    n = len(ids)

    shapes: dict[tuple[int, int], int] = {}  # (in, out) -> number of layers with that shape
    params = 0
    for module in body.modules():
        if isinstance(module, torch.nn.Linear):
            key = (module.in_features, module.out_features)
            shapes[key] = shapes.get(key, 0) + 1
            params += module.in_features * module.out_features
    rates = {}
    bound_s = 0.0
    with torch.inference_mode():
        for (k, m), count in sorted(shapes.items()):
            x = torch.randn(n, k)
            w = torch.randn(m, k)
            seconds = _best(lambda x=x, w=w: torch.matmul(x, w.T), 5)
            rates[f"{n}x{k}x{m}"] = round(2 * n * k * m / seconds / 1e9, 1)
            bound_s += count * seconds
        tensor = torch.tensor([ids], dtype=torch.long)
        mask = torch.ones_like(tensor)
        body_s = _best(lambda: body(input_ids=tensor, attention_mask=mask), 3)
    figures = {
        "model": model.info.name,
        "cpu": _cpu_name(),
        "threads": torch.get_num_threads(),
        "tokens": n,
        "gemm_gflops_by_shape": rates,
        "linear_params": params,
        "gemm_bound_s": round(bound_s, 3),
        "body_s": round(body_s, 3),
        "body_effective_linear_gflops": round(2 * n * params / body_s / 1e9, 1),
        "body_vs_gemm_bound": round(bound_s / body_s, 3),
    }
    for key, value in figures.items():
        print(f"{key:>30}: {value}", file=sys.stderr)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
