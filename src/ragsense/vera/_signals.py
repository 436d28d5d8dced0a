"""Step 4, response adherence: the judge's verdicts and the ConSens scores of a batch of statements,
and the decision on each statement from the signal the settings ask for.

The context shown to the adherence judge is cut at a sentence boundary to fit the judge's window, with
a note on the step (docs/vera.md, truncation policy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from ragsense.errors import ModelCallError
from ragsense.models import DEFAULT_MODEL, LanguageModel, ModelPool, ModelSpec, SupportsLogprobs
from ragsense.text import Span, split_sentences
from ragsense.vera._prompts import RESPONSE_ADHERENCE, AdherenceInput
from ragsense.vera._results import Decision, StepResult
from ragsense.vera._settings import VeraSettings
from ragsense.vera._steps import (
    MAX_SENTENCE_CHARS,
    JudgeFailure,
    Plan,
    failed,
    free_span,
    judge_grouped,
    offsets,
)
from ragsense.vera.judges import Judge, Verdict

_WINDOW_MARGIN = 24

ADHERENCE_AGGREGATION = "q25"
"""The ConSens aggregation of VERA's adherence signal. Its threshold (0) was chosen on q25 scores
(docs/results.md, VERA), so it is pinned here rather than following ConSens's default score."""


class AdherenceSignals:
    """The judge's adherence verdicts and the statements' ConSens scores, each computed only when the
    adherence signal uses it; the ConSens model comes from ``pool`` (the judge's, when it gives
    log-probabilities and no ``consens_model`` is set)."""

    def __init__(
        self, judge: Judge, judge_model: LanguageModel | None, pool: ModelPool, settings: VeraSettings
    ) -> None:
        self.judge = judge
        self.judge_model = judge_model
        self.pool = pool
        self.settings = settings
        self._consens_scorer: Any = None
        self._budget_cache: dict[str, int] = {}

    async def verdicts(
        self, plans: Sequence[Plan], statements: Sequence[Sequence[Span]], documents: Sequence[Sequence[str]]
    ) -> tuple[list[list[Verdict]], list[list[str]]]:
        """Verdicts per row, and per row a note for each statement whose context had to be cut."""
        if self.settings.adherence_signal == "consens":
            return [[] for _ in plans], [[] for _ in plans]
        groups: list[list[BaseModel]] = []
        notes: list[list[str]] = []
        for spans, docs in zip(statements, documents, strict=True):
            context = "\n\n".join(d.strip() for d in docs if d.strip())
            items: list[BaseModel] = []
            row_notes: list[str] = []
            for i, span in enumerate(spans):
                shown = self.fit_context(context, span.text)
                if len(shown) < len(context):
                    row_notes.append(
                        f"statement {i}: the context was cut to its first {len(shown)} of {len(context)} "
                        "characters to fit the judge's window"
                    )
                items.append(AdherenceInput(context=shown, statement=span.text))
            groups.append(items)
            notes.append(row_notes)
        return await judge_grouped(self.judge, RESPONSE_ADHERENCE, groups), notes

    def fit_context(self, context: str, statement: str) -> str:
        """The context cut at a sentence boundary so the adherence prompt fits the judge's window."""
        model = self.judge_model
        if model is None or not context:
            return context

        def count(text: str) -> int:
            try:
                return model.count_tokens(text)
            except (ModelCallError, ValueError, RuntimeError):
                return len(text) // 3 + 1  # a server that cannot count: a cautious estimate

        if context not in self._budget_cache:
            self._budget_cache[context] = count(context)
        overhead = count(RESPONSE_ADHERENCE.plain_prefix() + statement) + _WINDOW_MARGIN
        budget = model.info.context_window - overhead
        if self._budget_cache[context] <= budget:
            return context
        # Keep whole sentences from the start while they fit: the judge sees the context's beginning.
        kept = ""
        for span in split_sentences(context, max_chars=MAX_SENTENCE_CHARS):
            candidate = context[: span.end]
            if count(candidate) > budget:
                break
            kept = candidate
        return kept

    async def consens(
        self, plans: Sequence[Plan], statements: Sequence[Sequence[Span]], documents: Sequence[Sequence[str]]
    ) -> list[list[Any]]:
        """Per row, each statement's :class:`~ragsense.consens.GroundingResult` (or its error)."""
        if self.settings.adherence_signal == "judge":
            return [[] for _ in plans]
        scorer = self._scorer()
        requests: list[tuple[str, list[str], str]] = []
        for plan, spans, docs in zip(plans, statements, documents, strict=True):
            kept_docs = [d for d in docs if d.strip()]
            requests.extend((plan.row.question, kept_docs, s.text) for s in spans)
        results = iter(await scorer.score(requests) if requests else [])
        return [[next(results) for _ in spans] for spans in statements]

    @property
    def consens_spec(self) -> ModelSpec:
        """The ConSens model: ``consens_model``, else the judge's when it gives log-probabilities, else
        the bundled default (also the model of the offline likelihood signals)."""
        spec = self.settings.consens_model
        if spec is None:
            spec = self.judge_model if isinstance(self.judge_model, SupportsLogprobs) else DEFAULT_MODEL
        return spec

    def _scorer(self) -> Any:
        if self._consens_scorer is None:
            from ragsense.consens import NO_CONTEXT_CACHE, GroundingScorer, NoContextCache

            model = self.pool.get(self.consens_spec)
            cache = self.pool.shared(model, NO_CONTEXT_CACHE, NoContextCache)
            # The binding check moves only the scores that read stated flags, not the adherence
            # signal's aggregation: it would cost variants and change nothing here.
            self._consens_scorer = GroundingScorer(
                model, aggregation=ADHERENCE_AGGREGATION, no_context_cache=cache, binding=None
            )
        return self._consens_scorer

    def step(
        self,
        statements: Sequence[Span],
        verdicts: list[Verdict],
        consens: list[Any],
        *,
        correct: bool = False,
        notes: Sequence[str] = (),
    ) -> tuple[StepResult, list[Span]]:
        """The adherence step of one row, and the statements kept (or corrected, with ``correct``)."""
        signal = self.settings.adherence_signal
        decisions: list[Decision] = []
        final: list[Span] = []
        notes = list(notes)
        for i, span in enumerate(statements):
            v = verdicts[i] if verdicts else None
            result = consens[i] if consens else None
            if v is not None and not v.ok:
                raise failed("response adherence", f"statement {i} {span.text[:60]!r}", v)
            if isinstance(result, Exception):
                raise JudgeFailure(f"response adherence: ConSens failed on statement {i}: {result}")
            c = None if result is None else float(result.consens)
            judge_p = grounded_probability(v) if v is not None else None
            consens_p = None if c is None else (1.0 + c) / 2.0
            if signal == "judge":
                # The judge's verdict decides on P(stated) + P(inferable) >= 0.5 (decide_label).
                assert judge_p is not None
                keep, p = v is not None and v.label in RESPONSE_ADHERENCE.positive_labels, judge_p
            elif signal == "consens":
                assert c is not None and consens_p is not None
                keep, p = c > self.settings.consens_threshold, consens_p
            else:
                assert judge_p is not None and consens_p is not None
                p = (judge_p + consens_p) / 2.0
                keep = p >= 0.5
            label = v.label if v is not None else ("grounded" if keep else "unsupported")
            correction = v.correction if (v is not None and not keep and correct) else None
            if keep:
                final.append(span)
            elif correction:
                final.append(free_span(correction))
                notes.append(f"statement {i} corrected by the judge")
            elif correct:
                # Label-scoring judges give no correction (docs/vera.md, "Unsupported statements").
                notes.append(f"statement {i} removed: unsupported and no correction")
            decisions.append(
                Decision(
                    i,
                    span.text,
                    keep,
                    label,
                    *offsets(span),
                    confidence=None if v is None else v.confidence,
                    reason=None if v is None else v.reason,
                    consens=c,
                    grounded_probability=p,
                    consens_by_aggregation=None if result is None else dict(result.consens_by_aggregation),
                    consens_word_nll=None
                    if result is None
                    else [(w.nll_empty, w.nll_context) for w in result.words],
                    token_logprobs=None if v is None else v.token_logprobs,
                    correction=correction,
                    forced_split=span.forced,
                )
            )
        score = sum(d.keep for d in decisions) / len(decisions) if decisions else None
        return StepResult("response_adherence", score, decisions, notes), final


def grounded_probability(verdict: Verdict) -> float:
    """P(stated) + P(inferable) from a label-scoring judge, else 1 or 0 from the label."""
    if verdict.probabilities:
        p = math.fsum(verdict.probabilities.get(label, 0.0) for label in RESPONSE_ADHERENCE.positive_labels)
        return min(1.0, max(0.0, p))
    return 1.0 if verdict.label in RESPONSE_ADHERENCE.positive_labels else 0.0
