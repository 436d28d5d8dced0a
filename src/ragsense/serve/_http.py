"""The HTTP transport of ``ragsense serve``: a stdlib threading server around :class:`ModelService`."""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ragsense.models import LanguageModel, load_model
from ragsense.serve._service import ModelService, error_body

_MAX_BODY = 32 * 1024 * 1024


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: clients send many small requests
    server: RagsenseHTTPServer

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        started = time.perf_counter()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if self.headers.get("Transfer-Encoding"):  # chunked bodies are not read: send Content-Length
            self.close_connection = True
            status, payload = (
                411,
                error_body("send the body with a Content-Length", "invalid_request_error", 411),
            )
        elif length < 0 or length > _MAX_BODY:
            self.close_connection = True  # the body is not read: the connection cannot be reused
            status, payload = (
                413,
                error_body(f"the body must be 0-{_MAX_BODY} bytes", "invalid_request_error", 413),
            )
        else:
            raw = self.rfile.read(length) if length else b""
            status, payload = self.server.service.handle(method, self.path, raw)
        try:
            data = json.dumps(payload, ensure_ascii=False, allow_nan=False).encode("utf-8")
        except ValueError as exc:  # a non-finite number slipped through: still answer in JSON
            status, payload = 500, error_body(f"unserializable response: {exc}", "server_error", 500)
            data = json.dumps(payload).encode("utf-8")
        if self.server.log_requests:  # logged before the reply: a client that got it finds the line
            ms = (time.perf_counter() - started) * 1000
            print(f'{self.client_address[0]} "{method} {self.path}" {status} {ms:.0f} ms', file=sys.stderr)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # _serve logs one line per request itself

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.log_requests:
            print(f"{self.client_address[0]} {format % args}", file=sys.stderr)


class RagsenseHTTPServer(ThreadingHTTPServer):
    """The HTTP server; ``serve_forever()`` runs it, ``close()`` stops it and releases the model."""

    daemon_threads = True  # a client holding a keep-alive connection must not block shutdown

    def __init__(self, address: tuple[str, int], service: ModelService, log_requests: bool = True) -> None:
        super().__init__(address, _Handler)
        self.service = service
        self.log_requests = log_requests
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/v1"

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
) -> RagsenseHTTPServer:
    """Bind a server for ``model`` (``port=0``: any free port); call ``serve_forever()`` to run it.

    ``model_name`` is the id clients send (default: ``model.info.name``).
    """
    return RagsenseHTTPServer((host, port), ModelService(model, model_name), log_requests)


def start_in_thread(
    model: LanguageModel,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    model_name: str | None = None,
    log_requests: bool = True,
) -> tuple[RagsenseHTTPServer, str]:
    """Serve ``model`` from a daemon thread; returns the server and its base URL (ends in ``/v1``)."""
    server = serve(model, host, port, model_name=model_name, log_requests=log_requests)
    server._thread = threading.Thread(target=server.serve_forever, name="ragsense-serve", daemon=True)
    server._thread.start()
    return server, server.base_url


def run_server(model_name: str, host: str = "127.0.0.1", port: int = 8000, **model_options: Any) -> None:
    """Load ``model_name`` and serve it until Ctrl-C (blocking); one log line per request on stderr."""
    model = load_model(model_name, **model_options)
    server = RagsenseHTTPServer((host, port), ModelService(model, model_name, owns_model=True))
    print(f"ragsense: serving {model_name!r} at {server.base_url} (Ctrl-C to stop)", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("ragsense: stopping", file=sys.stderr)
    finally:
        server.server_close()
        server.service.close()
