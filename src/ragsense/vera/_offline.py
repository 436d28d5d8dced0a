"""VERA's steps without a judge: offline signals from the bundled models (issue 28).

Context relevance ranks a row's sentences by how relevant they are to the question; the candidates
(BM25, MiniLM cosine, and the ConSens likelihood lift of the question given the sentence) were
compared on SQuAD 2.0 answerable questions, chosen on a development part and reported on another
(docs/results.md, "VERA offline signals").
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np

from ragsense.embeddings import DEFAULT_EMBEDDER, Embedder, load_embedder
from ragsense.errors import CapabilityError, ParameterError
from ragsense.models import ModelPool, ModelSpec, ScoreRequest, SupportsLogprobs
from ragsense.rag import BM25
from ragsense.vera.judges import Verdict

LIFT_PROMPT = "Question:"
"""The prompt the question is scored after, alone; with a sentence it follows ``Document: ...``."""


def sentence_lift_requests(question: str, sentences: Sequence[str]) -> list[ScoreRequest]:
    """The question scored without a sentence, then after each sentence: the likelihood lift requests.

    The lift of sentence i is the mean log-probability per token of the question after the sentence
    minus without it (request 0).

    >>> [r.prompt for r in sentence_lift_requests("Who?", ["A b.", "C d."])]
    ['Question:', 'Document: A b.\\nQuestion:', 'Document: C d.\\nQuestion:']
    """
    return [ScoreRequest(LIFT_PROMPT, " " + question)] + [
        ScoreRequest(f"Document: {s}\n{LIFT_PROMPT}", " " + question) for s in sentences
    ]


RETRIEVAL_NEED_VERSION = 1
"""The format version of ``retrieval_need.json``; a file of another version is refused."""


def needs_documents_set() -> list[dict[str, Any]]:
    """The committed "needs documents?" set: SQuAD questions by id, and questions written for the set.

    >>> rows = needs_documents_set()
    >>> sum(r["needs_documents"] for r in rows) >= 100, sum(not r["needs_documents"] for r in rows) >= 100
    (True, True)
    """
    text = files("ragsense.data").joinpath("samples", "needs_documents.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@dataclass(frozen=True)
class RetrievalNeedModel:
    """Step 1 offline: P(the question needs documents) from its MiniLM embedding, by a logistic regression
    shipped as JSON weights (``retrieval_need.json``; never a pickle).

    Fitted on the development half of :func:`needs_documents_set` by ``python -m
    papers.vera.needs_documents`` and reported on the other half (docs/results.md).
    """

    coef: tuple[float, ...]
    intercept: float
    threshold: float
    embedder: str

    @classmethod
    def load(cls, path: str | Path | None = None) -> RetrievalNeedModel:
        """The bundled model, or one written by the fitting script at ``path``."""
        resource = files("ragsense.vera").joinpath("retrieval_need.json") if path is None else Path(path)
        data = json.loads(resource.read_text(encoding="utf-8"))
        if data.get("version") != RETRIEVAL_NEED_VERSION:
            raise ParameterError(
                f"{resource}: format version {data.get('version')!r}, this ragsense reads "
                f"{RETRIEVAL_NEED_VERSION}",
                parameter="retrieval_need",
            )
        return cls(
            tuple(float(c) for c in data["coef"]),
            float(data["intercept"]),
            float(data["threshold"]),
            str(data["embedder"]),
        )

    def probabilities(self, vectors: Any) -> list[float]:
        """P(needs documents) for each row of ``vectors`` (the questions' embeddings)."""
        z = np.asarray(vectors, dtype=np.float64) @ np.asarray(self.coef) + self.intercept
        return [float(p) for p in 1.0 / (1.0 + np.exp(-z))]


@dataclass(frozen=True)
class KeepRule:
    """How the context step keeps sentences from their scores: the signals fused (one signal is used as
    is; several by reciprocal rank fusion) and the rule, ``top`` (the ``value`` best sentences of the
    row) or ``margin`` (every sentence within ``value`` of the row's best score)."""

    signals: tuple[str, ...]
    rule: str
    value: float

    def keep(self, scores: dict[str, list[float]]) -> tuple[list[bool], list[float]]:
        """Per sentence whether it is kept, and the score the rule read."""
        values = fuse([scores[s] for s in self.signals])
        if not values:
            return [], []
        if self.rule == "top":
            ranks = rank(values)
            return [r < self.value for r in ranks], values
        top = max(values)
        return [v >= top - self.value for v in values], values


RRF_K = 60


def rank(values: Sequence[float]) -> list[int]:
    """Each value's rank, 0 for the highest (ties: the earlier sentence first)."""
    order = sorted(range(len(values)), key=lambda i: (-values[i], i))
    ranks = [0] * len(values)
    for r, i in enumerate(order):
        ranks[i] = r
    return ranks


def fuse(signals: Sequence[Sequence[float]]) -> list[float]:
    """One signal as is; several by reciprocal rank fusion, sum of 1 / (60 + rank).

    >>> fuse([[0.1, 0.9]]), fuse([[0.1, 0.9], [5.0, 1.0]])
    ([0.1, 0.9], [0.03306010928961749, 0.03306010928961749])
    """
    if len(signals) == 1:
        return [float(v) for v in signals[0]]
    ranks = [rank(s) for s in signals]
    return [math.fsum(1.0 / (RRF_K + r[i]) for r in ranks) for i in range(len(signals[0]))]


DEFAULT_CONTEXT_RULE = KeepRule(("minilm",), "margin", 0.15)
"""Keep every sentence whose MiniLM cosine with the question is within 0.15 of the row's best. Chosen
on the development part of SQuAD 2.0 answerable questions (250 rows) among BM25, MiniLM, the likelihood
lift and their fusions under top-k and margin rules: the rule that keeps the fewest other sentences
while keeping the answer's sentence in at least 92% of development rows; on the report part (250 rows,
other articles) it keeps the answer's sentence in 0.916 [0.875, 0.944] of rows and 0.270 of the other
sentences (docs/results.md, "VERA offline signals")."""

STATEMENT_LIFT_THRESHOLD = 0.0
"""Step 3 offline: a statement is relevant when it raises the question's likelihood (lift above this).
No offline signal told WikiEval's answers from its poor answers (pairwise accuracy at chance for every
threshold of the lift and of MiniLM, docs/results.md), so step 3 removes only what makes the question
less likely: a step at chance should remove as little as it can."""


class OfflineSignals:
    """Steps 1-3 without a judge: the retrieval-need regression, the context sentences' scores under
    :data:`DEFAULT_CONTEXT_RULE`, and each statement's likelihood lift of the question. MiniLM and the
    regression load on first use; the likelihood model is ``lift_model`` from the pool (VERA passes
    its ConSens model)."""

    def __init__(self, pool: ModelPool, lift_model: ModelSpec, rule: KeepRule = DEFAULT_CONTEXT_RULE) -> None:
        self.pool = pool
        self.lift_model = lift_model
        self.rule = rule
        self._embedder: Embedder | None = None
        self._need: RetrievalNeedModel | None = None

    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = load_embedder(DEFAULT_EMBEDDER)
        return self._embedder

    async def lifts(self, pairs: Sequence[tuple[str, Sequence[str]]]) -> list[list[float]]:
        """For each (question, texts): the mean per-token log-probability the question gains after each
        text, in one batched scoring call for all pairs."""
        requests: list[ScoreRequest] = []
        for question, texts in pairs:
            requests.extend(sentence_lift_requests(question, texts))
        model = self.pool.get(self.lift_model)
        if not isinstance(model, SupportsLogprobs):
            raise CapabilityError(
                f"VERA's offline likelihood signals need a model with log-probabilities; {model.info.name!r} "
                "has none (set consens_model, or signals='judge')"
            )
        scored = iter(await model.score(requests) if requests else [])
        out: list[list[float]] = []
        for _question, texts in pairs:
            base = next(scored)
            out.append([(next(scored).total - base.total) / max(1, base.n_tokens) for _ in texts])
        return out

    async def sentence_scores(
        self, questions: Sequence[str], sentences: Sequence[Sequence[str]]
    ) -> list[dict[str, list[float]]]:
        """Every signal the rule reads, per row, for each of the row's sentences (all its documents)."""
        wanted = set(self.rule.signals)
        out: list[dict[str, list[float]]] = [{} for _ in questions]
        if "bm25" in wanted:
            for scores, q, texts in zip(out, questions, sentences, strict=True):
                scores["bm25"] = BM25(texts).scores(q) if texts else []
        if "minilm" in wanted:
            flat = [t for q, texts in zip(questions, sentences, strict=True) for t in (q, *texts)]
            vectors: Iterator[Any] = iter(self.embedder().embed(flat) if flat else [])
            for scores, texts in zip(out, sentences, strict=True):
                q = next(vectors)
                scores["minilm"] = [float(q @ next(vectors)) for _ in texts]
        if "lift" in wanted:
            lifts = await self.lifts(list(zip(questions, sentences, strict=True)))
            for scores, row_lifts in zip(out, lifts, strict=True):
                scores["lift"] = row_lifts
        return out

    async def sentence_verdicts(
        self, questions: Sequence[str], sentences: Sequence[Sequence[str]]
    ) -> list[list[Verdict]]:
        """Step 2 offline: ``relevant`` for the sentences the rule keeps, each with its evidence."""
        out: list[list[Verdict]] = []
        for scores in await self.sentence_scores(questions, sentences):
            keep, values = self.rule.keep(scores)
            ranks = rank(values)
            row: list[Verdict] = []
            for i, k in enumerate(keep):
                evidence = ", ".join(f"{s} {scores[s][i]:.3f}" for s in self.rule.signals)
                row.append(
                    Verdict(
                        "relevant" if k else "irrelevant",
                        reason=f"offline: rank {ranks[i] + 1} of {len(keep)} ({evidence}); "
                        f"kept: {self.rule.rule} {self.rule.value:g}",
                    )
                )
            out.append(row)
        return out

    async def statement_verdicts(
        self, questions: Sequence[str], statements: Sequence[Sequence[str]]
    ) -> list[list[Verdict]]:
        """Step 3 offline: a statement is relevant when it raises the question's likelihood."""
        lifts = await self.lifts(list(zip(questions, statements, strict=True)))
        return [
            [
                Verdict(
                    "relevant" if lift > STATEMENT_LIFT_THRESHOLD else "irrelevant",
                    reason=f"offline: the question's likelihood lift {lift:+.3f} per token "
                    f"(relevant above {STATEMENT_LIFT_THRESHOLD:g})",
                )
                for lift in row
            ]
            for row in lifts
        ]

    def retrieval_verdicts(self, questions: Sequence[str]) -> list[Verdict]:
        """Step 1 offline: ``yes`` (documents needed) when the regression's probability reaches its
        threshold."""
        if self._need is None:
            self._need = RetrievalNeedModel.load()
        if not questions:
            return []
        probabilities = self._need.probabilities(self.embedder().embed(list(questions)))
        out: list[Verdict] = []
        for p in probabilities:
            need = p >= self._need.threshold
            out.append(
                Verdict(
                    "yes" if need else "no",
                    confidence=p if need else 1.0 - p,
                    reason=f"offline: P(needs documents) = {p:.3f} (MiniLM regression "
                    f"v{RETRIEVAL_NEED_VERSION}, threshold {self._need.threshold:g})",
                )
            )
        return out
