"""The answer-context similarity baseline (cosine of MiniLM embeddings) as a metric."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragsense.consens import MODES, SimilarityMode, answer_context_similarity
from ragsense.contract import Needs
from ragsense.data import RagRow
from ragsense.embeddings import DEFAULT_EMBEDDER, Embedder, load_embedder
from ragsense.errors import ParameterError
from ragsense.models import ModelPool


class Similarity:
    """Cosine similarity of the answer's and the context's embeddings, in [-1, 1] (the ConSens paper's
    baseline). ``mode``: ``whole`` (embed the joined context once) or ``max_chunk`` (best of ~200-token
    windows, so an answer drawn from the end of a long context is seen).

    >>> Similarity().fields
    ('similarity', 'similarity_mode', 'embedder')
    """

    name = "similarity"
    needs = Needs(("contexts", "answer"))
    fields = ("similarity", "similarity_mode", "embedder")
    scores = ("similarity",)
    verdict = None

    def __init__(self, embedder: str = DEFAULT_EMBEDDER, *, mode: SimilarityMode | str = "whole") -> None:
        if mode not in MODES:
            raise ParameterError(f"must be one of {', '.join(MODES)}, got {mode!r}", parameter="mode")
        self.embedder_name = embedder
        self.mode: SimilarityMode = mode  # type: ignore[assignment]
        self._embedder: Embedder | None = None

    def settings(self) -> dict[str, Any]:
        return {"embedder": self.embedder_name, "mode": self.mode}

    def model_fingerprints(self) -> dict[str, str]:
        """The embedder's fingerprint (once set up), for the run store."""
        if self._embedder is None:
            return {}
        return {"embedder": str(getattr(self._embedder, "fingerprint", self._embedder.name))}

    async def setup(self, pool: ModelPool) -> None:
        name = self.embedder_name
        self._embedder = pool.resource(f"embedder:{name}", lambda: load_embedder(name))

    async def score(self, rows: Sequence[RagRow]) -> list[dict[str, Any] | Exception]:
        if self._embedder is None:
            raise ParameterError("call setup() first", parameter="Similarity")
        contexts = ["\n\n".join(c for c in r.contexts if c.strip()) for r in rows]
        values = answer_context_similarity([r.answer for r in rows], contexts, self._embedder, mode=self.mode)
        name = self._embedder.name
        return [{"similarity": v, "similarity_mode": self.mode, "embedder": name} for v in values]

    async def aclose(self) -> None:
        """Nothing to release: the embedder belongs to the pool."""
