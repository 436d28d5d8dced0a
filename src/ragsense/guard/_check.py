"""The check itself, on the evaluation spine: rows -> ConSens (and VERA) through ``run_rows`` -> policy.

There is no second scoring path here. A micro-batch's rows go through the same runner and the same
:class:`~ragsense.consens.ConSens` metric that ``ragsense evaluate`` uses, so every result carries
exactly the fields ``evaluate`` writes (``consens``, ``verdict``, ``words``, ``attribution``, ...). The
guard adds only the policy (``passed`` against ``min_consens``) and ``weakest_words``, which is read
off ``words``.

The same :class:`Guard` serves ``ragsense guard``'s model worker and :func:`check`, the in-process form
for applications that do not want a network hop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragsense._async import run_sync
from ragsense.consens import GROUNDED_AT, Bands, ConSens, explain_row, weakest_words
from ragsense.contract import is_refusal_row
from ragsense.data import RagRow
from ragsense.errors import ParameterError
from ragsense.evaluation import Metric, run_rows
from ragsense.guard._schema import CheckRow
from ragsense.models import LanguageModel, ModelPool, ModelSpec, shared_pool
from ragsense.vera import Vera

# Input fields the client sent: not echoed back (the answer text stays with the caller).
_INPUT_FIELDS = ("id", "question", "contexts", "answer", "_row")
# Errors of these metrics decide ``passed``: a row ConSens could not score fails closed. A VERA error
# is reported but does not fail a row whose grounding was measured.
_DECIDING = ("consens", "input")


@dataclass(frozen=True)
class Policy:
    """The pass rule: ``consens >= min_consens``. A request may choose its own threshold within
    ``bounds`` (default: from ``min_consens`` up to 1, so a client can be stricter, never looser).

    >>> Policy().threshold(None) == GROUNDED_AT
    True
    >>> Policy(min_consens=0.1).threshold(0.5)
    0.5
    """

    min_consens: float = GROUNDED_AT
    bounds: tuple[float, float] | None = None

    @property
    def allowed(self) -> tuple[float, float]:
        """The range a request's ``min_consens`` must fall in."""
        return self.bounds if self.bounds is not None else (self.min_consens, 1.0)

    def threshold(self, requested: float | None) -> float:
        """The threshold for a request; raises :class:`ParameterError` outside :attr:`allowed`."""
        if requested is None:
            return self.min_consens
        low, high = self.allowed
        if not low <= requested <= high:
            raise ParameterError(f"must be within [{low}, {high}], got {requested}", parameter="min_consens")
        return requested


def shape_result(
    record: Mapping[str, Any], row_id: str, min_consens: float, weakest: int, bands: Bands | None = None
) -> dict[str, Any]:
    """One row's result: the runner's record without the input texts, plus the policy's fields and
    ``reason``, the row's verdict in words (:func:`ragsense.consens.explain_row` under ``bands``: the
    words JUnit and the pytest plug-in use)."""
    deciding = [e for e in record["errors"] if e["metric"] in _DECIDING]
    consens = record.get("consens")
    # The one refusal rule (ragsense.contract.REFUSAL): a refusal ("the documents do not say ...")
    # states nothing the context could fail to support, so no score threshold applies to it and it
    # passes; blocking it would only replace one non-answer with another.
    refusal = is_refusal_row(record)
    passed = not deciding and isinstance(consens, float) and (refusal or consens >= min_consens)
    fields = {k: v for k, v in record.items() if k not in _INPUT_FIELDS}
    return {
        "id": row_id,
        "passed": passed,
        "min_consens": min_consens,
        **fields,
        "weakest_words": weakest_words(record.get("words") or [], weakest),
        "reason": explain_row(record, bands),
    }


@dataclass(frozen=True)
class Options:
    """What a request asks for beyond the score: attribution, VERA adherence."""

    attribution: bool = False
    adherence: bool = False


class Guard:
    """ConSens (and optionally VERA adherence) over rows, with a pass/fail policy.

    ``model``: the scoring model (name or object; default the bundled SmolLM2-135M); ``judge``: a VERA
    judge model, which makes ``adherence`` available. ``bands``: verdict bands (``ragsense calibrate``)
    for the results' ``verdict``; without a ``policy``, their ``grounded_at`` is the pass threshold.
    Models come from ``pool`` (default: the process-wide pool), so the guard and anything else in the
    process load each model once.

    >>> import asyncio
    >>> guard = Guard("fake")
    >>> asyncio.run(guard.setup())
    >>> [r] = asyncio.run(guard.acheck([CheckRow(question="Who designs proteins?",
    ...     contexts=["David Baker designs proteins."], answer="David Baker.")]))
    >>> r["verdict"], r["passed"]
    ('grounded', True)
    """

    def __init__(
        self,
        model: ModelSpec | None = None,
        *,
        model_options: Mapping[str, Any] | None = None,
        judge: ModelSpec | None = None,
        judge_options: Mapping[str, Any] | None = None,
        policy: Policy | None = None,
        pool: ModelPool | None = None,
        bands: Bands | None = None,
    ) -> None:
        # A verdict of "grounded" and a pass should agree: the bands' edge is the default threshold.
        self.policy = policy or Policy(min_consens=GROUNDED_AT if bands is None else bands.grounded_at)
        self.pool = pool if pool is not None else shared_pool()
        options = dict(model_options or {})
        # Two ConSens metrics on one model: they share the pool's model and its no-context cache,
        # and differ only in whether leave-one-out prompts are added.
        self._plain = ConSens(model, model_options=options, bands=bands)
        self._attributed = ConSens(model, attribution=True, model_options=options, bands=bands)
        self._vera: Vera | None = None
        if judge is not None:
            self._vera = Vera(
                judge, steps=("adherence",), retrieval=False, model_options=dict(judge_options or {})
            )
        self._model: LanguageModel | None = None

    @property
    def bands(self) -> Bands:
        """The verdict bands the results are read under (``--bands``, else the default score's)."""
        return self._plain.bands

    @property
    def has_judge(self) -> bool:
        """Whether VERA adherence can be asked for."""
        return self._vera is not None

    @property
    def model(self) -> LanguageModel:
        """The scoring model (after :meth:`setup`)."""
        if self._model is None:
            raise ParameterError("call setup() first", parameter="Guard")
        return self._model

    async def setup(self) -> None:
        """Load the models (once per pool) and set the metrics up."""
        for metric in self._all_metrics():
            await metric.setup(self.pool)
        self._model = self.pool.get(self._plain.model_spec, **self._plain.model_options)

    def _all_metrics(self) -> list[Metric]:
        return [self._plain, self._attributed, *([self._vera] if self._vera is not None else [])]

    def _metrics(self, options: Options) -> list[Metric]:
        metrics: list[Metric] = [self._attributed if options.attribution else self._plain]
        if options.adherence:
            if self._vera is None:
                raise ParameterError(
                    "no judge is configured (start the guard with --judge)", parameter="adherence"
                )
            metrics.append(self._vera)
        return metrics

    async def records(
        self, groups: Sequence[tuple[Sequence[CheckRow], Options]]
    ) -> list[list[dict[str, Any]]]:
        """The runner's records for each group of rows (a micro-batch: one group per request).

        Groups asking for the same options are scored together in one runner call (one chunk, so one
        batched model call per metric); the records come back split per group, in order.
        """
        by_options: dict[Options, list[tuple[int, int]]] = {}
        for g, (rows, options) in enumerate(groups):
            by_options.setdefault(options, []).extend((g, k) for k in range(len(rows)))
        out: list[list[dict[str, Any]]] = [[{} for _ in rows] for rows, _ in groups]
        for options, places in by_options.items():
            items = [
                RagRow(id=str(n), question=r.question, contexts=list(r.contexts), answer=r.answer)
                for n, r in enumerate(groups[g][0][k] for g, k in places)
            ]
            records, _ = await run_rows(
                items, self._metrics(options), chunk_size=len(items), progress=False, desc="guard"
            )
            for (g, k), record in zip(places, records, strict=True):
                out[g][k] = record
        return out

    async def acheck(
        self,
        rows: Sequence[CheckRow],
        *,
        attribution: bool = False,
        adherence: bool = False,
        min_consens: float | None = None,
        weakest: int = 5,
    ) -> list[dict[str, Any]]:
        """Check rows; one result per row (see :func:`shape_result`). Call :meth:`setup` first."""
        threshold = self.policy.threshold(min_consens)
        [records] = await self.records([(rows, Options(attribution, adherence))])
        return [
            shape_result(record, row.id if row.id is not None else str(i), threshold, weakest, self.bands)
            for i, (row, record) in enumerate(zip(rows, records, strict=True))
        ]

    async def aclose(self) -> None:
        """Release what the metrics opened (the VERA judge's cache); the models belong to the pool."""
        for metric in self._all_metrics():
            await metric.aclose()


def check(
    question: str,
    contexts: str | Sequence[str],
    answer: str,
    *,
    model: ModelSpec | None = None,
    min_consens: float | None = None,
    attribution: bool = False,
    weakest: int = 5,
    pool: ModelPool | None = None,
) -> dict[str, Any]:
    """The guard's check in process, without a server: the same result ``POST /v1/check`` gives a row.

    ``min_consens``: the pass threshold (default: the grounded band of the default score).

    >>> r = check("Where is the Eiffel Tower?", ["The Eiffel Tower stands in Paris."],
    ...           "It stands in Paris.", model="fake")
    >>> r["passed"], r["verdict"], [w["word"] for w in r["weakest_words"]][:1]
    (True, 'grounded', ['Paris'])
    """
    policy = Policy() if min_consens is None else Policy(min_consens=min_consens)
    docs = [contexts] if isinstance(contexts, str) else list(contexts)
    guard = Guard(model, policy=policy, pool=pool)

    async def run() -> list[dict[str, Any]]:
        await guard.setup()
        try:
            return await guard.acheck(
                [CheckRow(question=question, contexts=docs, answer=answer)],
                attribution=attribution,
                weakest=weakest,
            )
        finally:
            await guard.aclose()

    return run_sync(run())[0]
