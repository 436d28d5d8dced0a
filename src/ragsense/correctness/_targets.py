"""Target correctness: how close the Normal-condition answer is to the ground truth, in [0, 1].

``cosine``: cosine similarity of MiniLM embeddings (all-MiniLM-L6-v2, bundled), negative values
clipped to 0. ``rouge_f1`` / ``rouge_precision``: ROUGE-L (longest common subsequence of lowercased
alphanumeric words) F1 or precision. With several ground-truth answers (SQuAD has up to five) the best
match counts, as SQuAD's own scorer does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import numpy as np

from ragsense.errors import InputError

Metric = Literal["cosine", "rouge_f1", "rouge_precision"]
METRICS: tuple[Metric, ...] = ("cosine", "rouge_f1", "rouge_precision")

_WORD = re.compile(r"[^\W_]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _lcs(a: Sequence[str], b: Sequence[str]) -> int:
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def rouge_l(candidate: str, reference: str) -> tuple[float, float, float]:
    """ROUGE-L ``(precision, recall, f1)`` of two texts.

    >>> rouge_l("in the 10th century", "10th century")
    (0.5, 1.0, 0.6667)
    """
    cand, ref = _words(candidate), _words(reference)
    if not cand or not ref:
        return 0.0, 0.0, 0.0
    lcs = _lcs(cand, ref)
    if lcs == 0:
        return 0.0, 0.0, 0.0
    p, r = lcs / len(cand), lcs / len(ref)
    return round(p, 4), round(r, 4), round(2 * p * r / (p + r), 4)


def correctness_targets(
    answers: Sequence[str],
    references: Sequence[Sequence[str]],
    metric: Metric = "cosine",
    *,
    embedder: object | None = None,
) -> list[float]:
    """The target for each answer: the best similarity to any of its references.

    An answer with no reference raises :class:`InputError` naming its row and the ``reference`` field.

    >>> correctness_targets(["the Normans"], [["Normans", "the Norse"]], "rouge_f1")
    [0.6667]
    """
    if metric not in METRICS:
        raise ValueError(f"unknown correctness metric {metric!r}; choose from {', '.join(METRICS)}")
    for row, refs in enumerate(references):
        if not any(r.strip() for r in refs):
            raise InputError("a ground-truth answer is needed to train", row=row, field="reference")
    if metric != "cosine":
        index = 2 if metric == "rouge_f1" else 0
        return [
            max(rouge_l(a, r)[index] for r in refs if r.strip())
            for a, refs in zip(answers, references, strict=True)
        ]
    if embedder is None:
        from ragsense.embeddings import load_embedder

        embedder = load_embedder("minilm", cache=True)
    flat = [r for refs in references for r in refs if r.strip()]
    vectors = np.asarray(embedder.embed([*answers, *flat]), dtype=np.float64)  # type: ignore[attr-defined]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.where(norms == 0, 1.0, norms)
    targets: list[float] = []
    pos = len(answers)
    for i, refs in enumerate(references):
        n = sum(1 for r in refs if r.strip())
        sims = vectors[pos : pos + n] @ vectors[i]
        pos += n
        # An empty answer embeds to something; it is still no answer: similarity 0.
        best = float(sims.max()) if answers[i].strip() else 0.0
        targets.append(round(min(1.0, max(0.0, best)), 6))
    return targets
