"""What an embedder is: a name, a fingerprint for caches, a dimension, and ``embed``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to unit vectors.

    ``embed`` returns a C-contiguous float32 array of shape ``(len(texts), dim)`` whose rows have
    L2 norm 1, so the dot product of two rows is their cosine similarity. ``fingerprint`` changes
    whenever the vectors could change (weights, tokenizer, pooling); caches key on it.
    """

    @property
    def name(self) -> str: ...

    @property
    def fingerprint(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Vectors: ...


@runtime_checkable
class SupportsTokenCount(Protocol):
    """An embedder that can say how long a text is in its own tokens (to find truncated texts)."""

    @property
    def max_tokens(self) -> int: ...

    def token_counts(self, texts: Sequence[str]) -> list[int]: ...


def check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, refusing a bare string (a str is a Sequence[str] of characters)."""
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not a single str: wrap it in a list")
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise TypeError(f"text {i} is {type(text).__name__}, not str")
    return out
