"""The model body on 1 and on all CPU threads, alone and beside a busy process.

    .venv/bin/python -m benchmarks.bench_threads --tokens 512
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.bench_threads --tokens 512

For each of: quiet, beside a busy-looping process at normal priority, beside one at nice 19, the body
of the bundled SmolLM2 over ``--tokens`` tokens of WikiEval text is timed (best of three) on 1 thread
and on every CPU. torch's OpenMP threads spin while they wait (``OMP_WAIT_POLICY`` changes that and
must be set before Python starts), so a team of threads that shares a core with another busy process
can run slower than one thread. The busy process is a plain Python loop, started and stopped by the
script. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

from ragsense.data import load_wikieval
from ragsense.models import load_model

BUSY = "import os, sys; os.nice(int(sys.argv[1]))\nwhile True: pass"


def _time_body(model: Any, ids: Any, threads: int) -> float:
    torch = model._torch
    torch.set_num_threads(threads)
    body = model._model.base_model
    with torch.inference_mode():
        body(input_ids=ids)
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            body(input_ids=ids)
            best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--data", default=None)
    args = parser.parse_args()
    model = load_model(args.model, device="cpu")
    torch = model._torch
    text = " ".join(" ".join(it.context_v1) for it in load_wikieval(args.data))
    ids = torch.tensor([model.tokenizer(text)["input_ids"][: args.tokens]])
    cpus = os.cpu_count() or 1
    figures: dict[str, Any] = {
        "model": model.info.name,
        "tokens": int(ids.shape[1]),
        "cpus": cpus,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "default"),
    }
    for label, nice in (("quiet", None), ("busy", 0), ("busy_nice19", 19)):
        busy = None if nice is None else subprocess.Popen([sys.executable, "-c", BUSY, str(nice)])
        try:
            time.sleep(0.5 if busy else 0)
            figures[label] = {str(n): round(_time_body(model, ids, n), 3) for n in sorted({1, cpus})}
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
        print(f"{label:>12}: {figures[label]}", file=sys.stderr, flush=True)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
