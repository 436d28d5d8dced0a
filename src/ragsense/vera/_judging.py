"""The judge calls of steps 1-3 for a batch of rows (one batched call per prompt), and the judge's split
of answers into statements; step 4's calls are the adherence signals'."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from ragsense.text import Span
from ragsense.vera._offline import OfflineSignals
from ragsense.vera._prompts import (
    CONTEXT_RELEVANCE,
    RETRIEVAL_NEED,
    STATEMENT_RELEVANCE,
    ContextSentenceInput,
    QuestionInput,
    SplitInput,
    StatementInput,
)
from ragsense.vera._settings import VeraSettings
from ragsense.vera._signals import AdherenceSignals
from ragsense.vera._steps import PRECEDING_CHARS, Plan, free_span, judge_grouped
from ragsense.vera.judges import Judge, Verdict


@dataclass
class StepJudge:
    """What evaluate and enhance run on: the judge, the settings and the adherence signals."""

    judge: Judge
    settings: VeraSettings
    signals: AdherenceSignals
    offline: OfflineSignals

    @property
    def use_offline(self) -> bool:
        """Whether steps 1-3 decide by the offline signals rather than the judge's labels."""
        return self.settings.signals == "offline"

    async def split(self, plans: Sequence[Plan]) -> None:
        """Replace the rule-based statements by the judge's split where configured."""
        splitter = self.settings.splitter
        use_judge = splitter == "judge" or (splitter == "auto" and self.judge.can_split)
        if not use_judge or not plans:
            return
        results = await self.judge.split(
            [SplitInput(question=p.row.question, answer=p.row.answer) for p in plans]
        )
        for plan, result in zip(plans, results, strict=True):
            if isinstance(result, Verdict):
                plan.splitter = f"rules (the judge's split failed: {result.error})"
                continue
            plan.statements = [free_span(s) for s in result]
            plan.splitter = "judge"

    async def retrieval(self, plans: Sequence[Plan]) -> list[Verdict | None]:
        """Step 1's verdict per row; None for every row when the check is off."""
        if not self.settings.check_retrieval:
            return [None] * len(plans)
        if self.use_offline:
            return list(self.offline.retrieval_verdicts([p.row.question for p in plans]))
        groups = await judge_grouped(
            self.judge, RETRIEVAL_NEED, [[QuestionInput(question=p.row.question)] for p in plans]
        )
        return [g[0] for g in groups]

    async def sentences(self, plans: Sequence[Plan]) -> list[list[Verdict]]:
        """Step 2's verdict on every context sentence of every row, each shown after its predecessor
        (offline: the row's sentences ranked together)."""
        if self.use_offline:
            return await self.offline.sentence_verdicts(
                [p.row.question for p in plans], [[s.text for _, s in p.sentences] for p in plans]
            )
        groups: list[list[BaseModel]] = []
        for plan in plans:
            items: list[BaseModel] = []
            previous: dict[int, str] = {}
            for d, span in plan.sentences:
                items.append(
                    ContextSentenceInput(
                        question=plan.row.question,
                        sentence=span.text,
                        preceding=previous.get(d, "")[-PRECEDING_CHARS:],
                    )
                )
                previous[d] = span.text
            groups.append(items)
        return await judge_grouped(self.judge, CONTEXT_RELEVANCE, groups)

    async def statements(
        self, plans: Sequence[Plan], statements: Sequence[Sequence[Span]]
    ) -> list[list[Verdict]]:
        """Step 3's verdict on every statement of every row."""
        if self.use_offline:
            return await self.offline.statement_verdicts(
                [p.row.question for p in plans], [[s.text for s in spans] for spans in statements]
            )
        groups: list[list[BaseModel]] = [
            [StatementInput(question=p.row.question, statement=s.text) for s in spans]
            for p, spans in zip(plans, statements, strict=True)
        ]
        return await judge_grouped(self.judge, STATEMENT_RELEVANCE, groups)
