"""What a judge returns and what VERA asks of one: the verdict, the judge protocol and the judge's modes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol, TypeAlias

from pydantic import BaseModel

from ragsense.vera._prompts import JudgePrompt, SplitInput

JudgeMode = Literal["auto", "labels", "structured"]
JUDGE_MODES: tuple[str, ...] = ("auto", "labels", "structured")
LabelScoring = Literal["sum", "mean", "first_token"]
LABEL_SCORINGS: tuple[str, ...] = ("sum", "mean", "first_token")
"""How a label-scoring judge turns a label's token log-probabilities into its score: ``sum`` (the label's
log-probability; a label of more tokens is penalised), ``mean`` (length-normalised) or ``first_token``
(only the first token, where the labels part). Chosen on WikiEval questions 0-23 (docs/vera.md)."""
DEFAULT_LABEL_SCORING: LabelScoring = "sum"
PromptFormat = Literal["plain", "chat"]
PROMPT_FORMATS: tuple[str, ...] = ("plain", "chat")


@dataclass(frozen=True)
class Verdict:
    """One judgment. ``label`` is None exactly when ``error`` says why the item could not be judged.

    ``confidence`` is the label's probability among the allowed labels (label-scoring judges only);
    ``token_logprobs`` holds each label's token log-probabilities (label-scoring judges), so every
    scoring rule can be recomputed from a verdict; ``raw`` keeps a chat judge's reply text when it did
    not validate.
    """

    label: str | None
    confidence: float | None = None
    probabilities: dict[str, float] | None = None
    reason: str | None = None
    correction: str | None = None
    error: str | None = None
    raw: str | None = None
    token_logprobs: dict[str, list[float]] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


SplitResult: TypeAlias = "list[str] | Verdict"


class Judge(Protocol):
    """What VERA's steps need from a judge."""

    @property
    def description(self) -> str:
        """e.g. ``"labels:smollm2-135m"``: the mode and the model, for reports."""
        ...

    @property
    def can_split(self) -> bool:
        """Whether :meth:`split` can split answers into statements (structured-output chat judges)."""
        ...

    async def judge(self, prompt: JudgePrompt[Any], items: Sequence[BaseModel]) -> list[Verdict]:
        """One verdict per item, in order; never raises for a single item's failure."""
        ...

    async def split(self, items: Sequence[SplitInput]) -> list[SplitResult]:
        """Atomic statements of each answer, or a failed verdict saying why."""
        ...
