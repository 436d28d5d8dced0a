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
from pathlib import Path
from typing import Any

from ragsense._async import run_sync
from ragsense.data import RagRow, SquadItem, load_squad_v2, write_jsonl
from ragsense.errors import ParameterError
from ragsense.models import DEFAULT_MODEL, LanguageModel, load_model
from ragsense.rag import RagPrompt, answer_function
from ragsense.stats import bootstrap_ci
from ragsense.vera import RetrievalCheck, Vera, VeraEnhancement, VeraEvaluation

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


def vera_squad(
    model: LanguageModel | None = None,
    data: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    out: str | None = None,
    generator: str | LanguageModel | None = None,
    vera_options: dict[str, Any] | None = None,
    batch_size: int = 8,
) -> dict[str, Any]:
    """Run the experiment; ``model`` is the judge, ``generator`` answers (default: the bundled model)."""
    started = time.perf_counter()
    judge_model = model if model is not None else load_model(DEFAULT_MODEL)
    gen_model = generator if generator is not None else DEFAULT_MODEL
    gen = load_model(gen_model) if isinstance(gen_model, str) else gen_model
    answer = answer_function(gen, prompt=RagPrompt(instruction=SQUAD_INSTRUCTION))

    # SQuAD gives each question its paragraph: as in the paper there is no retrieval to skip, so the
    # chain runs without step 1; the check is still asked and reported (retrieval_required).
    vera = Vera(judge_model, **{**(vera_options or {}), "check_retrieval": False})
    items = squad_items(data, limit or DEFAULT_LIMIT, seed)
    records: list[dict[str, Any]] = []
    for start in range(0, len(items), batch_size):
        batch = items[start : start + batch_size]
        raw_answers = run_sync(answer([it.question for it in batch], [[it.context] for it in batch]))
        rows = [
            RagRow(id=it.id, question=it.question, contexts=[it.context], answer=a or REFUSAL_WORD)
            for it, a in zip(batch, raw_answers, strict=True)
        ]
        before = vera.evaluate_sync(rows)
        enhanced = vera.enhance_sync(rows, answer)
        # Re-evaluate what VERA produced (non-refused rows), as the paper re-scores its outputs.
        again_rows = [
            RagRow(
                id=r.id, question=r.question, contexts=[c for c in e.contexts if c.strip()], answer=e.answer
            )
            for r, e in zip(rows, enhanced, strict=True)
            if isinstance(e, VeraEnhancement) and not e.refused
        ]
        after = iter(vera.evaluate_sync(again_rows))
        checks = run_sync(vera.check_retrieval_need([it.question for it in batch]))
        for it, raw, b, e, check in zip(batch, raw_answers, before, enhanced, checks, strict=True):
            rec: dict[str, Any] = {
                "id": it.id,
                "question": it.question,
                "is_impossible": it.is_impossible,
                "references": list(it.answers),
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
                if not e.refused:
                    a = next(after)
                    if isinstance(a, VeraEvaluation):
                        rec.update({f"{k}_with": getattr(a, k) for k in _SCORES})
                    else:
                        rec["error_reevaluation"] = str(a)
            else:
                rec["error_with"] = str(e)
            records.append(rec)
    figures = _figures(records)
    figures.update(
        judge=vera.judge.description,
        generator=gen.info.name,
        n_items=len(records),
        seed=seed,
        seconds=round(time.perf_counter() - started, 1),
    )
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        write_jsonl(Path(out) / "vera_squad.jsonl", records)
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


def vera_wikieval(
    model: LanguageModel | None = None,
    data: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    out: str | None = None,
    vera_options: dict[str, Any] | None = None,
    batch_size: int = 8,
    **unused: Any,
) -> dict[str, Any]:
    """How well each VERA score ranks WikiEval's better text above its worse one (RAGAS's protocol).

    Per question, four rows are evaluated: (context_v1, grounded answer), (context_v2, grounded
    answer), (context_v1, ungrounded answer), (context_v1, poor answer). The figures are pairwise
    accuracies (a tie counts one half): context relevance of context_v1 (one passage) above context_v2
    (1-3 passages); response relevance of the grounded answer above the poor answer; response
    adherence of the grounded answer above the ungrounded one, with the judge, ConSens and combined
    signals (all three from one run: adherence is computed with ``combined``, which records both).
    """
    from ragsense.data import load_wikieval

    if unused.get("generator") is not None:
        raise ParameterError(
            "vera-wikieval scores WikiEval's own answers; it has no generator", parameter="--generator"
        )
    started = time.perf_counter()
    judge_model = model if model is not None else load_model(DEFAULT_MODEL)
    options = {**(vera_options or {}), "adherence_signal": "combined"}
    vera = Vera(judge_model, **options)
    items = load_wikieval(data)[: limit or None]
    kinds = ("v1", "v2", "ungrounded", "poor")
    records: list[dict[str, Any]] = []
    for start in range(0, len(items), batch_size):
        batch = items[start : start + batch_size]
        rows = []
        for it in batch:
            rows += [
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
        results = vera.evaluate_sync(rows)
        for i, it in enumerate(batch):
            rec: dict[str, Any] = {"id": it.id, "question": it.question}
            for kind, res in zip(kinds, results[4 * i : 4 * i + 4], strict=True):
                if not isinstance(res, VeraEvaluation):
                    rec[f"{kind}_error"] = str(res)
                    continue
                decisions = res.adherence.decisions
                rec[kind] = {
                    "context_relevance": res.context_relevance,
                    "response_relevance": res.response_relevance,
                    "adherence_judge": _share([d.label in ("stated", "inferable") for d in decisions]),
                    "adherence_consens": _share(
                        [d.consens is not None and d.consens > 0.0 for d in decisions]
                    ),
                    "adherence_combined": res.response_adherence,
                    "mean_statement_consens": _mean([d.consens for d in decisions]),
                }
            records.append(rec)

    def pairwise(better: str, worse: str, key: str) -> float | None:
        pairs = [(r[better][key], r[worse][key]) for r in records if better in r and worse in r]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        if not pairs:
            return None
        return round(sum(1.0 if a > b else 0.5 if a == b else 0.0 for a, b in pairs) / len(pairs), 4)

    figures: dict[str, Any] = {
        "context_relevance_v1_over_v2": pairwise("v1", "v2", "context_relevance"),
        "response_relevance_grounded_over_poor": pairwise("v1", "poor", "response_relevance"),
        "adherence_judge_grounded_over_ungrounded": pairwise("v1", "ungrounded", "adherence_judge"),
        "adherence_consens_grounded_over_ungrounded": pairwise("v1", "ungrounded", "adherence_consens"),
        "adherence_combined_grounded_over_ungrounded": pairwise("v1", "ungrounded", "adherence_combined"),
        "statement_consens_grounded_over_ungrounded": pairwise("v1", "ungrounded", "mean_statement_consens"),
        "n_items": len(records),
        "n_errors": sum(1 for r in records for k in kinds if f"{k}_error" in r),
        "judge": vera.judge.description,
        "seconds": round(time.perf_counter() - started, 1),
    }
    for kind in kinds:
        for key in ("context_relevance", "response_relevance", "adherence_judge", "adherence_consens"):
            figures[f"mean_{key}_{kind}"] = _mean([r[kind][key] for r in records if kind in r])
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        write_jsonl(Path(out) / "vera_wikieval.jsonl", records)
    return figures


def _share(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None
