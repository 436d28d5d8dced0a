"""VERA enhance: the steps chained as the paper does. Trim the context, stop with a refusal when nothing
relevant is left, optionally regenerate the answer from C', keep the relevant statements, then keep (or
correct) the grounded ones."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from ragsense.data import RagRow
from ragsense.text import Span, is_refusal
from ragsense.vera._judging import StepJudge
from ragsense.vera._results import REFUSAL, RetrievalCheck, StepResult, VeraEnhancement
from ragsense.vera._steps import (
    JudgeFailure,
    Plan,
    context_step,
    join_spans,
    plan_row,
    relevance_step,
    retrieval_check,
    rule_statements,
)

AnswerFn = Callable[[list[str], list[list[str]]], Awaitable[list[str]]]
"""Answers questions from documents: ``await fn(questions, documents_per_question)``."""


async def enhance(
    steps: StepJudge, rows: Sequence[RagRow], generate: AnswerFn | None = None
) -> list[VeraEnhancement | Exception]:
    """One result per row, in order: an enhancement or the row's error.

    Without ``generate`` the row's own answer is edited. With it, the answer is regenerated from C'
    (and, when the retrieval check says no documents are needed, from no documents at all).
    """
    plans = [plan_row(row, require_answer=generate is None) for row in rows]
    good = [p for p in plans if isinstance(p, Plan)]
    retrieval, sentences = await asyncio.gather(steps.retrieval(good), steps.sentences(good))
    results: dict[int, VeraEnhancement | Exception] = {}
    stage: list[tuple[int, Plan, RetrievalCheck | None, StepResult, list[str]]] = []
    for k, plan in enumerate(good):
        try:
            check = retrieval_check(retrieval[k])
            if generate is not None and check is not None and not check.required:
                step = StepResult(
                    "context_relevance", None, [], ["retrieval not required: answered without documents"]
                )
                stage.append((k, plan, check, step, []))
                continue
            step, edited = context_step(plan, sentences[k])
            if not any(doc.strip() for doc in edited):
                results[k] = VeraEnhancement(
                    retrieval=check,
                    context=step,
                    relevance=None,
                    adherence=None,
                    contexts=edited,
                    original_answer=plan.row.answer or None,
                    answer=REFUSAL,
                    refused=True,
                    refusal=REFUSAL,
                    splitter=plan.splitter,
                    judge=steps.judge.description,
                    refusal_reason=f"C' is empty: none of the context's {len(step.decisions)} sentences "
                    "passed the context relevance step",
                )
                continue
            stage.append((k, plan, check, step, edited))
        except JudgeFailure as exc:
            results[k] = exc
    originals = [plan.row.answer for _, plan, _, _, _ in stage]
    if generate is not None and stage:
        originals = await generate(
            [plan.row.question for _, plan, _, _, _ in stage],
            [[d for d in edited if d.strip()] for _, _, _, _, edited in stage],
        )
    # Split the (possibly new) answers; an empty answer has no statement and ends as a refusal.
    answer_plans = [
        Plan(plan.row.model_copy(update={"answer": answer}), edited)
        for (_, plan, _, _, edited), answer in zip(stage, originals, strict=True)
    ]
    for ap in answer_plans:
        ap.statements = rule_statements(ap.row.answer)
    await steps.split([ap for ap in answer_plans if ap.statements])
    relevance = await steps.statements(answer_plans, [ap.statements for ap in answer_plans])
    relevant: list[list[Span]] = []
    relevance_steps: list[StepResult | JudgeFailure] = []
    for ap, verdicts in zip(answer_plans, relevance, strict=True):
        try:
            step, kept = relevance_step(ap.statements, verdicts)
            relevance_steps.append(step)
            relevant.append(kept)
        except JudgeFailure as exc:
            relevance_steps.append(exc)
            relevant.append([])
    adherence_docs = [ap.documents for ap in answer_plans]
    # A row answered without documents has nothing to adhere to: its statements are not judged.
    to_check = [
        kept if any(d.strip() for d in docs) else []
        for kept, docs in zip(relevant, adherence_docs, strict=True)
    ]
    adherence, consens = await asyncio.gather(
        steps.signals.verdicts(answer_plans, to_check, adherence_docs),
        steps.signals.consens(answer_plans, to_check, adherence_docs),
    )
    for j, ((k, _plan, check, step, edited), ap) in enumerate(zip(stage, answer_plans, strict=True)):
        rel = relevance_steps[j]
        if isinstance(rel, JudgeFailure):
            results[k] = rel
            continue
        if not any(d.strip() for d in edited):  # answered without retrieval
            adh = StepResult("response_adherence", None, [], ["no documents: adherence not judged"])
            final_spans = relevant[j]
        else:
            try:
                adh, final_spans = steps.signals.step(
                    relevant[j], adherence[0][j], consens[j], correct=True, notes=adherence[1][j]
                )
            except JudgeFailure as exc:
                results[k] = exc
                continue
        answer = join_spans(ap.row.answer, final_spans).strip()
        reason = refusal_reason(ap.row.answer, answer, rel, adh)
        refused = reason is not None
        answer = "" if refused else answer
        results[k] = VeraEnhancement(
            retrieval=check,
            context=step,
            relevance=rel,
            adherence=adh,
            contexts=edited,
            original_answer=ap.row.answer,
            answer=answer or REFUSAL,
            refused=refused,
            refusal=REFUSAL if refused else None,
            splitter=ap.splitter,
            judge=steps.judge.description,
            regenerated=generate is not None,
            refusal_reason=reason,
        )
    out: list[VeraEnhancement | Exception] = []
    k = 0
    for plan_or_error in plans:
        if isinstance(plan_or_error, Plan):
            out.append(results[k])
            k += 1
        else:
            out.append(plan_or_error)
    return out


def refusal_reason(original: str, answer: str, relevance: StepResult, adherence: StepResult) -> str | None:
    """Why VERA refuses this answer, or None: the answer declines by its wording (the same rule as the
    grounding score's ``refusal`` verdict), or steps 3-4 left no statement (the counts say which)."""
    if original.strip() and is_refusal(original):
        return "the answer declines to answer (its wording, as the grounding score's refusal verdict)"
    if answer:
        return None
    n = len(relevance.decisions)
    relevant = sum(d.keep for d in relevance.decisions)
    if relevant == 0:
        return f"no statement left: none of the answer's {n} statements is relevant to the question"
    grounded = sum(d.keep for d in adherence.decisions)
    return f"no statement left: {relevant} of {n} statements relevant, {grounded} of them supported by C'"
