"""A real Ray cluster on this machine for the Ray engine's tests, and its teardown.

The head and a second worker node are started with ``ray start`` on 127.0.0.1, one CPU each, with every
port chosen free and a private temporary folder, so the cluster cannot meet another one on the machine.
It uses token authentication with a token made for this test session. Teardown kills exactly this
cluster's processes (found by its temporary folder on their command lines, and their children), never
by name: a plain ``ray stop`` would also stop any other Ray on the machine.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Ray reads its authentication settings when it is imported, so they are set before that; the drivers
# the tests start (this process, `ragsense` subprocesses, a local Ray) inherit them.
os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(16))
os.environ.setdefault("RAY_AUTH_MODE", "token")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

try:
    import psutil
    import ray
except ImportError:  # the tests that need them skip
    psutil = ray = None

RAY = Path(sys.executable).with_name("ray")


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free ports: every socket stays bound until all are picked (one closed
    before the next is bound may be handed out again, and Ray refuses a node whose components share
    a port)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]


def _free_port() -> int:
    return _free_ports(1)[0]


def _node_ports(extra: int = 0, avoid: int = 0) -> tuple[int, list[str], list[int]]:
    """A node's component ports, and ``extra`` more ports distinct from them and from ``avoid`` (the
    head's port, picked earlier)."""
    picked = _free_ports(6 + extra)
    while avoid in picked:
        picked = _free_ports(6 + extra)
    manager, *ports = picked
    return manager, [
        "--node-manager-port", str(manager),
        "--object-manager-port", str(ports[0]),
        "--dashboard-agent-listen-port", str(ports[1]),
        "--dashboard-agent-grpc-port", str(ports[2]),
        "--metrics-export-port", str(ports[3]),
        "--runtime-env-agent-port", str(ports[4]),
    ], ports[5:]  # fmt: skip


def kill_all(processes: list[Any]) -> None:
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(processes, timeout=10)


def processes_with(marker: str) -> list[Any]:
    """Processes whose command line holds ``marker``, with their children (Ray's agents and workers
    rename themselves), never this process or its parents."""
    mine = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    found: dict[int, Any] = {}
    for process in psutil.process_iter(["pid", "cmdline"]):
        try:
            if process.pid in mine or not any(marker in a for a in process.info["cmdline"] or []):
                continue
            found[process.pid] = process
            for child in process.children(recursive=True):
                found.setdefault(child.pid, child)
        except psutil.Error:
            continue
    return [p for pid, p in found.items() if pid not in mine]


@dataclass
class LocalRayCluster:
    """``ray start`` processes on 127.0.0.1: a head and worker nodes, one CPU each."""

    root: Path
    port: int = field(default_factory=_free_port)
    node_manager_ports: list[int] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _start(self, args: list[str], dashboard: bool = False) -> None:
        manager, ports, extra = _node_ports(1 if dashboard else 0, avoid=self.port)
        if dashboard:  # the head: its dashboard port distinct from its components' too
            args = [*args, "--dashboard-port", str(extra[0])]
        # Each node its own range of worker ports, below the kernel's ephemeral range (from 32768), so a
        # free port picked for another component (ephemeral) can never fall inside it: 12 process slots
        # of 5 nodes x 200 ports span 20000-31999. (pid % 40 reached 59399 and once collided.)
        low = 20000 + 200 * (len(self.node_manager_ports) + 5 * (os.getpid() % 12))
        command = [
            str(RAY), "start", *args, "--node-ip-address", "127.0.0.1", "--num-cpus", "1",
            "--num-gpus", "0", "--disable-usage-stats", "--min-worker-port", str(low),
            "--max-worker-port", str(low + 199), *ports,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"ray start failed: {done.stderr[-2000:]}")
        self.node_manager_ports.append(manager)

    def start(self, workers: int = 1) -> None:
        self._start(
            ["--head", "--port", str(self.port), "--temp-dir", str(self.root), "--include-dashboard",
             "false"],
            dashboard=True,
        )  # fmt: skip
        for _ in range(workers):
            self._start(["--address", self.address])

    def kill_node(self, node_manager_port: int) -> int:
        """Kill one node outright (its raylet and everything under it); returns how many processes."""
        victims = processes_with(f"--node_manager_port={node_manager_port}")
        kill_all(victims)
        return len(victims)

    def stop(self) -> None:
        kill_all(processes_with(str(self.root)))
