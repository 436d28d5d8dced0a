"""VERA evaluate: score rows as given. Steps 2-4 are independent here, so all of a row's judgments go
through in one batched pass per prompt."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ragsense.data import RagRow
from ragsense.vera._judging import StepJudge
from ragsense.vera._results import VeraEvaluation
from ragsense.vera._steps import (
    JudgeFailure,
    Plan,
    context_step,
    not_run,
    plan_row,
    relevance_step,
    retrieval_check,
)
from ragsense.vera.judges import Verdict


async def evaluate(steps: StepJudge, rows: Sequence[RagRow]) -> list[VeraEvaluation | Exception]:
    """One result per row, in order: an evaluation or the row's error."""
    scored = steps.settings.scored_steps
    plans = [plan_row(row, require_answer=True) for row in rows]
    await steps.split([p for p in plans if isinstance(p, Plan)])
    good = [p for p in plans if isinstance(p, Plan)]
    statements = [p.statements for p in good]
    documents = [p.documents for p in good]
    nothing: list[list[Any]] = [[] for _ in good]
    run_adherence = "adherence" in scored

    async def skipped() -> list[list[Any]]:
        return nothing

    async def no_verdicts() -> tuple[list[list[Verdict]], list[list[str]]]:
        return nothing, nothing

    retrieval, sentences, relevance, adherence, consens = await asyncio.gather(
        steps.retrieval(good),
        steps.sentences(good) if "context" in scored else skipped(),
        steps.statements(good, statements) if "relevance" in scored else skipped(),
        steps.signals.verdicts(good, statements, documents) if run_adherence else no_verdicts(),
        steps.signals.consens(good, statements, documents) if run_adherence else skipped(),
    )
    out: list[VeraEvaluation | Exception] = []
    k = 0
    for plan in plans:
        if not isinstance(plan, Plan):
            out.append(plan)
            continue
        try:
            out.append(
                VeraEvaluation(
                    retrieval=retrieval_check(retrieval[k]),
                    context=context_step(plan, sentences[k])[0]
                    if "context" in scored
                    else not_run("context_relevance"),
                    relevance=relevance_step(plan.statements, relevance[k])[0]
                    if "relevance" in scored
                    else not_run("response_relevance"),
                    adherence=steps.signals.step(
                        plan.statements, adherence[0][k], consens[k], notes=adherence[1][k]
                    )[0]
                    if run_adherence
                    else not_run("response_adherence"),
                    splitter=plan.splitter,
                    judge=steps.judge.description,
                )
            )
        except JudgeFailure as exc:
            out.append(exc)
        k += 1
    return out
