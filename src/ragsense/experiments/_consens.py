"""The ConSens paper's three experiments and a hallucination set, on the shared real datasets.

Each function returns a dict of measured figures (JSON-ready; the papers' figures are quoted in
docs/results.md, never here); the CLI prints it as the last output line. Every aggregation of the
word scores is reported on every experiment (:mod:`ragsense.experiments._figures` lists the
figures), as is the paper's baseline, the cosine similarity of MiniLM embeddings of answer and
context, in both of its modes: ``whole`` (MiniLM reads the first 256 tokens of the context) and
``max_chunk`` (the best window of the context).
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragsense.consens import (
    ATTRIBUTION_AGGREGATION,
    Aggregation,
    ConSens,
    GroundingResult,
    GroundingScorer,
    verdict,
)
from ragsense.data import PubMedQAItem, load_halueval, load_pubmedqa, load_wikieval
from ragsense.embeddings import Embedder, load_embedder
from ragsense.evaluation import evaluate
from ragsense.experiments._figures import contrast, delong_against, length_baseline, verdict_figures
from ragsense.models import LanguageModel
from ragsense.rag import InMemoryVectorIndex
from ragsense.similarity import MODES, answer_context_similarity
from ragsense.stats import roc_auc
from ragsense.text import content_words, split_words, unsupported_share

Row = tuple[str, Sequence[str], str]
_BATCH = 16


def _score_all(
    scorer: GroundingScorer, rows: list[Row], *, attribution: bool, desc: str
) -> list[GroundingResult]:
    """ConSens of every row through ``evaluate`` (the one batch loop), with the scorer's model, template
    and aggregation; experiment data is fixed and checked, so a failing row is a bug."""
    records = [
        {"id": str(i), "question": q, "contexts": list(c), "answer": a} for i, (q, c, a) in enumerate(rows)
    ]
    metric = ConSens(
        scorer.model,
        attribution=attribution,
        aggregation=scorer.aggregation,
        template=scorer.template,
        context_budget=scorer.context_budget,
        learned=scorer.learned,
    )
    run = evaluate(records, [metric], chunk_size=_BATCH, progress=True, desc=desc)
    out: list[GroundingResult] = []
    for record in run.rows:
        if record["errors"]:
            first = record["errors"][0]
            raise RuntimeError(f"row {record['id']}: {first['metric']} {first['field']}: {first['message']}")
        out.append(GroundingResult.from_dict(record))
    return out


PAIR_LABELS = {
    "consens-wikieval": ("grounded", "ungrounded"),
    "consens-halueval": ("right", "hallucinated"),
    "consens-pubmedqa-partial": ("full", "partial"),
    "consens-pubmedqa-partial-sentences": ("full", "partial"),
}
"""Per experiment, the keys of a per-item record's two results: (should score higher, lower)."""

Pair = tuple[list[float], list[float]]
"""Scores of the texts that should score higher and of those that should score lower, pair by pair."""


def _pair_scores(pairs: Sequence[tuple[GroundingResult, GroundingResult]], agg: Aggregation) -> Pair:
    return (
        [p.consens_by_aggregation[agg.value] for p, _ in pairs],
        [n.consens_by_aggregation[agg.value] for _, n in pairs],
    )


def _similarities(rows: Sequence[Row], embedder: Embedder) -> dict[str, Pair]:
    """The similarity baseline in both modes for rows laid out as (higher, lower) pairs."""
    answers = [r[2] for r in rows]
    contexts = ["\n\n".join(r[1]) for r in rows]
    out: dict[str, Pair] = {}
    for mode in MODES:
        sims = answer_context_similarity(answers, contexts, embedder, mode=mode)  # type: ignore[arg-type]
        out[mode] = (sims[0::2], sims[1::2])
    return out


def _figures(scores: Mapping[str, Pair], default: str, similarity: Mapping[str, Pair]) -> dict[str, Any]:
    """Every aggregation's contrast, the baselines' contrasts, and DeLong against the default."""
    others = {k: v for k, v in scores.items() if k != default}
    others.update({f"similarity_{mode}": v for mode, v in similarity.items()})
    return {
        "by_aggregation": {k: contrast(*v) for k, v in scores.items()},
        "baseline_similarity": {mode: contrast(*v) for mode, v in similarity.items()},
        "delong_default_vs": delong_against(scores[default], others),
    }


def lexical_baseline(rows: Sequence[Row], results: Sequence[GroundingResult]) -> dict[str, Any]:
    """The trivial lexical-support baseline on (higher, lower) pairs: minus the share of each text's
    scored words that its context does not state (the same words the score reads)."""
    values = [
        -unsupported_share([w.word for w in r.words], row[1]) for row, r in zip(rows, results, strict=True)
    ]
    return contrast(values[0::2], values[1::2])


def _write(out: str | None, name: str, records: list[dict[str, Any]]) -> None:
    if not out:
        return
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    with (path / f"{name}.jsonl").open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, allow_nan=False) + "\n")


def _header(model: LanguageModel, scorer: GroundingScorer, started: float) -> dict[str, Any]:
    return {
        "model": model.info.name,
        "default_aggregation": scorer.aggregation.value,
        "seconds": round(time.perf_counter() - started, 1),
    }


def _answer_pairs(
    name: str,
    model: LanguageModel,
    ids: Sequence[str],
    rows: list[Row],
    out: str | None,
    labels: tuple[str, str],
    started: float,
) -> tuple[dict[str, Any], dict[str, Pair]]:
    """Score answer pairs laid out as (grounded, ungrounded) rows against the same context; the
    figures and each aggregation's pair scores."""
    # The paper's method reads the whole context (the relevance window is its own experiment).
    scorer = GroundingScorer(model, context_budget="window", binding=None, learned=True)
    res = _score_all(scorer, rows, attribution=False, desc=name)
    pairs = list(zip(res[0::2], res[1::2], strict=True))
    scores = {agg.value: _pair_scores(pairs, agg) for agg in Aggregation}
    similarity = _similarities(rows, load_embedder("minilm", cache=True))
    default = scorer.aggregation.value
    _write(
        out,
        name,
        [
            {
                "id": item_id,
                labels[0]: g.to_dict(),
                labels[1]: u.to_dict(),
                **{f"similarity_{m}_{labels[0]}": similarity[m][0][i] for m in MODES},
                **{f"similarity_{m}_{labels[1]}": similarity[m][1][i] for m in MODES},
            }
            for i, (item_id, (g, u)) in enumerate(zip(ids, pairs, strict=True))
        ],
    )
    figures = {
        "experiment": name,
        "n": len(pairs),
        "auroc": round(roc_auc(*scores[default]), 4),
        **_figures(scores, default, similarity),
        "verdicts": verdict_figures(*scores[default], lambda x: verdict(x, default)),
        "baseline_answer_length": length_baseline([r[2] for r in rows[0::2]], [r[2] for r in rows[1::2]]),
        "baseline_lexical_support": lexical_baseline(rows, res),
        **_header(model, scorer, started),
    }
    return figures, scores


def consens_wikieval(
    *,
    model: LanguageModel,
    data: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    out: str | None = None,
) -> dict[str, Any]:
    """Experiment 1: grounded vs ungrounded WikiEval answers, each scored against ``context_v1``."""
    started = time.perf_counter()
    items = load_wikieval(data)[:limit]
    rows: list[Row] = []
    for it in items:
        rows.append((it.question, it.context_v1, it.grounded_answer))
        rows.append((it.question, it.context_v1, it.ungrounded_answer))
    figures, _ = _answer_pairs(
        "consens-wikieval",
        model,
        [it.id for it in items],
        rows,
        out,
        PAIR_LABELS["consens-wikieval"],
        started,
    )
    return figures


def consens_halueval(
    *,
    model: LanguageModel,
    data: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    out: str | None = None,
) -> dict[str, Any]:
    """HaluEval QA: the right and the hallucinated answer to each question, against its knowledge.

    HaluEval's right answers are short (2.2 words on average in the dev slice) and its hallucinated
    ones are sentences (9.6 words), so a score could separate them by length alone: the
    answer-length baseline is reported, and ``length_matched`` repeats the contrast on the pairs
    whose two answers differ by at most two words.
    """
    started = time.perf_counter()
    items = load_halueval(data)[:limit]
    rows: list[Row] = []
    for it in items:
        rows.append((it.question, [it.knowledge], it.right_answer))
        rows.append((it.question, [it.knowledge], it.hallucinated_answer))
    figures, scores = _answer_pairs(
        "consens-halueval",
        model,
        [it.id for it in items],
        rows,
        out,
        PAIR_LABELS["consens-halueval"],
        started,
    )
    matched = [
        i
        for i, it in enumerate(items)
        if abs(len(it.right_answer.split()) - len(it.hallucinated_answer.split())) <= 2
    ]
    if len(matched) >= 4:
        figures["length_matched"] = {
            "n": len(matched),
            "by_aggregation": {
                agg: contrast([pos[i] for i in matched], [neg[i] for i in matched])
                for agg, (pos, neg) in scores.items()
            },
            "baseline_answer_length": length_baseline(
                [items[i].right_answer for i in matched], [items[i].hallucinated_answer for i in matched]
            ),
        }
    return figures


def _is_results(label: str) -> bool:
    upper = label.upper()
    return "RESULT" in upper or "FINDING" in upper


def partial_context(item: PubMedQAItem) -> list[str] | None:
    """The abstract without its results section(s), or None when it has none to drop.

    The answer (the abstract's own conclusion, PubMedQA's ``long_answer``) is written from the study's
    results, so those are the sentences it depends on. The section is chosen by its label alone,
    never by a model or by overlap with the answer, so the construction does not favour any metric.
    """
    kept = [c for c, label in zip(item.contexts, item.labels, strict=True) if not _is_results(label)]
    if len(kept) == len(item.contexts) or not kept:
        return None
    return kept


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(])")


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text.strip()) if s]


def partial_context_sentences(item: PubMedQAItem) -> list[str] | None:
    """The abstract without the two consecutive sentences the answer draws on most (the paper's granularity).

    "Draws on most" is measured lexically and without any model: the pair of consecutive sentences
    (within a section) that contains the most distinct content words of the answer. Choosing by
    overlap with the answer makes the contrast easier for every metric that looks at wording,
    the similarity baseline included, so both are reported on the same rows.
    """
    wanted = {w.text.lower() for w in content_words(item.long_answer, item.question).kept}
    best: tuple[int, int, int] | None = None  # (overlap, section, first sentence)
    sections = [_sentences(c) for c in item.contexts]
    for si, sents in enumerate(sections):
        for k in range(len(sents) - 1):
            words = {w.text.lower() for w in split_words(sents[k] + " " + sents[k + 1])}
            overlap = len(wanted & words)
            if best is None or overlap > best[0]:
                best = (overlap, si, k)
    if best is None or best[0] == 0:
        return None
    _, si, k = best
    kept = [" ".join(s[:k] + s[k + 2 :]) if i == si else " ".join(s) for i, s in enumerate(sections)]
    kept = [c for c in kept if c.strip()]
    return kept or None


def consens_pubmedqa_partial(
    *,
    model: LanguageModel,
    data: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    out: str | None = None,
    drop: str = "results",
) -> dict[str, Any]:
    """Experiment 2: the same answer scored with the full abstract vs a partial abstract.

    ``drop="results"`` removes the results section(s) (:func:`partial_context`);
    ``drop="sentences"`` removes two consecutive sentences (:func:`partial_context_sentences`).
    """
    started = time.perf_counter()
    name = "consens-pubmedqa-partial" + ("" if drop == "results" else "-sentences")
    make_partial = partial_context if drop == "results" else partial_context_sentences
    items = load_pubmedqa(data)[:limit]
    usable = [(it, p) for it in items if (p := make_partial(it)) is not None]
    # The paper's method reads the whole context (the relevance window is its own experiment).
    scorer = GroundingScorer(model, context_budget="window", binding=None, learned=True)
    rows: list[Row] = []
    for it, partial in usable:
        rows.append((it.question, it.contexts, it.long_answer))
        rows.append((it.question, partial, it.long_answer))
    res = _score_all(scorer, rows, attribution=False, desc=name)
    pairs = list(zip(res[0::2], res[1::2], strict=True))
    scores = {agg.value: _pair_scores(pairs, agg) for agg in Aggregation}
    similarity = _similarities(rows, load_embedder("minilm", cache=True))
    _write(
        out,
        name,
        [
            {
                "pmid": it.pmid,
                "full": f.to_dict(),
                "partial": p.to_dict(),
                **{f"similarity_{m}_full": similarity[m][0][i] for m in MODES},
                **{f"similarity_{m}_partial": similarity[m][1][i] for m in MODES},
            }
            for i, ((it, _), (f, p)) in enumerate(zip(usable, pairs, strict=True))
        ],
    )
    context_words = [float(len(" ".join(r[1]).split())) for r in rows]
    return {
        "experiment": name,
        "n": len(usable),
        "n_skipped": len(items) - len(usable),
        "auroc": round(roc_auc(*scores[scorer.aggregation.value]), 4),
        **_figures(scores, scorer.aggregation.value, similarity),
        # Trivial baseline: the full abstract is always the longer context.
        "baseline_context_length_auroc": round(roc_auc(context_words[0::2], context_words[1::2]), 4),
        "baseline_lexical_support": lexical_baseline(rows, res),
        "truncated_rows": sum(r.truncated for r in res),
        **_header(model, scorer, started),
    }


def consens_pubmedqa_partial_sentences(**kwargs: Any) -> dict[str, Any]:
    """Experiment 2 with the paper's granularity: two consecutive sentences dropped."""
    return consens_pubmedqa_partial(**kwargs, drop="sentences")


def consens_pubmedqa_attribution(
    *,
    model: LanguageModel,
    data: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    out: str | None = None,
) -> dict[str, Any]:
    """Experiment 3: retrieve 3 abstracts (MiniLM, exact cosine over all 1,000), leave each one out.

    Only retrieval hits (the question's own abstract among the three) are scored, as in the paper.
    ``top1_accuracy`` is how often leaving out the right abstract gives the lowest ConSens (paper:
    89.43%). The AUROC contrasts the lowest ConSens of the two contexts that still hold the right
    abstract with the ConSens of the context without it.
    """
    started = time.perf_counter()
    corpus = load_pubmedqa(data)
    queries = corpus[:limit]
    embedder = load_embedder("minilm", cache=True)
    index = InMemoryVectorIndex(embedder, [" ".join(it.contexts) for it in corpus])
    hits = index.search([it.question for it in queries], k=3)
    rng = random.Random(seed)
    plans: list[tuple[PubMedQAItem, list[int], int]] = []
    for qi, (item, found) in enumerate(zip(queries, hits, strict=True)):
        ids = [h.index for h in found]
        rng.shuffle(ids)  # the paper concatenates the retrieved documents in random order
        if qi in ids:
            plans.append((item, ids, ids.index(qi)))
    # The paper's method reads the whole context (the relevance window is its own experiment).
    scorer = GroundingScorer(model, context_budget="window", binding=None, learned=True)
    rows: list[Row] = [
        (it.question, [index.documents[i] for i in ids], it.long_answer) for it, ids, _ in plans
    ]
    res = _score_all(scorer, rows, attribution=True, desc="pubmedqa-attribution")
    correct = [pos for _, _, pos in plans]
    figures: dict[str, Any] = {}
    contrasts: dict[str, Pair] = {}
    for agg in Aggregation:
        rescored = [_loo_scores(r, agg) for r in res]
        contrasts[agg.value] = right_vs_rest(rescored, correct)
        top1 = sum(_argmin(s) == c for s, c in zip(rescored, correct, strict=True))
        figures[agg.value] = {"top1_accuracy": round(top1 / len(plans), 4), **contrast(*contrasts[agg.value])}
    # Baseline: similarity of the answer to each leave-one-out context, in both modes.
    loo_texts = [["\n\n".join(d for j, d in enumerate(r[1]) if j != k) for k in range(3)] for r in rows]
    baseline: dict[str, Any] = {}
    baseline_contrasts: dict[str, Pair] = {}
    for mode in MODES:
        sims = answer_context_similarity(
            [r[2] for r in rows for _ in range(3)],
            [t for ts in loo_texts for t in ts],
            embedder,
            mode=mode,  # type: ignore[arg-type]
        )
        sim3 = [sims[3 * i : 3 * i + 3] for i in range(len(rows))]
        baseline_contrasts[f"similarity_{mode}"] = right_vs_rest(sim3, correct)
        top1 = sum(_argmin(s) == c for s, c in zip(sim3, correct, strict=True))
        baseline[mode] = {
            "top1_accuracy": round(top1 / len(plans), 4),
            **contrast(*baseline_contrasts[f"similarity_{mode}"]),
        }
    _write(
        out,
        "consens-pubmedqa-attribution",
        [
            {
                "pmid": it.pmid,
                "retrieved": [corpus[i].pmid for i in ids],
                "correct_position": c,
                "result": r.to_dict(),
            }
            for (it, ids, c), r in zip(plans, res, strict=True)
        ],
    )
    default = ATTRIBUTION_AGGREGATION.value  # attribution ranks documents by this, whatever the row's score
    others = {k: v for k, v in contrasts.items() if k != default} | baseline_contrasts
    return {
        "experiment": "consens-pubmedqa-attribution",
        "n_queries": len(queries),
        "n": len(plans),
        "retrieval_hit_rate": round(len(plans) / len(queries), 4),
        "top1_accuracy": figures[default]["top1_accuracy"],
        "auroc": figures[default]["auroc"],
        "by_aggregation": figures,
        "baseline_similarity": baseline,
        "delong_default_vs": delong_against(contrasts[default], others),
        "truncated_rows": sum(r.truncated for r in res),
        **_header(model, scorer, started),
        "attribution_aggregation": default,
    }


def right_vs_rest(scores: Sequence[Sequence[float]], correct: Sequence[int]) -> Pair:
    """Per row: the lowest score of the contexts that keep the right document, and the score of
    the context without it."""
    with_right = [min(s[k] for k in range(len(s)) if k != c) for s, c in zip(scores, correct, strict=True)]
    without_right = [s[c] for s, c in zip(scores, correct, strict=True)]
    return with_right, without_right


def _argmin(values: Sequence[float]) -> int:
    """Index of the smallest value (the lowest index on ties)."""
    best = 0
    for i in range(1, len(values)):
        if (values[i], i) < (values[best], best):
            best = i
    return best


def _loo_scores(result: GroundingResult, agg: Aggregation) -> list[float]:
    """ConSens with each document left out, under aggregation ``agg``."""
    assert result.attribution is not None
    return [a.consens_without_by_aggregation[agg.value] for a in result.attribution]
