"""A small Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (no dependency).

Chromium reads commands from its fd 3 and writes replies and events to its fd 4; each message is JSON
followed by a NUL byte. :class:`Browser` starts headless Chromium with the network emulated offline,
opens one page target (flattened session), and records console errors, exceptions and every network
request the page makes. Every wait is bounded; :meth:`Browser.close` (also on ``with`` exit) ends the
browser's whole process group.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--mute-audio",
    "--remote-debugging-pipe",
)


TRAMPOLINE = (
    "import os, sys\n"
    "a, b = int(sys.argv[1]), int(sys.argv[2])\n"
    "os.dup2(a, 3); os.dup2(b, 4); os.close(a); os.close(b)\n"
    "os.execv(sys.argv[3], sys.argv[3:])\n"
)
"""Started with ``pass_fds``: puts the pipe ends on fds 3 and 4 (where Chromium expects them), then
becomes Chromium (same process, so the process group and pid stay the browser's)."""


def find_chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


LOUD = ("error", "warning", "assert")
"""Console call types and log levels that count as problems."""


class CDPError(RuntimeError):
    pass


class Browser:
    """Headless Chromium driven over the DevTools pipe; one page, offline."""

    def __init__(self, binary: str, profile: Path, *, width: int = 1400, height: int = 1000) -> None:
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()
        # The child's ends go above fd 9, so that moving them to 3 and 4 cannot clobber one with the other.
        child_in = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD_CLOEXEC, 10)
        child_out = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        command = [
            sys.executable,
            "-c",
            TRAMPOLINE,
            str(child_in),
            str(child_out),
            binary,
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        self.proc = subprocess.Popen(
            command,
            pass_fds=(child_in, child_out),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        os.close(child_in)
        os.close(child_out)
        self._write = to_chrome_w
        self._read = from_chrome_r
        self._next_id = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        self.session: str | None = None
        self.width, self.height = width, height

    # ------------------------------------------------------------------------------ the protocol

    def _read_loop(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._read, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            buffer += chunk
            while b"\0" in buffer:
                message, buffer = buffer.split(b"\0", 1)
                self._inbox.put(json.loads(message))
        self._inbox.put(None)

    def _pump(self, deadline: float) -> None:
        try:
            message = self._inbox.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            return
        if message is None:
            raise CDPError("the browser closed its DevTools pipe")
        if "id" in message:
            self._replies[message["id"]] = message
        else:
            self.events.append(message)

    def send(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float = 20.0, page: bool = True
    ) -> Any:
        """Send a command (to the page session unless ``page=False``) and return its result."""
        self._next_id += 1
        number = self._next_id
        message: dict[str, Any] = {"id": number, "method": method, "params": params or {}}
        if page and self.session is not None:
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while number not in self._replies:
            if time.monotonic() > deadline:
                raise CDPError(f"{method}: no reply in {timeout} s")
            self._pump(deadline)
        reply = self._replies.pop(number)
        if "error" in reply:
            raise CDPError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method: str, timeout: float = 20.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for event in self.events[seen:]:
                if event.get("method") == method:
                    return event
            seen = len(self.events)
            if time.monotonic() > deadline:
                raise CDPError(f"no {method} event in {timeout} s")
            self._pump(deadline)

    # ------------------------------------------------------------------------------ the page

    def open_page(self) -> None:
        """Create and attach a page target; enable what the tests watch; go offline."""
        target = self.send("Target.createTarget", {"url": "about:blank"}, page=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, page=False)[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send(
            "Network.emulateNetworkConditions",
            {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
        )
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
        )

    def navigate(self, url: str, timeout: float = 30.0) -> None:
        self.events.clear()
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired", timeout)

    def evaluate(self, expression: str, *, timeout: float = 20.0) -> Any:
        """Evaluate ``expression`` in the page (promises awaited) and return its JSON value."""
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            timeout=timeout,
        )
        if "exceptionDetails" in result:
            raise CDPError(f"{expression!r} raised: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20.0) -> Any:
        """Poll ``expression`` until it is truthy (bounded by ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise CDPError(f"{expression!r} still falsy after {timeout} s")
            time.sleep(0.05)

    def hover(self, x: float, y: float) -> None:
        self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png"}, timeout=30.0)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    # ------------------------------------------------------------------------------ what happened

    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions, and error log entries since navigating."""
        out = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                out.append(f"exception: {params.get('exceptionDetails')}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in LOUD:
                out.append(f"console.{params.get('type')}: {params.get('args')}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in LOUD:
                out.append(f"log: {params['entry'].get('text')}")
        return out

    def requests(self) -> list[str]:
        """The URL of every request the page made since navigating."""
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e.get("method") == "Network.requestWillBeSent"
        ]

    # ------------------------------------------------------------------------------ lifetime

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(CDPError, OSError):
                self.send("Browser.close", page=False, timeout=5.0)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # what is left of the browser's own process group
        self.proc.wait(timeout=5)
        for fd in (self._write, self._read):
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
