"""Running the app on uvicorn: the bind check, graceful SIGTERM, connection limits (a deadline for
each request's headers, a cap on open connections), and a server in a thread for tests.

Shutdown (SIGTERM or Ctrl-C): uvicorn stops accepting connections, lets every request in flight finish
(up to the request timeout plus a margin), then the app's lifespan drains the model worker. The guard
marks itself draining first, so ``/ready`` turns 503 at once and a load balancer stops sending.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ragsense._access import check_bind as shared_check_bind
from ragsense.guard._app import GuardService, create_app
from ragsense.guard._config import GuardConfig

# Seconds granted to requests in flight at shutdown beyond their own timeout.
_SHUTDOWN_MARGIN = 5.0


def check_bind(host: str, config: GuardConfig, *, insecure: bool = False) -> None:
    """Refuse to serve without API keys on a non-loopback address unless ``insecure``."""
    shared_check_bind(host, has_keys=bool(config.api_keys), insecure=insecure)


class _GuardServer(uvicorn.Server):
    """uvicorn's server that marks the guard draining the moment a shutdown signal arrives."""

    def __init__(self, config: uvicorn.Config, service: GuardService) -> None:
        super().__init__(config)
        self.service = service

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.service.draining = True
        super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # uvicorn re-raises the signal after a graceful shutdown, so the process dies of SIGTERM
        # (exit -15); the guard has finished its work by then and exits 0 instead.
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)


def connection_limit(config: GuardConfig) -> int:
    """The most connections open at once: ``config.max_connections``, else what the process's file
    limit leaves after a quarter (at least 32) for the model, logs and the rest of the process.

    >>> connection_limit(GuardConfig(model="fake", max_connections=50))
    50
    """
    if config.max_connections is not None:
        return config.max_connections
    try:
        import resource
    except ImportError:  # not a Unix: no file limit to read
        return 1024
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        soft = 65_536
    return max(8, min(4_096, soft - max(32, soft // 4)))


def _protocol(header_timeout: float, max_connections: int) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a deadline for each request's headers and a cap on connections.

    uvicorn has neither: its keep-alive timeout ends when the first byte of the next request arrives,
    and ``limit_concurrency`` answers 503 to a request but closes no connection. So a client trickling
    header bytes held its connection, and a file descriptor, for as long as it liked (120 of them
    under a 128-file limit and every client got EMFILE). Past the cap, the oldest connection still
    sending (its headers, or a body not all in: it has its own deadline, ``body_timeout_s``, but until
    then 45 trickled bodies under a cap of 40 turned every new client away) is closed for a new one.
    """

    class GuardProtocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _since = 0.0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()
            if len(self.connections) > max_connections:
                # Full: the oldest connection still sending its headers makes room (else this one).
                waiting = [c for c in self.connections if isinstance(c, GuardProtocol) and c._sending()]
                min(waiting, key=lambda c: c._since, default=self)._drop()

        def _sending(self) -> bool:
            """Whether the client is still sending: its headers, or a body not all in."""
            if self._deadline is not None:
                return True
            cycle = self.cycle
            return cycle is not None and not cycle.response_complete and bool(cycle.more_body)

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not None and not self.cycle.response_complete:
                self._disarm()  # the headers are in: the body and the answer have their own limits

        def on_response_complete(self) -> None:
            self._arm()  # armed first: a pipelined request starts (and disarms) inside
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._since = self.loop.time()
            self._deadline = self.loop.call_later(header_timeout, self._drop)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _drop(self) -> None:
            self._disarm()
            if not self.transport.is_closing():
                self.transport.close()

    return GuardProtocol


def _uvicorn_config(app: Any, config: GuardConfig, *, host: str, port: int, log_level: str) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,  # the guard logs one line per request itself, without content
        lifespan="on",
        timeout_graceful_shutdown=int(config.timeout_s + _SHUTDOWN_MARGIN),
        server_header=False,
        http=_protocol(config.header_timeout_s, connection_limit(config)),
        timeout_keep_alive=config.keep_alive_s,
    )


def serve(
    config: GuardConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    insecure: bool = False,
    log_level: str = "info",
) -> None:
    """Serve the guard until SIGTERM/SIGINT (blocking; the main thread handles the signals)."""
    check_bind(host, config, insecure=insecure)
    app = create_app(config, bind=(host, port))
    service: GuardService = app.state.service
    server = _GuardServer(_uvicorn_config(app, config, host=host, port=port, log_level=log_level), service)

    def stop_if_setup_fails() -> None:
        # A model that cannot load is fatal for the CLI: exit with its error instead of serving 503s.
        while not service.batcher.wait_ready(1.0) and not server.should_exit:
            if service.batcher.setup_error is not None:
                break
        if service.batcher.setup_error is not None:
            server.should_exit = True

    threading.Thread(target=stop_if_setup_fails, name="ragsense-guard-watch", daemon=True).start()
    server.run()
    error = service.batcher.setup_error
    if error is not None:
        raise error


@dataclass
class RunningGuard:
    """A guard served from a background thread (tests, notebooks): its ``url``; :meth:`stop` it."""

    url: str
    server: uvicorn.Server
    thread: threading.Thread
    service: GuardService

    def stop(self, timeout: float = 30.0) -> None:
        """Shut down as SIGTERM would: finish requests in flight, drain the worker, join."""
        self.service.draining = True
        self.server.should_exit = True
        self.thread.join(timeout)


def start_in_thread(
    config: GuardConfig, *, host: str = "127.0.0.1", port: int = 0, ready_timeout: float = 120.0
) -> RunningGuard:
    """Start the guard on ``host`` (port 0: a free one) in a thread; returns once the model is ready."""
    check_bind(host, config)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound_port = sock.getsockname()[1]
    app = create_app(config, bind=(host, bound_port))
    service: GuardService = app.state.service
    server = uvicorn.Server(_uvicorn_config(app, config, host=host, port=bound_port, log_level="warning"))
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="ragsense-guard-http", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + ready_timeout
    while not (server.started and service.batcher.ready):
        if service.batcher.setup_error is not None:
            server.should_exit = True
            thread.join(10)
            raise service.batcher.setup_error
        if time.monotonic() > deadline or not thread.is_alive():
            server.should_exit = True
            raise TimeoutError("the guard did not become ready in time")
        time.sleep(0.02)
    display = f"[{host}]" if ":" in host else host
    return RunningGuard(f"http://{display}:{bound_port}", server, thread, service)
