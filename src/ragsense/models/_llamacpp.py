"""llama.cpp backend (``llamacpp:PATH_OR_BUNDLED_NAME``, ``ragsense[llamacpp]``): log-probabilities of
continuations from a GGUF file, computed by llama.cpp on its quantized weights.

The transformers backend de-quantizes a GGUF to float32 and runs it with torch; llama.cpp runs the
quantized weights directly (about 4.5 bits a weight for Q4_K_M instead of 32), so the larger capable
readers need a fraction of the memory. Scores differ from the float32 path by the quantized matrix
products' rounding (docs/results.md, "Capable readers", measures how much and how fast).

Tokenization follows :class:`~ragsense.models.ScoreRequest`'s contract with llama.cpp's own tokenizer
(the GGUF's vocabulary): ``prompt + continuation`` is tokenized once, BOS added when the model asks for
one; a token belongs to the continuation when its character span ends after the prompt. Only
:class:`~ragsense.models.SupportsLogprobs` is offered; generation stays with the other backends.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragsense.errors import BackendUnavailableError
from ragsense.models._interface import ContinuationScore, ModelInfo, ScoreRequest
from ragsense.models._token_counts import TokenCounts

DEFAULT_CONTEXT = 4096
"""Tokens per sequence by default. llama.cpp keeps a float32 logit row per token of the window when
every position is scored (``logits_all``): 4,096 tokens of Qwen2.5's 151,936-word vocabulary take
2.5 GB, so the window is not the model's trained length unless asked (``context_window=``)."""


def _import_llama() -> Any:
    try:
        import llama_cpp
    except ImportError:
        raise BackendUnavailableError(
            "the llamacpp backend needs llama-cpp-python: pip install 'ragsense[llamacpp]' "
            "(it builds llama.cpp from source: a C++ compiler and cmake, several minutes)"
        ) from None
    return llama_cpp


def gguf_for(model_id: str) -> tuple[Path, str]:
    """The GGUF file of ``model_id`` (a bundled name, its weights checked, or a path) and its label."""
    from ragsense.models._bundled import BUNDLED_MODELS, checked_gguf

    if model_id in BUNDLED_MODELS:
        return checked_gguf(model_id), model_id
    path = Path(model_id).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"llamacpp: no GGUF file at {path} (and {model_id!r} is no bundled model)")
    return path, path.name


def _char_offsets(text: str) -> list[int]:
    """For each byte position of ``text`` in UTF-8 (and its end), the index of the character holding it."""
    positions: list[int] = []
    for i, ch in enumerate(text):
        positions.extend([i] * len(ch.encode("utf-8")))
    positions.append(len(text))
    return positions


def _fingerprint(path: Path) -> str:
    """A stable identity for cache keys: the file's size and its first and last MiB (reading a whole
    gigabyte on every load would cost more than the model's first rows)."""
    digest = hashlib.sha256(str(path.stat().st_size).encode())
    with path.open("rb") as fh:
        digest.update(fh.read(1 << 20))
        fh.seek(max(path.stat().st_size - (1 << 20), 0))
        digest.update(fh.read(1 << 20))
    return digest.hexdigest()[:16]


class LlamaCppModel:
    """One llama.cpp context scoring requests one after another (deterministic for a fixed thread count)."""

    def __init__(
        self, path: Path, label: str, *, threads: int, context_window: int, fingerprint: str
    ) -> None:
        llama_cpp = _import_llama()
        self._llm = llama_cpp.Llama(
            model_path=str(path),
            n_ctx=context_window,
            n_batch=min(512, context_window),
            n_threads=threads,
            n_threads_batch=threads,
            logits_all=True,
            verbose=False,
            seed=0,
        )
        self._info = ModelInfo(
            name=label,
            backend="llamacpp",
            context_window=context_window,
            fingerprint=fingerprint,
            extra={"threads": str(threads), "gguf": path.name},
        )
        # The relevance window counts every document and sentence of a row: memoised as in every backend.
        self._token_counts = TokenCounts(self._count_uncached)

    @property
    def info(self) -> ModelInfo:
        return self._info

    def count_tokens(self, text: str) -> int:
        return self._token_counts(text)

    def _count_uncached(self, text: str) -> int:
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    async def aclose(self) -> None:
        self._llm.close()

    async def score(self, requests: Sequence[ScoreRequest]) -> list[ContinuationScore]:
        return [self._score_one(r) for r in requests]

    def _score_one(self, request: ScoreRequest) -> ContinuationScore:
        text = request.prompt + request.continuation
        data = text.encode("utf-8")
        ids = self._llm.tokenize(data, add_bos=True, special=False)
        if len(ids) > self._info.context_window:
            raise ValueError(f"{len(ids)} tokens, over the context window of {self._info.context_window}")
        # Byte spans from each token's own bytes; a leading special token (BOS) has none.
        pieces = [self._llm.detokenize([t], special=False) for t in ids]
        if b"".join(pieces) != data:
            raise ValueError("llama.cpp's tokens do not spell the text back; cannot place the continuation")
        chars = _char_offsets(text)
        spans, at = [], 0
        for piece in pieces:
            spans.append((chars[at], chars[at + len(piece)] if piece else chars[at]))
            at += len(piece)
        cut = len(request.prompt)
        first = next((i for i, (s, e) in enumerate(spans) if e > cut), len(ids))
        if first == len(ids):
            raise ValueError("the continuation has no token")
        if first == 0:
            raise ValueError("the continuation's first token is the text's first: it has no left context")
        self._llm.reset()
        self._llm.eval(ids)
        logits = np.asarray(self._llm.scores[first - 1 : len(ids) - 1], dtype=np.float32)
        top = logits.max(axis=1, keepdims=True)
        norm = np.log(np.exp(logits - top).sum(axis=1, keepdims=True, dtype=np.float32)) + top
        targets = np.asarray(ids[first:])
        logprobs = (logits[np.arange(len(targets)), targets] - norm[:, 0]).astype(np.float32)
        offsets = tuple((max(s - cut, 0), e - cut) for s, e in spans[first:])
        return ContinuationScore(
            tokens=tuple(p.decode("utf-8", errors="replace") for p in pieces[first:]),
            offsets=offsets,
            logprobs=tuple(float(x) for x in logprobs),
            prompt_tokens=first,
            straddles_boundary=spans[first][0] < cut,
        )


def create_llamacpp_model(
    model_id: str,
    *,
    threads: int | None = None,
    context_window: int = DEFAULT_CONTEXT,
    **unused: Any,
) -> LlamaCppModel:
    """Load ``model_id``: a bundled name (its GGUF joined and checked as for the transformers backend)
    or the path of a GGUF file. ``threads``: llama.cpp's threads (default 1, the same default as the
    evaluation runner's one-thread-per-process rule); ``context_window``: tokens per sequence
    (:data:`DEFAULT_CONTEXT`)."""
    if unused:
        raise TypeError(f"unknown options for the llamacpp backend: {', '.join(sorted(unused))}")
    _import_llama()
    path, label = gguf_for(model_id)
    digest = _fingerprint(path)
    return LlamaCppModel(
        path,
        label,
        threads=threads or 1,
        context_window=context_window,
        fingerprint=f"llamacpp:{digest}:{context_window}",
    )
