"""ConSens (and leave-one-document-out attribution) as a :class:`~ragsense.evaluation.Metric`, and the
one-call functions ``ragsense.grounding`` / ``ragsense.grounding_batch`` built on the same runner."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ragsense._async import run_sync
from ragsense.consens import (
    DEFAULT_AGGREGATION,
    NO_CONTEXT_CACHE,
    VERDICTS,
    Aggregation,
    Bands,
    GroundingResult,
    GroundingScorer,
    NoContextCache,
    PromptTemplate,
    check_bands,
    resolve_bands,
)
from ragsense.data import RagRow, RowError, parse_rows
from ragsense.errors import InputError, ModelCallError, ParameterError
from ragsense.evaluation import Needs, run_rows
from ragsense.models import ModelPool, ModelSpec, shared_pool

CONSENS_FIELDS = (
    "consens",
    "r",
    "ppl_context",
    "ppl_empty",
    "aggregation",
    "consens_by_aggregation",
    "words",
    "fallback",
    "truncated",
    "context_tokens_dropped",
    "notes",
    "refusal",
    "verdict",
    "model",
)
ATTRIBUTION_FIELDS = ("attribution", "top_document")


class ConSens:
    """ConSens grounding: the answer's perplexity without vs with the context (Vankov et al.).

    ``model``: a model name or object (default: the bundled SmolLM2-135M); ``model_options`` go to
    the backend when the model is named (``device``, ``threads``, ``base_url``). ``attribution``: also
    score the context with each document left out (``attribution``, ``top_document``). ``bands``: the
    verdict bands (a :class:`~ragsense.consens.Bands` or the path of a file ``ragsense calibrate``
    wrote; default: the aggregation's default bands); they must have been fitted on ``aggregation``.

    >>> from ragsense.evaluation import evaluate
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
            out.append(fields)
        return out

    async def aclose(self) -> None:
        """Nothing to release: the model belongs to the pool."""


def attribution_metric(model: ModelSpec | None = None, **options: Any) -> ConSens:
    """``--metrics attribution``: ConSens with leave-one-document-out attribution."""
    return ConSens(model, attribution=True, **options)


def grounding(
    question: str,
    contexts: str | Sequence[str],
    answer: str,
    *,
    model: ModelSpec | None = None,
    attribution: bool = False,
    aggregation: Aggregation | str = DEFAULT_AGGREGATION,
    template: PromptTemplate | None = None,
    bands: Bands | str | None = None,
) -> GroundingResult:
    """ConSens grounding score of ``answer`` to ``question`` given ``contexts`` (a string or documents).

    ``bands``: verdict bands (a :class:`~ragsense.consens.Bands` or a bands file), as for
    :class:`ConSens`. Raises :class:`~ragsense.errors.InputError` for unusable input.

    >>> r = grounding("Where is the Eiffel Tower?", "The Eiffel Tower stands in Paris, France.",
    ...               "It stands in Paris, France.", model="fake")
    >>> r.consens > 0, r.verdict
    (True, 'grounded')
    """
    docs = [contexts] if isinstance(contexts, str) else list(contexts)
    row = {"question": question, "contexts": docs, "answer": answer}
    [result] = grounding_batch(
        [row], model=model, attribution=attribution, aggregation=aggregation, template=template, bands=bands
    )
    if isinstance(result, InputError):
        raise InputError(result.reason, field=result.field)
    if isinstance(result, ModelCallError):
        raise result
    return result


def grounding_batch(
    rows: Iterable[RagRow | Mapping[str, Any]],
    *,
    model: ModelSpec | None = None,
    attribution: bool = False,
    aggregation: Aggregation | str = DEFAULT_AGGREGATION,
    template: PromptTemplate | None = None,
    batch_size: int = 16,
    pool: ModelPool | None = None,
    progress: bool = False,
    desc: str = "grounding",
    bands: Bands | str | None = None,
) -> list[GroundingResult | InputError | ModelCallError]:
    """Score many rows (``RagRow`` objects or dicts with the usual or RAGAS field names).

    One result per row, in order: a :class:`GroundingResult`, the :class:`InputError` that names the
    row and field of a row that could not be scored, or a :class:`ModelCallError` where the model
    failed on that row. Good rows are never lost to a bad one. Runs on the evaluation runner with
    ``chunk_size=batch_size``; ``progress`` shows a bar on a terminal.

    >>> out = grounding_batch([{"question": "Q?", "context": "Cats purr.", "answer": "Cats purr."},
    ...                        {"question": "Q?", "context": "Cats purr.", "answer": ""}], model="fake")
    >>> [type(o).__name__ for o in out]
    ['GroundingResult', 'InputError']
    """
    metric = ConSens(model, attribution=attribution, aggregation=aggregation, template=template, bands=bands)
    return run_sync(
        _grounding_rows(
            list(rows), metric, batch_size, pool if pool is not None else shared_pool(), progress, desc
        )
    )


async def _grounding_rows(
    rows: list[RagRow | Mapping[str, Any]],
    metric: ConSens,
    batch_size: int,
    pool: ModelPool,
    progress: bool,
    desc: str,
) -> list[GroundingResult | InputError | ModelCallError]:
    raws = [r for r in rows if not isinstance(r, RagRow)]
    parsed = iter(parse_rows(raws, require_answer=False))
    items = [r if isinstance(r, RagRow) else next(parsed) for r in rows]
    await metric.setup(pool)
    records, _ = await run_rows(items, [metric], chunk_size=batch_size, progress=progress, desc=desc)
    out: list[GroundingResult | InputError | ModelCallError] = []
    for item, record in zip(items, records, strict=True):
        errors = record["errors"]
        if errors:
            first = errors[0]
            where = item.id if item.id is not None else (item.index if isinstance(item, RowError) else None)
            if first["field"] is None and first["metric"] == metric.name:
                out.append(ModelCallError(f"row {where}: {first['message']}"))
            else:
                out.append(InputError(first["message"], row=where, field=first["field"]))
        else:
            out.append(GroundingResult.from_dict(record))
    return out
