"""VERA (Birur et al.): evaluate and enhance the retrieved context and the generated answer.

The four steps of the paper, each judged item by item and batched across the rows of a call:

1. retrieval requirement: does the question need external documents?
2. context relevance: every sentence of every document is judged relevant or not; C' keeps the
   relevant sentences exactly as written; R_retrieval = |C'| / |C| in characters of sentence text.
3. response relevance: the answer is split into atomic statements, each judged relevant or not;
   R_response = share of relevant statements.
4. response adherence: each statement is classified against the context as stated, inferable or
   unsupported; A_response = share of the first two. Optionally the statement's ConSens score is used
   instead of, or together with, the judge.

:meth:`Vera.evaluate` scores a row as given (steps 2-4 are independent there, so all of a row's
judgments go through in one batched pass per prompt). :meth:`Vera.enhance` chains them as the paper
does: trim the context, stop with a refusal when nothing relevant is left, optionally regenerate the
answer from C', keep the relevant statements, then keep (or correct) the grounded ones.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from ragsense._async import run_sync
from ragsense.cache import cache_dir
from ragsense.data import RagRow
from ragsense.errors import InputError, ModelCallError, ParameterError
from ragsense.models import DEFAULT_MODEL, LanguageModel, ModelPool, SupportsLogprobs, shared_pool
from ragsense.text import Span, split_sentences, split_statements
from ragsense.vera._judge import (
    DEFAULT_LABEL_SCORING,
    ChatJudge,
    Judge,
    JudgeMode,
    LabelJudge,
    LabelScoring,
    PromptFormat,
    Verdict,
    make_judge,
)
from ragsense.vera._prompts import (
    CONTEXT_RELEVANCE,
    RESPONSE_ADHERENCE,
    RETRIEVAL_NEED,
    STATEMENT_RELEVANCE,
    AdherenceInput,
    ContextSentenceInput,
    JudgePrompt,
    QuestionInput,
    SplitInput,
    StatementInput,
)
from ragsense.vera._results import (
    REFUSAL,
    Decision,
    RetrievalCheck,
    StepResult,
    VeraEnhancement,
    VeraEvaluation,
)

AnswerFn = Callable[[list[str], list[list[str]]], Awaitable[list[str]]]
"""Answers questions from documents: ``await fn(questions, documents_per_question)``."""
SplitterMode = Literal["auto", "rules", "judge"]
AdherenceSignal = Literal["judge", "consens", "combined"]
SPLITTERS = ("auto", "rules", "judge")
SCORED_STEPS = ("context", "relevance", "adherence")
"""The steps :meth:`Vera.evaluate` can score (step 1, the retrieval check, is ``check_retrieval``)."""
ADHERENCE_SIGNALS = ("judge", "consens", "combined")
DEFAULT_ADHERENCE_SIGNAL: AdherenceSignal = "consens"
"""Chosen on WikiEval questions 0-23 (grounded vs ungrounded answer), reported on 24-49: with the bundled
judges the ConSens signal ranks the grounded answer first far more often than the judge's labels, which
are at chance (docs/results.md, "VERA"). A capable judge behind a server: ``judge`` or ``combined``."""

# Truncation policy (docs/vera.md): a context sentence or an answer statement longer than these is
# cut into forced pieces at a comma or a space (flagged ``forced_split``), so one huge sentence never
# makes a judge prompt overflow; the context shown to the adherence judge is cut at a sentence boundary
# to fit the judge's window, with a note on the step.
MAX_SENTENCE_CHARS = 600
MAX_STATEMENT_CHARS = 400
PRECEDING_CHARS = 300
_WINDOW_MARGIN = 24

ADHERENCE_AGGREGATION = "q25"
"""The ConSens aggregation of VERA's adherence signal. Its threshold (0) was chosen on q25 scores
(docs/results.md, VERA), so it is pinned here rather than following ConSens's default score."""


class JudgeFailure(ModelCallError):
    """The judge could not judge an item of a row (timeouts, replies that never validated)."""


def default_cache_dir() -> Path:
    """Where judge verdicts are cached unless told otherwise: ``<ragsense cache>/vera``."""
    return cache_dir() / "vera"


@dataclass
class _Plan:
    """One row cut into judgeable items."""

    row: RagRow
    documents: list[str]
    sentences: list[tuple[int, Span]] = field(default_factory=list)
    statements: list[Span] = field(default_factory=list)
    splitter: str = "rules"


def _join(text: str, spans: Sequence[Span]) -> str:
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


def _free_span(text: str) -> Span:
    """A statement rewritten by a judge: it has no place in the original answer."""
    return Span(text, -1, -1)


class Vera:
    """The evaluator-cum-enhancer.

    ``judge``: a model name, a model, or a :class:`~ragsense.vera.Judge`. ``judge_mode``: ``labels``
    (score the allowed labels with log-probabilities), ``structured`` (chat JSON under a schema), or
    ``auto`` (labels when the model gives log-probabilities). ``splitter``: ``rules`` (the
    deterministic splitter), ``judge`` (the judge splits, falling back to the rules when its reply does
    not validate), ``auto`` (judge when it can split, i.e. a structured-output judge, else rules).
    ``adherence_signal``: ``consens`` (the default: a statement is grounded when its ConSens score with
    ``consens_model`` exceeds ``consens_threshold``), ``judge`` (grounded when the judge's
    P(stated) + P(inferable) is at least 0.5) or ``combined`` (grounded when the mean of the judge's
    grounded probability and (1 + ConSens) / 2 is at least 0.5).

    >>> vera = Vera("fake", cache=False)
    >>> row = RagRow(id="1", question="Who designed the Orvel bridge?",
    ...              contexts=["The Orvel bridge was designed by Mara Quint. Slate is grey."],
    ...              answer="Mara Quint designed it.")
    >>> [ev] = vera.evaluate_sync([row])
    >>> [0.0 <= s <= 1.0 for s in (ev.context_relevance, ev.response_relevance, ev.response_adherence)]
    [True, True, True]
    >>> len(ev.context.decisions), len(ev.relevance.decisions)
    (2, 1)
    """

    def __init__(
        self,
        judge: str | LanguageModel | Judge = DEFAULT_MODEL,
        *,
        judge_mode: JudgeMode | str = "auto",
        splitter: SplitterMode | str = "auto",
        adherence_signal: AdherenceSignal | str = DEFAULT_ADHERENCE_SIGNAL,
        consens_model: str | LanguageModel | None = None,
        consens_threshold: float = 0.0,
        check_retrieval: bool = True,
        cache: bool = True,
        cache_dir: str | Path | None = None,
        calibrate: bool = False,
        reasons: bool = False,
        label_scoring: LabelScoring | str = DEFAULT_LABEL_SCORING,
        prompt_format: PromptFormat | str = "plain",
        steps: Sequence[str] = SCORED_STEPS,
        pool: ModelPool | None = None,
    ) -> None:
        unknown = [s for s in steps if s not in SCORED_STEPS]
        if unknown or not steps:
            raise ParameterError(
                f"choose among {', '.join(SCORED_STEPS)}, got {list(steps)!r}", parameter="steps"
            )
        if splitter not in SPLITTERS:
            raise ParameterError(
                f"must be one of {', '.join(SPLITTERS)}, got {splitter!r}", parameter="splitter"
            )
        if adherence_signal not in ADHERENCE_SIGNALS:
            raise ParameterError(
                f"must be one of {', '.join(ADHERENCE_SIGNALS)}, got {adherence_signal!r}",
                parameter="adherence_signal",
            )
        if not -1.0 < consens_threshold < 1.0:
            raise ParameterError("must be between -1 and 1 (ConSens range)", parameter="consens_threshold")
        directory = (Path(cache_dir) if cache_dir is not None else default_cache_dir()) if cache else None
        # Models named here come from the pool, so a judge that is also another metric's model is
        # loaded once, and the ConSens signal shares that model's no-context cache.
        self.pool = pool if pool is not None else shared_pool()
        self.judge_model: LanguageModel | None
        if isinstance(judge, str):
            judge = self.pool.get(judge)
        self._owns_judge = False
        if isinstance(judge, LabelJudge | ChatJudge) or not isinstance(judge, LanguageModel):
            self.judge: Judge = judge
            self.judge_model = getattr(judge, "model", None)
        else:
            self._owns_judge = True
            self.judge_model = judge
            self.judge = make_judge(
                judge,
                judge_mode,
                cache_dir=directory,
                calibrate=calibrate,
                reasons=reasons,
                label_scoring=label_scoring,
                prompt_format=prompt_format,
            )
        if splitter == "judge" and not self.judge.can_split:
            raise ParameterError(
                f"the {self.judge.description} judge cannot split answers (a structured-output chat judge "
                "can); use the rules splitter",
                parameter="splitter",
            )
        self.splitter = splitter
        self.adherence_signal = adherence_signal
        self.consens_threshold = consens_threshold
        self.check_retrieval = check_retrieval
        self.steps = tuple(s for s in SCORED_STEPS if s in steps)
        self._consens_model_spec = consens_model
        self._consens_scorer: Any = None
        self._budget_cache: dict[str, int] = {}

    # -- public API -------------------------------------------------------------------------------
    async def evaluate(self, rows: Sequence[RagRow]) -> list[VeraEvaluation | Exception]:
        """Evaluate rows as given; one result per row, in order: an evaluation or the row's error."""
        plans = [self._plan_or_error(row, require_answer=True) for row in rows]
        await self._split([p for p in plans if isinstance(p, _Plan)])
        good = [p for p in plans if isinstance(p, _Plan)]
        statements = [p.statements for p in good]
        documents = [p.documents for p in good]
        nothing: list[list[Any]] = [[] for _ in good]
        run_adherence = "adherence" in self.steps

        async def skipped() -> list[list[Any]]:
            return nothing

        retrieval, sentences, relevance, adherence, consens = await asyncio.gather(
            self._judge_retrieval(good),
            self._judge_sentences(good) if "context" in self.steps else skipped(),
            self._judge_statements(good, statements) if "relevance" in self.steps else skipped(),
            self._judge_adherence(good, statements, documents) if run_adherence else _pair(nothing),
            self._consens(good, statements, documents) if run_adherence else skipped(),
        )
        out: list[VeraEvaluation | Exception] = []
        k = 0
        for plan in plans:
            if not isinstance(plan, _Plan):
                out.append(plan)
                continue
            try:
                out.append(
                    VeraEvaluation(
                        retrieval=self._retrieval_check(plan, retrieval[k]),
                        context=self._context_step(plan, sentences[k])[0]
                        if "context" in self.steps
                        else _not_run("context_relevance"),
                        relevance=self._relevance_step(plan.statements, relevance[k])[0]
                        if "relevance" in self.steps
                        else _not_run("response_relevance"),
                        adherence=self._adherence_step(
                            plan.statements, adherence[0][k], consens[k], notes=adherence[1][k]
                        )[0]
                        if run_adherence
                        else _not_run("response_adherence"),
                        splitter=plan.splitter,
                        judge=self.judge.description,
                    )
                )
            except JudgeFailure as exc:
                out.append(exc)
            k += 1
        return out

    async def enhance(
        self, rows: Sequence[RagRow], generate: AnswerFn | None = None
    ) -> list[VeraEnhancement | Exception]:
        """Enhance rows as the paper chains the steps; ``generate`` re-answers from the edited context.

        Without ``generate`` the row's own answer is edited. With it, the answer is regenerated from C'
        (and, when the retrieval check says no documents are needed, from no documents at all).
        """
        plans = [self._plan_or_error(row, require_answer=generate is None) for row in rows]
        good = [p for p in plans if isinstance(p, _Plan)]
        retrieval, sentences = await asyncio.gather(self._judge_retrieval(good), self._judge_sentences(good))
        results: dict[int, VeraEnhancement | Exception] = {}
        stage: list[tuple[int, _Plan, RetrievalCheck | None, StepResult, list[str]]] = []
        for k, plan in enumerate(good):
            try:
                check = self._retrieval_check(plan, retrieval[k])
                if generate is not None and check is not None and not check.required:
                    step = StepResult(
                        "context_relevance", None, [], ["retrieval not required: answered without documents"]
                    )
                    stage.append((k, plan, check, step, []))
                    continue
                step, edited = self._context_step(plan, sentences[k])
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
                        judge=self.judge.description,
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
            _Plan(plan.row.model_copy(update={"answer": answer}), edited)
            for (_, plan, _, _, edited), answer in zip(stage, originals, strict=True)
        ]
        for ap in answer_plans:
            ap.statements = self._rule_statements(ap.row.answer)
        await self._split([ap for ap in answer_plans if ap.statements])
        relevance = await self._judge_statements(answer_plans, [ap.statements for ap in answer_plans])
        relevant: list[list[Span]] = []
        relevance_steps: list[StepResult | JudgeFailure] = []
        for ap, verdicts in zip(answer_plans, relevance, strict=True):
            try:
                step, kept = self._relevance_step(ap.statements, verdicts)
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
            self._judge_adherence(answer_plans, to_check, adherence_docs),
            self._consens(answer_plans, to_check, adherence_docs),
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
                    adh, final_spans = self._adherence_step(
                        relevant[j], adherence[0][j], consens[j], correct=True, notes=adherence[1][j]
                    )
                except JudgeFailure as exc:
                    results[k] = exc
                    continue
            answer = _join(ap.row.answer, final_spans).strip()
            refused = not answer
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
                judge=self.judge.description,
                regenerated=generate is not None,
            )
        out: list[VeraEnhancement | Exception] = []
        k = 0
        for plan_or_error in plans:
            if isinstance(plan_or_error, _Plan):
                out.append(results[k])
                k += 1
            else:
                out.append(plan_or_error)
        return out

    async def aclose(self) -> None:
        """Close the judge's disk cache when this object made the judge (a judge passed in is the
        caller's to close)."""
        close = getattr(self.judge, "close", None)
        if self._owns_judge and callable(close):
            close()

    def evaluate_sync(self, rows: Sequence[RagRow]) -> list[VeraEvaluation | Exception]:
        return run_sync(self.evaluate(rows))

    def enhance_sync(
        self, rows: Sequence[RagRow], generate: AnswerFn | None = None
    ) -> list[VeraEnhancement | Exception]:
        return run_sync(self.enhance(rows, generate))

    async def check_retrieval_need(self, questions: Sequence[str]) -> list[RetrievalCheck | Exception]:
        """Step 1 alone, for pipelines that decide whether to retrieve."""
        verdicts = await self.judge.judge(RETRIEVAL_NEED, [QuestionInput(question=q) for q in questions])
        out: list[RetrievalCheck | Exception] = []
        for v in verdicts:
            if not v.ok:
                out.append(JudgeFailure(f"retrieval check: {v.error}"))
            else:
                out.append(RetrievalCheck(v.label in RETRIEVAL_NEED.positive_labels, v.confidence, v.reason))
        return out

    # -- planning -----------------------------------------------------------------------------
    def _plan_or_error(self, row: RagRow, *, require_answer: bool) -> _Plan | InputError:
        try:
            return self._plan(row, require_answer=require_answer)
        except InputError as exc:
            return exc

    def _plan(self, row: RagRow, *, require_answer: bool) -> _Plan:
        if not row.question.strip():
            raise InputError("the question is empty", row=row.id, field="question")
        if not any(c.strip() for c in row.contexts):
            raise InputError(
                "every context is empty: there is nothing to judge against", row=row.id, field="contexts"
            )
        plan = _Plan(row, list(row.contexts))
        for d, doc in enumerate(row.contexts):
            plan.sentences.extend((d, s) for s in split_sentences(doc, max_chars=MAX_SENTENCE_CHARS))
        if require_answer:
            if not row.answer.strip():
                raise InputError("the answer is empty", row=row.id, field="answer")
            plan.statements = self._rule_statements(row.answer)
            if not plan.statements:
                raise InputError(
                    "the answer has no statement to judge (no words)", row=row.id, field="answer"
                )
        return plan

    @staticmethod
    def _rule_statements(answer: str) -> list[Span]:
        return split_statements(answer, max_chars=MAX_STATEMENT_CHARS) if answer.strip() else []

    async def _split(self, plans: Sequence[_Plan]) -> None:
        """Replace the rule-based statements by the judge's split where configured."""
        use_judge = self.splitter == "judge" or (self.splitter == "auto" and self.judge.can_split)
        if not use_judge or not plans:
            return
        results = await self.judge.split(
            [SplitInput(question=p.row.question, answer=p.row.answer) for p in plans]
        )
        for plan, result in zip(plans, results, strict=True):
            if isinstance(result, Verdict):
                plan.splitter = f"rules (the judge's split failed: {result.error})"
                continue
            plan.statements = [_free_span(s) for s in result]
            plan.splitter = "judge"

    # -- judging ------------------------------------------------------------------------------
    async def _judge_grouped(
        self, prompt: JudgePrompt[Any], groups: list[list[BaseModel]]
    ) -> list[list[Verdict]]:
        flat = [item for group in groups for item in group]
        verdicts = iter(await self.judge.judge(prompt, flat) if flat else [])
        return [[next(verdicts) for _ in group] for group in groups]

    async def _judge_retrieval(self, plans: Sequence[_Plan]) -> list[Verdict | None]:
        if not self.check_retrieval:
            return [None] * len(plans)
        groups = await self._judge_grouped(
            RETRIEVAL_NEED, [[QuestionInput(question=p.row.question)] for p in plans]
        )
        return [g[0] for g in groups]

    async def _judge_sentences(self, plans: Sequence[_Plan]) -> list[list[Verdict]]:
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
        return await self._judge_grouped(CONTEXT_RELEVANCE, groups)

    async def _judge_statements(
        self, plans: Sequence[_Plan], statements: Sequence[Sequence[Span]]
    ) -> list[list[Verdict]]:
        groups: list[list[BaseModel]] = [
            [StatementInput(question=p.row.question, statement=s.text) for s in spans]
            for p, spans in zip(plans, statements, strict=True)
        ]
        return await self._judge_grouped(STATEMENT_RELEVANCE, groups)

    async def _judge_adherence(
        self, plans: Sequence[_Plan], statements: Sequence[Sequence[Span]], documents: Sequence[Sequence[str]]
    ) -> tuple[list[list[Verdict]], list[list[str]]]:
        """Verdicts per row, and per row a note for each statement whose context had to be cut."""
        if self.adherence_signal == "consens":
            return [[] for _ in plans], [[] for _ in plans]
        groups: list[list[BaseModel]] = []
        notes: list[list[str]] = []
        for spans, docs in zip(statements, documents, strict=True):
            context = "\n\n".join(d.strip() for d in docs if d.strip())
            items: list[BaseModel] = []
            row_notes: list[str] = []
            for i, span in enumerate(spans):
                shown = self._fit_context(context, span.text)
                if len(shown) < len(context):
                    row_notes.append(
                        f"statement {i}: the context was cut to its first {len(shown)} of {len(context)} "
                        "characters to fit the judge's window"
                    )
                items.append(AdherenceInput(context=shown, statement=span.text))
            groups.append(items)
            notes.append(row_notes)
        return await self._judge_grouped(RESPONSE_ADHERENCE, groups), notes

    def _fit_context(self, context: str, statement: str) -> str:
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

    async def _consens(
        self, plans: Sequence[_Plan], statements: Sequence[Sequence[Span]], documents: Sequence[Sequence[str]]
    ) -> list[list[Any]]:
        """Per row, each statement's :class:`~ragsense.consens.GroundingResult` (or its error)."""
        if self.adherence_signal == "judge":
            return [[] for _ in plans]
        scorer = self._scorer()
        requests: list[tuple[str, list[str], str]] = []
        for plan, spans, docs in zip(plans, statements, documents, strict=True):
            kept_docs = [d for d in docs if d.strip()]
            requests.extend((plan.row.question, kept_docs, s.text) for s in spans)
        results = iter(await scorer.score(requests) if requests else [])
        return [[next(results) for _ in spans] for spans in statements]

    def _scorer(self) -> Any:
        if self._consens_scorer is None:
            from ragsense.consens import NO_CONTEXT_CACHE, GroundingScorer, NoContextCache

            spec = self._consens_model_spec
            if spec is None:
                spec = self.judge_model if isinstance(self.judge_model, SupportsLogprobs) else DEFAULT_MODEL
            model = self.pool.get(spec)
            cache = self.pool.shared(model, NO_CONTEXT_CACHE, NoContextCache)
            self._consens_scorer = GroundingScorer(
                model, aggregation=ADHERENCE_AGGREGATION, no_context_cache=cache
            )
        return self._consens_scorer

    # -- assembling steps ---------------------------------------------------------------------
    @staticmethod
    def _failed(step: str, what: str, verdict: Verdict) -> JudgeFailure:
        raw = f"; raw reply: {verdict.raw[:200]!r}" if verdict.raw else ""
        return JudgeFailure(f"{step}: the judge could not judge {what}: {verdict.error}{raw}")

    def _retrieval_check(self, plan: _Plan, verdict: Verdict | None) -> RetrievalCheck | None:
        if verdict is None:
            return None
        if not verdict.ok:
            raise self._failed("retrieval check", "the question", verdict)
        return RetrievalCheck(
            verdict.label in RETRIEVAL_NEED.positive_labels, verdict.confidence, verdict.reason
        )

    def _context_step(self, plan: _Plan, verdicts: list[Verdict]) -> tuple[StepResult, list[str]]:
        decisions: list[Decision] = []
        kept: dict[int, list[Span]] = {d: [] for d in range(len(plan.documents))}
        total = kept_chars = 0
        for i, ((d, span), v) in enumerate(zip(plan.sentences, verdicts, strict=True)):
            if not v.ok:
                raise self._failed("context relevance", f"sentence {i} of document {d}", v)
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
        edited = [_join(doc, kept[d]) for d, doc in enumerate(plan.documents)]
        score = kept_chars / total if total else None
        return StepResult("context_relevance", score, decisions), edited

    def _relevance_step(
        self, statements: Sequence[Span], verdicts: list[Verdict]
    ) -> tuple[StepResult, list[Span]]:
        decisions: list[Decision] = []
        kept: list[Span] = []
        for i, (span, v) in enumerate(zip(statements, verdicts, strict=True)):
            if not v.ok:
                raise self._failed("response relevance", f"statement {i} {span.text[:60]!r}", v)
            keep = v.label in STATEMENT_RELEVANCE.positive_labels
            if keep:
                kept.append(span)
            decisions.append(
                Decision(
                    i,
                    span.text,
                    keep,
                    v.label,
                    *_offsets(span),
                    v.confidence,
                    v.reason,
                    forced_split=span.forced,
                )
            )
        score = sum(d.keep for d in decisions) / len(decisions) if decisions else None
        return StepResult("response_relevance", score, decisions), kept

    def _adherence_step(
        self,
        statements: Sequence[Span],
        verdicts: list[Verdict],
        consens: list[Any],
        *,
        correct: bool = False,
        notes: Sequence[str] = (),
    ) -> tuple[StepResult, list[Span]]:
        decisions: list[Decision] = []
        final: list[Span] = []
        notes = list(notes)
        for i, span in enumerate(statements):
            v = verdicts[i] if verdicts else None
            result = consens[i] if consens else None
            if v is not None and not v.ok:
                raise self._failed("response adherence", f"statement {i} {span.text[:60]!r}", v)
            if isinstance(result, Exception):
                raise JudgeFailure(f"response adherence: ConSens failed on statement {i}: {result}")
            c = None if result is None else float(result.consens)
            judge_p = _grounded_probability(v) if v is not None else None
            consens_p = None if c is None else (1.0 + c) / 2.0
            if self.adherence_signal == "judge":
                # The judge's verdict decides on P(stated) + P(inferable) >= 0.5 (decide_label).
                assert judge_p is not None
                keep, p = v is not None and v.label in RESPONSE_ADHERENCE.positive_labels, judge_p
            elif self.adherence_signal == "consens":
                assert c is not None and consens_p is not None
                keep, p = c > self.consens_threshold, consens_p
            else:
                assert judge_p is not None and consens_p is not None
                p = (judge_p + consens_p) / 2.0
                keep = p >= 0.5
            label = v.label if v is not None else ("grounded" if keep else "unsupported")
            correction = v.correction if (v is not None and not keep and correct) else None
            if keep:
                final.append(span)
            elif correction:
                final.append(_free_span(correction))
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
                    *_offsets(span),
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


async def _pair(nothing: list[list[Any]]) -> tuple[list[list[Verdict]], list[list[str]]]:
    return nothing, nothing


def _not_run(name: str) -> StepResult:
    return StepResult(name, None, [], ["step not run (not in steps)"])


def _offsets(span: Span) -> tuple[int | None, int | None]:
    return (None, None) if span.start < 0 else (span.start, span.end)


def _grounded_probability(verdict: Verdict) -> float:
    """P(stated) + P(inferable) from a label-scoring judge, else 1 or 0 from the label."""
    if verdict.probabilities:
        p = math.fsum(verdict.probabilities.get(label, 0.0) for label in RESPONSE_ADHERENCE.positive_labels)
        return min(1.0, max(0.0, p))
    return 1.0 if verdict.label in RESPONSE_ADHERENCE.positive_labels else 0.0
