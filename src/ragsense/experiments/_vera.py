"""VERA on SQuAD 2.0 (Birur et al., Table 1 and the score tables): answer accuracy with and without
VERA, the share of unanswerable questions correctly refused, and the three VERA scores.

Items: the SQuAD 2.0 dev questions shuffled with ``seed``; ``limit`` items (default 200), half
answerable and half unanswerable, so accuracy weighs both kinds equally. The context is the
question's paragraph, as in the paper (no retriever).

- Without VERA: the generator answers from the paragraph, told to reply ``unanswerable`` when the
  paragraph does not contain the answer.
- With VERA (steps 2-4; SQuAD has no retrieval to skip, so step 1 is asked and reported but does not
  change the chain): the judge trims the paragraph to its relevant sentences (C'); when nothing is left VERA
  refuses; otherwise the generator answers from C' and VERA keeps the relevant, grounded statements of
  that answer (a fully removed answer is a refusal too).

Correct: for an answerable question, a non-refusing answer that contains one of SQuAD's reference
answers after SQuAD normalisation (lower case, no punctuation or articles); for an unanswerable one,
a refusal. The paper does not define its accuracy further; this is the closest reading for short
span answers. Scores: the three VERA scores of the raw answer on the full paragraph, and of VERA's
output re-evaluated by the same judge (as the paper re-evaluates its outputs with GPT-4o).
"""

from __future__ import annotations

import math
import random
import re
import string
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragsense._async import run_sync
from ragsense.data import RagRow, SquadItem, WikiEvalItem, load_squad_v2
from ragsense.errors import ParameterError
from ragsense.evaluation import ErrorRecord, Needs, RowOutcome, RunItem, run_rows
from ragsense.models import DEFAULT_MODEL, LanguageModel, load_model
from ragsense.rag import RagPrompt, answer_function
from ragsense.stats import bootstrap_ci, roc_auc
from ragsense.vera import (
    RESPONSE_ADHERENCE,
    AnswerFn,
    Decision,
    LabelJudge,
    RetrievalCheck,
    Vera,
    VeraEnhancement,
    VeraEvaluation,
    label_probabilities,
)

DEFAULT_LIMIT = 200
REFUSAL_WORD = "unanswerable"
SQUAD_INSTRUCTION = (
    "Answer the question using only the documents below. Reply with the answer only, in a few words. "
    f"If the documents do not contain the answer, reply: {REFUSAL_WORD}"
)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalisation: lower case, no punctuation, no articles, single spaces.

    >>> normalize_answer("The  Denver Broncos!")
    'denver broncos'
    """
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    return " ".join(_ARTICLES.sub(" ", text).split())


def is_refusal(answer: str) -> bool:
    """An empty answer or one that says the question is unanswerable.

    >>> is_refusal("Unanswerable."), is_refusal("Paris")
    (True, False)
    """
    norm = normalize_answer(answer)
    return not norm or REFUSAL_WORD in norm or "not contain" in norm or "cannot be answered" in norm


def is_correct(item: SquadItem, answer: str, refused: bool) -> bool:
    """Refusal for an unanswerable question; a reference answer inside the answer otherwise."""
    refused = refused or is_refusal(answer)
    if item.is_impossible:
        return refused
    if refused:
        return False
    norm = normalize_answer(answer)
    return any(normalize_answer(ref) and normalize_answer(ref) in norm for ref in item.answers)


def squad_items(data: str | None, limit: int, seed: int) -> list[SquadItem]:
    """``limit`` seeded items alternating answerable and unanswerable questions."""
    items = load_squad_v2(data)
    random.Random(seed).shuffle(items)
    answerable = [it for it in items if not it.is_impossible and it.answers]
    impossible = [it for it in items if it.is_impossible]
    out: list[SquadItem] = []
    for a, b in zip(answerable, impossible, strict=False):
        out.extend((a, b))
    return out[:limit]


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(sum(kept) / len(kept), 4) if kept else None


# ------------------------------------------------------------------------ the runner's steps and items
#
# Both experiments run on ragsense's one runner (:func:`ragsense.evaluation.run_rows`): each question is
# an item, the loop body of the experiment is its one step, and the per-item JSONL in ``out`` is the
# runner's output. So fixed chunks (``batch_size``) are appended as they finish, ``resume=True``
# continues an interrupted run computing exactly what a fresh run computes, and a step call that fails
# for a whole chunk is retried item by item so that only the failing items are marked (``errors``).
#
# A record keeps the keys it has always had, which depend on what happened to the item (``error_with``
# instead of the ``*_with`` scores, ...): the step lists every key a record can have as its fields and
# names the keys one item has in :data:`_KEYS`; the shape drops the others. A part of an item that
# failed (an ``error_*`` / ``*_error`` key) is also listed in ``errors``.

_KEYS = "_keys"


def _with_keys(fields: dict[str, Any]) -> dict[str, Any]:
    return {**fields, _KEYS: list(fields)}


class _KeepKeys:
    """What the vera steps share: the shape that writes their records."""

    name: str
    error_keys: tuple[str, ...]

    def shape(self, outcome: RowOutcome) -> dict[str, Any]:
        """The item's record with only the keys the step gave it; its failed parts listed in ``errors``."""
        present = outcome.fields.pop(_KEYS, None) or ()
        outcome.fields = {k: v for k, v in outcome.fields.items() if k in present}
        for key in self.error_keys:
            if key in outcome.fields:
                outcome.errors.append(ErrorRecord(self.name, None, f"{key}: {outcome.fields[key]}"))
        return outcome.to_record()


async def _run_steps(
    items: Sequence[RunItem],
    step: _SquadStep | _WikiEvalStep,
    out: str | None,
    filename: str,
    batch_size: int,
    resume: bool,
) -> list[dict[str, Any]]:
    """The step over every item (chunks of ``batch_size``), its records appended to ``out/filename``."""
    output = None
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        output = Path(out) / filename
    try:
        records, _ = await run_rows(
            items,
            [step],
            output=output,
            chunk_size=batch_size,
            resume=resume,
            overwrite=not resume,
            desc=filename.removesuffix(".jsonl"),
            shape=step.shape,
        )
    finally:
        await step.vera.aclose()
    return records


@dataclass(frozen=True)
class _SquadQuestion:
    """One SQuAD question: the vera-squad runner's item."""

    item: SquadItem

    @property
    def id(self) -> str:
        return self.item.id

    def to_record(self) -> dict[str, Any]:
        it = self.item
        return {
            "id": it.id,
            "question": it.question,
            "is_impossible": it.is_impossible,
            "references": list(it.answers),
        }


_SQUAD_FIELDS = (
    "raw_answer",
    "correct_without",
    "refused_without",
    "context_relevance_without",
    "response_relevance_without",
    "response_adherence_without",
    "error_without",
    "vera_answer",
    "refused_with",
    "correct_with",
    "stopped_at_context",
    "retrieval_required",
    "context_kept",
    "context_relevance_with",
    "response_relevance_with",
    "response_adherence_with",
    "regenerated_answer",
    "statements_with",
    "statements_relevant_with",
    "statements_grounded_with",
    "error_reevaluation",
    "error_with",
)


@dataclass
class _SquadStep(_KeepKeys):
    """Answer, evaluate, enhance, re-evaluate and check the retrieval need for a chunk of questions."""

    vera: Vera
    answer: AnswerFn
    name: str = "vera_squad"
    needs: Needs = field(default_factory=lambda: Needs(fields=()))
    fields: tuple[str, ...] = (*_SQUAD_FIELDS, _KEYS)
    error_keys: tuple[str, ...] = ("error_without", "error_reevaluation", "error_with")

    async def score(self, rows: Sequence[Any]) -> list[Mapping[str, Any] | Exception]:
        vera, answer = self.vera, self.answer
        batch: list[SquadItem] = [row.item for row in rows]
        raw_answers = await answer([it.question for it in batch], [[it.context] for it in batch])
        rag_rows = [
            RagRow(id=it.id, question=it.question, contexts=[it.context], answer=a or REFUSAL_WORD)
            for it, a in zip(batch, raw_answers, strict=True)
        ]
        before = await vera.evaluate(rag_rows)
        enhanced = await vera.enhance(rag_rows, answer)
        # Re-evaluate what VERA produced (non-refused rows), as the paper re-scores its outputs.
        again_rows = [
            RagRow(
                id=r.id, question=r.question, contexts=[c for c in e.contexts if c.strip()], answer=e.answer
            )
            for r, e in zip(rag_rows, enhanced, strict=True)
            if isinstance(e, VeraEnhancement) and not e.refused
        ]
        after = iter(await vera.evaluate(again_rows))
        checks = await vera.check_retrieval_need([it.question for it in batch])
        out: list[Mapping[str, Any] | Exception] = []
        for it, raw, b, e, check in zip(batch, raw_answers, before, enhanced, checks, strict=True):
            rec: dict[str, Any] = {
                "raw_answer": raw,
                "correct_without": is_correct(it, raw, False),
                "refused_without": is_refusal(raw),
            }
            if isinstance(b, VeraEvaluation):
                rec.update({f"{k}_without": getattr(b, k) for k in _SCORES})
            else:
                rec["error_without"] = str(b)
            if isinstance(e, VeraEnhancement):
                rec.update(
                    vera_answer=e.answer,
                    refused_with=e.refused or is_refusal(e.answer),
                    correct_with=is_correct(it, e.answer, e.refused),
                    stopped_at_context=e.relevance is None,
                    retrieval_required=check.required if isinstance(check, RetrievalCheck) else None,
                    context_kept=e.context.score,
                )
                if e.relevance is not None:
                    # Where a refusal at steps 3-4 comes from: statements of the regenerated answer,
                    # those judged relevant, and those of them kept as grounded.
                    rec.update(
                        regenerated_answer=e.original_answer,
                        statements_with=len(e.relevance.decisions),
                        statements_relevant_with=sum(d.keep for d in e.relevance.decisions),
                        statements_grounded_with=None
                        if e.adherence is None
                        else sum(d.keep for d in e.adherence.decisions),
                    )
                if not e.refused:
                    a = next(after)
                    if isinstance(a, VeraEvaluation):
                        rec.update({f"{k}_with": getattr(a, k) for k in _SCORES})
                    else:
                        rec["error_reevaluation"] = str(a)
            else:
                rec["error_with"] = str(e)
            out.append(_with_keys(rec))
        return out


def vera_squad(
    model: LanguageModel | None = None,
    data: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    out: str | None = None,
    generator: str | LanguageModel | None = None,
    vera_options: dict[str, Any] | None = None,
    batch_size: int = 8,
    resume: bool = False,
) -> dict[str, Any]:
    """Run the experiment; ``model`` is the judge, ``generator`` answers (default: the bundled model).

    With ``out`` each item's record is appended to ``out/vera_squad.jsonl`` as its chunk of
    ``batch_size`` items finishes; ``resume=True`` continues that file (same arguments) without
    recomputing its finished chunks. An item whose step failed has no ``correct_with`` and counts in
    ``n_errors``.
    """
    started = time.perf_counter()
    judge_model = model if model is not None else load_model(DEFAULT_MODEL)
    gen_model = generator if generator is not None else DEFAULT_MODEL
    gen = load_model(gen_model) if isinstance(gen_model, str) else gen_model
    answer = answer_function(gen, prompt=RagPrompt(instruction=SQUAD_INSTRUCTION))

    # SQuAD gives each question its paragraph: as in the paper there is no retrieval to skip, so the
    # chain runs without step 1; the check is still asked and reported (retrieval_required).
    vera = Vera(judge_model, **{**(vera_options or {}), "check_retrieval": False})
    items = [_SquadQuestion(it) for it in squad_items(data, limit or DEFAULT_LIMIT, seed)]
    step = _SquadStep(vera, answer)
    records = run_sync(_run_steps(items, step, out, "vera_squad.jsonl", batch_size, resume))
    figures = _figures(records)
    figures.update(
        judge=vera.judge.description,
        generator=gen.info.name,
        n_items=len(records),
        seed=seed,
        seconds=round(time.perf_counter() - started, 1),
    )
    return figures


_SCORES = ("context_relevance", "response_relevance", "response_adherence")


def _figures(records: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in records if "correct_with" in r]
    answerable = [r for r in ok if not r["is_impossible"]]
    impossible = [r for r in ok if r["is_impossible"]]

    def share(rows: list[dict[str, Any]], key: str) -> float | None:
        return round(sum(bool(r[key]) for r in rows) / len(rows), 4) if rows else None

    without = [float(r["correct_without"]) for r in ok]
    with_vera = [float(r["correct_with"]) for r in ok]
    figures: dict[str, Any] = {
        "accuracy_without": share(ok, "correct_without"),
        "accuracy_with": share(ok, "correct_with"),
        "answerable_accuracy_without": share(answerable, "correct_without"),
        "answerable_accuracy_with": share(answerable, "correct_with"),
        "unanswerable_refused_without": share(impossible, "refused_without"),
        "unanswerable_refused_with": share(impossible, "refused_with"),
        "answerable_refused_without": share(answerable, "refused_without"),
        "answerable_refused_with": share(answerable, "refused_with"),
        "stopped_at_context": share(ok, "stopped_at_context"),
        "retrieval_required": share(
            [r for r in ok if r.get("retrieval_required") is not None], "retrieval_required"
        ),
        "n_errors": len(records) - len(ok),
        "n_errors_reevaluation": sum("error_reevaluation" in r for r in records),
    }
    for key in _SCORES:
        figures[f"{key}_without"] = _mean([r.get(f"{key}_without") for r in records])
        figures[f"{key}_with"] = _mean([r.get(f"{key}_with") for r in records])
    if ok:
        low, high = bootstrap_ci(
            lambda a, b: float(b.mean() - a.mean()), without, with_vera, seed=0, paired=True
        )
        figures["accuracy_gain_ci95"] = [round(low, 4), round(high, 4)]
    return figures


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
class _WikiEvalStep(_KeepKeys):
    """Evaluate each question's four rows (see :func:`vera_wikieval`) for a chunk of questions."""

    vera: Vera
    kinds: tuple[str, ...] = _KINDS
    name: str = "vera_wikieval"
    needs: Needs = field(default_factory=lambda: Needs(fields=()))
    fields: tuple[str, ...] = (
        *(k for kind in _KINDS for k in (kind, f"{kind}_error")),
        "adherence_prior",
        _KEYS,
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
                    "mean_statement_consens": _mean([d.consens for d in decisions]),
                    "mean_grounded_probability": _mean(
                        [_judge_probability(d, judge) for d in decisions]
                        if isinstance(judge, LabelJudge)
                        else []
                    ),
                    "statements": [_statement_record(d) for d in decisions],
                }
            if prior is not None:
                rec["adherence_prior"] = prior
            out.append(_with_keys(rec))
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
    vera = Vera(judge_model, **options)
    items = [_WikiEvalQuestion(it) for it in load_wikieval(data)[: limit or None]]
    filename = "vera_wikieval_adherence.jsonl" if adherence_only else "vera_wikieval.jsonl"
    step = _WikiEvalStep(vera, kinds)
    records = run_sync(_run_steps(items, step, out, filename, batch_size, resume))

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
            figures[f"mean_{key}_{kind}"] = _mean([r[kind][key] for r in records if kind in r])
    return figures


def _share(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def _judge_probability(decision: Decision, judge: LabelJudge) -> float | None:
    """The judge's P(stated) + P(inferable) under its own label-scoring rule and calibration: what the
    ``judge`` signal decides on at 0.5 (``grounded_probability`` holds the combined signal here)."""
    if not decision.token_logprobs:
        return None
    prior = judge._priors.get(RESPONSE_ADHERENCE.name) if judge.calibrate else None
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
