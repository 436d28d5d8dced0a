"""The ConSens paper's baseline: cosine similarity between the answer's and the context's embeddings.

Two modes:

* ``"whole"`` (default, what the paper did): embed the whole context once. The paper used a
  long-context embedder; all-MiniLM-L6-v2 reads only the first 256 tokens, so with it a long
  context is judged by its beginning alone.
* ``"max_chunk"``: cut the context into windows of about ``window_tokens`` = 200 tokens that overlap
  by ``overlap_tokens`` = 50, cut at whitespace, and take the best cosine over the windows. Every
  window fits MiniLM, so an answer drawn from the end of a long context is still seen. A context
  that fits in one window gives the same score in both modes.

Window lengths are counted in the embedder's own tokens when it can count them (MiniLM can: BERT's
tokenizer splits on whitespace first, so a window's tokens are the sum of its words' tokens);
otherwise each whitespace-separated word counts as one token.

Callers join a context made of several documents with ``"\\n\\n"`` before calling.

>>> from ragsense.embeddings import load_embedder
>>> embedder = load_embedder("minilm")
>>> context = "Marie Curie was a physicist and chemist who did pioneering research on radioactivity."
>>> close, far = answer_context_similarity(
...     ["Curie researched radioactivity.", "The stock market fell."], [context, context], embedder
... )
>>> bool(close > far)
True
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import numpy as np

from ragsense.embeddings import Embedder, SupportsTokenCount

SimilarityMode = Literal["whole", "max_chunk"]
MODES: tuple[str, ...] = ("whole", "max_chunk")
_WORD = re.compile(r"\S+")


def _token_counter(embedder: object) -> SupportsTokenCount | None:
    # Wrappers such as CachedEmbedder expose the embedder they wrap as ``inner``.
    seen = 0
    while embedder is not None and seen < 8:
        if isinstance(embedder, SupportsTokenCount):
            return embedder
        embedder = getattr(embedder, "inner", None)
        seen += 1
    return None


def context_windows(
    context: str,
    *,
    window_tokens: int = 200,
    overlap_tokens: int = 50,
    counter: SupportsTokenCount | None = None,
) -> list[str]:
    """Split ``context`` at whitespace into windows of at most ``window_tokens`` tokens.

    Consecutive windows share at most ``overlap_tokens`` tokens (whole words; always fewer words
    than the window, so the windows move forward). A single word longer than the window gets a
    window of its own. Windows are slices of ``context``, so its whitespace is kept.

    >>> context_windows("a b c d e f g", window_tokens=4, overlap_tokens=2)
    ['a b c d', 'c d e f', 'e f g']
    >>> context_windows("short text")
    ['short text']
    """
    if window_tokens < 1 or not 0 <= overlap_tokens < window_tokens:
        raise ValueError(
            "need window_tokens >= 1 and 0 <= overlap_tokens < window_tokens, "
            f"got {window_tokens} and {overlap_tokens}"
        )
    spans = [m.span() for m in _WORD.finditer(context)]
    if not spans:
        return [context]
    words = [context[a:b] for a, b in spans]
    if counter is None:
        sizes = [1] * len(words)
    else:
        # token_counts includes the special tokens ([CLS], [SEP]); the empty text has only those.
        special = counter.token_counts([""])[0]
        unique = sorted(set(words))
        counted = dict(zip(unique, counter.token_counts(unique), strict=True))
        sizes = [max(counted[w] - special, 0) for w in words]
    windows: list[str] = []
    start = 0
    while True:
        end, total = start, 0
        while end < len(words) and (end == start or total + sizes[end] <= window_tokens):
            total += sizes[end]
            end += 1
        windows.append(context[spans[start][0] : spans[end - 1][1]])
        if end == len(words):
            return windows
        # Step back from the end while the overlap stays within budget, but always move forward.
        nxt, overlap = end, 0
        while nxt - 1 > start and overlap + sizes[nxt - 1] <= overlap_tokens:
            nxt -= 1
            overlap += sizes[nxt]
        start = nxt


def answer_context_similarity(
    answers: Sequence[str],
    contexts: Sequence[str],
    embedder: Embedder,
    *,
    mode: SimilarityMode = "whole",
    window_tokens: int = 200,
    overlap_tokens: int = 50,
) -> list[float]:
    """Cosine similarity of each answer with its context, in [-1, 1] (one float per pair).

    ``mode="whole"`` embeds each context as one text (truncated by the embedder if too long);
    ``mode="max_chunk"`` takes the maximum over the windows of :func:`context_windows`. Identical
    texts are embedded once per call.
    """
    if isinstance(answers, str) or isinstance(contexts, str):
        raise TypeError("answers and contexts are sequences of texts, not single strings")
    if len(answers) != len(contexts):
        raise ValueError(f"{len(answers)} answers but {len(contexts)} contexts")
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    if not answers:
        return []
    if mode == "whole":
        pieces = [[c] for c in contexts]
    else:
        counter = _token_counter(embedder)
        pieces = [
            context_windows(c, window_tokens=window_tokens, overlap_tokens=overlap_tokens, counter=counter)
            for c in contexts
        ]
    texts = list(dict.fromkeys([*answers, *(p for group in pieces for p in group)]))
    row = {t: i for i, t in enumerate(texts)}
    vectors = np.asarray(embedder.embed(texts), dtype=np.float64)
    scores: list[float] = []
    for answer, group in zip(answers, pieces, strict=True):
        cosines = vectors[[row[p] for p in group]] @ vectors[row[answer]]
        # Unit vectors in float32 can give a dot product a hair above 1.
        scores.append(float(np.clip(cosines.max(), -1.0, 1.0)))
    return scores
