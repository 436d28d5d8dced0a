"""Naming a model: one string, resolved to a backend factory found through entry points.

Model names:

* ``smollm2-135m`` (default), ``gemma3-270m``: bundled models, transformers backend.
* ``transformers:PATH_OR_HUB_ID``: any causal LM through transformers (a hub id only from the local
  cache: ragsense never downloads at run time).
* ``openai:MODEL`` with ``base_url=...``: an OpenAI-compatible server (vLLM, ``ragsense serve``, ...).
* ``vllm:PATH_OR_BUNDLED_NAME``: vLLM's offline engine on a CUDA GPU (``ragsense[vllm]``).
* ``fake`` or ``fake:NAME``: a deterministic stand-in for fast unit tests.
* ``BACKEND:MODEL`` for any backend a plugin registers under the ``ragsense.models`` entry point group.

Built-in backends are registered in ``pyproject.toml`` through the same entry point group as plugins,
so there is a single registration path and no import side effects.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from ragsense.errors import ModelNotFoundError
from ragsense.models._interface import LanguageModel

ENTRY_POINT_GROUP = "ragsense.models"
DEFAULT_MODEL = "smollm2-135m"

# Used only when the package metadata is missing (running from a source tree that was never
# installed); mirrors pyproject.toml.
_BUILTIN_FACTORIES = {
    "transformers": "ragsense.models._transformers:create_transformers_model",
    "openai": "ragsense.models._openai_server:create_openai_model",
    "fake": "ragsense.models._fake:create_fake_model",
    "vllm": "ragsense.models._vllm:create_vllm_model",
}

Factory = Callable[..., LanguageModel]


def _load_target(target: str) -> Factory:
    module_name, _, attr = target.partition(":")
    factory: Factory = getattr(importlib.import_module(module_name), attr)
    return factory


def available_backends() -> dict[str, str]:
    """Backend name -> ``module:factory`` for every registered backend (built-in and plugins)."""
    found = dict(_BUILTIN_FACTORIES)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found[ep.name] = ep.value
    return found


def resolve_name(name: str) -> tuple[str, str]:
    """Split a model name into ``(backend, model_id)``.

    >>> resolve_name("smollm2-135m")
    ('transformers', 'smollm2-135m')
    >>> resolve_name("openai:my-model")
    ('openai', 'my-model')
    """
    from ragsense.models._bundled import BUNDLED_MODELS

    if name in BUNDLED_MODELS:
        return "transformers", name
    if name == "fake":
        return "fake", "fake"
    backend, sep, model_id = name.partition(":")
    if not sep or not model_id:
        known = ", ".join(sorted(BUNDLED_MODELS))
        raise ModelNotFoundError(
            f"unknown model {name!r}: use a bundled name ({known}) or BACKEND:MODEL, "
            f"with BACKEND one of {', '.join(sorted(available_backends()))}"
        )
    if backend not in available_backends():
        raise ModelNotFoundError(
            f"unknown model backend {backend!r} in {name!r}; registered backends: "
            f"{', '.join(sorted(available_backends()))}"
        )
    return backend, model_id


def load_model(name: str = DEFAULT_MODEL, **options: Any) -> LanguageModel:
    """Create the model named ``name``; ``options`` go to the backend's factory.

    >>> model = load_model("fake")
    >>> model.info.name
    'fake'
    """
    backend, model_id = resolve_name(name)
    factory = _load_target(available_backends()[backend])
    return factory(model_id, **options)
