"""Where the guard's resident memory goes under a long run of varying micro-batches (a diagnostic).

Runs the guard's check in process (no HTTP: the same :class:`ragsense.guard.Guard` the server's model
worker calls) over WikiEval rows in micro-batches of random size (fixed seed), for ``--minutes``, and
prints the process's RSS after each batch, Python's own heap (``tracemalloc``) and glibc's arena
statistics (``mallinfo2``), so a growth can be told apart: Python objects kept alive (a leak in ragsense),
or native memory freed but not returned to the system (allocator fragmentation under varying tensor
shapes). ``--trim`` calls ``malloc_trim(0)`` after each batch, as the guard's worker does by default.

    nice -n 5 .venv/bin/python -m benchmarks.diag_guard_memory --minutes 10 --threads 1 --trim off
    nice -n 5 .venv/bin/python -m benchmarks.diag_guard_memory --minutes 10 --threads 1 --trim on
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import random
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from ragsense.data import load_wikieval
from ragsense.guard import CheckRow, Guard, release_free_memory

ROOT = Path(__file__).resolve().parents[1]


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _mallinfo() -> dict[str, float]:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    mb = 1024 * 1024
    return {
        "arena_mb": info.arena / mb,
        "in_use_mb": info.uordblks / mb,
        "free_mb": info.fordblks / mb,
        "mmap_mb": info.hblkhd / mb,
    }


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _slope(points: list[tuple[float, float]]) -> float:
    n = len(points)
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    var = sum((t - mx) ** 2 for t, _ in points)
    return 0.0 if var == 0 else sum((t - mx) * (v - my) for t, v in points) / var


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    torch.set_num_threads(args.threads)
    rows = []
    for item in load_wikieval(args.data):
        for answer in (item.grounded_answer, item.ungrounded_answer):
            rows.append(CheckRow(question=item.question, contexts=list(item.context_v1), answer=answer))
    guard = Guard(args.model)
    await guard.setup()
    rng = random.Random(0)
    # Warm-up: every row once, so the no-context cache is full and one-off allocations are made.
    for start in range(0, len(rows), 8):
        await guard.acheck(rows[start : start + 8])
        if args.trim == "on":
            release_free_memory()
    tracemalloc.start(25)
    first = tracemalloc.take_snapshot()
    started = time.monotonic()
    samples: list[dict[str, float]] = []
    batches = 0
    while time.monotonic() - started < 60 * args.minutes:
        batch = rng.sample(rows, rng.randint(1, args.max_batch))
        await guard.acheck(batch, attribution=rng.random() < 0.25)
        if args.trim == "on":
            release_free_memory()
        batches += 1
        samples.append(
            {
                "t_min": (time.monotonic() - started) / 60,
                "rss_mb": _rss_mb(),
                "py_mb": tracemalloc.get_traced_memory()[0] / 2**20,
                **_mallinfo(),
            }
        )
        print(json.dumps({k: round(v, 2) for k, v in samples[-1].items()}), file=sys.stderr)
    last = tracemalloc.take_snapshot()
    top = [str(stat) for stat in last.compare_to(first, "lineno")[:8]]
    half = [s for s in samples if s["t_min"] >= args.minutes / 2]
    return {
        "model": args.model,
        "threads": args.threads,
        "trim": args.trim,
        "minutes": args.minutes,
        "batches": batches,
        "rss_first_mb": round(samples[0]["rss_mb"], 1),
        "rss_last_mb": round(samples[-1]["rss_mb"], 1),
        "rss_peak_mb": round(max(s["rss_mb"] for s in samples), 1),
        "rss_slope_mb_per_min": round(_slope([(s["t_min"], s["rss_mb"]) for s in samples]), 3),
        "rss_slope_second_half_mb_per_min": round(_slope([(s["t_min"], s["rss_mb"]) for s in half]), 3),
        "python_heap_slope_mb_per_min": round(_slope([(s["t_min"], s["py_mb"]) for s in samples]), 3),
        "malloc_in_use_slope_mb_per_min": round(_slope([(s["t_min"], s["in_use_mb"]) for s in samples]), 3),
        "malloc_free_last_mb": round(samples[-1]["free_mb"], 1),
        "tracemalloc_top_growth": top,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--data", default=str(ROOT / ".." / "shared" / "data" / "wikieval"))
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-batch", type=int, default=16)
    parser.add_argument("--trim", choices=("on", "off"), default="off")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report = asyncio.run(_run(args))
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
