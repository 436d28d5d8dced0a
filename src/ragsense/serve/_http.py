"""The HTTP transport of ``ragsense serve``: a stdlib threading server around :class:`ModelService`.

Connections are bounded (:class:`~ragsense.serve._service.ServeLimits`, the command's flags): a
socket timeout on every read and write, a deadline for a request's headers
(:attr:`RagsenseHTTPServer.header_timeout`) and one for its body
(:attr:`RagsenseHTTPServer.body_timeout`, then 408), and a cap on connections served at once, past
which the oldest connection still sending its headers or body is closed. Who may call it
is decided here, before a body is read, by the rules ``ragsense guard`` uses too
(:mod:`ragsense._access`): on a loopback bind the ``Host`` must name it and a cross-site ``Origin`` is
refused (403); with API keys every endpoint but ``/health`` needs one (401); without keys a
non-loopback bind is refused unless ``insecure``.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any

from ragsense._access import ApiKeys, allowed_hosts, check_bind, host_refusal, presented_key
from ragsense.models import LanguageModel, load_model
from ragsense.serve._service import ModelService, ServeLimits, error_body
from ragsense.tables import echo


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: clients send many small requests
    server: RagsenseHTTPServer
    # Seconds one read or write on the socket may wait (StreamRequestHandler sets it on the socket):
    # without it a client that stops sending holds its thread and file descriptor for ever.
    timeout = 30.0

    def handle_one_request(self) -> None:
        # From the request line to the end of the headers the server's deadline applies (a socket
        # timeout alone lets a client trickle a byte every few seconds for ever).
        self.server.watch(self.connection)
        try:
            super().handle_one_request()
        finally:
            self.server.unwatch(self.connection)

    def parse_request(self) -> bool:
        parsed = super().parse_request()  # reads the headers
        if not self.server.unwatch(self.connection):  # cut off: its headers ended at the cut
            self.close_connection = True
            return False
        return parsed

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _refusal(self) -> tuple[int, dict[str, Any], dict[str, str]] | None:
        """403 (Host/Origin) or 401 (API key) before the body is read, or None to go on."""
        reason = host_refusal(self.headers.get("Host"), self.headers.get("Origin"), self.server.allowed_hosts)
        if reason is not None:
            return 403, error_body(reason, "permission_error", 403), {}
        keys = self.server.api_keys
        if keys and self.path.split("?", 1)[0].rstrip("/") != "/health":  # probes need no key
            presented = presented_key(lambda name: self.headers.get(name))
            if keys.identify(presented) is None:
                message = "the API key is not valid" if presented else "an API key is required"
                challenge = {"WWW-Authenticate": 'Bearer realm="ragsense-serve"'}
                return 401, error_body(message, "authentication_error", 401), challenge
        return None

    def _serve(self, method: str) -> None:
        started = time.perf_counter()
        headers: dict[str, str] = {}
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        refused = self._refusal()
        if refused is not None:
            self.close_connection = True  # the body is not read: the connection cannot be reused
            status, payload, headers = refused
        elif self.headers.get("Transfer-Encoding"):  # chunked bodies are not read: send Content-Length
            self.close_connection = True
            status, payload = (
                411,
                error_body("send the body with a Content-Length", "invalid_request_error", 411),
            )
        elif length < 0 or length > (most := self.server.service.limits.max_body_bytes):
            self.close_connection = True
            status, payload = (
                413,
                error_body(f"the body must be 0-{most} bytes", "invalid_request_error", 413),
            )
        elif (raw := self._read_body(length)) is None:
            self.close_connection = True
            seconds = self.server.body_timeout
            status, payload = (
                408,
                error_body(f"the body did not arrive within {seconds:g} s", "invalid_request_error", 408),
            )
        else:
            status, payload = self.server.service.handle(method, self.path, raw)
        try:
            data = json.dumps(payload, ensure_ascii=False, allow_nan=False).encode("utf-8")
        except ValueError as exc:  # a non-finite number slipped through: still answer in JSON
            status, payload = 500, error_body(f"unserializable response: {exc}", "server_error", 500)
            data = json.dumps(payload).encode("utf-8")
        if self.server.log_requests:  # logged before the reply: a client that got it finds the line
            ms = (time.perf_counter() - started) * 1000
            # The path is the client's text: escaped (raw, an escape sequence would reach the
            # operator's terminal, a line break forge a log line).
            echo(f'{self.client_address[0]} "{method} {self.path}" {status} {ms:.0f} ms')
        with contextlib.suppress(OSError):  # the client may be gone (a cut-off body): nothing to answer
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    def _read_body(self, length: int) -> bytes | None:
        """The body's ``length`` bytes, or None when they did not all come within the server's body
        deadline (or the connection was cut to make room): a socket timeout alone lets a client
        trickle a byte every few seconds for ever. While it reads, the connection may be evicted like
        one still sending its headers (a grace second after the deadline, so that 408 is answered)."""
        if not length:
            return b""
        deadline = time.monotonic() + self.server.body_timeout
        self.server.watch(self.connection, self.server.body_timeout + 1.0)
        chunks: list[bytes] = []
        got = 0
        try:
            while got < length:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.connection.settimeout(left)
                chunk = self.rfile.read1(min(length - got, 1 << 16))
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
        except OSError:  # the deadline (socket.timeout) or a cut connection
            pass
        finally:
            with contextlib.suppress(OSError):
                self.connection.settimeout(self.timeout)
        kept = self.server.unwatch(self.connection)
        return b"".join(chunks) if kept and got == length else None

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # _serve logs one line per request itself

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.log_requests:  # e.g. a malformed request line, quoted as the client sent it
            echo(f"{self.client_address[0]} {format % args}")


class RagsenseHTTPServer(ThreadingHTTPServer):
    """The HTTP server; ``serve_forever()`` runs it, ``close()`` stops it and releases the model.

    ``api_keys``: keys every endpoint but ``/health`` needs (none: open). On a loopback address only
    requests whose Host names it are served (see :mod:`ragsense._access`).
    """

    daemon_threads = True  # a client holding a keep-alive connection must not block shutdown
    request_queue_size = 64  # the listen backlog (socketserver's 5 drops connections under a burst)
    header_timeout: float
    """Seconds from a request's first byte (or the end of the last answer) to the end of its headers;
    then the connection is closed. It bounds an idle keep-alive connection too."""
    body_timeout: float
    """Seconds from the end of a request's headers to the end of its body; then 408 and close."""
    max_connections: int
    """Connections served at once; past that a new one closes the oldest still sending its headers
    or body (or is itself closed)."""

    def __init__(
        self,
        address: tuple[str, int],
        service: ModelService,
        log_requests: bool = True,
        *,
        api_keys: ApiKeys | None = None,
    ) -> None:
        super().__init__(address, _Handler)
        self.service = service
        self.log_requests = log_requests
        limits = service.limits
        self.header_timeout = limits.header_timeout_s
        self.body_timeout = limits.body_timeout_s
        self.max_connections = limits.max_connections
        self.api_keys = api_keys if api_keys is not None else ApiKeys([])
        host, port = self.server_address[:2]
        self.allowed_hosts = allowed_hosts(str(host), int(port))
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._open = 0
        self._reading: dict[socket.socket, float] = {}  # connection -> deadline for its headers
        self._closed = threading.Event()
        threading.Thread(
            target=self._cut_off_slow_headers, name="ragsense-serve-deadline", daemon=True
        ).start()

    def server_close(self) -> None:
        self._closed.set()
        super().server_close()

    def watch(self, connection: socket.socket, seconds: float | None = None) -> None:
        """Give ``connection`` ``seconds`` (default: the header deadline) to send what it sends; past
        that it is closed, and until then it may be closed to make room for a new connection."""
        with self._lock:
            self._reading[connection] = time.monotonic() + (
                self.header_timeout if seconds is None else seconds
            )

    def unwatch(self, connection: socket.socket) -> bool:
        """Stop the deadline of ``connection``'s headers; False when it was cut off instead."""
        with self._lock:
            return self._reading.pop(connection, None) is not None

    def _cut_off_slow_headers(self) -> None:
        while not self._closed.wait(min(0.25, self.header_timeout / 4, self.body_timeout / 4)):
            now = time.monotonic()
            with self._lock:
                late = [c for c, deadline in self._reading.items() if deadline < now]
            for connection in late:
                self._cut(connection)

    def _cut(self, connection: socket.socket) -> None:
        self.unwatch(connection)  # so that its handler knows (see _Handler.parse_request)
        with contextlib.suppress(OSError):  # its thread's read ends; the thread closes it
            connection.shutdown(socket.SHUT_RDWR)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            full = self._open >= self.max_connections
            oldest = min(self._reading, key=self._reading.__getitem__, default=None) if full else None
            if not full or oldest is not None:
                self._open += 1
        if full:
            if oldest is None:  # every connection is in a request: this one waits for none
                self.shutdown_request(request)
                return
            self._cut(oldest)
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._open -= 1

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        display = f"[{host!s}]" if ":" in str(host) else str(host)
        return f"http://{display}:{port}/v1"

    def close(self) -> None:
        if self._thread is not None:
            self.shutdown()  # only valid while serve_forever runs
            self._thread.join()
            self._thread = None
        self.server_close()
        self.service.close()


def serve(
    model: LanguageModel,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    model_name: str | None = None,
    log_requests: bool = True,
    api_keys: ApiKeys | None = None,
    insecure: bool = False,
    limits: ServeLimits | None = None,
) -> RagsenseHTTPServer:
    """Bind a server for ``model`` (``port=0``: any free port); call ``serve_forever()`` to run it.

    ``model_name`` is the id clients send (default: ``model.info.name``). Without ``api_keys`` a
    non-loopback ``host`` is refused unless ``insecure``. ``limits``: see :class:`ServeLimits`.
    """
    check_bind(host, has_keys=bool(api_keys), insecure=insecure)
    service = ModelService(model, model_name, limits=limits)
    return RagsenseHTTPServer((host, port), service, log_requests, api_keys=api_keys)


def start_in_thread(
    model: LanguageModel,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    model_name: str | None = None,
    log_requests: bool = True,
    api_keys: ApiKeys | None = None,
    limits: ServeLimits | None = None,
) -> tuple[RagsenseHTTPServer, str]:
    """Serve ``model`` from a daemon thread; returns the server and its base URL (ends in ``/v1``)."""
    server = serve(
        model, host, port, model_name=model_name, log_requests=log_requests, api_keys=api_keys, limits=limits
    )
    server._thread = threading.Thread(target=server.serve_forever, name="ragsense-serve", daemon=True)
    server._thread.start()
    return server, server.base_url


def run_server(
    model_name: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    api_keys: ApiKeys | None = None,
    insecure: bool = False,
    limits: ServeLimits | None = None,
    **model_options: Any,
) -> None:
    """Load ``model_name`` and serve it until SIGINT or SIGTERM (blocking; call it from the main thread).

    One log line per request on stderr. The server loop runs in a thread and the main thread only
    waits for a signal: the handlers set a flag, and the main thread then shuts the loop down. Relying
    on Python's default SIGINT handling instead (a ``KeyboardInterrupt`` out of ``serve_forever``)
    failed twice over: a process started with SIGINT ignored (a shell's background job without job
    control passes that on) never gets the exception and never stops, and SIGTERM was not handled.
    """
    check_bind(host, has_keys=bool(api_keys), insecure=insecure)
    model = load_model(model_name, **model_options)
    server = RagsenseHTTPServer(
        (host, port), ModelService(model, model_name, owns_model=True, limits=limits), api_keys=api_keys
    )
    stop = threading.Event()

    def request_stop(sig: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    loop = threading.Thread(target=server.serve_forever, name="ragsense-serve")
    loop.start()
    print(f"ragsense: serving {model_name!r} at {server.base_url} (Ctrl-C to stop)", file=sys.stderr)
    try:
        while not stop.wait(0.5):  # a timeout, so the main thread runs signal handlers promptly
            if not loop.is_alive():
                break
        print("ragsense: stopping", file=sys.stderr)
    finally:
        server.shutdown()
        loop.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.server_close()
        server.service.close()
