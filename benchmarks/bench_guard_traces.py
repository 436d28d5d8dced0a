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
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from benchmarks.bench_guard_hostile import ROW, beside, measure
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


def _flooded_phase(url: str, port: int, args: argparse.Namespace) -> dict[str, Any]:
    """The normal clients measured while the flooders, in a process of their own, are at work (so
    that building and sending the bodies does not slow the normal clients' event loop)."""
    seconds = args.warmup + args.seconds + 1
    command = [sys.executable, "-m", "benchmarks.bench_guard_traces", "--flood-only", str(seconds)]
    command += ["--port", str(port), "--flooders", str(args.flooders), "--export", args.export]
    command += ["--spans", str(args.spans), "--rag-traces", str(args.rag_traces)]
    return beside(command, seconds, url, args)


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
    result = measure(args, _start_server, _flooded_phase, "bench_guard_traces", "flood")
    flood = result["flood"]
    print(f"exports: {flood['exports']} ({flood['body_bytes']} bytes each)", file=sys.stderr)
    print(f"p95 under the flood / quiet: {result['p95_ratio']} (target <= 1.5)", file=sys.stderr)
    emit(result, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
