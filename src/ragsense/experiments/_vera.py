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

import random
import re
import string
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragsense._async import run_sync
from ragsense.data import RagRow, SquadItem, load_squad_v2
from ragsense.evaluation import Needs
from ragsense.experiments._vera_runner import KEYS, KeepKeys, mean, run_steps, with_keys
from ragsense.models import DEFAULT_MODEL, LanguageModel, load_model
from ragsense.rag import RagPrompt, answer_function
from ragsense.stats import bootstrap_ci
from ragsense.vera import (
    AnswerFn,
    RetrievalCheck,
    VeraEnhancement,
    VeraEvaluation,
    VeraEvaluator,
    VeraSettings,
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


def is_squad_refusal(answer: str) -> bool:
    """An empty answer or one that says the question is unanswerable.

    >>> is_squad_refusal("Unanswerable."), is_squad_refusal("Paris")
    (True, False)
    """
    norm = normalize_answer(answer)
    return not norm or REFUSAL_WORD in norm or "not contain" in norm or "cannot be answered" in norm


def is_correct(item: SquadItem, answer: str, refused: bool) -> bool:
    """Refusal for an unanswerable question; a reference answer inside the answer otherwise."""
    refused = refused or is_squad_refusal(answer)
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
class _SquadStep(KeepKeys):
    """Answer, evaluate, enhance, re-evaluate and check the retrieval need for a chunk of questions."""

    vera: VeraEvaluator
    answer: AnswerFn
    name: str = "vera_squad"
    needs: Needs = field(default_factory=lambda: Needs(fields=()))
    fields: tuple[str, ...] = (*_SQUAD_FIELDS, KEYS)
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
                "refused_without": is_squad_refusal(raw),
            }
            if isinstance(b, VeraEvaluation):
                rec.update({f"{k}_without": getattr(b, k) for k in _SCORES})
            else:
                rec["error_without"] = str(b)
            if isinstance(e, VeraEnhancement):
                rec.update(
                    vera_answer=e.answer,
                    refused_with=e.refused or is_squad_refusal(e.answer),
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
            out.append(with_keys(rec))
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
    vera = VeraEvaluator(judge_model, VeraSettings(**{**(vera_options or {}), "check_retrieval": False}))
    items = [_SquadQuestion(it) for it in squad_items(data, limit or DEFAULT_LIMIT, seed)]
    step = _SquadStep(vera, answer)
    records = run_sync(run_steps(items, step, out, "vera_squad.jsonl", batch_size, resume))
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
        figures[f"{key}_without"] = mean([r.get(f"{key}_without") for r in records])
        figures[f"{key}_with"] = mean([r.get(f"{key}_with") for r in records])
    if ok:
        low, high = bootstrap_ci(
            lambda a, b: float(b.mean() - a.mean()), without, with_vera, seed=0, paired=True
        )
        figures["accuracy_gain_ci95"] = [round(low, 4), round(high, 4)]
    return figures
