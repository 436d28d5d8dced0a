"""Naming an embedder: ``load_embedder("minilm")``."""

from __future__ import annotations

from pathlib import Path

from ragsense.embeddings._cache import CachedEmbedder
from ragsense.embeddings._interface import Embedder
from ragsense.embeddings._minilm import MINILM_NAME, MiniLMEmbedder
from ragsense.errors import ModelNotFoundError

DEFAULT_EMBEDDER = "minilm"
# Accepted names (lower-cased) -> canonical name.
EMBEDDER_NAMES: dict[str, str] = {"minilm": MINILM_NAME, MINILM_NAME: MINILM_NAME}


def load_embedder(
    name: str = DEFAULT_EMBEDDER,
    *,
    cache_dir: str | Path | None = None,
    cache: bool = False,
    batch_size: int = 32,
    device: str = "cpu",
) -> Embedder:
    """The embedder called ``name`` (``"minilm"`` or ``"all-minilm-l6-v2"``, any case).

    With ``cache=True`` or a ``cache_dir`` the embedder is wrapped in a :class:`CachedEmbedder`
    (``cache_dir`` defaults to ``<ragsense cache dir>/embeddings``).

    >>> load_embedder("minilm").name
    'all-minilm-l6-v2'
    >>> load_embedder("bge")
    Traceback (most recent call last):
    ...
    ragsense.errors.ModelNotFoundError: unknown embedder 'bge'; known embedders: all-minilm-l6-v2, minilm
    """
    canonical = EMBEDDER_NAMES.get(name.strip().lower())
    if canonical is None:
        raise ModelNotFoundError(
            f"unknown embedder {name!r}; known embedders: {', '.join(sorted(EMBEDDER_NAMES))}"
        )
    embedder: Embedder = MiniLMEmbedder(batch_size=batch_size, device=device)
    if cache or cache_dir is not None:
        return CachedEmbedder(embedder, cache_dir)
    return embedder
