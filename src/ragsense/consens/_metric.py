"""ConSens (and leave-one-document-out attribution) as a :class:`~ragsense.contract.Metric`: what
``evaluate(..., metrics=["consens"])`` runs. It scores through the :class:`GroundingScorer` the method
defines beside it; ``ragsense.grounding`` is the one-row convenience over ``evaluate``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragsense.consens._binding import DEFAULT_BINDING, DEFAULT_BINDING_SETTING, BindingCheck
from ragsense.consens._learned import learned_verdict
from ragsense.consens._math import Aggregation
from ragsense.consens._prompt import PromptTemplate
from ragsense.consens._result import DEFAULT_AGGREGATION, LEGACY_RAW_FIELD, GroundingResult, check_bands
from ragsense.consens._scorer import NO_CONTEXT_CACHE, GroundingScorer, NoContextCache
from ragsense.consens._select import (
    DEFAULT_CONTEXT_BUDGET,
    DEFAULT_CONTEXT_POLICY,
    ContextBudget,
    check_context_budget,
    check_context_policy,
)
from ragsense.consens._verdicts import VERDICTS, Bands, resolve_bands, verdict_of
from ragsense.contract import REFUSAL, Needs
from ragsense.data import RagRow
from ragsense.errors import InputError, ParameterError, ResumeError
from ragsense.models import ModelPool, ModelSpec
from ragsense.text import is_refusal

RAW_FIELD = "consens_raw"
"""The aggregation's value before it becomes the score (``RAW_SCORE_MEANINGS`` says what it is)."""

CONSENS_FIELDS = (
    "consens",
    RAW_FIELD,
    "ppl_context",
    "ppl_empty",
    "aggregation",
    "consens_by_aggregation",
    "words",
    "fallback",
    "truncated",
    "context_tokens_dropped",
    "kept_documents",
    "context_selection",
    "notes",
    "refusal",
    "binding",
    "binding_variants",
    "verdict",
    "model",
)
ATTRIBUTION_FIELDS = ("attribution", "top_document")


def rederived_row(record: Mapping[str, Any], bands: Bands, *, refusal: bool | None = None) -> dict[str, Any]:
    """A copy of a ConSens output row with its verdict read again from its stored score under
    ``bands`` (:func:`verdict_of`: ``refusal`` stays one; ``refusal`` given replaces the stored flag),
    and the field ``r`` of older files renamed ``consens_raw``. A row ConSens did not score (no
    number in ``consens``) comes back as it was. Bands fitted on another aggregation than the row's
    raise :class:`~ragsense.errors.ParameterError` (they would mislabel every row).

    >>> row = {"consens": 0.5, "r": -0.4, "aggregation": "support", "refusal": False, "verdict": "unsure"}
    >>> new = rederived_row(row, Bands("support", grounded_at=0.4, ungrounded_below=0.0))
    >>> new["verdict"], new["consens_raw"], "r" in new
    ('grounded', -0.4, False)
    """
    score = record.get("consens")
    if isinstance(score, bool) or not isinstance(score, int | float):
        return dict(record)
    try:
        aggregation = Aggregation(record.get("aggregation", bands.score))
    except ValueError:
        raise ParameterError(
            f"unknown aggregation {record.get('aggregation')!r}", parameter="bands"
        ) from None
    check_bands(bands, aggregation)
    if refusal is None:
        refusal = record.get("refusal") is True or record.get("verdict") == REFUSAL
    out = {(RAW_FIELD if k == LEGACY_RAW_FIELD else k): v for k, v in record.items()}
    if "refusal" in out or refusal:
        out["refusal"] = refusal
    out["verdict"] = verdict_of(float(score), refusal, bands)
    return out


def binding_check(binding: BindingCheck | bool | None) -> BindingCheck | None:
    """The binding check a ConSens option asks for: ``True`` the default check, ``False`` none, ``None``
    what ConSens runs when not told (:data:`~ragsense.consens.BINDING_ON_BY_DEFAULT`).

    >>> binding_check(True) is DEFAULT_BINDING, binding_check(False)
    (True, None)
    """
    if binding is None:
        return DEFAULT_BINDING_SETTING
    if binding is True:
        return DEFAULT_BINDING
    if binding is False:
        return None
    if isinstance(binding, BindingCheck):
        return binding
    raise ParameterError(f"must be true, false or a BindingCheck, got {binding!r}", parameter="binding")


class ConSens:
    """ConSens grounding: the answer's perplexity without vs with the context (Vankov et al.).

    ``model``: a model name or object (default: the bundled SmolLM2-135M); ``model_options`` go to
    the backend when the model is named (``device``, ``threads``, ``base_url``). ``attribution``: also
    score the context with each document left out (``attribution``, ``top_document``). ``bands``: the
    verdict bands (a :class:`~ragsense.consens.Bands` or the path of a file ``ragsense calibrate``
    wrote; default: the aggregation's default bands); they must have been fitted on ``aggregation``.
    ``context_budget``: the most context tokens to read: ``"auto"`` (the default) reads a context
    of two or more documents through a relevance window of :data:`AUTO_BUDGET` tokens and a single
    document whole; a number applies to every row; ``None`` is the model window only. A context over
    its budget keeps the best-ranked document (BM25 on the question and answer) whole and then the
    next-ranked ones while they fit (``context_policy="lead"``, what ``"auto"`` reads under the
    ``"auto"`` budget), the documents or sentences most relevant to the answer packed into the budget
    (``"relevance"``, what ``"auto"`` reads under a number of tokens), or its start (``"tail"``), in
    their original order; the row lists ``kept_documents``, ``context_tokens_dropped``,
    ``context_selection`` and sets ``truncated`` (docs/metrics.md). ``binding``: the binding check
    (``True`` runs it, ``False`` does not, a :class:`~ragsense.consens.BindingCheck` sets it; ``None``,
    the default, follows :data:`~ragsense.consens.BINDING_ON_BY_DEFAULT`): variants
    of the answer's context-stated spans scored under the same prompt, a rebinding the context prefers
    counting against the answer (``binding``, ``binding_variants``; docs/metrics.md). ``learned``:
    also compute the ``learned`` score in ``consens_by_aggregation`` when it is not the aggregation
    (it reads every context sentence, so by default only ``aggregation="learned"`` computes it).

    >>> from ragsense import evaluate
    >>> run = evaluate([{"question": "Who designs proteins?",
    ...                  "contexts": ["David Baker designs proteins in Seattle."],
    ...                  "answer": "David Baker, in Seattle."}], [ConSens(model="fake")], progress=False)
    >>> run.rows[0]["verdict"], run.rows[0]["consens"] > 0.5
    ('grounded', True)
    """

    name = "consens"
    needs = Needs(("question", "contexts", "answer"))
    scores = ("consens",)
    verdict = "verdict"
    verdict_values = VERDICTS
    """What ``verdict`` can be (so ``--max-share`` can refuse a misspelt verdict before a run)."""

    def __init__(
        self,
        model: ModelSpec | None = None,
        *,
        attribution: bool = False,
        aggregation: Aggregation | str = DEFAULT_AGGREGATION,
        template: PromptTemplate | None = None,
        model_options: Mapping[str, Any] | None = None,
        bands: Bands | str | None = None,
        context_budget: ContextBudget = DEFAULT_CONTEXT_BUDGET,
        context_policy: str = DEFAULT_CONTEXT_POLICY,
        binding: BindingCheck | bool | None = None,
        learned: bool = False,
    ) -> None:
        try:
            self.aggregation = Aggregation(aggregation)
        except ValueError:
            choices = ", ".join(a.value for a in Aggregation)
            raise ParameterError(
                f"must be one of {choices}, got {aggregation!r}", parameter="aggregation"
            ) from None
        self.bands = check_bands(resolve_bands(bands, None), self.aggregation)
        self.model_spec = model
        self.model_options = dict(model_options or {})
        self.attribution = attribution
        self.context_budget = check_context_budget(context_budget)
        self.context_policy = check_context_policy(context_policy)
        self.binding = binding_check(binding)
        self.learned = learned
        self.template = template or PromptTemplate()
        self.fields = CONSENS_FIELDS + (ATTRIBUTION_FIELDS if attribution else ())
        self._scorer: GroundingScorer | None = None

    def settings(self) -> dict[str, Any]:
        return {
            "model": self.model_spec
            if isinstance(self.model_spec, str | None)
            else self.model_spec.info.name,
            "attribution": self.attribution,
            "aggregation": self.aggregation.value,
            "template": self.template.template,
            "bands": self.bands.to_dict(),
            "context_budget": self.context_budget,
            "context_policy": self.context_policy,
            "binding": None if self.binding is None else self.binding.to_dict(),
            # Only when asked for, so a run stored before the option resumes under the same settings.
            **({"learned": True} if self.learned else {}),
        }

    def model_fingerprints(self) -> dict[str, str]:
        """The scoring model's fingerprint (once set up), for the run store."""
        return {} if self._scorer is None else {"model": self._scorer.model.info.fingerprint}

    async def setup(self, pool: ModelPool) -> None:
        model = pool.get(self.model_spec, **self.model_options)
        cache = pool.shared(model, NO_CONTEXT_CACHE, NoContextCache)
        self._scorer = GroundingScorer(
            model,
            template=self.template,
            aggregation=self.aggregation,
            no_context_cache=cache,
            bands=self.bands,
            context_budget=self.context_budget,
            context_policy=self.context_policy,
            binding=self.binding,
            learned=self.learned,
        )

    async def results(self, rows: Sequence[RagRow]) -> list[GroundingResult | InputError]:
        """The :class:`GroundingResult` of each row, or the :class:`InputError` naming its field."""
        if self._scorer is None:
            raise ParameterError("call setup() first", parameter="ConSens")
        return await self._scorer.score(
            [(r.question, r.contexts, r.answer) for r in rows], attribution=self.attribution
        )

    async def score(self, rows: Sequence[RagRow]) -> list[dict[str, Any] | Exception]:
        # results() raises the clear "call setup() first" error before anything is scored.
        out: list[dict[str, Any] | Exception] = []
        for result in await self.results(rows):
            if isinstance(result, Exception):
                out.append(result)
                continue
            fields = result.to_dict()
            fields["model"] = self._scorer.model.info.name if self._scorer is not None else None
            reader = learned_verdict().reader if self.aggregation is Aggregation.LEARNED else None
            if reader is not None and fields["model"] != reader:
                # The weights read this reader's contrasts; another reader's are on another scale.
                fields["notes"] = [*fields["notes"], f"the learned verdict was fitted on {reader}'s evidence"]
            out.append(fields)
        return out

    def rederive(self, record: Mapping[str, Any], row: RagRow) -> dict[str, Any]:
        """``record`` (a row an earlier run finished) as this metric would write it now, as far as the
        stored values decide it without the model (:func:`rederived_row` under this metric's bands,
        the refusal flag read again from the answer's wording). A resumed run calls it (the contract's
        ``rederive`` capability), so ``--resume --bands NEW`` gives every row the verdict a fresh run
        would. A row scored under another aggregation is a :class:`~ragsense.errors.ResumeError`.
        """
        try:
            return rederived_row(record, self.bands, refusal=is_refusal(row.answer or ""))
        except ParameterError as exc:
            raise ResumeError(
                f"cannot resume: row {record.get('_row')}: {exc.reason}; resume with the settings it was "
                "scored with or use --overwrite"
            ) from None

    async def aclose(self) -> None:
        """Nothing to release: the model belongs to the pool."""


def attribution_metric(
    model: ModelSpec | None = None,
    *,
    aggregation: Aggregation | str = DEFAULT_AGGREGATION,
    template: PromptTemplate | None = None,
    model_options: Mapping[str, Any] | None = None,
    bands: Bands | str | None = None,
    context_budget: ContextBudget = DEFAULT_CONTEXT_BUDGET,
    context_policy: str = DEFAULT_CONTEXT_POLICY,
    binding: BindingCheck | bool | None = None,
    learned: bool = False,
) -> ConSens:
    """``--metrics attribution``: ConSens with leave-one-document-out attribution.

    Its options are ConSens's, spelled out so the registry can refuse a misspelt one up front:

    >>> from ragsense.evaluation import create_metric
    >>> create_metric("attribution", model="fake", agregation="q25")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ragsense.errors.ParameterError: ...did you mean 'aggregation'?...
    """
    return ConSens(
        model,
        attribution=True,
        aggregation=aggregation,
        template=template,
        model_options=model_options,
        bands=bands,
        context_budget=context_budget,
        context_policy=context_policy,
        binding=binding,
        learned=learned,
    )
