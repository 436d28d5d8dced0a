"""VERA's items and steps without a model: a row cut into judgeable sentences and statements, and the
verdicts on them assembled into the step results of steps 1-3 (step 4 is in ``_signals``).

Truncation policy (docs/vera.md): a context sentence or an answer statement longer than
:data:`MAX_SENTENCE_CHARS` / :data:`MAX_STATEMENT_CHARS` is cut into forced pieces at a comma or a
space (flagged ``forced_split``), so one huge sentence never makes a judge prompt overflow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ragsense.data import RagRow
from ragsense.errors import InputError, ModelCallError
from ragsense.text import Span, split_sentences, split_statements
from ragsense.vera._prompts import CONTEXT_RELEVANCE, RETRIEVAL_NEED, STATEMENT_RELEVANCE, JudgePrompt
from ragsense.vera._results import Decision, RetrievalCheck, StepResult
from ragsense.vera.judges import Judge, Verdict

MAX_SENTENCE_CHARS = 600
MAX_STATEMENT_CHARS = 400
PRECEDING_CHARS = 300


class JudgeFailure(ModelCallError):
    """The judge could not judge an item of a row (timeouts, replies that never validated)."""


@dataclass
class Plan:
    """One row cut into judgeable items."""

    row: RagRow
    documents: list[str]
    sentences: list[tuple[int, Span]] = field(default_factory=list)
    statements: list[Span] = field(default_factory=list)
    splitter: str = "rules"


def plan_row(row: RagRow, *, require_answer: bool) -> Plan | InputError:
    """The row cut into context sentences (and answer statements when ``require_answer``), or why not."""
    try:
        return _plan(row, require_answer=require_answer)
    except InputError as exc:
        return exc


def _plan(row: RagRow, *, require_answer: bool) -> Plan:
    if not row.question.strip():
        raise InputError("the question is empty", row=row.id, field="question")
    if not any(c.strip() for c in row.contexts):
        raise InputError(
            "every context is empty: there is nothing to judge against", row=row.id, field="contexts"
        )
    plan = Plan(row, list(row.contexts))
    for d, doc in enumerate(row.contexts):
        plan.sentences.extend((d, s) for s in split_sentences(doc, max_chars=MAX_SENTENCE_CHARS))
    if require_answer:
        if not row.answer.strip():
            raise InputError("the answer is empty", row=row.id, field="answer")
        plan.statements = rule_statements(row.answer)
        if not plan.statements:
            raise InputError("the answer has no statement to judge (no words)", row=row.id, field="answer")
    return plan


def rule_statements(answer: str) -> list[Span]:
    """The answer's statements by the deterministic splitter (none for a blank answer)."""
    return split_statements(answer, max_chars=MAX_STATEMENT_CHARS) if answer.strip() else []


def join_spans(text: str, spans: Sequence[Span]) -> str:
    """The spans of ``text`` joined, keeping the original text between spans that were adjacent."""
    out = ""
    previous: Span | None = None
    for span in spans:
        if previous is None:
            out = span.text
        elif text and 0 <= previous.end <= span.start and not text[previous.end : span.start].strip():
            out += text[previous.end : span.start] + span.text
        else:
            out += " " + span.text
        previous = span
    return out


def free_span(text: str) -> Span:
    """A statement rewritten by a judge: it has no place in the original answer."""
    return Span(text, -1, -1)


def offsets(span: Span) -> tuple[int | None, int | None]:
    """A statement's offsets in the answer, or (None, None) for a rewritten one."""
    return (None, None) if span.start < 0 else (span.start, span.end)


async def judge_grouped(
    judge: Judge, prompt: JudgePrompt[Any], groups: list[list[BaseModel]]
) -> list[list[Verdict]]:
    """Every row's items judged in one batched call, the verdicts given back grouped by row."""
    flat = [item for group in groups for item in group]
    verdicts = iter(await judge.judge(prompt, flat) if flat else [])
    return [[next(verdicts) for _ in group] for group in groups]


def failed(step: str, what: str, verdict: Verdict) -> JudgeFailure:
    """The error for an item the judge could not judge, with the start of its raw reply."""
    raw = f"; raw reply: {verdict.raw[:200]!r}" if verdict.raw else ""
    return JudgeFailure(f"{step}: the judge could not judge {what}: {verdict.error}{raw}")


def not_run(name: str) -> StepResult:
    """A step left out of ``steps``."""
    return StepResult(name, None, [], ["step not run (not in steps)"])


def retrieval_check(verdict: Verdict | None) -> RetrievalCheck | None:
    """Step 1's result from its verdict (None when the check was not asked for)."""
    if verdict is None:
        return None
    if not verdict.ok:
        raise failed("retrieval check", "the question", verdict)
    return RetrievalCheck(verdict.label in RETRIEVAL_NEED.positive_labels, verdict.confidence, verdict.reason)


def context_step(plan: Plan, verdicts: list[Verdict]) -> tuple[StepResult, list[str]]:
    """Step 2: the context relevance score and C', each document cut to its relevant sentences."""
    decisions: list[Decision] = []
    kept: dict[int, list[Span]] = {d: [] for d in range(len(plan.documents))}
    total = kept_chars = 0
    for i, ((d, span), v) in enumerate(zip(plan.sentences, verdicts, strict=True)):
        if not v.ok:
            raise failed("context relevance", f"sentence {i} of document {d}", v)
        keep = v.label in CONTEXT_RELEVANCE.positive_labels
        total += len(span.text)
        if keep:
            kept_chars += len(span.text)
            kept[d].append(span)
        decisions.append(
            Decision(
                i,
                span.text,
                keep,
                v.label,
                span.start,
                span.end,
                v.confidence,
                v.reason,
                d,
                forced_split=span.forced,
            )
        )
    edited = [join_spans(doc, kept[d]) for d, doc in enumerate(plan.documents)]
    score = kept_chars / total if total else None
    return StepResult("context_relevance", score, decisions), edited


def relevance_step(statements: Sequence[Span], verdicts: list[Verdict]) -> tuple[StepResult, list[Span]]:
    """Step 3: the response relevance score and the relevant statements."""
    decisions: list[Decision] = []
    kept: list[Span] = []
    for i, (span, v) in enumerate(zip(statements, verdicts, strict=True)):
        if not v.ok:
            raise failed("response relevance", f"statement {i} {span.text[:60]!r}", v)
        keep = v.label in STATEMENT_RELEVANCE.positive_labels
        if keep:
            kept.append(span)
        decisions.append(
            Decision(
                i,
                span.text,
                keep,
                v.label,
                *offsets(span),
                v.confidence,
                v.reason,
                forced_split=span.forced,
            )
        )
    score = sum(d.keep for d in decisions) / len(decisions) if decisions else None
    return StepResult("response_relevance", score, decisions), kept
