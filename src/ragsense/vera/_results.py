"""What VERA returns: per-step scores and the decision on every sentence and statement."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

REFUSAL = "The sources do not contain the information needed to answer this question."


@dataclass(frozen=True)
class Decision:
    """The judgment of one context sentence or answer statement.

    ``start``/``end`` are character offsets in the text the item came from (the context document
    ``document`` for sentences, the answer for statements; None when a judge rewrote the statement).
    ``keep`` is whether the item counts for the step's score and stays in the enhanced text.
    ``grounded_probability`` combines the signals the adherence step was asked to use; ``consens`` is
    the statement's ConSens score when that signal was used, ``consens_by_aggregation`` its score
    under every aggregation and ``consens_word_nll`` the (no-context, context) NLL of each scored word,
    so the decision can be recomputed under any aggregation without running the model again.
    ``token_logprobs`` (adherence, label-scoring judges) holds each label's token log-probabilities, so
    any label-scoring rule or calibration can be recomputed too.
    """

    index: int
    text: str
    keep: bool
    label: str | None
    start: int | None = None
    end: int | None = None
    confidence: float | None = None
    reason: str | None = None
    document: int | None = None
    consens: float | None = None
    grounded_probability: float | None = None
    correction: str | None = None
    forced_split: bool = False
    consens_by_aggregation: dict[str, float] | None = None
    consens_word_nll: list[tuple[float, float]] | None = None
    token_logprobs: dict[str, list[float]] | None = None


@dataclass(frozen=True)
class StepResult:
    """One VERA step: its score in [0, 1] (None when the step had nothing to judge), its decisions."""

    name: str
    score: float | None
    decisions: list[Decision]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RetrievalCheck:
    """Step 1: whether the question needs external documents, with the judge's confidence."""

    required: bool
    confidence: float | None = None
    reason: str | None = None


@dataclass(frozen=True)
class VeraEvaluation:
    """VERA's evaluation of one row as given: the three scores and every decision behind them.

    ``response_adherence`` judges every statement of the answer against the whole context the answer
    was generated from; ``splitter`` says how the answer was split (``rules`` or ``judge``).
    """

    retrieval: RetrievalCheck | None
    context: StepResult
    relevance: StepResult
    adherence: StepResult
    splitter: str
    judge: str

    @property
    def context_relevance(self) -> float | None:
        return self.context.score

    @property
    def response_relevance(self) -> float | None:
        return self.relevance.score

    @property
    def response_adherence(self) -> float | None:
        return self.adherence.score

    def to_record(self) -> dict[str, Any]:
        """Flat output fields: the three scores first, then the details."""
        return {
            "context_relevance": self.context_relevance,
            "response_relevance": self.response_relevance,
            "response_adherence": self.response_adherence,
            "retrieval_required": None if self.retrieval is None else self.retrieval.required,
            "vera": {
                "judge": self.judge,
                "splitter": self.splitter,
                "retrieval": None if self.retrieval is None else asdict(self.retrieval),
                "context": asdict(self.context),
                "relevance": asdict(self.relevance),
                "adherence": asdict(self.adherence),
            },
        }


@dataclass(frozen=True)
class VeraEnhancement:
    """VERA's enhancement of one row, chained as in the paper.

    ``contexts`` are the edited documents (C'; a document with nothing relevant becomes ``""``),
    ``answer`` the final answer. ``refused`` is true when VERA stopped because the edited context was
    empty (``refusal`` then holds the message for the user) or when no statement of the answer survived.
    ``original_answer`` is the answer the edits started from (regenerated from C' when a generator was
    given). ``relevance`` and ``adherence`` are None when the chain stopped before them.
    ``refusal_reason`` is the evidence for a refusal: C' empty, the answer's own wording declining
    (:func:`ragsense.text.is_refusal`, the grounding score's ``refusal`` verdict), or no statement left
    after steps 3-4 (with the counts).
    """

    retrieval: RetrievalCheck | None
    context: StepResult
    relevance: StepResult | None
    adherence: StepResult | None
    contexts: list[str]
    original_answer: str | None
    answer: str
    refused: bool
    refusal: str | None
    splitter: str
    judge: str
    regenerated: bool = False
    refusal_reason: str | None = None

    def to_record(self) -> dict[str, Any]:
        return {
            "enhanced_contexts": self.contexts,
            "enhanced_answer": self.answer,
            "refused": self.refused,
            "refusal": self.refusal,
            "context_relevance": self.context.score,
            "response_relevance": None if self.relevance is None else self.relevance.score,
            "response_adherence": None if self.adherence is None else self.adherence.score,
            "retrieval_required": None if self.retrieval is None else self.retrieval.required,
            "vera": {
                "judge": self.judge,
                "splitter": self.splitter,
                "regenerated": self.regenerated,
                "refusal_reason": self.refusal_reason,
                "original_answer": self.original_answer,
                "retrieval": None if self.retrieval is None else asdict(self.retrieval),
                "context": asdict(self.context),
                "relevance": None if self.relevance is None else asdict(self.relevance),
                "adherence": None if self.adherence is None else asdict(self.adherence),
            },
        }
