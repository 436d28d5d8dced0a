"""ConSens over a model: build the prompts, score them in one batched call, turn log-probs into scores.

For each row the scorer asks the model for the answer's token log-probs under the empty context (cached
per (question, answer): one answer against many contexts costs one no-context pass), the full context,
and with attribution the context with each document left out (the paper's Experiment 3). All requests
of a batch of rows go to the model in one ``score`` call, which the backend packs into forward passes.
"""

from __future__ import annotations

import math
from collections import ChainMap, OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ragsense.consens._binding import (
    DEFAULT_BINDING_SETTING,
    BindingCheck,
    BindingFinding,
    BindingPlan,
    answer_totals,
    findings_of,
    margins_with_context,
    misbound_strengths,
    no_context_requests,
    own_requests,
    plan_binding,
    with_misbound,
)
from ragsense.consens._learned import learned_score, learned_score_without
from ragsense.consens._math import (
    STATED_AGGREGATIONS,
    WORD_AGGREGATIONS,
    Aggregation,
    consens_from_word_nll,
    log_mean_perplexity,
    perplexity_aggregation,
    safe_exp,
)
from ragsense.consens._prompt import PromptTemplate
from ragsense.consens._result import (
    ATTRIBUTION_AGGREGATION,
    DEFAULT_AGGREGATION,
    DocumentAttribution,
    GroundingResult,
    WordDetail,
    check_bands,
)
from ragsense.consens._select import (
    DEFAULT_CONTEXT_BUDGET,
    DEFAULT_CONTEXT_POLICY,
    ContextBudget,
    Selection,
    check_context_budget,
    check_context_policy,
    fit_context,
    row_budget,
    row_policy,
    tail_fit,
)
from ragsense.consens._verdicts import Bands, verdict_of
from ragsense.errors import InputError, ParameterError
from ragsense.models import (
    ContinuationScore,
    LanguageModel,
    ScoreGroup,
    ScoreRequest,
    SupportsGroupScoring,
    SupportsLogprobs,
    require,
)
from ragsense.text import (
    ContentSelection,
    ContextVocabulary,
    Word,
    align_tokens_to_words,
    content_words,
    is_refusal,
    word_logprob_sums,
)

NoContextCache = OrderedDict[ScoreRequest, ContinuationScore]
"""No-context scores by request; one per model can be shared by every scorer on that model."""
NO_CONTEXT_CACHE = "consens.no_context"
"""The name of a model's shared no-context cache in a :class:`~ragsense.models.ModelPool`."""

# Tokens kept free below the model window (the answer prefix and tokenizer edge effects).
_WINDOW_MARGIN = 8


@dataclass
class _Plan:
    """The prompts of one row and where their scores land."""

    selection: ContentSelection
    empty: ScoreRequest
    full: ScoreRequest
    context: Selection
    vocabulary: ContextVocabulary  # of the context as scored (after truncation)
    refusal: bool
    answer: str
    # Per left-out document: the request, whether it was truncated, the words of what is left, its text.
    leave_one_out: list[tuple[ScoreRequest, bool, ContextVocabulary, str]] = field(default_factory=list)
    binding: BindingPlan | None = None

    @property
    def checked(self) -> bool:
        """Whether the binding check scores this row: it has variants (the check on, not a refusal)."""
        return self.binding is not None and bool(self.binding.variants)


class GroundingScorer:
    """Scores rows with ConSens on one model. Reuse one scorer to benefit from its no-context cache.

    The ``learned`` score (:mod:`~ragsense.consens._learned`) reads every context sentence, about a
    third of a row's Python time: it is computed (into ``consens_by_aggregation`` and attribution's
    ``consens_without_by_aggregation``) only when it is the aggregation or ``learned=True`` asks for it
    beside another; every other score is the same either way (issue 49).

    >>> import asyncio
    >>> from ragsense.models import load_model
    >>> scorer = GroundingScorer(load_model("fake"))
    >>> [res] = asyncio.run(scorer.score([("Who designs proteins?",
    ...     ["David Baker designs proteins at the University of Washington."],
    ...     "David Baker, at the University of Washington.")]))
    >>> res.consens > 0.5
    True
    """

    def __init__(
        self,
        model: LanguageModel,
        *,
        template: PromptTemplate | None = None,
        aggregation: Aggregation | str = DEFAULT_AGGREGATION,
        cache_size: int = 4096,
        no_context_cache: NoContextCache | None = None,
        bands: Bands | None = None,
        context_budget: ContextBudget = DEFAULT_CONTEXT_BUDGET,
        context_policy: str = DEFAULT_CONTEXT_POLICY,
        binding: BindingCheck | None = DEFAULT_BINDING_SETTING,
        learned: bool = False,
    ) -> None:
        # mypy rejects a Protocol where type[T] is expected (python/mypy#4717); require() only
        # uses it with isinstance, which a runtime_checkable Protocol supports.
        self.model = require(model, SupportsLogprobs, "ConSens")  # type: ignore[type-abstract]
        self.template = template or PromptTemplate()
        self.aggregation = Aggregation(aggregation)
        self.bands = check_bands(bands, self.aggregation)
        # Given by a model pool, the cache is shared by every scorer on the model (ConSens and VERA's
        # ConSens signal ask for the same no-context passes once).
        self._empty_cache: NoContextCache = OrderedDict() if no_context_cache is None else no_context_cache
        self._cache_size = cache_size
        self.context_budget = check_context_budget(context_budget)
        self.context_policy = check_context_policy(context_policy)
        if binding is not None and not isinstance(binding, BindingCheck):
            raise ParameterError(f"must be a BindingCheck or None, got {binding!r}", parameter="binding")
        self.binding = binding
        self.learned = learned or self.aggregation is Aggregation.LEARNED

    async def score(
        self,
        rows: Sequence[tuple[str, Sequence[str], str]],
        *,
        attribution: bool = False,
    ) -> list[GroundingResult | InputError]:
        """Score ``(question, contexts, answer)`` rows; a row that cannot be scored yields its error."""
        plans: list[_Plan | InputError] = []
        for i, (question, contexts, answer) in enumerate(rows):
            try:
                plans.append(self._plan(question, list(contexts), answer, attribution))
            except InputError as exc:
                plans.append(exc if exc.row is not None else InputError(exc.reason, row=i, field=exc.field))
        # A dict keeps first-seen order and drops repeats (the same no-context prompt for rows that
        # share a question and answer, a context that equals a leave-one-out context, ...).
        wanted: dict[ScoreRequest, None] = {}
        for plan in plans:
            if isinstance(plan, _Plan):
                if plan.empty not in self._empty_cache:
                    wanted[plan.empty] = None
                if not plan.checked:  # a checked row's own request is scored with its variants
                    wanted[plan.full] = None
                wanted.update((req, None) for req, *_ in plan.leave_one_out)
        requests = list(wanted)
        scored = dict(zip(requests, await self.model.score(requests), strict=True)) if requests else {}
        findings, own = await self._binding_findings(plans, scored)
        for plan in plans:
            if isinstance(plan, _Plan) and plan.empty in scored:
                self._remember(plan.empty, scored[plan.empty])
        results: list[GroundingResult | InputError] = []
        for i, plan in enumerate(plans):
            if isinstance(plan, InputError):
                results.append(plan)
                continue
            empty = scored.get(plan.empty) or self._empty_cache[plan.empty]
            row_scored = ChainMap({plan.full: own[i]}, scored) if i in own else scored
            try:
                results.append(self._result(plan, empty, row_scored, findings.get(i)))
            except ValueError as exc:
                results.append(InputError(str(exc), row=i, field="answer"))
        return results

    async def _binding_findings(
        self, plans: Sequence[_Plan | InputError], scored: dict[ScoreRequest, ContinuationScore]
    ) -> tuple[dict[int, list[BindingFinding]], dict[int, ContinuationScore]]:
        """Each checked row's misbound findings, and its answer's own score under the context, in two
        steps after the rows' own call: the answer and its variants under the context, then the
        answer and the variants the context prefers without it. Each step scores one group per row
        (:class:`~ragsense.models.ScoreGroup`: the row's prompt, then the answer and its variants in
        one pass), so a row's findings depend on the row alone. The answer's stretches are read off
        its own scores in the group (:func:`answer_totals`)."""
        check = self.binding
        checked = [
            (i, plan, plan.binding)
            for i, plan in enumerate(plans)
            if isinstance(plan, _Plan) and plan.checked and plan.binding is not None
        ]
        if check is None or not checked:
            return {}, {}
        with_context = await self._answer_groups(
            [(plan.full, bp, bp.with_context, dict(enumerate(bp.originals))) for _, plan, bp in checked]
        )
        margins: dict[int, list[float]] = {}
        without: dict[int, list[tuple[int, ScoreRequest, ScoreRequest]]] = {}
        for (i, plan, bp), (found, totals) in zip(checked, with_context, strict=True):
            margins[i] = margins_with_context(bp, found, totals)
            without[i] = no_context_requests(
                bp, margins[i], plan.empty, plan.answer, self.template.continuation, check
            )
        asked = [(i, plan, bp) for i, plan, bp in checked if without[i]]
        # Without the context, a stretch the answer's own tokens cannot give is read from the
        # answer's no-context request for that variant (never its request under the context).
        no_context = await self._answer_groups(
            [
                (plan.empty, bp, [v for _, v, _ in without[i]], {k: o for k, _, o in without[i]})
                for i, plan, bp in asked
            ]
        )
        scored_without = {i: result for (i, _, _), result in zip(asked, no_context, strict=True)}
        findings = {}
        for i, _, bp in checked:
            found, totals = scored_without.get(i, ({}, []))
            findings[i] = findings_of(bp, margins[i], without[i], found, check, totals)
        own = {i: found[plan.full] for (i, plan, _), (found, _) in zip(checked, with_context, strict=True)}
        return findings, own

    async def _answer_groups(
        self,
        rows: Sequence[tuple[ScoreRequest, BindingPlan, Sequence[ScoreRequest], Mapping[int, ScoreRequest]]],
    ) -> list[tuple[dict[ScoreRequest, ContinuationScore], list[float | None]]]:
        """Per ``(the answer's request, plan, variant requests, original stretch requests)``: the
        scores of one group of the answer and the variants after the answer's prompt, and the answer's
        stretches read off its score. A stretch that is not a run of its tokens (:func:`answer_totals`
        None, rare: a token across the stretch's end, such as ``".\\n\\n"``) is scored as its own
        request, from the step's ``originals`` (variant index -> request), in a further call."""
        if not rows:
            return []
        groups = await self._score_groups([(answer, [answer, *variants]) for answer, _, variants, _ in rows])
        totals = [
            answer_totals(bp, found[answer]) for (answer, bp, _, _), found in zip(rows, groups, strict=True)
        ]
        missing = [
            (answer, own_requests(originals, tot))
            for (answer, _, _, originals), tot in zip(rows, totals, strict=True)
        ]
        if any(requests for _, requests in missing):
            extra = await self._score_groups([m for m in missing if m[1]])
            it = iter(extra)
            for (_, requests), found in zip(missing, groups, strict=True):
                if requests:
                    found.update(next(it))
        return list(zip(groups, totals, strict=True))

    async def _score_groups(
        self, groups: Sequence[tuple[ScoreRequest, Sequence[ScoreRequest]]]
    ) -> list[dict[ScoreRequest, ContinuationScore]]:
        """Per ``(prompt, requests)`` group, its requests' scores: one :class:`ScoreGroup` each where
        the model scores groups, else one ``score`` call for all (each request then alone)."""
        if not groups:
            return []
        unique = [list(dict.fromkeys(requests)) for _, requests in groups]
        if isinstance(self.model, SupportsGroupScoring):
            batch = [
                ScoreGroup(prompt.prompt, tuple(requests), prompt.splits)
                for (prompt, _), requests in zip(groups, unique, strict=True)
            ]
            results = await self.model.score_groups(batch)
            return [dict(zip(g.requests, r, strict=True)) for g, r in zip(batch, results, strict=True)]
        flat = list(dict.fromkeys(r for requests in unique for r in requests))
        scores = dict(zip(flat, await self.model.score(flat), strict=True))
        return [{r: scores[r] for r in requests} for requests in unique]

    # -- planning ------------------------------------------------------------------------------
    def _plan(self, question: str, contexts: list[str], answer: str, attribution: bool) -> _Plan:
        if not answer.strip():
            raise InputError("the answer is empty", field="answer")
        if not question.strip():
            raise InputError("the question is empty", field="question")
        positions = [i for i, c in enumerate(contexts) if c.strip()]
        if not positions:
            raise InputError("no non-empty context document", field="contexts")
        documents = [contexts[i] for i in positions]
        continuation = self.template.continuation(answer)
        selection = content_words(continuation, question)
        empty = ScoreRequest(self.template.render_context(question, ""), continuation)
        window = self._context_budget(question, continuation)
        chosen_budget = row_budget(self.context_budget, len(documents))
        budget = window if chosen_budget is None else min(window, chosen_budget)
        sep, count = self.template.document_separator, self.model.count_tokens
        query, policy = f"{question}\n{answer}", row_policy(self.context_policy, self.context_budget)
        chosen = fit_context(documents, query, budget, window, count, policy, sep)
        chosen = chosen.renumbered(positions)
        # Split after each document: a leave-one-out prompt shares the documents before the one it
        # drops with this prompt, and runs only the rest (bit-identical either way; models/_hf_shared.py).
        parts = [text for _, text in chosen.parts]
        prompt, splits = self.template.render_split(question, parts, chosen.context)
        full = ScoreRequest(prompt, continuation, splits)
        vocabulary = ContextVocabulary([chosen.context])
        plan = _Plan(selection, empty, full, chosen, vocabulary, is_refusal(answer), answer)
        if self.binding is not None and not plan.refusal:
            plan.binding = plan_binding(
                answer, [chosen.context], full, self.template.continuation, self.binding, self._fits
            )
        if attribution and len(chosen.parts) > 1:
            # Leave-one-out over the kept documents only: the others were not read (the row lists them).
            for k in range(len(parts)):
                others = parts[:k] + parts[k + 1 :]
                rest_fit, rest_dropped = tail_fit(self.model.count_tokens, self.template.join(others), window)
                prompt, splits = self.template.render_split(question, others, rest_fit)
                plan.leave_one_out.append(
                    (
                        ScoreRequest(prompt, continuation, splits),
                        rest_dropped > 0,
                        ContextVocabulary([rest_fit]),
                        rest_fit,
                    )
                )
        return plan

    def _context_budget(self, question: str, continuation: str) -> int:
        fixed = self.model.count_tokens(self.template.render_context(question, "") + continuation)
        budget = self.model.info.context_window - fixed - _WINDOW_MARGIN
        if budget <= 0:
            raise InputError(
                f"question and answer alone take {fixed} tokens, over the model window of "
                f"{self.model.info.context_window}",
                field="answer",
            )
        return budget

    def _fits(self, request: ScoreRequest) -> bool:
        """Whether ``request`` fits the model window with the margin the row's own request keeps.
        Tokens are counted only for a text long enough to need it (a byte-level tokenizer makes at most
        one token per UTF-8 byte)."""
        limit = self.model.info.context_window - _WINDOW_MARGIN
        text = request.prompt + request.continuation
        return len(text.encode("utf-8")) + _WINDOW_MARGIN <= limit or self.model.count_tokens(text) <= limit

    def _remember(self, req: ScoreRequest, res: ContinuationScore) -> None:
        self._empty_cache[req] = res
        self._empty_cache.move_to_end(req)
        while len(self._empty_cache) > self._cache_size:
            self._empty_cache.popitem(last=False)

    # -- scoring -------------------------------------------------------------------------------
    @staticmethod
    def _kept_tokens(plan: _Plan, score: ContinuationScore) -> list[list[int]]:
        alignment = align_tokens_to_words(plan.selection.words, score.offsets)
        return [alignment[i] for i in plan.selection.kept_indices]

    def _result(
        self,
        plan: _Plan,
        empty: ContinuationScore,
        scored: Mapping[ScoreRequest, ContinuationScore],
        findings: list[BindingFinding] | None = None,
    ) -> GroundingResult:
        if not plan.selection.kept:
            raise ValueError("the answer has no words to score (only punctuation or symbols)")
        conditions = [empty, scored[plan.full]] + [scored[req] for req, *_ in plan.leave_one_out]
        alignments = [self._kept_tokens(plan, score) for score in conditions]
        # A word can own no token when a token spans two words ("06:30" as one token for the words
        # "06" and "30"): the token goes to the first word only, so the second cannot be scored on its
        # own. Such words are left out in every condition alike, and the row says so.
        usable = [k for k in range(len(plan.selection.kept)) if all(a[k] for a in alignments)]
        if not usable:
            raise ValueError("no answer word could be aligned to its own token")

        def nll(score: ContinuationScore, alignment: list[list[int]]) -> list[float]:
            return [-x for x in word_logprob_sums(score.logprobs, [alignment[k] for k in usable])]

        nll_empty = nll(empty, alignments[0])
        nll_full = nll(scored[plan.full], alignments[1])
        loo_nll = [nll(score, a) for score, a in zip(conditions[2:], alignments[2:], strict=True)]
        kept_words = [plan.selection.kept[k].text for k in usable]
        stated = [plan.vocabulary.states(w) for w in kept_words]
        shift = len(self.template.answer_prefix)
        answer_words = [
            Word(w.text, w.start - shift, w.end - shift) for w in (plan.selection.kept[k] for k in usable)
        ]
        strengths = misbound_strengths(answer_words, findings or [])
        # Misbound words count against the answer in the scores that read stated flags (the ones blind
        # to binding); with no misbound word these are the very same inputs.
        nll_bound, stated_bound = with_misbound(nll_empty, nll_full, stated, strengths)
        by_agg = {
            a.value: consens_from_word_nll(
                nll_empty,
                nll_bound if a in STATED_AGGREGATIONS else nll_full,
                a,
                stated_bound if a in STATED_AGGREGATIONS else stated,
            )
            for a in WORD_AGGREGATIONS
        }
        ppl_aggregation = perplexity_aggregation(self.aggregation)
        log_p_empty = log_mean_perplexity(nll_empty, ppl_aggregation)
        log_p_context = log_mean_perplexity(nll_full, ppl_aggregation)
        words = [
            WordDetail(
                word=w.text,
                start=w.start - shift,
                end=w.end - shift,
                ppl_context=safe_exp(c),
                ppl_empty=safe_exp(e),
                nll_context=c,
                nll_empty=e,
                stated=st,
            )
            for w, c, e, st in zip(
                [plan.selection.kept[k] for k in usable], nll_full, nll_empty, stated, strict=True
            )
        ]
        if self.learned:
            by_agg[Aggregation.LEARNED.value] = learned_score(
                words, plan.answer, [p[1] for p in plan.context.parts]
            )
        consens, raw = by_agg[self.aggregation.value]
        attribution, top = None, None
        if plan.leave_one_out:
            attribution = []
            for k, ((_, truncated, rest, rest_text), nll_without) in enumerate(
                zip(plan.leave_one_out, loo_nll, strict=True)
            ):
                stated_without = [rest.states(w) for w in kept_words]
                without = {
                    agg.value: consens_from_word_nll(nll_empty, nll_without, agg, stated_without)[0]
                    for agg in WORD_AGGREGATIONS
                }
                if self.learned:
                    without[Aggregation.LEARNED.value] = learned_score_without(
                        words, nll_without, stated_without, plan.answer, [rest_text]
                    )
                own = without[ATTRIBUTION_AGGREGATION.value]
                full = by_agg[ATTRIBUTION_AGGREGATION.value][0]
                index = plan.context.parts[k][0]
                attribution.append(DocumentAttribution(index, own, full - own, without, truncated))
            best = min(attribution, key=lambda a: (a.consens_without, a.index))
            # The top document is one the answer rests on: its removal lowers the score. When no
            # removal does (a refusal's drops are all negative), no document is named.
            top = best.index if best.drop > 0 else None
        notes = []
        if plan.context.dropped_tokens:
            notes.append(plan.context.note())
        if len(usable) < len(plan.selection.kept):
            notes.append(
                f"{len(plan.selection.kept) - len(usable)} word(s) share a token with a neighbour"
                " and were not scored"
            )
        if plan.selection.fallback == "all_words":
            notes.append("no content word left after filtering; scored all words of the answer")
        if plan.binding is not None and plan.binding.left_out:
            notes.append(
                f"binding check: {plan.binding.left_out} variant(s) left out: longer than the answer,"
                " they would not fit the model window"
            )
        result = GroundingResult(
            consens=consens,
            consens_raw=raw,
            ppl_context=safe_exp(log_p_context),
            ppl_empty=safe_exp(log_p_empty),
            aggregation=self.aggregation.value,
            consens_by_aggregation={k: v[0] for k, v in by_agg.items()},
            words=words,
            fallback=plan.selection.fallback,
            truncated=plan.context.dropped_tokens > 0,
            context_tokens_dropped=plan.context.dropped_tokens,
            kept_documents=plan.context.kept_documents,
            context_selection=plan.context.unit,
            attribution=attribution,
            top_document=top,
            notes=notes,
            refusal=plan.refusal,
            binding=None if plan.binding is None else list(findings or []),
            binding_variants=0 if plan.binding is None else len(plan.binding.variants),
            verdict=verdict_of(consens, plan.refusal, self.bands),
        )
        if not math.isfinite(result.consens):
            raise ValueError("internal error: non-finite ConSens")  # never emit NaN silently
        return result
