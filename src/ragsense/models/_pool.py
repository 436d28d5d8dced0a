"""One model pool per process: a model is loaded once however many metrics, commands or calls use it.

A name and its load options are the key (``("smollm2-135m", {"threads": 2})``); a model object given
by the caller is used as it is and never owned by the pool. :func:`shared_pool` is the process-wide
pool that ``ragsense.evaluate``, ``ragsense.grounding`` and the CLI use, so a notebook that scores
twice loads the model once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ragsense.models._interface import LanguageModel
from ragsense.models._registry import DEFAULT_MODEL, load_model

T = TypeVar("T")
ModelSpec = str | LanguageModel
"""A model name (``smollm2-135m``, ``openai:NAME``, ``fake``, ...) or a model object."""


def _key(name: str, options: Mapping[str, Any]) -> tuple[str, tuple[tuple[str, str], ...]]:
    # Options are small scalars (device, threads, base_url); repr keeps the key hashable for any value.
    return name, tuple(sorted((k, repr(v)) for k, v in options.items()))


class ModelPool:
    """Loads each named model once and hands out the same object to every user.

    A pool owns the models it loaded and closes them in :meth:`aclose` (or at the end of
    ``async with ModelPool() as pool:``); the process-wide :func:`shared_pool` lives as long as the
    process.

    >>> pool = ModelPool()
    >>> pool.get("fake") is pool.get("fake")
    True
    >>> len(pool)
    1
    """

    def __init__(self) -> None:
        self._models: dict[tuple[str, tuple[tuple[str, str], ...]], LanguageModel] = {}
        self._lock = threading.Lock()
        # Per-model state that several users share (e.g. ConSens's no-context cache), keyed by the
        # model's identity; the model is kept in the value so that its id cannot be reused.
        self._shared: dict[int, tuple[LanguageModel, dict[str, Any]]] = {}
        self._resources: dict[str, Any] = {}

    def get(self, spec: ModelSpec | None = None, **options: Any) -> LanguageModel:
        """The model for ``spec`` (default: the bundled default model), loading it on first use."""
        if spec is None:
            spec = DEFAULT_MODEL
        if not isinstance(spec, str):
            return spec
        key = _key(spec, options)
        with self._lock:
            model = self._models.get(key)
            if model is None:
                model = load_model(spec, **options)
                self._models[key] = model
            return model

    def shared(self, model: LanguageModel, name: str, factory: Callable[[], T]) -> T:
        """State that every user of ``model`` shares, made by ``factory`` on first request.

        This is how work two metrics have in common is done once: both ask for the same ``name``
        on the same model and get the same object (a cache, a scorer).

        >>> pool = ModelPool()
        >>> model = pool.get("fake")
        >>> pool.shared(model, "cache", dict) is pool.shared(model, "cache", dict)
        True
        """
        with self._lock:
            _, states = self._shared.setdefault(id(model), (model, {}))
            if name not in states:
                states[name] = factory()
            value: T = states[name]
            return value

    def resource(self, key: str, factory: Callable[[], T]) -> T:
        """Any other object loaded once per pool (an embedder), made by ``factory`` on first request.

        >>> pool = ModelPool()
        >>> pool.resource("x", list) is pool.resource("x", list)
        True
        """
        with self._lock:
            if key not in self._resources:
                self._resources[key] = factory()
            value: T = self._resources[key]
            return value

    def __len__(self) -> int:
        return len(self._models)

    def loaded(self) -> list[str]:
        """Names of the models loaded so far, in load order."""
        return [name for name, _ in self._models]

    async def __aenter__(self) -> ModelPool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every model the pool loaded (server clients release their connections)."""
        with self._lock:
            models = list(self._models.values())
            self._models.clear()
            self._shared.clear()
            self._resources.clear()
        for model in models:
            await model.aclose()


_SHARED = ModelPool()


def shared_pool() -> ModelPool:
    """The process-wide pool.

    >>> shared_pool() is shared_pool()
    True
    """
    return _SHARED
