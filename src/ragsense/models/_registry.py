"""Naming a model: one string, resolved to a backend factory found through entry points.

Model names:

* ``smollm2-135m`` (default), ``gemma3-270m``: bundled models, transformers backend.
* ``qwen2.5-coder-0.5b``, ``qwen2.5-coder-1.5b``: the capable readers (``ragsense[capable]``), loaded
  the same way from pinned, checked weight packages.
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

from typing import Any

from ragsense.errors import ModelNotFoundError
from ragsense.models._interface import LanguageModel
from ragsense.plugins import EntryPointRegistry

ENTRY_POINT_GROUP = "ragsense.models"
DEFAULT_MODEL = "smollm2-135m"

BACKENDS = EntryPointRegistry[LanguageModel](
    ENTRY_POINT_GROUP, kind="model backend", not_found=ModelNotFoundError
)
"""The model backends: each a factory ``(model_id, **options) -> LanguageModel``."""


def available_backends() -> dict[str, str]:
    """Backend name -> ``module:factory`` for every registered backend (built-in and plugins).

    >>> available_backends()["fake"]
    'ragsense.models._fake:create_fake_model'
    """
    return BACKENDS.targets()


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
            f"with BACKEND one of {', '.join(BACKENDS.names())}"
        )
    if backend not in BACKENDS:
        raise ModelNotFoundError(
            f"unknown model backend {backend!r} in {name!r}; registered backends: "
            f"{', '.join(BACKENDS.names())}"
        )
    return backend, model_id


def load_model(name: str = DEFAULT_MODEL, **options: Any) -> LanguageModel:
    """Create the model named ``name``; ``options`` go to the backend's factory, which must take each
    (the built-in backends take any, since one set of model options serves every backend).

    >>> model = load_model("fake")
    >>> model.info.name
    'fake'
    """
    backend, model_id = resolve_name(name)
    return BACKENDS.create(backend, model_id, options=options)
