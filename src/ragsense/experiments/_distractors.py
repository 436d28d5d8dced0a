"""``consens-distractors``: ConSens when the context holds many documents, most of them irrelevant.

Real retrieval hands a generator 5 to 50 documents. Each WikiEval and HaluEval-dev pair (a grounded
and an ungrounded answer to one question) is scored against its own document with k = 0, 5, 10, 20,
40 documents of other items of the same set shuffled in (seeded; the k-document sets are nested),
under three context policies:

* ``budget``: the relevance window, the documents (or sentences) most relevant to the answer within
  the context budget (``ConSens(context_budget=B)``);
* ``tail``: the same budget, filled from the start of the context and cut at its end;
* ``full``: no budget, today's pass: the whole context, its end cut at the model window.

The items of each set are split in two seeded halves: the development half chooses the budget (the
smallest of ``budgets`` whose mean AUROC over the two sets at k = ``dev_k`` is within ``tolerance`` of
the best), the report half gives the figures. Each cell has the AUROC with its paired bootstrap
interval and rows/s; the trivial baselines (answer length, lexical support of the answer's words in
the whole k-document context) are reported beside it.
"""

from __future__ import annotations

import gzip
import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragsense.consens import ConSens, GroundingResult
from ragsense.data import load_halueval, load_wikieval
from ragsense.errors import ParameterError
from ragsense.evaluation import evaluate
from ragsense.experiments._figures import contrast, length_baseline
from ragsense.models import LanguageModel
from ragsense.stats import roc_auc
from ragsense.text import unsupported_share

KS = (0, 5, 10, 20, 40)
BUDGETS = (128, 256)
CONDITIONS = ("budget", "tail", "full")


class Pair:
    """One question with its grounded (``pos``) and ungrounded (``neg``) answer and its documents."""

    def __init__(self, item_id: str, question: str, documents: list[str], pos: str, neg: str) -> None:
        self.id, self.question, self.documents, self.pos, self.neg = item_id, question, documents, pos, neg


def load_pairs(name: str) -> list[Pair]:
    """The pairs of ``wikieval`` or ``halueval`` (the shared data sets)."""
    if name == "wikieval":
        return [
            Pair(it.id, it.question, list(it.context_v1), it.grounded_answer, it.ungrounded_answer)
            for it in load_wikieval(None)
        ]
    return [
        Pair(it.id, it.question, [it.knowledge], it.right_answer, it.hallucinated_answer)
        for it in load_halueval(None)
    ]


def split_parts(pairs: Sequence[Pair], seed: int) -> dict[str, list[Pair]]:
    """Two seeded halves: ``dev`` (choose the budget) and ``report`` (the figures).

    >>> ps = [Pair(str(i), "q", ["d"], "a", "b") for i in range(6)]
    >>> parts = split_parts(ps, 0)
    >>> sorted(p.id for p in parts["dev"] + parts["report"]) == [str(i) for i in range(6)]
    True
    """
    order = list(range(len(pairs)))
    random.Random(f"distractors-split:{seed}").shuffle(order)
    half = len(order) // 2
    return {
        "dev": [pairs[i] for i in sorted(order[:half])],
        "report": [pairs[i] for i in sorted(order[half:])],
    }


def with_distractors(pair: Pair, pool: Sequence[Pair], k: int, seed: int) -> tuple[list[str], list[int]]:
    """The pair's documents with ``k`` documents of other pairs, shuffled in (seeded by item; the
    first ``k`` of one fixed draw, so k = 5 is part of k = 20); and where the pair's own documents are.

    >>> ps = [Pair(str(i), "q", [f"doc {i}"], "a", "b") for i in range(5)]
    >>> docs, own = with_distractors(ps[0], ps, 3, 0)
    >>> len(docs), docs[own[0]]
    (4, 'doc 0')
    """
    rng = random.Random(f"distractors:{seed}:{pair.id}")
    others = [d for p in pool if p.id != pair.id for d in p.documents]
    drawn = rng.sample(others, min(k, len(others)))
    docs = [(d, True) for d in pair.documents] + [(d, False) for d in drawn]
    rng.shuffle(docs)
    return [d for d, _ in docs], [i for i, (_, own) in enumerate(docs) if own]


def _metric(model: LanguageModel, condition: str, budget: int) -> ConSens:
    if condition == "budget":
        return ConSens(model, context_budget=budget)
    if condition == "tail":
        return ConSens(model, context_budget=budget, context_policy="tail")
    return ConSens(model, context_policy="tail")  # today's pass: the model window, cut at the end


def score_cell(
    model: LanguageModel,
    pairs: Sequence[Pair],
    pool: Sequence[Pair],
    k: int,
    condition: str,
    budget: int,
    seed: int,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """AUROC (paired bootstrap interval), rows/s and per-item records of one (k, condition) cell."""
    records: list[dict[str, Any]] = []
    owns: list[list[int]] = []
    for p in pairs:
        docs, own = with_distractors(p, pool, k, seed)
        owns.append(own)
        for label, answer in (("pos", p.pos), ("neg", p.neg)):
            records.append(
                {"id": f"{p.id}:{label}", "question": p.question, "contexts": docs, "answer": answer}
            )
    started = time.perf_counter()
    run = evaluate(records, [_metric(model, condition, budget)], chunk_size=16, progress=False)
    seconds = time.perf_counter() - started
    results = []
    for row in run.rows:
        if row["errors"]:
            first = row["errors"][0]
            raise RuntimeError(f"row {row['id']}: {first['metric']} {first['field']}: {first['message']}")
        results.append(GroundingResult.from_dict(row))
    pos, neg = [r.consens for r in results[0::2]], [r.consens for r in results[1::2]]
    figures = contrast(pos, neg)
    cell = {
        "auroc": figures["auroc"],
        "auroc_ci95": figures["auroc_ci95"],
        "rows_per_s": round(len(records) / seconds, 3),
        "seconds": round(seconds, 1),
        "truncated_rows": sum(r.truncated for r in results),
        "own_document_kept": round(
            sum(any(o in r.kept_documents for o in own) for r, own in zip(results, _twice(owns), strict=True))
            / len(results),
            4,
        ),
    }
    per_item = [
        {
            "id": rec["id"],
            "k": k,
            "condition": condition,
            "budget": None if condition == "full" else budget,
            "own_documents": own,
            "consens": r.consens,
            "verdict": r.verdict,
            "kept_documents": r.kept_documents,
            "context_selection": r.context_selection,
            "context_tokens_dropped": r.context_tokens_dropped,
            "lexical_support": -unsupported_share([w.word for w in r.words], rec["contexts"]),
        }
        for rec, r, own in zip(records, results, _twice(owns), strict=True)
    ]
    return cell, per_item


def _twice(values: Sequence[Any]) -> list[Any]:
    return [v for v in values for _ in range(2)]


def _write(out: str | None, name: str, records: list[dict[str, Any]]) -> None:
    if not out:
        return
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same records give the same bytes.
    with gzip.GzipFile(path / f"{name}.jsonl.gz", "wb", mtime=0) as fh:
        for rec in records:
            fh.write((json.dumps(rec, allow_nan=False, sort_keys=True) + "\n").encode("utf-8"))


def _choose_budget(dev: dict[str, dict[int, float]], tolerance: float) -> int:
    """The smallest budget whose mean AUROC over the sets is within ``tolerance`` of the best.

    >>> _choose_budget({"a": {256: 0.80, 512: 0.86, 1024: 0.87}, "b": {256: 0.9, 512: 0.9, 1024: 0.9}}, 0.01)
    512
    """
    budgets = sorted(next(iter(dev.values())))
    mean = {b: sum(s[b] for s in dev.values()) / len(dev) for b in budgets}
    best = max(mean.values())
    return min(b for b in budgets if mean[b] >= best - tolerance)


def consens_distractors(
    *,
    model: LanguageModel,
    data: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    out: str | None = None,
    ks: Sequence[int] = KS,
    budgets: Sequence[int] = BUDGETS,
    budget: int | None = None,
    dev_k: int = 20,
    full_ks: Sequence[int] | None = None,
    sets: Sequence[str] = ("wikieval", "halueval"),
    tolerance: float = 0.01,
) -> dict[str, Any]:
    """Run the distractor benchmark (module docstring). ``limit``: pairs per set and part (default
    25); ``budget``: skip the development half and use this budget; ``full_ks``: the k at which the
    (slow) full-context pass runs (default: every k)."""
    if data is not None:
        raise ParameterError("reads WikiEval and HaluEval-dev from the shared data folder", parameter="data")
    n = 25 if limit is None else limit
    started = time.perf_counter()
    parts = {name: split_parts(load_pairs(name), seed) for name in sets}
    figures: dict[str, Any] = {
        "experiment": "consens-distractors",
        "model": model.info.name,
        "pairs_per_part": n,
    }
    if budget is None:
        dev: dict[str, dict[int, float]] = {}
        for name in sets:
            pool = parts[name]["dev"]
            dev[name] = {}
            for b in budgets:
                cell, dev_items = score_cell(model, pool[:n], pool, dev_k, "budget", b, seed)
                dev[name][b] = cell["auroc"]
                figures.setdefault("dev", {}).setdefault(name, {})[str(b)] = cell
                _write(out, f"dev-{name}-k{dev_k}-b{b}", dev_items)
        budget = _choose_budget(dev, tolerance)
        figures["budget_rule"] = (
            f"smallest budget with mean dev AUROC at k={dev_k} within {tolerance} of the best"
        )
    figures["budget"] = budget
    for name in sets:
        pool = parts[name]["report"]
        pairs = pool[:n]
        table: dict[str, Any] = {
            "baseline_answer_length": length_baseline([p.pos for p in pairs], [p.neg for p in pairs])["auroc"]
        }
        for k in ks:
            row: dict[str, Any] = {}
            items: list[dict[str, Any]] = []
            for condition in CONDITIONS:
                if condition == "full" and full_ks is not None and k not in full_ks:
                    continue
                cell, cell_items = score_cell(model, pairs, pool, k, condition, budget, seed)
                row[condition] = cell
                items += cell_items
            lexical = [r["lexical_support"] for r in items[: 2 * len(pairs)]]
            row["baseline_lexical_support"] = round(roc_auc(lexical[0::2], lexical[1::2]), 4)
            table[f"k={k}"] = row
            _write(out, f"report-{name}-k{k}", items)
        figures[name] = table
    figures["seconds"] = round(time.perf_counter() - started, 1)
    return figures
