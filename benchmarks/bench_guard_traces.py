"""A trace flood against ``ragsense guard``: does ``/v1/check`` keep its latency while exporters flood
``POST /v1/traces``?

    .venv/bin/python -m benchmarks.bench_guard_traces                      # the fake model (default)
    .venv/bin/python -m benchmarks.bench_guard_traces --export rag          # exports of RAG traces

Starts the guard in a process of its own on 127.0.0.1 (no keys), then runs two phases of
``--seconds`` each, with the normal clients of ``benchmarks.bench_guard_hostile`` (``--clients``,
one row a request, ``--think-ms`` between requests):

1. **quiet**: the normal clients alone;
2. **flood**: the same normal clients while ``--flooders`` clients (2), in a process of their own,
   loop OTLP protobuf exports back to back: ``--export spans`` (default), 100,000 tiny spans in one
   900 kB body (more than any export may hold: refused with 413 after the guard's hostile delay), or
   ``--export rag``, ``--rag-traces`` whole RAG traces a body (accepted up to ``--max-export-rows``,
   scored through the micro-batcher beside ``/v1/check``; 429 while the backlog is full).

It prints each phase's normal-client latency (p50, p95, p99) and statuses, what the flooders got, the
ratio of p95 under the flood to quiet (target: at most 1.5) and the guard's CPU seconds in each
phase, and ends with one JSON line (``--output`` also writes it). Bounded: fixed clients, a fixed time
per phase, the server stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from benchmarks.bench_guard_hostile import ROW, _free_port, _phase, _wait_ready
from benchmarks.output import emit

PROTOBUF = {"content-type": "application/x-protobuf"}


def spans_export(spans: int) -> bytes:
    """``spans`` spans of 9 bytes each (a two-byte trace id, a one-byte span id): one body."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for i in range(spans):
        span = scope.spans.add()
        span.trace_id, span.span_id = (i % 65_536).to_bytes(2, "big"), b"\x05"
    return bytes(request.SerializeToString())


def rag_export(traces: int) -> bytes:
    """``traces`` RAG traces (a RETRIEVER root span and an LLM child each, ROW's texts): one body."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for i in range(traces):
        trace_id = i.to_bytes(16, "big")
        retriever, llm = scope.spans.add(), scope.spans.add()
        retriever.trace_id, retriever.span_id, retriever.name = trace_id, b"r" * 8, "retrieve"
        llm.trace_id, llm.span_id, llm.parent_span_id, llm.name = trace_id, b"l" * 8, b"r" * 8, "llm"
        for span, pairs in (
            (
                retriever,
                {
                    "openinference.span.kind": "RETRIEVER",
                    "input.value": ROW["question"],
                    "retrieval.documents.0.document.content": ROW["contexts"][0],
                },
            ),
            (llm, {"openinference.span.kind": "LLM", "output.value": ROW["answer"]}),
        ):
            for key, value in pairs.items():
                attribute = span.attributes.add()
                attribute.key, attribute.value.string_value = key, value
    return bytes(request.SerializeToString())


async def _flooder(url: str, body: bytes, until: float, outcomes: Counter[str]) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        while time.monotonic() < until:
            try:
                reply = await client.post("/v1/traces", content=body, headers=PROTOBUF)
                outcomes[str(reply.status_code)] += 1
            except httpx.TransportError as exc:
                outcomes[type(exc).__name__] += 1


async def _flood(url: str, args: argparse.Namespace, until: float) -> dict[str, Any]:
    body = spans_export(args.spans) if args.export == "spans" else rag_export(args.rag_traces)
    outcomes: Counter[str] = Counter()
    await asyncio.gather(*(_flooder(url, body, until, outcomes) for _ in range(args.flooders)))
    return {"exports": dict(sorted(outcomes.items())), "body_bytes": len(body)}


def _cpu_seconds(pid: int) -> float:
    """The user + system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _flooded_phase(url: str, port: int, args: argparse.Namespace) -> dict[str, Any]:
    """The normal clients measured while the flooders, in a process of their own, are at work (so
    that building and sending the bodies does not slow the normal clients' event loop)."""
    seconds = args.warmup + args.seconds + 1
    command = [sys.executable, "-m", "benchmarks.bench_guard_traces", "--flood-only", str(seconds)]
    command += ["--port", str(port), "--flooders", str(args.flooders), "--export", args.export]
    command += ["--spans", str(args.spans), "--rag-traces", str(args.rag_traces)]
    flooders = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    time.sleep(args.warmup)
    result = asyncio.run(_phase(url, args))
    out, _ = flooders.communicate(timeout=seconds + 120)
    result.update(json.loads(out))
    return result


def _start_server(args: argparse.Namespace, port: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "ragsense", "guard", "--model", args.model, "--port", str(port)]
    command += ["--log-level", "warning", "--hostile-delay", str(args.hostile_delay)]
    if args.export == "rag":  # (left out otherwise, so the script also runs a guard without the flag)
        command += ["--max-export-rows", str(args.max_export_rows)]
    if args.threads is not None:
        command += ["--threads", str(args.threads)]
    return subprocess.Popen(command, stderr=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="fake", help="fake (default) or the bundled smollm2-135m")
    parser.add_argument("--threads", type=int, default=None, help="the guard's torch threads")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per phase")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of flood before measuring")
    parser.add_argument("--clients", type=int, default=16, help="normal clients")
    parser.add_argument("--think-ms", type=float, default=100.0, help="a normal client's pause")
    parser.add_argument("--flooders", type=int, default=2, help="clients looping trace exports")
    parser.add_argument("--export", choices=("spans", "rag"), default="spans", help="what they send")
    parser.add_argument("--spans", type=int, default=100_000, help="spans an export holds (spans)")
    parser.add_argument("--rag-traces", type=int, default=300, help="RAG traces an export holds (rag)")
    parser.add_argument("--max-export-rows", type=int, default=256, help="the guard's --max-export-rows")
    parser.add_argument("--hostile-delay", type=float, default=1.0, help="the guard's --hostile-delay")
    parser.add_argument("--output", type=Path, help="also write the JSON result here")
    parser.add_argument("--flood-only", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.flood_only is not None:  # the flooders' process (see _flooded_phase)
        until = time.monotonic() + args.flood_only
        print(json.dumps(asyncio.run(_flood(f"http://127.0.0.1:{args.port}", args, until))))
        return 0
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    load_before = os.getloadavg()  # the machine may be shared: its load is part of the result
    server = _start_server(args, port)
    try:
        _wait_ready(url, server, 300)
        cpu = _cpu_seconds(server.pid)
        quiet = asyncio.run(_phase(url, args))
        quiet["guard_cpu_s"] = round(_cpu_seconds(server.pid) - cpu, 2)
        cpu = _cpu_seconds(server.pid)
        flood = _flooded_phase(url, port, args)
        flood["guard_cpu_s"] = round(_cpu_seconds(server.pid) - cpu, 2)
        health = httpx.get(url + "/health", timeout=5).status_code
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(120)
        except subprocess.TimeoutExpired:
            server.kill()
    ratio = None
    if quiet["p95_ms"] and flood["p95_ms"]:
        ratio = round(flood["p95_ms"] / quiet["p95_ms"], 2)
    result = {
        "benchmark": "bench_guard_traces",
        "date": time.strftime("%Y-%m-%d"),
        "model": args.model,
        "settings": {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items()
            if k not in ("flood_only", "port")
        },
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_1_5_15_before": [round(x, 2) for x in load_before],
            "load_average_1_5_15_after": [round(x, 2) for x in os.getloadavg()],
        },
        "quiet": quiet,
        "flood": flood,
        "p95_ratio": ratio,
        "target_ratio": 1.5,
        "health_after": health,
    }
    for name, phase in (("quiet", quiet), ("flood", flood)):
        print(
            f"{name:>6}: {phase['requests']} requests {phase['statuses']}  p50 {phase['p50_ms']} ms  "
            f"p95 {phase['p95_ms']} ms  p99 {phase['p99_ms']} ms  guard CPU {phase['guard_cpu_s']} s",
            file=sys.stderr,
        )
    print(f"exports: {flood['exports']} ({flood['body_bytes']} bytes each)", file=sys.stderr)
    print(f"p95 under the flood / quiet: {ratio} (target <= 1.5)", file=sys.stderr)
    emit(result, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
