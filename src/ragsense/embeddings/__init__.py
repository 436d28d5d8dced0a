"""Sentence embeddings: one small interface, the bundled all-MiniLM-L6-v2, and a disk cache.

>>> from ragsense.embeddings import load_embedder
>>> embedder = load_embedder("minilm")
>>> a, b, c = embedder.embed(["The capital of France is Paris.", "Paris is France's capital.", "I like tea."])
>>> bool(a @ b > a @ c)
True
"""

from ragsense.embeddings._cache import CachedEmbedder
from ragsense.embeddings._interface import Embedder, SupportsTokenCount, Vectors
from ragsense.embeddings._minilm import MINILM_NAME, MiniLMEmbedder, bundled_model_dir
from ragsense.embeddings._registry import DEFAULT_EMBEDDER, available_embedders, load_embedder

__all__ = [
    "DEFAULT_EMBEDDER",
    "MINILM_NAME",
    "CachedEmbedder",
    "Embedder",
    "MiniLMEmbedder",
    "SupportsTokenCount",
    "Vectors",
    "available_embedders",
    "bundled_model_dir",
    "load_embedder",
]
