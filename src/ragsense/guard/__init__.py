"""``ragsense guard``: a grounding guardrail service (docs/guard.md), its clients, the check in process.

An application on the evaluation spine: each ``POST /v1/check`` row is scored by the ConSens metric on
the evaluation runner, in micro-batches, by one model worker; the result carries the fields
``ragsense evaluate`` writes plus ``passed`` (against ``min_consens``) and ``weakest_words``.

The in-process check needs no server (nor the ``guard`` extra):

>>> from ragsense.guard import check
>>> r = check("Who wrote it?", ["Ada Lovelace wrote it."], "Ada Lovelace wrote it.", model="fake")
>>> r["passed"], r["verdict"]
(True, 'grounded')

The service, its app and the clients need ``pip install 'ragsense[guard]'`` (FastAPI, uvicorn,
prometheus-client, httpx); they are imported on first use, so ``import ragsense.guard`` stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ragsense.consens import weakest_words
from ragsense.guard._auth import ApiKeys, KeyLimiter
from ragsense.guard._check import Guard, Policy, check, shape_result
from ragsense.guard._config import GuardConfig
from ragsense.guard._limits import GuardRequestError, Limits
from ragsense.guard._memory import release_free_memory
from ragsense.guard._schema import CheckRequest, CheckResponse, CheckResult, CheckRow

if TYPE_CHECKING:
    from ragsense.guard._app import GuardService, create_app
    from ragsense.guard._batcher import MicroBatcher, QueueFull
    from ragsense.guard._client import AsyncGuardClient, CheckOptions, CheckReply, GuardClient, GuardError
    from ragsense.guard._server import RunningGuard, serve, start_in_thread

INSTALL_HINT = "pip install 'ragsense[guard]'"
_LAZY = {
    "GuardService": "ragsense.guard._app",
    "create_app": "ragsense.guard._app",
    "MicroBatcher": "ragsense.guard._batcher",
    "QueueFull": "ragsense.guard._batcher",
    "AsyncGuardClient": "ragsense.guard._client",
    "CheckOptions": "ragsense.guard._client",
    "CheckReply": "ragsense.guard._client",
    "GuardClient": "ragsense.guard._client",
    "GuardError": "ragsense.guard._client",
    "RunningGuard": "ragsense.guard._server",
    "serve": "ragsense.guard._server",
    "start_in_thread": "ragsense.guard._server",
}
_EXTRA_MODULES = ("fastapi", "uvicorn", "prometheus_client", "httpx", "starlette")


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ragsense.guard' has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        if exc.name is not None and exc.name.split(".")[0] in _EXTRA_MODULES:
            from ragsense.errors import BackendUnavailableError

            raise BackendUnavailableError(
                f"ragsense guard needs {exc.name.split('.')[0]}: {INSTALL_HINT}"
            ) from exc
        raise
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "INSTALL_HINT",
    "ApiKeys",
    "AsyncGuardClient",
    "CheckOptions",
    "CheckReply",
    "CheckRequest",
    "CheckResponse",
    "CheckResult",
    "CheckRow",
    "Guard",
    "GuardClient",
    "GuardConfig",
    "GuardError",
    "GuardRequestError",
    "GuardService",
    "KeyLimiter",
    "Limits",
    "MicroBatcher",
    "Policy",
    "QueueFull",
    "RunningGuard",
    "check",
    "create_app",
    "release_free_memory",
    "serve",
    "shape_result",
    "start_in_thread",
    "weakest_words",
]
