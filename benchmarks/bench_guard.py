"""Load, soak and fault benchmark of ``ragsense guard`` on 127.0.0.1 (a benchmark, not a timed test).

    nice -n 5 .venv/bin/python -m benchmarks.bench_guard --soak-minutes 10

What it does, bounded in count and time (docs/guard.md reports a run):

1. **Offline baseline**: the same WikiEval rows scored by ``ragsense.evaluate`` with ConSens (what
   ``ragsense evaluate --metrics consens`` runs), in a fresh process with the same torch threads, timed
   after the model is loaded and warmed. Run before and after the load test; the ratio uses their mean.
2. **Load**: the guard (``ragsense guard``, one process, one model worker) and a bounded async client
   sending one row per request with 1, 4 and 16 concurrent clients: latency p50/p95/p99, rows a second,
   the ratio to offline, and every request id answered exactly once.
3. **Disconnect**: during a 16-client burst one more client gives up mid-request; every other request
   must still get its 200 and the server must go on serving.
4. **Soak**: 16 clients for ``--soak-minutes``; the server's resident memory sampled every 5 s, and
   its ``ragsense_guard_resident_bytes_after_batch`` gauge (RSS right after each batch, without the
   in-flight batch's activations: the floor a leak would raise).
5. **Fault**: SIGTERM under 16-client load; every request the server logged as accepted must have got a
   200, and the server must exit 0.

Rows are WikiEval's (``--data``, default ``../shared/data/wikieval``; read there, never copied): each
question with ``context_v1`` and its grounded or ungrounded answer. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from ragsense.data import load_wikieval

ROOT = Path(__file__).resolve().parents[1]


def _rows(data: str) -> list[dict[str, Any]]:
    rows = []
    for item in load_wikieval(data):
        for kind, answer in (("g", item.grounded_answer), ("u", item.ungrounded_answer)):
            rows.append(
                {"question": item.question, "contexts": item.context_v1, "answer": answer, "kind": kind}
            )
    return rows


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


# ------------------------------------------------------------------------------------------ offline

_OFFLINE = """
import json, sys, time
from ragsense import evaluate
from ragsense.consens import ConSens
from ragsense.models import ModelPool, load_model
rows = json.load(open(sys.argv[1]))
model = load_model(sys.argv[2], threads=int(sys.argv[3]), device=sys.argv[4], dtype=sys.argv[5])
evaluate(rows[:1], [ConSens(model=model)], pool=ModelPool(), progress=False)  # warm-up
started = time.perf_counter()
run = evaluate(rows, [ConSens(model=model)], pool=ModelPool(), progress=False, chunk_size=16)
seconds = time.perf_counter() - started
assert not run.has_errors
print(json.dumps({"rows": len(rows), "seconds": seconds, "rows_per_s": len(rows) / seconds}))
"""


def _env() -> dict[str, str]:
    """This tree's source first, then the caller's own path (a GPU machine's carried packages)."""
    paths = [str(ROOT / "src"), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYTHONUNBUFFERED": "1"}


def offline(
    rows: list[dict[str, Any]], model: str, threads: int, workdir: Path, device: str, dtype: str
) -> dict[str, Any]:
    path = workdir / "offline_rows.json"
    path.write_text(json.dumps([{k: r[k] for k in ("question", "contexts", "answer")} for r in rows]))
    out = subprocess.run(
        [sys.executable, "-c", _OFFLINE, str(path), model, str(threads), device, dtype],
        capture_output=True,
        text=True,
        check=True,
        env=_env(),
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# ------------------------------------------------------------------------------------------- server


class Server:
    """``ragsense guard`` in a subprocess on a free port, its log in ``workdir``."""

    def __init__(
        self, model: str, threads: int, workdir: Path, device: str = "auto", dtype: str = "float32"
    ) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / f"guard-{self.port}.log"
        command = [sys.executable, "-m", "ragsense", "guard", "--model", model, "--threads", str(threads)]
        command += ["--port", str(self.port), "--api-key-env", "BENCH_NO_KEYS", "--timeout", "600"]
        command += ["--device", device, "--dtype", dtype]
        with self.log.open("w") as stderr:
            self.process = subprocess.Popen(command, stderr=stderr, env=_env())
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/ready", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if self.process.poll() is not None:
                raise RuntimeError(f"the guard exited: {self.log.read_text()[-2000:]}")
            time.sleep(0.5)
        raise TimeoutError("the guard did not become ready")

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def after_batch_mb(self) -> float | None:
        """The guard's own ``ragsense_guard_resident_bytes_after_batch`` gauge, in MB."""
        try:
            text = httpx.get(self.url + "/metrics", timeout=10).text
        except httpx.TransportError:
            return None
        for line in text.splitlines():
            if line.startswith("ragsense_guard_resident_bytes_after_batch "):
                value = float(line.rsplit(" ", 1)[1])
                return value / 2**20 if value > 0 else None
        return None

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=300)


# --------------------------------------------------------------------------------------------- load


async def load(
    url: str,
    rows: list[dict[str, Any]],
    clients: int,
    requests: int | None,
    seconds: float | None,
    prefix: str,
    on_sample: Any = None,
) -> dict[str, Any]:
    """``clients`` concurrent clients, one row a request, until ``requests`` are sent or ``seconds`` pass."""
    sent: list[str] = []
    answered: dict[str, int] = {}
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    wrong_ids = 0
    stop_at = None if seconds is None else time.monotonic() + seconds
    counter = iter(range(10**9))

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal wrong_ids
        while True:
            n = next(counter)
            if (requests is not None and n >= requests) or (
                stop_at is not None and time.monotonic() > stop_at
            ):
                return
            row = rows[n % len(rows)]
            request_id = f"{prefix}-{n}"
            sent.append(request_id)
            body = {k: row[k] for k in ("question", "contexts", "answer")} | {"id": request_id}
            started = time.perf_counter()
            try:
                reply = await http.post("/v1/check", json=body)
            except httpx.TransportError as exc:
                statuses[type(exc).__name__] = statuses.get(type(exc).__name__, 0) + 1
                continue
            latencies.append(time.perf_counter() - started)
            statuses[str(reply.status_code)] = statuses.get(str(reply.status_code), 0) + 1
            if reply.status_code == 200:
                got = reply.json()["id"]
                wrong_ids += got != request_id
                answered[got] = answered.get(got, 0) + 1

    async def sampler() -> None:
        while on_sample is not None:
            on_sample()
            await asyncio.sleep(5)

    limits = httpx.Limits(max_connections=clients + 2, max_keepalive_connections=clients + 2)
    async with httpx.AsyncClient(base_url=url, timeout=900, limits=limits) as http:
        started = time.perf_counter()
        sampling = asyncio.ensure_future(sampler())
        await asyncio.gather(*(client(http) for _ in range(clients)))
        wall = time.perf_counter() - started
        sampling.cancel()
    ok = statuses.get("200", 0)
    return {
        "clients": clients,
        "requests": len(sent),
        "statuses": statuses,
        "wall_s": round(wall, 2),
        "rows_per_s": round(ok / wall, 3),
        "p50_ms": round(1000 * _percentile(latencies, 50), 1) if latencies else None,
        "p95_ms": round(1000 * _percentile(latencies, 95), 1) if latencies else None,
        "p99_ms": round(1000 * _percentile(latencies, 99), 1) if latencies else None,
        "lost": len([i for i in sent if i not in answered]),
        "duplicated": sum(c - 1 for c in answered.values() if c > 1),
        "wrong_ids": wrong_ids,
    }


async def disconnect(url: str, rows: list[dict[str, Any]], give_up_s: float) -> dict[str, Any]:
    """16 clients' burst plus one that gives up after ``give_up_s`` (mid-batch)."""
    burst = asyncio.ensure_future(load(url, rows, 16, 16, None, "burst"))
    await asyncio.sleep(1.0)
    async with httpx.AsyncClient(base_url=url, timeout=give_up_s) as quitter:
        row = rows[0]
        try:
            await quitter.post("/v1/check", json={k: row[k] for k in ("question", "contexts", "answer")})
            gave_up = False
        except httpx.TimeoutException:
            gave_up = True
    result = await burst
    after = httpx.post(
        url + "/v1/check", json={k: rows[1][k] for k in ("question", "contexts", "answer")}, timeout=300
    )
    return {"gave_up": gave_up, "burst": result, "served_after": after.status_code}


async def fault(server: Server, rows: list[dict[str, Any]], after_s: float) -> dict[str, Any]:
    """SIGTERM under 16-client load; every request the server accepted must have been answered 200."""
    responses: dict[str, int] = {}
    failures: dict[str, str] = {}
    stop = False

    async def client(http: httpx.AsyncClient, k: int) -> None:
        n = 0
        while not stop:
            request_id = f"fault-{k}-{n}"
            n += 1
            row = rows[(k * 7 + n) % len(rows)]
            try:
                reply = await http.post(
                    "/v1/check",
                    json={**{f: row[f] for f in ("question", "contexts", "answer")}, "id": request_id},
                )
                responses[request_id] = reply.status_code
            except httpx.TransportError as exc:
                failures[request_id] = type(exc).__name__
                return  # the server is gone: this client stops

    # No client timeout: a drain on a slow machine may take minutes, and a client that gave up would
    # look like a request the server dropped.
    async with httpx.AsyncClient(base_url=server.url, timeout=None) as http:
        tasks = [asyncio.ensure_future(client(http, k)) for k in range(16)]
        await asyncio.sleep(after_s)
        server.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        stop = True
        await asyncio.gather(*tasks)
    code = await asyncio.to_thread(server.process.wait, 300)
    log = server.log.read_text()
    accepted = {
        line.split()[1]
        for line in log.splitlines()
        if line.startswith("request ") and " accepted rows=" in line
    }
    fault_accepted = {i for i in accepted if i.startswith("fault-")}
    unanswered = sorted(i for i in fault_accepted if responses.get(i) != 200)
    logged_200 = {
        line.split()[1] for line in log.splitlines() if line.startswith("request ") and "-> 200" in line
    }
    return {
        "exit_code": code,
        "drain_s": round(time.monotonic() - signalled, 2),
        "accepted": len(fault_accepted),
        "answered_200": sum(1 for i in fault_accepted if responses.get(i) == 200),
        "accepted_but_not_answered": unanswered,
        "statuses_after_sigterm": {
            str(s): list(responses.values()).count(s) for s in set(responses.values())
        },
        "server_logged_200": len(fault_accepted & logged_200),
        "transport_failures": {kind: list(failures.values()).count(kind) for kind in set(failures.values())},
        "failed_ids_the_server_accepted": sorted(set(failures) & accepted),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default=str(ROOT / ".." / "shared" / "data" / "wikieval"))
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the one model process")
    parser.add_argument(
        "--requests", type=int, nargs=3, default=(12, 24, 32), help="requests at 1, 4, 16 clients"
    )
    parser.add_argument("--offline-rows", type=int, default=32)
    parser.add_argument("--device", default="auto", help="the model's device (cuda on a GPU machine)")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    parser.add_argument("--soak-minutes", type=float, default=10.0)
    parser.add_argument("--fault-after", type=float, default=15.0, help="seconds of load before SIGTERM")
    parser.add_argument(
        "--phases",
        default="load,soak,fault",
        help="comma-separated: load (with offline and disconnect), soak, fault",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="also write the report here after every phase and level (a run cut off keeps what it did)",
    )
    args = parser.parse_args()
    phases = set(args.phases.split(","))
    rows = _rows(args.data)
    report: dict[str, Any] = {
        "model": args.model,
        "threads": args.threads,
        "device": args.device,
        "dtype": args.dtype,
        "rows_available": len(rows),
    }
    with tempfile.TemporaryDirectory(prefix="bench-guard-") as tmp:
        workdir = Path(tmp)
        offline_rows = rows[: args.offline_rows]
        if phases & {"load", "soak"}:
            _load_and_soak(args, phases, rows, offline_rows, workdir, report)
        if "fault" in phases:
            fault_server = Server(args.model, args.threads, workdir, args.device, args.dtype)
            report["fault"] = asyncio.run(fault(fault_server, rows, args.fault_after))
            print("fault:", report["fault"], file=sys.stderr)
    _checkpoint(args, report)
    print(json.dumps(report))


def _checkpoint(args: argparse.Namespace, report: dict[str, Any]) -> None:
    """Rewrite ``--out`` with the report so far; the complete report replaces it at the end."""
    if args.out is not None:
        args.out.write_text(json.dumps(report) + "\n")


def _load_and_soak(
    args: argparse.Namespace,
    phases: set[str],
    rows: list[dict[str, Any]],
    offline_rows: list[dict[str, Any]],
    workdir: Path,
    report: dict[str, Any],
) -> None:
    if "load" in phases:
        report["offline_before"] = offline(
            offline_rows, args.model, args.threads, workdir, args.device, args.dtype
        )
        print("offline before:", report["offline_before"], file=sys.stderr)
        _checkpoint(args, report)
    server = Server(args.model, args.threads, workdir, args.device, args.dtype)
    report["rss_ready_mb"] = round(server.rss_mb(), 1)
    if "load" in phases:
        levels = []
        for clients, requests in zip((1, 4, 16), args.requests, strict=True):
            result = asyncio.run(load(server.url, rows, clients, requests, None, f"c{clients}"))
            print("load:", result, file=sys.stderr)
            levels.append(result)
            report["load"] = levels
            _checkpoint(args, report)
        give_up = 0.5 * levels[-1]["p50_ms"] / 1000
        report["disconnect"] = asyncio.run(disconnect(server.url, rows, give_up_s=give_up))
        print("disconnect:", report["disconnect"], file=sys.stderr)
        _checkpoint(args, report)
    if "soak" in phases:
        samples: list[tuple[float, float]] = []
        after_batch: list[tuple[float, float]] = []  # the gauge, one point each time it changes
        started = time.monotonic()

        def sample() -> None:
            now = time.monotonic() - started
            samples.append((now, server.rss_mb()))
            value = server.after_batch_mb()
            if value is not None and (not after_batch or after_batch[-1][1] != value):
                after_batch.append((now, value))

        soak = asyncio.run(load(server.url, rows, 16, None, 60 * args.soak_minutes, "soak", on_sample=sample))
        report["soak"] = {
            "minutes": args.soak_minutes,
            **soak,
            "rss_mb": _memory(samples),
            "after_batch_mb": _after_batch(after_batch),
        }
        print("soak:", report["soak"], file=sys.stderr)
        _checkpoint(args, report)
    server.stop()
    if "load" in phases:
        report["offline_after"] = offline(
            offline_rows, args.model, args.threads, workdir, args.device, args.dtype
        )
        print("offline after:", report["offline_after"], file=sys.stderr)
        before, after = report["offline_before"]["rows_per_s"], report["offline_after"]["rows_per_s"]
        mean_offline = statistics.mean([before, after])
        for level in report["load"]:
            level["ratio_to_offline"] = round(level["rows_per_s"] / mean_offline, 3)
            level["ratio_range"] = [round(level["rows_per_s"] / max(before, after), 3),
                                    round(level["rows_per_s"] / min(before, after), 3)]  # fmt: skip


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of ``(seconds, MB)`` points, in MB a minute."""
    mean_t = statistics.mean(t for t, _ in points)
    mean_v = statistics.mean(v for _, v in points)
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    return 0.0 if spread == 0 else 60 * sum((t - mean_t) * (v - mean_v) for t, v in points) / spread


def _after_batch(points: list[tuple[float, float]]) -> dict[str, Any]:
    """The guard's after-batch RSS gauge over the soak: first, last, range and least-squares slope."""
    if len(points) < 3:
        return {"points": len(points)}
    values = [v for _, v in points]
    return {
        "points": len(points),
        "first_mb": round(values[0], 1),
        "last_mb": round(values[-1], 1),
        "min_mb": round(min(values), 1),
        "max_mb": round(max(values), 1),
        "slope_mb_per_min": round(_slope(points), 3),
        "second_half_slope_mb_per_min": round(_slope(points[len(points) // 2 :]), 3),
    }


def _memory(samples: list[tuple[float, float]]) -> dict[str, Any]:
    """RSS over the soak: first and last minute's means, the peak, the least-squares slope, and the
    same for each minute's lowest sample (the floor between batches: a sample taken mid-batch also
    holds that batch's activations, which vary with its rows and hide a trend)."""
    if len(samples) < 3:
        return {"samples": len(samples)}
    times = [t for t, _ in samples]
    values = [v for _, v in samples]
    first = [v for t, v in samples if t <= 60] or values[:1]
    last = [v for t, v in samples if t >= times[-1] - 60] or values[-1:]
    floors: dict[int, tuple[float, float]] = {}
    for t, v in samples:
        minute = int(t // 60)
        if minute not in floors or v < floors[minute][1]:
            floors[minute] = (t, v)
    floor_points = [floors[m] for m in sorted(floors)]
    return {
        "samples": len(samples),
        "first_minute_mb": round(statistics.mean(first), 1),
        "last_minute_mb": round(statistics.mean(last), 1),
        "peak_mb": round(max(values), 1),
        "slope_mb_per_min": round(_slope(samples), 3),
        "minute_floors_mb": [round(v, 1) for _, v in floor_points],
        "floor_slope_mb_per_min": round(_slope(floor_points), 3) if len(floor_points) >= 2 else None,
    }


if __name__ == "__main__":
    main()
