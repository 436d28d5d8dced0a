"""Naming an embedder: ``load_embedder("minilm")``, through the ``ragsense.embeddings`` entry points.

A plug-in registers a factory (a class or function taking keyword options and returning an
:class:`~ragsense.embeddings.Embedder`) in its ``pyproject.toml``; the bundled all-MiniLM-L6-v2 is
registered in ragsense's own, under both its names (``minilm`` and ``all-minilm-l6-v2``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragsense.embeddings._cache import CachedEmbedder
from ragsense.embeddings._interface import Embedder
from ragsense.errors import ModelNotFoundError
from ragsense.plugins import EntryPointRegistry

ENTRY_POINT_GROUP = "ragsense.embeddings"
DEFAULT_EMBEDDER = "minilm"

EMBEDDERS = EntryPointRegistry[Embedder](ENTRY_POINT_GROUP, kind="embedder", not_found=ModelNotFoundError)


def available_embedders() -> dict[str, str]:
    """Embedder name -> ``module:factory`` for every registered embedder (built-in and plug-ins).

    >>> available_embedders()["minilm"]
    'ragsense.embeddings._minilm:MiniLMEmbedder'
    """
    return EMBEDDERS.targets()


def load_embedder(
    name: str = DEFAULT_EMBEDDER,
    *,
    cache_dir: str | Path | None = None,
    cache: bool = False,
    **options: Any,
) -> Embedder:
    """The embedder registered as ``name`` (any case), made with ``options`` (MiniLM's: ``batch_size``,
    default 32, and ``device``, default ``"cpu"``); an option its factory does not take is an error.

    With ``cache=True`` or a ``cache_dir`` the embedder is wrapped in a :class:`CachedEmbedder`
    (``cache_dir`` defaults to ``<ragsense cache dir>/embeddings``).

    >>> load_embedder("minilm").name
    'all-minilm-l6-v2'
    >>> load_embedder("bge")
    Traceback (most recent call last):
    ...
    ragsense.errors.ModelNotFoundError: unknown embedder 'bge'; registered embedders: all-minilm-l6-v2, minilm
    """
    embedder = EMBEDDERS.create(name.strip().lower(), options=options)
    if cache or cache_dir is not None:
        return CachedEmbedder(embedder, cache_dir)
    return embedder
