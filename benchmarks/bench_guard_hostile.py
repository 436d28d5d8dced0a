"""Hostile clients against ``ragsense guard``: do normal clients keep their latency under attack?

    .venv/bin/python -m benchmarks.bench_guard_hostile                      # the fake model (default)
    .venv/bin/python -m benchmarks.bench_guard_hostile --model smollm2-135m --threads 2 --seconds 60

Starts the guard in a process of its own on 127.0.0.1 (no keys: every caller shares the one
anonymous key, the worst case for per-key limits), then runs two phases of ``--seconds`` each:

1. **quiet**: ``--clients`` normal clients (16), each sending one row at a time and pausing
   ``--think-ms`` (100 ms) between its requests, so that the quiet guard is not already saturated
   (without a pause, 16 clients keep the fake model's guard busy all the time, and the ratio measures
   how much CPU the attackers take rather than how the guard treats them);
2. **attack**: the same normal clients, and alongside them
   - ``--slow`` slow uploads (40, more than the 32 per-key slots): each declares a 100 kB body and
     sends one byte every ``--slow-interval`` seconds (5), opening a new one when the guard cuts it off;
   - ``--amplify`` amplification clients (4), each sending ``{"rows": [0, 0, ...]}`` (1 MB,
     500,000 elements) back to back.

It prints each phase's normal-client latency (p50, p95, p99), their statuses, what the attackers got,
and the ratio of p95 under attack to quiet (target: at most 1.5), and ends with one JSON line
(``--output`` also writes it to a file). Everything is bounded: a fixed number of clients, a fixed
time per phase, the server killed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from benchmarks.output import emit

ROW = {
    "question": "Who designs proteins?",
    "contexts": ["David Baker designs proteins at the University of Washington."],
    "answer": "David Baker designs proteins.",
}
AMPLIFY_BODY = b'{"rows": [' + b"0," * 499_999 + b"0]}"
SLOW_DECLARED = 100_000


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _summary(latencies: list[float], statuses: Counter[str]) -> dict[str, Any]:
    return {
        "requests": sum(statuses.values()),
        "statuses": dict(sorted(statuses.items())),
        "p50_ms": _ms(_percentile(latencies, 0.50)),
        "p95_ms": _ms(_percentile(latencies, 0.95)),
        "p99_ms": _ms(_percentile(latencies, 0.99)),
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


async def _normal_client(
    url: str, until: float, think: float, latencies: list[float], statuses: Counter[str]
) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        while time.monotonic() < until:
            await asyncio.sleep(think)
            started = time.monotonic()
            try:
                reply = await client.post("/v1/check", json=ROW)
                status = str(reply.status_code)
            except httpx.TransportError as exc:
                status = type(exc).__name__
            latencies.append(time.monotonic() - started)
            statuses[status] += 1


async def _slow_upload(port: int, until: float, interval: float, outcomes: Counter[str]) -> None:
    """One slow upload at a time, a new one whenever the server ends the last, until ``until``."""
    while time.monotonic() < until:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        head = (
            f"POST /v1/check HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {SLOW_DECLARED}\r\n\r\n{{"
        )
        writer.write(head.encode())
        try:
            await writer.drain()
            status = "open at the end"
            while time.monotonic() < until:
                try:  # the server's answer, if it cuts the upload off while we wait
                    line = await asyncio.wait_for(reader.readline(), min(interval, until - time.monotonic()))
                except TimeoutError:
                    writer.write(b" ")
                    await writer.drain()
                    continue
                status = line.decode("latin-1").split(" ")[1] if line else "closed"
                break
            outcomes[status] += 1
        except (ConnectionError, IndexError):
            outcomes["reset"] += 1
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


async def _amplifier(url: str, until: float, outcomes: Counter[str]) -> None:
    headers = {"content-type": "application/json"}
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        while time.monotonic() < until:
            try:
                reply = await client.post("/v1/check", content=AMPLIFY_BODY, headers=headers)
                outcomes[f"{reply.status_code} ({len(reply.content)} bytes)"] += 1
            except httpx.TransportError as exc:
                outcomes[type(exc).__name__] += 1


async def _attack(url: str, port: int, args: argparse.Namespace, until: float) -> dict[str, Any]:
    """Every attacker until ``until``; what each kind got back."""
    slow: Counter[str] = Counter()
    amplified: Counter[str] = Counter()
    await asyncio.gather(
        *(_slow_upload(port, until, args.slow_interval, slow) for _ in range(args.slow)),
        *(_amplifier(url, until, amplified) for _ in range(args.amplify)),
    )
    return {"slow_uploads": dict(slow), "amplification": dict(amplified)}


async def _phase(url: str, args: argparse.Namespace) -> dict[str, Any]:
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    until = time.monotonic() + args.seconds
    think = args.think_ms / 1000
    clients = (_normal_client(url, until, think, latencies, statuses) for _ in range(args.clients))
    await asyncio.gather(*clients)
    return _summary(latencies, statuses)


def _attacked_phase(url: str, port: int, args: argparse.Namespace) -> dict[str, Any]:
    """The normal clients measured while the attackers, in a process of their own, are at work.

    A process of their own, so that building and sending 1 MB bodies does not slow the normal
    clients' event loop: the latency measured is the guard's, not the load generator's.
    """
    seconds = args.warmup + args.seconds + 1  # the attack covers the measured window on both sides
    command = [sys.executable, "-m", "benchmarks.bench_guard_hostile", "--attack-only", str(seconds)]
    command += ["--port", str(port)]
    command += ["--slow", str(args.slow), "--slow-interval", str(args.slow_interval)]
    command += ["--amplify", str(args.amplify)]
    return beside(command, seconds, url, args)


def beside(command: list[str], seconds: float, url: str, args: argparse.Namespace) -> dict[str, Any]:
    """The normal clients' phase while ``command`` (the load, for ``seconds``, in a process of its own
    that ends by printing one JSON object) runs, after ``args.warmup`` seconds; its object joins it."""
    load = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    time.sleep(args.warmup)
    result = asyncio.run(_phase(url, args))
    out, _ = load.communicate(timeout=seconds + 120)
    result.update(json.loads(out))
    return result


def _start_server(args: argparse.Namespace, port: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "ragsense", "guard", "--model", args.model, "--port", str(port)]
    command += ["--log-level", "warning", "--body-timeout", str(args.body_timeout)]
    command += ["--hostile-delay", str(args.hostile_delay)]
    if args.threads is not None:
        command += ["--threads", str(args.threads)]
    return subprocess.Popen(command, stderr=subprocess.DEVNULL)


def _wait_ready(url: str, server: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the guard exited with {server.returncode}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url + "/ready", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise SystemExit("the guard did not become ready")


def stop_server(server: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM (the guard drains), then kill after ``timeout`` seconds."""
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout)
    except subprocess.TimeoutExpired:
        server.kill()


def two_phase_result(
    benchmark: str,
    args: argparse.Namespace,
    hidden: tuple[str, ...],
    load_before: tuple[float, float, float],
    quiet: dict[str, Any],
    loaded: dict[str, dict[str, Any]],
    health: int,
) -> dict[str, Any]:
    """The JSON result of a quiet phase and a loaded one (``{name: phase}``): the settings (less the
    ``hidden`` internal ones), the machine and its load, both phases, and the ratio of their p95."""
    [(name, phase)] = loaded.items()
    ratio = None
    if quiet["p95_ms"] and phase["p95_ms"]:
        ratio = round(phase["p95_ms"] / quiet["p95_ms"], 2)
    return {
        "benchmark": benchmark,
        "date": time.strftime("%Y-%m-%d"),
        "model": args.model,
        "settings": {
            k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in hidden
        },
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_1_5_15_before": [round(x, 2) for x in load_before],
            "load_average_1_5_15_after": [round(x, 2) for x in os.getloadavg()],
        },
        "quiet": quiet,
        name: phase,
        "p95_ratio": ratio,
        "target_ratio": 1.5,
        "health_after": health,
    }


def _cpu_seconds(pid: int) -> float:
    """The user + system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(
    args: argparse.Namespace,
    start_server: Callable[[argparse.Namespace, int], subprocess.Popen[bytes]],
    loaded_phase: Callable[[str, int, argparse.Namespace], dict[str, Any]],
    benchmark: str,
    loaded: str,
) -> dict[str, Any]:
    """Start the guard, run the quiet phase and then ``loaded_phase`` (named ``loaded``), each with
    the guard's CPU seconds, stop it, print both phases and return :func:`two_phase_result`."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    load_before = os.getloadavg()  # the machine may be shared: its load is part of the result
    server = start_server(args, port)
    try:
        _wait_ready(url, server, 300)
        cpu = _cpu_seconds(server.pid)
        quiet = asyncio.run(_phase(url, args))
        quiet["guard_cpu_s"] = round(_cpu_seconds(server.pid) - cpu, 2)
        cpu = _cpu_seconds(server.pid)
        phase = loaded_phase(url, port, args)
        phase["guard_cpu_s"] = round(_cpu_seconds(server.pid) - cpu, 2)
        health = httpx.get(url + "/health", timeout=5).status_code
    finally:
        stop_server(server, 120)
    hidden = ("attack_only", "flood_only", "port")
    result = two_phase_result(benchmark, args, hidden, load_before, quiet, {loaded: phase}, health)
    for name in ("quiet", loaded):
        phase = result[name]
        print(
            f"{name:>6}: {phase['requests']} requests {phase['statuses']}  p50 {phase['p50_ms']} ms  "
            f"p95 {phase['p95_ms']} ms  p99 {phase['p99_ms']} ms  guard CPU {phase['guard_cpu_s']} s",
            file=sys.stderr,
        )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="fake", help="fake (default) or the bundled smollm2-135m")
    parser.add_argument("--threads", type=int, default=None, help="the guard's torch threads")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per phase")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of attack before measuring")
    parser.add_argument("--clients", type=int, default=16, help="normal clients")
    parser.add_argument(
        "--think-ms", type=float, default=100.0, help="a normal client's pause between its requests"
    )
    parser.add_argument("--slow", type=int, default=40, help="slow uploads at once")
    parser.add_argument("--slow-interval", type=float, default=5.0, help="seconds between their bytes")
    parser.add_argument("--amplify", type=int, default=4, help="amplification clients")
    parser.add_argument("--body-timeout", type=float, default=10.0, help="the guard's --body-timeout")
    parser.add_argument(
        "--hostile-delay", type=float, default=1.0, help="the guard's --hostile-delay (0: answer at once)"
    )
    parser.add_argument("--output", type=Path, help="also write the JSON result here")
    parser.add_argument("--attack-only", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.attack_only is not None:  # the attackers' process (see _attacked_phase)
        url = f"http://127.0.0.1:{args.port}"
        until = time.monotonic() + args.attack_only
        print(json.dumps(asyncio.run(_attack(url, args.port, args, until))))
        return 0
    result = measure(args, _start_server, _attacked_phase, "bench_guard_hostile", "attack")
    attack = result["attack"]
    print(f"slow uploads: {attack['slow_uploads']}", file=sys.stderr)
    print(f"amplification: {attack['amplification']}", file=sys.stderr)
    print(f"p95 under attack / quiet: {result['p95_ratio']} (target <= 1.5)", file=sys.stderr)
    emit(result, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
