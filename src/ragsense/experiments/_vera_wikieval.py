"""VERA on WikiEval: how well each VERA score ranks WikiEval's better text above its worse one (RAGAS's
protocol), and the adherence-only run that keeps every statement's signals (:func:`vera_wikieval`)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragsense._async import run_sync
from ragsense.data import RagRow, WikiEvalItem
from ragsense.errors import ParameterError
from ragsense.evaluation import Needs
from ragsense.experiments._vera_runner import KEYS, KeepKeys, mean, run_steps, with_keys
from ragsense.models import DEFAULT_MODEL, LanguageModel, load_model
from ragsense.stats import bootstrap_ci, roc_auc
from ragsense.vera import (
    RESPONSE_ADHERENCE,
    Decision,
    LabelJudge,
    VeraEvaluation,
    VeraEvaluator,
    VeraSettings,
    label_probabilities,
)

_KINDS = ("v1", "v2", "ungrounded", "poor")
_ADHERENCE_KINDS = ("v1", "ungrounded")


@dataclass(frozen=True)
class _WikiEvalQuestion:
    """One WikiEval question: the vera-wikieval runner's item."""

    item: WikiEvalItem

    @property
    def id(self) -> str:
        return self.item.id

    def to_record(self) -> dict[str, Any]:
        return {"id": self.item.id, "question": self.item.question}


@dataclass
class _WikiEvalStep(KeepKeys):
    """Evaluate each question's four rows (see :func:`vera_wikieval`) for a chunk of questions."""

    vera: VeraEvaluator
    kinds: tuple[str, ...] = _KINDS
    name: str = "vera_wikieval"
    needs: Needs = field(default_factory=lambda: Needs(fields=()))
    fields: tuple[str, ...] = (
        *(k for kind in _KINDS for k in (kind, f"{kind}_error")),
        "adherence_prior",
        KEYS,
    )
    error_keys: tuple[str, ...] = tuple(f"{kind}_error" for kind in _KINDS)

    async def score(self, rows: Sequence[Any]) -> list[Mapping[str, Any] | Exception]:
        batch: list[WikiEvalItem] = [row.item for row in rows]
        rag_rows = []
        for it in batch:
            every = [
                RagRow(
                    id=f"{it.id}-v1", question=it.question, contexts=it.context_v1, answer=it.grounded_answer
                ),
                RagRow(
                    id=f"{it.id}-v2", question=it.question, contexts=it.context_v2, answer=it.grounded_answer
                ),
                RagRow(
                    id=f"{it.id}-ug",
                    question=it.question,
                    contexts=it.context_v1,
                    answer=it.ungrounded_answer,
                ),
                RagRow(
                    id=f"{it.id}-poor", question=it.question, contexts=it.context_v1, answer=it.poor_answer
                ),
            ]
            rag_rows += [r for kind, r in zip(_KINDS, every, strict=True) if kind in self.kinds]
        results = await self.vera.evaluate(rag_rows)
        judge = self.vera.judge
        prior = await judge.prior(RESPONSE_ADHERENCE) if isinstance(judge, LabelJudge) else None
        out: list[Mapping[str, Any] | Exception] = []
        n = len(self.kinds)
        for i in range(len(batch)):
            rec: dict[str, Any] = {}
            for kind, res in zip(self.kinds, results[n * i : n * i + n], strict=True):
                if not isinstance(res, VeraEvaluation):
                    rec[f"{kind}_error"] = str(res)
                    continue
                decisions = res.adherence.decisions
                rec[kind] = {
                    "context_relevance": res.context_relevance,
                    "response_relevance": res.response_relevance,
                    "adherence_judge": _share([d.label in ("stated", "inferable") for d in decisions]),
                    "adherence_consens": _share([d.consens > 0.0 for d in decisions if d.consens is not None])
                    if all(d.consens is not None for d in decisions)
                    else None,
                    "adherence_combined": res.response_adherence,
                    "mean_statement_consens": mean([d.consens for d in decisions]),
                    "mean_grounded_probability": mean(
                        [_judge_probability(d, judge) for d in decisions]
                        if isinstance(judge, LabelJudge)
                        else []
                    ),
                    "statements": [_statement_record(d) for d in decisions],
                }
            if prior is not None:
                rec["adherence_prior"] = prior
            out.append(with_keys(rec))
        return out


def vera_wikieval(
    model: LanguageModel | None = None,
    data: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    out: str | None = None,
    vera_options: dict[str, Any] | None = None,
    batch_size: int = 8,
    resume: bool = False,
    adherence_only: bool = False,
    **unused: Any,
) -> dict[str, Any]:
    """How well each VERA score ranks WikiEval's better text above its worse one (RAGAS's protocol).

    With ``adherence_only`` only the adherence step runs, on the grounded and the ungrounded answer
    (both with context_v1); every statement's judge token log-probabilities and ConSens under every
    aggregation are kept in the per-item records (benchmarks/vera_adherence.py chooses and reports
    from them).

    Otherwise, per question, four rows are evaluated: (context_v1, grounded answer), (context_v2,
    grounded answer), (context_v1, ungrounded answer), (context_v1, poor answer). The figures are
    pairwise accuracies (a tie counts one half): context relevance of context_v1 (one passage) above
    context_v2 (1-3 passages); response relevance of the grounded answer above the poor answer;
    response adherence of the grounded answer above the ungrounded one, with the judge, ConSens and
    combined signals (all three from one run: adherence is computed with ``combined``, which records
    both).

    With ``out`` each question's record is appended to ``out/vera_wikieval.jsonl`` as its chunk of
    ``batch_size`` questions finishes; ``resume=True`` continues that file without recomputing its
    finished chunks.
    """
    from ragsense.data import load_wikieval

    if unused.get("generator") is not None:
        raise ParameterError(
            "vera-wikieval scores WikiEval's own answers; it has no generator", parameter="--generator"
        )
    started = time.perf_counter()
    judge_model = model if model is not None else load_model(DEFAULT_MODEL)
    options = {**(vera_options or {}), "adherence_signal": "combined"}
    kinds = _ADHERENCE_KINDS if adherence_only else _KINDS
    if adherence_only:
        # Both signals by default; an explicit "judge" skips ConSens (a judge-only trial costs less).
        signal = (vera_options or {}).get("adherence_signal", "combined")
        options.update(steps=("adherence",), check_retrieval=False, adherence_signal=signal)
    vera = VeraEvaluator(judge_model, VeraSettings(**options))
    items = [_WikiEvalQuestion(it) for it in load_wikieval(data)[: limit or None]]
    filename = "vera_wikieval_adherence.jsonl" if adherence_only else "vera_wikieval.jsonl"
    step = _WikiEvalStep(vera, kinds)
    records = run_sync(run_steps(items, step, out, filename, batch_size, resume))

    def pairwise(better: str, worse: str, key: str) -> float | None:
        return pairwise_accuracy(records, better, worse, key)

    if adherence_only:
        adherence = _adherence_figures(records)
        adherence.update(
            n_items=len(records),
            n_errors=sum(1 for r in records for k in kinds if k not in r),
            judge=vera.judge.description,
            seconds=round(time.perf_counter() - started, 1),
        )
        return adherence
    figures: dict[str, Any] = {
        "context_relevance_v1_over_v2": pairwise("v1", "v2", "context_relevance"),
        "response_relevance_grounded_over_poor": pairwise("v1", "poor", "response_relevance"),
        "adherence_judge_grounded_over_ungrounded": pairwise("v1", "ungrounded", "adherence_judge"),
        "adherence_consens_grounded_over_ungrounded": pairwise("v1", "ungrounded", "adherence_consens"),
        "adherence_combined_grounded_over_ungrounded": pairwise("v1", "ungrounded", "adherence_combined"),
        "statement_consens_grounded_over_ungrounded": pairwise("v1", "ungrounded", "mean_statement_consens"),
        "n_items": len(records),
        # Rows not scored: a kind with an error, or all four of a question whose step failed.
        "n_errors": sum(1 for r in records for k in _KINDS if k not in r),
        "judge": vera.judge.description,
        "seconds": round(time.perf_counter() - started, 1),
    }
    for kind in _KINDS:
        for key in ("context_relevance", "response_relevance", "adherence_judge", "adherence_consens"):
            figures[f"mean_{key}_{kind}"] = mean([r[kind][key] for r in records if kind in r])
    return figures


def _share(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def _judge_probability(decision: Decision, judge: LabelJudge) -> float | None:
    """The judge's P(stated) + P(inferable) under its own label-scoring rule and calibration: what the
    ``judge`` signal decides on at 0.5 (``grounded_probability`` holds the combined signal here)."""
    if not decision.token_logprobs:
        return None
    prior = judge.known_prior(RESPONSE_ADHERENCE) if judge.calibrate else None
    probs = label_probabilities(
        RESPONSE_ADHERENCE.labels, decision.token_logprobs, judge.label_scoring, prior
    )
    return math.fsum(probs[label] for label in RESPONSE_ADHERENCE.positive_labels)


def _statement_record(decision: Decision) -> dict[str, Any]:
    """What a figure for any signal, label-scoring rule or ConSens aggregation is recomputed from."""
    return {
        "text": decision.text,
        "label": decision.label,
        "grounded_probability": decision.grounded_probability,
        "token_logprobs": decision.token_logprobs,
        "consens": decision.consens,
        "consens_by_aggregation": decision.consens_by_aggregation,
        "consens_word_nll": decision.consens_word_nll,
    }


def pairwise_accuracy(
    records: Sequence[Mapping[str, Any]], better: str, worse: str, key: str
) -> float | None:
    """Share of questions whose ``better`` row scores above its ``worse`` row on ``key`` (ties 1/2)."""
    pairs = [(r[better][key], r[worse][key]) for r in records if better in r and worse in r]
    pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
    if not pairs:
        return None
    return round(sum(1.0 if a > b else 0.5 if a == b else 0.0 for a, b in pairs) / len(pairs), 4)


_ADHERENCE_SCORES = (
    "adherence_judge",
    "mean_grounded_probability",
    "adherence_consens",
    "mean_statement_consens",
    "adherence_combined",
)


def _adherence_figures(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Pairwise accuracy (grounded over ungrounded, ties 1/2) with a 95% bootstrap interval over the
    questions, and AUROC, for each adherence score of the adherence-only run."""
    figures: dict[str, Any] = {}
    both = [r for r in records if "v1" in r and "ungrounded" in r]
    for key in _ADHERENCE_SCORES:
        pairs = [(r["v1"][key], r["ungrounded"][key]) for r in both]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        if not pairs:
            continue
        wins = [1.0 if a > b else 0.5 if a == b else 0.0 for a, b in pairs]
        low, high = bootstrap_ci(lambda w: float(w.mean()), wins, seed=0)
        figures[f"{key}_pairwise"] = round(sum(wins) / len(wins), 4)
        figures[f"{key}_pairwise_ci95"] = [round(low, 4), round(high, 4)]
        figures[f"{key}_auroc"] = round(roc_auc([a for a, _ in pairs], [b for _, b in pairs]), 4)
        figures[f"{key}_n_pairs"] = len(pairs)
    return figures
