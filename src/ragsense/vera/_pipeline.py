"""VERA around any RAG system: check the need for retrieval, retrieve, trim, answer, edit the answer."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ragsense._async import run_sync
from ragsense.data import RagRow
from ragsense.rag import NaiveRagPipeline, RetrievedDocument, first_line
from ragsense.vera._enhance import AnswerFn
from ragsense.vera._evaluator import VeraEvaluator
from ragsense.vera._results import RetrievalCheck, VeraEnhancement
from ragsense.vera._steps import JudgeFailure

Retriever = Callable[[list[str]], list[list[str]]]
"""Documents (best first) for each question: ``retrieve(questions)``."""


@dataclass(frozen=True)
class VeraAnswer:
    """The pipeline's output for one question.

    ``answer`` is VERA's final answer (the refusal message when ``refused``); ``raw_answer`` what the
    generator said from the trimmed context; ``retrieved`` the documents as retrieved (empty when the
    retrieval check said none are needed); ``enhancement`` holds every score and decision, or
    ``error`` says why the judge could not finish this question.
    """

    question: str
    answer: str
    refused: bool
    retrieved: list[str]
    raw_answer: str | None
    retrieval: RetrievalCheck | None
    enhancement: VeraEnhancement | None
    error: str | None = None

    @property
    def scores(self) -> dict[str, float | None]:
        """The three VERA scores (None where a step did not run)."""
        e = self.enhancement
        if e is None:
            return {"context_relevance": None, "response_relevance": None, "response_adherence": None}
        return {
            "context_relevance": e.context.score,
            "response_relevance": None if e.relevance is None else e.relevance.score,
            "response_adherence": None if e.adherence is None else e.adherence.score,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answer": self.answer,
            "refused": self.refused,
            "retrieved": self.retrieved,
            "raw_answer": self.raw_answer,
            **self.scores,
            "error": self.error,
            "enhancement": None if self.enhancement is None else self.enhancement.to_record(),
        }


class VeraPipeline:
    """Wrap a retriever and a generator with VERA's four steps.

    ``retrieve`` maps questions to documents; ``generate`` answers questions from documents (both
    batched). :meth:`from_naive` wraps ragsense's own :class:`~ragsense.rag.NaiveRagPipeline`.

    >>> from ragsense.vera import REFUSAL, VeraEvaluator, VeraSettings
    >>> async def generate(questions, documents):
    ...     return ["Mara Quint." for _ in questions]
    >>> pipeline = VeraPipeline(
    ...     lambda qs: [["The Orvel bridge was designed by Mara Quint."] for _ in qs],
    ...     generate, VeraEvaluator("fake", VeraSettings(cache=False, check_retrieval=False)))
    >>> [a] = pipeline.answer_sync(["Who designed the Orvel bridge?"])
    >>> a.retrieved  # the fake model's likelihoods ignore the statement: no lift, so VERA refuses
    ['The Orvel bridge was designed by Mara Quint.']
    >>> a.refused, a.answer == REFUSAL
    (True, True)
    """

    def __init__(self, retrieve: Retriever, generate: AnswerFn, vera: VeraEvaluator) -> None:
        self.retrieve = retrieve
        self.generate = generate
        self.vera = vera

    @classmethod
    def from_naive(cls, pipeline: NaiveRagPipeline, vera: VeraEvaluator) -> VeraPipeline:
        """VERA around a :class:`~ragsense.rag.NaiveRagPipeline` (its retriever, prompt and generator)."""

        def retrieve(questions: list[str]) -> list[list[str]]:
            return [[d.text for d in docs] for docs in pipeline.retrieve(questions)]

        async def generate(questions: list[str], documents: list[list[str]]) -> list[str]:
            retrieved = [
                [RetrievedDocument(-1, f"vera-{i}", text, 0.0, i) for i, text in enumerate(docs)]
                for docs in documents
            ]
            answers = await pipeline.answer_from(questions, retrieved)
            return [first_line(a.answer) for a in answers]

        return cls(retrieve, generate, vera)

    async def answer(self, questions: Sequence[str]) -> list[VeraAnswer]:
        """Run every question through check, retrieval, trimming, generation and answer editing."""
        questions = list(questions)
        checks: list[RetrievalCheck | Exception | None] = [None] * len(questions)
        if self.vera.settings.check_retrieval:
            checks = list(await self.vera.check_retrieval_need(questions))
        needs = [not isinstance(c, RetrievalCheck) or c.required for c in checks]
        wanted = [q for q, need in zip(questions, needs, strict=True) if need]
        found = iter(self.retrieve(wanted) if wanted else [])
        documents = [next(found) if need else [] for need in needs]
        rows = [
            RagRow(id=str(i), question=q, contexts=docs or [""], answer="")
            for i, (q, docs) in enumerate(zip(questions, documents, strict=True))
        ]
        out: list[VeraAnswer] = []
        with_docs = [i for i, docs in enumerate(documents) if any(d.strip() for d in docs)]
        enhanced = dict(
            zip(with_docs, await self.vera.enhance([rows[i] for i in with_docs], self.generate), strict=True)
        )
        without = [i for i in range(len(questions)) if i not in enhanced]
        direct = (
            dict(
                zip(
                    without,
                    await self.generate([questions[i] for i in without], [[] for _ in without]),
                    strict=True,
                )
            )
            if without
            else {}
        )
        for i, question in enumerate(questions):
            raw_check = checks[i]
            check = raw_check if isinstance(raw_check, RetrievalCheck) else None
            if i in direct:
                note = None if check is not None and not check.required else "no documents were retrieved"
                out.append(VeraAnswer(question, direct[i], False, [], direct[i], check, None, note))
                continue
            result = enhanced[i]
            if isinstance(result, Exception):
                error = (
                    str(result) if isinstance(result, JudgeFailure) else f"{type(result).__name__}: {result}"
                )
                out.append(VeraAnswer(question, "", False, documents[i], None, check, None, error))
                continue
            out.append(
                VeraAnswer(
                    question,
                    result.answer,
                    result.refused,
                    documents[i],
                    result.original_answer,
                    check,
                    result,
                )
            )
        return out

    def answer_sync(self, questions: Sequence[str]) -> list[VeraAnswer]:
        return run_sync(self.answer(questions))
